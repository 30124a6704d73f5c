import { createHmac } from 'node:crypto';
import { verify as verifyGithub } from '@octokit/webhooks-methods';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, startServer, type RunningServer, type TestDatabase } from './support/server.js';
import { startReceiver, type Received, type Receiver } from './support/receiver.js';

interface Hook {
  url: string;
  id: number;
  secret: string;
  target_url: string;
  events: string[];
  active: boolean;
  last_response: { code: number | null; status: string; message: string | null };
  disabled_reason: string | null;
}

const header = (r: Received, name: string) => String(r.headers[name]);

/** Checks a delivery the way receivers do: GitHub's verifier, Standard Webhooks, and sha1. */
async function expectSigned(delivery: Received, secret: string): Promise<void> {
  expect(await verifyGithub(secret, delivery.body, header(delivery, 'x-hub-signature-256'))).toBe(true);
  const sha1 = `sha1=${createHmac('sha1', secret).update(delivery.body).digest('hex')}`;
  expect(header(delivery, 'x-hub-signature')).toBe(sha1);
  const headers = {
    'webhook-id': header(delivery, 'webhook-id'),
    'webhook-timestamp': header(delivery, 'webhook-timestamp'),
    'webhook-signature': header(delivery, 'webhook-signature'),
  };
  expect(() => new Webhook(secret).verify(delivery.body, headers)).not.toThrow();
}

