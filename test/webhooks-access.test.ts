import { spawn } from 'node:child_process';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { startReceiver, type Received, type Receiver } from './support/receiver.js';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, type RunningServer, type TestDatabase } from './support/server.js';

// Webhooks under the read rules (ACCESS.md §4), black-box: a real server, real receivers. alice,
// bob and the admin each subscribe to `note` events of the ACCESS.md §2 `notes`; bob may read
// public notes, his own, and team notes once he has `staff`. What a webhook did not hear is shown
// by its deliveries log once a later change it does hear has committed: the log's rows are
// written in the transaction of each change, so nothing of an earlier change can still come.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const NOTES = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'notes',
  fields: {
    body: field.text({ maxLength: 5000 }),
    visibility: field.choice(['private', 'team', 'public'], { default: 'private' }),
  },
  owner: true,
  event: 'note',
  filters: { visibility: ['exact'] },
  access: {
    read: ['visibility=public', 'owner=@me', 'visibility=team&@role=staff'],
    create: '@authenticated',
    update: 'owner=@me',
    delete: 'owner=@me',
  },
});
`;
const SERVE_ENV = { WEBHOOK_ALLOW_PRIVATE: 'true', LOG_LEVEL: 'warn' };
const READY = /listening at (http:\/\/127\.0\.0\.1:\d+)/;
const BIN = new URL('../bin/restwire.js', import.meta.url).pathname;

const alice = basic('alice', 'alice-password-1');
const bob = basic('bob', 'bob-password-1');

/** Runs the CLI as an operator would, in its own process (the server's role cache knows nothing of it). */
async function cliOk(database: TestDatabase, args: string[]): Promise<void> {
  const child = spawn(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH ?? '', ...database.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  expect(code, output).toBe(0);
}

const bodyOf = (r: Received) => JSON.parse(r.body) as Json;
const notesOf = (receiver: Receiver) => receiver.received.filter((r) => r.headers['x-service-event'] === 'note').map(bodyOf);

describe.each(BACKENDS)('webhooks under read rules on %s', (backend) => {
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
    const created = await write('POST', '/api/v1/webhooks/', auth, { target_url: receiver.url, events: ['note'], ...extra });
    hooks[name] = { id: created.id as number, auth, receiver };
  };
  /** A webhook's note deliveries as its log lists them, oldest first: `action record`. */
  const logOf = async (name: string): Promise<string[]> => {
    const { id, auth } = hooks[name]!;
    const page = await send('GET', `/api/v1/webhooks/${id}/deliveries/?limit=100`, auth);
    expect(page.status).toBe(200);
    return (page.body.results as Json[])
      .filter((row) => row.event === 'note')
      .reverse()
      .map((row) => `${row.action} ${row.record}`);
  };

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'notes.ts': NOTES });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    server = await project.start({ env: SERVE_ENV, ready: READY });
    await createUser(database, 'alice', 'alice-password-1');
    await createUser(database, 'bob', 'bob-password-1');
    await subscribe('alice', alice);
    await subscribe('bob', bob);
    await subscribe('admin', adminAuth);
    // Bob's filter asks for private notes: he may read only his own.
    await subscribe('bob private', bob, { filter: { note: 'visibility=private' } });
  });
  afterAll(async () => {
    for (const receiver of receivers) await receiver.close();
    await server?.stop();
    project?.cleanup();
    await database?.drop();
  });

  it('tells each owner only of what they may read, with `access` when a record enters or leaves their sight', { timeout: 120_000 }, async () => {
    const ownPrivate = await write('POST', '/api/v1/notes/', bob, { body: 'bob private' });
    const hidden = await write('POST', '/api/v1/notes/', alice, { body: 'p1' });
    const shown = await write('POST', '/api/v1/notes/', alice, { body: 'pub1', visibility: 'public' });
    await write('PATCH', `/api/v1/notes/${hidden.id}/`, alice, { body: 'p1 edited' });
    await write('PATCH', `/api/v1/notes/${hidden.id}/`, alice, { visibility: 'public' });
    await write('PATCH', `/api/v1/notes/${shown.id}/`, alice, { visibility: 'private' });
    await write('PATCH', `/api/v1/notes/${shown.id}/`, alice, { body: 'pub1 now secret' });
    await write('DELETE', `/api/v1/notes/${shown.id}/`, alice);
    const team = await write('POST', '/api/v1/notes/', alice, { body: 't1', visibility: 'team' });
    // Granted by another process: the server's role cache has not heard of it.
    await cliOk(database, ['roles', 'bob', '--add', 'staff']);
    await write('PATCH', `/api/v1/notes/${team.id}/`, alice, { body: 't1 edited' });
    await write('PATCH', `/api/v1/notes/${ownPrivate.id}/`, bob, { body: 'bob private, edited' });

    const key = (note: Json) => `notes:${note.id}`;
    // Alice's and the admin's webhooks hear every change to alice's notes; alice none of bob's private note.
    const alices = [
      `created ${key(hidden)}`, `created ${key(shown)}`, `updated ${key(hidden)}`, `updated ${key(hidden)}`,
      `updated ${key(shown)}`, `updated ${key(shown)}`, `deleted ${key(shown)}`, `created ${key(team)}`, `updated ${key(team)}`,
    ];
    expect(await logOf('alice')).toEqual(alices);
    expect(await logOf('admin')).toEqual([`created ${key(ownPrivate)}`, ...alices, `updated ${key(ownPrivate)}`]);
    // Bob: his own note, the public one, the private one made public (not its private edit), the
    // public one made private (not its later edit nor its delete), and the team note once staff.
    expect(await logOf('bob')).toEqual([
      `created ${key(ownPrivate)}`, `created ${key(shown)}`, `updated ${key(hidden)}`, `updated ${key(shown)}`,
      `updated ${key(team)}`, `updated ${key(ownPrivate)}`,
    ]);
    // His private-notes filter: only his own, never alice's note as it left his sight.
    expect(await logOf('bob private')).toEqual([`created ${key(ownPrivate)}`, `updated ${key(ownPrivate)}`]);

    const received = await hooks.bob!.receiver.waitFor((all) => all.filter((r) => r.headers['x-service-event'] === 'note').length === 6);
    expect(received.length).toBeGreaterThan(0);
    const bodies = notesOf(hooks.bob!.receiver);
    const entered = bodies.find((body) => body.action === 'updated' && body.note.id === hidden.id)!;
    expect(entered.access).toEqual({ readable_before: false, readable_after: true });
    expect(entered.note).toMatchObject({ id: hidden.id, body: 'p1 edited', visibility: 'public' });
    expect(entered.changes).toEqual({ visibility: { from: 'private' } });

    const left = bodies.find((body) => body.action === 'updated' && body.note.id === shown.id)!;
    expect(Object.keys(left).sort()).toEqual(['access', 'action', 'note', 'repository', 'sender']);
    expect(left.access).toEqual({ readable_before: true, readable_after: false });
    // The record's absolute URL (under PUBLIC_URL), its number and id: nothing else of it.
    expect(left.note).toEqual({ url: expect.stringMatching(new RegExp(`^http.*/api/v1/notes/${shown.id}/$`)), number: shown.id, id: shown.id });
    expect(left.sender).toEqual({ login: 'alice', id: expect.any(Number) });
    expect(left.repository.full_name).toBe('alice/notes');

    // Bodies with no change of sight carry no `access`.
    const plain = bodies.filter((body) => body !== entered && body !== left);
    expect(plain).toHaveLength(4);
    for (const body of plain) expect(body).not.toHaveProperty('access');
    expect(bodies.find((body) => body.note.id === team.id)).toMatchObject({ action: 'updated', note: { body: 't1 edited' }, changes: { body: { from: 't1' } } });

    // The event catalog describes every body, the one that names its record only too.
    const catalog = await send('GET', '/api/v1/events/', bob);
    const entry = (catalog.body.results as Json[]).find((event) => event.name === 'note')!;
    expect(entry.schema.properties.access.required).toEqual(['readable_before', 'readable_after']);
    const validate = new Ajv2020({ strict: false, allErrors: true, validateFormats: false }).compile(entry.schema as object);
    for (const body of bodies) expect(validate(body), JSON.stringify(validate.errors)).toBe(true);

    // The admin saw the same change as a plain update, with the record's fields and `changes`.
    await hooks.admin!.receiver.waitFor((all) => all.filter((r) => r.headers['x-service-event'] === 'note').length === 11);
    const adminLeft = notesOf(hooks.admin!.receiver).find((body) => body.action === 'updated' && body.note.id === shown.id && body.changes?.visibility);
    expect(adminLeft).toMatchObject({ note: { body: 'pub1', visibility: 'private' }, changes: { visibility: { from: 'public' } } });
    expect(adminLeft).not.toHaveProperty('access');
  });
});
