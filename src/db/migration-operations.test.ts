import { describe, expect, it } from 'vitest';
import {
  applyOperation,
  describeOperation,
  diffStates,
  InvalidOperationError,
  InvalidRenameError,
  replay,
  type Operation,
} from './migration-operations.js';
import type { CollectionState, FieldState, SchemaState } from './schema-state.js';

const title: FieldState = { type: 'string', null: false, unique: false, maxLength: 200 };
const year: FieldState = { type: 'integer', null: true, unique: false };
const isbn: FieldState = { type: 'string', null: true, unique: true, maxLength: 17 };
const author: FieldState = { type: 'reference', null: false, unique: false, to: 'authors', onDelete: 'protect' };
const tags: FieldState = { type: 'references', null: false, unique: false, to: 'tags' };

const collection = (fields: Record<string, FieldState>, more: Partial<CollectionState> = {}): CollectionState => ({
  owner: false,
  timestamps: true,
  fields,
  indexes: [],
  ...more,
});

const library: SchemaState = {
  authors: collection({ name: title }),
  tags: collection({ label: title }),
  books: collection({ title, year, isbn, author, tags }, { owner: true, indexes: ['title', 'year'] }),
};

describe('diffStates', () => {
  it('creates collections after the collections they refer to, and replays to the target', () => {
    const ops = diffStates({}, library);
    expect(ops.map((op) => op.op === 'createCollection' && op.collection)).toEqual(['authors', 'tags', 'books']);
    expect(replay(ops)).toEqual(library);
    expect(describeOperation(ops[2]!)).toBe('Create collection books (5 fields)');
  });

  it('finds nothing between a state and itself', () => {
    expect(diffStates(library, library)).toEqual([]);
  });

  it('is deterministic whatever order the collections were declared in', () => {
    const shuffled: SchemaState = { books: library.books!, tags: library.tags!, authors: library.authors! };
    expect(diffStates({}, shuffled)).toEqual(diffStates({}, library));
  });

  it('removes referring collections before their targets', () => {
    const ops = diffStates(library, {});
    expect(ops).toEqual([
      { op: 'removeCollection', collection: 'books' },
      { op: 'removeCollection', collection: 'tags' },
      { op: 'removeCollection', collection: 'authors' },
    ]);
  });

  it('accepts a self-reference and breaks a reference cycle with a later addField', () => {
    const parent: FieldState = { type: 'reference', null: true, unique: false, to: 'people', onDelete: 'setNull' };
    const self = diffStates({}, { people: collection({ parent }) });
    expect(self).toHaveLength(1);

    const cyclic: SchemaState = {
      a: collection({ b: { ...parent, to: 'b' } }),
      b: collection({ a: { ...parent, to: 'a' } }, { indexes: ['a'] }),
    };
    const ops = diffStates({}, cyclic);
    expect(ops.map((op) => op.op)).toEqual(['createCollection', 'createCollection', 'addField', 'addIndex']);
    expect(replay(ops)).toEqual(cyclic);
  });

  it('finds new, removed and changed fields, owner/timestamps changes and index changes', () => {
    const next: SchemaState = {
      ...library,
      books: collection(
        { title: { ...title, maxLength: 300 }, year, author, tags, pages: year },
        { owner: false, timestamps: true, indexes: ['pages', 'title'] },
      ),
    };
    const ops = diffStates(library, next);
    expect(ops).toEqual([
      { op: 'removeIndex', collection: 'books', field: 'year' },
      { op: 'alterCollection', collection: 'books', owner: false, timestamps: true },
      { op: 'removeField', collection: 'books', field: 'isbn' },
      { op: 'alterField', collection: 'books', field: 'title', state: { ...title, maxLength: 300 } },
      { op: 'addField', collection: 'books', field: 'pages', state: year },
      { op: 'addIndex', collection: 'books', field: 'pages' },
    ]);
    expect(replay(ops, library)).toEqual(next);
    expect(ops.map(describeOperation)).toContain('Remove field books.isbn (data loss)');
  });

  it('reads a rename as remove + add unless told, and as a rename when told', () => {
    const renamed: SchemaState = {
      ...library,
      books: collection({ name: title, year, isbn, author, tags }, { owner: true, indexes: ['name', 'year'] }),
    };
    expect(diffStates(library, renamed).map((op) => op.op)).toEqual([
      'removeIndex',
      'removeField',
      'addField',
      'addIndex',
    ]);
    const ops = diffStates(library, renamed, { renames: [{ collection: 'books', from: 'title', to: 'name' }] });
    expect(ops).toEqual([{ op: 'renameField', collection: 'books', from: 'title', to: 'name' }]);
    expect(replay(ops, library)).toEqual(renamed);
    // The renamed field keeps its place, so a rebuilt table keeps its column order.
    expect(Object.keys(replay(ops, library).books!.fields)).toEqual(['name', 'year', 'isbn', 'author', 'tags']);
  });

  it('refuses a rename whose old field is missing or whose new field is not declared, naming it', () => {
    expect(() => diffStates(library, library, { renames: [{ collection: 'books', from: 'nope', to: 'title' }] })).toThrow(
      new InvalidRenameError('--rename books.nope:title: the migrations have no field books.nope'),
    );
    expect(() => diffStates(library, library, { renames: [{ collection: 'books', from: 'title', to: 'name' }] })).toThrow(
      /no field books\.name is declared/,
    );
  });

  it('replaces a field whose storage changes (column ↔ reference ↔ join table)', () => {
    const next: SchemaState = { ...library, books: { ...library.books!, fields: { ...library.books!.fields, year: { ...author, to: 'tags' } } } };
    expect(diffStates(library, next).map((op) => `${op.op} ${'field' in op ? op.field : ''}`)).toEqual([
      'removeIndex year',
      'removeField year',
      'addField year',
      'addIndex year',
    ]);
  });
});

describe('applyOperation', () => {
  const bad: Array<[string, Operation, RegExp]> = [
    ['a second create', { op: 'createCollection', collection: 'books', owner: false, timestamps: false, fields: {}, indexes: [] }, /already exists/],
    ['a missing collection', { op: 'addField', collection: 'films', field: 'x', state: year }, /no collection films/],
    ['a missing target', { op: 'addField', collection: 'authors', field: 'x', state: { ...author, to: 'films' } }, /refers to films/],
    ['a removed target', { op: 'removeCollection', collection: 'authors' }, /books\.author still refers to it/],
    ['an indexed field', { op: 'removeField', collection: 'books', field: 'year' }, /index must be removed first/],
    ['a taken column', { op: 'addField', collection: 'books', field: 'author_id', state: year }, /column author_id, which is taken/],
    ['an index on a join table', { op: 'addIndex', collection: 'books', field: 'tags' }, /cannot be indexed|not a column/],
    ['a kind change in place', { op: 'alterField', collection: 'books', field: 'year', state: tags }, /remove it and add it anew/],
  ];
  it.each(bad)('throws a clear error on %s', (_case, op, message) => {
    expect(() => applyOperation(library, op)).toThrow(InvalidOperationError);
    expect(() => applyOperation(library, op)).toThrow(message);
  });

  it('keeps the owner/timestamp index columns valid', () => {
    const indexed = applyOperation(library, { op: 'addIndex', collection: 'books', field: 'owner' });
    expect(indexed.books!.indexes).toEqual(['owner', 'title', 'year']);
    expect(() => applyOperation(indexed, { op: 'alterCollection', collection: 'books', owner: false, timestamps: true })).toThrow(
      /index on owner must be removed first/,
    );
  });
});
