// Field types of declared collections (RESOURCES.md §2): what each accepts, how it is checked
// (DRF's messages), stored and shown, and how OPTIONS and OpenAPI describe it. A field is a small
// value made by `field.<type>(options)`; the viewset never branches on a field's type except to
// load the relations (`reference`, `references`) it cannot read from the row alone.

import { FIELD_TYPES, type FieldState, type FieldType, type OnDelete } from '../db/schema-state.js';
import { recordPath } from '../http/paths.js';

export type { FieldType, OnDelete } from '../db/schema-state.js';

/** The result of checking one input value: the value to store, or every message that applies. */
export type FieldResult = { ok: true; value: unknown } | { ok: false; errors: string[] };

/** What checking a value may need beyond the value itself. */
export interface ParseContext {
  /** The body came from a form, where every value is a string. */
  readonly form: boolean;
  /** PUBLIC_URL: absolute references are accepted only under it. */
  readonly publicUrl: string;
  /** Every collection served, so a path of another one is an "Incorrect URL match". */
  readonly collections: ReadonlySet<string>;
}

/** Options every field type takes (RESOURCES.md §2). */
export interface CommonOptions<T> {
  /** Must be given on create and PUT (default true). */
  required?: boolean;
  /** The value used when none is given; makes the field optional. */
  default?: T | null;
  /** Accepts and stores null (default false). */
  nullable?: boolean;
  /** No two records share a value; the database decides (default false). */
  unique?: boolean;
  /** Shown, never written by a request. */
  readOnly?: boolean;
  /** Written, never shown. */
  writeOnly?: boolean;
  label?: string;
  helpText?: string;
}

const FIELD = Symbol.for('restwire.field');

/** A declared field. Made by `field.<type>()`; the viewset reads it, users only declare it. */
export interface Field {
  readonly [FIELD]: true;
  readonly type: FieldType;
  /** The options as declared (checked for unknown names when the declaration is loaded). */
  readonly options: Readonly<Record<string, unknown>>;
  /** The options this type takes besides the common ones. */
  readonly ownOptions: readonly string[];
  readonly required: boolean;
  readonly nullable: boolean;
  readonly unique: boolean;
  readonly readOnly: boolean;
  readonly writeOnly: boolean;
  readonly label: string | undefined;
  readonly helpText: string | undefined;
  /** Whether a default was declared; `defaultValue` is then the stored value it gives. */
  readonly hasDefault: boolean;
  readonly defaultValue: unknown;
  /** `reference` / `references`: the target collection and what deleting it does. */
  readonly to?: string;
  readonly onDelete?: OnDelete;
  /** `references`: the most items a list holds (declared, or MAX_REFERENCES). */
  readonly maxItems?: number;
  /** Checks an input value (never null/absent handling: see `parseField`); returns what is stored. */
  parse(value: unknown, context: ParseContext): FieldResult;
  /** The stored value as shown (JSON). References show paths. */
  show(stored: unknown): unknown;
  /** JSON Schema of the shown value (OpenAPI 3.1), constraints included. */
  schema(): Record<string, unknown>;
  /** DRF's OPTIONS metadata constraints for this type (besides type/required/read_only/label). */
  metadata(): Record<string, unknown>;
  /** What a migration must know (db/schema-state.ts). */
  state(): FieldState;
}

/** Whether a value is a field made by `field.<type>()` (across copies of the package). */
export function isField(value: unknown): value is Field {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[FIELD] === true;
}

// API.md §6: control characters are U+0000–U+001F, U+007F and U+0080–U+009F.
const CONTROL = /[\u0000-\u001F\u007F-\u009F]/u;
const CONTROL_BUT_LINES = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]/u;
const COMMON_OPTIONS = ['required', 'default', 'nullable', 'unique', 'readOnly', 'writeOnly', 'label', 'helpText'];

/** Counts Unicode code points, not UTF-16 units (API.md §6: an emoji is one character). */
export function codePointLength(text: string): number {
  let length = 0;
  for (const _ of text) length++;
  return length;
}

/** Python's type names, as DRF's "received int" messages use them. */
function pythonType(value: unknown): string {
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'float';
  if (typeof value === 'boolean') return 'bool';
  if (typeof value === 'string') return 'str';
  if (Array.isArray(value)) return 'list';
  if (value === null) return 'NoneType';
  return 'dict';
}

