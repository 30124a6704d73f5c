import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasProgram, startPrivatePostgres, startPrivateRedis, type PrivatePostgres, type PrivateRedis } from './support/private-services.js';
import { adminAuth, createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';

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

describe.skipIf(!hasProgram('redis-server'))('a Redis that hangs', () => {
  let redis: PrivateRedis;
  let database: TestDatabase;
  let server: RunningServer;
  const remaining = async (init: RequestInit = {}) => {
    const started = Date.now();
    const response = await fetch(`${server.url}/api/v1/`, init);
    expect(response.status).toBe(200);
    return { remaining: Number(response.headers.get('x-rate-limit-remaining')), ms: Date.now() - started };
  };

  beforeAll(async () => {
    redis = await startPrivateRedis();
    database = await createTestDatabase('sqlite');
    server = await startServer(database, { env: { REDIS_URL: redis.url, RATE_LIMIT_ANON: '1000/hour' } });
  }, 30_000);
  afterAll(async () => {
    await server?.stop();
    await redis?.remove();
    await database?.drop();
  });

  it('fails open within a bounded time per request, logs the outage and the recovery once, then shares the limit again', async () => {
    expect((await remaining()).remaining).toBe(999);
    expect((await remaining()).remaining).toBe(998);
    redis.hang();

    const during = [];
    for (let i = 0; i < 10; i++) during.push(await remaining({ headers: { authorization: adminAuth } }));
    for (let i = 0; i < 10; i++) during.push(await remaining());
    // Each request waits one command timeout at most (150 ms), not 0.5-1.5 s; most not at all.
    expect(Math.max(...during.map((d) => d.ms))).toBeLessThan(450);
    expect(during.slice(5).every((d) => d.ms < 100)).toBe(true);
    // Counted in this process's memory meanwhile, from a fresh window.
    expect(during.at(-1)!.remaining).toBe(990);
    expect(server.output().match(/rate-limit store \(Redis\) unreachable/g)).toHaveLength(1);

    redis.resume();
    await until(async () => /rate-limit store \(Redis\) reachable again/.test(server.output()), 10_000);
    // Back on the shared count (998 before the hang, less whatever Redis ran of the commands it
    // had received when it stopped), not the process's 990.
    const after = await remaining();
    expect(after.remaining).toBeLessThanOrEqual(997);
    expect(after.remaining).toBeGreaterThan(990);
    expect(server.output().match(/rate-limit store \(Redis\) unreachable/g)).toHaveLength(1);
    expect(server.output().match(/reachable again/g)).toHaveLength(1);
  }, 60_000);
});
