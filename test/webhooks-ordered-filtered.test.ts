import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Received, type Receiver } from './support/receiver.js';
import { BACKENDS, adminAuth, createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * Issue 14: per-record ordering, filtered subscriptions, replay by time range and the event
 * catalog, seen from outside: a real server, real receivers on 127.0.0.1.
 */
// Every retry at once (0 s ± jitter), then one after 1 s: a delivery fails for good after 4 attempts.
const SERVE_ENV = { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: '0,0,1', LOG_LEVEL: 'warn' };

/** What `serve` prints once listening, at any log level. */
const READY = /listening at (http:\/\/127\.0\.0\.1:\d+)/;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function api(server: RunningServer, method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: adminAuth, 'content-type': 'application/json', accept: 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Json) : {} };
}

async function createHook(server: RunningServer, body: Json): Promise<number> {
  const created = await api(server, 'POST', '/api/v1/webhooks/', { events: ['experience'], ...body });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.id as number;
}

const events = (receiver: Receiver): Received[] => receiver.received.filter((r) => r.headers['x-service-event'] === 'experience');
const guidOf = (r: Received) => String(r.headers['x-service-delivery']);
const bodyOf = (r: Received) => JSON.parse(r.body) as Json;

/** Every entry of a webhook's deliveries log (newest first), following `next`. */
async function deliveryLog(server: RunningServer, hookId: number): Promise<Json[]> {
  const rows: Json[] = [];
  let path: string | null = `/api/v1/webhooks/${hookId}/deliveries/?limit=100`;
  while (path) {
    const page = await api(server, 'GET', path);
    expect(page.status).toBe(200);
    rows.push(...(page.body.results as Json[]));
    path = page.body.next ? String(page.body.next).replace(/^https?:\/\/[^/]+/, '') : null;
  }
  return rows;
}