/** The parts each type supplies; `makeField` adds the common options around them. */
interface TypeSpec {
  type: FieldType;
  /** Option names this type takes besides the common ones. */
  own: readonly string[];
  parse(value: unknown, context: ParseContext): FieldResult;
  show?(stored: unknown): unknown;
  schema: Record<string, unknown>;
  metadataType: string;
  metadata?: Record<string, unknown>;
  state?: Partial<FieldState>;
  to?: string;
  onDelete?: OnDelete;
  maxItems?: number;
}

const ok = (value: unknown): FieldResult => ({ ok: true, value });
const fail = (...errors: string[]): FieldResult => ({ ok: false, errors });

const ANY_CONTEXT: ParseContext = { form: false, publicUrl: '', collections: new Set() };

function makeField(options: CommonOptions<unknown> & Record<string, unknown>, spec: TypeSpec): Field {
  const nullable = options.nullable === true;
  const hasDefault = options.default !== undefined;
  const required = options.required ?? !hasDefault;
  let defaultValue: unknown = null;
  if (hasDefault && options.default !== null) {
    const parsed = spec.parse(options.default, ANY_CONTEXT);
    // A bad default is a declaration error, reported with the field's name by `defineResource`.
    if (!parsed.ok) throw new TypeError(`its default ${JSON.stringify(options.default)} is not valid: ${parsed.errors.join(' ')}`);
    defaultValue = parsed.value;
  }
  const show = spec.show ?? ((stored: unknown) => stored);
  // A read-only field is null unless it has a default, or is declared `required` (always set by
  // restwire itself, as a user's `username`).
  const showsNull =
    spec.type !== 'references' && (nullable || (!hasDefault && (options.readOnly ? options.required !== true : !required)));
  const schema = {
    ...(options.label ? { title: options.label } : {}),
    ...(options.helpText ? { description: options.helpText } : {}),
    ...spec.schema,
    // Shown as null when nullable, or optional without a default (RESOURCES.md §7 "Strings").
    ...(showsNull && spec.schema.type !== undefined ? { type: [spec.schema.type, 'null'].flat() } : {}),
    ...(hasDefault && spec.type !== 'references' ? { default: options.default } : {}),
    ...(options.readOnly ? { readOnly: true } : {}),
    ...(options.writeOnly ? { writeOnly: true } : {}),
  };
  return {
    [FIELD]: true,
    type: spec.type,
    options,
    ownOptions: spec.own,
    required: options.readOnly ? false : required,
    nullable,
    unique: options.unique === true,
    readOnly: options.readOnly === true,
    writeOnly: options.writeOnly === true,
    label: options.label,
    helpText: options.helpText,
    hasDefault,
    defaultValue,
    ...(spec.to ? { to: spec.to, onDelete: spec.onDelete } : {}),
    ...(spec.maxItems !== undefined ? { maxItems: spec.maxItems } : {}),
    parse: spec.parse,
    show: (stored) => (stored === null || stored === undefined ? (spec.type === 'references' ? [] : null) : show(stored)),
    schema: () => schema,
    metadata: () => ({
      type: spec.metadataType,
      ...(options.helpText ? { help_text: options.helpText } : {}),
      ...(nullable ? { allow_null: true } : {}),
      ...spec.metadata,
    }),
    state: () => ({
      type: spec.type,
      // An optional field left out reads back as null (RESOURCES.md §7 "Strings").
      null: showsNull,
      unique: options.unique === true,
      ...(hasDefault && spec.type !== 'references' ? { default: defaultValue as string | number | null } : {}),
      ...spec.state,
    }),
  };
}

/** Checks one value of a request body for a field: null and absence first, then the type's own rules. */
export function parseField(field: Field, value: unknown, context: ParseContext): FieldResult {
  if (value === null || (context.form && value === '' && field.nullable && field.type !== 'string' && field.type !== 'text')) {
    return field.nullable ? ok(null) : fail('This field may not be null.');
  }
  return field.parse(value, context);
}

