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
