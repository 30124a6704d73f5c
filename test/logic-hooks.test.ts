import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, type RunningServer, type TestDatabase } from './support/server.js';
import { jsonClient, type Json } from './support/client.js';

// A declaration's own logic, black-box (LOGIC.md §3 hooks, ctx.collection, reject, afterCommit;
// §4 actions): `positions` of `resumes` whose hooks change values in place, write the resume
// through ctx.collection (with its events), refuse with reject(), fail on purpose, and register
// afterCommit functions that append to a file; and actions on a position and on the collection.

const RESUMES = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'resumes',
  fields: {
    full_name: field.string({ maxLength: 100 }),
    last_position: field.string({ maxLength: 100, required: false, nullable: true }),
    positions_count: field.integer({ default: 0, readOnly: true }),
  },
  owner: true,
  event: 'resume',
});
`;

const POSITIONS = `import { appendFileSync } from 'node:fs';
import { defineResource, field, reject } from 'restwire';
const log = (line) => appendFileSync(process.env.AFTER_COMMIT_LOG, line + '\\n');
// PostgreSQL's answer to a deadlock (40P01), raised once by a hook: the write runs again.
let conflicted = false;
async function recount(collection, resumeId) {
  const all = await collection('positions').list('resume=' + resumeId);
  await collection('resumes').update(resumeId, { positions_count: all.length });
}
export default defineResource({
  name: 'positions',
  fields: {
    title: field.string({ maxLength: 100 }),
    started_on: field.date(),
    finished_on: field.date({ required: false, nullable: true }),
    resume: field.reference('resumes', { onDelete: 'cascade' }),
    locked: field.boolean({ default: false }),
    note: field.string({ maxLength: 100, required: false, nullable: true }),
  },
  owner: true,
  filters: { resume: ['exact'] },
  event: 'position',
  access: { read: ['owner=@me', 'locked=true'], create: '@authenticated', update: 'owner=@me', delete: 'owner=@me' },
  hooks: {
    async beforeCreate({ values, user, collection }) {
      values.title = values.title.trim();
      if (values.title.startsWith('REJECT ')) reject(Number(values.title.slice(7)), 'Refused: ' + values.title.slice(7));
      if (values.title === 'BAD TITLE') reject(400, 'The title is not right.', { title: ['Choose another title.'] });
      if (values.note === 'first resume') values.resume = (await collection('resumes').list())[0].id;
      values.note = values.note ?? 'created by ' + user.username;
      if (values.title.startsWith('CONFLICT ONCE')) values.title += '!';
    },
    async afterCreate({ record, collection, afterCommit }) {
      await collection('resumes').update(record.resume_id, { last_position: record.title });
      await recount(collection, record.resume_id);
      afterCommit(() => log('created ' + record.title));
      if (record.title === 'EXPLODE') throw new Error('the hook fails on purpose');
      if (record.title === 'AFTER COMMIT FAILS') afterCommit(() => { throw new Error('afterCommit fails on purpose'); });
      if (record.title.startsWith('CONFLICT ONCE') && !conflicted) {
        conflicted = true;
        throw Object.assign(new Error('a deadlock, raised on purpose'), { code: '40P01' });
      }
    },
    async beforeUpdate({ values, record }) {
      if ('finished_on' in values) values.note = 'closed (was ' + record.note + ')';
    },
    async afterUpdate({ record, collection }) {
      await collection('resumes').update(record.resume_id, { last_position: record.title + (record.finished_on ? ' (ended)' : '') });
    },
    async beforeDelete({ record }) {
      if (record.locked) reject(409, 'This position is locked.');
    },
    async afterDelete({ record, collection, afterCommit }) {
      await recount(collection, record.resume_id);
      afterCommit(() => log('deleted ' + record.title));
    },
  },
  actions: {
    close: {
      detail: true,
      access: 'owner=@me',
      description: 'Ends the position.',
      input: { on: field.date({ required: false }) },
      async handle({ record, input, collection }) {
        return { body: await collection('positions').update(record.id, { finished_on: input.on ?? '2024-12-31' }) };
      },
    },
    reopen: {
      detail: true,
      async handle({ record, collection }) {
        await collection('positions').update(record.id, { finished_on: null });
        return { status: 202, body: { reopened: record.url }, headers: { 'x-reopened': String(record.id) } };
      },
    },
    history: {
      detail: true,
      method: 'GET',
      async handle({ record, user }) {
        return { body: { title: record.title, resume_id: record.resume_id, asked_by: user?.username ?? null } };
      },
    },
    summary: {
      detail: false,
      method: 'GET',
      access: '@authenticated',
      async handle({ collection }) {
        return { body: { count: (await collection('positions').list()).length } };
      },
    },
    sneaky: {
      detail: false,
      method: 'GET',
      async handle({ collection }) {
        await collection('resumes').create({ full_name: 'Written by a GET' });
      },
    },
    explode: {
      detail: false,
      async handle({ collection }) {
        const resume = (await collection('resumes').list())[0];
        await collection('resumes').update(resume.id, { full_name: 'Changed before failing' });
        throw new Error('the action fails on purpose');
      },
    },
    refuse: {
      detail: false,
      async handle() {
        reject(409, 'Not now.');
      },
    },
    invalid_write: {
      detail: false,
      async handle({ collection }) {
        await collection('resumes').create({ last_position: 'No name given' });
      },
    },
  },
});
`;

const alice = basic('alice', 'alice-password-1');
const bob = basic('bob', 'bob-password-1');

describe.each(BACKENDS)('hooks and actions of a declaration on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  let receiver: Receiver;
  let afterCommitLog: string;
  const send = jsonClient(() => server.url);
  const get = (path: string, auth: string | null = alice) => send('GET', path, auth);
  /** The event bodies delivered so far (not the ping). */
  const events = () => receiver.received.map((entry) => JSON.parse(entry.body) as Json).filter((event) => event.action !== undefined && !('zen' in event));
  const loggedLines = () => (existsSync(afterCommitLog) ? readFileSync(afterCommitLog, 'utf8').split('\n').filter(Boolean) : []);
  let resume: Json;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'resumes.ts': RESUMES, 'positions.ts': POSITIONS });
    afterCommitLog = join(project.dir, 'after-commit.log');
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    receiver = await startReceiver();
    server = await project.start({ env: { WEBHOOK_ALLOW_PRIVATE: 'true', AFTER_COMMIT_LOG: afterCommitLog } });
    await createUser(database, 'alice', 'alice-password-1');
    await createUser(database, 'bob', 'bob-password-1');
    const hook = await send('POST', '/api/v1/webhooks/', adminAuth, { target_url: `${receiver.url}/events`, events: ['*'], ordering: 'record' });
    expect(hook.status, hook.text).toBe(201);
    resume = (await send('POST', '/api/v1/resumes/', alice, { full_name: 'Ada Lovelace' })).body!;
    await receiver.waitFor(() => events().some((event) => event.resume?.full_name === 'Ada Lovelace'));
  });
  afterAll(async () => {
    await server?.stop();
    await receiver?.close();
    project?.cleanup();
    await database?.drop();
  });

  const position = async (body: Json, auth = alice) => {
    const created = await send('POST', '/api/v1/positions/', auth, { started_on: '2020-01-01', resume: resume.url, ...body });
    expect(created.status, created.text).toBe(201);
    return created.body!;
  };

  it('runs beforeCreate with the values as JSON, changed in place (a reference set by id), and afterCreate writing another collection with its event', async () => {
    const analyst = await position({ title: '  Analyst  ' });
    expect(analyst).toMatchObject({ title: 'Analyst', note: 'created by alice', resume: resume.url });
    const second = (await send('POST', '/api/v1/resumes/', alice, { full_name: 'Ada, again' })).body!;
    const byId = await position({ title: 'Engineer', resume: second.url, note: 'first resume' });
    expect(byId.resume).toBe(resume.url);
    expect((await get(second.url)).body!.positions_count).toBe(0);
    const updated = (await get(resume.url)).body!;
    expect(updated).toMatchObject({ last_position: 'Engineer', positions_count: 2 });
    // The resume's change raised its own event, in the same transaction as the position's.
    // Deliveries of different records may arrive in any order: wait for both.
    await receiver.waitFor(
      () => events().some((event) => event.resume?.last_position === 'Engineer') && events().some((event) => event.position?.title === 'Engineer' && event.action === 'created'),
    );
    await expect.poll(() => loggedLines()).toEqual(expect.arrayContaining(['created Analyst', 'created Engineer']));
  });

  it('refuses with reject(): that status and detail as problem+json, nothing stored, no event', async () => {
    for (const status of [403, 404, 409, 422]) {
      const refused = await send('POST', '/api/v1/positions/', alice, { title: `REJECT ${status}`, started_on: '2020-01-01', resume: resume.url });
      expect(refused.status).toBe(status);
      expect(refused.headers.get('content-type')).toContain('application/problem+json');
      expect(refused.body).toMatchObject({ status, detail: `Refused: ${status}` });
    }
    const invalid = await send('POST', '/api/v1/positions/', alice, { title: 'BAD TITLE', started_on: '2020-01-01', resume: resume.url });
    expect(invalid.status).toBe(400);
    expect(invalid.body).toMatchObject({ detail: 'The title is not right.', errors: { title: ['Choose another title.'] } });
    const titles = ((await get('/api/v1/positions/')).body!.results as Json[]).map((p) => p.title);
    expect(titles.some((title: string) => title.startsWith('REJECT') || title === 'BAD TITLE')).toBe(false);
  });

  it('rolls back the record, the other collection’s change and every event when a hook throws: a 500 without a stack, logged with the collection and hook', async () => {
    const before = (await get(resume.url)).body!;
    const failed = await send('POST', '/api/v1/positions/', alice, { title: 'EXPLODE', started_on: '2020-01-01', resume: resume.url });
    expect(failed.status).toBe(500);
    expect(failed.headers.get('content-type')).toContain('application/problem+json');
    expect(failed.text).not.toContain('on purpose');
    expect(failed.text).not.toMatch(/at .*\.(js|ts):\d+/);
    await expect.poll(() => server.output()).toContain('"collection":"positions","hook":"afterCreate"');
    expect(server.output()).toContain('afterCreate: the hook fails on purpose');
    expect((await get(resume.url)).body).toEqual(before);
    expect(((await get('/api/v1/positions/')).body!.results as Json[]).some((p) => p.title === 'EXPLODE')).toBe(false);
    // A later change of the same resume is delivered (each record's events in commit order, so any
    // event of the rolled-back write would have come first): none was, and its afterCommit never ran.
    await position({ title: 'Later' });
    await receiver.waitFor(() => events().some((event) => event.resume?.last_position === 'Later'));
    expect(events().some((event) => JSON.stringify(event).includes('EXPLODE'))).toBe(false);
    await expect.poll(() => loggedLines()).toContain('created Later');
    expect(loggedLines()).not.toContain('created EXPLODE');
  });

  it('runs afterCommit once committed: its failure is logged and changes nothing answered', async () => {
    const created = await position({ title: 'AFTER COMMIT FAILS' });
    expect((await get(created.url)).body!.title).toBe('AFTER COMMIT FAILS');
    await expect.poll(() => server.output()).toContain('positions: an afterCommit function failed');
    await expect.poll(() => loggedLines()).toContain('created AFTER COMMIT FAILS');
  });

  it('runs a write that lost a deadlock again from its input: one record, beforeCreate’s change made once, afterCommit once', async () => {
    const before = (await get(resume.url)).body!.positions_count as number;
    const created = await position({ title: 'CONFLICT ONCE' });
    expect((await get(created.url)).body!.title).toBe('CONFLICT ONCE!');
    const titles = ((await get('/api/v1/positions/?limit=100')).body!.results as Json[]).map((p) => p.title as string);
    expect(titles.filter((title) => title.startsWith('CONFLICT ONCE'))).toEqual(['CONFLICT ONCE!']);
    expect((await get(resume.url)).body!.positions_count).toBe(before + 1);
    // afterCommit functions run before the answer is sent: the log is complete by now.
    expect(loggedLines().filter((line) => line.startsWith('created CONFLICT ONCE'))).toEqual(['created CONFLICT ONCE!']);
  });

  it('runs beforeUpdate and afterUpdate: values changed in place, the other collection written', async () => {
    const analyst = ((await get('/api/v1/positions/?resume=' + resume.id)).body!.results as Json[]).find((p) => p.title === 'Analyst')!;
    const patched = await send('PATCH', analyst.url, alice, { finished_on: '2022-06-30' });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ finished_on: '2022-06-30', note: 'closed (was created by alice)' });
    expect((await get(resume.url)).body!.last_position).toBe('Analyst (ended)');
    await receiver.waitFor(() => events().some((event) => event.action === 'updated' && event.position?.note === 'closed (was created by alice)'));
    const update = events().find((event) => event.action === 'updated' && event.position?.note === 'closed (was created by alice)')!;
    expect(Object.keys(update.changes).sort()).toEqual(['finished_on', 'note']);
  });

  it('runs beforeDelete (reject 409 keeps the record) and afterDelete (recounts through list)', async () => {
    const locked = await position({ title: 'Locked one', locked: true });
    const refused = await send('DELETE', locked.url, alice);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ detail: 'This position is locked.' });
    expect((await get(locked.url)).status).toBe(200);
    const count = (await get(resume.url)).body!.positions_count as number;
    const doomed = await position({ title: 'Doomed' });
    expect((await get(resume.url)).body!.positions_count).toBe(count + 1);
    expect((await send('DELETE', doomed.url, alice)).status).toBe(204);
    expect((await get(resume.url)).body!.positions_count).toBe(count);
    await expect.poll(() => loggedLines()).toContain('deleted Doomed');
  });

  it('serves detail actions: input parsed (400 on bad input), access rules, 404 for a record the caller may not read', async () => {
    const job = await position({ title: 'Closable' });
    const bad = await send('POST', `${job.url}close/`, alice, { on: 'not a date' });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body!.errors)).toEqual(['on']);
    const closed = await send('POST', `${job.url}close/`, alice, { on: '2023-03-31' });
    expect(closed.status, closed.text).toBe(200);
    expect(closed.body).toMatchObject({ url: job.url, finished_on: '2023-03-31', resume_id: resume.id });
    expect((await get(job.url)).body!.finished_on).toBe('2023-03-31');
    // Bob cannot read Alice's unlocked position: 404, as for one that does not exist.
    expect((await send('POST', `${job.url}close/`, bob, {})).status).toBe(404);
    expect((await send('GET', `${job.url}history/`, bob)).status).toBe(404);
    expect((await send('POST', '/api/v1/positions/999999/close/', alice, {})).status).toBe(404);
    // A locked one he may read: GET by the read rule, POST by the action's rule (owner) or the update rule.
    const locked = await position({ title: 'Shown to all', locked: true });
    expect((await send('GET', `${locked.url}history/`, bob)).body).toEqual({ title: 'Shown to all', resume_id: resume.id, asked_by: 'bob' });
    expect((await send('POST', `${locked.url}close/`, bob, {})).status).toBe(403);
    expect((await send('POST', `${locked.url}reopen/`, bob)).status).toBe(403);
    expect((await send('POST', `${locked.url}reopen/`, null)).status).toBe(401);
    const reopened = await send('POST', `${job.url}reopen/`, alice);
    expect(reopened.status).toBe(202);
    expect(reopened.headers.get('x-reopened')).toBe(String(job.id));
    expect(reopened.body).toEqual({ reopened: job.url });
    expect((await get(job.url)).body!.finished_on).toBeNull();
  });

  it('serves collection actions: GET with its access, a GET that may not write, a throw and a reject rolled back', async () => {
    expect((await send('GET', '/api/v1/positions/summary/', null)).status).toBe(401);
    const summary = await send('GET', '/api/v1/positions/summary/', bob);
    expect(summary.status).toBe(200);
    expect(summary.body!.count).toBeGreaterThan(3);
    const sneaky = await send('GET', '/api/v1/positions/sneaky/', alice);
    expect(sneaky.status).toBe(500);
    expect(((await get('/api/v1/resumes/')).body!.results as Json[]).some((r) => r.full_name === 'Written by a GET')).toBe(false);
    const exploded = await send('POST', '/api/v1/positions/explode/', alice);
    expect(exploded.status).toBe(500);
    await expect.poll(() => server.output()).toContain('"collection":"positions","hook":"actions.explode"');
    expect(server.output()).toContain('actions.explode: the action fails on purpose');
    expect((await get(resume.url)).body!.full_name).toBe('Ada Lovelace');
    const refused = await send('POST', '/api/v1/positions/refuse/', alice);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ status: 409, detail: 'Not now.' });
    expect((await send('GET', '/api/v1/positions/refuse/', alice)).status).toBe(405);
    // A write through ctx.collection that fails validation answers with that write's 400.
    const invalid = await send('POST', '/api/v1/positions/invalid_write/', alice);
    expect(invalid.status).toBe(400);
    expect(invalid.body!.errors).toEqual({ full_name: ['This field is required.'] });
    expect(((await get('/api/v1/resumes/')).body!.results as Json[]).some((r) => r.last_position === 'No name given')).toBe(false);
  });

  it('describes actions in OPTIONS, OpenAPI (input as the request body) and the browsable page', async () => {
    const job = await position({ title: 'Described' });
    const options = await send('OPTIONS', `${job.url}close/`, alice);
    expect(options.status).toBe(200);
    expect(options.body!.actions.POST.on).toMatchObject({ type: 'date', required: false });
    const openapi = (await get('/api/v1/openapi.json')).body!;
    const close = openapi.paths['/api/v1/positions/{id}/close/'].post;
    expect(close.description).toBe('Ends the position.');
    expect(JSON.stringify(close.requestBody)).toContain('"on"');
    expect(openapi.paths['/api/v1/positions/summary/'].get).toBeDefined();
    const page = await send('GET', job.url, alice, undefined, { accept: 'text/html' });
    expect(page.text).toContain(`data-action="${job.url}close/"`);
    expect(page.text).toContain(`href="${job.url}history/"`);
  });
});

describe('a declaration whose hooks or actions are wrong', () => {
  let database: TestDatabase;
  let project: Project;
  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    project = createProject(database, { 'resumes.ts': RESUMES });
  });
  afterAll(async () => {
    project?.cleanup();
    await database?.drop();
  });

  it('stops every command with the file, the collection and the hook or action', async () => {
    const declare = (extra: string) =>
      project.write('positions.ts', `import { defineResource, field } from 'restwire';
export default defineResource({ name: 'positions', fields: { title: field.string({ maxLength: 9 }) }, ${extra} });
`);
    declare('hooks: { beforeSave() {} }');
    let result = await project.run(['makemigrations']);
    expect(result.code).not.toBe(0);
    expect(result.output).toContain('positions.ts');
    expect(result.output).toContain('collection "positions": unknown hook "beforeSave"');
    declare("actions: { destroy: { detail: true, async handle() {} } }");
    result = await project.run(['makemigrations']);
    expect(result.code).not.toBe(0);
    expect(result.output).toContain('collection "positions": action "destroy": the name is one of the six viewset actions');
  });
});
