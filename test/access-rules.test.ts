import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, type RunningServer, type TestDatabase } from './support/server.js';
import { jsonClient, type Json } from './support/client.js';

// Access rules on records (ACCESS.md §2, §7), black-box: the `notes` example of ACCESS.md §2,
// `posts` whose create and update rules look at the record as stored, and `comments` that refer
// to notes (references written, cascades), and `bulletins` whose writes `access` leaves out (admins
// only). Callers: anonymous, alice, bob (no roles), the first user (`admin`), carol (`staff`) and
// API keys of them (ACCESS.md §1, §5).

const NOTES = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'notes',
  fields: {
    body: field.text({ maxLength: 5000 }),
    visibility: field.choice(['private', 'team', 'public'], { default: 'private' }),
    team_lead: field.reference('users', { nullable: true, required: false }),
  },
  owner: true,
  orderings: ['body'],
  access: {
    read: ['visibility=public', 'owner=@me', 'visibility=team&@role=staff'],
    create: '@authenticated',
    update: ['owner=@me', 'team_lead=@me'],
    delete: 'owner=@me',
  },
});
`;
const POSTS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'posts',
  fields: {
    title: field.string({ maxLength: 50 }),
    status: field.choice(['draft', 'published'], { default: 'draft' }),
  },
  owner: true,
  access: { read: ['status=published', 'owner=@me'], create: 'status=draft&@authenticated', update: 'owner=@me&status=draft', delete: 'owner=@me' },
});
`;
const COMMENTS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'comments',
  fields: { note: field.reference('notes', { onDelete: 'cascade' }), text: field.string({ maxLength: 200 }) },
  owner: true,
});
`;

const BULLETINS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'bulletins',
  fields: { text: field.string({ maxLength: 200 }) },
  access: { read: '*' },
});
`;
const BIN = new URL('../bin/restwire.js', import.meta.url).pathname;

/** Runs the CLI as an operator would (password on stdin); fails the test unless it exits 0. */
async function cliOk(database: TestDatabase, args: string[], stdin: string): Promise<void> {
  const child = spawn(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH ?? '', ...database.env }, stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  child.stdin.end(stdin);
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  expect(code, output).toBe(0);
}

const alice = basic('alice', 'alice-password-1');
const bob = basic('bob', 'bob-password-1');
const carol = basic('carol', 'carol-password-1');

