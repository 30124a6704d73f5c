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
});