interface StringOptions extends CommonOptions<string> {
  maxLength: number;
  minLength?: number;
  /** A regular expression (source) the whole value must match. */
  pattern?: string;
  /** Accept the empty string (default false). */
  blank?: boolean;
}

interface TextOptions extends CommonOptions<string> {
  maxLength: number;
  minLength?: number;
}

function stringSpec(
  type: FieldType,
  { maxLength, minLength, pattern, blank = false, multiline = false }: { maxLength: number; minLength?: number; pattern?: string; blank?: boolean; multiline?: boolean },
  extra: (text: string) => string[] = () => [],
): Omit<TypeSpec, 'own' | 'metadataType'> {
  const control = multiline ? CONTROL_BUT_LINES : CONTROL;
  const regex = pattern === undefined ? null : new RegExp(`^(?:${pattern})$`, 'u');
  const least = minLength ?? (blank ? 0 : 1);
  return {
    type,
    parse(value) {
      if (typeof value !== 'string') return fail('Not a valid string.');
      const trimmed = value.trim();
      const length = codePointLength(trimmed);
      if (length === 0 && !blank) return fail('This field may not be blank.');
      const errors: string[] = [];
      if (length < least && length > 0) errors.push(`Ensure this field has at least ${least} characters.`);
      if (length > maxLength) errors.push(`Ensure this field has no more than ${maxLength} characters.`);
      if (control.test(trimmed)) {
        errors.push(multiline ? 'Control characters other than newline and tab are not allowed.' : 'Control characters are not allowed.');
      }
      if (errors.length === 0 && length > 0) {
        if (regex && !regex.test(trimmed)) errors.push('This value does not match the required pattern.');
        errors.push(...extra(trimmed));
      }
      return errors.length ? { ok: false, errors } : ok(trimmed);
    },
    schema: { type: 'string', minLength: least, maxLength, ...(pattern ? { pattern: `^(?:${pattern})$` } : {}) },
    metadata: { max_length: maxLength, ...(least > 0 ? { min_length: least } : {}) },
    state: { maxLength },
  };
}

function checkLength(name: string, value: unknown, required: boolean): void {
  if (value === undefined && !required) return;
  if (!Number.isSafeInteger(value) || (value as number) < 0) throw new TypeError(`option ${name} must be a whole number ≥ 0`);
}

/** A one-line string, trimmed; no control characters (DRF's CharField). */
function string(options: StringOptions): Field {
  checkLength('maxLength', options?.maxLength, true);
  checkLength('minLength', options.minLength, false);
  if (options.pattern !== undefined) new RegExp(options.pattern, 'u'); // a bad pattern fails at declaration
  return makeField(options as StringOptions & Record<string, unknown>, {
    ...stringSpec('string', options),
    own: ['maxLength', 'minLength', 'pattern', 'blank'],
    metadataType: 'string',
  });
}

/** Multi-line text, trimmed; newline, carriage return and tab allowed. */
function text(options: TextOptions): Field {
  checkLength('maxLength', options?.maxLength, true);
  checkLength('minLength', options.minLength, false);
  return makeField(options as TextOptions & Record<string, unknown>, {
    ...stringSpec('text', { ...options, multiline: true }),
    own: ['maxLength', 'minLength'],
    metadataType: 'string',
  });
}

