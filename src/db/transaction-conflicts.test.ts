import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from './database.js';
import type { DynamicDb } from './dynamic-tables.js';
import { createTestDatabase, type TestDatabase } from './test-databases.test-support.js';
import { transactAgainOnConflict } from './write-unit.js';

// PostgreSQL only: SQLite has one writer at a time, so no deadlock. Runs when TEST_DATABASE_URL
// is set, as .ci/run does.
describe.runIf(process.env.TEST_DATABASE_URL)('a transaction that loses a deadlock (db/write-unit.ts transactAgainOnConflict)', () => {
  let database: TestDatabase;
  let storage: Storage;
  let other: pg.Client;

  beforeEach(async () => {
    database = await createTestDatabase('postgres', 'conflicts');
    storage = await openStorage({ dataDir: database.dataDir, databaseUrl: database.url });
    await sql`create table slots (id integer primary key, taken_by text)`.execute(storage.db);
    await sql`insert into slots values (1, null), (2, null)`.execute(storage.db);
    other = new pg.Client({ connectionString: database.url! });
    await other.connect();
  });

  afterEach(async () => {
    await other.end();
    await storage.close();
    await database.drop();
  });

  it('runs again once the other transaction is done, and keeps only what the second run wrote', async () => {
    // The other transaction holds slot 2 first.
    await other.query('begin');
    await other.query(`update slots set taken_by = 'other' where id = 2`);
    let othersUpdate: Promise<unknown> | null = null;
    const runs: string[] = [];
    const outcome = transactAgainOnConflict(storage, async (transaction) => {
      const trx = transaction as unknown as DynamicDb;
      runs.push(runs.length === 0 ? 'first' : 'again');
      if (runs.length === 1) {
        // This run waits first, so it is the one PostgreSQL's check finds in the cycle and ends.
        await sql`set local deadlock_timeout = '50ms'`.execute(trx);
        await sql`update slots set taken_by = 'restwire' where id = 1`.execute(trx);
        othersUpdate = other.query(`update slots set taken_by = 'other' where id = 1`);
      } else {
        await sql`update slots set taken_by = 'restwire' where id = 1`.execute(trx);
      }
      await sql`update slots set taken_by = 'restwire' where id = 2`.execute(trx);
      return runs.length;
    });
    // The first run is ended (40P01): the other transaction gets slot 1 and commits; the second
    // run then takes both slots.
    await expect.poll(() => othersUpdate, { timeout: 5_000 }).not.toBeNull();
    await othersUpdate;
    await other.query('commit');
    expect(await outcome).toBe(2);
    expect(runs).toEqual(['first', 'again']);
    const { rows } = await sql<{ id: number; taken_by: string }>`select id, taken_by from slots order by id`.execute(storage.db);
    expect(rows).toEqual([
      { id: 1, taken_by: 'restwire' },
      { id: 2, taken_by: 'restwire' },
    ]);
  });
});
