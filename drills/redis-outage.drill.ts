import { afterAll, describe, expect, it } from 'vitest';
import { startPrivateRedis, type PrivateRedis } from '../test/support/private-services.js';
import { createTestDatabase, startServer, type RunningServer, type TestDatabase } from '../test/support/server.js';
import { percentile, report, requirePrograms, sleep, until } from './support.js';

/**
 * Drill 3 (issue 11): two servers share a rate limit through a private redis-server, which is
 * then hung (SIGSTOP) and later killed (SIGKILL) and started again. While it is away every
 * request is served (fail-open) within one 150 ms command at most, each process logs the
 * outage once and the recovery once, and the shared count is back when Redis is.
 */
const UNREACHABLE = /rate-limit store \(Redis\) unreachable/g;
const BACK = /rate-limit store \(Redis\) reachable again/g;
const count = (server: RunningServer, pattern: RegExp) => server.output().match(pattern)?.length ?? 0;

describe('Redis killed and hung', () => {
  let redis: PrivateRedis;
  const databases: TestDatabase[] = [];
  const servers: RunningServer[] = [];
  afterAll(async () => {
    for (const server of servers) await server.stop('SIGKILL');
    await redis?.remove();
    for (const database of databases) await database.drop();
  });

  it('fails open within a bounded time, logs each outage once, and shares the limit again', async () => {
    const drillStarted = Date.now();
    requirePrograms('redis-server');
    redis = await startPrivateRedis();
    for (let i = 0; i < 2; i++) {
      databases.push(await createTestDatabase('sqlite'));
      servers.push(await startServer(databases[i]!, { env: { REDIS_URL: redis.url, RATE_LIMIT_ANON: '100000/hour', DISPATCHER_IN_SERVE: 'false' } }));
    }
    const [a, b] = servers as [RunningServer, RunningServer];

    /** Anonymous requests alternating between the two servers (one key: 127.0.0.1). */
    const alternate = async (n: number) => {
      const seen: Array<{ remaining: number; ms: number }> = [];
      for (let i = 0; i < n; i++) {
        const started = performance.now();
        const response = await fetch(`${(i % 2 ? b : a).url}/api/v1/`);
        const ms = performance.now() - started;
        expect(response.status).toBe(200);
        seen.push({ remaining: Number(response.headers.get('x-rate-limit-remaining')), ms });
      }
      return seen;
    };
    /** Whether each request counted against one shared window (remaining falls by one each time). */
    const shared = (seen: Array<{ remaining: number }>) => seen.every((s, i) => i === 0 || s.remaining === seen[i - 1]!.remaining - 1);

    const healthy = await alternate(20);
    expect(shared(healthy)).toBe(true);
    const figures: Record<string, unknown> = { healthyP99Ms: Math.round(percentile(healthy.map((s) => s.ms), 0.99)) };

    for (const fault of ['hung', 'killed'] as const) {
      const outagesBefore = count(a, UNREACHABLE);
      if (fault === 'hung') redis.hang();
      else await redis.kill();
      const during = await alternate(40);
      const ms = during.map((s) => s.ms);
      // Each request waits one command timeout (150 ms) at most; with margin for a busy machine.
      expect(Math.max(...ms)).toBeLessThan(600);
      expect(shared(during)).toBe(false); // counted per process meanwhile
      for (const server of servers) expect(count(server, UNREACHABLE)).toBe(outagesBefore + 1);

      const returnedAt = Date.now();
      if (fault === 'hung') redis.resume();
      else await redis.restart();
      await until(() => servers.every((server) => count(server, BACK) === outagesBefore + 1), 15_000, `recovery from a ${fault} Redis not logged`);
      const recoveryMs = Date.now() - returnedAt;
      await sleep(200);
      const after = await alternate(20);
      expect(shared(after)).toBe(true);
      for (const server of servers) {
        expect(count(server, UNREACHABLE)).toBe(outagesBefore + 1);
        expect(count(server, BACK)).toBe(outagesBefore + 1);
      }
      figures[fault] = {
        requests: during.length,
        p50Ms: Math.round(percentile(ms, 0.5)),
        p99Ms: Math.round(percentile(ms, 0.99)),
        maxMs: Math.round(Math.max(...ms)),
        over150Ms: ms.filter((t) => t > 150).length,
        recoveryLoggedAfterMs: recoveryMs,
        sharedAgainFromRemaining: after[0]!.remaining,
      };
    }
    report('redis-outage', {
      servers: servers.length,
      ...figures,
      outagesLoggedPerServer: count(a, UNREACHABLE),
      recoveriesLoggedPerServer: count(a, BACK),
      refused: 0,
      seconds: Math.round((Date.now() - drillStarted) / 1000),
    });
  });
});