// Django's EmailValidator, simplified: a local part, an @, a dotted domain; no spaces.
const EMAIL = /^[^\s@"(),:;<>[\\\]]+@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$/u;

/** An email address (DRF's EmailField). */
function email(options: CommonOptions<string> & { maxLength?: number } = {}): Field {
  const maxLength = options.maxLength ?? 254;
  checkLength('maxLength', maxLength, true);
  const spec = stringSpec('email', { maxLength }, (value) => (EMAIL.test(value) ? [] : ['Enter a valid email address.']));
  return makeField(options as Record<string, unknown>, {
    ...spec,
    own: ['maxLength'],
    schema: { ...spec.schema, format: 'email' },
    metadataType: 'email',
  });
}

/** An http or https URL (DRF's URLField). */
function url(options: CommonOptions<string> & { maxLength?: number } = {}): Field {
  const maxLength = options.maxLength ?? 200;
  checkLength('maxLength', maxLength, true);
  const valid = (value: string): string[] => {
    try {
      const parsed = new URL(value);
      return (parsed.protocol === 'http:' || parsed.protocol === 'https:') && parsed.hostname !== '' && !/\s/.test(value) ? [] : ['Enter a valid URL.'];
    } catch {
      return ['Enter a valid URL.'];
    }
  };
  const spec = stringSpec('url', { maxLength }, valid);
  return makeField(options as Record<string, unknown>, { ...spec, own: ['maxLength'], schema: { ...spec.schema, format: 'uri' }, metadataType: 'url' });
}

const SAFE = Number.MAX_SAFE_INTEGER;

/** A whole number (DRF's IntegerField); a form's digits are accepted. */
function integer(options: CommonOptions<number> & { min?: number; max?: number } = {}): Field {
  const min = options.min ?? -SAFE;
  const max = options.max ?? SAFE;
  for (const [name, value] of [['min', min], ['max', max]] as const) {
    if (!Number.isSafeInteger(value)) throw new TypeError(`option ${name} must be a whole number within ±(2^53−1)`);
  }
  return makeField(options as Record<string, unknown>, {
    type: 'integer',
    own: ['min', 'max'],
    parse(value) {
      let number: number;
      if (typeof value === 'number') number = value;
      else if (typeof value === 'string' && value.length <= 1000 && /^\s*-?\d+(\.0*)?\s*$/.test(value)) number = Number.parseInt(value, 10);
      else if (typeof value === 'string' && value.length > 1000) return fail('String value too large.');
      else return fail('A valid integer is required.');
      if (!Number.isInteger(number)) return fail('A valid integer is required.');
      if (number > max) return fail(`Ensure this value is less than or equal to ${max}.`);
      if (number < min) return fail(`Ensure this value is greater than or equal to ${min}.`);
      return ok(number === 0 ? 0 : number);
    },
    schema: { type: 'integer', minimum: min, maximum: max },
    metadataType: 'integer',
    metadata: { min_value: min, max_value: max },
  });
}

/**
 * An exact decimal (DRF's DecimalField), shown as a string with `decimalPlaces` digits. Stored as
 * an integer scaled by 10^decimalPlaces, so it orders and compares exactly on both databases;
 * that bounds `maxDigits` to 15 (the digits a double holds exactly).
 */
function decimal(options: CommonOptions<string | number> & { maxDigits: number; decimalPlaces: number }): Field {
  const { maxDigits, decimalPlaces } = options ?? {};
  if (!Number.isSafeInteger(maxDigits) || maxDigits < 1 || maxDigits > 15) throw new TypeError('option maxDigits must be a whole number from 1 to 15');
  if (!Number.isSafeInteger(decimalPlaces) || decimalPlaces < 0 || decimalPlaces > maxDigits) {
    throw new TypeError('option decimalPlaces must be a whole number from 0 to maxDigits');
  }
  const show = (stored: unknown): string => {
    const scaled = Number(stored);
    const sign = scaled < 0 ? '-' : '';
    const digits = String(Math.abs(scaled)).padStart(decimalPlaces + 1, '0');
    return decimalPlaces === 0 ? `${sign}${digits}` : `${sign}${digits.slice(0, -decimalPlaces)}.${digits.slice(-decimalPlaces)}`;
  };
  const limit = `${'9'.repeat(maxDigits - decimalPlaces) || '0'}${decimalPlaces ? `.${'9'.repeat(decimalPlaces)}` : ''}`;
  return makeField(options as unknown as Record<string, unknown>, {
    type: 'decimal',
    own: ['maxDigits', 'decimalPlaces'],
    parse(value) {
      let textValue: string;
      if (typeof value === 'number' && Number.isFinite(value)) textValue = String(value);
      else if (typeof value === 'string' && value.length <= 1000) textValue = value.trim();
      else if (typeof value === 'string') return fail('String value too large.');
      else return fail('A valid number is required.');
      // Exponents (1e3) are what JavaScript prints for large or tiny numbers; read them exactly.
      const match = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d{1,3}))?$/.exec(textValue);
      if (!match || (match[2] === '' && (match[3] ?? '') === '')) return fail('A valid number is required.');
      const exponent = Number(match[4] ?? 0);
      let whole = match[2]!;
      let fraction = match[3] ?? '';
      if (exponent > 0) {
        fraction = fraction.padEnd(exponent, '0');
        whole += fraction.slice(0, exponent);
        fraction = fraction.slice(exponent);
      } else if (exponent < 0) {
        whole = whole.padStart(-exponent + 1, '0');
        fraction = whole.slice(exponent) + fraction;
        whole = whole.slice(0, exponent);
      }
      whole = whole.replace(/^0+(?=\d)/, '');
      fraction = fraction.replace(/0+$/, '');
      const wholeDigits = whole === '0' || whole === '' ? 0 : whole.length;
      if (wholeDigits + fraction.length > maxDigits) return fail(`Ensure that there are no more than ${maxDigits} digits in total.`);
      if (fraction.length > decimalPlaces) return fail(`Ensure that there are no more than ${decimalPlaces} decimal places.`);
      if (wholeDigits > maxDigits - decimalPlaces) {
        return fail(`Ensure that there are no more than ${maxDigits - decimalPlaces} digits before the decimal point.`);
      }
      const scaled = Number(`${whole || '0'}${fraction.padEnd(decimalPlaces, '0')}`);
      return ok(match[1] === '-' && scaled !== 0 ? -scaled : scaled);
    },
    show,
    schema: { type: 'string', format: 'decimal', pattern: `^-?\\d{1,${Math.max(1, maxDigits - decimalPlaces)}}${decimalPlaces ? `\\.\\d{${decimalPlaces}}` : ''}$`, examples: [show(0)] },
    metadataType: 'decimal',
    metadata: { max_digits: maxDigits, decimal_places: decimalPlaces, max_value: limit },
    state: { maxDigits, decimalPlaces },
  });
}