describe.each(BACKENDS)('webhooks on %s', (backend) => {
  let database: TestDatabase;
  let server: RunningServer;
  let receiver: Receiver;
  const bob = basic('bob', 'bob-password-1');
  const api = (path: string, init: RequestInit = {}) => fetch(`${server.url}${path}`, { redirect: 'manual', ...init });
  const json = (method: string, body: unknown, auth = adminAuth): RequestInit => ({
    method,
    headers: { authorization: auth, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const createHook = async (body: Record<string, unknown>, auth = adminAuth) => {
    const response = await api('/api/v1/webhooks/', json('POST', body, auth));
    expect(response.status, await response.clone().text()).toBe(201);
    return (await response.json()) as Hook;
  };
  /** The events of a webhook's deliveries log, newest first: everything it will ever be sent. */
  const loggedEvents = async (hook: Hook) => {
    const response = await api(`${hook.url}deliveries/?limit=100`, { headers: { authorization: adminAuth } });
    expect(response.status).toBe(200);
    return ((await response.json()) as { results: Array<{ event: string }> }).results.map((delivery) => delivery.event);
  };
  const deleteAllHooks = async (auth = adminAuth) => {
    const list = (await (await api('/api/v1/webhooks/?limit=100', { headers: { authorization: auth } })).json()) as { results: Hook[] };
    for (const hook of list.results) await api(hook.url, { method: 'DELETE', headers: { authorization: auth } });
  };
  const createExperience = async (title: string, auth = adminAuth) => {
    const response = await api('/api/v1/experiences/', json('POST', { title, q_like_dislike: 'like' }, auth));
    expect(response.status).toBe(201);
    return (await response.json()) as { id: number; url: string };
  };
  const ofEvent = (event: string) => (list: Received[]) => list.filter((r) => header(r, 'x-service-event') === event);

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    server = await startServer(database, {
      env: { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: '0,0', WEBHOOK_TIMEOUT_SECONDS: '1', PUBLIC_URL: 'https://api.example.test' },
    });
    await createUser(database, 'bob', 'bob-password-1');
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
    await server?.stop();
    await database?.drop();
  });
  beforeEach(async () => {
    await deleteAllHooks();
    await deleteAllHooks(bob);
    receiver.received.length = 0;
    receiver.respond([]);
  });

  it('creates a webhook, shows its secret once, and pings it', async () => {
    const hook = await createHook({ target_url: receiver.url });
    expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(hook).toMatchObject({ target_url: receiver.url, events: ['*'], active: true, disabled_reason: null });
    expect(hook.url).toBe(`/api/v1/webhooks/${hook.id}/`);
    const [ping] = await receiver.waitFor((list) => list.length >= 1);
    expect(header(ping!, 'x-service-event')).toBe('ping');
    expect(header(ping!, 'x-service-hook-id')).toBe(String(hook.id));
    expect(header(ping!, 'user-agent')).toMatch(/^restwire-hookshot\//);
    expect(header(ping!, 'content-type')).toBe('application/json');
    expect(header(ping!, 'x-service-delivery')).toMatch(/^[0-9a-f-]{36}$/);
    expect(header(ping!, 'webhook-id')).toBe(header(ping!, 'x-service-delivery'));
    await expectSigned(ping!, hook.secret);
    const body = JSON.parse(ping!.body) as Record<string, unknown>;
    expect(body).toMatchObject({ zen: expect.any(String), hook_id: hook.id, sender: { login: 'admin', id: 1 } });
    expect(ping!.body).not.toContain(hook.secret);

    const detail = await (await api(hook.url, { headers: { authorization: adminAuth } })).json();
    expect(detail).not.toHaveProperty('secret');
    const list = await (await api('/api/v1/webhooks/', { headers: { authorization: adminAuth } })).text();
    expect(list).not.toContain(hook.secret);
    // The outcome is recorded just after the receiver answers.
    let after: Hook;
    const deadline = Date.now() + 5000;
    do {
      after = (await (await api(hook.url, { headers: { authorization: adminAuth } })).json()) as Hook;
    } while (after.last_response.status === 'unused' && Date.now() < deadline);
    expect(after.last_response).toMatchObject({ code: 204, status: 'ok' });
  });

  it('delivers created, updated and deleted events, signed, with the GitHub shape', async () => {
    const hook = await createHook({ target_url: receiver.url, events: ['experience'] });
    await receiver.waitFor((list) => ofEvent('ping')(list).length === 1);
    const record = await createExperience('Webhook me');
    await api(record.url, json('PATCH', { title: 'Renamed' }));
    await api(record.url, { method: 'DELETE', headers: { authorization: adminAuth } });
    const events = ofEvent('experience')(await receiver.waitFor((list) => ofEvent('experience')(list).length >= 3));
    const bodies = events.map((e) => JSON.parse(e.body) as Record<string, any>); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(bodies.map((b) => b.action).sort()).toEqual(['created', 'deleted', 'updated']);
    const created = bodies.find((b) => b.action === 'created')!;
    expect(created.experience).toMatchObject({
      url: `https://api.example.test/api/v1/experiences/${record.id}/`,
      number: record.id,
      id: record.id,
      title: 'Webhook me',
      q_like_dislike: 'like',
      owner: '/api/v1/users/1/',
    });
    expect(created.repository).toMatchObject({ id: expect.any(Number), full_name: 'admin/experiences', owner: { login: 'admin', id: 1 } });
    expect(created.sender).toEqual({ login: 'admin', id: 1 });
    const updated = bodies.find((b) => b.action === 'updated')!;
    expect(updated.changes).toEqual({ title: { from: 'Webhook me' } });
    expect(updated.experience.title).toBe('Renamed');
    for (const event of events) {
      await expectSigned(event, hook.secret);
      expect(header(event, 'content-length')).toBe(String(Buffer.byteLength(event.body)));
    }
    expect(new Set(events.map((e) => header(e, 'x-service-delivery'))).size).toBe(3);
  });

  it('sends nothing for a change that was refused', async () => {
    const hook = await createHook({ target_url: receiver.url, events: ['experience'] });
    await receiver.waitFor((list) => list.length === 1);
    const bad = await api('/api/v1/experiences/', json('POST', { title: '', q_like_dislike: 'x' }));
    expect(bad.status).toBe(400);
    const record = await createExperience('Bob cannot touch this');
    const forbidden = await api(record.url, json('PATCH', { title: 'hijack' }, bob));
    expect(forbidden.status).toBe(403);
    await receiver.waitFor((list) => ofEvent('experience')(list).length === 1);
    // Deliveries are written in the change's transaction: the log is all that will ever be sent.
    expect(await loggedEvents(hook)).toEqual(['experience', 'ping']);
  });

  it('retries 500, 500, 200 with the same delivery id and logs three attempts', async () => {
    const hook = await createHook({ target_url: receiver.url, events: ['experience'] });
    await receiver.waitFor((list) => list.length === 1);
    receiver.respond([500, 500, 200]);
    await createExperience('Flaky receiver');
    const attempts = ofEvent('experience')(await receiver.waitFor((list) => ofEvent('experience')(list).length >= 3));
    expect(new Set(attempts.map((a) => header(a, 'x-service-delivery'))).size).toBe(1);
    let log: { results: Array<{ event: string; status: string; attempts: number; status_code: number; url: string; guid: string }> };
    const deadline = Date.now() + 5000;
    do {
      log = (await (await api(`${hook.url}deliveries/`, { headers: { authorization: adminAuth } })).json()) as typeof log;
    } while (log.results[0]?.status !== 'delivered' && Date.now() < deadline);
    const entry = log.results.find((d) => d.event === 'experience')!;
    expect(entry).toMatchObject({ status: 'delivered', attempts: 3, status_code: 200 });
    expect(entry.guid).toBe(header(attempts[0]!, 'x-service-delivery'));

    const detail = (await (await api(entry.url, { headers: { authorization: adminAuth } })).json()) as {
      request: { headers: Record<string, string>; payload: { action: string } };
      response: { headers: Record<string, string>; payload: string };
    };
    expect(detail.request.payload.action).toBe('created');
    expect(detail.request.headers['x-service-delivery']).toBe(entry.guid);
    expect(detail.response.payload).toBe('receiver says hi');
    expect(JSON.stringify(detail)).not.toContain(hook.secret);

    const failedOnly = (await (await api(`${hook.url}deliveries/?status=failed`, { headers: { authorization: adminAuth } })).json()) as { results: unknown[] };
    expect(failedOnly.results).toHaveLength(0);
    expect((await api(`${hook.url}deliveries/?status=bogus`, { headers: { authorization: adminAuth } })).status).toBe(400);
  });

  it('marks a delivery failed when the schedule is used up, and redelivers it with the same guid', async () => {
    const hook = await createHook({ target_url: receiver.url, events: ['experience'] });
    await receiver.waitFor((list) => list.length === 1);
    receiver.respond([500, 500, 500]);
    await createExperience('Always failing');
    await receiver.waitFor((list) => ofEvent('experience')(list).length >= 3);
    let failed: { results: Array<{ url: string; guid: string; attempts: number }> };
    const deadline = Date.now() + 5000;
    do {
      failed = (await (await api(`${hook.url}deliveries/?status=failed`, { headers: { authorization: adminAuth } })).json()) as typeof failed;
    } while (failed.results.length === 0 && Date.now() < deadline);
    expect(failed.results).toHaveLength(1);
    expect(failed.results[0]!.attempts).toBe(3);

    const redeliver = await api(`${failed.results[0]!.url}attempts/`, { method: 'POST', headers: { authorization: adminAuth } });
    expect(redeliver.status).toBe(202);
    expect(await redeliver.json()).toMatchObject({ guid: failed.results[0]!.guid, redelivery: true });
    const again = await receiver.waitFor((list) => ofEvent('experience')(list).length >= 4);
    expect(header(again.at(-1)!, 'x-service-delivery')).toBe(failed.results[0]!.guid);
  });

  it('redelivers every failed delivery at once when the receiver is back', async () => {
    const hook = await createHook({ target_url: receiver.url, events: ['experience'] });
    await receiver.waitFor((list) => list.length === 1);
    receiver.respond(Array(9).fill(503));
    for (const title of ['one', 'two', 'three']) await createExperience(title);
    await receiver.waitFor((list) => ofEvent('experience')(list).length >= 9);
    // Wait until the last attempts are recorded: all three failed.
    const deadline = Date.now() + 5000;
    let failed: { results: unknown[] };
    do {
      failed = (await (await api(`${hook.url}deliveries/?status=failed`, { headers: { authorization: adminAuth } })).json()) as typeof failed;
    } while (failed.results.length < 3 && Date.now() < deadline);
    receiver.respond([]);
    const response = await api(`${hook.url}deliveries/failed/attempts/`, { method: 'POST', headers: { authorization: adminAuth } });
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ redelivered: 3 });
    await receiver.waitFor((list) => ofEvent('experience')(list).length >= 12);
    const second = await api(`${hook.url}deliveries/failed/attempts/`, { method: 'POST', headers: { authorization: adminAuth } });
    expect(await second.json()).toEqual({ redelivered: 0 });
  });

  it('disables a webhook at once on 410 Gone, and PATCH active re-enables it', async () => {
    receiver.respond([410]);
    const hook = await createHook({ target_url: receiver.url });
    await receiver.waitFor((list) => list.length === 1);
    let state: Hook;
    const deadline = Date.now() + 5000;
    do {
      state = (await (await api(hook.url, { headers: { authorization: adminAuth } })).json()) as Hook;
    } while (state.active && Date.now() < deadline);
    expect(state.active).toBe(false);
    expect(state.disabled_reason).toMatch(/410/);
    expect(state.last_response).toMatchObject({ code: 410, status: 'failed' });
    await createExperience('Nobody listens');
    expect(await loggedEvents(hook)).toEqual(['ping']);
    expect(receiver.received).toHaveLength(1);

    const enabled = (await (await api(hook.url, json('PATCH', { active: true }))).json()) as Hook;
    expect(enabled).toMatchObject({ active: true, disabled_reason: null });
  });

  it('times out a hanging receiver and retries; it does not delay another webhook', async () => {
    const slow = await startReceiver();
    try {
      slow.respond(Array(20).fill('hang'));
      await createHook({ target_url: slow.url, events: ['experience'] });
      await createHook({ target_url: receiver.url, events: ['experience'] });
      await receiver.waitFor((list) => ofEvent('ping')(list).length === 1);
      const started = Date.now();
      for (let i = 0; i < 20; i++) await createExperience(`burst ${i}`);
      await receiver.waitFor((list) => ofEvent('experience')(list).length >= 20, 5000);
      // Twenty events reached the healthy receiver well within one attempt timeout of the slow one.
      expect(Date.now() - started).toBeLessThan(3000);
      // The hanging receiver saw attempts time out (1 s here) and be retried.
      await slow.waitFor((list) => ofEvent('experience')(list).length > 16, 10_000);
    } finally {
      await slow.close();
    }
  });

  it('rotates a secret with a 24-hour overlap: both signatures verify', async () => {
    const hook = await createHook({ target_url: receiver.url, events: ['experience'] });
    await receiver.waitFor((list) => list.length === 1);
    const newSecret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    const patched = await api(hook.url, json('PATCH', { secret: newSecret }));
    expect(patched.status).toBe(200);
    expect(await patched.text()).not.toContain(newSecret);
    await createExperience('Rotated');
    const [event] = ofEvent('experience')(await receiver.waitFor((list) => ofEvent('experience')(list).length === 1));
    expect(header(event!, 'webhook-signature').split(' ')).toHaveLength(2);
    await expectSigned(event!, newSecret);
    const headers = { 'webhook-id': header(event!, 'webhook-id'), 'webhook-timestamp': header(event!, 'webhook-timestamp'), 'webhook-signature': header(event!, 'webhook-signature') };
    expect(() => new Webhook(hook.secret).verify(event!.body, headers)).not.toThrow();
  });

  it('pings on demand, keeps webhooks private to their owner, and validates input', async () => {
    const hook = await createHook({ target_url: receiver.url, secret: `whsec_${Buffer.alloc(24, 1).toString('base64')}` });
    await receiver.waitFor((list) => list.length === 1);
    expect((await api(`${hook.url}pings/`, { method: 'POST', headers: { authorization: adminAuth } })).status).toBe(204);
    await receiver.waitFor((list) => list.length === 2);

    expect((await api(hook.url, { headers: { authorization: bob } })).status).toBe(404);
    expect((await api(hook.url, { method: 'DELETE', headers: { authorization: bob } })).status).toBe(404);
    expect((await api(`${hook.url}deliveries/`, { headers: { authorization: bob } })).status).toBe(404);
    expect((await api('/api/v1/webhooks/')).status).toBe(401);
    const bobs = (await (await api('/api/v1/webhooks/', { headers: { authorization: bob } })).json()) as { results: unknown[] };
    expect(bobs.results).toHaveLength(0);

    for (const body of [
      { target_url: 'ftp://example.com/' },
      { target_url: 'not a url' },
      { target_url: receiver.url, events: ['nope'] },
      { target_url: receiver.url, events: [] },
      { target_url: receiver.url, secret: 'hunter2' },
      { target_url: receiver.url, secret: `whsec_${Buffer.alloc(8).toString('base64')}` },
      { events: ['*'] },
    ]) {
      const response = await api('/api/v1/webhooks/', json('POST', body));
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    }
  });

  it('greets only an active webhook, but pings an inactive one on demand', async () => {
    const hook = await createHook({ target_url: receiver.url, active: false });
    expect(await loggedEvents(hook)).toEqual([]);
    expect(receiver.received).toHaveLength(0);
    expect((await api(`${hook.url}pings/`, { method: 'POST', headers: { authorization: adminAuth } })).status).toBe(204);
    const [ping] = await receiver.waitFor((list) => list.length === 1);
    expect(header(ping!, 'x-service-event')).toBe('ping');
  });

  it('describes its fields on OPTIONS and shows a delivery as CSV', async () => {
    const options = (await (await api('/api/v1/webhooks/', { method: 'OPTIONS', headers: { authorization: adminAuth } })).json()) as {
      actions: { POST: Record<string, { required: boolean; read_only: boolean }> };
    };
    expect(options.actions.POST.target_url).toMatchObject({ required: true, read_only: false });
    expect(options.actions.POST.url).toMatchObject({ read_only: true });
    const hook = await createHook({ target_url: receiver.url });
    await receiver.waitFor((list) => list.length === 1);
    const log = (await (await api(`${hook.url}deliveries/`, { headers: { authorization: adminAuth } })).json()) as { results: Array<{ url: string }> };
    const csv = await api(log.results[0]!.url, { headers: { authorization: adminAuth, accept: 'text/csv' } });
    expect(csv.status).toBe(200);
    expect((await csv.text()).split('\r\n')[0]).toMatch(/^url,id,guid,event,/);
  });

  it('allows at most 20 webhooks per user', async () => {
    for (let i = 0; i < 20; i++) await createHook({ target_url: receiver.url, active: false }, bob);
    const response = await api('/api/v1/webhooks/', json('POST', { target_url: receiver.url }, bob));
    expect(response.status).toBe(400);
    await deleteAllHooks(bob);
  });

  it('never logs a secret', () => {
    expect(server.output()).not.toMatch(/whsec_/);
  });
});

describe('webhook targets on private networks', () => {
  let database: TestDatabase;
  let server: RunningServer;
  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    server = await startServer(database);
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  it.each([
    'http://127.0.0.1:9/hook',
    'http://localhost:9/hook',
    'http://10.0.0.1/hook',
    'http://192.168.1.1/hook',
    'http://169.254.169.254/latest/meta-data/',
    'http://[::1]/hook',
    'http://[fd00::1]/hook',
    'http://100.64.0.1/hook',
  ])('refuses %s by default', async (target) => {
    const response = await fetch(`${server.url}/api/v1/webhooks/`, {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ target_url: target }),
    });
    expect(response.status).toBe(400);
    const problem = (await response.json()) as { errors: { target_url: string[] } };
    expect(problem.errors.target_url[0]).toMatch(/WEBHOOK_ALLOW_PRIVATE|address/);
  });
});
