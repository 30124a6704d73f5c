import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from './support/receiver.js';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * REQUESTS.md §1: a POST or PATCH with an `Idempotency-Key` is processed once; the same request
 * again gets the stored answer with `Idempotent-Replayed: true`, a different one a 422, one still
 * being processed a 409, and a process killed after answering still answers the retry from storage.
 */
const SERVE_ENV = { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: Array(10).fill(1).join(','), ALLOW_SIGNUP: 'true' };
const BOB = { username: 'bob', password: 'bob-password-1' };

type Json = Record<string, unknown>;

describe.each(BACKENDS)('Idempotency-Key on %s', (backend) => {
  let database: TestDatabase;
  let server: RunningServer;
  let receiver: Receiver;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    server = await startServer(database, { env: SERVE_ENV });
    await createUser(database, BOB.username, BOB.password);
    receiver = await startReceiver();
    const hook = await post('/api/v1/webhooks/', { target_url: receiver.url, events: ['experience'] });
    expect(hook.status).toBe(201);
  });
  afterAll(async () => {
    await receiver?.close();
    await server?.stop('SIGKILL');
    await database?.drop();
  });

  function post(path: string, body: unknown, headers: Record<string, string> = {}, method = 'POST'): Promise<Response> {
    return fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: adminAuth, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  }

  async function titled(title: string): Promise<Json[]> {
    const page = (await (await fetch(`${server.url}/api/v1/experiences/?limit=100`, { headers: { authorization: adminAuth } })).json()) as { results: Json[] };
    return page.results.filter((record) => record.title === title);
  }

  /** The `created` deliveries of experience `id` the receiver got. */
  const createdDeliveries = (id: unknown) =>
    receiver.received.filter((r) => {
      const body = JSON.parse(r.body) as { action?: string; experience?: { id: number } };
      return body.action === 'created' && body.experience?.id === id;
    });

  /** Creates a record without a key and waits for its delivery: every delivery queued before it has had its turn. */
  async function marker(): Promise<void> {
    const response = await post('/api/v1/experiences/', { title: `marker ${Math.random()}`, q_like_dislike: 'like' });
    const { id } = (await response.json()) as { id: number };
    await receiver.waitFor(() => createdDeliveries(id).length > 0);
  }

  it('replays the stored answer (status, body, headers) with Idempotent-Replayed; one record, one delivery', async () => {
    const body = { title: 'once only', q_like_dislike: 'like' };
    const first = await post('/api/v1/experiences/', body, { 'Idempotency-Key': 'create-once' });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const text = await first.text();
    const remaining = Number(first.headers.get('x-rate-limit-remaining'));
    for (let retry = 1; retry <= 3; retry++) {
      const again = await post('/api/v1/experiences/', body, { 'Idempotency-Key': 'create-once' });
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.headers.get('location')).toBe(first.headers.get('location'));
      expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'));
      expect(await again.text()).toBe(text);
      // Replays count against the rate limit too.
      expect(Number(again.headers.get('x-rate-limit-remaining'))).toBe(remaining - retry);
    }
    expect(await titled('once only')).toHaveLength(1);
    const { id } = JSON.parse(text) as { id: number };
    await receiver.waitFor(() => createdDeliveries(id).length > 0);
    await marker();
    expect(createdDeliveries(id)).toHaveLength(1);
  });

  it('a PATCH with a key changes once and replays its answer', async () => {
    const created = (await (await post('/api/v1/experiences/', { title: 'to patch', q_like_dislike: 'like' })).json()) as { url: string };
    const first = await post(created.url, { title: 'patched once' }, { 'Idempotency-Key': 'patch-1' }, 'PATCH');
    expect(first.status).toBe(200);
    const text = await first.text();
    // Changed meanwhile by someone else: the retry still answers what the first request did.
    expect((await post(created.url, { title: 'changed since' }, {}, 'PATCH')).status).toBe(200);
    const again = await post(created.url, { title: 'patched once' }, { 'Idempotency-Key': 'patch-1' }, 'PATCH');
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.text()).toBe(text);
    expect(await titled('changed since')).toHaveLength(1);
  });

  it('the same key with another body is a 422, and nothing is done', async () => {
    expect((await post('/api/v1/experiences/', { title: 'first body', q_like_dislike: 'like' }, { 'Idempotency-Key': 'changed' })).status).toBe(201);
    const other = await post('/api/v1/experiences/', { title: 'second body', q_like_dislike: 'like' }, { 'Idempotency-Key': 'changed' });
    expect(other.status).toBe(422);
    expect(other.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await titled('second body')).toHaveLength(0);
    // Another path with the same key is another request too.
    const elsewhere = await post('/api/v1/webhooks/', { target_url: receiver.url, events: ['experience'] }, { 'Idempotency-Key': 'changed' });
    expect(elsewhere.status).toBe(422);
  });

  it('stores a 400 and replays it; a bad key, or a key from an anonymous caller, is a 400 naming the header', async () => {
    const invalid = await post('/api/v1/experiences/', { title: '', q_like_dislike: 'like' }, { 'Idempotency-Key': 'invalid-1' });
    expect(invalid.status).toBe(400);
    const problem = await invalid.text();
    const again = await post('/api/v1/experiences/', { title: '', q_like_dislike: 'like' }, { 'Idempotency-Key': 'invalid-1' });
    expect(again.status).toBe(400);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.text()).toBe(problem);

    for (const key of ['has space', 'x'.repeat(256), 'naïve']) {
      const bad = await fetch(`${server.url}/api/v1/experiences/`, {
        method: 'POST',
        headers: { authorization: adminAuth, 'content-type': 'application/json', 'Idempotency-Key': Buffer.from(key).toString('latin1') },
        body: JSON.stringify({ title: 'bad key', q_like_dislike: 'like' }),
      });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { errors: Json }).errors).toHaveProperty(['Idempotency-Key']);
    }
    expect(await titled('bad key')).toHaveLength(0);
    // A write that needs a user is a 401 with or without a key; one that does not (signup), a 400.
    const anonymous = { 'content-type': 'application/json', 'Idempotency-Key': 'anon-1' };
    expect((await fetch(`${server.url}/api/v1/experiences/`, { method: 'POST', headers: anonymous, body: '{"title":"a","q_like_dislike":"like"}' })).status).toBe(401);
    const signup = await fetch(`${server.url}/api/v1/users/`, { method: 'POST', headers: anonymous, body: JSON.stringify({ username: 'carol', password: 'carol-password-1' }) });
    expect(signup.status).toBe(400);
    expect(await signup.text()).toContain('Idempotency-Key');
  });

  it('a duplicate sent while the first is still processed is a 409 with Retry-After; one set of records', async () => {
    // Each webhook's target is resolved before it is stored: a batch of ten takes a while, and
    // duplicates sent at once find it in progress.
    const headers = { authorization: basic(BOB.username, BOB.password), 'content-type': 'application/json', 'Idempotency-Key': 'concurrent' };
    const requests = Array.from({ length: 10 }, (_, i) => ({ method: 'POST', path: '/api/v1/webhooks/', body: { target_url: `http://localhost:${receiver.port}/concurrent/${i}`, events: ['experience'], active: false } }));
    const send = () => fetch(`${server.url}/api/v1/batch/`, { method: 'POST', headers, body: JSON.stringify({ requests }) });
    const responses = await Promise.all(Array.from({ length: 8 }, send));
    const statuses = responses.map((response) => response.status);
    expect(statuses.every((status) => status === 200 || status === 409), String(statuses)).toBe(true);
    const conflicts = responses.filter((response) => response.status === 409);
    expect(conflicts.length, String(statuses)).toBeGreaterThan(0);
    for (const conflict of conflicts) expect(Number(conflict.headers.get('retry-after'))).toBeGreaterThan(0);
    const retry = await send();
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    const hooks = (await (await fetch(`${server.url}/api/v1/webhooks/?limit=100`, { headers })).json()) as { results: Json[] };
    expect(hooks.results.filter((hook) => String(hook.target_url).includes('/concurrent/'))).toHaveLength(10);
  });

  it('an action (a ping) with a key runs once: one ping for any number of retries', async () => {
    const hook = (await (await post('/api/v1/webhooks/', { target_url: `http://127.0.0.1:${receiver.port}/pinged`, events: ['experience'] })).json()) as { url: string };
    const pings = () => receiver.received.filter((r) => r.path === '/pinged' && r.headers['x-service-event'] === 'ping');
    // The webhook's own ping on creation, then the keyed one.
    await receiver.waitFor(() => pings().length === 1);
    for (let attempt = 0; attempt < 3; attempt++) {
      const ping = await post(`${hook.url}pings/`, {}, { 'Idempotency-Key': 'ping-once' });
      expect(ping.status).toBe(204);
      expect(ping.headers.get('idempotent-replayed')).toBe(attempt === 0 ? null : 'true');
    }
    await receiver.waitFor(() => pings().length === 2);
    await marker();
    expect(pings()).toHaveLength(2);
  });

  it('two users with the same key are independent', async () => {
    const bobAuth = basic(BOB.username, BOB.password);
    const mine = await post('/api/v1/experiences/', { title: 'admin shared key', q_like_dislike: 'like' }, { 'Idempotency-Key': 'shared' });
    const theirs = await fetch(`${server.url}/api/v1/experiences/`, {
      method: 'POST',
      headers: { authorization: bobAuth, 'content-type': 'application/json', 'Idempotency-Key': 'shared' },
      body: JSON.stringify({ title: 'bob shared key', q_like_dislike: 'like' }),
    });
    expect([mine.status, theirs.status]).toEqual([201, 201]);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    expect(await titled('admin shared key')).toHaveLength(1);
    expect(await titled('bob shared key')).toHaveLength(1);
  });

  it('a webhook secret or API key shown once is replayed to its caller and stored encrypted', async () => {
    const body = { target_url: receiver.url, events: ['experience'], active: false };
    const first = await post('/api/v1/webhooks/', body, { 'Idempotency-Key': 'hook-secret' });
    expect(first.status).toBe(201);
    const { secret, url } = (await first.json()) as { secret: string; url: string };
    expect(secret).toMatch(/^whsec_/);
    const again = await post('/api/v1/webhooks/', body, { 'Idempotency-Key': 'hook-secret' });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(((await again.json()) as { secret: string }).secret).toBe(secret);
    const keyBody = { name: 'deploy', scopes: ['experiences:write'] };
    const key = (await (await post('/api/v1/keys/', keyBody, { 'Idempotency-Key': 'api-key' })).json()) as { key: string };
    expect(key.key).toMatch(/^rwk_/);
    const keyAgain = await post('/api/v1/keys/', keyBody, { 'Idempotency-Key': 'api-key' });
    expect(keyAgain.headers.get('idempotent-replayed')).toBe('true');
    expect(((await keyAgain.json()) as { key: string }).key).toBe(key.key);
    // The key works, and a batch sent with it writes what its scopes allow.
    const withKey = await fetch(`${server.url}/api/v1/batch/`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ requests: [{ method: 'POST', path: '/api/v1/experiences/', body: { title: 'by key', q_like_dislike: 'like' } }, { method: 'POST', path: '/api/v1/webhooks/', body: { target_url: receiver.url, events: ['experience'] } }] }),
    });
    expect(withKey.status).toBe(403);
    expect(((await withKey.json()) as Json).failed_index).toBe(1);
    expect(await titled('by key')).toHaveLength(0);
    // A batch answering with a webhook's secret is no-store itself, and stored encrypted too.
    const batchBody = { requests: [{ method: 'POST', path: '/api/v1/webhooks/', body }] };
    const batch = await post('/api/v1/batch/', batchBody, { 'Idempotency-Key': 'batch-secret' });
    expect(batch.status).toBe(200);
    expect(batch.headers.get('cache-control')).toBe('no-store');
    const batchText = await batch.text();
    const batchSecret = (JSON.parse(batchText) as { responses: Array<{ body: { secret: string } }> }).responses[0]!.body.secret;
    expect(batchSecret).toMatch(/^whsec_/);
    const batchAgain = await post('/api/v1/batch/', batchBody, { 'Idempotency-Key': 'batch-secret' });
    expect(batchAgain.headers.get('idempotent-replayed')).toBe('true');
    expect(batchAgain.headers.get('cache-control')).toBe('no-store');
    expect(await batchAgain.text()).toBe(batchText);
    const stored = await storedBodies(database);
    expect(stored.length).toBeGreaterThan(0);
    expect(stored.some((text) => [secret, url, key.key, batchSecret].some((shown) => text.includes(shown)))).toBe(false);
  });

  it('an answer whose time (IDEMPOTENCY_TTL_HOURS) has passed is not replayed: the key is processed afresh, once', async () => {
    const body = { title: 'after expiry', q_like_dislike: 'like' };
    const first = await post('/api/v1/experiences/', body, { 'Idempotency-Key': 'expires' });
    expect(first.status).toBe(201);
    // As if the hours had passed, before the pruning removed it.
    await expireStoredAnswer(database, 'expires');
    const second = await post('/api/v1/experiences/', body, { 'Idempotency-Key': 'expires' });
    expect(second.status).toBe(201);
    expect(second.headers.get('idempotent-replayed')).toBeNull();
    const secondText = await second.text();
    const third = await post('/api/v1/experiences/', body, { 'Idempotency-Key': 'expires' });
    expect(third.headers.get('idempotent-replayed')).toBe('true');
    expect(await third.text()).toBe(secondText);
    expect(await titled('after expiry')).toHaveLength(2);
  });

  it('kill -9 right after an acknowledged keyed create: the retry after restart answers from storage, one record', async () => {
    const body = { title: 'survives kill', q_like_dislike: 'like' };
    const first = await post('/api/v1/experiences/', body, { 'Idempotency-Key': 'before-kill' });
    expect(first.status).toBe(201);
    const text = await first.text();
    await server.stop('SIGKILL');
    server = await startServer(database, { env: SERVE_ENV });
    const retry = await post('/api/v1/experiences/', body, { 'Idempotency-Key': 'before-kill' });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.text()).toBe(text);
    expect(await titled('survives kill')).toHaveLength(1);
  });
});

/** The stored bodies as the database holds them. */
async function storedBodies(database: TestDatabase): Promise<string[]> {
  if (database.url === null) {
    const db = new SQLite(join(database.env.DATA_DIR!, 'restwire.sqlite3'), { readonly: true });
    try {
      return (db.prepare('select body from idempotency_keys where body is not null').all() as Array<{ body: string }>).map((row) => row.body);
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    return (await client.query<{ body: string }>('select body from idempotency_keys where body is not null')).rows.map((row) => row.body);
  } finally {
    await client.end();
  }
}

/** Makes the answer stored under `key` expired, as it is once IDEMPOTENCY_TTL_HOURS have passed. */
async function expireStoredAnswer(database: TestDatabase, key: string): Promise<void> {
  if (database.url === null) {
    const db = new SQLite(join(database.env.DATA_DIR!, 'restwire.sqlite3'));
    try {
      db.pragma('busy_timeout = 5000');
      expect(db.prepare('update idempotency_keys set expires_at = 1 where key = ?').run(key).changes).toBe(1);
    } finally {
      db.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    expect((await client.query('update idempotency_keys set expires_at = 1 where key = $1', [key])).rowCount).toBe(1);
  } finally {
    await client.end();
  }
}
