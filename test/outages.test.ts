import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasProgram, startPrivatePostgres, type PrivatePostgres } from './support/private-services.js';
import { adminAuth, startServer, type RunningServer } from './support/server.js';

/**
 * Dependency outages seen from outside (issue 11, findings 6 and 9): what clients get while
 * the database is down, what the log says, and that service returns by itself.
 */
const PROBLEM = /^application\/problem\+json/;
const count = (text: string, pattern: RegExp) => text.match(new RegExp(pattern, 'g'))?.length ?? 0;

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe.skipIf(!hasProgram('initdb') || !hasProgram('pg_ctl'))('a PostgreSQL outage', () => {
  let postgres: PrivatePostgres;
  let server: RunningServer;
  const api = (path: string, init: RequestInit = {}) => fetch(`${server.url}${path}`, init);

  beforeAll(async () => {
    postgres = await startPrivatePostgres();
    server = await startServer(
      { backend: 'postgres', env: { DATABASE_URL: postgres.url }, url: postgres.url, drop: async () => {} },
      { env: { DISPATCHER_IN_SERVE: 'false' } },
    );
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    postgres?.remove();
  });

  it('answers 503 problem+json with Retry-After, logs the outage once and its end once, then serves again', async () => {
    expect((await api('/api/v1/experiences/')).status).toBe(200);
    postgres.stop();

    for (let i = 0; i < 10; i++) {
      for (const init of [{}, { headers: { authorization: adminAuth } }]) {
        const response = await api('/api/v1/experiences/', init);
        expect(response.status).toBe(503);
        expect(response.headers.get('content-type')).toMatch(PROBLEM);
        expect(response.headers.get('retry-after')).toMatch(/^\d+$/);
        expect(await response.json()).toMatchObject({ status: 503 });
      }
    }
    expect((await api('/readyz')).status).toBe(503);
    const during = server.output();
    expect(count(during, /database unreachable/)).toBe(1);
    expect(during).not.toMatch(/request failed/);

    postgres.start();
    await until(async () => (await api('/api/v1/experiences/')).status === 200, 15_000);
    expect((await api('/readyz')).status).toBe(200);
    await until(async () => /database reachable again/.test(server.output()), 5_000);
    expect(count(server.output(), /database reachable again/)).toBe(1);
    expect(count(server.output(), /database unreachable/)).toBe(1);
  }, 60_000);
});
