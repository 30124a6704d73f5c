import { describe, expect, it } from 'vitest';
import { field } from './index.js';
import { parseField, type Field, type ParseContext } from './field.js';

const context: ParseContext = { form: false, publicUrl: 'https://api.example.com', collections: new Set(['authors', 'users', 'books']) };

/** What a request would store (shown back as a client would see it), or the messages. */
function check(declared: Field, value: unknown, ctx = context): unknown {
  const result = parseField(declared, value, ctx);
  return result.ok ? declared.show(result.value) : { errors: result.errors };
}

describe('field types (RESOURCES.md §2)', () => {
  it('date and datetime: valid calendar values; datetimes in UTC with milliseconds', () => {
    expect(check(field.date(), '2024-02-29')).toBe('2024-02-29');
    expect(check(field.date(), '2023-02-29')).toEqual({ errors: ['Date has wrong format. Use one of these formats instead: YYYY-MM-DD.'] });
    expect(check(field.datetime(), '2024-01-01T10:00:00+02:00')).toBe('2024-01-01T08:00:00.000Z');
    expect(check(field.datetime(), '2024-01-01T10:00:00.123456Z')).toBe('2024-01-01T10:00:00.123Z');
    expect(check(field.datetime({ max: '2025-01-01T00:00:00Z' }), '2026-01-01T00:00:00Z')).toEqual({
      errors: ['Ensure this value is less than or equal to 2025-01-01T00:00:00.000Z.'],
    });
  });
});