const TRUE = new Set(['true', 'True', 'TRUE', 'on', 'On', 'ON', '1', 'yes', 'y']);
const FALSE = new Set(['false', 'False', 'FALSE', 'off', 'Off', 'OFF', '0', 'no', 'n']);

/** true or false (DRF's BooleanField); stored 0/1. */
function boolean(options: CommonOptions<boolean> = {}): Field {
  return makeField(options as Record<string, unknown>, {
    type: 'boolean',
    own: [],
    parse(value) {
      if (value === true || value === 1 || (typeof value === 'string' && TRUE.has(value.trim()))) return ok(1);
      if (value === false || value === 0 || (typeof value === 'string' && FALSE.has(value.trim()))) return ok(0);
      return fail('Must be a valid boolean.');
    },
    show: (stored) => Number(stored) === 1,
    schema: { type: 'boolean' },
    metadataType: 'boolean',
  });
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATETIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|z|[+-]\d{2}:?\d{2})?$/;

function validDate(year: number, month: number, day: number): boolean {
  const date = new Date(Date.UTC(year, month - 1, day));
  return year >= 1 && date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/** `YYYY-MM-DD` for a valid calendar date, or null. */
function readDate(value: string): string | null {
  const match = DATE.exec(value);
  return match && validDate(Number(match[1]), Number(match[2]), Number(match[3])) ? value : null;
}

/** An RFC 3339 date-time (a naive one is read as UTC) → UTC text with milliseconds, or null. */
function readDatetime(value: string): string | null {
  const match = DATETIME.exec(value);
  if (!match) return null;
  const [, y, mo, d, h, mi, s = '0', fraction = '', zone = 'Z'] = match;
  if (!validDate(Number(y), Number(mo), Number(d)) || Number(h) > 23 || Number(mi) > 59 || Number(s) > 59) return null;
  const ms = Number(fraction.padEnd(3, '0').slice(0, 3));
  let time = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), ms);
  if (Number(y) < 100) time = new Date(time).setUTCFullYear(Number(y));
  if (zone !== 'Z' && zone !== 'z') {
    const offset = /^([+-])(\d{2}):?(\d{2})$/.exec(zone)!;
    if (Number(offset[2]) > 23 || Number(offset[3]) > 59) return null;
    time -= (offset[1] === '-' ? -1 : 1) * (Number(offset[2]) * 60 + Number(offset[3])) * 60_000;
  }
  const date = new Date(time);
  if (date.getUTCFullYear() < 1 || date.getUTCFullYear() > 9999) return null;
  return date.toISOString();
}

