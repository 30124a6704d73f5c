// The text and choice field types (DRF's CharField, EmailField, URLField, ChoiceField): a
// trimmed string checked for length in code points and for control characters (API.md §6),
// then for the type's own shape.

import type { FieldType } from '../../db/schema-state.js';
import { MESSAGES } from '../../http/messages.js';
import { checkLength, codePointLength, fail, makeField, ok, type CommonOptions, type Field, type TypeSpec } from './field.js';

// API.md §6: control characters are U+0000–U+001F, U+007F and U+0080–U+009F.
const CONTROL = /[\u0000-\u001F\u007F-\u009F]/u;
const CONTROL_BUT_LINES = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]/u;

/** What only these types say (DRF's `default_error_messages`); shared ones are MESSAGES. */
const messages = {
  blank: 'This field may not be blank.',
  minLength: (limit: number) => `Ensure this field has at least ${limit} characters.`,
  control: 'Control characters are not allowed.',
  controlButLines: 'Control characters other than newline and tab are not allowed.',
  pattern: 'This value does not match the required pattern.',
  invalidEmail: 'Enter a valid email address.',
  invalidChoice: (shown: string) => `"${shown}" is not a valid choice.`,
};

interface StringOptions extends CommonOptions<string> {
  maxLength: number;
  minLength?: number;
  /** A regular expression (source) the whole value must match. */
  pattern?: string;
  /** Accept the empty string (default false). */
  blank?: boolean;
}

interface TextOptions extends CommonOptions<string> {
  /** At most this many characters (code points); default TEXT_MAX_LENGTH. */
  maxLength?: number;
  minLength?: number;
}

/**
 * `text`'s length when the declaration gives none: as Django's TextField, prose needs no limit
 * of its own (issue 19), but every value is bounded so one field cannot take a whole 1 MiB body.
 */
export const TEXT_MAX_LENGTH = 65_535;

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
      if (typeof value !== 'string') return fail(MESSAGES.notAString);
      const trimmed = value.trim();
      const length = codePointLength(trimmed);
      if (length === 0 && !blank) return fail(messages.blank);
      const errors: string[] = [];
      if (length < least && length > 0) errors.push(messages.minLength(least));
      if (length > maxLength) errors.push(MESSAGES.maxLength(maxLength));
      if (control.test(trimmed)) {
        errors.push(multiline ? messages.controlButLines : messages.control);
      }
      if (errors.length === 0 && length > 0) {
        if (regex && !regex.test(trimmed)) errors.push(messages.pattern);
        errors.push(...extra(trimmed));
      }
      return errors.length ? { ok: false, errors } : ok(trimmed);
    },
    schema: { type: 'string', minLength: least, maxLength, ...(pattern ? { pattern: `^(?:${pattern})$` } : {}) },
    metadata: { max_length: maxLength, ...(least > 0 ? { min_length: least } : {}) },
    state: { maxLength },
  };
}

/** A one-line string, trimmed; no control characters (DRF's CharField). */
export function string(options: StringOptions): Field {
  checkLength('maxLength', options?.maxLength, true);
  checkLength('minLength', options.minLength, false);
  if (options.pattern !== undefined) new RegExp(options.pattern, 'u'); // a bad pattern fails at declaration
  return makeField(options as StringOptions & Record<string, unknown>, {
    ...stringSpec('string', options),
    own: ['maxLength', 'minLength', 'pattern', 'blank'],
    metadataType: 'string',
  });
}

/** Multi-line text, trimmed; newline, carriage return and tab allowed; `maxLength` optional. */
export function text(options: TextOptions = {}): Field {
  checkLength('maxLength', options.maxLength, false);
  checkLength('minLength', options.minLength, false);
  const maxLength = options.maxLength ?? TEXT_MAX_LENGTH;
  return makeField(options as TextOptions & Record<string, unknown>, {
    ...stringSpec('text', { ...options, maxLength, multiline: true }),
    own: ['maxLength', 'minLength'],
    metadataType: 'string',
  });
}

// Django's EmailValidator, simplified: a local part, an @, a dotted domain; no spaces.
const EMAIL = /^[^\s@"(),:;<>[\\\]]+@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$/u;

/** An email address (DRF's EmailField). */
export function email(options: CommonOptions<string> & { maxLength?: number } = {}): Field {
  const maxLength = options.maxLength ?? 254;
  checkLength('maxLength', maxLength, true);
  const spec = stringSpec('email', { maxLength }, (value) => (EMAIL.test(value) ? [] : [messages.invalidEmail]));
  return makeField(options as Record<string, unknown>, {
    ...spec,
    own: ['maxLength'],
    schema: { ...spec.schema, format: 'email' },
    metadataType: 'email',
  });
}

/** An http or https URL (DRF's URLField). */
export function url(options: CommonOptions<string> & { maxLength?: number } = {}): Field {
  const maxLength = options.maxLength ?? 200;
  checkLength('maxLength', maxLength, true);
  const valid = (value: string): string[] => {
    try {
      const parsed = new URL(value);
      return (parsed.protocol === 'http:' || parsed.protocol === 'https:') && parsed.hostname !== '' && !/\s/.test(value) ? [] : [MESSAGES.invalidUrl];
    } catch {
      return [MESSAGES.invalidUrl];
    }
  };
  const spec = stringSpec('url', { maxLength }, valid);
  return makeField(options as Record<string, unknown>, { ...spec, own: ['maxLength'], schema: { ...spec.schema, format: 'uri' }, metadataType: 'url' });
}

/** One of a fixed list of strings (DRF's ChoiceField). */
export function choice(values: readonly string[], options: CommonOptions<string> = {}): Field {
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
      return fail(messages.invalidChoice(text_ ?? JSON.stringify(value)));
    },
    schema: { type: 'string', enum: [...values] },
    metadataType: 'choice',
    metadata: { choices: values.map((value) => ({ value, display_name: value })) },
    state: { maxLength },
  });
}
