import { cpSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, type RunningServer, type TestDatabase } from './support/server.js';

// examples/resumes as a user runs it: its declarations (and migrations, when the example ships
// them) copied into a project of their own, migrated and served, then the README's flow.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const EXAMPLE = new URL('../examples/resumes/', import.meta.url).pathname;
const SHIPS_MIGRATIONS = existsSync(join(EXAMPLE, 'migrations'));

describe.each(BACKENDS)('examples/resumes on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  const bob = basic('bob', 'bob-password-1');
  const api = (path: string, init: RequestInit = {}) => fetch(`${server.url}${path}`, { redirect: 'manual', ...init });
  const send = (method: string, path: string, body: unknown, auth = adminAuth) =>
    api(path, { method, headers: { authorization: auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const create = async (collection: string, body: Json, auth = adminAuth): Promise<Json> => {
    const response = await send('POST', `/api/v1/${collection}/`, body, auth);
    expect(response.status, await response.clone().text()).toBe(201);
    return (await response.json()) as Json;
  };
  const get = async (path: string): Promise<Json> => (await (await api(path)).json()) as Json;
  const ids = async (path: string) => ((await get(path)).results as Json[]).map((r) => r.id as number).sort((a, b) => a - b);

  let bachelor: Json;
  let master: Json;
  let resume: Json;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    const resources = join(EXAMPLE, 'resources');
    project = createProject(
      database,
      Object.fromEntries(readdirSync(resources).map((file) => [file, readFileSync(join(resources, file), 'utf8')])),
    );
    if (SHIPS_MIGRATIONS) cpSync(join(EXAMPLE, 'migrations'), project.migrationsDir, { recursive: true });
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
    project?.cleanup();
  });

  it('migrates (the shipped migrations, or one made by makemigrations) and serves', async () => {
    // The example ships no migrations folder yet: then the project makes its own, once.
    if (!SHIPS_MIGRATIONS) await runOk(project, ['makemigrations']);
    expect((await runOk(project, ['makemigrations'])).stdout).toContain('No changes detected');
    await runOk(project, ['migrate']);
    server = await project.start();
    await createUser(database, 'bob', 'bob-password-1');
    const root = await get('/api/v1/');
    for (const name of ['education', 'positions', 'resumes']) expect(root[name]).toBe(`/api/v1/${name}/`);
  });

  it('creates education records, then a resume listing them by path', async () => {
    bachelor = await create('education', { institution: 'State University', field_of_study: 'Physics', started_on: '2010-09-01', finished_on: '2014-06-30' });
    master = await create('education', { institution: 'Tech Institute', degree: 'master', started_on: '2015-09-01', grade: '3.85' });
    expect(bachelor).toMatchObject({ degree: 'bachelor', grade: null, owner: '/api/v1/users/1/' });
    expect(master).toMatchObject({ degree: 'master', grade: '3.85', finished_on: null });
    resume = await create('resumes', {
      full_name: 'Ada Lovelace', email: 'ada@example.com', headline: 'Analyst\nand poet', open_to_work: true,
      available_from: '2025-01-01T09:00:00+01:00', skills: ['sql', 'typescript'], education: [master.url, bachelor.url],
    });
    expect(resume).toMatchObject({
      full_name: 'Ada Lovelace', years_of_experience: 0, open_to_work: true, website: null,
      available_from: '2025-01-01T08:00:00.000Z', skills: ['sql', 'typescript'], education: [bachelor.url, master.url], positions: [],
    });
  });

  it('reads the resume back, and each education record lists it', async () => {
    // The email is its owner's and admins' only (a field read rule): others get no `email` member.
    const { email, ...withoutEmail } = resume;
    expect(email).toBe('ada@example.com');
    expect(await get(resume.url)).toEqual(withoutEmail);
    expect(await (await api(resume.url as string, { headers: { authorization: bob } })).json()).toEqual(withoutEmail);
    expect(await (await api(resume.url as string, { headers: { authorization: adminAuth } })).json()).toEqual(resume);
    expect((await get(bachelor.url)).resumes).toEqual([resume.url]);
    expect((await get(master.url)).resumes).toEqual([resume.url]);
  });

  it('filters and searches as declared', async () => {
    const other = await create('resumes', { full_name: 'Grace Hopper', email: 'grace@example.com', years_of_experience: 40, education: [master.url] }, bob);
    expect(await ids(`/api/v1/resumes/?education=${bachelor.id}`)).toEqual([resume.id]);
    expect(await ids(`/api/v1/resumes/?education=${encodeURIComponent(master.url)}`)).toEqual([resume.id, other.id]);
    expect(await ids('/api/v1/resumes/?open_to_work=true')).toEqual([resume.id]);
    expect(await ids('/api/v1/resumes/?years_of_experience__gte=10')).toEqual([other.id]);
    expect(await ids('/api/v1/resumes/?search=hopper')).toEqual([other.id]);
    expect(await ids('/api/v1/education/?degree=master')).toEqual([master.id]);
    expect(await ids('/api/v1/education/?started_on__lte=2012-01-01')).toEqual([bachelor.id]);
    const ordered = (await get('/api/v1/education/')).results as Json[];
    expect(ordered.map((e) => e.id)).toEqual([master.id, bachelor.id]);
    expect((await api('/api/v1/education/?degree=wizard')).status).toBe(400);
  });

  it('refuses a duplicate email and a reference of the wrong collection', async () => {
    const duplicate = await send('POST', '/api/v1/resumes/', { full_name: 'Copy', email: 'ada@example.com' });
    expect(duplicate.status).toBe(400);
    expect((await duplicate.json()).errors).toEqual({ email: ['resume with this email already exists.'] });
    const wrong = await send('POST', '/api/v1/resumes/', { full_name: 'Wrong', email: 'w@example.com', education: [resume.url] });
    expect((await wrong.json()).errors).toEqual({ education: ['Invalid hyperlink - Incorrect URL match.'] });
  });

  it('lets only the owner change a resume', async () => {
    expect((await send('PATCH', resume.url, { headline: 'hijacked' }, bob)).status).toBe(403);
    expect((await send('PATCH', resume.url, { headline: 'hijacked' }, 'none')).status).toBe(401);
    const patched = await send('PATCH', resume.url, { years_of_experience: 12 });
    expect(await patched.json()).toMatchObject({ years_of_experience: 12, headline: 'Analyst\nand poet' });
  });

  it('keeps the resume’s current position by its positions’ hooks, and closes a position with its action', async () => {
    const first = await create('positions', { resume: resume.url, title: 'Analyst', employer: 'Engines Ltd', started_on: '2016-01-01' });
    expect((await get(resume.url)).current_position).toBe('Analyst at Engines Ltd');
    const later = await create('positions', { resume: resume.url, title: 'Lead', employer: 'Difference Co', started_on: '2019-05-01' });
    expect((await get(resume.url)).current_position).toBe('Lead at Difference Co');
    // Only the owner closes a position (its action's access rule); its input is a date.
    expect((await send('POST', `${later.url}close/`, {}, bob)).status).toBe(403);
    const early = await send('POST', `${later.url}close/`, { on: '2019-04-30' });
    expect(early.status).toBe(400);
    expect((await early.json()).errors).toEqual({ finished_on: ['Must be on or after started_on.'] });
    const backwards = await send('POST', '/api/v1/positions/', { resume: resume.url, title: 'Oops', employer: 'X', started_on: '2020-01-01', finished_on: '2019-01-01' });
    expect((await backwards.json()).errors).toEqual({ finished_on: ['Must be on or after started_on.'] });
    const bad = await send('POST', `${later.url}close/`, { on: 'soon' });
    expect(bad.status).toBe(400);
    expect(Object.keys((await bad.json()).errors)).toEqual(['on']);
    const closed = await send('POST', `${later.url}close/`, { on: '2021-12-31' });
    expect(closed.status).toBe(200);
    expect(await closed.json()).toMatchObject({ url: later.url, finished_on: '2021-12-31' });
    expect((await get(resume.url)).current_position).toBe('Analyst at Engines Ltd');
    const today = new Date().toISOString().slice(0, 10);
    expect(await (await send('POST', `${first.url}close/`, {})).json()).toMatchObject({ finished_on: today });
    expect((await get(resume.url)).current_position).toBeNull();
    for (const position of [first, later]) expect((await api(position.url, { method: 'DELETE', headers: { authorization: adminAuth } })).status).toBe(204);
  });

  it('creates positions on two resumes at once: every create commits, none is answered 500', async () => {
    // Each create's hook updates its resume, so concurrent creates alternating between two resumes
    // lock the two rows in both orders. On PostgreSQL writes share commits in several lanes, and
    // such creates meet deadlocks there; a create that loses one runs again after its lane commits.
    const other = await create('resumes', { full_name: 'Second Resume', email: 'second@example.com' });
    const made: string[] = [];
    for (let round = 0; round < 5; round += 1) {
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, index) =>
          send('POST', '/api/v1/positions/', { resume: (index % 2 ? resume : other).url, title: `Role ${round}.${index}`, employer: 'Busy Co', started_on: '2022-01-01' }),
        ),
      );
      for (const answer of answers) {
        expect(answer.status, await answer.clone().text()).toBe(201);
        made.push(((await answer.json()) as Json).url as string);
      }
    }
    expect(new Set(made).size).toBe(200);
    // Each was committed: each can be deleted.
    for (const url of made) expect((await api(url, { method: 'DELETE', headers: { authorization: adminAuth } })).status).toBe(204);
    expect((await api(other.url as string, { method: 'DELETE', headers: { authorization: adminAuth } })).status).toBe(204);
  });

  it('deleting a resume deletes its positions (cascade); deleting education drops it from resumes', async () => {
    const position = await create('positions', { resume: resume.url, title: 'Analyst', employer: 'Engines Ltd', started_on: '2016-01-01' });
    expect((await get(resume.url)).positions).toEqual([position.url]);
    const me = await (await api('/api/v1/users/me/', { headers: { authorization: adminAuth } })).json();
    expect(me).toMatchObject({ resumes: [resume.url], positions: [position.url] });
    expect(me.education).toEqual([bachelor.url, master.url]);

    expect((await api(bachelor.url, { method: 'DELETE', headers: { authorization: adminAuth } })).status).toBe(204);
    expect((await get(resume.url)).education).toEqual([master.url]);

    expect((await api(resume.url, { method: 'DELETE', headers: { authorization: adminAuth } })).status).toBe(204);
    expect((await api(position.url)).status).toBe(404);
    expect((await api(resume.url)).status).toBe(404);
    expect((await get(master.url)).resumes).not.toContain(resume.url);
  });
});
