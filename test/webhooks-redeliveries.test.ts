import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Received, type Receiver } from './support/receiver.js';
import { BACKENDS, adminAuth, createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * Issue 22, seen from outside: bulk redeliveries of thousands of deliveries, redeliveries that
 * refer to their original's payload instead of copying it, the daily redelivery cap, and a
 * retention pass soon after start.
 */
// Every retry at once (0 s ± jitter), then one after 1 s: a delivery fails for good after 4 attempts.
const SERVE_ENV = { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: '0,0,1', LOG_LEVEL: 'warn' };
/** What `serve` prints once listening, at any log level. */
const READY = /listening at (http:\/\/127\.0\.0\.1:\d+)/;
const HOUR_MS = 3_600_000;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function api(server: RunningServer, method: string, path: string, body?: unknown): Promise<{ status: number; headers: Headers; body: Json }> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: adminAuth, 'content-type': 'application/json', accept: 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? (JSON.parse(text) as Json) : {} };
}

async function createHook(server: RunningServer, body: Json): Promise<number> {
  const created = await api(server, 'POST', '/api/v1/webhooks/', { events: ['experience'], ...body });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.id as number;
}

/** Runs one statement on the test's database directly (to set up thousands of deliveries at once). */
async function query(database: TestDatabase, statement: string): Promise<Json[]> {
  if (database.url === null) {
    const db = new SQLite(join(database.env.DATA_DIR!, 'restwire.sqlite3'));
    try {
      const prepared = db.prepare(statement);
      return prepared.reader ? (prepared.all() as Json[]) : (prepared.run(), []);
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    return (await client.query(statement)).rows as Json[];
  } finally {
    await client.end();
  }
}

const count = async (database: TestDatabase, where: string) => Number((await query(database, `select count(*) as n from deliveries where ${where}`))[0]!.n);

/** `n` failed `experience` deliveries of a webhook, created `ageMs` ago, each with its own guid and a 1 KiB payload. */
async function insertFailed(database: TestDatabase, hookId: number, n: number, ageMs: number, tag: string): Promise<void> {
  const createdAt = Date.now() - ageMs;
  await query(
    database,
    `insert into deliveries (guid, webhook_id, event, action, payload, status, attempts, next_attempt_at, redelivery, created_at, record_key)
     select '${tag}-' || i, ${hookId}, 'experience', 'created', '{"n":' || i || ',"pad":"${'x'.repeat(1024)}"}', 'failed', 4, ${createdAt}, 0, ${createdAt}, null
     from (with recursive n(i) as (select 1 union all select i + 1 from n where i < ${n}) select i from n) as numbers`,
  );
}

/** Polls until `check` holds (no timing assertion: only a generous deadline against hanging). */
async function eventually<T>(check: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const guidOf = (r: Received) => String(r.headers['x-service-delivery']);

describe.each(BACKENDS)('redeliveries on %s (issue 22)', (backend) => {
  let database: TestDatabase;
  let server: RunningServer;
  const receivers: Receiver[] = [];
  const receiver = async () => {
    const started = await startReceiver();
    receivers.push(started);
    return started;
  };

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    server = await startServer(database, { env: { ...SERVE_ENV, DELIVERY_PRUNE_INTERVAL_SECONDS: '1' }, ready: READY });
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    await server?.stop();
    await database?.drop();
  });

  it('redelivers 3,001 failed deliveries in one call, each referring to its original payload', async () => {
    // Inactive: the redeliveries wait in the queue, so the test looks at what was queued.
    const hookId = await createHook(server, { target_url: (await receiver()).url, active: false });
    await insertFailed(database, hookId, 3001, HOUR_MS, 'bulk');
    const response = await api(server, 'POST', `/api/v1/webhooks/${hookId}/deliveries/failed/attempts/`);
    expect(response.status, JSON.stringify(response.body)).toBe(202);
    expect(response.body).toEqual({ redelivered: 3001 });
    expect(await count(database, `webhook_id = ${hookId} and redelivery = 1 and status = 'pending'`)).toBe(3001);
    // No redelivery holds a copy of its payload; each shows (and would send) its original's.
    expect(await count(database, `webhook_id = ${hookId} and redelivery = 1 and length(payload) > 0`)).toBe(0);
    const [newest] = (await api(server, 'GET', `/api/v1/webhooks/${hookId}/deliveries/?limit=1`)).body.results as Json[];
    expect(newest).toMatchObject({ guid: 'bulk-3001', redelivery: true });
    const detail = await api(server, 'GET', `/api/v1/webhooks/${hookId}/deliveries/${newest!.id}/`);
    expect(detail.body.request.payload).toEqual({ n: 3001, pad: 'x'.repeat(1024) });
  }, 90_000);

  it("sends a replayed delivery with its original's body, without copying it, and keeps the original while a redelivery needs it", async () => {
    const flaky = await receiver();
    flaky.respondWith(() => 500);
    const hookId = await createHook(server, { target_url: flaky.url });
    await new Promise((resolve) => setTimeout(resolve, 30)); // the ping is before `since`
    const since = new Date().toISOString();
    for (const title of ['first', 'second']) expect((await api(server, 'POST', '/api/v1/experiences/', { title, q_like_dislike: 'like' })).status).toBe(201);
    const failed = async () =>
      ((await api(server, 'GET', `/api/v1/webhooks/${hookId}/deliveries/?status=failed`)).body.results as Json[]).filter((row) => row.event === 'experience');
    const originals = await eventually(async () => ((await failed()).length === 2 ? failed() : undefined));
    const firstBodies = new Map(flaky.received.filter((r) => r.headers['x-service-event'] === 'experience').map((r) => [guidOf(r), r.body]));

    flaky.respondWith(() => 204);
    // The ping failed too and may be retried at any moment: count the experience events only.
    const experienceEvents = <T extends { headers: Record<string, unknown> }>(list: readonly T[]) =>
      list.filter((request) => request.headers['x-service-event'] === 'experience');
    const seen = experienceEvents(flaky.received).length;
    expect((await api(server, 'POST', `/api/v1/webhooks/${hookId}/deliveries/replays/`, { since })).body).toEqual({ redelivered: 2, remaining: 0 });
    const resent = experienceEvents(await flaky.waitFor((list) => experienceEvents(list).length >= seen + 2, 30_000));
    for (const request of resent.slice(seen)) expect(request.body).toBe(firstBodies.get(guidOf(request)));
    // Replaying what was delivered, again and again, adds log entries, not payloads.
    await eventually(async () => (await count(database, `webhook_id = ${hookId} and redelivery = 1 and status = 'delivered'`)) === 2);
    for (let round = 2; round <= 4; round++) {
      expect((await api(server, 'POST', `/api/v1/webhooks/${hookId}/deliveries/replays/`, { since, status: 'delivered' })).body).toEqual({ redelivered: 2, remaining: 0 });
      await eventually(async () => (await count(database, `webhook_id = ${hookId} and redelivery = 1 and status = 'delivered'`)) === 2 * round);
    }
    expect(experienceEvents(flaky.received).length).toBe(seen + 8);
    for (const request of experienceEvents(flaky.received).slice(seen)) expect(request.body).toBe(firstBodies.get(guidOf(request)));
    expect(await count(database, `webhook_id = ${hookId} and redelivery = 1 and length(payload) > 0`)).toBe(0);

    // Retention: an original past its time stays while a redelivery refers to it; an unrelated
    // expired delivery (the sentinel) shows that a pass ran.
    const original = originals[0]!;
    const sentinelHook = await createHook(server, { target_url: flaky.url, active: false });
    await insertFailed(database, sentinelHook, 1, 40 * 24 * HOUR_MS, 'sentinel');
    await query(database, `update deliveries set created_at = ${Date.now() - 40 * 24 * HOUR_MS} where id = ${original.id}`);
    await eventually(async () => (await count(database, `webhook_id = ${sentinelHook}`)) === 0);
    expect((await api(server, 'GET', `/api/v1/webhooks/${hookId}/deliveries/${original.id}/`)).status).toBe(200);
    const redeliveries = (await api(server, 'GET', `/api/v1/webhooks/${hookId}/deliveries/?limit=100`)).body.results as Json[];
    const ofOriginal = redeliveries.filter((row) => row.guid === original.guid && row.redelivery);
    expect(ofOriginal.length).toBeGreaterThan(0);
    const detail = await api(server, 'GET', `/api/v1/webhooks/${hookId}/deliveries/${ofOriginal[0]!.id}/`);
    expect(JSON.stringify(detail.body.request.payload)).toBe(firstBodies.get(original.guid as string));
  }, 90_000);

  it('queues at most 10,000 redeliveries of one webhook in 24 hours: what fits, then 429 with Retry-After', async () => {
    const hookId = await createHook(server, { target_url: (await receiver()).url, active: false });
    await insertFailed(database, hookId, 4000, 3 * HOUR_MS, 'early');
    expect((await api(server, 'POST', `/api/v1/webhooks/${hookId}/deliveries/failed/attempts/`)).body).toEqual({ redelivered: 4000 });
    await insertFailed(database, hookId, 7000, HOUR_MS, 'late');
    const since = new Date(Date.now() - 2 * HOUR_MS).toISOString();
    const reaching = await api(server, 'POST', `/api/v1/webhooks/${hookId}/deliveries/replays/`, { since });
    expect(reaching.status).toBe(202);
    expect(reaching.body).toEqual({ redelivered: 6000, remaining: 1000 });

    const beyond = await api(server, 'POST', `/api/v1/webhooks/${hookId}/deliveries/replays/`, { since });
    expect(beyond.status).toBe(429);
    expect(beyond.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const retryAfter = Number(beyond.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(86_000);
    expect(retryAfter).toBeLessThanOrEqual(86_400);
    expect((await api(server, 'POST', `/api/v1/webhooks/${hookId}/deliveries/failed/attempts/`)).status).toBe(429);
    expect(await count(database, `webhook_id = ${hookId} and redelivery = 1`)).toBe(10_000);
  }, 90_000);
});

describe.each(BACKENDS)('retention at start on %s (issue 22)', (backend) => {
  let database: TestDatabase;
  let server: RunningServer | undefined;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  it('prunes an expired delivery soon after start, not one prune interval later', async () => {
    // The default interval (5 minutes): a process restarted more often must still prune.
    server = await startServer(database, { env: SERVE_ENV, ready: READY });
    const receiver = await startReceiver();
    try {
      const hookId = await createHook(server, { target_url: receiver.url, active: false });
      await server.stop();
      await insertFailed(database, hookId, 1, 40 * 24 * HOUR_MS, 'expired');
      await insertFailed(database, hookId, 1, HOUR_MS, 'recent');
      server = await startServer(database, { env: SERVE_ENV, ready: READY });
      const guids = async () => ((await api(server!, 'GET', `/api/v1/webhooks/${hookId}/deliveries/`)).body.results as Json[]).map((row) => row.guid);
      expect(await guids()).toContain('expired-1');
      expect(await eventually(async () => ((await guids()).includes('expired-1') ? undefined : guids()), 60_000)).toEqual(['recent-1']);
    } finally {
      await receiver.close();
    }
  }, 90_000);
});
