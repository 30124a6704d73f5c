import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectRateHeaders, rateHeaders } from './support/rate-limits.js';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * Rate limits as a client sees them (SEED.md §8; API.md §1, §6 "Rate limits", "CORS"; issue #4):
 * the X-Rate-Limit-* headers on every /api/v1/ response, 429 with Retry-After, the key and the
 * configuration. Limits shared by several processes are in shared-limits.test.ts.
 */
const FORM = 'application/x-www-form-urlencoded';
const JSON_TYPE = 'application/json';

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

/** Sends a request target exactly as given (fetch would normalise it) to 127.0.0.1. */
function rawRequest(port: number, target: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }>((resolve, reject) => {
    const sent = httpRequest({ host: '127.0.0.1', port, path: target, headers }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body }));
    });
    sent.on('error', reject);
    sent.end();
  });
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

  it('runs the whole pipeline for a percent-encoded path or an absolute-form target: handled and counted, never a 500', async () => {
    // Paths that match no view are counted against the IP, at the anonymous rate.
    const cases: Array<[string, number, string]> = [
      ['/%61pi/v1/experiences/', 200, '2000'],
      ['/api/v1/%65xperiences/', 200, '2000'],
      [`http://127.0.0.1:${server.port}/api/v1/webhooks/`, 200, '2000'],
      [`http://127.0.0.1:${server.port}/api/v1/nothing-here/`, 404, '1000'],
      ['/%61pi/v1/webhooks/?limit=1', 200, '2000'],
    ];
    for (const [target, status, limit] of cases) {
      const response = await rawRequest(server.port, target, { authorization: adminAuth });
      expect(response.status, target).toBe(status);
      expect(response.headers['x-rate-limit-limit'], target).toBe(limit);
      expect(response.headers['x-rate-limit-remaining'], target).toMatch(/^\d+$/);
    }
    const anonymous = await rawRequest(server.port, `http://127.0.0.1:${server.port}/api/v1/webhooks/`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(anonymous.headers['x-rate-limit-limit']).toBe('1000');
    expect(server.output()).not.toMatch(/request failed/);
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
      // A GET's first stage runs in the route handler (issue 21): the same refusal, counted too.
      [405, '/api/v1/auth/token/', {}],
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

  it('with listed origins: a plain OPTIONS (no Access-Control-Request-Method) is described, not refused as a bad preflight', async () => {
    for (const headers of [{ origin: ORIGIN }, {}]) {
      const response = await api('/api/v1/experiences/', { method: 'OPTIONS', from: '203.0.113.50', headers });
      expect(response.status).toBe(200);
      expect(response.headers.get('allow')).toBe('GET, HEAD, OPTIONS, POST');
      expect(await response.json()).toMatchObject({ name: expect.any(String), renders: expect.any(Array) });
    }
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
