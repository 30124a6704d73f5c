import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from './database.js';
import type { DynamicDb } from './dynamic-tables.js';
import { isPreparedStatementOutdated } from './outage.js';
import { createTestDatabase, type TestDatabase } from './test-databases.test-support.js';

// PostgreSQL only: SQLite's statements are kept by better-sqlite3. Runs when TEST_DATABASE_URL is
// set, as .ci/run does.
describe.runIf(process.env.TEST_DATABASE_URL)('statements prepared by the PostgreSQL driver (db/pipelining.ts)', () => {
  let database: TestDatabase;
  let storage: Storage;
  let db: DynamicDb;

  beforeEach(async () => {
    database = await createTestDatabase('postgres', 'prepared');
    storage = await openStorage({ dataDir: database.dataDir, databaseUrl: database.url });
    db = storage.db as unknown as DynamicDb;
    await sql`create table gadgets (id serial primary key, name text not null)`.execute(db);
    await sql`insert into gadgets (name) values ('lamp')`.execute(db);
  });

  afterEach(async () => {
    await storage.close();
    await database.drop();
  });

  const read = (executor: DynamicDb) => executor.selectFrom('gadgets').selectAll().where('id', '=', 1).execute();

  it('prepares a statement with parameters once it has run a few times, on the connection that runs it', async () => {
    const names = await db.connection().execute(async (connection) => {
      for (let run = 0; run < 5; run++) expect(await read(connection)).toEqual([{ id: 1, name: 'lamp' }]);
      const { rows } = await sql<{ statement: string }>`select statement from pg_prepared_statements`.execute(connection);
      return rows.map((row) => row.statement);
    });
    expect(names).toContain('select * from "gadgets" where "id" = $1');
  });

  it('reads the new columns after a migration changed a prepared statement’s result columns', async () => {
    const after = await db.connection().execute(async (connection) => {
      for (let run = 0; run < 5; run++) await read(connection);
      await sql`alter table gadgets add column colour text not null default 'red'`.execute(connection);
      // PostgreSQL refuses to run the old prepared statement ("cached plan must not change result
      // type"); outside a transaction the driver runs it again at once, under a new name.
      return await read(connection);
    });
    expect(after).toEqual([{ id: 1, name: 'lamp', colour: 'red' }]);
  });

  it('fails a transaction once on such a statement, and runs the next one', async () => {
    const outcomes = await db.connection().execute(async (connection) => {
      for (let run = 0; run < 5; run++) await read(connection);
      await sql`alter table gadgets add column colour text not null default 'red'`.execute(connection);
      const inTransaction = () => connection.transaction().execute((trx) => read(trx));
      // The write's 503 (http/problem-handler.ts) says to try again.
      const first = await inTransaction().then(() => 'read', (error: unknown) => (isPreparedStatementOutdated(error) ? 'outdated' : error));
      return [first, await inTransaction()];
    });
    expect(outcomes).toEqual(['outdated', [{ id: 1, name: 'lamp', colour: 'red' }]]);
  });
});
