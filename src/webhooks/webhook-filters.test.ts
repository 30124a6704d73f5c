import { sql, type SqlBool } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from '../db/database.js';
import type { DynamicDb } from '../db/dynamic-tables.js';
import { BACKENDS, createTestDatabase, type TestDatabase } from '../db/test-databases.test-support.js';
import type { QueryFilter } from '../resources/filters.js';
import type { Resource } from '../resources/resource.js';
import { WebhookFilters } from './webhook-filters.js';

// Issue 22: a webhook's filter runs inside another user's write. One that fails to run is its
// subscriber's loss (no match), never the writer's: the transaction goes on and commits, on
// SQLite and on PostgreSQL (where a failed statement would abort the whole transaction).

const NOTES = { name: 'notes', table: 'notes', fieldAccess: {} } as unknown as Resource;

const FILTERS: QueryFilter[] = [
  { param: 'title', description: '', schema: {}, read: (value) => ({ condition: (eb) => eb('title', '=', value) }) },
  // Fails when run (no such function), as a filter stored in an older shape might.
  { param: 'broken', description: '', schema: {}, read: () => ({ condition: () => sql<SqlBool>`no_such_function(id) = 1` }) },
];

describe.each(BACKENDS)('webhook filters at write time on %s', (backend) => {
  let database: TestDatabase;
  let storage: Storage;

  beforeEach(async () => {
    database = await createTestDatabase(backend, 'webhook-filters');
    storage = await openStorage({ dataDir: database.dataDir, databaseUrl: database.url }, { migrate: false });
    await sql`create table notes (id integer primary key, title text not null)`.execute(storage.db);
    await sql`insert into notes (id, title) values (1, 'tea')`.execute(storage.db);
  });
  afterEach(async () => {
    await storage.close();
    await database.drop();
  });

  it('a filter that fails to run matches nothing, the others are answered, and the write commits', async () => {
    const filters = new WebhookFilters(storage.db as unknown as DynamicDb, () => FILTERS);
    const webhooks = [
      { id: 1, filter: JSON.stringify({ note: 'title=tea' }) },
      { id: 2, filter: JSON.stringify({ note: 'broken=1' }) },
      { id: 3, filter: JSON.stringify({ note: 'title=coffee' }) },
      // Over the limit of 20 parameters (stored before it existed): matches nothing, never runs.
      { id: 4, filter: JSON.stringify({ note: Array.from({ length: 21 }, () => 'title=tea').join('&') }) },
      { id: 5, filter: JSON.stringify({ other: 'title=tea' }) },
      { id: 6, filter: null },
    ];
    const verdicts = await storage.db.transaction().execute(async (trx) => {
      const found = await filters.verdicts(trx, NOTES, 'note', 1, webhooks);
      // The writer's transaction goes on after the failed filter.
      await sql`insert into notes (id, title) values (2, 'written after')`.execute(trx);
      return found;
    });
    expect(Object.fromEntries(verdicts)).toEqual({ 1: true, 2: false, 3: false, 4: false });
    const { rows } = await sql<{ title: string }>`select title from notes where id = 2`.execute(storage.db);
    expect(rows).toEqual([{ title: 'written after' }]);
    // Asked again (the compiled queries reused), for another record: the same answers, by its values.
    await sql`update notes set title = 'coffee' where id = 2`.execute(storage.db);
    const again = await storage.db.transaction().execute((trx) => filters.verdicts(trx, NOTES, 'note', 2, webhooks));
    expect(Object.fromEntries(again)).toEqual({ 1: false, 2: false, 3: true, 4: false });
  });
});
