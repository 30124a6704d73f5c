import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, type RunningServer, type TestDatabase } from './support/server.js';
import { jsonClient, type Json } from './support/client.js';

// Field rules (ACCESS.md §3), black-box: `resumes` whose `email` only its owner reads and whose
// `status` only editors write. Callers: anonymous, alice and bob (no roles), erin (`editor`) and
// the first user (`admin`). Then declarations the server refuses at start-up.

const RESUMES = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'resumes',
  fields: {
    title: field.string({ maxLength: 100 }),
    email: field.string({ maxLength: 100, required: false, access: { read: 'owner=@me' } }),
    status: field.choice(['new', 'reviewed'], { default: 'new', access: { write: '@role=editor' } }),
  },
  owner: true,
  orderings: ['title'],
  filters: { email: ['exact'], status: ['exact'] },
  search: ['title', 'email'],
  event: 'resume',
  access: { read: '*', create: '@authenticated', update: ['owner=@me', '@role=editor'], delete: 'owner=@me' },
});
`;

const alice = basic('alice', 'alice-password-1');
const bob = basic('bob', 'bob-password-1');
const erin = basic('erin', 'erin-password-1');

describe.each(BACKENDS)('field rules on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  const send = jsonClient(() => server.url);
  const get = (path: string, auth: string | null, headers: Record<string, string> = {}) => send('GET', path, auth, undefined, headers);
  /** The list's records as `auth` sees them, by title. */
  const listed = async (query: string, auth: string | null): Promise<Record<string, Json>> => {
    const page = await get(`/api/v1/resumes/?ordering=title${query}`, auth);
    expect(page.status, page.text).toBe(200);
    return Object.fromEntries((page.body!.results as Json[]).map((record) => [record.title, record]));
  };
  let aliceCv: Json;
  let bobCv: Json;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'resumes.ts': RESUMES });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    server = await project.start();
    await createUser(database, 'alice', 'alice-password-1');
    await createUser(database, 'bob', 'bob-password-1');
    await createUser(database, 'erin', 'erin-password-1');
    const erinId = (await get('/api/v1/users/me/', erin)).body!.id;
    expect((await send('PATCH', `/api/v1/users/${erinId}/`, adminAuth, { roles: ['editor'] })).status).toBe(200);
    // alice may not write `status`: her value is ignored, the default stays.
    const created = await send('POST', '/api/v1/resumes/', alice, { title: 'Alice CV', email: 'alice@mail.test', status: 'reviewed' });
    expect(created.status, created.text).toBe(201);
    aliceCv = created.body!;
    const other = await send('POST', '/api/v1/resumes/', bob, { title: 'Bob CV', email: 'bob@mail.test' });
    expect(other.status, other.text).toBe(201);
    bobCv = other.body!;
  });
  afterAll(async () => {
    await server?.stop();
    project?.cleanup();
    await database?.drop();
  });

  it('shows a field only on the records whose read rule holds for the caller (JSON); admins see all', async () => {
    expect(aliceCv).toMatchObject({ title: 'Alice CV', email: 'alice@mail.test', status: 'new' });
    expect(bobCv.email).toBe('bob@mail.test');
    const anonymous = await listed('', null);
    expect(Object.keys(anonymous)).toEqual(['Alice CV', 'Bob CV']);
    for (const record of Object.values(anonymous)) {
      expect(record).not.toHaveProperty('email');
      expect(record).toHaveProperty('status', 'new');
    }
    const ofAlice = await listed('', alice);
    expect(ofAlice['Alice CV']!.email).toBe('alice@mail.test');
    expect(ofAlice['Bob CV']).not.toHaveProperty('email');
    const ofAdmin = await listed('', adminAuth);
    expect([ofAdmin['Alice CV']!.email, ofAdmin['Bob CV']!.email]).toEqual(['alice@mail.test', 'bob@mail.test']);
    // The record view too.
    const seenByBob = await get(`/api/v1/resumes/${aliceCv.id}/`, bob);
    expect(seenByBob.status).toBe(200);
    expect(seenByBob.body).not.toHaveProperty('email');
    expect(seenByBob.body!.title).toBe('Alice CV');
    expect((await get(`/api/v1/resumes/${aliceCv.id}/`, alice)).body!.email).toBe('alice@mail.test');
  });

  it('leaves the cell empty in CSV and the value out of HTML', async () => {
    const csv = await get('/api/v1/resumes/?ordering=title', alice, { accept: 'text/csv' });
    expect(csv.status).toBe(200);
    const [header, ...rows] = csv.text.trim().split('\r\n');
    const email = header!.split(',').indexOf('email');
    expect(email).toBeGreaterThan(0);
    expect(rows.map((row) => row.split(',')[email])).toEqual(['alice@mail.test', '']);
    const page = await get(`/api/v1/resumes/${aliceCv.id}/`, bob, { accept: 'text/html' });
    expect(page.status).toBe(200);
    expect(page.text).toContain('Alice CV');
    expect(page.text).not.toContain('alice@mail.test');
    expect((await get(`/api/v1/resumes/${aliceCv.id}/`, alice, { accept: 'text/html' })).text).toContain('alice@mail.test');
  });

  it('never serves one caller a page or a 304 made for another', async () => {
    const anonymous = await get('/api/v1/resumes/', null);
    const ofAlice = await get('/api/v1/resumes/', alice);
    expect(ofAlice.text).toContain('alice@mail.test');
    const again = await get('/api/v1/resumes/', null);
    expect(again.text).not.toContain('@mail.test');
    expect(again.text).toBe(anonymous.text);
    const etag = ofAlice.headers.get('etag')!;
    expect(etag).toBeTruthy();
    const asBob = await get('/api/v1/resumes/', bob, { 'if-none-match': etag });
    expect(asBob.status).toBe(200);
    expect(asBob.text).not.toContain('alice@mail.test');
  });

  it('list filters and search on the field match only records on which the caller may read it', async () => {
    expect(Object.keys(await listed('&email=bob%40mail.test', alice))).toEqual([]);
    expect(Object.keys(await listed('&email=bob%40mail.test', bob))).toEqual(['Bob CV']);
    expect(Object.keys(await listed('&email=bob%40mail.test', adminAuth))).toEqual(['Bob CV']);
    expect(Object.keys(await listed('&email=bob%40mail.test', null))).toEqual([]);
    expect(Object.keys(await listed('&search=mail.test', alice))).toEqual(['Alice CV']);
    expect(Object.keys(await listed('&search=mail.test', null))).toEqual([]);
    expect(Object.keys(await listed('&search=mail.test', adminAuth))).toEqual(['Alice CV', 'Bob CV']);
    // The other searched field still matches for everyone.
    expect(Object.keys(await listed('&search=cv', null))).toEqual(['Alice CV', 'Bob CV']);
  });

  it('shows a field the caller may not write as read-only in OPTIONS and leaves it out of their forms', async () => {
    const ofAlice = await send('OPTIONS', '/api/v1/resumes/', alice);
    expect(ofAlice.body!.actions.POST.status).toMatchObject({ read_only: true, required: false });
    expect(ofAlice.body!.actions.POST.title.read_only).toBe(false);
    const ofErin = await send('OPTIONS', `/api/v1/resumes/${aliceCv.id}/`, erin);
    expect(ofErin.body!.actions.PUT.status.read_only).toBe(false);
    const aliceEdit = await get(`/api/v1/resumes/${aliceCv.id}/`, alice, { accept: 'text/html' });
    expect(aliceEdit.text).toContain('id="edit-title"');
    expect(aliceEdit.text).not.toContain('id="edit-status"');
    expect((await get('/api/v1/resumes/', alice, { accept: 'text/html' })).text).not.toContain('id="create-status"');
    const erinCreate = await get('/api/v1/resumes/', erin, { accept: 'text/html' });
    expect(erinCreate.text).toContain('id="create-title"');
    expect(erinCreate.text).toContain('id="create-status"');
  });

  it('ignores a field the caller may not write; an editor writes it', async () => {
    const byAlice = await send('PATCH', `/api/v1/resumes/${aliceCv.id}/`, alice, { title: 'Alice CV 2', status: 'reviewed' });
    expect(byAlice.status, byAlice.text).toBe(200);
    expect(byAlice.body).toMatchObject({ title: 'Alice CV 2', status: 'new', email: 'alice@mail.test' });
    const put = await send('PUT', `/api/v1/resumes/${aliceCv.id}/`, alice, { title: 'Alice CV', email: 'alice@mail.test', status: 'reviewed' });
    expect(put.status, put.text).toBe(200);
    expect(put.body!.status).toBe('new');
    const byErin = await send('PATCH', `/api/v1/resumes/${aliceCv.id}/`, erin, { status: 'reviewed' });
    expect(byErin.status, byErin.text).toBe(200);
    expect(byErin.body!.status).toBe('reviewed');
    expect(byErin.body).not.toHaveProperty('email');
    expect((await get(`/api/v1/resumes/${aliceCv.id}/`, alice)).body).toMatchObject({ status: 'reviewed', email: 'alice@mail.test' });
    const created = await send('POST', '/api/v1/resumes/', erin, { title: 'Erin CV', status: 'reviewed' });
    expect(created.body!.status).toBe('reviewed');
  });

  it('documents a field with a read rule as optional in responses and events, its requests unchanged', async () => {
    const document = (await get('/api/v1/openapi.json', null)).body!;
    const record = document.components.schemas.Resume;
    expect(record.required).toEqual(expect.arrayContaining(['url', 'id', 'title', 'status', 'owner']));
    expect(record.required).not.toContain('email');
    expect(record.properties.email).toBeDefined();
    expect(document.components.schemas.ResumeRequest.properties).toHaveProperty('email');
    expect(document.components.schemas.ResumeRequest.properties).toHaveProperty('status');
    const catalog = (await get('/api/v1/events/', null)).body!;
    const event = (catalog.results as Json[]).find((entry) => entry.name === 'resume')!;
    const subject = event.schema.properties.resume;
    expect(subject.required).toEqual(expect.arrayContaining(['title', 'number']));
    expect(subject.required).not.toContain('email');
  });
});

describe('field rule declaration errors', () => {
  let database: TestDatabase;
  const projects: Project[] = [];
  const notes = (fields: string, extra = '') => `import { defineResource, field } from 'restwire';
