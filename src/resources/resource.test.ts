import { describe, expect, it } from 'vitest';
import { field } from './fields/index.js';
import { buildRegistry, declaredState } from './registry.js';
import { defineResource, type ResourceOptions } from './resource.js';

const books = (overrides: Partial<ResourceOptions> = {}): ResourceOptions => ({
  name: 'books',
  fields: { title: field.string({ maxLength: 200 }), author: field.reference('authors', { nullable: true, onDelete: 'setNull' }) },
  ...overrides,
});

describe('defineResource (RESOURCES.md §1)', () => {
  it('names the collection and the field of every mistake', () => {
    expect(() => defineResource(books({ orderings: ['nope'] }))).toThrow('collection "books", field "nope"');
    expect(() => defineResource(books({ filters: { title: ['near' as 'exact'] } }))).toThrow(/field "title": unknown lookup "near"/);
    expect(() => defineResource(books({ name: 'users' }))).toThrow(/reserved/);
    // `expand` is the member `?expand=` fills (REQUESTS.md §2).
    expect(() => defineResource(books({ fields: { expand: field.json() } }))).toThrow(/field "expand": "expand" is set by restwire/);
    expect(() => defineResource(books({ name: 'Books' }))).toThrow(/\[a-z\]/);
    expect(() => defineResource({ ...books(), colour: 'red' } as ResourceOptions)).toThrow(/unknown option "colour"/);
    expect(() => defineResource(books({ fields: { title: field.string({ maxLength: 9, size: 3 } as never) } }))).toThrow(
      /field "title": unknown option "size"/,
    );
    expect(() => defineResource(books({ fields: { title: 'string' as never } }))).toThrow(/field "title": unknown field type/);
    expect(() => defineResource(books({ fields: { title: (field as unknown as Record<string, () => never>).strnig!() } }))).toThrow(
      /field "title": unknown field type "field.strnig"/,
    );
    expect(() => defineResource(books({ fields: { title: field.string({} as never) } }))).toThrow(/field "title": field.string: option maxLength is required/);
  });

  it('refuses an ordering, filter, search or related list named like an Object method (issue 22)', () => {
    for (const name of ['constructor', 'toString', 'hasOwnProperty']) {
      expect(() => defineResource(books({ orderings: [name] }))).toThrow(`collection "books", field "${name}": cannot order by "${name}"`);
      expect(() => defineResource(books({ filters: { [name]: ['exact'] } }))).toThrow(`collection "books", field "${name}": cannot filter on "${name}"`);
      expect(() => defineResource(books({ search: [name] }))).toThrow(`collection "books", field "${name}": search needs text fields`);
    }
    const authors = defineResource({ name: 'authors', fields: { name: field.string({ maxLength: 50 }) }, related: { constructor: { collection: 'books', field: 'author' } } });
    expect(authors.related).toHaveProperty('constructor');
    const relatedByMethod = defineResource({ name: 'authors', fields: { name: field.string({ maxLength: 50 }) }, related: { books: { collection: 'books', field: 'constructor' } } });
    expect(() =>
      buildRegistry([
        { resource: defineResource(books()), file: 'books.ts' },
        { resource: relatedByMethod, file: 'authors.ts' },
      ]),
    ).toThrow('authors.ts: collection "authors", field "books": "books.constructor" is not a reference to authors');
  });

  it('checks references and events across collections in the registry', () => {
    expect(() => buildRegistry([{ resource: defineResource(books()), file: 'resources/books.ts' }])).toThrow(
      'resources/books.ts: collection "books", field "author": refers to "authors", which no declaration names',
    );
    const authors = defineResource({ name: 'authors', fields: { name: field.string({ maxLength: 50 }) }, event: 'book' });
    expect(() =>
      buildRegistry([
        { resource: defineResource(books({ event: 'book' })), file: 'b.ts' },
        { resource: authors, file: 'a.ts' },
      ]),
    ).toThrow(/event "book" is also the event of "books"/);
  });

  it('describes the tables the declarations need', () => {
    const authors = defineResource({ name: 'authors', fields: { name: field.string({ maxLength: 50, unique: true }) }, owner: true });
    const registry = buildRegistry([
      { resource: authors, file: null },
      { resource: defineResource(books({ orderings: ['title'] })), file: null },
    ]);
    expect(declaredState(registry)).toEqual({
      authors: { owner: true, timestamps: true, fields: { name: { type: 'string', null: false, unique: true, maxLength: 50 } }, indexes: ['owner'] },
      books: {
        owner: false,
        timestamps: true,
        fields: {
          title: { type: 'string', null: false, unique: false, maxLength: 200 },
          author: { type: 'reference', null: true, unique: false, to: 'authors', onDelete: 'setNull' },
        },
        indexes: ['author', 'title'],
      },
    });
    expect(registry.users.related).toEqual({ authors: { collection: 'authors', field: 'owner' } });
  });
});

describe('declarations that cannot be served (review findings)', () => {
  const authors = () => defineResource({ name: 'authors', fields: { name: field.string({ maxLength: 50 }) } });

  it('refuses default null without nullable, contains on a number, eventId without event', () => {
    expect(() => defineResource(books({ fields: { title: field.string({ maxLength: 5, default: null }) } }))).toThrow(/field "title": default: null needs nullable/);
    expect(() => defineResource(books({ fields: { year: field.integer() }, filters: { year: ['contains'] } }))).toThrow(/field "year": "contains" needs a text field/);
    expect(() => defineResource(books({ eventId: 5 }))).toThrow(/eventId .* needs an event/);
  });

  it('refuses a table restwire or a join table already uses, a shared eventId, an owner anonymous callers could create', () => {
    expect(() => buildRegistry([{ resource: defineResource({ name: 'sessions', fields: {} }), file: 's.ts' }])).toThrow(/s.ts: collection "sessions": the table "sessions" is already one of restwire's own/);
    const shelves = defineResource({ name: 'shelves', fields: { books: field.references('authors') } });
    const joins = defineResource({ name: 'shelves_books', fields: {} });
    expect(() => buildRegistry([{ resource: authors(), file: null }, { resource: shelves, file: null }, { resource: joins, file: 'j.ts' }])).toThrow(
      /the join table of shelves.books/,
    );
    const a = defineResource({ name: 'a_things', fields: {}, event: 'a_thing', eventId: 9 });
    const b = defineResource({ name: 'b_things', fields: {}, event: 'b_thing', eventId: 9 });
    expect(() => buildRegistry([{ resource: a, file: null }, { resource: b, file: 'b.ts' }])).toThrow(/eventId 9 is also the eventId of "a_things"/);
    const open = defineResource({ name: 'notes', fields: {}, owner: true, permission: { name: 'any', hasPermission: () => true, hasObjectPermission: () => true } });
    expect(() => buildRegistry([{ resource: open, file: 'n.ts' }])).toThrow(/owner: true needs a permission that refuses anonymous creates/);
  });
});
