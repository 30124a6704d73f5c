import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, type RunningServer, type TestDatabase } from './support/server.js';
import { jsonClient, type Json } from './support/client.js';

// Pages a read rule or a field rule makes differ per caller are reused for the same caller only
// (ACCESS.md §6, issue 18), and so is every record (issue 21), black-box on both databases:
// callers taking turns on the same URLs each get their own page or record, every time; a write
// by one, made here or by another process, and a role granted or taken are seen at once; an ETag
// one caller got is not another's 304.

const MEMOS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'memos',
  fields: { body: field.string({ maxLength: 200 }) },
  owner: true,
  orderings: ['body'],
  access: { read: 'owner=@me', create: '@authenticated', update: 'owner=@me', delete: 'owner=@me' },
});
`;

// Read by everyone, but each email only by its owner (ACCESS.md §3).
const CARDS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'cards',
  fields: {
    name: field.string({ maxLength: 100 }),
    email: field.string({ maxLength: 100, required: false, access: { read: 'owner=@me' } }),
  },
  owner: true,
  orderings: ['name'],
  access: { read: '*', create: '@authenticated', update: 'owner=@me', delete: 'owner=@me' },
});
`;

const alice = basic('alice', 'alice-password-1');
const bob = basic('bob', 'bob-password-1');

