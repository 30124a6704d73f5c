import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * Rate limits as a client sees them (SEED.md §8; API.md §1, §6 "Rate limits", "CORS"; issue #4):
 * the X-Rate-Limit-* headers on every /api/v1/ response, 429 with Retry-After, the key, and one
 * limit shared by several processes through Redis, which the API survives losing.
 */
const FORM = 'application/x-www-form-urlencoded';
const JSON_TYPE = 'application/json';
const REDIS_URL = process.env.TEST_REDIS_URL;

const rateHeaders = (response: Response) => ({
  limit: response.headers.get('x-rate-limit-limit'),
  remaining: response.headers.get('x-rate-limit-remaining'),
  reset: response.headers.get('x-rate-limit-reset'),
});

/** The three headers are there, as integers, and Reset is seconds left in the window (never a timestamp). */
function expectRateHeaders(response: Response, windowSeconds: number): { limit: number; remaining: number; reset: number } {
  const headers = rateHeaders(response);
  expect(headers, `${response.status} ${response.url}`).toEqual({
    limit: expect.stringMatching(/^\d+$/),
    remaining: expect.stringMatching(/^\d+$/),
    reset: expect.stringMatching(/^\d+$/),
  });
  const reset = Number(headers.reset);
  expect(reset).toBeLessThanOrEqual(windowSeconds);
  return { limit: Number(headers.limit), remaining: Number(headers.remaining), reset };
}

const noRateHeaders = (response: Response) => expect(rateHeaders(response)).toEqual({ limit: null, remaining: null, reset: null });

/** Fetches against one server without following redirects; `from` sets X-Forwarded-For. */
function client(server: () => RunningServer) {
  return (path: string, init: RequestInit & { from?: string } = {}) => {
    const { from, headers, ...rest } = init;
    const all = new Headers(headers);
    if (from) all.set('x-forwarded-for', from);
    return fetch(`${server().url}${path}`, { redirect: 'manual', ...rest, headers: all });
  };
}

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

describe.each(BACKENDS)('rate-limit headers on every /api/v1/ response, on %s', (backend) => {
  let database: TestDatabase;
  let server: RunningServer;
  const api = client(() => server);
  const bob = basic('bob', 'bob-password-1');
  let record: string;
  let etag: string;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    server = await startServer(database, {
      env: { RATE_LIMIT_ANON: '1000/hour', RATE_LIMIT_USER: '2000/hour', CORS_ORIGINS: '*' },
    });
    await createUser(database, 'bob', 'bob-password-1');
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  it('201, 200, 304, 204', async () => {
    const created = await api('/api/v1/experiences/', {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': FORM },
      body: 'title=Sunrise&q_like_dislike=like',
    });
    expect(created.status).toBe(201);
    expect(expectRateHeaders(created, 3600).limit).toBe(2000);
    record = created.headers.get('location')!;

    const read = await api(record);
    expect(read.status).toBe(200);
    expect(expectRateHeaders(read, 3600).limit).toBe(1000);
    etag = read.headers.get('etag')!;

    const notModified = await api(record, { headers: { 'if-none-match': etag } });
    expect(notModified.status).toBe(304);
    expectRateHeaders(notModified, 3600);

    const scratch = await api('/api/v1/experiences/', {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': FORM },
      body: 'title=Scratch&q_like_dislike=x',
    });
    const deleted = await api(scratch.headers.get('location')!, { method: 'DELETE', headers: { authorization: adminAuth } });
    expect(deleted.status).toBe(204);
    expectRateHeaders(deleted, 3600);
  });

  it('308 to the trailing-slash form, /api/v1 itself included', async () => {
    for (const [path, location] of [
      ['/api/v1/experiences', '/api/v1/experiences/'],
      ['/api/v1', '/api/v1/'],
      ['/api/v1?x=1', '/api/v1/?x=1'],
    ]) {
      const response = await api(path!);
      expect(response.status).toBe(308);
      expect(response.headers.get('location')).toBe(location);
      expectRateHeaders(response, 3600);
    }
  });

  it('400, 401, 403, 404, 405, 406, 412, 413, 415', async () => {
    const write = (auth: string, init: RequestInit) => ({ ...init, headers: { authorization: auth, ...(init.headers as Record<string, string>) } });
    const cases: Array<[number, string, RequestInit]> = [
      [400, '/api/v1/experiences/', write(adminAuth, { method: 'POST', headers: { 'content-type': JSON_TYPE }, body: '{bad' })],
      [401, '/api/v1/experiences/', { method: 'POST', headers: { 'content-type': FORM }, body: 'title=x' }],
      [401, '/api/v1/experiences/', { headers: { authorization: basic('bob', 'wrong-password') } }],
      [403, record, write(bob, { method: 'PATCH', headers: { 'content-type': JSON_TYPE }, body: '{"title":"mine"}' })],
      [404, '/api/v1/nothing-here/', {}],
      [404, '/api/v1/experiences/999999/', {}],
      [405, '/api/v1/experiences/', { method: 'PUT' }],
      [406, '/api/v1/experiences/', { headers: { accept: 'image/png' } }],
      [412, record, write(adminAuth, { method: 'PATCH', headers: { 'content-type': JSON_TYPE, 'if-match': '"stale"' }, body: '{"title":"x"}' })],
      [413, '/api/v1/experiences/', write(adminAuth, { method: 'POST', headers: { 'content-type': JSON_TYPE }, body: 'x'.repeat(1024 * 1024 + 1) })],
      [415, '/api/v1/experiences/', write(adminAuth, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' })],
    ];
    for (const [status, path, init] of cases) {
      const response = await api(path, init);
      expect(response.status, `${init.method ?? 'GET'} ${path}`).toBe(status);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expectRateHeaders(response, 3600);
    }
  });

  it('counts every request against the caller, Remaining going down by one each time', async () => {
    const first = expectRateHeaders(await api('/api/v1/'), 3600);
    const second = expectRateHeaders(await api('/api/v1/nothing-here/'), 3600);
    const third = expectRateHeaders(await api('/api/v1/experiences/', { method: 'PUT' }), 3600);
    expect([second.remaining, third.remaining]).toEqual([first.remaining - 1, first.remaining - 2]);
  });

  it('ignores X-Forwarded-For unless TRUST_PROXY=true: the key stays the peer address', async () => {
    const one = expectRateHeaders(await api('/api/v1/', { from: '198.51.100.1' }), 3600);
    const two = expectRateHeaders(await api('/api/v1/', { from: '198.51.100.2' }), 3600);
    expect(two.remaining).toBe(one.remaining - 1);
  });

  it('puts no headers on /healthz, /readyz and /metrics, or on paths outside /api/v1/', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics', '/api/', '/api/v2/', '/elsewhere']) noRateHeaders(await api(path));
  });

  it('with CORS_ORIGINS=*: any origin, no credentials, the headers exposed, preflights answered', async () => {
    const response = await api('/api/v1/experiences/', { headers: { origin: 'https://anywhere.example' } });
    expect(response.headers.get('access-control-allow-origin')).toBe('*');
    expect(response.headers.get('access-control-allow-credentials')).toBeNull();
    const exposed = (response.headers.get('access-control-expose-headers') ?? '').toLowerCase().split(/\s*,\s*/);
    expect(exposed).toEqual(expect.arrayContaining(['etag', 'location', 'retry-after', 'x-rate-limit-limit', 'x-rate-limit-remaining', 'x-rate-limit-reset']));

    const preflight = await api('/api/v1/experiences/', {
      method: 'OPTIONS',
      headers: { origin: 'https://anywhere.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-methods')).toContain('POST');
    expect(preflight.headers.get('access-control-allow-credentials')).toBeNull();
    noRateHeaders(preflight);
  });
});

describe('rate limits, exceeded', () => {
  let database: TestDatabase;
  let server: RunningServer;
  const api = client(() => server);
  const alice = basic('alice', 'alice-password-1');
  const bob = basic('bob', 'bob-password-1');
  const ORIGIN = 'https://app.example.com';

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    server = await startServer(database, {
      env: { RATE_LIMIT_ANON: '3/minute', RATE_LIMIT_USER: '4/hour', TRUST_PROXY: 'true', CORS_ORIGINS: `${ORIGIN},https://other.example.com` },
    });
    await createUser(database, 'alice', 'alice-password-1');
    await createUser(database, 'bob', 'bob-password-1');
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  it('counts the current request: a limit of 3 gives 2, 1, 0, then 429 problem+json with Retry-After', async () => {
    const seen = [];
    for (let i = 0; i < 5; i++) {
      const response = await api('/api/v1/experiences/', { from: '203.0.113.1' });
      const headers = expectRateHeaders(response, 60);
      seen.push([response.status, headers.limit, headers.remaining]);
      if (response.status === 429) {
        expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        expect(await response.json()).toMatchObject({ status: 429, title: 'Too many requests' });
        const retryAfter = Number(response.headers.get('retry-after'));
        expect(retryAfter).toBeGreaterThanOrEqual(1);
        expect(retryAfter).toBeLessThanOrEqual(60);
        expect(retryAfter).toBe(Math.max(1, headers.reset));
      } else {
        expect(response.headers.get('retry-after')).toBeNull();
      }
    }
    expect(seen).toEqual([
      [200, 3, 2],
      [200, 3, 1],
      [200, 3, 0],
      [429, 3, 0],
      [429, 3, 0],
    ]);
  });

  it('refuses every kind of request once over the limit, 405 and 404 included', async () => {
    for (let i = 0; i < 3; i++) await api('/api/v1/', { from: '203.0.113.2' });
    for (const [path, method] of [['/api/v1/experiences/', 'PUT'], ['/api/v1/nothing/', 'GET'], ['/api/v1/experiences', 'GET']] as const) {
      const response = await api(path, { method, from: '203.0.113.2' });
      expect(response.status).toBe(429);
      expect(response.headers.get('retry-after')).toMatch(/^\d+$/);
    }
  });

  it('keys by client IP from X-Forwarded-For when TRUST_PROXY=true', async () => {
    for (let i = 0; i < 3; i++) await api('/api/v1/', { from: '203.0.113.3' });
    expect((await api('/api/v1/', { from: '203.0.113.3' })).status).toBe(429);
    const other = await api('/api/v1/', { from: '203.0.113.4' });
    expect(other.status).toBe(200);
    expect(rateHeaders(other).remaining).toBe('2');
  });

  it('keys by user when authenticated, with the user rate, whatever the IP', async () => {
    const statuses = [];
    for (let i = 0; i < 5; i++) {
      const response = await api('/api/v1/users/me/', { headers: { authorization: alice }, from: `203.0.113.${10 + i}` });
      statuses.push([response.status, expectRateHeaders(response, 3600).remaining]);
    }
    expect(statuses).toEqual([
      [200, 3],
      [200, 2],
      [200, 1],
      [200, 0],
      [429, 0],
    ]);
    const fromAlicesIp = await api('/api/v1/', { from: '203.0.113.10' });
    expect([fromAlicesIp.status, rateHeaders(fromAlicesIp).limit]).toEqual([200, '3']);
    const asBob = await api('/api/v1/users/me/', { headers: { authorization: bob }, from: '203.0.113.10' });
    expect([asBob.status, rateHeaders(asBob).limit, rateHeaders(asBob).remaining]).toEqual([200, '4', '3']);
  });

  it('does not count /healthz, /readyz, /metrics or CORS preflights', async () => {
    const from = '203.0.113.30';
    for (let i = 0; i < 4; i++) {
      for (const path of ['/healthz', '/readyz', '/metrics']) noRateHeaders(await api(path, { from }));
      const preflight = await api('/api/v1/experiences/', {
        method: 'OPTIONS',
        from,
        headers: { origin: ORIGIN, 'access-control-request-method': 'PATCH' },
      });
      expect(preflight.status).toBe(204);
      noRateHeaders(preflight);
    }
    const response = await api('/api/v1/', { from });
    expect([response.status, rateHeaders(response).remaining]).toEqual([200, '2']);
  });

  it('with listed origins: that origin and credentials, the headers exposed on a 429 too; others get no CORS headers', async () => {
    const from = '203.0.113.40';
    for (let i = 0; i < 3; i++) await api('/api/v1/', { from });
    const refused = await api('/api/v1/', { from, headers: { origin: ORIGIN } });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(refused.headers.get('access-control-allow-credentials')).toBe('true');
    // A cache must key on the origin as well as on Accept.
    expect(refused.headers.get('vary')?.split(/\s*,\s*/).sort()).toEqual(['Accept', 'Origin']);
    const exposed = (refused.headers.get('access-control-expose-headers') ?? '').toLowerCase();
    for (const name of ['etag', 'location', 'retry-after', 'x-rate-limit-limit', 'x-rate-limit-remaining', 'x-rate-limit-reset']) {
      expect(exposed).toContain(name);
    }
    const stranger = await api('/api/v1/', { from: '203.0.113.41', headers: { origin: 'https://evil.example' } });
    expect(stranger.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('rate-limit configuration', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
  });
  afterAll(() => database?.drop());

  it.each([
    ['RATE_LIMIT_ANON', 'lots'],
    ['RATE_LIMIT_USER', '0/hour'],
    ['RATE_LIMIT_ANON', '10/fortnight'],
    ['REDIS_URL', 'localhost:6379'],
    ['REDIS_KEY_PREFIX', 'has spaces'],
  ])('refuses to start with %s=%s, naming the variable', async (variable, value) => {
    await expect(startServer(database, { env: { [variable]: value } })).rejects.toThrow(
      new RegExp(`exited \\(1\\) before listening:[\\s\\S]*configuration error: ${variable}:`),
    );
  });
});

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
    const port = await new Promise<number>((resolve, reject) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
      probe.on('error', reject);
    });
    return new PrivateRedis(port);
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
