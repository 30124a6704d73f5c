// The Field of a declared collection (RESOURCES.md §2): the value every `field.<type>()` makes,
// and what all types share: the common options, null and defaults, how OPTIONS, OpenAPI and
// migrations describe a field, and the check of a declaration's option names. Each family of
// types is a file beside this one (text, numbers, dates, json, relations); `index.ts` gathers
// them into `field`. The viewset never branches on a field's type except to load the relations
// (`reference`, `references`) it cannot read from the row alone.

import type { FieldState, FieldType, OnDelete } from '../../db/schema-state.js';
import { MESSAGES } from '../../http/messages.js';

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
  /**
   * Who may read and write this field (ACCESS.md §3), as the collection's access rules are
   * written; each `*` when left out. Read by `defineResource`, which knows the other fields.
   */
  access?: { read?: string | readonly string[]; write?: string | readonly string[] };
  /**
   * The declaration's own checks of a value (LOGIC.md §1): each gets the value as the record's
   * JSON shows it, once the type's own checks passed and never for null, and returns null, a
   * message or a list of messages.
   */
  validators?: readonly FieldValidator<T>[];
}

/** A declared check of one field's value (LOGIC.md §1): null when it passes, else what is wrong. */
export type FieldValidator<T = unknown> = {
  // A method's parameter is bivariant, so a field's validators of strings fit where any value may come.
  check(value: T): string | readonly string[] | null | undefined;
}['check'];

/** Marks a field (and an InvalidField); `Symbol.for`, so copies of the package agree. */
export const FIELD = Symbol.for('restwire.field');

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
  /** The declaration's own checks of a shown value (LOGIC.md §1); run by `parseField`. */
  readonly validators: readonly FieldValidator[];
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


const COMMON_OPTIONS = ['required', 'default', 'nullable', 'unique', 'readOnly', 'writeOnly', 'label', 'helpText', 'access', 'validators'];
/** Counts Unicode code points, not UTF-16 units (API.md §6: an emoji is one character). */
export function codePointLength(text: string): number {
  let length = 0;
  for (const _ of text) length++;
  return length;
}

/** The parts each type supplies; `makeField` adds the common options around them. */
export interface TypeSpec {
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

/** An accepted value, to be stored. */
export const ok = (value: unknown): FieldResult => ({ ok: true, value });
/** A refused value, with every message that applies. */
export const fail = (...errors: string[]): FieldResult => ({ ok: false, errors });

/** The context a declared default is checked in: no request, so no PUBLIC_URL and no collections. */
export const ANY_CONTEXT: ParseContext = { form: false, publicUrl: '', collections: new Set() };

/** Builds a Field from a type's spec and the declared options (the common ones handled here). */
export function makeField(options: CommonOptions<unknown> & Record<string, unknown>, spec: TypeSpec): Field {
  const nullable = options.nullable === true;
  const validators = options.validators ?? [];
  // A bad shape is a declaration error, reported with the field's name by `defineResource`.
  if (!Array.isArray(validators) || !validators.every((validator) => typeof validator === 'function')) {
    throw new TypeError('option validators must be a list of functions of the value');
  }
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
    validators,
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
    return field.nullable ? ok(null) : fail(MESSAGES.null);
  }
  const parsed = field.parse(value, context);
  if (!parsed.ok || field.validators.length === 0 || parsed.value === null) return parsed;
  const messages = runValidators(field, field.show(parsed.value));
  return messages.length ? fail(...messages) : parsed;
}

/**
 * A field's declared validators on a value as shown (LOGIC.md §1), every message of every one.
 * What one throws, or a result that is not null / a message / messages, is the declaration's
 * fault: a `ValidatorFailed` that the viewset names with the collection and field.
 */
function runValidators(field: Field, shown: unknown): string[] {
  const messages: string[] = [];
  for (const validator of field.validators) {
    let result: unknown;
    try {
      result = validator(shown);
    } catch (error) {
      throw new ValidatorFailed(error);
    }
    if (result === null || result === undefined) continue;
    if (typeof result === 'string') messages.push(result);
    else if (Array.isArray(result) && result.every((message) => typeof message === 'string')) messages.push(...(result as string[]));
    else throw new ValidatorFailed(new TypeError(`a validator returned ${result instanceof Promise ? 'a promise (validators are synchronous; use validate() for checks that wait)' : typeof result}, not null, a message or a list of messages`));
  }
  return messages;
}

/** A declared validator threw (or answered nonsense); `cause` is what it threw. */
export class ValidatorFailed extends Error {
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = 'ValidatorFailed';
  }
}

/** Checks a declared length option (maxLength, maxBytes, …): a whole number ≥ 0; throws if not. */
export function checkLength(name: string, value: unknown, required: boolean): void {
  if (value === undefined && !required) return;
  // Not "must be a whole number" for an option the declaration never gave (issue 19).
  if (value === undefined) throw new TypeError(`option ${name} is required (a whole number ≥ 0)`);
  if (!Number.isSafeInteger(value) || (value as number) < 0) throw new TypeError(`option ${name} must be a whole number ≥ 0`);
}

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

/** Option names a field accepts: unknown ones are declaration errors. */
export function optionsOf(declared: Field): readonly string[] {
  return [...COMMON_OPTIONS, ...declared.ownOptions];
}