export default defineResource({ name: 'notes', fields: { ${fields} }${extra} });
`;
  /** The output of `serve` refusing to start. */
  const refused = async (source: string) => {
    const project = createProject(database, { 'notes.ts': source });
    projects.push(project);
    const result = await project.run(['serve'], {}, 15_000);
    expect(result.code, result.output).not.toBe(0);
    expect(result.code, 'exits by itself').not.toBeNull();
    return result.output;
  };

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
  });
  afterAll(async () => {
    for (const project of projects) project.cleanup();
    await database?.drop();
  });

  it('refuses ordering by a field with a read rule', async () => {
    const output = await refused(notes("secret: field.string({ maxLength: 10, access: { read: '@authenticated' } })", ", owner: true, orderings: ['secret']"));
    for (const part of ['notes.ts', '"notes"', '"secret"', 'read rule']) expect(output).toContain(part);
  });

  it('refuses a rule that does not read, naming the collection, the field and the rule', async () => {
    const bad = await refused(notes("body: field.string({ maxLength: 10, access: { read: 'visibility=team' } })"));
    for (const part of ['"notes"', '"body"', 'visibility=team', 'unknown field']) expect(bad).toContain(part);
    const noOwner = await refused(notes("body: field.string({ maxLength: 10, access: { write: 'owner=@me' } , required: false })"));
    for (const part of ['"notes"', '"body"', 'owner=@me', 'no owner']) expect(noOwner).toContain(part);
    const unknownAction = await refused(notes("body: field.string({ maxLength: 10, access: { update: '*' } as any })"));
    for (const part of ['"notes"', '"body"', 'update']) expect(unknownAction).toContain(part);
  });
});
