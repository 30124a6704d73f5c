import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, type RunningServer, type TestDatabase } from './support/server.js';

// A declaration's own logic, part 1 (LOGIC.md §1, §2), black-box: field validators, the
// declaration's `validate(values, ctx)` (merged PATCH values, ctx.record, ctx.user,
// non_field_errors, nothing stored on a 400), a throw in user code as a 500 without a stack, and
// computed fields wherever a record is shown (JSON, CSV, OPTIONS, OpenAPI, the event catalog, a
// webhook body) but never stored; bad declarations refused at start-up.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const RESUMES = `import { defineResource, field } from 'restwire';
export default defineResource({ name: 'resumes', fields: { name: field.string({ maxLength: 50 }) } });
`;

// The validate() below answers a title of "echo" with what it was given, so the test can see it.
const POSITIONS = `import { defineResource, field } from 'restwire';
const monthsBetween = (from: string, to: string): number => {
  const [fy, fm] = from.split('-').map(Number);
  const [ty, tm] = to.split('-').map(Number);
  return (ty - fy) * 12 + (tm - fm);
};
export default defineResource({
  name: 'positions',
  fields: {
    title: field.string({
      maxLength: 100,
      validators: [
        (v) => (v.length > 1 && v === v.toUpperCase() ? 'Not all capitals, please.' : null),
        (v) => (v.includes('!') ? ['No exclamation marks.', 'Be calm.'] : null),
      ],
    }),
    note: field.string({
      maxLength: 100, required: false, nullable: true,
      validators: [(v) => { if (v === null) return 'called with null'; if (v === 'boom') throw new Error('validator exploded'); return null; }],
    }),
    started_on: field.date(),
    finished_on: field.date({ required: false, nullable: true }),
    resume: field.reference('resumes', { onDelete: 'cascade' }),
    months: field.computed(field.integer({ nullable: true, helpText: 'Whole months.' }), (r) =>
      r.finished_on === null ? null : monthsBetween(r.started_on, r.finished_on)),
    label: field.computed(field.string({ maxLength: 200 }), (r) => r.title + ' #' + r.resume_id),
  },
  owner: true,
  event: 'position',
  async validate(values, { errors, user, record }) {
    await new Promise((resolve) => setTimeout(resolve, 1));
    if (values.finished_on !== null && values.finished_on < values.started_on) errors.add('finished_on', 'Must be on or after started_on.');
    if (values.title === 'twice') {
      errors.add(null, 'First.');
      errors.add('title', 'Not twice.');
      errors.add(null, 'Second.');
    }
    if (values.title === 'echo') errors.add(null, JSON.stringify({ values, user, record }));
    if (values.title === 'crash') throw new Error('validate exploded');
  },
});
`;

const alice = basic('alice', 'alice-password-1');

describe.each(BACKENDS)('validators, validate() and computed fields on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  let receiver: Receiver;
  let resume = '';
  const send = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), authorization: alice, ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, text, body: text && response.headers.get('content-type')?.includes('json') ? (JSON.parse(text) as Json) : null };
  };
  const position = (extra: Json = {}) => ({ title: 'Engineer', started_on: '2024-01-15', resume, ...extra });
  const count = async () => ((await send('GET', '/api/v1/positions/?limit=100')).body!.results as Json[]).length;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'resumes.ts': RESUMES, 'positions.ts': POSITIONS });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    receiver = await startReceiver();
    server = await project.start({ env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    await createUser(database, 'alice', 'alice-password-1');
    resume = (await send('POST', '/api/v1/resumes/', { name: 'Alice' })).body!.url;
  });
  afterAll(async () => {
    await server?.stop();
    await receiver?.close();
    project?.cleanup();
    await database?.drop();
  });

  it("runs a field's validators after its own checks, every message, never for null", async () => {
    const capitals = await send('POST', '/api/v1/positions/', position({ title: 'CTO!' }));
    expect(capitals.status).toBe(400);
    expect(capitals.body!.errors).toEqual({ title: ['Not all capitals, please.', 'No exclamation marks.', 'Be calm.'] });
    // The type's own check first; the validators only see a value that passed it.
    const long = await send('POST', '/api/v1/positions/', position({ title: 'X'.repeat(101) }));
    expect(long.body!.errors).toEqual({ title: ['Ensure this field has no more than 100 characters.'] });
    const withNull = await send('POST', '/api/v1/positions/', position({ note: null }));
    expect(withNull.status, withNull.text).toBe(201);
    expect(withNull.body!.note).toBeNull();
  });

  it('runs validate() once every field passed, with defaults, references as paths and ids, and the caller', async () => {
    const before = await count();
    const wrongOrder = await send('POST', '/api/v1/positions/', position({ finished_on: '2023-01-01' }));
    expect(wrongOrder.status).toBe(400);
    expect(wrongOrder.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(wrongOrder.body!.errors).toEqual({ finished_on: ['Must be on or after started_on.'] });
    const twice = await send('POST', '/api/v1/positions/', position({ title: 'twice' }));
    expect(twice.body!.errors).toEqual({ non_field_errors: ['First.', 'Second.'], title: ['Not twice.'] });
    // A field's own error first: validate() is not asked, so its message is not there.
    const both = await send('POST', '/api/v1/positions/', position({ finished_on: '2023-01-01', started_on: 'soon' }));
    expect(Object.keys(both.body!.errors)).toEqual(['started_on']);
    expect(await count()).toBe(before);

    const echo = await send('POST', '/api/v1/positions/', position({ title: 'echo', months: 99 }));
    const seen = JSON.parse(echo.body!.errors.non_field_errors[0]) as Json;
    const resumeId = Number(resume.split('/')[4]);
    expect(seen.values).toEqual({ title: 'echo', note: null, started_on: '2024-01-15', finished_on: null, resume, resume_id: resumeId });
    expect(seen.user).toMatchObject({ username: 'alice', roles: [] });
    expect(Object.keys(seen.user).sort()).toEqual(['id', 'roles', 'username']);
    expect(seen.record).toBeNull();
    expect(await count()).toBe(before);
  });

  it('merges a PATCH with the stored record, gives ctx.record, and stores nothing on a 400', async () => {
    const created = await send('POST', '/api/v1/positions/', position({ finished_on: '2024-06-30' }));
    expect(created.status, created.text).toBe(201);
    const path = String(created.body!.url).replace(server.url, '');
    // started_on is not in the PATCH: the stored one is compared.
    const refused = await send('PATCH', path, { finished_on: '2023-12-31', title: 'Lead' });
    expect(refused.status).toBe(400);
    expect(refused.body!.errors).toEqual({ finished_on: ['Must be on or after started_on.'] });
    const unchanged = await send('GET', path);
    expect(unchanged.body).toMatchObject({ title: 'Engineer', finished_on: '2024-06-30', months: 5 });

    const echo = await send('PATCH', path, { title: 'echo' });
    const seen = JSON.parse(echo.body!.errors.non_field_errors[0]) as Json;
    expect(seen.values).toMatchObject({ title: 'echo', started_on: '2024-01-15', finished_on: '2024-06-30', resume });
    expect(seen.record).toMatchObject({ url: created.body!.url, title: 'Engineer', months: 5, owner: created.body!.owner, resume_id: Number(resume.split('/')[4]) });
    const put = await send('PUT', path, { title: 'Lead', started_on: '2024-03-01', resume });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toMatchObject({ title: 'Lead', started_on: '2024-03-01', finished_on: '2024-06-30', months: 3 });
  });

  it('answers a throw in a validator or validate() with a 500 without a stack, logged with the collection and where', async () => {
    const before = await count();
    for (const [body, where, message] of [
      [position({ note: 'boom' }), 'validators of field \\"note\\"', 'validator exploded'],
      [position({ title: 'crash' }), 'validate', 'validate exploded'],
    ] as const) {
      const response = await send('POST', '/api/v1/positions/', body);
      expect(response.status).toBe(500);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(response.body).toEqual({ type: 'urn:restwire:problem:server_error', title: 'Internal Server Error', status: 500, detail: 'The server could not complete the request.' });
      expect(response.text).not.toMatch(/exploded|at .*\.ts|stack/);
      await expect.poll(() => server.output()).toContain(`collection \\"positions\\", ${where}: ${message}`);
    }
    expect(await count()).toBe(before);
  });

  it('shows computed fields in records, lists, CSV and webhook bodies, ignores them as input, never stores them', async () => {
    const hook = await send('POST', '/api/v1/webhooks/', { target_url: receiver.url, events: ['position'] }, { authorization: adminAuth });
    expect(hook.status, hook.text).toBe(201);
    const created = await send('POST', '/api/v1/positions/', position({ title: 'Analyst', finished_on: '2025-03-01', months: 1000, label: 'mine' }));
    expect(created.status, created.text).toBe(201);
    const resumeId = Number(resume.split('/')[4]);
    expect(created.body).toMatchObject({ months: 14, label: `Analyst #${resumeId}` });
    expect(Object.keys(created.body!)).toEqual(['url', 'id', 'title', 'note', 'started_on', 'finished_on', 'resume', 'months', 'label', 'owner', 'created_at', 'updated_at']);
    const list = await send('GET', '/api/v1/positions/?limit=100');
    expect(list.body!.results.find((record: Json) => record.id === created.body!.id)).toMatchObject({ months: 14, label: `Analyst #${resumeId}` });
    const csv = await send('GET', `/api/v1/positions/${created.body!.id}/`, undefined, { accept: 'text/csv' });
    const [header, row] = csv.text.trim().split(/\r?\n/);
    expect(header).toBe('url,id,title,note,started_on,finished_on,resume,months,label,owner,created_at,updated_at');
    expect(row).toContain(`,14,Analyst #${resumeId},`);

    const delivered = await receiver.waitFor((received) => received.some((r) => r.headers['x-service-event'] === 'position'));
    const event = JSON.parse(delivered.find((r) => r.headers['x-service-event'] === 'position')!.body) as Json;
    expect(event.position).toMatchObject({ title: 'Analyst', months: 14, label: `Analyst #${resumeId}` });

    const [migration] = project.migrationFiles();
    expect(project.readMigration(migration!)).toContain('"finished_on"');
    expect(project.readMigration(migration!)).not.toMatch(/"months"|"label"/);
    // Nothing to migrate: the declarations and the migrations agree.
    expect((await runOk(project, ['makemigrations'])).output).toMatch(/no changes/i);
  });

  it('describes computed fields as their type, read-only, in OPTIONS, OpenAPI and the event catalog', async () => {
    const options = await send('OPTIONS', '/api/v1/positions/');
    expect(options.body!.actions.POST.months).toMatchObject({ type: 'integer', read_only: true, required: false, help_text: 'Whole months.', allow_null: true });
    expect(options.body!.actions.POST.label).toMatchObject({ type: 'string', read_only: true, max_length: 200 });
    const doc = (await send('GET', '/api/v1/openapi.json')).body!;
    const schema = doc.components.schemas.Position as Json;
    expect(schema.properties.months).toMatchObject({ type: ['integer', 'null'], readOnly: true, description: 'Whole months.' });
    expect(schema.properties.label).toMatchObject({ type: 'string', readOnly: true, maxLength: 200 });
    expect(schema.required).toContain('months');
    // Nobody writes it: no request body names it.
    expect(Object.keys(doc.components.schemas.PositionRequest.properties)).toContain('title');
    expect(Object.keys(doc.components.schemas.PositionRequest.properties)).not.toContain('months');
    expect(Object.keys(doc.components.schemas.PatchedPositionRequest.properties)).not.toContain('months');
    const catalog = await send('GET', '/api/v1/events/');
    expect(JSON.stringify(catalog.body)).toContain('Whole months.');
  });
});

