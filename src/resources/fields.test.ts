import { describe, expect, it } from 'vitest';
import { field, parseField, type Field, type ParseContext } from './fields.js';

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

  it('integer: JSON integers and a form’s digits, bounds with DRF’s messages', () => {
    const year = field.integer({ min: 0, max: 3000 });
    expect(check(year, 1999)).toBe(1999);
    expect(check(year, '1999', form)).toBe(1999);
    expect(check(year, 3001)).toEqual({ errors: ['Ensure this value is less than or equal to 3000.'] });
    expect(check(year, -1)).toEqual({ errors: ['Ensure this value is greater than or equal to 0.'] });
    expect(check(year, 1.5)).toEqual({ errors: ['A valid integer is required.'] });
    expect(check(year, true)).toEqual({ errors: ['A valid integer is required.'] });
  });

  it('decimal: exact, shown as a string with its places', () => {
    const price = field.decimal({ maxDigits: 6, decimalPlaces: 2 });
    expect(check(price, 12.5)).toBe('12.50');
    expect(check(price, '-0.05')).toBe('-0.05');
    expect(check(price, '1e2')).toBe('100.00');
    expect(check(price, '1.234')).toEqual({ errors: ['Ensure that there are no more than 2 decimal places.'] });
    expect(check(price, '12345.6')).toEqual({ errors: ['Ensure that there are no more than 4 digits before the decimal point.'] });
    expect(check(price, 'abc')).toEqual({ errors: ['A valid number is required.'] });
    expect(field.decimal({ maxDigits: 20, decimalPlaces: 2 })).toMatchObject({ invalid: expect.stringMatching(/maxDigits/) });
  });

  it('boolean: true/false, and a form’s on/1/0', () => {
    const active = field.boolean();
    expect(check(active, true)).toBe(true);
    expect(check(active, 'on', form)).toBe(true);
    expect(check(active, '0', form)).toBe(false);
    expect(check(active, 'maybe')).toEqual({ errors: ['Must be a valid boolean.'] });
  });

  it('date and datetime: valid calendar values; datetimes in UTC with milliseconds', () => {
    expect(check(field.date(), '2024-02-29')).toBe('2024-02-29');
    expect(check(field.date(), '2023-02-29')).toEqual({ errors: ['Date has wrong format. Use one of these formats instead: YYYY-MM-DD.'] });
    expect(check(field.datetime(), '2024-01-01T10:00:00+02:00')).toBe('2024-01-01T08:00:00.000Z');
    expect(check(field.datetime(), '2024-01-01T10:00:00.123456Z')).toBe('2024-01-01T10:00:00.123Z');
    expect(check(field.datetime({ max: '2025-01-01T00:00:00Z' }), '2026-01-01T00:00:00Z')).toEqual({
      errors: ['Ensure this value is less than or equal to 2025-01-01T00:00:00.000Z.'],
    });
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

  it('reference: DRF’s four hyperlink errors; absolute URLs only under PUBLIC_URL', () => {
    const author = field.reference('authors');
    expect(check(author, '/api/v1/authors/3/')).toBe('/api/v1/authors/3/');
    expect(check(author, 'https://api.example.com/api/v1/authors/3/')).toBe('/api/v1/authors/3/');
    expect(check(author, 'https://evil.example.com/api/v1/authors/3/')).toEqual({ errors: ['Invalid hyperlink - No URL match.'] });
    expect(check(author, 3)).toEqual({ errors: ['Incorrect type. Expected URL string, received int.'] });
    expect(check(author, '/api/v1/users/3/')).toEqual({ errors: ['Invalid hyperlink - Incorrect URL match.'] });
    expect(check(author, '/api/v1/nothing/3/')).toEqual({ errors: ['Invalid hyperlink - No URL match.'] });
    expect(field.reference('authors', { onDelete: 'setNull' })).toMatchObject({ invalid: expect.stringMatching(/nullable/) });
  });

  it('references: a list of paths in id order, one message per failing item', () => {
    const tags = field.references('authors', { maxItems: 3 });
    expect(check(tags, ['/api/v1/authors/9/', '/api/v1/authors/2/'])).toEqual(['/api/v1/authors/2/', '/api/v1/authors/9/']);
    expect(check(tags, [1, '/api/v1/books/1/'])).toEqual({
      errors: ['Incorrect type. Expected URL string, received int.', 'Invalid hyperlink - Incorrect URL match.'],
    });
    expect(check(tags, '/api/v1/authors/1/')).toEqual({ errors: ['Expected a list of items but got type "str".'] });
  });

  it('references: a list over maxItems is refused by its length alone; an undeclared maxItems is 1000 (issue 22)', () => {
    const bad = Array.from({ length: 40_000 }, (_, index) => (index % 2 ? 3 : '/api/v1/authors/1/'));
    expect(check(field.references('authors', { maxItems: 20 }), bad)).toEqual({ errors: ['Ensure this field has no more than 20 elements.'] });
    const paths = (count: number) => Array.from({ length: count }, (_, index) => `/api/v1/authors/${index + 1}/`);
    expect(check(field.references('authors'), paths(1001))).toEqual({ errors: ['Ensure this field has no more than 1000 elements.'] });
    expect(check(field.references('authors'), paths(1000))).toHaveLength(1000);
    expect(check(field.references('authors'), ['/api/v1/authors/2/', '/api/v1/authors/2/', '/api/v1/authors/2/'])).toEqual({
      errors: ['Duplicate reference /api/v1/authors/2/.', 'Duplicate reference /api/v1/authors/2/.'],
    });
    expect(field.references('authors').schema()).toMatchObject({ maxItems: 1000 });
    expect(field.references('authors', { maxItems: 10_001 })).toMatchObject({ invalid: 'field.references: option maxItems must be at most 10000' });
  });

  it('json: a number beyond a double (1e400 read as Infinity) is refused at any depth, not stored as null (issue 22)', () => {
    const message = { errors: ['Value must be valid JSON: a number is out of range (it must be finite).'] };
    expect(check(field.json(), JSON.parse('1e400'))).toEqual(message);
    expect(check(field.json(), JSON.parse('{"a": [1, {"b": -1e400}]}'))).toEqual(message);
    expect(check(field.json(), '[2e999]', form)).toEqual(message);
    expect(check(field.json(), { a: [1e300, -0.5] })).toEqual({ a: [1e300, -0.5] });
  });

  it('describes itself for OpenAPI, OPTIONS and migrations', () => {
    const year = field.integer({ min: 0, max: 3000, required: false, label: 'Year' });
    expect(year.schema()).toMatchObject({ type: ['integer', 'null'], minimum: 0, maximum: 3000, title: 'Year' });
    expect(year.metadata()).toMatchObject({ type: 'integer', min_value: 0, max_value: 3000 });
    expect(year.state()).toEqual({ type: 'integer', null: true, unique: false });
    expect(field.choice(['a'], { default: 'a' }).state()).toMatchObject({ null: false, default: 'a' });
  });
});
