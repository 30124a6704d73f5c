import { describe, expect, it } from 'vitest';
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