function temporal(
  type: 'date' | 'datetime',
  read: (value: string) => string | null,
  message: string,
  options: CommonOptions<string> & { min?: string; max?: string },
): Field {
  const bound = (name: 'min' | 'max'): string | undefined => {
    const value = options[name];
    if (value === undefined) return undefined;
    const read_ = typeof value === 'string' ? read(value) : null;
    if (read_ === null) throw new TypeError(`option ${name} must be a valid ${type} string`);
    return read_;
  };
  const min = bound('min');
  const max = bound('max');
  return makeField(options as Record<string, unknown>, {
    type,
    own: ['min', 'max'],
    parse(value) {
      const parsed = typeof value === 'string' ? read(value.trim()) : null;
      if (parsed === null) return fail(message);
      // Fixed-width UTC text compares in time order.
      if (max !== undefined && parsed > max) return fail(`Ensure this value is less than or equal to ${max}.`);
      if (min !== undefined && parsed < min) return fail(`Ensure this value is greater than or equal to ${min}.`);
      return ok(parsed);
    },
    schema: {
      type: 'string',
      format: type === 'date' ? 'date' : 'date-time',
      ...(min ? { formatMinimum: min } : {}),
      ...(max ? { formatMaximum: max } : {}),
    },
    metadataType: type,
    metadata: { ...(min ? { min_value: min } : {}), ...(max ? { max_value: max } : {}) },
  });
}

/** A calendar date, `YYYY-MM-DD`. */
function date(options: CommonOptions<string> & { min?: string; max?: string } = {}): Field {
  return temporal('date', readDate, 'Date has wrong format. Use one of these formats instead: YYYY-MM-DD.', options);
}

/** An instant, RFC 3339; shown in UTC with milliseconds and `Z`. */
function datetime(options: CommonOptions<string> & { min?: string; max?: string } = {}): Field {
  return temporal(
    'datetime',
    readDatetime,
    'Datetime has wrong format. Use one of these formats instead: YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z].',
    options,
  );
}

/** One of a fixed list of strings (DRF's ChoiceField). */
function choice(values: readonly string[], options: CommonOptions<string> = {}): Field {
  if (!Array.isArray(values) || values.length === 0 || !values.every((value) => typeof value === 'string' && value.length > 0)) {
    throw new TypeError('choice needs a non-empty list of non-empty strings');
  }
  if (new Set(values).size !== values.length) throw new TypeError('choice values must be distinct');
  const maxLength = Math.max(...values.map(codePointLength));
  return makeField(options as Record<string, unknown>, {
    type: 'choice',
    own: [],
    parse(value) {
      const text_ = typeof value === 'string' ? value.trim() : typeof value === 'number' || typeof value === 'boolean' ? String(value) : null;
      if (text_ !== null && values.includes(text_)) return ok(text_);
      return fail(`"${text_ ?? JSON.stringify(value)}" is not a valid choice.`);
    },
    schema: { type: 'string', enum: [...values] },
    metadataType: 'choice',
    metadata: { choices: values.map((value) => ({ value, display_name: value })) },
    state: { maxLength },
  });
}

/** Any JSON value, stored as its text; at most `maxBytes` (default 64 KiB) of UTF-8 JSON. */
function json(options: CommonOptions<unknown> & { maxBytes?: number } = {}): Field {
  const maxBytes = options.maxBytes ?? 65_536;
  checkLength('maxBytes', maxBytes, true);
  return makeField(options as Record<string, unknown>, {
    type: 'json',
    own: ['maxBytes'],
    parse(value, context) {
      let parsed = value;
      if (context.form && typeof value === 'string') {
        try {
          parsed = JSON.parse(value) as unknown;
        } catch {
          return fail('Value must be valid JSON.');
        }
      }
      // JSON.parse reads 1e400 as Infinity, which JSON.stringify writes as null: refused, not
      // stored as something else (issue 22 item 15). The replacer sees every value, at any depth.
      let finite = true;
      const textValue = JSON.stringify(parsed, (_key, item: unknown) => {
        if (typeof item === 'number' && !Number.isFinite(item)) finite = false;
        return item;
      });
      if (!finite) return fail('Value must be valid JSON: a number is out of range (it must be finite).');
      if (textValue === undefined) return fail('Value must be valid JSON.');
      if (Buffer.byteLength(textValue) > maxBytes) return fail(`Ensure this value has no more than ${maxBytes} bytes as JSON.`);
      return ok(textValue);
    },
    show: (stored) => JSON.parse(String(stored)) as unknown,
    schema: { description: `Any JSON value, at most ${maxBytes} bytes.` },
    metadataType: 'json',
    metadata: { max_bytes: maxBytes },
  });
}

