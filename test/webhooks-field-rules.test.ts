import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { startReceiver, type Received, type Receiver } from './support/receiver.js';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, type RunningServer, type TestDatabase } from './support/server.js';

// Field rules in webhook bodies and filters (ACCESS.md §3, §4), black-box: every record of
// `contacts` is read by all, its `email` only by the record's owner (and admins). alice, bob and
// the admin each subscribe to `contact` events; bob also with a filter on `email`. What a webhook
// did not hear is shown by its deliveries log once a later change it does hear has committed.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const CONTACTS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'contacts',
  fields: {
    name: field.string({ maxLength: 100 }),
    email: field.string({ maxLength: 100, required: false, access: { read: 'owner=@me' } }),
  },
  owner: true,
  event: 'contact',
  filters: { email: ['exact'] },
  access: { read: '*', create: '@authenticated', update: 'owner=@me', delete: 'owner=@me' },
});
`;
const SERVE_ENV = { WEBHOOK_ALLOW_PRIVATE: 'true', LOG_LEVEL: 'warn' };
const READY = /listening at (http:\/\/127\.0\.0\.1:\d+)/;

const alice = basic('alice', 'alice-password-1');
const bob = basic('bob', 'bob-password-1');

const bodyOf = (r: Received) => JSON.parse(r.body) as Json;
const contactsOf = (received: readonly Received[]) => received.filter((r) => r.headers['x-service-event'] === 'contact').map(bodyOf);

describe.each(BACKENDS)('webhooks under field rules on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  const receivers: Receiver[] = [];
  const hooks: Record<string, { id: number; auth: string; receiver: Receiver }> = {};

  const send = async (method: string, path: string, auth: string, body?: unknown) => {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: auth, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: text ? (JSON.parse(text) as Json) : {} };
  };
  const write = async (method: string, path: string, auth: string, body?: unknown) => {
    const result = await send(method, path, auth, body);
    expect(result.status, JSON.stringify(result.body)).toBeLessThan(300);
    return result.body;
  };
  const subscribe = async (name: string, auth: string, extra: Json = {}) => {
    const receiver = await startReceiver();
    receivers.push(receiver);
    const created = await write('POST', '/api/v1/webhooks/', auth, { target_url: receiver.url, events: ['contact'], ...extra });
    hooks[name] = { id: created.id as number, auth, receiver };
  };
  const logOf = async (name: string): Promise<string[]> => {
    const { id, auth } = hooks[name]!;
    const page = await send('GET', `/api/v1/webhooks/${id}/deliveries/?limit=100`, auth);
    expect(page.status).toBe(200);
    return (page.body.results as Json[])
      .filter((row) => row.event === 'contact')
      .reverse()
      .map((row) => `${row.action} ${row.record}`);
  };
  /**
   * A webhook's `contact` bodies once `count` of them have arrived, in the order they were queued
   * (its log's): an unordered webhook's deliveries of different records may arrive in any order.
   */
  const bodiesOf = async (name: string, count: number): Promise<Json[]> => {
    const { id, auth, receiver } = hooks[name]!;
    const received = await receiver.waitFor((all) => contactsOf(all).length === count);
    const page = await send('GET', `/api/v1/webhooks/${id}/deliveries/?limit=100`, auth);
    const queued = (page.body.results as Json[]).filter((row) => row.event === 'contact').reverse();
    return queued.map((row) => bodyOf(received.find((r) => r.headers['x-service-delivery'] === row.guid)!));
  };

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'contacts.ts': CONTACTS });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    server = await project.start({ env: SERVE_ENV, ready: READY });
    await createUser(database, 'alice', 'alice-password-1');
    await createUser(database, 'bob', 'bob-password-1');
    await subscribe('alice', alice);
    await subscribe('bob', bob);
    await subscribe('admin', adminAuth);
    await subscribe('bob email', bob, { filter: { contact: 'email=x@example.com' } });
  });
  afterAll(async () => {
    for (const receiver of receivers) await receiver.close();
    await server?.stop();
    project?.cleanup();
    await database?.drop();
  });

  it("shows each owner's webhook the fields they may read, in the record and in `changes`", { timeout: 120_000 }, async () => {
    const carol = await write('POST', '/api/v1/contacts/', alice, { name: 'Carol', email: 'x@example.com' });
    await write('PATCH', `/api/v1/contacts/${carol.id}/`, alice, { email: 'y@example.com' });
    await write('PATCH', `/api/v1/contacts/${carol.id}/`, alice, { name: 'Carol B', email: 'x@example.com' });
    // Judged before the delete: after it, `owner=@me` holds of no row, and alice would lose her own email.
    await write('DELETE', `/api/v1/contacts/${carol.id}/`, alice);
    // Bob's own contact, last: his filter matches it, so his log is complete once it is there.
    const dave = await write('POST', '/api/v1/contacts/', bob, { name: 'Dave', email: 'x@example.com' });

    const key = (contact: Json) => `contacts:${contact.id}`;
    const all = [`created ${key(carol)}`, `updated ${key(carol)}`, `updated ${key(carol)}`, `deleted ${key(carol)}`, `created ${key(dave)}`];
    for (const name of ['alice', 'bob', 'admin']) expect(await logOf(name)).toEqual(all);
    // Bob may not read alice's email: his filter on it matches nothing of hers, whatever its value.
    expect(await logOf('bob email')).toEqual([`created ${key(dave)}`]);

    const alices = await bodiesOf('alice', 5);
    expect(alices.map((body) => body.contact.email)).toEqual(['x@example.com', 'y@example.com', 'x@example.com', 'x@example.com', undefined]);
    expect(alices[1]!.changes).toEqual({ email: { from: 'x@example.com' } });
    expect(alices[2]!.changes).toEqual({ name: { from: 'Carol' }, email: { from: 'y@example.com' } });
    expect(alices[4]!.contact).not.toHaveProperty('email');

    const admins = await bodiesOf('admin', 5);
    expect(admins.map((body) => body.contact.email)).toEqual(['x@example.com', 'y@example.com', 'x@example.com', 'x@example.com', 'x@example.com']);

    const bobs = await bodiesOf('bob', 5);
    for (const body of bobs.slice(0, 4)) {
      expect(body.contact).not.toHaveProperty('email');
      expect(body.contact.name).toMatch(/^Carol/);
      expect(body.changes ?? {}).not.toHaveProperty('email');
    }
    // An update of the hidden field alone tells bob nothing changed that he may read.
    expect(bobs[1]).not.toHaveProperty('changes');
    expect(bobs[2]!.changes).toEqual({ name: { from: 'Carol' } });
    expect(bobs[3]).toMatchObject({ action: 'deleted', contact: { id: carol.id, name: 'Carol B' } });
    expect(bobs[4]!.contact.email).toBe('x@example.com');
    expect((await bodiesOf('bob email', 1))[0]).toMatchObject({ action: 'created', contact: { id: dave.id, email: 'x@example.com' } });
  });
});
