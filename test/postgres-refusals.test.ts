import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * A PostgreSQL that refuses work the way maintenance and failover do (issue 22, item 21): the
 * database closed to connections, backends ended by an administrator. Each answers 503
 * problem+json with Retry-After, as a refused connection does, and service returns by itself.
 * Only the test's own database is touched. (A connection limit does not bind the superuser the
 * tests connect as; its 53300 is covered by the classifier's unit test.)
 */
const PROBLEM = /^application\/problem\+json/;

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.runIf(process.env.TEST_DATABASE_URL)('a PostgreSQL refusing connections for maintenance', () => {
  let database: TestDatabase;
  let server: RunningServer;
  let admin: pg.Client;
  let name = '';
  const api = () => fetch(`${server.url}/api/v1/experiences/`, { headers: { authorization: adminAuth } });
  /** Ends every connection the server holds to its database (SQLSTATE 57P01 on each). */
  const terminateServerConnections = () =>
    admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [name]);

  async function expectUnavailable(response: Response): Promise<void> {
    expect(response.status).toBe(503);
    expect(response.headers.get('content-type')).toMatch(PROBLEM);
    expect(response.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await response.json()).toMatchObject({ status: 503 });
  }

  beforeAll(async () => {
    database = await createTestDatabase('postgres');
    name = new URL(database.url!).pathname.slice(1);
    server = await startServer(database, { env: { DISPATCHER_IN_SERVE: 'false' } });
    admin = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    await admin.connect();
  }, 60_000);
  afterAll(async () => {
    await admin?.query(`alter database ${name} allow_connections true`);
    await admin?.end();
    await server?.stop();
    await database?.drop();
  });

  it('answers 503 with Retry-After while the database does not accept connections (55000), then 200 again', async () => {
    expect((await api()).status).toBe(200);
    await admin.query(`alter database ${name} allow_connections false`);
    await terminateServerConnections();
    for (let i = 0; i < 3; i++) await expectUnavailable(await api());
    expect(server.output()).not.toMatch(/request failed/);

    await admin.query(`alter database ${name} allow_connections true`);
    await until(async () => (await api()).status === 200, 10_000);
  }, 30_000);

  it('serves on after an administrator ends its connections (57P01)', async () => {
    expect((await api()).status).toBe(200);
    await terminateServerConnections();
    const after = await api();
    // The pool drops the ended connections and opens new ones; a request caught on one is a 503, never a 500.
    if (after.status !== 200) await expectUnavailable(after);
    // A keep-alive socket the server closed after its 503 may be reused once by the client and
    // fail ("other side closed"); that is the client's retry, not the server's failure: a server
    // that stopped serving would never answer 200 here, and the condition would still fail.
    await until(async () => (await api().catch(() => null))?.status === 200, 10_000);
    expect(server.output()).not.toMatch(/request failed/);
  }, 30_000);
});
