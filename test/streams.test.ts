import { connect } from 'node:net';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openStream, type OpenStream } from './support/event-stream.js';
import { createProject, runOk, type Project } from './support/project.js';
import { BACKENDS, basic, createTestDatabase, createUser, type RunningServer, type TestDatabase } from './support/server.js';

// Live changes (issue 23, STREAMS.md), black-box on both databases: every list and record URL
// streams its changes as Server-Sent Events, with positions for list-then-watch and resume, the
// list's filters and the reader's read rules applied, limits, reset, two processes and SIGTERM.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const NOTES = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'notes',
  fields: {
    body: field.string({ maxLength: 200 }),
    visibility: field.choice(['private', 'public'], { default: 'private' }),
    kind: field.choice(['a', 'b', 'c'], { default: 'a' }),
  },
  owner: true,
  filters: { kind: ['exact'], visibility: ['exact'] },
  access: { read: ['visibility=public', 'owner=@me'], create: '@authenticated', update: 'owner=@me', delete: 'owner=@me' },
});
`;

const PAGES = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'pages',
  fields: { text: field.text({ maxLength: 200000 }) },
  owner: true,
});
`;

// Read by its owner and by staff (STREAMS.md §2: with the reader's roles at the time of the change).
const MEMOS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'memos',
  fields: { body: field.string({ maxLength: 200 }) },
  owner: true,
  access: { read: ['owner=@me', '@role=staff'], create: '@authenticated', update: 'owner=@me', delete: 'owner=@me' },
});
`;

const alice = basic('alice', 'alice-password-1');
const bob = basic('bob', 'bob-password-1');

describe.each(BACKENDS)('live changes on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  const streams: OpenStream[] = [];
  const send = async (method: string, path: string, auth: string | null, body?: unknown, base = server.url) => {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(auth ? { authorization: auth } : {}) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: text && response.headers.get('content-type')?.includes('json') ? (JSON.parse(text) as Json) : null, text };
  };
  const stream = async (path: string, auth: string | null, headers: Record<string, string> = {}, base = server.url) => {
    const opened = await openStream(`${base}${path}`, { ...(auth ? { authorization: auth } : {}), ...headers });
    streams.push(opened);
    return opened;
  };
  const note = async (auth: string, body: string, extra: Json = {}) => {
    const created = await send('POST', '/api/v1/notes/', auth, { body, ...extra });
    expect(created.status, created.text).toBe(201);
    return created.body!;
  };
  const position = async (path = '/api/v1/notes/', auth: string | null = alice) => {
    const read = await send('GET', path, auth);
    expect(read.status).toBe(200);
    return Number(read.headers.get('x-change-position'));
  };

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'notes.ts': NOTES, 'pages.ts': PAGES, 'memos.ts': MEMOS });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    server = await project.start({ env: { STREAM_MAX_PER_USER: '3' } });
    await createUser(database, 'alice', 'alice-password-1');
    await createUser(database, 'bob', 'bob-password-1');
  });
  // Each test's streams end with it; the server notices at once, so the next test starts below the limit.
  afterEach(async () => {
    for (const opened of streams.splice(0)) opened.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
  });
  afterAll(async () => {
    await server?.stop();
    project?.cleanup();
    await database?.drop();
  });

  it('says position 0 before any change, and streams every kind of message after a list was read, exactly', async () => {
    expect(await position()).toBe(0);
    const first = await note(alice, 'first', { visibility: 'public' });
    const read = await send('GET', '/api/v1/notes/', alice);
    const after = Number(read.headers.get('x-change-position'));
    expect(after).toBeGreaterThan(0);
    expect(read.body!.results.map((n: Json) => n.body)).toEqual(['first']);

    const second = await note(alice, 'second');
    expect((await send('PATCH', `/api/v1/notes/${first.id}/`, alice, { body: 'first, edited' })).status).toBe(200);
    expect((await send('DELETE', `/api/v1/notes/${second.id}/`, alice)).status).toBe(204);

    const live = await stream(`/api/v1/notes/?since=${after}`, alice);
    expect(live.status).toBe(200);
    expect(live.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(live.headers.get('cache-control')).toBe('no-store');
    expect(live.headers.get('x-rate-limit-limit')).not.toBeNull();
    const messages = await live.waitFor(3);
    expect(messages.map((m) => m.event)).toEqual(['created', 'updated', 'deleted']);
    expect(messages.map((m) => Number(m.id))).toEqual([after + 1, after + 2, after + 3]);
    expect(messages[0]!.json()).toEqual({ action: 'created', record: second });
    const updated = messages[1]!.json();
    expect(updated.record).toMatchObject({ id: first.id, body: 'first, edited', url: first.url });
    expect(updated.changes).toEqual({ body: { from: 'first' } });
    expect('matched_before' in updated || 'matched_after' in updated).toBe(false);
    expect(messages[2]!.json()).toMatchObject({ action: 'deleted', record: { id: second.id, body: 'second' } });

    // And it goes on live, in commit order.
    const third = await note(alice, 'third');
    const [, , , created] = await live.waitFor(4);
    expect(created!.json()).toMatchObject({ action: 'created', record: { id: third.id } });
    expect(Number(created!.id)).toBe(after + 4);
    expect(await position()).toBe(after + 4);
  });

  it('tells a filtered stream of records entering and leaving its filter, and nothing else', async () => {
    const since = await position();
    const moving = await note(alice, 'moving', { kind: 'a' });
    await note(alice, 'elsewhere', { kind: 'c' });
    expect((await send('PATCH', `/api/v1/notes/${moving.id}/`, alice, { kind: 'b' })).status).toBe(200);
    expect((await send('PATCH', `/api/v1/notes/${moving.id}/`, alice, { kind: 'a' })).status).toBe(200);
    const sentinel = await note(alice, 'sentinel', { kind: 'a' });
    const filtered = await stream(`/api/v1/notes/?kind=a&since=${since}`, alice);
    const messages = await filtered.waitFor(4);
    expect(messages.map((m) => [m.event, m.json().record.id])).toEqual([
      ['created', moving.id],
      ['updated', moving.id],
      ['updated', moving.id],
      ['created', sentinel.id],
    ]);
    expect(messages[1]!.json()).toMatchObject({ matched_after: false, record: { kind: 'b' }, changes: { kind: { from: 'a' } } });
    expect(messages[2]!.json()).toMatchObject({ matched_before: false, record: { kind: 'a' } });
  });

  it("applies each reader's read rule: bob sees alice's public notes, and hears once when one turns private", async () => {
    const since = await position();
    const bobs = await stream('/api/v1/notes/', bob, { 'last-event-id': String(since) });
    const alices = await stream(`/api/v1/notes/?since=${since}`, alice);
    const hidden = await note(alice, 'hidden');
    const shown = await note(alice, 'shown', { visibility: 'public' });
    expect((await send('PATCH', `/api/v1/notes/${shown.id}/`, alice, { visibility: 'private' })).status).toBe(200);
    const sentinel = await note(alice, 'sentinel 2', { visibility: 'public' });
    const seenByBob = await bobs.waitFor(3);
    expect(seenByBob.map((m) => [m.event, m.json().record.id])).toEqual([
      ['created', shown.id],
      ['updated', shown.id],
      ['created', sentinel.id],
    ]);
    expect(seenByBob[1]!.json()).toEqual({ action: 'updated', record: { url: shown.url, id: shown.id }, matched_after: false });
    const seenByAlice = await alices.waitFor(4);
    expect(seenByAlice.map((m) => m.json().record.id)).toEqual([hidden.id, shown.id, shown.id, sentinel.id]);
    expect(seenByAlice[2]!.json()).toMatchObject({ changes: { visibility: { from: 'public' } } });
    expect('matched_after' in seenByAlice[2]!.json()).toBe(false);
  });

  it("judges each change with the reader's roles at the time: a role taken away or granted reaches an open stream", async () => {
    const { adminAuth } = await import('./support/server.js');
    await createUser(database, 'dave', 'dave-password-1');
    const dave = basic('dave', 'dave-password-1');
    const users = await send('GET', '/api/v1/users/?limit=100', adminAuth);
    const daveId = users.body!.results.find((user: Json) => user.username === 'dave').id as number;
    const setRoles = async (roles: string[]) => {
      const changed = await send('PATCH', `/api/v1/users/${daveId}/`, adminAuth, { roles });
      expect(changed.status, changed.text).toBe(200);
      expect(changed.body!.roles).toEqual(roles);
    };
    const memo = async (auth: string, body: string) => {
      const created = await send('POST', '/api/v1/memos/', auth, { body });
      expect(created.status, created.text).toBe(201);
      return created.body!;
    };
    await setRoles(['staff']);
    const daves = await stream('/api/v1/memos/', dave);
    expect(daves.status).toBe(200);
    const whileStaff = await memo(alice, 'while staff');
    expect((await daves.waitFor(1)).map((m) => m.json().record.id)).toEqual([whileStaff.id]);

    // No longer staff: alice's next memo is not his to see; his own, after it, is.
    await setRoles([]);
    const hidden = await memo(alice, 'after the role was taken');
    const own = await memo(dave, 'his own');
    const afterRemoval = await daves.waitFor(2);
    expect(afterRemoval.map((m) => [m.event, m.json().record.id])).toEqual([
      ['created', whileStaff.id],
      ['created', own.id],
    ]);
    expect(afterRemoval.some((m) => m.json().record.id === hidden.id)).toBe(false);

    // Staff again: alice's memos reach him again, on the same stream.
    await setRoles(['staff']);
    const again = await memo(alice, 'staff again');
    const afterGrant = await daves.waitFor(3);
    expect(afterGrant.map((m) => m.json().record.id)).toEqual([whileStaff.id, own.id, again.id]);
    expect(afterGrant[2]!.json()).toMatchObject({ action: 'created', record: { body: 'staff again' } });
  });

  it('streams one record until it is deleted; a missing or unreadable record is a 404', async () => {
    const secret = await note(alice, 'secret');
    const unreadable = await stream(`/api/v1/notes/${secret.id}/`, bob);
    expect(unreadable.status).toBe(404);
    expect(unreadable.headers.get('content-type')).toMatch(/problem\+json/);
    expect((await stream('/api/v1/notes/999999/', alice)).status).toBe(404);

    const own = await stream(`/api/v1/notes/${secret.id}/`, alice);
    expect(own.status).toBe(200);
    await note(alice, 'another record');
    expect((await send('PATCH', `/api/v1/notes/${secret.id}/`, alice, { body: 'secret, edited' })).status).toBe(200);
    expect((await send('DELETE', `/api/v1/notes/${secret.id}/`, alice)).status).toBe(204);
    const messages = await own.waitFor(2);
    expect(messages.map((m) => m.event)).toEqual(['updated', 'deleted']);
    await own.waitForEnd();
  });

  it('resumes after a disconnect with Last-Event-ID: nothing missed, nothing twice', async () => {
    const since = await position();
    const first = await stream(`/api/v1/notes/?since=${since}`, alice);
    const one = await note(alice, 'one');
    const [heard] = await first.waitFor(1);
    first.close();
    const two = await note(alice, 'two');
    const three = await note(alice, 'three');
    const resumed = await stream(`/api/v1/notes/?since=0`, alice, { 'last-event-id': heard!.id! });
    const messages = await resumed.waitFor(2);
    expect(heard!.json().record.id).toBe(one.id);
    expect(messages.map((m) => m.json().record.id)).toEqual([two.id, three.id]);
  });

  it('has the browsable list and record pages follow their own stream', async () => {
    const page = await fetch(`${server.url}/api/v1/notes/?kind=a`, { headers: { accept: 'text/html', authorization: alice } });
    expect(page.status).toBe(200);
    const attribute = /data-stream="([^"]*)"/.exec(await page.text())?.[1];
    // From the position the page was read at, so a change in between still redraws it.
    const position = page.headers.get('x-change-position');
    expect(position).toMatch(/^\d+$/);
    expect(attribute?.replace(/&#(\d+);/g, (_, code: string) => String.fromCharCode(Number(code))).replaceAll('&amp;', '&')).toBe(`/api/v1/notes/?kind=a&since=${position}`);
    const script = await (await fetch(`${server.url}/static/restwire/browsable.js`)).text();
    expect(script).toContain('function followStream(region, url = region.dataset.stream)');
    expect(script).toContain('new EventSource(url');
  });

  it('refuses before opening what a list refuses, and a position that does not parse', async () => {
    for (const path of ['/api/v1/notes/?kind=z', '/api/v1/notes/?ordering=nope', '/api/v1/notes/?limit=abc', '/api/v1/notes/?since=abc']) {
      const refused = await stream(path, alice);
      expect(refused.status, path).toBe(400);
      expect(refused.headers.get('content-type'), path).toMatch(/problem\+json/);
    }
    const badHeader = await stream('/api/v1/notes/', alice, { 'last-event-id': 'x1' });
    expect(badHeader.status).toBe(400);
  });

  it('caps open streams per user (429 with Retry-After) and counts them on /metrics', async () => {
    await createUser(database, 'carol', 'carol-password-1');
    const carol = basic('carol', 'carol-password-1');
    const open = [await stream('/api/v1/notes/', carol), await stream('/api/v1/notes/', carol), await stream('/api/v1/notes/', carol)];
    expect(open.map((s) => s.status)).toEqual([200, 200, 200]);
    const refused = await stream('/api/v1/notes/', carol);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await stream('/api/v1/notes/', bob)).status).toBe(200);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(Number(/^restwire_streams_open (\d+)/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(4);
    expect(Number(/^restwire_stream_messages_total (\d+)/m.exec(metrics)?.[1])).toBeGreaterThan(0);
    open[0]!.close();
    // The server notices the closed connection; then carol may open another.
    const deadline = Date.now() + 10_000;
    let again = await stream('/api/v1/notes/', carol);
    while (again.status === 429 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      again = await stream('/api/v1/notes/', carol);
    }
    expect(again.status).toBe(200);
  });

  it('cuts off a client that stops reading once 1 MiB waits for it, while a fast one beside it gets everything', async () => {
    const openStreams = async () => Number(/^restwire_streams_open (\d+)/m.exec(await (await fetch(`${server.url}/metrics`)).text())?.[1]);
    const fast = await stream('/api/v1/pages/', alice);
    // A client that sends its request and then never reads a byte.
    const slow = connect(server.port, '127.0.0.1');
    await new Promise<void>((resolve) => slow.once('connect', resolve));
    slow.write(`GET /api/v1/pages/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: ${alice}\r\n\r\n`);
    slow.pause();
    slow.on('error', () => {});
    try {
      const deadline = Date.now() + 10_000;
      while ((await openStreams()) < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await openStreams()).toBe(2);
      const text = 'x'.repeat(150_000);
      const writes = 80;
      for (let i = 0; i < writes; i++) expect((await send('POST', '/api/v1/pages/', alice, { text })).status).toBe(201);
      expect((await fast.waitFor(writes, 30_000)).every((m) => m.json().record.text === text)).toBe(true);
      const cutBy = Date.now() + 10_000;
      while ((await openStreams()) !== 1 && Date.now() < cutBy) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await openStreams()).toBe(1);
      expect(fast.ended).toBe(false);
    } finally {
      slow.destroy();
    }
  });

  it('reaches a stream served by another process on the same database', async () => {
    const other = await project.start({ env: { DISPATCHER_IN_SERVE: 'false' } });
    try {
      const since = await position();
      const elsewhere = await stream(`/api/v1/notes/?since=${since}`, alice, {}, other.url);
      const here = await note(alice, 'written here');
      const [message] = await elsewhere.waitFor(1);
      expect(message!.json().record.id).toBe(here.id);
      const written = await send('POST', '/api/v1/notes/', alice, { body: 'written there' }, other.url);
      const live = await stream(`/api/v1/notes/?since=${Number(message!.id)}`, alice);
      const [back] = await live.waitFor(1);
      expect(back!.json().record.id).toBe(written.body!.id);
    } finally {
      await other.stop();
    }
  });

  it('resumes on another process after kill -9 of the one serving the stream: nothing missed, nothing twice', async () => {
    const doomed = await project.start({ env: { DISPATCHER_IN_SERVE: 'false' } });
    const since = await position();
    const first = await stream(`/api/v1/notes/?since=${since}`, alice, {}, doomed.url);
    const before = await note(alice, 'before the crash');
    const [heard] = await first.waitFor(1);
    expect(heard!.json().record.id).toBe(before.id);
    expect(await doomed.stop('SIGKILL')).toBe('SIGKILL');
    await first.waitForEnd();
    const missed = [await note(alice, 'while away 1'), await note(alice, 'while away 2')];
    const resumed = await stream('/api/v1/notes/', alice, { 'last-event-id': heard!.id! });
    expect((await resumed.waitFor(2)).map((m) => m.json().record.id)).toEqual(missed.map((n) => n.id));
    const after = await note(alice, 'after');
    expect((await resumed.waitFor(3))[2]!.json().record.id).toBe(after.id);
    expect(resumed.messages).toHaveLength(3);
  });

  if (backend === 'postgres') {
    it('never skips a change whose transaction committed after later ones (held-open transaction)', async () => {
      const since = await position();
      const reader = await stream(`/api/v1/notes/?since=${since}`, alice);
      const aliceId = Number((await send('GET', '/api/v1/users/me/', alice)).body!.id);
      // A writer that has made its change and logged it, but not yet reached its last step, stays open…
      const held = new pg.Client({ connectionString: database.url! });
      await held.connect();
      try {
        await held.query('begin');
        const now = Date.now();
        const inserted = await held.query(
          `insert into notes (body, visibility, kind, owner_id, created_at, updated_at) values ('held', 'private', 'a', $1, $2, $2) returning *`,
          [aliceId, now],
        );
        const row = inserted.rows[0] as Json;
        await held.query(
          `insert into change_log (collection, record_id, action, record, row, created_at) values ('notes', $1, 'created', $2, $3, $4)`,
          [row.id, JSON.stringify({ url: `/api/v1/notes/${row.id}/`, id: row.id, body: 'held' }), JSON.stringify(row), now],
        );
        // …while later writers commit, and the reader hears them.
        const later = [await note(alice, 'later 1'), await note(alice, 'later 2')];
        const first = await reader.waitFor(2);
        expect(first.map((m) => m.json().record.id)).toEqual(later.map((n) => n.id));
        // Then it numbers its change as its last step (the scheme of db/change-log.ts) and commits.
        const counter = await held.query('update change_positions set last = last + 1 where id = 1 returning last');
        await held.query('update change_log set position = $1 where position is null', [counter.rows[0].last]);
        await held.query('commit');
        await held.query(`select pg_notify('restwire_changes', '')`);
        const all = await reader.waitFor(3);
        expect(all[2]!.json().record.id).toBe(row.id);
        expect(Number(all[2]!.id)).toBeGreaterThan(Number(all[1]!.id));
        // A reader resuming from before all three gets all three, in commit order.
        const resumed = await stream(`/api/v1/notes/?since=${since}`, alice);
        expect((await resumed.waitFor(3)).map((m) => m.json().record.id)).toEqual([...later.map((n) => n.id), row.id]);
      } finally {
        await held.end();
      }
    });
  }
});

describe.each(BACKENDS)('live changes kept for a while, and shutdown, on %s', (backend) => {
  let database: TestDatabase;
  let server: RunningServer;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    // 0.0003 hours is about a second; pruning runs every second.
    const { startServer } = await import('./support/server.js');
    server = await startServer(database, { env: { CHANGE_RETENTION_HOURS: '0.0003', DELIVERY_PRUNE_INTERVAL_SECONDS: '1' } });
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  it('sends reset to a stream resuming after a pruned position; SIGTERM ends open streams within a second', async () => {
    const { adminAuth } = await import('./support/server.js');
    const created = await fetch(`${server.url}/api/v1/experiences/`, {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'soon gone', q_like_dislike: 'like' }),
    });
    expect(created.status).toBe(201);
    const deadline = Date.now() + 20_000;
    let reset: OpenStream | null = null;
    while (Date.now() < deadline) {
      const attempt = await openStream(`${server.url}/api/v1/experiences/?since=0`, { authorization: adminAuth });
      const [first] = await attempt.waitFor(1);
      attempt.close();
      if (first!.event === 'reset') {
        reset = attempt;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(reset).not.toBeNull();
    expect(reset!.messages[0]!.json()).toEqual({ reason: 'position too old' });
    expect(reset!.messages[0]!.id).toBeNull();

    const open = [await openStream(`${server.url}/api/v1/experiences/`), await openStream(`${server.url}/api/v1/experiences/`, { authorization: adminAuth })];
    expect(open.map((s) => s.status)).toEqual([200, 200]);
    const stopped = Date.now();
    const exited = server.stop('SIGTERM');
    await Promise.all(open.map((s) => s.waitForEnd(1_000)));
    expect(Date.now() - stopped).toBeLessThan(1_000);
    expect(await exited).toBe(0);
  });
});

describe.each(BACKENDS)('live changes under serve --workers 2 on %s', (backend) => {
  let database: TestDatabase;
  let server: RunningServer;
  beforeAll(async () => {
    database = await createTestDatabase(backend);
    const { startServer } = await import('./support/server.js');
    server = await startServer(database, { args: ['serve', '--workers', '2'] });
  });
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await database?.drop();
  });

  it('brings every change to every stream, whichever worker serves it and whichever wrote the change', async () => {
    const { adminAuth } = await import('./support/server.js');
    // New connections are dealt to the workers in turn: six streams land on both.
    const open = await Promise.all(Array.from({ length: 6 }, () => openStream(`${server.url}/api/v1/experiences/`)));
    try {
      expect(open.map((s) => s.status)).toEqual([200, 200, 200, 200, 200, 200]);
      const ids: number[] = [];
      for (const title of ['one', 'two', 'three']) {
        const created = await fetch(`${server.url}/api/v1/experiences/`, {
          method: 'POST',
          headers: { authorization: adminAuth, 'content-type': 'application/json', connection: 'close' },
          body: JSON.stringify({ title, q_like_dislike: 'like' }),
        });
        expect(created.status).toBe(201);
        ids.push(Number(((await created.json()) as Json).id));
      }
      for (const opened of open) expect((await opened.waitFor(3)).map((m) => m.json().record.id)).toEqual(ids);
    } finally {
      for (const opened of open) opened.close();
    }
  });
});
