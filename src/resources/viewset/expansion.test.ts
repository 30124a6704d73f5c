import { describe, expect, it } from 'vitest';
import { InvalidQuery } from '../../http/errors.js';
import { field } from '../fields/index.js';
import { defineResource, type Resource } from '../resource.js';
import { expandPathsOf, expandRecords, parseExpand, type ExpandTree } from './expansion.js';
import { parseFields, pickColumns, pickFields } from './sparse-fields.js';

const publishers = defineResource({ name: 'publishers', fields: { name: field.string({ maxLength: 50 }) } });
const authors = defineResource({
  name: 'authors',
  fields: { name: field.string({ maxLength: 50 }), publisher: field.reference('publishers', { nullable: true }) },
  related: { books: { collection: 'books', field: 'author' } },
});
const books = defineResource({
  name: 'books',
  fields: { title: field.string({ maxLength: 50 }), author: field.reference('authors', { nullable: true }), tags: field.references('tags') },
  owner: true,
});
const all: Resource[] = [publishers, authors, books];
const lookup = (name: string) => all.find((resource) => resource.name === name);

/** The `errors` of the 400 a call throws. */
function refusal(call: () => unknown): Record<string, string[]> {
  try {
    call();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidQuery);
    return (error as InvalidQuery).errors;
  }
  throw new Error('expected a 400');
}

const names = (tree: ExpandTree | null): unknown => (tree ? Object.fromEntries([...tree].map(([name, inner]) => [name, names(inner)])) : null);

describe('parseExpand (REQUESTS.md §2)', () => {
  it('reads paths into one tree, a repeated name once', () => {
    expect(names(parseExpand(books, lookup, 'author.publisher,author.books,tags,author'))).toEqual({ author: { publisher: {}, books: {} }, tags: {} });
    expect(parseExpand(books, lookup, undefined)).toBeNull();
    expect(parseExpand(books, lookup, '')).toBeNull();
  });

  it('refuses an unknown name, a path over 3 levels and over 10 paths, naming expand', () => {
    expect(refusal(() => parseExpand(books, lookup, 'title'))).toEqual({ expand: ['"title" is not a relation of books.'] });
    expect(refusal(() => parseExpand(books, lookup, 'author.toString'))).toEqual({ expand: ['"toString" is not a relation of authors (in "author.toString").'] });
    expect(refusal(() => parseExpand(books, lookup, 'author.books.author.publisher')).expand![0]).toMatch(/deeper than 3/);
    expect(refusal(() => parseExpand(books, lookup, Array(11).fill('owner').join(','))).expand![0]).toMatch(/At most 10/);
  });

  it('lists every path OpenAPI offers, three levels deep', () => {
    expect(expandPathsOf(publishers, lookup)).toEqual([]);
    expect(expandPathsOf(books, lookup)).toEqual(expect.arrayContaining(['author', 'author.publisher', 'author.books.tags', 'tags', 'owner']));
    expect(expandPathsOf(books, lookup).every((path) => path.split('.').length <= 3)).toBe(true);
  });
});

describe('expandRecords', () => {
  it('asks once per relation for a whole page, and leaves out what it did not find', async () => {
    const records: Record<string, unknown>[] = [
      { url: '/api/v1/books/1/', author: '/api/v1/authors/1/', tags: ['/api/v1/tags/1/', '/api/v1/tags/2/'] },
      { url: '/api/v1/books/2/', author: '/api/v1/authors/2/', tags: ['/api/v1/tags/2/'] },
      { url: '/api/v1/books/3/', author: null, tags: [] },
    ];
    const asked: Array<[string, number[]]> = [];
    await expandRecords(books, records, parseExpand(books, lookup, 'author,tags')!, {} as never, async (collection, ids) => {
      asked.push([collection, [...ids]]);
      // Author 2 and tag 1 are not the caller's to read.
      return new Map(ids.filter((id) => (collection === 'authors' ? id === 1 : id === 2)).map((id) => [id, { url: `/api/v1/${collection}/${id}/` }]));
    });
    expect(asked).toEqual([['authors', [1, 2]], ['tags', [1, 2]]]);
    expect(records.map((record) => record.expand)).toEqual([
      { author: { url: '/api/v1/authors/1/' }, tags: [{ url: '/api/v1/tags/2/' }] },
      { author: null, tags: [{ url: '/api/v1/tags/2/' }] },
      { author: null, tags: [] },
    ]);
  });
});

describe('fields (REQUESTS.md §3)', () => {
  it('keeps url, the members named and the expansions named, in the representation order', () => {
    const selection = parseFields(books, 'tags,title,expand.author')!;
    const record = { url: '/u/', id: 1, title: 'T', author: '/a/', tags: [], owner: '/o/', expand: { author: { id: 1 }, tags: [] } };
    expect(pickFields(record, selection)).toEqual({ url: '/u/', title: 'T', tags: [], expand: { author: { id: 1 } } });
    expect(Object.keys(pickFields(record, selection))).toEqual(['url', 'title', 'tags', 'expand']);
    expect(pickFields(record, parseFields(books, 'id')!)).toEqual({ url: '/u/', id: 1 });
    expect(pickColumns(['url', 'id', 'title', 'author'], selection)).toEqual(['url', 'title']);
  });

  it('refuses a name the collection does not show, naming fields', () => {
    expect(refusal(() => parseFields(books, 'title,isbn'))).toEqual({ fields: ['"isbn" is not a field of books.'] });
    expect(refusal(() => parseFields(books, 'expand.publisher'))).toEqual({ fields: ['"expand.publisher" is not a field of books.'] });
  });
});
