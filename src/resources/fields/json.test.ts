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
  it('json: a number beyond a double (1e400 read as Infinity) is refused at any depth, not stored as null (issue 22)', () => {
    const message = { errors: ['Value must be valid JSON: a number is out of range (it must be finite).'] };
    expect(check(field.json(), JSON.parse('1e400'))).toEqual(message);
    expect(check(field.json(), JSON.parse('{"a": [1, {"b": -1e400}]}'))).toEqual(message);
    expect(check(field.json(), '[2e999]', form)).toEqual(message);
    expect(check(field.json(), { a: [1e300, -0.5] })).toEqual({ a: [1e300, -0.5] });
  });
});
