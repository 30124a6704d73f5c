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
});
