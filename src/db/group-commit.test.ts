import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { CompiledQuery, sql, type Transaction } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { appendChanges, holdChanges, readChanges, releaseChanges, type NewChange } from './change-log.js';
import { openStorage, type Storage } from './database.js';
import { sendLater } from './pipelining.js';
import type { Database } from './schema.js';
import { BACKENDS, createTestDatabase, type TestDatabase } from './test-databases.test-support.js';

// Group commit is what SQLite storage does for `transact`; these run it on a real database
// file and look at the rows from a second connection, as another process would.
describe('SQLite group commit (storage.transact)', () => {
  let dir: string;
  let storage: Storage;
  let observer: SQLite.Database;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'restwire-group-commit-'));
    storage = await openStorage({ dataDir: dir, databaseUrl: null });
    await sql`create table notes (id integer primary key, label text not null unique)`.execute(storage.db);
    await sql`create table parents (id integer primary key)`.execute(storage.db);
    await sql`create table children (id integer primary key, parent_id integer not null
      references parents (id) deferrable initially deferred)`.execute(storage.db);
    observer = new SQLite(join(dir, 'restwire.sqlite3'), { readonly: true });
  });

  afterEach(async () => {
    observer.close();
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const labels = () => (observer.prepare('select label from notes order by id').all() as { label: string }[]).map((row) => row.label);
  const insert = (label: string) => storage.transact((trx) => sql`insert into notes (label) values (${label})`.execute(trx));

  it('commits writes that arrive together in one transaction, in arrival order', async () => {
    const seenByOthers: string[][] = [];
    const first = insert('a');
    const second = storage.transact(async (trx) => {
      // The first write is already made in this transaction, and not yet visible outside it.
      seenByOthers.push(labels());
      await sql`insert into notes (label) values ('b')`.execute(trx);
    });
    const third = insert('c');
    await Promise.all([first, second, third]);
    expect(seenByOthers).toEqual([[]]);
    expect(labels()).toEqual(['a', 'b', 'c']);
  });

  it('settles each write only once it is committed', async () => {
    const visibleWhenSettled = await Promise.all(['a', 'b', 'c'].map((label) => insert(label).then(() => labels())));
    for (const visible of visibleWhenSettled) expect(visible).toEqual(['a', 'b', 'c']);
  });

  it('rolls back only the write that failed; the others commit', async () => {
    const outcomes = await Promise.allSettled([
      insert('a'),
      storage.transact(async (trx) => {
        await sql`insert into notes (label) values ('half-done')`.execute(trx);
        throw new Error('refused after writing');
      }),
      insert('a'), // unique violation
      insert('b'),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason.message).toBe('refused after writing');
    expect((outcomes[2] as PromiseRejectedResult).reason.message).toMatch(/UNIQUE/);
    expect(labels()).toEqual(['a', 'b']);
  });

  it('fails every write of the batch when the commit itself fails, and keeps none', async () => {
    const outcomes = await Promise.allSettled([
      insert('a'),
      // A deferred foreign key is checked at COMMIT: this makes the shared commit fail.
      storage.transact((trx) => sql`insert into children (parent_id) values (42)`.execute(trx)),
      insert('b'),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const outcome of outcomes) expect((outcome as PromiseRejectedResult).reason.message).toMatch(/FOREIGN KEY/);
    expect(labels()).toEqual([]);
    // The next writes commit normally.
    await insert('c');
    expect(labels()).toEqual(['c']);
  });

  it('fails every write with the real error when a statement ends the transaction itself', async () => {
    await insert('x');
    const outcomes = await Promise.allSettled([
      insert('a'),
      // OR ROLLBACK ends the whole transaction on the conflict, as a full disk would.
      storage.transact((trx) => sql`insert or rollback into notes (label) values ('x')`.execute(trx)),
      insert('b'),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const outcome of outcomes) expect((outcome as PromiseRejectedResult).reason.message).toMatch(/UNIQUE/);
    expect(labels()).toEqual(['x']);
    await insert('c');
    expect(labels()).toEqual(['x', 'c']);
  });

  it('returns each write its own result, also past one batch', async () => {
    const results = await Promise.all(
      Array.from({ length: 150 }, (_, index) =>
        storage.transact(async (trx) => {
          await sql`insert into notes (label) values (${`n${index}`})`.execute(trx);
          return index;
        }),
      ),
    );
    expect(results).toEqual(Array.from({ length: 150 }, (_, index) => index));
    expect(labels()).toHaveLength(150);
  });
});

// The same guarantees where the units' changes are logged too, on both databases: on PostgreSQL a
// unit's release goes out with the next unit's savepoint without waiting, once the unit's own
// statements have answered, and the units' change-log rows go in one statement after the last.
describe.each(BACKENDS)('group commit with the change log (%s)', (backend) => {
  let database: TestDatabase;
  let storage: Storage;

  beforeEach(async () => {
    database = await createTestDatabase(backend, 'group-commit');
    storage = await openStorage({ dataDir: database.dataDir, databaseUrl: database.url });
    const id = backend === 'sqlite' ? 'integer primary key' : 'integer generated by default as identity primary key';
    await sql`create table notes (id ${sql.raw(id)}, label text not null unique)`.execute(storage.db);
  });

  afterEach(async () => {
    await storage.close();
    await database.drop();
  });

  const change = (label: string, recordId: number): NewChange => ({
    collection: 'notes',
    recordId,
    action: 'created',
    record: { label },
    changes: null,
    row: { label },
    previous: null,
  });
  /** A write as the viewset makes one: its row, awaited, then its change. */
  const write = (label: string, recordId: number, after?: (trx: Transaction<Database>) => Promise<void>) =>
    storage.transact(async (trx) => {
      await sql`insert into notes (id, label) values (${recordId}, ${label})`.execute(trx);
      await appendChanges(trx, [change(label, recordId)]);
      await after?.(trx);
      return label;
    });
  const labels = async () => (await sql<{ label: string }>`select label from notes order by id`.execute(storage.db)).rows.map((row) => row.label);
  const logged = async () => (await readChanges(storage.db, 0, 100)).map((entry) => [entry.position, entry.recordId]);

  it("commits each unit's row and change, and nothing of a unit that failed, whatever failed in it", async () => {
    const outcomes = await Promise.allSettled([
      write('a', 1),
      write('b', 2),
      // Fails after its row and change: both roll back.
      write('refused', 3, async () => {
        throw new Error('refused after writing');
      }),
      // Its own statement fails (after the last unit's release went out without waiting).
      write('a', 4),
      write('c', 5),
      // A statement it sent without waiting fails: caught at its release, in its own savepoint.
      write('d', 6, (trx) => sendLater(trx, CompiledQuery.raw("insert into notes (id, label) values (7, 'b')"))),
      write('e', 8),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'rejected', 'fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[2] as PromiseRejectedResult).reason.message).toBe('refused after writing');
    expect((outcomes[3] as PromiseRejectedResult).reason.message).toMatch(/UNIQUE|duplicate key/);
    expect((outcomes[5] as PromiseRejectedResult).reason.message).toMatch(/UNIQUE|duplicate key/);
    expect(await labels()).toEqual(['a', 'b', 'c', 'e']);
    // Numbered in the order the units ran, with no gap where a unit rolled back.
    expect(await logged()).toEqual([[1, 1], [2, 2], [3, 5], [4, 8]]);
  });

  it('logs a batch request’s changes with those of the units around it', async () => {
    const outcomes = await Promise.allSettled([
      write('a', 1),
      storage.transact(async (trx) => {
        // A batch request holds its changes; inside a group commit's transaction, the group's hold keeps them.
        const holding = holdChanges(trx);
        await sql`insert into notes (id, label) values (2, 'b'), (3, 'c')`.execute(trx);
        await appendChanges(trx, [change('b', 2), change('c', 3)]);
        if (holding) await releaseChanges(trx);
      }),
      write('d', 4),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    expect(await logged()).toEqual([[1, 1], [2, 2], [3, 3], [4, 4]]);
  });
});