describe.each(BACKENDS)('access rules on records on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  const send = jsonClient(() => server.url);
  const get = (path: string, auth: string | null) => send('GET', path, auth);
  /** Every record of a list, page by page (`limit` a page), with each page's size. */
  const walk = async (path: string, auth: string | null, limit: number) => {
    const pages: number[] = [];
    const bodies: string[] = [];
    let next: string | null = `${path}?limit=${limit}&ordering=body`;
    while (next) {
      const page = await get(next.replace(server.url, ''), auth);
      expect(page.status).toBe(200);
      pages.push(page.body!.results.length);
      bodies.push(...(page.body!.results as Json[]).map((note) => String(note.body)));
      next = page.body!.next;
    }
    return { pages, bodies };
  };
  const ids: Record<string, Json> = {};
  const note = async (auth: string, body: string, extra: Json = {}) => {
    const created = await send('POST', '/api/v1/notes/', auth, { body, ...extra });
    expect(created.status, created.text).toBe(201);
    ids[body] = created.body!;
    return created.body!;
  };
  let alicePath = '';
  let bobPath = '';

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'notes.ts': NOTES, 'posts.ts': POSTS, 'comments.ts': COMMENTS, 'bulletins.ts': BULLETINS });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    server = await project.start();
    await createUser(database, 'alice', 'alice-password-1');
    await createUser(database, 'bob', 'bob-password-1');
    alicePath = (await get('/api/v1/users/me/', alice)).body!.url;
    bobPath = (await get('/api/v1/users/me/', bob)).body!.url;
    await note(alice, 'a1 private');
    await note(alice, 'a2 public', { visibility: 'public' });
    await note(alice, 'a3 team', { visibility: 'team' });
    await note(bob, 'b1 private');
    await note(bob, 'b2 public', { visibility: 'public' });
    await note(bob, 'b3 public led by alice', { visibility: 'public', team_lead: alicePath });
    await note(bob, 'b4 private led by alice', { team_lead: alicePath });
    await note(bob, 'b5 public', { visibility: 'public' });
  });
  afterAll(async () => {
    await server?.stop();
    project?.cleanup();
    await database?.drop();
  });

  it('lists only what each caller may read, in the query: full pages, cursors over readable records only', async () => {
    const everyone = ['a2 public', 'b2 public', 'b3 public led by alice', 'b5 public'];
    const anonymous = await walk('/api/v1/notes/', null, 2);
    expect(anonymous.bodies).toEqual(everyone);
    expect(anonymous.pages).toEqual([2, 2]);
    const ofAlice = await walk('/api/v1/notes/', alice, 2);
    expect(ofAlice.bodies).toEqual(['a1 private', 'a2 public', 'a3 team', ...everyone.slice(1)]);
    expect(ofAlice.pages).toEqual([2, 2, 2]);
    const ofBob = await walk('/api/v1/notes/', bob, 3);
    expect(ofBob.bodies).toEqual(['a2 public', 'b1 private', 'b2 public', 'b3 public led by alice', 'b4 private led by alice', 'b5 public']);
    expect(ofBob.pages).toEqual([3, 3]);
    // A list filter narrows the readable records; it never widens them.
    const csv = await send('GET', '/api/v1/notes/?ordering=body', alice, undefined, { accept: 'text/csv' });
    expect(csv.text).toContain('a1 private');
    expect(csv.text).not.toContain('b1 private');
  });

  it('never serves one caller’s cached page to another', async () => {
    for (let round = 0; round < 2; round++) {
      const ofAlice = (await get('/api/v1/notes/?ordering=body', alice)).body!.results as Json[];
      const ofBob = (await get('/api/v1/notes/?ordering=body', bob)).body!.results as Json[];
      const ofNobody = (await get('/api/v1/notes/?ordering=body', null)).body!.results as Json[];
      expect(ofAlice.map((n) => n.body)).toContain('a1 private');
      expect(ofAlice.map((n) => n.body)).not.toContain('b1 private');
      expect(ofBob.map((n) => n.body)).toContain('b1 private');
      expect(ofBob.map((n) => n.body)).not.toContain('a1 private');
      expect(ofNobody).toHaveLength(4);
    }
    // The users list shows reverse lists of notes: filtered per caller too, so never shared.
    for (let round = 0; round < 2; round++) {
      const users = async (auth: string | null) => ((await get('/api/v1/users/', auth)).body!.results as Json[]).find((user) => user.url === bobPath)!.notes as string[];
      expect(await users(bob)).toHaveLength(5);
      expect(await users(alice)).toHaveLength(3);
      expect(await users(null)).toHaveLength(3);
    }
  });

  it('shows reverse lists with only the records the caller may read', async () => {
    const asAlice = (await get(bobPath, alice)).body!;
    expect(asAlice.notes).toEqual([ids['b2 public']!.url, ids['b3 public led by alice']!.url, ids['b5 public']!.url]);
    expect((await get(bobPath, bob)).body!.notes).toHaveLength(5);
    expect((await get('/api/v1/users/me/', alice)).body!.notes).toHaveLength(3);
  });

  it('answers 404 for a record the caller may not read, as for one that does not exist', async () => {
    const hidden = ids['b1 private']!.url as string;
    const missing = await get('/api/v1/notes/999999/', alice);
    expect(missing.status).toBe(404);
    for (const [method, auth] of [['GET', alice], ['GET', null], ['HEAD', alice], ['PATCH', alice], ['PUT', alice], ['DELETE', alice]] as const) {
      const answer = await send(method, hidden, auth, method === 'PATCH' || method === 'PUT' ? { body: 'mine now' } : undefined);
      expect(answer.status, `${method} ${auth ? 'alice' : 'anonymous'}`).toBe(404);
      if (method === 'GET') expect(answer.body).toEqual(missing.body);
    }
    expect((await get(hidden, bob)).body!.body).toBe('b1 private');
  });

  it('refuses an update the rule forbids with 403 (401 with the Basic challenge when anonymous), changing nothing', async () => {
    const readable = ids['b2 public']!.url as string;
    const refused = await send('PATCH', readable, alice, { body: 'changed' });
    expect(refused.status).toBe(403);
    expect(JSON.stringify(refused.body)).not.toContain('owner');
    const anonymous = await send('PATCH', readable, null, { body: 'changed' });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Basic/);
    expect((await send('DELETE', readable, null)).status).toBe(401);
    expect((await get(readable, bob)).body!.body).toBe('b2 public');
  });

  it('checks an update against the record before and after the change', async () => {
    // team_lead=@me lets alice change bob's note...
    const led = ids['b3 public led by alice']!.url as string;
    const changed = await send('PATCH', led, alice, { body: 'b3 public led by alice' , visibility: 'public' });
    expect(changed.status).toBe(200);
    // ...but not into one the rule no longer lets her change (team_lead cleared): 403, unchanged.
    const away = await send('PATCH', led, alice, { team_lead: null });
    expect(away.status).toBe(403);
    expect((await get(led, bob)).body!.team_lead).toBe(alicePath);
    const handOver = await send('PUT', led, alice, { body: 'b3 public led by alice', visibility: 'public', team_lead: bobPath });
    expect(handOver.status).toBe(403);
    expect((await get(led, bob)).body!.team_lead).toBe(alicePath);
    // posts: update only while a draft; publishing is a change the rule refuses after it.
    const post = await send('POST', '/api/v1/posts/', alice, { title: 'hello' });
    expect(post.status).toBe(201);
    expect((await send('PATCH', post.body!.url, alice, { title: 'hello again' })).status).toBe(200);
    expect((await send('PATCH', post.body!.url, alice, { status: 'published' })).status).toBe(403);
    expect((await get(post.body!.url, alice)).body).toMatchObject({ title: 'hello again', status: 'draft' });
  });

  it('checks a create against the record as it would be stored (defaults applied): 403, nothing stored', async () => {
    const before = ((await get('/api/v1/posts/', alice)).body!.results as Json[]).length;
    const refused = await send('POST', '/api/v1/posts/', alice, { title: 'straight out', status: 'published' });
    expect(refused.status).toBe(403);
    expect(((await get('/api/v1/posts/', alice)).body!.results as Json[]).length).toBe(before);
    const anonymous = await send('POST', '/api/v1/notes/', null, { body: 'who am I' });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Basic/);
    // Drafts by default: the create rule holds for the record as stored.
    const draft = await send('POST', '/api/v1/posts/', bob, { title: 'quiet' });
    expect(draft.status).toBe(201);
    // Another's draft is not readable: 404 for alice, and not in her list.
    expect((await get(draft.body!.url, alice)).status).toBe(404);
    expect(((await get('/api/v1/posts/', alice)).body!.results as Json[]).map((p) => p.url)).not.toContain(draft.body!.url);
  });

  it('refuses a reference to a record the caller may not read as one that does not exist', async () => {
    const hidden = await send('POST', '/api/v1/comments/', alice, { note: ids['b1 private']!.url, text: 'hi' });
    expect(hidden.status).toBe(400);
    expect(hidden.body!.errors).toEqual({ note: ['Invalid hyperlink - Object does not exist.'] });
    const shown = await send('POST', '/api/v1/comments/', alice, { note: ids['b5 public']!.url, text: 'hi' });
    expect(shown.status).toBe(201);
    const onOwn = await send('POST', '/api/v1/comments/', bob, { note: ids['b1 private']!.url, text: 'note to self' });
    expect(onOwn.status).toBe(201);
  });

  it('checks a delete against the record (403); a cascade reaches records whatever their rules', async () => {
    const target = ids['b5 public']!.url as string;
    expect((await send('DELETE', target, alice)).status).toBe(403);
    expect((await get(target, alice)).status).toBe(200);
    const comments = () => get('/api/v1/comments/', alice).then((r) => (r.body!.results as Json[]).filter((c) => c.note === target));
    expect(await comments()).toHaveLength(1);
    expect((await send('DELETE', target, bob)).status).toBe(204);
    expect(await comments()).toHaveLength(0);
  });

  it('describes POST and PUT on OPTIONS only to callers whose sign-in could allow them', async () => {
    const anonymous = await send('OPTIONS', '/api/v1/notes/', null);
    expect(anonymous.status).toBe(200);
    expect(anonymous.body!.actions).toBeUndefined();
    expect(Object.keys((await send('OPTIONS', '/api/v1/notes/', alice)).body!.actions)).toEqual(['POST']);
    const record = ids['b2 public']!.url as string;
    expect((await send('OPTIONS', record, null)).body!.actions).toBeUndefined();
    expect(Object.keys((await send('OPTIONS', record, alice)).body!.actions)).toEqual(['PUT']);
  });

  it('keeps permission declarations working as before: the admin user reads and writes as any signed-in user', async () => {
    const created = await send('POST', '/api/v1/comments/', adminAuth, { note: ids['a2 public']!.url, text: 'from admin' });
    expect(created.status).toBe(201);
    expect((await send('PATCH', created.body!.url, alice, { text: 'not yours' })).status).toBe(403);
    expect((await send('PATCH', created.body!.url, adminAuth, { text: 'edited' })).status).toBe(200);
  });
  // The tests below run after those above: 'b5 public' has been deleted by then.
  const allNotes = ['a1 private', 'a2 public', 'a3 team', 'b1 private', 'b2 public', 'b3 public led by alice', 'b4 private led by alice'];

  it('lets the admin list every note, others’ private ones included, in full pages', async () => {
    const ofAdmin = await walk('/api/v1/notes/', adminAuth, 3);
    expect(ofAdmin.bodies).toEqual(allNotes);
    expect(ofAdmin.pages).toEqual([3, 3, 1]);
  });

  it('lets the admin retrieve, change and delete another user’s private note', async () => {
    const hidden = await note(bob, 'b6 private');
    expect((await get(hidden.url, alice)).status).toBe(404);
    const read = await get(hidden.url, adminAuth);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ body: 'b6 private', visibility: 'private' });
    const patched = await send('PATCH', hidden.url, adminAuth, { body: 'b6 private, edited by the admin' });
    expect(patched.status, patched.text).toBe(200);
    expect((await get(hidden.url, bob)).body).toMatchObject({ body: 'b6 private, edited by the admin', visibility: 'private' });
    const put = await send('PUT', hidden.url, adminAuth, { body: 'b6 private', visibility: 'private', team_lead: null });
    expect(put.status, put.text).toBe(200);
    expect((await send('DELETE', hidden.url, adminAuth)).status).toBe(204);
    expect((await get(hidden.url, bob)).status).toBe(404);
  });

  it('lets the admin create a published post and publish another’s draft, which the rules refuse everyone else', async () => {
    const published = await send('POST', '/api/v1/posts/', adminAuth, { title: 'announcement', status: 'published' });
    expect(published.status, published.text).toBe(201);
    expect(published.body).toMatchObject({ status: 'published' });
    expect((await get(published.body!.url, alice)).body).toMatchObject({ title: 'announcement', status: 'published' });
    const draft = await send('POST', '/api/v1/posts/', alice, { title: 'for review' });
    expect(draft.status).toBe(201);
    expect((await get(draft.body!.url, bob)).status).toBe(404);
    const publish = await send('PATCH', draft.body!.url, adminAuth, { status: 'published' });
    expect(publish.status, publish.text).toBe(200);
    expect((await get(draft.body!.url, bob)).body).toMatchObject({ title: 'for review', status: 'published' });
  });

  it('describes an admins-only action on OPTIONS to the admin only, and lets only the admin take it', async () => {
    expect((await send('OPTIONS', '/api/v1/bulletins/', alice)).body!.actions).toBeUndefined();
    expect(Object.keys((await send('OPTIONS', '/api/v1/bulletins/', adminAuth)).body!.actions)).toEqual(['POST']);
    expect((await send('POST', '/api/v1/bulletins/', alice, { text: 'hi' })).status).toBe(403);
    const created = await send('POST', '/api/v1/bulletins/', adminAuth, { text: 'maintenance tonight' });
    expect(created.status, created.text).toBe(201);
    expect((await send('OPTIONS', created.body!.url, alice)).body!.actions).toBeUndefined();
    expect(Object.keys((await send('OPTIONS', created.body!.url, adminAuth)).body!.actions)).toEqual(['PUT']);
    expect((await send('PATCH', created.body!.url, alice, { text: 'no' })).status).toBe(403);
    expect((await send('PATCH', created.body!.url, adminAuth, { text: 'maintenance tomorrow' })).status).toBe(200);
    expect((await get(created.body!.url, null)).body).toMatchObject({ text: 'maintenance tomorrow' });
  });

  it('lets the admin reference a record others may not read', async () => {
    const created = await send('POST', '/api/v1/comments/', adminAuth, { note: ids['b1 private']!.url, text: 'seen by the admin' });
    expect(created.status, created.text).toBe(201);
    expect(created.body!.note).toBe(ids['b1 private']!.url);
  });

  it('shows team notes to staff (role from the CLI or an admin’s PATCH), and hides them at once when the role goes', async () => {
    const team = ids['a3 team']!.url as string;
    const everyone = ['a2 public', 'b2 public', 'b3 public led by alice'];
    await cliOk(database, ['createuser', 'carol', '--password-stdin', '--role', 'staff'], 'carol-password-1\n');
    expect((await walk('/api/v1/notes/', carol, 2)).bodies).toEqual(['a2 public', 'a3 team', ...everyone.slice(1)]);
    expect((await get(team, carol)).status).toBe(200);

    const bobId = (await get('/api/v1/users/me/', bob)).body!.id as number;
    expect((await get(team, bob)).status).toBe(404);
    const given = await send('PATCH', `/api/v1/users/${bobId}/`, adminAuth, { roles: ['staff'] });
    expect(given.status, given.text).toBe(200);
    expect((await walk('/api/v1/notes/', bob, 3)).bodies).toEqual(['a2 public', 'a3 team', 'b1 private', 'b2 public', 'b3 public led by alice', 'b4 private led by alice']);
    expect((await get(team, bob)).status).toBe(200);
    const taken = await send('PATCH', `/api/v1/users/${bobId}/`, adminAuth, { roles: [] });
    expect(taken.status, taken.text).toBe(200);
    expect((await walk('/api/v1/notes/', bob, 3)).bodies).not.toContain('a3 team');
    expect((await get(team, bob)).status).toBe(404);
    expect((await send('PATCH', team, bob, { body: 'gone' })).status).toBe(404);

    const carolId = (await get('/api/v1/users/me/', carol)).body!.id as number;
    expect((await send('PATCH', `/api/v1/users/${carolId}/`, adminAuth, { roles: [] })).status).toBe(200);
    expect((await walk('/api/v1/notes/', carol, 2)).bodies).toEqual(everyone);
    expect((await get(team, carol)).status).toBe(404);
  });

  it('lets an API key read exactly what its user may: a user’s key their notes, the admin’s key every note', async () => {
    const keyOf = async (auth: string) => {
      const created = await send('POST', '/api/v1/keys/', auth, { name: 'reader', scopes: ['notes:read'] });
      expect(created.status, created.text).toBe(201);
      return `Bearer ${created.body!.key as string}`;
    };
    for (const [auth, limit] of [[alice, 2], [bob, 3]] as const) {
      const byKey = await walk('/api/v1/notes/', await keyOf(auth), limit);
      const byUser = await walk('/api/v1/notes/', auth, limit);
      expect(byKey).toEqual(byUser);
      expect(byKey.bodies).not.toEqual(allNotes);
    }
    const adminKey = await keyOf(adminAuth);
    const ofAdminKey = await walk('/api/v1/notes/', adminKey, 3);
    expect(ofAdminKey.bodies).toEqual(allNotes);
    expect(ofAdminKey.pages).toEqual([3, 3, 1]);
    expect((await get(ids['b1 private']!.url, adminKey)).status).toBe(200);
    // Read scope only: the key may not write, the admin's included.
    expect((await send('PATCH', ids['b1 private']!.url, adminKey, { body: 'no' })).status).toBe(403);
  });
});
