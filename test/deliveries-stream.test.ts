import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openStream, type OpenStream, type StreamMessage } from './support/event-stream.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { BACKENDS, basic, createTestDatabase, createUser, startServer, type RunningServer, type TestDatabase } from './support/server.js';

// A webhook's deliveries stream their changes (issue 23, STREAMS.md §1), black-box on both
// databases: a delivery's creation and each attempt's outcome arrive as `created` and `updated`
// messages with positions, each record as a GET shows it; a stream resumes after Last-Event-ID;
// a redelivery is a new delivery on the stream; another user sees nothing of it.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

// Retries at once (0 s ± jitter): a delivery answered 500 once is delivered on its second attempt.
const SERVE_ENV = { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: '0,0', LOG_LEVEL: 'warn' };
const READY = /listening at (http:\/\/127\.0\.0\.1:\d+)/;

const alice = basic('alice', 'alice-password-1');
const bob = basic('bob', 'bob-password-1');

describe.each(BACKENDS)("a webhook's deliveries stream on %s", (backend) => {
  let database: TestDatabase;
  let server: RunningServer;
  let receiver: Receiver;
  const streams: OpenStream[] = [];

  const send = async (method: string, path: string, auth: string, body?: unknown) => {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: auth, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: (text ? JSON.parse(text) : null) as Json, text };
  };
  const stream = async (path: string, auth: string, headers: Record<string, string> = {}) => {
    const opened = await openStream(`${server.url}${path}`, { authorization: auth, ...headers });
    streams.push(opened);
    return opened;
  };
  const createHook = async (auth: string, events: string[]) => {
    const created = await send('POST', '/api/v1/webhooks/', auth, { target_url: receiver.url, events });
    expect(created.status, created.text).toBe(201);
    return created.body.id as number;
  };
  /** The deliveries list as its owner reads it, and the position it was read at. */
  const list = async (hookId: number, auth = alice) => {
    const read = await send('GET', `/api/v1/webhooks/${hookId}/deliveries/`, auth);
    expect(read.status, read.text).toBe(200);
    return { results: read.body.results as Json[], position: Number(read.headers.get('x-change-position')) };
  };
  /** The list once every delivery in it is done (the creation ping delivered, its outcome stored). */
  const settled = async (hookId: number, auth = alice) => {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const read = await list(hookId, auth);
      if (read.results.length > 0 && read.results.every((d) => d.status === 'delivered')) return read;
      if (Date.now() > deadline) throw new Error(`deliveries of webhook ${hookId} not delivered: ${JSON.stringify(read.results)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  /** Waits until a delivery's latest message says `status`. */
  const until = async (opened: OpenStream, id: number, status: string): Promise<StreamMessage[]> => {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const mine = opened.messages.filter((m) => m.json().record.id === id);
      if (mine.at(-1)?.json().record.status === status) return mine;
      if (Date.now() > deadline) throw new Error(`delivery ${id} never reached ${status}: ${mine.map((m) => m.data).join('\n')}`);
      await opened.waitFor(opened.messages.length + 1, deadline - Date.now()).catch(() => undefined);
    }
  };

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    receiver = await startReceiver();
    server = await startServer(database, { env: SERVE_ENV, ready: READY });
    await createUser(database, 'alice', 'alice-password-1');
    await createUser(database, 'bob', 'bob-password-1');
  });
  afterEach(() => {
    for (const opened of streams.splice(0)) opened.close();
  });
  afterAll(async () => {
    await server?.stop();
    await receiver?.close();
    await database?.drop();
  });

  it("streams a delivery's creation and each attempt, as a GET shows it, with positions, and resumes after Last-Event-ID", async () => {
    const hookId = await createHook(alice, ['experience']);
    // The creation ping: read the list once it is delivered, then follow from there.
    const read = await settled(hookId);
    expect(read.results.map((d) => d.event)).toEqual(['ping']);

    const live = await stream(`/api/v1/webhooks/${hookId}/deliveries/?since=${read.position}`, alice);
    expect(live.status).toBe(200);
    expect(live.headers.get('content-type')).toMatch(/^text\/event-stream/);
    receiver.respond([500]);
    const experience = await send('POST', '/api/v1/experiences/', alice, { title: 'Sunset hike', q_like_dislike: 'like' });
    expect(experience.status).toBe(201);

    const after = (await list(hookId)).results;
    const deliveryId = after.find((d) => d.event === 'experience')!.id as number;
    const messages = await until(live, deliveryId, 'delivered');
    // Nothing of the ping came again: the read showed it.
    expect(live.messages.every((m) => m.json().record.id === deliveryId)).toBe(true);
    expect(messages.map((m) => m.event)).toEqual(['created', 'updated', 'updated']);
    const ids = messages.map((m) => Number(m.id));
    expect(ids[0]).toBeGreaterThan(read.position);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);

    const [created, failed, delivered] = messages.map((m) => m.json());
    expect(created).toEqual({
      action: 'created',
      record: expect.objectContaining({ id: deliveryId, event: 'experience', action: 'created', status: 'pending', attempts: 0, record: `experiences:${experience.body.id}` }),
    });
    expect(failed!.record).toMatchObject({ status: 'retrying', status_code: 500, attempts: 1, delivered_at: null });
    expect(failed!.changes).toMatchObject({ status: { from: 'pending' }, status_code: { from: null }, attempts: { from: 0 } });
    // The last message's record is the delivery as the list shows it now.
    const shown = (await list(hookId)).results.find((d) => d.id === deliveryId);
    expect(delivered).toEqual({ action: 'updated', record: shown, changes: expect.objectContaining({ status: { from: 'retrying' }, status_code: { from: 500 }, attempts: { from: 1 } }) });
    expect(delivered!.record).toMatchObject({ status: 'delivered', status_code: 204, attempts: 2 });

    // The record's own stream shows what its GET shows: request and response included.
    const one = await stream(`/api/v1/webhooks/${hookId}/deliveries/${deliveryId}/?since=${read.position}`, alice);
    const detail = await one.waitFor(3);
    expect(detail.map((m) => m.id)).toEqual(messages.map((m) => m.id));
    const got = await send('GET', `/api/v1/webhooks/${hookId}/deliveries/${deliveryId}/`, alice);
    expect(detail[2]!.json().record).toEqual(got.body);
    // Each message's record is the delivery after that attempt; its request and response are read
    // from the delivery when the message is built (the log does not copy them, docs/API.md).
    expect(detail[1]!.json().record).toMatchObject({ status: 'retrying', status_code: 500, attempts: 1 });

    // Resumed after the first message: the other two, once each.
    const resumed = await stream(`/api/v1/webhooks/${hookId}/deliveries/`, alice, { 'last-event-id': messages[0]!.id! });
    const again = await resumed.waitFor(2);
    expect(again.map((m) => [m.id, m.event, m.data])).toEqual(messages.slice(1).map((m) => [m.id, m.event, m.data]));
  });

  it('streams a redelivery as a new delivery, and a status tab only what enters or leaves it', async () => {
    const hookId = await createHook(alice, ['experience']);
    const { position, results: [ping] } = await settled(hookId);
    const live = await stream(`/api/v1/webhooks/${hookId}/deliveries/?since=${position}`, alice);
    const tab = await stream(`/api/v1/webhooks/${hookId}/deliveries/?status=pending&since=${position}`, alice);
    const redelivered = await send('POST', `/api/v1/webhooks/${hookId}/deliveries/${ping!.id}/attempts/`, alice);
    expect(redelivered.status, redelivered.text).toBe(202);
    const id = redelivered.body.id as number;
    const messages = await until(live, id, 'delivered');
    expect(messages.map((m) => m.event)).toEqual(['created', 'updated']);
    expect(messages[0]!.json().record).toMatchObject({ id, guid: ping!.guid, redelivery: true, status: 'pending' });
    // The pending tab: it comes in, then leaves marked.
    const pending = await tab.waitFor(2);
    expect(pending.map((m) => m.id)).toEqual(messages.map((m) => m.id));
    expect(pending[1]!.json()).toMatchObject({ action: 'updated', matched_after: false, record: { id, status: 'delivered' } });
  });

  it("shows another user nothing of a webhook's deliveries", async () => {
    const hookId = await createHook(alice, ['experience']);
    const bobsHook = await createHook(bob, ['experience']);
    await settled(hookId);
    // Bob cannot open Alice's, as he cannot list them.
    const refused = await stream(`/api/v1/webhooks/${hookId}/deliveries/?since=0`, bob);
    expect(refused.status).toBe(404);
    expect(refused.headers.get('content-type')).toMatch(/problem\+json/);

    // Bob's own stream, from before Alice's change: it hears his deliveries only.
    const { position } = await settled(bobsHook, bob);
    const his = await stream(`/api/v1/webhooks/${bobsHook}/deliveries/?since=${position}`, bob);
    const hers = await stream(`/api/v1/webhooks/${hookId}/deliveries/?since=${position}`, alice);
    const experience = await send('POST', '/api/v1/experiences/', alice, { title: 'Private walk', q_like_dislike: 'like' });
    expect(experience.status).toBe(201);
    const aliceDelivery = (await list(hookId)).results.find((d) => d.event === 'experience')!;
    await until(hers, aliceDelivery.id, 'delivered');
    const bobDelivery = (await list(bobsHook, bob)).results.find((d) => d.event === 'experience')!;
    await until(his, bobDelivery.id, 'delivered');
    // Then a ping of Bob's: in commit order it comes after anything else he could have been told.
    const pinged = await send('POST', `/api/v1/webhooks/${bobsHook}/pings/`, bob);
    expect(pinged.status, pinged.text).toBeLessThan(300);
    const pingId = (await list(bobsHook, bob)).results[0]!.id as number;
    await until(his, pingId, 'delivered');
    expect(new Set(his.messages.map((m) => m.json().record.url.split('/deliveries/')[0]))).toEqual(new Set([`/api/v1/webhooks/${bobsHook}`]));
    expect(hers.messages.every((m) => m.json().record.url.startsWith(`/api/v1/webhooks/${hookId}/deliveries/`))).toBe(true);
  });
});
