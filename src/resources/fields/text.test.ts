import { describe, expect, it } from 'vitest';
import { field } from './index.js';
import { parseField, type Field, type ParseContext } from './field.js';

const context: ParseContext = { form: false, publicUrl: 'https://api.example.com', collections: new Set(['authors', 'users', 'books']) };
const form: ParseContext = { ...context, form: true };

/** What a request would store (shown back as a client would see it), or the messages. */
function check(declared: Field, value: unknown, ctx = context): unknown {
  const result = parseField(declared, value, ctx);
  return result.ok ? declared.show(result.value) : { errors: result.errors };
}

describe('field types (RESOURCES.md §2)', () => {
  it('string: trimmed, no control characters, length in code points, pattern, blank', () => {
    const title = field.string({ maxLength: 3 });
    expect(check(title, '  ab  ')).toBe('ab');
    expect(check(title, '😀😀😀')).toBe('😀😀😀');
    expect(check(title, 'abcd')).toEqual({ errors: ['Ensure this field has no more than 3 characters.'] });
    expect(check(title, '   ')).toEqual({ errors: ['This field may not be blank.'] });
    expect(check(title, 'a\nb')).toEqual({ errors: ['Control characters are not allowed.'] });
    expect(check(title, 5)).toEqual({ errors: ['Not a valid string.'] });
    expect(check(title, null)).toEqual({ errors: ['This field may not be null.'] });
    expect(check(field.string({ maxLength: 5, blank: true }), '')).toBe('');
    expect(check(field.string({ maxLength: 9, pattern: '[A-Z]{3}' }), 'abc')).toEqual({ errors: ['This value does not match the required pattern.'] });
  });

  it('text: newlines and tabs allowed', () => {
    expect(check(field.text({ maxLength: 20 }), ' a\n\tb ')).toBe('a\n\tb');
  });

  it('text: maxLength is optional (65,535 characters), as Django TextField needs none; string still needs one', () => {
    for (const body of [field.text(), field.text({ required: false })]) {
      expect(check(body, 'x'.repeat(65_535))).toBe('x'.repeat(65_535));
      expect(check(body, 'x'.repeat(65_536))).toEqual({ errors: ['Ensure this field has no more than 65535 characters.'] });
      expect(body.metadata()).toMatchObject({ max_length: 65_535 });
    }
    const invalid = (declared: Field) => (declared as unknown as { invalid?: string }).invalid;
    expect(invalid(field.string({} as never))).toBe('field.string: option maxLength is required (a whole number ≥ 0)');
    expect(invalid(field.text({ maxLength: -1 }))).toBe('field.text: option maxLength must be a whole number ≥ 0');
  });

  it('email, url (http and https only), choice, json', () => {
    expect(check(field.email(), 'a@example.com')).toBe('a@example.com');
    expect(check(field.email(), 'nope')).toEqual({ errors: ['Enter a valid email address.'] });
    expect(check(field.url(), 'ftp://example.com/')).toEqual({ errors: ['Enter a valid URL.'] });
    expect(check(field.choice(['a', 'b']), 'c')).toEqual({ errors: ['"c" is not a valid choice.'] });
    expect(check(field.json(), { a: [1] })).toEqual({ a: [1] });
    expect(check(field.json(), '{"a":1}', form)).toEqual({ a: 1 });
    expect(check(field.json({ maxBytes: 4 }), 'long')).toEqual({ errors: ['Ensure this value has no more than 4 bytes as JSON.'] });
  });
});