describe('declarations of validators, validate() and computed fields', () => {
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

  it('refuses a bad one at start-up, naming the collection and the field', async () => {
    // Each case: the fields, the options besides them, and what the refusal says.
    const cases: Array<[string, string, RegExp]> = [
      ['title: field.string({ maxLength: 9, validators: (v) => null })', '', /collection "bad", field "title": field\.string: option validators must be a list of functions/],
      ["title: field.string({ maxLength: 9, validators: ['short'] })", '', /collection "bad", field "title": .*validators must be a list of functions/],
      ['n: field.computed(field.integer(), (r) => 1)', "filters: { n: ['exact'] }", /collection "bad", field "n": cannot filter on "n": a computed field is not stored/],
      ['n: field.computed(field.integer(), (r) => 1)', "orderings: ['n']", /collection "bad", field "n": cannot order by "n"/],
      ["n: field.computed(field.string({ maxLength: 9 }), (r) => 'a')", "search: ['n']", /collection "bad", field "n": cannot search "n"/],
      ["r: field.computed(field.reference('resumes'), (r) => null)", '', /collection "bad", field "r": .*cannot be a relation/],
      ['n: field.computed(field.integer({ unique: true }), (r) => 1)', '', /collection "bad", field "n": .*option unique means nothing/],
      ['n: field.computed(field.integer())', '', /collection "bad", field "n": .*a function of the record/],
      ['title: field.string({ maxLength: 9 })', "validate: 'yes'", /collection "bad": validate must be a function/],
    ];
    for (const [fields, options, message] of cases) {
      project.write('bad.ts', `import { defineResource, field } from 'restwire';\nexport default defineResource({ name: 'bad', fields: { ${fields} }, ${options} });\n`);
      const result = await project.run(['makemigrations']);
      expect(result.code, result.output).not.toBe(0);
      expect(result.output).toMatch(message);
    }
  }, 300_000);
});
