import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import { build } from 'rolldown';
import { afterEach, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from './database.js';
import type { MigrationFile } from './migration-files.js';
import type { Operation } from './migration-operations.js';
import { collectionsWithRows, DataLossError } from './data-loss-guard.js';
import type { AnyDb } from './schema-editor/base.js';
import type { FieldState } from './schema-state.js';
import { BACKENDS, createTestDatabase, type Backend, type TestDatabase } from './test-databases.test-support.js';
import { applyUserMigrations, pendingUserMigrations, UserMigrationError } from './user-migrations.js';

const title: FieldState = { type: 'string', null: false, unique: false, maxLength: 200 };
const optional: FieldState = { type: 'string', null: true, unique: false, maxLength: 200 };
const author: FieldState = { type: 'reference', null: false, unique: false, to: 'authors', onDelete: 'protect' };
const tags: FieldState = { type: 'references', null: false, unique: false, to: 'tags' };

const createAuthors: Operation = { op: 'createCollection', collection: 'authors', owner: false, timestamps: false, fields: { name: title }, indexes: [] };
const createTags: Operation = { op: 'createCollection', collection: 'tags', owner: false, timestamps: false, fields: { label: title }, indexes: [] };
const createBooks: Operation = {
  op: 'createCollection',
  collection: 'books',
  owner: false,
  timestamps: true,
  fields: { title, isbn: optional, author, tags },
  indexes: ['title'],
};

/** Migration files as the folder would give them, one per list of operations. */
function filesOf(...changeSets: Operation[][]): MigrationFile[] {
  return changeSets.map((operations, index) => {
    const name = `${String(index + 1).padStart(4, '0')}_step.json`;
    return { name, path: `/migrations/${name}`, operations };
  });
}

const opened: Array<{ storage: Storage; database: TestDatabase }> = [];
afterEach(async () => {
  for (const { storage, database } of opened.splice(0)) {
    await storage.close().catch(() => {});
    await database.drop();
  }
});

async function open(backend: Backend): Promise<AnyDb> {
  const database = await createTestDatabase(backend, 'user-migrations');
  const storage = await openStorage({ dataDir: database.dataDir, databaseUrl: database.url });
  opened.push({ storage, database });
  return storage.db as unknown as AnyDb;
}

async function rows(db: AnyDb, query: string): Promise<unknown[]> {
  return (await sql.raw(query).execute(db)).rows;
}

/** Every user table's rows and the applied file names: what must not move when a migration fails. */
async function snapshot(db: AnyDb): Promise<Record<string, unknown>> {
  const tables = (await db.introspection.getTables()).map((t) => t.name).filter((name) => !/^(kysely_|settings|users|sessions|refresh_tokens|webhooks|deliveries|experiences)/.test(name));
  const out: Record<string, unknown> = {};
  for (const table of tables.sort()) {
    out[table] = {
      columns: (await db.introspection.getTables()).find((t) => t.name === table)!.columns.map((c) => c.name).sort(),
      rows: await rows(db, `select * from ${table} order by 1`),
    };
  }
  return out;
}

describe.each(BACKENDS)('user migrations on %s', (backend) => {
  it('creates collections with join tables and indexes, and backfills a new field from its default', async () => {
    const db = await open(backend);
    const files = filesOf([createAuthors, createTags, createBooks]);
    expect(await pendingUserMigrations(db, files)).toEqual(files);
    expect(await applyUserMigrations(db, files)).toEqual(['0001_step.json']);
    expect(await collectionsWithRows(db, ['authors', 'books', 'nope'])).toEqual(new Set());

    await rows(db, `insert into authors (name) values ('Le Guin')`);
    await rows(db, `insert into tags (label) values ('sf')`);
    await rows(db, `insert into books (title, author_id, created_at, updated_at) values ('Earthsea', 1, 1, 1)`);
    await rows(db, `insert into books_tags (from_id, to_id) values (1, 1)`);
    expect(await collectionsWithRows(db, ['authors', 'books', 'nope'])).toEqual(new Set(['authors', 'books']));

    const genre: FieldState = { type: 'choice', null: false, unique: false, default: 'fiction' };
    const more = filesOf([createAuthors, createTags, createBooks], [{ op: 'addField', collection: 'books', field: 'genre', state: genre }]);
    // --plan reads only: asking twice gives the same answer.
    expect((await pendingUserMigrations(db, more)).map((f) => f.name)).toEqual(['0002_step.json']);
    expect((await pendingUserMigrations(db, more)).map((f) => f.name)).toEqual(['0002_step.json']);
    expect(await applyUserMigrations(db, more)).toEqual(['0002_step.json']);
    expect(await rows(db, 'select id, title, genre, author_id from books')).toEqual([{ id: 1, title: 'Earthsea', genre: 'fiction', author_id: 1 }]);
    expect(await applyUserMigrations(db, more)).toEqual([]);

    // The join table cascades from either side; the reference column refuses a missing author.
    await rows(db, 'delete from tags where id = 1');
    expect(await rows(db, 'select * from books_tags')).toEqual([]);
    await expect(rows(db, `insert into books (title, author_id, created_at, updated_at) values ('x', 99, 1, 1)`)).rejects.toThrow(/foreign key/i);
  });

  it('makes a field required (filling nulls from its default) and unique, and renames it keeping values', async () => {
    const db = await open(backend);
    const base = [createAuthors, createTags, createBooks];
    await applyUserMigrations(db, filesOf(base));
    await rows(db, `insert into authors (name) values ('A')`);
    await rows(db, `insert into books (title, isbn, author_id, created_at, updated_at) values ('one', null, 1, 1, 1), ('two', '978-2', 1, 1, 1)`);

    const requiredNoDefault = filesOf(base, [{ op: 'alterField', collection: 'books', field: 'isbn', state: { ...optional, null: false } }]);
    const before = await snapshot(db);
    const failure = await applyUserMigrations(db, requiredNoDefault).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(UserMigrationError);
    expect(String(failure)).toMatch(/0002_step\.json failed: books\.isbn becomes required but 1 records have no value/);
    expect(await snapshot(db)).toEqual(before);

    const isbn: FieldState = { ...optional, null: false, unique: true, default: 'unknown' };
    const files = filesOf(base, [{ op: 'alterField', collection: 'books', field: 'isbn', state: isbn }], [{ op: 'renameField', collection: 'books', from: 'isbn', to: 'code' }]);
    expect(await applyUserMigrations(db, files)).toEqual(['0002_step.json', '0003_step.json']);
    expect(await rows(db, 'select id, code from books order by id')).toEqual([
      { id: 1, code: 'unknown' },
      { id: 2, code: '978-2' },
    ]);
    await expect(rows(db, `insert into books (title, code, author_id, created_at, updated_at) values ('three', '978-2', 1, 1, 1)`)).rejects.toThrow(/unique/i);
    await rows(db, `insert into books (title, code, author_id, created_at, updated_at) values ('three', '978-3', 1, 1, 1)`);
  });

  it('refuses to remove a field or collection holding data unless allowed, and leaves the database as it was', async () => {
    const db = await open(backend);
    const base = [createAuthors, createTags, createBooks];
    await applyUserMigrations(db, filesOf(base));
    await rows(db, `insert into authors (name) values ('A')`);
    await rows(db, `insert into books (title, isbn, author_id, created_at, updated_at) values ('one', '978-1', 1, 1, 1)`);

    const removeIsbn = filesOf(base, [
      { op: 'addField', collection: 'books', field: 'pages', state: { type: 'integer', null: true, unique: false } },
      { op: 'removeField', collection: 'books', field: 'isbn' },
    ]);
    const before = await snapshot(db);
    const failure = await applyUserMigrations(db, removeIsbn).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(DataLossError);
    expect(String(failure)).toMatch(/0002_step\.json: removing field books\.isbn would delete its values; run migrate with --allow-data-loss/);
    expect(failure).toMatchObject({ collection: 'books', field: 'isbn' });
    expect(await snapshot(db)).toEqual(before);
    expect(await pendingUserMigrations(db, removeIsbn)).toHaveLength(1);

    expect(await applyUserMigrations(db, removeIsbn, { allowDataLoss: true })).toEqual(['0002_step.json']);
    expect(await rows(db, 'select id, title, pages from books')).toEqual([{ id: 1, title: 'one', pages: null }]);

    const removeBooks = [...removeIsbn, ...filesOf([], [], [{ op: 'removeIndex', collection: 'books', field: 'title' }, { op: 'removeCollection', collection: 'books' }]).slice(2)];
    await expect(applyUserMigrations(db, removeBooks)).rejects.toThrow(/removing collection books would delete its records/);
    expect(await applyUserMigrations(db, removeBooks, { allowDataLoss: true })).toEqual(['0003_step.json']);
    const tables = (await db.introspection.getTables()).map((t) => t.name);
    expect(tables).not.toContain('books');
    expect(tables).not.toContain('books_tags');
  });

  it('changes a table other tables refer to, keeping their rows and references, and ids never reused', async () => {
    const db = await open(backend);
    const base = [createAuthors, createTags, createBooks];
    await applyUserMigrations(db, filesOf(base));
    await rows(db, `insert into authors (name) values ('A'), ('B'), ('C')`);
    await rows(db, `delete from authors where id = 3`);
    await rows(db, `insert into tags (label) values ('sf')`);
    await rows(db, `insert into books (title, author_id, created_at, updated_at) values ('one', 1, 1, 1), ('two', 2, 1, 1)`);
    await rows(db, `insert into books_tags (from_id, to_id) values (1, 1), (2, 1)`);

    // On SQLite each of these rebuilds authors (or tags), which books and books_tags refer to.
    const files = filesOf(base, [
      { op: 'addField', collection: 'authors', field: 'born', state: { type: 'integer', null: true, unique: false } },
      { op: 'alterField', collection: 'authors', field: 'name', state: { ...title, maxLength: 50, unique: true } },
      { op: 'alterCollection', collection: 'tags', owner: false, timestamps: true },
    ]);
    expect(await applyUserMigrations(db, files)).toEqual(['0002_step.json']);
    expect(await rows(db, 'select id, name, born from authors order by id')).toEqual([
      { id: 1, name: 'A', born: null },
      { id: 2, name: 'B', born: null },
    ]);
    expect(await rows(db, 'select id, author_id from books order by id')).toEqual([
      { id: 1, author_id: 1 },
      { id: 2, author_id: 2 },
    ]);
    expect(await rows(db, 'select from_id, to_id from books_tags order by from_id')).toEqual([
      { from_id: 1, to_id: 1 },
      { from_id: 2, to_id: 1 },
    ]);
    expect((await rows(db, 'select created_at from tags'))[0]).toEqual({ created_at: expect.any(Number) });
    // References are still enforced, cascades still run, and a deleted author's id stays unused.
    await expect(rows(db, `insert into books (title, author_id, created_at, updated_at) values ('x', 3, 1, 1)`)).rejects.toThrow(/foreign key/i);
    await rows(db, `delete from books where id = 2`);
    expect(await rows(db, 'select from_id from books_tags')).toEqual([{ from_id: 1 }]);
    await rows(db, `insert into authors (name) values ('D')`);
    expect(await rows(db, `select id from authors where name = 'D'`)).toEqual([{ id: 4 }]);
  });

  it('rolls a failing migration back whole and names its file; later files wait', async () => {
    const db = await open(backend);
    await applyUserMigrations(db, filesOf([createAuthors]));
    await rows(db, `insert into authors (name) values ('Same'), ('Same')`);
    const files = filesOf(
      [createAuthors],
      [
        { op: 'addField', collection: 'authors', field: 'born', state: { type: 'integer', null: true, unique: false } },
        { op: 'addIndex', collection: 'authors', field: 'born' },
        { op: 'alterField', collection: 'authors', field: 'name', state: { ...title, unique: true } },
      ],
      [{ op: 'createCollection', collection: 'later', owner: false, timestamps: false, fields: {}, indexes: [] }],
    );
    const before = await snapshot(db);
    await expect(applyUserMigrations(db, files)).rejects.toThrow(/^0002_step\.json failed: .*unique/i);
    expect(await snapshot(db)).toEqual(before);
    expect((await pendingUserMigrations(db, files)).map((f) => f.name)).toEqual(['0002_step.json', '0003_step.json']);
  });

  it('refuses a required field without default on a collection with records', async () => {
    const db = await open(backend);
    await applyUserMigrations(db, filesOf([createAuthors]));
    await rows(db, `insert into authors (name) values ('A')`);
    const files = filesOf([createAuthors], [{ op: 'addField', collection: 'authors', field: 'email', state: { type: 'email', null: false, unique: false } }]);
    await expect(applyUserMigrations(db, files)).rejects.toThrow(/0002_step\.json failed: authors has records and the new required field authors\.email has no default/);
  });

  it('changes a field type, converting stored values', async () => {
    const db = await open(backend);
    const price: FieldState = { type: 'decimal', null: true, unique: false, maxDigits: 8, decimalPlaces: 2 };
    const year: FieldState = { type: 'string', null: true, unique: false, maxLength: 4 };
    await applyUserMigrations(db, filesOf([{ ...createAuthors, fields: { name: title, price, year } }]));
    await rows(db, `insert into authors (name, price, year) values ('A', 1250, '1969'), ('B', null, null)`);
    const files = filesOf(
      [{ ...createAuthors, fields: { name: title, price, year } }],
      [
        { op: 'alterField', collection: 'authors', field: 'price', state: { ...price, decimalPlaces: 3 } },
        { op: 'alterField', collection: 'authors', field: 'year', state: { type: 'integer', null: true, unique: false } },
      ],
    );
    await applyUserMigrations(db, files);
    expect(await rows(db, 'select price, year from authors order by id')).toEqual([
      { price: 12500, year: 1969 },
      { price: null, year: null },
    ]);
    // Back to two places: 12.505 cannot be kept exactly.
    await rows(db, `update authors set price = 12505 where id = 1`);
    const narrow = [...files, ...filesOf([], [], [{ op: 'alterField', collection: 'authors', field: 'price', state: price }]).slice(2)];
    await expect(applyUserMigrations(db, narrow)).rejects.toBeInstanceOf(DataLossError);
  });

  it('narrows decimalPlaces rounding half away from zero, as the refusal without --allow-data-loss says', async () => {
    const db = await open(backend);
    const price: FieldState = { type: 'decimal', null: true, unique: false, maxDigits: 8, decimalPlaces: 3 };
    const create = { ...createAuthors, fields: { name: title, price } };
    await applyUserMigrations(db, filesOf([create]));
    await rows(db, `insert into authors (name, price) values ('a', 12345), ('b', -12345), ('c', 12344), ('d', -12346), ('e', 12000), ('f', null), ('g', 4), ('h', -5)`);
    const files = filesOf([create], [{ op: 'alterField', collection: 'authors', field: 'price', state: { ...price, decimalPlaces: 2 } }]);
    const before = await snapshot(db);
    const failure = await applyUserMigrations(db, files).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(DataLossError);
    expect(String(failure)).toMatch(/0002_step\.json: narrowing authors\.price from 3 to 2 decimal places would round 6 values half away from zero; run migrate with --allow-data-loss/);
    expect(await snapshot(db)).toEqual(before);

    expect(await applyUserMigrations(db, files, { allowDataLoss: true })).toEqual(['0002_step.json']);
    // 12.345 → 12.35, -12.345 → -12.35, 12.344 → 12.34, -12.346 → -12.35, 0.004 → 0.00, -0.005 → -0.01
    expect((await rows(db, 'select price from authors order by id')).map((row) => (row as { price: unknown }).price)).toEqual([1235, -1235, 1234, -1235, 1200, null, 0, -1]);
  });

  it('refuses, even with --allow-data-loss, to leave a decimal value with more digits before the point than its field holds', async () => {
    const db = await open(backend);
    const amount: FieldState = { type: 'integer', null: true, unique: false };
    const create = { ...createAuthors, fields: { name: title, amount } };
    await applyUserMigrations(db, filesOf([create]));
    // decimal(15, 2) holds 13 digits before the point: 9999999999999.99 at most.
    await rows(db, `insert into authors (name, amount) values ('fits', 9999999999999), ('big', 10000000000000), ('small', -10000000000000), ('none', null)`);
    const toDecimal: FieldState = { type: 'decimal', null: true, unique: false, maxDigits: 15, decimalPlaces: 2 };
    const files = filesOf([create], [{ op: 'alterField', collection: 'authors', field: 'amount', state: toDecimal }]);
    const before = await snapshot(db);
    for (const options of [{}, { allowDataLoss: true }]) {
      const failure = await applyUserMigrations(db, files, options).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(UserMigrationError);
      expect(String(failure)).toMatch(
        /0002_step\.json failed: authors\.amount: 2 values would not fit maxDigits 15 with decimalPlaces 2, no more than 13 digits before the decimal point/,
      );
      expect(await snapshot(db)).toEqual(before);
    }
    await rows(db, `delete from authors where name in ('big', 'small')`);
    expect(await applyUserMigrations(db, files)).toEqual(['0002_step.json']);
    expect(await rows(db, 'select amount from authors order by id')).toEqual([{ amount: 999999999999900 }, { amount: null }]);

    // Rounding can carry a value over the maximum too: 9999.95 (both rows' default) as decimal(5, 1) would be 10000.0.
    const price: FieldState = { type: 'decimal', null: false, unique: false, maxDigits: 6, decimalPlaces: 2 };
    const narrowed = [...files, ...filesOf([], [], [{ op: 'addField', collection: 'authors', field: 'price', state: { ...price, default: 999995 } }], [
      { op: 'alterField', collection: 'authors', field: 'price', state: { ...price, default: 99999, maxDigits: 5, decimalPlaces: 1 } },
    ]).slice(2)];
    await expect(applyUserMigrations(db, narrowed, { allowDataLoss: true })).rejects.toThrow(
      /0004_step\.json failed: authors\.price: 2 values would not fit maxDigits 5 with decimalPlaces 1, no more than 4 digits before the decimal point/,
    );
  });
});

describe.runIf(BACKENDS.includes('postgres'))('user migrations racing on postgres', () => {
  it('applies each file once when two processes migrate together', async () => {
    const database = await createTestDatabase('postgres', 'user-migrations');
    const storages = await Promise.all([0, 1].map(() => openStorage({ dataDir: database.dataDir, databaseUrl: database.url })));
    try {
      const files = filesOf([createAuthors], [createTags], [{ op: 'addField', collection: 'authors', field: 'born', state: { type: 'integer', null: true, unique: false } }]);
      const applied = await Promise.all(storages.map((s) => applyUserMigrations(s.db as unknown as AnyDb, files)));
      expect(applied.flat().sort()).toEqual(files.map((f) => f.name));
      expect(await rows(storages[0]!.db as unknown as AnyDb, 'select count(*)::int as n from restwire_user_migration')).toEqual([{ n: 3 }]);
    } finally {
      await Promise.all(storages.map((s) => s.close()));
      await database.drop();
    }
  });
});

describe('user migrations racing on sqlite', () => {
  // better-sqlite3 waits for SQLite's write lock synchronously, so two migrators in one process
  // would block each other; real processes are needed. They run this module bundled to plain
  // JavaScript (by rolldown, vite's bundler), placed under node_modules so its imports resolve.
  it('applies each file once when several processes migrate together', async () => {
    const root = new URL('../..', import.meta.url).pathname;
    const work = mkdtempSync(join(root, 'node_modules', '.restwire-race-'));
    const database = await createTestDatabase('sqlite', 'user-migrations');
    try {
      const entry = join(work, 'entry.ts');
      writeFileSync(
        entry,
        `export { openStorage } from '${new URL('./database.ts', import.meta.url).pathname}';\n` +
          `export { applyUserMigrations } from '${new URL('./user-migrations.ts', import.meta.url).pathname}';\n`,
      );
      const bundle = join(work, 'bundle.mjs');
      await build({ input: entry, platform: 'node', external: [/^[^./]/], output: { file: bundle, format: 'esm' }, write: true, logLevel: 'silent' });
      const files = filesOf([createAuthors], [createTags], [{ op: 'addField', collection: 'authors', field: 'born', state: { type: 'integer', null: true, unique: false } }]);
      const script = `
        const { openStorage, applyUserMigrations } = await import(${JSON.stringify(bundle)});
        const storage = await openStorage({ dataDir: process.argv[1], databaseUrl: null });
        const applied = await applyUserMigrations(storage.db, JSON.parse(process.argv[2]));
        await storage.close();
        console.log(JSON.stringify(applied));`;
      const run = promisify(execFile);
      mkdirSync(database.dataDir, { recursive: true });
      const outputs = await Promise.all(
        [0, 1, 2].map(() => run(process.execPath, ['--input-type=module', '-e', script, database.dataDir, JSON.stringify(files)])),
      );
      const applied = outputs.flatMap(({ stdout }) => JSON.parse(stdout) as string[]);
      expect(applied.sort()).toEqual(files.map((f) => f.name));
      const storage = await openStorage({ dataDir: database.dataDir, databaseUrl: null });
      const db = storage.db as unknown as AnyDb;
      expect(await rows(db, 'select count(*) as n from restwire_user_migration')).toEqual([{ n: 3 }]);
      expect((await db.introspection.getTables()).find((t) => t.name === 'authors')!.columns.map((c) => c.name)).toEqual(['id', 'name', 'born']);
      await storage.close();
    } finally {
      rmSync(work, { recursive: true, force: true });
      await database.drop();
    }
  });
});
