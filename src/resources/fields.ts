/**
 * Field declarations for resources: what a field accepts, how it is validated, and how it is
 * described (OPTIONS metadata, OpenAPI). Messages follow DRF's wording.
 */

/** The result of validating one input value. */
export type FieldResult = { ok: true; value: unknown } | { ok: false; errors: string[] };

export interface FieldMetadata {
  type: string;
  required: boolean;
  read_only: boolean;
  label: string;
  max_length?: number;
  min_length?: number;
}

/** A writable field, stored in a column of the same name. */
export interface WritableField {
  readonly label: string;
  readonly required: boolean;
  /** JSON Schema of the field's value, for OpenAPI. */
  readonly schema: Record<string, unknown>;
  validate(value: unknown): FieldResult;
  metadata(): FieldMetadata;
}

// API.md §6: control characters are U+0000–U+001F, U+007F and U+0080–U+009F.
const CONTROL = /[\u0000-\u001F\u007F-\u009F]/u;
const CONTROL_BUT_LINES = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]/u;

export interface TextOptions {
  label: string;
  maxLength: number;
  minLength?: number;
  required?: boolean;
  /** Allow newline, carriage return and tab (multi-line text). */
  multiline?: boolean;
}

/** Counts Unicode code points, not UTF-16 units (API.md §6: an emoji is one character). */
export function codePointLength(text: string): number {
  let length = 0;
  for (const _ of text) length++;
  return length;
}

/** A string field, trimmed before it is checked and stored (as DRF's CharField). */
export function text(options: TextOptions): WritableField {
  const { label, maxLength, minLength = 1, required = true, multiline = false } = options;
  const control = multiline ? CONTROL_BUT_LINES : CONTROL;
  return {
    label,
    required,
    schema: { type: 'string', minLength, maxLength },
    validate(value) {
      if (value === null) return { ok: false, errors: ['This field may not be null.'] };
      if (typeof value !== 'string') return { ok: false, errors: ['Not a valid string.'] };
      const trimmed = value.trim();
      const errors: string[] = [];
      const length = codePointLength(trimmed);
      if (length === 0) errors.push('This field may not be blank.');
      else if (length < minLength) errors.push(`Ensure this field has at least ${minLength} characters.`);
      if (length > maxLength) errors.push(`Ensure this field has no more than ${maxLength} characters.`);
      if (control.test(trimmed)) {
        errors.push(multiline ? 'Control characters other than newline and tab are not allowed.' : 'Control characters are not allowed.');
      }
      return errors.length ? { ok: false, errors } : { ok: true, value: trimmed };
    },
    metadata: () => ({ type: 'string', required, read_only: false, label, max_length: maxLength, min_length: minLength }),
  };
}

/** Validates a request body against writable fields; unknown and read-only fields are ignored. */
export function validateInput(
  fields: Readonly<Record<string, WritableField>>,
  data: Record<string, unknown>,
  { partial }: { partial: boolean },
): { values: Record<string, unknown>; errors: Record<string, string[]> } {
  const values: Record<string, unknown> = {};
  const errors: Record<string, string[]> = {};
  for (const [name, field] of Object.entries(fields)) {
    if (!Object.prototype.hasOwnProperty.call(data, name)) {
      if (!partial && field.required) errors[name] = ['This field is required.'];
      continue;
    }
    const result = field.validate(data[name]);
    if (result.ok) values[name] = result.value;
    else errors[name] = result.errors;
  }
  return { values, errors };
}
