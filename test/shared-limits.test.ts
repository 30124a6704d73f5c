import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from './support/private-services.js';
import { expectRateHeaders, rateHeaders } from './support/rate-limits.js';
import { BACKENDS, createTestDatabase, createUser, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * Limits that several processes share (API.md §6 "Rate limits", "Login throttling"; issues #3,
 * #4): one request limit and one login-failure count through Redis, each process on its own
 * without it, and an API that survives losing Redis and picks it up again.
 */
const FORM = 'application/x-www-form-urlencoded';
const REDIS_URL = process.env.TEST_REDIS_URL;
const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();

/** Two `serve` processes on one database. */
async function startPair(database: TestDatabase, env: Record<string, string>): Promise<RunningServer[]> {
  const first = await startServer(database, { env });
  // One dispatcher is enough for a shared database; the second process only serves.
  const second = await startServer(database, { env: { ...env, DISPATCHER_IN_SERVE: 'false' } });
  return [first, second];
}

/** 30 concurrent anonymous requests spread over the processes; the statuses they got. */
async function burst(servers: RunningServer[]): Promise<number[]> {
  const responses = await Promise.all(Array.from({ length: 30 }, (_, i) => fetch(`${servers[i % servers.length]!.url}/api/v1/experiences/`)));
  return responses.map((response) => response.status);
}

const count = (statuses: number[], status: number) => statuses.filter((s) => s === status).length;

async function metric(server: RunningServer, name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const match = new RegExp(`^${name} (\\d+)$`, 'm').exec(text);
  return match ? Number(match[1]) : NaN;
}

const occurrences = (text: string, needle: string) => text.split(needle).length - 1;
const OUTAGE_WARNING = 'rate-limit store (Redis) unreachable';
const RECOVERY_INFO = 'rate-limit store (Redis) reachable again';

async function eventually(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.skipIf(!REDIS_URL).each(BACKENDS)('one limit across processes through Redis, on %s', (backend) => {
  let database: TestDatabase;
  let servers: RunningServer[] = [];
  const prefix = `restwire-test-${randomBytes(6).toString('hex')}`;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
  });
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await database?.drop();
    const redis = new Redis(REDIS_URL!);
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });

  it('two serve processes on one Redis allow exactly the limit between them, not twice it', async () => {
    servers = await startPair(database, { REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: prefix, RATE_LIMIT_ANON: '10/minute' });
    const statuses = await burst(servers);
    expect(count(statuses, 200)).toBe(10);
    expect(count(statuses, 429)).toBe(20);
    // Both processes see the same window.
    const [a, b] = await Promise.all(servers.map((server) => fetch(`${server.url}/api/v1/`)));
    expect([rateHeaders(a!).remaining, rateHeaders(b!).remaining]).toEqual(['0', '0']);
    for (const server of servers) {
      expect(await metric(server, 'restwire_rate_limit_store_errors_total')).toBe(0);
      expect(server.output()).not.toContain(OUTAGE_WARNING);
    }
  });
});

describe.skipIf(!REDIS_URL).each(BACKENDS)('a GET counted through Redis, on %s', (backend) => {
  let database: TestDatabase;
  let server: RunningServer;
  const prefix = `restwire-test-${randomBytes(6).toString('hex')}`;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    server = await startServer(database, { env: { REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: prefix, RATE_LIMIT_ANON: '3/minute' } });
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
    const redis = new Redis(REDIS_URL!);
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });

  // Its read runs beside its count (issue 21): what the read found is answered only if the count allows it.
  it('answers what the read found within the limit, and 429 over it, even for a record that does not exist', async () => {
    const seen = [];
    for (let i = 0; i < 5; i++) {
      const response = await fetch(`${server.url}/api/v1/experiences/${i % 2 === 0 ? 987654 : 1}/`);
      seen.push([response.status, expectRateHeaders(response, 60).remaining]);
    }
    // Record 1 does not exist either in a fresh database: 404 within the limit.
    expect(seen).toEqual([
      [404, 2],
      [404, 1],
      [404, 0],
      [429, 0],
      [429, 0],
    ]);
    const page = await fetch(`${server.url}/api/v1/experiences/`);
    expect(page.status).toBe(429);
    expect(page.headers.get('retry-after')).toMatch(/^\d+$/);
  });
});

describe('without Redis each process counts alone', () => {
  let database: TestDatabase;
  let servers: RunningServer[] = [];
  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
  });
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await database?.drop();
  });

  it('so two processes allow twice the limit (what the Redis store is for)', async () => {
    servers = await startPair(database, { RATE_LIMIT_ANON: '10/minute' });
    const statuses = await burst(servers);
    expect(count(statuses, 200)).toBe(20);
  });
});

describe('Redis unreachable', () => {
  let database: TestDatabase;
  let server: RunningServer;
  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  it('serves on with per-process limits, warns once, and counts the outage in /metrics', async () => {
    // Nothing listens on port 1: every connection attempt is refused, for the whole test.
    server = await startServer(database, { env: { REDIS_URL: 'redis://127.0.0.1:1', RATE_LIMIT_ANON: '3/minute' } });
    const seen = [];
    for (let i = 0; i < 4; i++) {
      const response = await fetch(`${server.url}/api/v1/experiences/`);
      seen.push([response.status, expectRateHeaders(response, 60).remaining]);
    }
    expect(seen).toEqual([
      [200, 2],
      [200, 1],
      [200, 0],
      [429, 0],
    ]);
    // Several reconnect attempts fail meanwhile; still one warning.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(occurrences(server.output(), OUTAGE_WARNING)).toBe(1);
    expect(await metric(server, 'restwire_rate_limit_store_outages_total')).toBe(1);
    expect(await metric(server, 'restwire_rate_limit_store_errors_total')).toBe(4);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
  });
});

