import { describe, expect, it } from 'vitest';
import { parseField, ValidatorFailed } from './field.js';
import { field } from './index.js';

describe('field types (RESOURCES.md §2)', () => {
  it('describes itself for OpenAPI, OPTIONS and migrations', () => {
    const year = field.integer({ min: 0, max: 3000, required: false, label: 'Year' });
    expect(year.schema()).toMatchObject({ type: ['integer', 'null'], minimum: 0, maximum: 3000, title: 'Year' });
    expect(year.metadata()).toMatchObject({ type: 'integer', min_value: 0, max_value: 3000 });
    expect(year.state()).toEqual({ type: 'integer', null: true, unique: false });
    expect(field.choice(['a'], { default: 'a' }).state()).toMatchObject({ null: false, default: 'a' });
  });
});

describe('validators and computed fields (LOGIC.md §1, §2)', () => {
  const context = { form: false, publicUrl: '', collections: new Set<string>() };

  it('runs validators on the shown value once the type passed, never for null, with every message', () => {
    const seen: unknown[] = [];
    const price = field.decimal({
      maxDigits: 5, decimalPlaces: 2, nullable: true,
      validators: [(v) => (seen.push(v), v === '0.00' ? 'Not free.' : null), (v) => (v === '0.00' ? ['Really.', 'Not free.'] : undefined)],
    });
    expect(parseField(price, '0', context)).toEqual({ ok: false, errors: ['Not free.', 'Really.', 'Not free.'] });
    expect(parseField(price, 'x', context)).toEqual({ ok: false, errors: ['A valid number is required.'] });
    expect(parseField(price, null, context)).toEqual({ ok: true, value: null });
    expect(parseField(price, 1.5, context)).toEqual({ ok: true, value: 150 });
    expect(seen).toEqual(['0.00', '1.50']);
  });

  it('reports a validator that throws or answers nonsense as the declaration’s fault', () => {
    const thrower = field.integer({ validators: [() => { throw new Error('bad'); }] });
    expect(() => parseField(thrower, 1, context)).toThrow(ValidatorFailed);
    const promising = field.integer({ validators: [(async () => null) as unknown as () => null] });
    expect(() => parseField(promising, 1, context)).toThrow(/synchronous/);
  });

  it('describes a computed field as its type, read-only, and refuses what means nothing for it', () => {
    const months = field.computed(field.integer({ nullable: true, min: 0 }), () => 3);
    expect(months.readOnly).toBe(true);
    expect(months.schema()).toMatchObject({ type: ['integer', 'null'], minimum: 0, readOnly: true });
    expect(months.metadata()).toMatchObject({ type: 'integer', allow_null: true });
    expect(field.computed(field.integer({ default: 1 }), () => 1)).toMatchObject({ invalid: expect.stringMatching(/default means nothing/) });
    expect(field.computed(field.references('tags'), () => [])).toMatchObject({ invalid: expect.stringMatching(/relation/) });
  });
});
