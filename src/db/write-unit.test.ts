import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from './database.js';
import type { DynamicDb } from './dynamic-tables.js';
import { appendChanges, holdChanges, readChanges, releaseChanges, stopHoldingChanges, type NewChange } from './change-log.js';
import { inSavepoint } from './write-unit.js';

// A write unit's writes each run in a savepoint of the owner's transaction, nested inside group
// commit's own savepoint on SQLite.
describe('inSavepoint', () => {
  let dir: string;
  let storage: Storage;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'restwire-write-unit-'));
    storage = await openStorage({ dataDir: dir, databaseUrl: null });
    await sql`create table notes (id integer primary key, label text not null unique)`.execute(storage.db);
  });

  afterEach(async () => {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const labels = async () => (await sql<{ label: string }>`select label from notes order by id`.execute(storage.db)).rows.map((row) => row.label);
  const insert = (trx: DynamicDb, label: string) => inSavepoint(trx, (inner) => sql`insert into notes (label) values (${label})`.execute(inner));

  it('rolls back a failing write alone; the others commit with the owner', async () => {
    const outcomes = await storage.transact(async (trx) => {
      const unit = trx as unknown as DynamicDb;
      await insert(unit, 'a');
      const failed = await insert(unit, 'a').then(() => 'stored', () => 'refused');
      await inSavepoint(unit, async (inner) => {
        await insert(inner, 'b');
        await insert(inner, 'c');
      });
      return failed;
    });
    expect(outcomes).toBe('refused');
    expect(await labels()).toEqual(['a', 'b', 'c']);
  });

  it('a failure that escapes the owner rolls back every write of the unit', async () => {
    const other = storage.transact((trx) => sql`insert into notes (label) values ('other')`.execute(trx));
    const owner = storage.transact(async (trx) => {
      await insert(trx as unknown as DynamicDb, 'x');
      await insert(trx as unknown as DynamicDb, 'x');
    });
    await expect(owner).rejects.toThrow(/UNIQUE/);
    await other;
    expect(await labels()).toEqual(['other']);
  });

  // A batch holds its changes to log them in one statement (issue 20); a savepoint that rolls back
  // takes the changes made inside it along, as it takes their rows.
  const change = (recordId: number): NewChange => ({ collection: 'notes', recordId, action: 'created', record: { id: recordId }, changes: null, row: { id: recordId }, previous: null });
  const logged = async () => (await readChanges(storage.db, 0, 100)).map(({ recordId, position }) => [recordId, position]);

  it('held changes are logged in order when released, without those of a savepoint rolled back', async () => {
    await storage.transact(async (trx) => {
      holdChanges(trx);
      await appendChanges(trx, [change(1)]);
      await inSavepoint(trx as unknown as DynamicDb, async () => {
        await appendChanges(trx, [change(2)]);
        throw new Error('this write fails');
      }).catch(() => undefined);
      await inSavepoint(trx as unknown as DynamicDb, () => appendChanges(trx, [change(3)]));
      // Held, not written yet.
      expect((await sql<{ n: number }>`select count(*) as n from change_log`.execute(trx)).rows[0]!.n).toBe(0);
      await releaseChanges(trx);
    });
    expect(await logged()).toEqual([[1, 1], [3, 2]]);
  });

  it('held changes not released are not logged', async () => {
    await storage.transact(async (trx) => {
      holdChanges(trx);
      await appendChanges(trx, [change(4)]);
      stopHoldingChanges(trx);
      await appendChanges(trx, [change(5)]);
    });
    expect((await logged()).map(([recordId]) => recordId)).toEqual([5]);
  });
});