/** A private redis-server child on a free port, that this test alone starts and stops. */
class PrivateRedis {
  private child: ChildProcess | null = null;
  constructor(readonly port: number) {}

  static async create(): Promise<PrivateRedis> {
    // Not one the system hands out: it restarts on this port after the outage (see freePort).
    return new PrivateRedis(await freePort());
  }

  async start(): Promise<void> {
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await eventually(() => output.includes('Ready to accept connections') || child.exitCode !== null, 'redis-server to start', 10_000);
    if (child.exitCode !== null) throw new Error(`redis-server exited: ${output}`);
  }

  /** Stops our child (by its own pid) and waits for it to exit. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
}

const REDIS_SERVER = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'].some((path) => existsSync(path));

describe.skipIf(!REDIS_SERVER)('Redis lost and back', () => {
  let database: TestDatabase;
  let server: RunningServer;
  let redis: PrivateRedis;
  const prefix = `restwire-test-${randomBytes(6).toString('hex')}`;
  const key = `${prefix}:rate:anon:127.0.0.1`;
  const counted = async () => {
    const probe = new Redis(redis.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    try {
      await probe.connect();
      return await probe.get(key);
    } finally {
      probe.disconnect();
    }
  };

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    redis = await PrivateRedis.create();
    await redis.start();
  });
  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
    await database?.drop();
  });

  it('falls back to memory during the outage and returns to Redis when it is back, logging each once', async () => {
    server = await startServer(database, {
      env: { REDIS_URL: `redis://127.0.0.1:${redis.port}`, REDIS_KEY_PREFIX: prefix, RATE_LIMIT_ANON: '100/minute' },
    });
    const get = () => fetch(`${server.url}/api/v1/experiences/`);

    expect(rateHeaders(await get()).remaining).toBe('99');
    expect(rateHeaders(await get()).remaining).toBe('98');
    expect(await counted()).toBe('2');

    await redis.stop();
    await eventually(() => server.output().includes(OUTAGE_WARNING), 'the outage warning');
    const during = await get();
    expect(during.status).toBe(200);
    // The in-process fallback starts its own window.
    expect(expectRateHeaders(during, 60).remaining).toBe(99);
    expect(await metric(server, 'restwire_rate_limit_store_outages_total')).toBe(1);
    expect(await metric(server, 'restwire_rate_limit_store_errors_total')).toBeGreaterThanOrEqual(1);

    await redis.start();
    await eventually(() => server.output().includes(RECOVERY_INFO), 'the recovery message');
    const after = await get();
    expect(after.status).toBe(200);
    // Counted in the new (empty) Redis again.
    expect(rateHeaders(after).remaining).toBe('99');
    expect(await counted()).toBe('1');

    const output = server.output();
    expect(occurrences(output, OUTAGE_WARNING)).toBe(1);
    expect(occurrences(output, RECOVERY_INFO)).toBe(1);
    expect(await metric(server, 'restwire_rate_limit_store_outages_total')).toBe(1);
  });
});

describe.runIf(REDIS_URL)('login throttling shared through Redis', () => {
  const prefix = `restwire-test-auth-${randomBytes(4).toString('hex')}`;
  let database: TestDatabase;
  let servers: RunningServer[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    const env = { REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: prefix };
    servers = [await startServer(database, { env }), await startServer(database, { env })];
    await createUser(database, 'shared', 'shared-password-1');
  });
  afterAll(async () => {
    for (const server of servers) await server.stop();
    await database?.drop();
    const redis = new Redis(REDIS_URL!);
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
  });

  it('counts the failures of every process against one limit', async () => {
    const attempt = (server: RunningServer, password: string) =>
      fetch(`${server.url}/api/v1/auth/token/`, { method: 'POST', headers: { 'content-type': FORM }, body: form({ username: 'shared', password }) });
    for (let i = 0; i < 10; i++) expect((await attempt(servers[i % 2]!, 'wrong')).status).toBe(401);
    expect((await attempt(servers[0]!, 'wrong')).status).toBe(429);
    const right = await attempt(servers[1]!, 'shared-password-1');
    expect(right.status).toBe(429);
    expect(Number(right.headers.get('retry-after'))).toBeGreaterThan(800);
  });

  it('lets in concurrent right Basic requests on cold caches, and refuses a guessing burst after 10 failures', async () => {
    await createUser(database, 'busy', 'busy-password-1');
    const basic = `Basic ${Buffer.from('busy:busy-password-1').toString('base64')}`;
    const burst = await Promise.all(
      Array.from({ length: 16 }, (_, i) => fetch(`${servers[i % 2]!.url}/api/v1/users/me/`, { headers: { authorization: basic } })),
    );
    expect(burst.map((r) => r.status)).toEqual(Array(16).fill(200));

    const guesses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        fetch(`${servers[i % 2]!.url}/api/v1/auth/token/`, {
          method: 'POST',
          headers: { 'content-type': FORM },
          body: form({ username: 'busy', password: `guess-${i}` }),
        }),
      ),
    );
    const statuses = guesses.map((r) => r.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(10);
  });
});