const PATH = /^\/api\/v1\/([a-z][a-z0-9_]*)\/([1-9]\d{0,15})\/$/;

/**
 * Reads a record reference (DRF's HyperlinkedRelatedField): a path, or an absolute URL under
 * PUBLIC_URL. Returns the id, or DRF's message. Whether the record exists is asked later, for
 * every reference of the request in one query per collection (`relations.ts`).
 */
export function readReference(value: unknown, target: string, context: ParseContext): { id: number } | { error: string } {
  if (typeof value !== 'string') return { error: `Incorrect type. Expected URL string, received ${pythonType(value)}.` };
  let path = value.trim();
  if (/^[a-z][a-z0-9+.-]*:/i.test(path)) {
    if (!context.publicUrl || !path.startsWith(`${context.publicUrl}/`)) return { error: 'Invalid hyperlink - No URL match.' };
    path = path.slice(context.publicUrl.length);
  }
  const match = PATH.exec(path);
  if (!match || !Number.isSafeInteger(Number(match[2]))) return { error: 'Invalid hyperlink - No URL match.' };
  if (match[1] !== target) {
    return { error: context.collections.has(match[1]!) ? 'Invalid hyperlink - Incorrect URL match.' : 'Invalid hyperlink - No URL match.' };
  }
  return { id: Number(match[2]) };
}

const ON_DELETE: readonly OnDelete[] = ['protect', 'cascade', 'setNull'];

function targetName(collection: unknown): string {
  if (typeof collection !== 'string' || !/^[a-z][a-z0-9_]*$/.test(collection)) {
    throw new TypeError('the target must be a collection name ([a-z][a-z0-9_]*)');
  }
  return collection;
}

/** A reference to one record of `collection`, written and shown as its path. */
function reference(collection: string, options: CommonOptions<string> & { onDelete?: OnDelete } = {}): Field {
  const to = targetName(collection);
  const onDelete = options.onDelete ?? 'protect';
  if (!ON_DELETE.includes(onDelete)) throw new TypeError(`option onDelete must be one of ${ON_DELETE.join(', ')}`);
  if (onDelete === 'setNull' && options.nullable !== true) throw new TypeError("onDelete 'setNull' needs nullable: true");
  return makeField(options as Record<string, unknown>, {
    type: 'reference',
    own: ['onDelete'],
    parse(value, context) {
      // A default path is checked for its shape only: collections are known once all are loaded.
      const found = readReference(value, to, context === ANY_CONTEXT ? { ...context, collections: new Set([to]), publicUrl: '' } : context);
      return 'error' in found ? fail(found.error) : ok(found.id);
    },
    show: (stored) => recordPath(to, Number(stored)),
    schema: { type: 'string', format: 'uri-reference', pattern: `^/api/v1/${to}/[1-9][0-9]*/$`, description: `The path of a record in ${to}.` },
    metadataType: 'field',
    metadata: { related_collection: to, on_delete: onDelete },
    state: { to, onDelete },
    to,
    onDelete,
  });
}

/**
 * The most references one list may hold: the default `maxItems`, and the most a declaration may
 * ask for. A list's ids are bound as SQL parameters (the existence check, the join-table insert:
 * two per item), and SQLite takes at most 32,766 of them in one statement, PostgreSQL 65,535; a
 * longer list was a 500 (issue 22 item 8). A thousand paths are also what a page of records can
 * show without each record weighing tens of kilobytes.
 */
export const MAX_REFERENCES = 1000;
const MAX_DECLARED_REFERENCES = 10_000;

