import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from './database.js';
import type { DynamicDb } from './dynamic-tables.js';
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
});