/** Polls until `check` holds (no timing assertion: only a generous deadline against hanging). */
async function eventually<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A receiver that fails the first 0–2 attempts of each delivery, chosen at random (seeded). */
function failFirstAttemptsAtRandom(receiver: Receiver, seed: number): void {
  let state = seed;
  const random = () => ((state = (state * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
  const failuresLeft = new Map<string, number>();
  receiver.respondWith((request) => {
    const guid = guidOf(request);
    if (!failuresLeft.has(guid)) failuresLeft.set(guid, Math.floor(random() * 3));
    const left = failuresLeft.get(guid)!;
    if (left === 0) return 204;
    failuresLeft.set(guid, left - 1);
    return 500;
  });
}

/** The number in the titles (`u7` → 7) of every `updated` attempt a receiver saw, in arrival order. */
function updateNumbers(received: readonly Received[], prefix: string): number[] {
  return received
    .map(bodyOf)
    .filter((body) => body.action === 'updated' && String(body.experience.title).startsWith(prefix))
    .map((body) => Number(String(body.experience.title).slice(prefix.length)));
}

describe.each(BACKENDS)('ordered, filtered and replayed webhooks on %s', (backend) => {
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
    server = await startServer(database, { env: SERVE_ENV, ready: READY });
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    await server?.stop();
    await database?.drop();
  });

  it('delivers 50 rapid updates of one record in commit order to an ordered webhook whose receiver fails at random; all reach an unordered one', async () => {
    const ordered = await receiver();
    const unordered = await receiver();
    failFirstAttemptsAtRandom(ordered, 14);
    const orderedId = await createHook(server, { target_url: ordered.url, ordering: 'record' });
    await createHook(server, { target_url: unordered.url });
    const hook = await api(server, 'GET', `/api/v1/webhooks/${orderedId}/`);
    expect(hook.body.ordering).toBe('record');

    const created = await api(server, 'POST', '/api/v1/experiences/', { title: 'u-1', q_like_dislike: 'like' });
    expect(created.status).toBe(201);
    const id = created.body.id as number;
    // Each update commits before the next is sent: the commit order is 0, 1, … 49.
    for (let i = 0; i < 50; i++) {
      const updated = await api(server, 'PATCH', `/api/v1/experiences/${id}/`, { title: `u${i}` });
      expect(updated.status).toBe(200);
    }

    // While the ordered webhook works through them, its log shows later ones waiting.
    const log = await deliveryLog(server, orderedId);
    const waiting = log.filter((row) => row.waiting_behind !== null);
    expect(log.filter((row) => row.event === 'experience').every((row) => row.record === `experiences:${id}`)).toBe(true);
    for (const row of waiting) expect(['pending', 'retrying']).toContain(row.status);

    await eventually(() => (events(unordered).length >= 51 ? true : undefined));
    await eventually(async () => {
      const rows = await deliveryLog(server, orderedId);
      return rows.filter((row) => row.event === 'experience' && row.status === 'delivered').length === 51 ? true : undefined;
    });
    expect(new Set(events(unordered).map(guidOf)).size).toBe(51);

    // Every attempt the ordered receiver saw, retries included, is in commit order: an update is
    // never attempted before the one committed before it was delivered.
    const titles = updateNumbers(events(ordered), 'u');
    expect(titles.length).toBeGreaterThanOrEqual(50);
    for (let i = 1; i < titles.length; i++) expect(titles[i]!, `attempt ${i}: ${titles.join(',')}`).toBeGreaterThanOrEqual(titles[i - 1]!);
    expect([...new Set(titles)]).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(bodyOf(events(ordered)[0]!).action).toBe('created');
    // One record: never two of its deliveries in flight at once.
    expect(ordered.maxInFlight).toBe(1);
    // Some attempts failed and were retried (the seeded receiver fails about two in three of the first attempts).
    expect(events(ordered).length).toBeGreaterThan(51);
  }, 120_000);

  it("shows in the deliveries log which delivery a record's later ones wait behind", async () => {
    const slow = await receiver();
    // Events hang (until the 10 s attempt timeout): the first about the record stays in flight.
    slow.respondWith((request) => (request.headers['x-service-event'] === 'experience' ? 'hang' : 204));
    const hookId = await createHook(server, { target_url: slow.url, ordering: 'record' });
    const id = (await api(server, 'POST', '/api/v1/experiences/', { title: 'w0', q_like_dislike: 'like' })).body.id as number;
    await eventually(() => (events(slow).length >= 1 ? true : undefined));
    await api(server, 'PATCH', `/api/v1/experiences/${id}/`, { title: 'w1' });
    await api(server, 'PATCH', `/api/v1/experiences/${id}/`, { title: 'w2' });
    slow.respondWith(() => 204);

    const log = (await deliveryLog(server, hookId)).filter((row) => row.event === 'experience').reverse();
    expect(log.map((row) => [row.action, row.record])).toEqual([
      ['created', `experiences:${id}`],
      ['updated', `experiences:${id}`],
      ['updated', `experiences:${id}`],
    ]);
    expect(log[0]!.waiting_behind).toBeNull();
    expect(log.slice(1).map((row) => row.waiting_behind)).toEqual([log[0]!.url, log[0]!.url]);
    expect(events(slow)).toHaveLength(1);
  });

  it('fires a filter for matching records only, and for a record that stops matching; the list endpoint agrees', async () => {
    const filtered = await receiver();
    const hookId = await createHook(server, { target_url: filtered.url, filter: { experience: 'search=poem' } });
    expect((await api(server, 'GET', `/api/v1/webhooks/${hookId}/`)).body.filter).toEqual({ experience: 'search=poem' });

    const ids: Record<string, number> = {};
    for (const title of ['poem one', 'essay two', 'Poem three', 'essay four']) {
      const created = await api(server, 'POST', '/api/v1/experiences/', { title, q_like_dislike: 'like' });
      ids[title] = created.body.id as number;
    }
    const log = () => deliveryLog(server, hookId).then((rows) => rows.filter((row) => row.event === 'experience'));
    // The same expression on the list endpoint returns the records the webhook hears about.
    const listed = await api(server, 'GET', '/api/v1/experiences/?search=poem&limit=100');
    const listedIds = (listed.body.results as Json[]).map((r) => r.id as number).filter((id) => Object.values(ids).includes(id));
    await eventually(() => (events(filtered).length >= 2 ? true : undefined));
    const heard = events(filtered).map((r) => bodyOf(r).experience.id as number);
    expect(new Set(heard)).toEqual(new Set(listedIds));
    expect(new Set(heard)).toEqual(new Set([ids['poem one'], ids['Poem three']]));
    expect((await log()).length).toBe(2);
    expect(bodyOf(events(filtered)[0]!).filter).toEqual({ matched_before: false, matched_after: true });

    // Stops matching: heard, saying so. Starts matching: heard. Never matching: not heard.
    await api(server, 'PATCH', `/api/v1/experiences/${ids['poem one']}/`, { title: 'essay one' });
    await api(server, 'PATCH', `/api/v1/experiences/${ids['essay two']}/`, { title: 'poem two' });
    await api(server, 'PATCH', `/api/v1/experiences/${ids['essay four']}/`, { title: 'essay four, revised' });
    await api(server, 'PATCH', `/api/v1/experiences/${ids['poem one']}/`, { title: 'essay one, revised' });
    await api(server, 'DELETE', `/api/v1/experiences/${ids['essay one']}/`);
    await api(server, 'DELETE', `/api/v1/experiences/${ids['Poem three']}/`);
    expect((await log()).length).toBe(5);
    await eventually(() => (events(filtered).length >= 5 ? true : undefined));
    const later = events(filtered).slice(2).map(bodyOf);
    const byRecord = (id: number | undefined) => later.filter((b) => b.experience.id === id);
    expect(byRecord(ids['poem one']).map((b) => [b.action, b.filter])).toEqual([['updated', { matched_before: true, matched_after: false }]]);
    expect(byRecord(ids['essay two']).map((b) => [b.action, b.filter])).toEqual([['updated', { matched_before: false, matched_after: true }]]);
    expect(byRecord(ids['essay four'])).toEqual([]);
    expect(byRecord(ids['Poem three']).map((b) => [b.action, b.filter])).toEqual([['deleted', { matched_before: true, matched_after: false }]]);
  }, 60_000);

  it('refuses a bad filter with a 400 naming the parameter, as the list endpoint does', async () => {
    const target = (await receiver()).url;
    const listed = await api(server, 'GET', '/api/v1/experiences/?owner=abc');
    expect(listed.status).toBe(400);
    const bad = await api(server, 'POST', '/api/v1/webhooks/', { target_url: target, filter: { experience: 'owner=abc' } });
    expect(bad.status).toBe(400);
    expect(bad.body.errors?.filter ?? bad.body.filter).toBeDefined();
    const message = JSON.stringify(bad.body);
    expect(message).toContain('owner');
    expect(message).toContain(String(listed.body.errors?.owner?.[0] ?? listed.body.owner?.[0]));
    for (const filter of [{ experience: 'nope=1' }, { nonsense: 'title=a' }, 'title=a', { experience: 7 }]) {
      const refused = await api(server, 'POST', '/api/v1/webhooks/', { target_url: target, filter });
      expect(refused.status, JSON.stringify(filter)).toBe(400);
    }
    const order = await api(server, 'POST', '/api/v1/webhooks/', { target_url: target, ordering: 'sometimes' });
    expect(order.status).toBe(400);
    expect(JSON.stringify(order.body)).toContain('ordering');
  });

  it('replays exactly the failed deliveries of a time range, with their guids, as redeliveries', async () => {
    const flaky = await receiver();
    flaky.respondWith(() => 500);
    const hookId = await createHook(server, { target_url: flaky.url });
    const failedGuids = async () =>
      new Set((await deliveryLog(server, hookId)).filter((row) => row.event === 'experience' && row.status === 'failed').map((row) => row.guid as string));
    const createBatch = async (label: string, n: number) => {
      for (let i = 0; i < n; i++) await api(server, 'POST', '/api/v1/experiences/', { title: `${label} ${i}`, q_like_dislike: 'like' });
    };
    const pause = () => new Promise((resolve) => setTimeout(resolve, 30));

    await createBatch('before', 2);
    await eventually(async () => ((await failedGuids()).size === 2 ? true : undefined));
    await pause();
    const since = new Date().toISOString();
    await pause();
    await createBatch('inside', 3);
    await eventually(async () => ((await failedGuids()).size === 5 ? true : undefined));
    const inside = new Set([...(await failedGuids())].filter((guid) => !events(flaky).some((r) => guidOf(r) === guid && bodyOf(r).experience.title.startsWith('before'))));
    expect(inside.size).toBe(3);
    await pause();
    const until = new Date().toISOString();
    await pause();
    await createBatch('after', 1);
    await eventually(async () => ((await failedGuids()).size === 6 ? true : undefined));

    flaky.respondWith(() => 204);
    const seenBefore = flaky.received.length;
    const replay = await api(server, 'POST', `/api/v1/webhooks/${hookId}/deliveries/replays/`, { since, until });
    expect(replay.status).toBe(202);
    expect(replay.body).toEqual({ redelivered: 3, remaining: 0 });
    await eventually(() => (flaky.received.length - seenBefore >= 3 ? true : undefined));
    const log = await deliveryLog(server, hookId);
    const redeliveries = log.filter((row) => row.redelivery === true);
    expect(new Set(redeliveries.map((row) => row.guid))).toEqual(inside);
    await eventually(async () => ((await deliveryLog(server, hookId)).filter((row) => row.redelivery && row.status === 'delivered').length === 3 ? true : undefined));
    expect(new Set(flaky.received.slice(seenBefore).map(guidOf))).toEqual(inside);

    // Already redelivered: a second replay of the range finds nothing to send.
    expect((await api(server, 'POST', `/api/v1/webhooks/${hookId}/deliveries/replays/`, { since, until })).body).toEqual({ redelivered: 0, remaining: 0 });
    // `since` is required and must be a datetime; status must be one a delivery ends in.
    expect((await api(server, 'POST', `/api/v1/webhooks/${hookId}/deliveries/replays/`, {})).status).toBe(400);
    expect((await api(server, 'POST', `/api/v1/webhooks/${hookId}/deliveries/replays/`, { since: 'yesterday' })).status).toBe(400);
    expect((await api(server, 'POST', `/api/v1/webhooks/${hookId}/deliveries/replays/`, { since, status: 'pending' })).status).toBe(400);
  }, 90_000);

  it("lists every event in the catalog, with the OpenAPI document's schemas, and they validate every delivered body", async () => {
    const catalog = await api(server, 'GET', '/api/v1/events/');
    expect(catalog.status).toBe(200);
    const entries = catalog.body.results as Json[];
    // `ping` too (issue 22 item 18): every receiver gets one.
    expect(entries.map((e) => e.name)).toEqual(['experience', 'ping']);
    expect(entries[0]).toMatchObject({ collection: 'experiences', actions: ['created', 'updated', 'deleted'] });
    expect(typeof entries[0]!.description).toBe('string');
    const openapi = await api(server, 'GET', '/api/v1/openapi.json');
    expect(openapi.status).toBe(200);
    expect(openapi.body.webhooks.experience.post.requestBody.content['application/json'].schema).toEqual(entries[0]!.schema);

    const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
    const validate = ajv.compile(entries[0]!.schema as object);
    const bodies = receivers.flatMap((r) => events(r)).map(bodyOf);
    expect(bodies.length).toBeGreaterThan(100);
    for (const body of bodies) expect(validate(body), JSON.stringify(validate.errors)).toBe(true);
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)('ordered delivery with two workers on PostgreSQL', () => {
  let database: TestDatabase;
  const processes: RunningServer[] = [];
  let receiver: Receiver;
  beforeAll(async () => {
    database = await createTestDatabase('postgres');
    receiver = await startReceiver();
  });
  afterAll(async () => {
    for (const p of processes) await p.stop('SIGKILL');
    await receiver?.close();
    await database?.drop();
  });

  it('keeps commit order per record when a worker is killed mid-attempt, and never sends one record twice at once', async () => {
    // A 4 s attempt timeout makes the lease 12 s: long enough to kill the worker mid-attempt.
    const env = { ...SERVE_ENV, DISPATCHER_IN_SERVE: 'false', WEBHOOK_TIMEOUT_SECONDS: '4' };
    const server = await startServer(database, { env: { ...env, LOG_LEVEL: 'info' } });
    processes.push(server);
    const worker = () => startServer(database, { args: ['worker'], env: { ...env, LOG_LEVEL: 'info' }, ready: /worker delivering webhooks/ });
    const first = await worker();
    processes.push(first);

    // Two records, updated in turns; the receiver hangs on the first attempt of record A's 10th update.
    let hung = false;
    receiver.respondWith((request) => {
      const body = bodyOf(request);
      if (!hung && body.action === 'updated' && body.experience.title === 'a9') {
        hung = true;
        return 'hang';
      }
      return 204;
    });
    await createHook(server, { target_url: receiver.url, ordering: 'record' });
    const a = (await api(server, 'POST', '/api/v1/experiences/', { title: 'a-1', q_like_dislike: 'like' })).body.id as number;
    const b = (await api(server, 'POST', '/api/v1/experiences/', { title: 'b-1', q_like_dislike: 'like' })).body.id as number;
    for (let i = 0; i < 30; i++) {
      await api(server, 'PATCH', `/api/v1/experiences/${a}/`, { title: `a${i}` });
      await api(server, 'PATCH', `/api/v1/experiences/${b}/`, { title: `b${i}` });
    }
    await eventually(() => (hung ? true : undefined));
    // A second worker joins; the first dies with the attempt in flight. Its lease must expire
    // before anyone sends record A again, and record A's later updates wait behind it.
    processes.push(await worker());
    await first.stop('SIGKILL');

    const a9Attempts = () => events(receiver).filter((r) => bodyOf(r).experience.title === 'a9').length;
    await eventually(() => (new Set(events(receiver).map(guidOf)).size >= 62 && a9Attempts() >= 2 ? true : undefined), 90_000);
    for (const prefix of ['a', 'b']) {
      const titles = updateNumbers(events(receiver), prefix);
      for (let i = 1; i < titles.length; i++) expect(titles[i]!, `${prefix}: ${titles.join(',')}`).toBeGreaterThanOrEqual(titles[i - 1]!);
      expect([...new Set(titles)]).toEqual(Array.from({ length: 30 }, (_, i) => i));
    }
    // a9 was sent again after the kill (at least once), and nothing of record A came between.
    expect(a9Attempts()).toBeGreaterThanOrEqual(2);
    // Two records may be in flight together; never more (one per record).
    expect(receiver.maxInFlight).toBeLessThanOrEqual(2);
  }, 150_000);
});
