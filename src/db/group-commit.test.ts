import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from './database.js';

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