describe.each(BACKENDS)('pages and records reused per caller on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  const send = jsonClient(() => server.url);
  /** The bodies of a list as `auth` gets it. */
  const memos = async (auth: string | null) => {
    const page = await send('GET', '/api/v1/memos/?ordering=body&limit=100', auth);
    expect(page.status, page.text).toBe(200);
    return (page.body!.results as Json[]).map((memo) => String(memo.body));
  };
  const memo = async (auth: string, body: string) => {
    const created = await send('POST', '/api/v1/memos/', auth, { body });
    expect(created.status, created.text).toBe(201);
    return created.body!;
  };

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'memos.ts': MEMOS, 'cards.ts': CARDS });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    server = await project.start();
    await createUser(database, 'alice', 'alice-password-1');
    await createUser(database, 'bob', 'bob-password-1');
    await memo(alice, 'a1');
    await memo(alice, 'a2');
    await memo(bob, 'b1');
  });
  afterAll(async () => {
    await server?.stop();
    project?.cleanup();
    await database?.drop();
  });

  it('gives each caller their own page, however they take turns, and a write by one at once', async () => {
    for (let turn = 0; turn < 3; turn++) {
      expect(await memos(alice)).toEqual(['a1', 'a2']);
      expect(await memos(bob)).toEqual(['b1']);
      expect((await send('GET', '/api/v1/memos/?ordering=body&limit=100', null)).status).toBe(401);
    }
    await memo(bob, 'b2');
    expect(await memos(alice)).toEqual(['a1', 'a2']);
    expect(await memos(bob)).toEqual(['b1', 'b2']);
    await memo(alice, 'a3');
    expect(await memos(bob)).toEqual(['b1', 'b2']);
    expect(await memos(alice)).toEqual(['a1', 'a2', 'a3']);
    const b2 = (await send('GET', '/api/v1/memos/?ordering=body', bob)).body!.results.find((m: Json) => m.body === 'b2') as Json;
    expect((await send('DELETE', `/api/v1/memos/${b2.id}/`, bob)).status).toBe(204);
    expect(await memos(bob)).toEqual(['b1']);
  });

  it('sees a role granted or taken at once: bob as admin reads every memo, then his own again', async () => {
    const bobId = (await send('GET', '/api/v1/users/me/', bob)).body!.id as number;
    expect(await memos(bob)).toEqual(['b1']);
    const given = await send('PATCH', `/api/v1/users/${bobId}/`, adminAuth, { roles: ['admin'] });
    expect(given.status, given.text).toBe(200);
    expect(await memos(bob)).toEqual(['a1', 'a2', 'a3', 'b1']);
    expect(await memos(alice)).toEqual(['a1', 'a2', 'a3']);
    const taken = await send('PATCH', `/api/v1/users/${bobId}/`, adminAuth, { roles: [] });
    expect(taken.status, taken.text).toBe(200);
    expect(await memos(bob)).toEqual(['b1']);
    expect(await memos(alice)).toEqual(['a1', 'a2', 'a3']);
  });

  it('answers 304 only to the caller whose page an ETag names', async () => {
    const alices = await send('GET', '/api/v1/memos/?ordering=body', alice);
    const etag = alices.headers.get('etag')!;
    expect(etag).toBeTruthy();
    expect((await send('GET', '/api/v1/memos/?ordering=body', alice, undefined, { 'if-none-match': etag })).status).toBe(304);
    const bobs = await send('GET', '/api/v1/memos/?ordering=body', bob, undefined, { 'if-none-match': etag });
    expect(bobs.status).toBe(200);
    expect((bobs.body!.results as Json[]).map((m) => m.body)).toEqual(['b1']);
    expect(bobs.headers.get('etag')).not.toBe(etag);
  });

  it('shows each caller only their own emails in a shared list, in JSON and CSV, however they take turns', async () => {
    for (const [auth, name] of [
      [alice, 'Alice'],
      [bob, 'Bob'],
    ] as const) {
      const created = await send('POST', '/api/v1/cards/', auth, { name, email: `${name.toLowerCase()}@example.com` });
      expect(created.status, created.text).toBe(201);
    }
    const emails = async (auth: string | null) => {
      const page = await send('GET', '/api/v1/cards/?ordering=name', auth);
      expect(page.status).toBe(200);
      return (page.body!.results as Json[]).map((card) => [card.name, card.email ?? null]);
    };
    const csv = async (auth: string | null) => (await send('GET', '/api/v1/cards/?ordering=name', auth, undefined, { accept: 'text/csv' })).text;
    for (let turn = 0; turn < 2; turn++) {
      expect(await emails(alice)).toEqual([
        ['Alice', 'alice@example.com'],
        ['Bob', null],
      ]);
      expect(await emails(bob)).toEqual([
        ['Alice', null],
        ['Bob', 'bob@example.com'],
      ]);
      expect(await emails(null)).toEqual([
        ['Alice', null],
        ['Bob', null],
      ]);
      expect(await csv(alice)).toContain('alice@example.com');
      expect(await csv(alice)).not.toContain('bob@example.com');
      expect(await csv(bob)).toContain('bob@example.com');
      expect(await csv(bob)).not.toContain('alice@example.com');
    }
  });

  it('gives each caller their own record, however they take turns, and a change at once', async () => {
    const a1 = ((await send('GET', '/api/v1/memos/?ordering=body', alice)).body!.results as Json[]).find((m) => m.body === 'a1')!;
    const path = `/api/v1/memos/${a1.id}/`;
    for (let turn = 0; turn < 3; turn++) {
      const alices = await send('GET', path, alice);
      expect(alices.status, alices.text).toBe(200);
      expect(alices.body!.body).toBe('a1');
      expect((await send('GET', path, bob)).status).toBe(404);
      expect((await send('GET', path, null)).status).toBe(401);
    }
    const etag = (await send('GET', path, alice)).headers.get('etag')!;
    expect((await send('GET', path, alice, undefined, { 'if-none-match': etag })).status).toBe(304);
    expect((await send('GET', path, bob, undefined, { 'if-none-match': etag })).status).toBe(404);
    const changed = await send('PATCH', path, alice, { body: 'a1 changed' });
    expect(changed.status, changed.text).toBe(200);
    const after = await send('GET', path, alice, undefined, { 'if-none-match': etag });
    expect(after.status).toBe(200);
    expect(after.body!.body).toBe('a1 changed');
    expect((await send('PATCH', path, alice, { body: 'a1' })).status).toBe(200);
  });

  it("shows a record's email to its owner only, however callers take turns", async () => {
    const cards = ((await send('GET', '/api/v1/cards/?ordering=name', alice)).body!.results as Json[]);
    const path = String(cards.find((card) => card.name === 'Alice')!.url);
    const email = async (auth: string | null) => {
      const card = await send('GET', path, auth);
      expect(card.status, card.text).toBe(200);
      return card.body!.email ?? null;
    };
    for (let turn = 0; turn < 3; turn++) {
      expect(await email(alice)).toBe('alice@example.com');
      expect(await email(bob)).toBeNull();
      expect(await email(null)).toBeNull();
    }
  });

  it('shows a change another process made at once', async () => {
    const other = await project.start();
    try {
      const created = await memo(alice, 'elsewhere');
      const path = String(created.url);
      const read = async () => (await send('GET', path, alice)).body!.body;
      expect(await read()).toBe('elsewhere');
      expect(await read()).toBe('elsewhere');
      const changed = await fetch(`${other.url}${path}`, { method: 'PATCH', headers: { authorization: alice, 'content-type': 'application/json' }, body: JSON.stringify({ body: 'changed elsewhere' }) });
      expect(changed.status, await changed.text()).toBe(200);
      expect(await read()).toBe('changed elsewhere');
      expect((await send('DELETE', path, alice)).status).toBe(204);
    } finally {
      await other.stop();
    }
  });
});