/** References to records of `collection` (a join table): a list of paths, no duplicates, in id order. */
function references(collection: string, options: Omit<CommonOptions<string[]>, 'nullable' | 'unique'> & { maxItems?: number } = {}): Field {
  const to = targetName(collection);
  checkLength('maxItems', options.maxItems, false);
  if (options.maxItems !== undefined && options.maxItems > MAX_DECLARED_REFERENCES) {
    throw new TypeError(`option maxItems must be at most ${MAX_DECLARED_REFERENCES}`);
  }
  const maxItems = options.maxItems ?? MAX_REFERENCES;
  return makeField({ required: false, ...options } as Record<string, unknown>, {
    type: 'references',
    own: ['maxItems'],
    parse(value, context) {
      let items = value;
      // A form sends one string: a JSON list, or paths separated by commas or spaces.
      if (context.form && typeof value === 'string') {
        const trimmed = value.trim();
        try {
          items = trimmed.startsWith('[') ? (JSON.parse(trimmed) as unknown) : trimmed === '' ? [] : trimmed.split(/[\s,]+/);
        } catch {
          return fail('Value must be valid JSON.');
        }
      }
      if (!Array.isArray(items)) return fail(`Expected a list of items but got type "${pythonType(items)}".`);
      // The length first: a list of 40,000 items is refused without reading one (issue 22 item 8).
      if (items.length > maxItems) return fail(`Ensure this field has no more than ${maxItems} elements.`);
      const errors: string[] = [];
      const ids = new Set<number>();
      for (const item of items) {
        const found = readReference(item, to, context);
        if ('error' in found) errors.push(found.error);
        else if (ids.has(found.id)) errors.push(`Duplicate reference ${recordPath(to, found.id)}.`);
        else ids.add(found.id);
      }
      return errors.length ? { ok: false, errors } : ok([...ids].sort((a, b) => a - b));
    },
    show: (stored) => (stored as number[]).map((id) => recordPath(to, id)),
    schema: {
      type: 'array',
      uniqueItems: true,
      maxItems,
      items: { type: 'string', format: 'uri-reference', pattern: `^/api/v1/${to}/[1-9][0-9]*/$` },
      description: `Paths of records in ${to}, in id order.`,
    },
    metadataType: 'field',
    metadata: { many: true, related_collection: to, max_items: maxItems },
    state: { to, null: true, unique: false },
    to,
    maxItems,
  });
}

const constructors = { string, text, integer, decimal, boolean, date, datetime, email, url, choice, json, reference, references } as const;

/**
 * A field whose declaration is wrong (a bad option value, an unknown type). It is reported by
 * `defineResource`, which knows the collection and the field's name (STYLE.md 14), instead of
 * failing the file's import with a message that names neither.
 */
export interface InvalidField {
  readonly [FIELD]: true;
  readonly invalid: string;
}

/** Whether a declared field is an InvalidField. */
export function isInvalidField(value: unknown): value is InvalidField {
  return isField(value) && typeof (value as unknown as InvalidField).invalid === 'string';
}

function guarded<Args extends unknown[]>(type: string, make: (...args: Args) => Field): (...args: Args) => Field {
  return (...args) => {
    try {
      return make(...args);
    } catch (error) {
      // Every throw here is a bad option (a TypeError, or a SyntaxError from a bad pattern).
      return { [FIELD]: true, invalid: `field.${type}: ${error instanceof Error ? error.message : String(error)}` } as unknown as Field;
    }
  };
}

/** The field constructors users declare with (RESOURCES.md §2). */
export const field: typeof constructors = new Proxy(
  Object.fromEntries(Object.entries(constructors).map(([type, make]) => [type, guarded(type, make as (...args: unknown[]) => Field)])) as typeof constructors,
  {
    // `field.strnig(...)` in a TypeScript file is not type-checked by the loader: name it.
    get: (target, type) =>
      typeof type === 'string' && !(type in target)
        ? () => ({ [FIELD]: true, invalid: `unknown field type "field.${type}" (use ${FIELD_TYPES.map((t) => `field.${t}`).join(', ')})` })
        : target[type as keyof typeof constructors],
  },
);

/** Option names a field accepts: unknown ones are declaration errors. */
export function optionsOf(declared: Field): readonly string[] {
  return [...COMMON_OPTIONS, ...declared.ownOptions];
}

export { FIELD_TYPES };
