import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from './database.js';
import { isDatabaseUnavailable } from './outage.js';
import { asAdmin, createTestDatabase, type TestDatabase } from './test-databases.test-support.js';

// PostgreSQL only: an SQLite file has no connection to lose. Runs when TEST_DATABASE_URL is set,
// as .ci/run does.
describe.runIf(process.env.TEST_DATABASE_URL)('a PostgreSQL connection ended while a transaction holds it', () => {
  let database: TestDatabase;
  let storage: Storage;

  beforeEach(async () => {
    database = await createTestDatabase('postgres', 'database');
    storage = await openStorage({ dataDir: database.dataDir, databaseUrl: database.url });
  });

  afterEach(async () => {
    await storage.close();
    await database.drop();
  });

  it('fails that transaction as unavailable, does not bring the process down, and serves the next', async () => {
    // The connection the transaction holds has no query running when the server ends it
    // (57P01): node-postgres then emits 'error' on the client, which crashed the process before
    // (postgres-outage drill, postgres-refusals test) unless something listens.
    let held: pg.PoolClient | undefined;
    storage.pool!.on('acquire', (client) => (held = client));
    const outcome = storage.transact(async (trx) => {
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
      // Its 'end' follows the 'error'; without a listener the error is thrown (uncaught: vitest
      // fails the run) and 'end' never comes, hence the bound.
      const closed = new Promise((resolve) => {
        held!.once('end', resolve);
        setTimeout(resolve, 5_000).unref();
      });
      await asAdmin('select pg_terminate_backend($1)', [rows[0]!.pid]);
      await closed;
      await sql`select 1`.execute(trx);
    });
    const error = await outcome.then(() => null, (failure: unknown) => failure);
    expect(error).not.toBeNull();
    expect(isDatabaseUnavailable(error)).toBe(true);
    const { rows } = await sql<{ one: number }>`select 1 as one`.execute(storage.db);
    expect(rows).toEqual([{ one: 1 }]);
  });

});
