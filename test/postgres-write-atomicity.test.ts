import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * On PostgreSQL a create sends its change-log row, its deliveries and the change log's numbering
 * without waiting for their answers (db/pipelining.ts), and concurrent creates share commits in
 * savepoints (db/group-commit.ts). Whatever fails among them, a create's record, change-log row
 * and deliveries commit together or not at all, and a create answered 201 has all three (issue
 * 21). A trigger makes one statement fail for chosen records only.
 */
describe.runIf(process.env.TEST_DATABASE_URL)('a create on PostgreSQL: record, change-log row and deliveries commit or fail together', () => {
  let database: TestDatabase;
  let server: RunningServer;
  let db: pg.Client;

  const create = (title: string) =>
    fetch(`${server.url}/api/v1/experiences/`, {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ title, q_like_dislike: 'atomicity' }),
    });

  /** What the database holds of a title: its records, its change-log rows (with positions) and its deliveries. */
  async function stored(title: string) {
    const records = await db.query('select id from experiences where title = $1', [title]);
    const changes = await db.query(`select position from change_log where collection = 'experiences' and record like $1`, [`%"${title}"%`]);
    const deliveries = await db.query(`select id from deliveries where event <> 'ping' and payload like $1`, [`%"${title}"%`]);
    return { records: records.rowCount, changes: changes.rows.map((row) => row.position as string | null), deliveries: deliveries.rowCount };
  }

  /** Creates `titles` all at once, so that they share commits; resolves with each one's status. */
  const createTogether = (titles: readonly string[]) => Promise.all(titles.map(async (title) => (await create(title)).status));

  beforeAll(async () => {
    database = await createTestDatabase('postgres');
    // No dispatcher: the deliveries stay in the table to be counted.
    server = await startServer(database, { env: { DISPATCHER_IN_SERVE: 'false', WEBHOOK_ALLOW_PRIVATE: 'true' } });
    db = new pg.Client({ connectionString: database.url! });
    await db.connect();
    const hook = await fetch(`${server.url}/api/v1/webhooks/`, {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ target_url: 'http://127.0.0.1:9/hook', events: ['*'] }),
    });
    expect(hook.status).toBe(201);
    await db.query(`create function restwire_test_refuse() returns trigger language plpgsql as $$ begin raise exception 'refused by the test'; end $$`);
  }, 60_000);
  afterAll(async () => {
    await db?.end();
    await server?.stop();
    await database?.drop();
  });

  // Each statement a create sends without waiting for it, refused for records titled "doomed…".
  // A create's deliveries insert is its own; its change-log row goes in one INSERT with those of
  // the creates that share its commit (db/group-commit.ts), so that INSERT refused fails them
  // all: each is then a 500 that leaves nothing, and a create answered 201 keeps everything.
  const refusals = [
    ['the deliveries insert', 'deliveries', `before insert on deliveries for each row when (new.payload like '%"doomed%')`, 'its own'],
    ['the change-log insert', 'change_log', `before insert on change_log for each row when (new.record like '%"doomed%')`, 'shared'],
  ] as const;

  it.each(refusals)('%s refused: that create is a 500 and leaves nothing; every create answered 201 keeps everything', async (_, table, when, statement) => {
    await db.query(`create trigger restwire_test_refusal ${when} execute function restwire_test_refuse()`);
    try {
      const titles = Array.from({ length: 12 }, (_, i) => (i % 3 === 1 ? `doomed ${table} ${i}` : `kept ${table} ${i}`));
      const statuses = await createTogether(titles);
      for (const [index, title] of titles.entries()) {
        const doomed = title.startsWith('doomed');
        // A statement of its own fails its create alone; a shared one, the creates of that commit.
        if (doomed || statement === 'its own') expect(statuses[index], title).toBe(doomed ? 500 : 201);
        else expect([201, 500], title).toContain(statuses[index]);
        const { records, changes, deliveries } = await stored(title);
        if (statuses[index] === 500) expect({ records, changes, deliveries }, title).toEqual({ records: 0, changes: [], deliveries: 0 });
        else {
          expect({ records, deliveries, changes: changes.length }, title).toEqual({ records: 1, deliveries: 1, changes: 1 });
          expect(changes[0], title).not.toBeNull();
        }
      }
    } finally {
      await db.query(`drop trigger restwire_test_refusal on ${table}`);
    }
    // With the statement no longer refused, creates commit again.
    const kept = `kept after ${table}`;
    expect(await createTogether([kept, `${kept} 2`])).toEqual([201, 201]);
    expect((await stored(kept)).records).toBe(1);
  }, 30_000);

  it('the numbering refused: the create is a 500 and leaves no record, change-log row or delivery; then creates commit again', async () => {
    await db.query(`create trigger restwire_test_refusal before update on change_positions for each row execute function restwire_test_refuse()`);
    try {
      expect(await createTogether(['doomed numbering 1', 'doomed numbering 2'])).toEqual([500, 500]);
      for (const title of ['doomed numbering 1', 'doomed numbering 2']) {
        expect(await stored(title), title).toEqual({ records: 0, changes: [], deliveries: 0 });
      }
    } finally {
      await db.query('drop trigger restwire_test_refusal on change_positions');
    }
    expect(await createTogether(['kept after numbering'])).toEqual([201]);
    const kept = await stored('kept after numbering');
    expect({ records: kept.records, deliveries: kept.deliveries, changes: kept.changes.length }).toEqual({ records: 1, deliveries: 1, changes: 1 });
  }, 30_000);

  it('positions stay dense and unique through the failures: 1 … the number of changes logged', async () => {
    const { rows } = await db.query('select count(*)::int as n, count(distinct position)::int as distinct, min(position)::int as first, max(position)::int as last, count(*) filter (where position is null)::int as unnumbered from change_log');
    expect(rows[0]).toEqual({ n: rows[0].n, distinct: rows[0].n, first: 1, last: rows[0].n, unnumbered: 0 });
    expect(rows[0].n).toBeGreaterThan(16);
  });
});
