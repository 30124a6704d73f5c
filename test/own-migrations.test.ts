import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notesResource } from './support/library.js';
import { createProject, runOk, type Project } from './support/project.js';
import { BACKENDS, adminAuth, createTestDatabase, type RunningServer, type TestDatabase } from './support/server.js';

// RESOURCES.md §5–§7: migration steps on a collection that holds records, serve's refusal of
// unmigrated declarations, and declaration errors naming the file, the collection and the field.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const TOPICS = `import { defineResource, field } from 'restwire';
export default defineResource({ name: 'topics', fields: { label: field.string({ maxLength: 40 }) } });
`;
const TOPIC_FIELD = "    topic: field.reference('topics', { nullable: true, required: false, onDelete: 'setNull' }),";

describe.each(BACKENDS)('migration steps on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let topic: Json;
  const ids: number[] = [];

  /** Serves the project, runs `work` against it, and stops it. */
  const withServer = async <T>(work: (api: (path: string, init?: RequestInit) => Promise<Response>) => Promise<T>): Promise<T> => {
    const server: RunningServer = await project.start();
    try {
      return await work((path, init = {}) => fetch(`${server.url}${path}`, init));
    } finally {
      await server.stop();
    }
  };
  const records = () =>
    withServer(async (api) => {
      const page = (await (await api('/api/v1/notes/?ordering=id&limit=100')).json()) as { results: Json[] };
      return page.results;
    });
  const declare = (fields: string) => project.write('notes.ts', notesResource(fields));
  const makemigrations = async (...args: string[]) => {
    const before = project.migrationFiles().length;
    const result = await runOk(project, ['makemigrations', ...args]);
    expect(project.migrationFiles(), result.output).toHaveLength(before + 1);
    return result;
  };

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, {
      'topics.ts': TOPICS,
      'notes.ts': notesResource(`    title: field.string({ maxLength: 50 }),
    body: field.text({ maxLength: 500, required: false }),
${TOPIC_FIELD}`),
    });
  });
  afterAll(async () => {
    await database?.drop();
    project?.cleanup();
  });

  it('starts with records in a migrated collection', async () => {
    await makemigrations();
    await runOk(project, ['migrate']);
    await withServer(async (api) => {
      const post = async (path: string, body: Json) => {
        const response = await api(path, { method: 'POST', headers: { authorization: adminAuth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
        expect(response.status, await response.clone().text()).toBe(201);
        return (await response.json()) as Json;
      };
      topic = await post('/api/v1/topics/', { label: 'kept' });
      ids.push((await post('/api/v1/notes/', { title: 'first', body: 'has a body', topic: topic.url })).id);
      ids.push((await post('/api/v1/notes/', { title: 'second' })).id);
    });
  });

  it('adds fields with a default: the rows keep their data and read the default', async () => {
    declare(`    title: field.string({ maxLength: 50 }),
    body: field.text({ maxLength: 500, required: false }),
${TOPIC_FIELD}
    pinned: field.boolean({ default: false }),
    priority: field.integer({ default: 3 }),`);
    await makemigrations();
    await runOk(project, ['migrate']);
    expect(await records()).toMatchObject([
      { id: ids[0], title: 'first', body: 'has a body', topic: topic.url, pinned: false, priority: 3 },
      { id: ids[1], title: 'second', body: null, topic: null, pinned: false, priority: 3 },
    ]);
  });

  it('refuses a new required field without a default on a collection with records, asking for one', async () => {
    const files = project.migrationFiles();
    declare(`    title: field.string({ maxLength: 50 }),
    body: field.text({ maxLength: 500, required: false }),
${TOPIC_FIELD}
    pinned: field.boolean({ default: false }),
    priority: field.integer({ default: 3 }),
    due: field.date(),`);
    const result = await project.run(['makemigrations']);
    expect(result.code).not.toBe(0);
    expect(result.output).toMatch(/notes/);
    expect(result.output).toMatch(/due/);
    expect(result.output).toMatch(/default/i);
    expect(project.migrationFiles()).toEqual(files);
  });

  it('changes a field (longer maxLength, nullable → required with a default) keeping every row and reference', async () => {
    declare(`    title: field.string({ maxLength: 120 }),
    body: field.text({ maxLength: 500, default: 'n/a' }),
${TOPIC_FIELD}
    pinned: field.boolean({ default: false }),
    priority: field.integer({ default: 3 }),`);
    await makemigrations();
    await runOk(project, ['migrate']);
    expect(await records()).toMatchObject([
      { id: ids[0], title: 'first', body: 'has a body', topic: topic.url, pinned: false, priority: 3 },
      { id: ids[1], title: 'second', body: 'n/a', topic: null },
    ]);
    await withServer(async (api) => {
      const long = await api('/api/v1/notes/', { method: 'POST', headers: { authorization: adminAuth, 'content-type': 'application/json' }, body: JSON.stringify({ title: 'x'.repeat(100) }) });
      expect(long.status).toBe(201);
      ids.push(((await long.json()) as Json).id);
      expect((await (await api(topic.url)).json()) as Json).toMatchObject({ label: 'kept' });
    });
  });

  it('renames a field with --rename, keeping its data', async () => {
    declare(`    name: field.string({ maxLength: 120 }),
    body: field.text({ maxLength: 500, default: 'n/a' }),
${TOPIC_FIELD}
    pinned: field.boolean({ default: false }),
    priority: field.integer({ default: 3 }),`);
    await makemigrations('--rename', 'notes.title:name');
    await runOk(project, ['migrate']);
    const rows = await records();
    expect(rows.map((row) => row.name)).toEqual(['first', 'second', 'x'.repeat(100)]);
    expect(rows[0]).not.toHaveProperty('title');
  });

  it('removing a field that holds data: the file is written, migrate refuses without --allow-data-loss', async () => {
    declare(`    name: field.string({ maxLength: 120 }),
${TOPIC_FIELD}
    pinned: field.boolean({ default: false }),
    priority: field.integer({ default: 3 }),`);
    await makemigrations();
    const pending = project.migrationFiles().at(-1)!.replace(/\.json$/, '');
    const refused = await project.run(['migrate']);
    expect(refused.code).not.toBe(0);
    expect(refused.output).toContain('--allow-data-loss');
    const plan = await runOk(project, ['migrate', '--plan']);
    expect(plan.stdout, 'the refused file is still pending').toContain(pending);

    const applied = await project.run(['migrate', '--allow-data-loss']);
    expect(applied.code, applied.output).toBe(0);
    expect((await runOk(project, ['migrate', '--plan'])).stdout).not.toContain(pending);
    const rows = await records();
    expect(rows.map((row) => row.name)).toEqual(['first', 'second', 'x'.repeat(100)]);
    expect(rows[0]).not.toHaveProperty('body');
    expect(rows[0]!.topic).toBe(topic.url);
  });

  it('serve refuses to start while the declarations differ from the migrations, naming makemigrations', async () => {
    declare(`    name: field.string({ maxLength: 120 }),
${TOPIC_FIELD}
    pinned: field.boolean({ default: false }),
    priority: field.integer({ default: 3 }),
    mood: field.choice(['glad', 'sad'], { default: 'glad' }),`);
    const result = await project.run(['serve'], {}, 15_000);
    expect(result.code, 'exits by itself, non-zero').not.toBe(0);
    expect(result.code, 'exits by itself, non-zero').not.toBeNull();
    expect(result.output).toContain('restwire makemigrations');
  });
});

describe.each(BACKENDS)('decimal migrations on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  const prices = (amount: string) => `import { defineResource, field } from 'restwire';
export default defineResource({ name: 'prices', fields: { label: field.string({ maxLength: 20 }), amount: ${amount} } });
`;
  const withServer = async <T>(work: (send: (method: string, path: string, body?: Json) => Promise<Json>) => Promise<T>): Promise<T> => {
    const server = await project.start();
    try {
      return await work(async (method, path, body) => {
        const init: RequestInit = { method, headers: { authorization: adminAuth, 'content-type': 'application/json' } };
        const response = await fetch(`${server.url}${path}`, body ? { ...init, body: JSON.stringify(body) } : init);
        expect(response.status, await response.clone().text()).toBeLessThan(300);
        return (await response.json()) as Json;
      });
    } finally {
      await server.stop();
    }
  };
  const amounts = () => withServer(async (send) => ((await send('GET', '/api/v1/prices/?ordering=id&limit=100')).results as Json[]).map((p) => [p.label, p.amount]));

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'prices.ts': prices('field.integer()') });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
  });
  afterAll(async () => {
    await database?.drop();
    project?.cleanup();
  });

  let big: Json;

  it('integer → decimal(15, 2) is refused, with or without --allow-data-loss, while a value has more than 13 digits', async () => {
    big = await withServer(async (send) => {
      await send('POST', '/api/v1/prices/', { label: 'fits', amount: 9_999_999_999_999 });
      await send('POST', '/api/v1/prices/', { label: 'small', amount: -5 });
      return send('POST', '/api/v1/prices/', { label: 'big', amount: 10_000_000_000_000 });
    });
    project.write('prices.ts', prices('field.decimal({ maxDigits: 15, decimalPlaces: 2 })'));
    await runOk(project, ['makemigrations']);
    const pending = project.migrationFiles().at(-1)!;
    for (const args of [['migrate'], ['migrate', '--allow-data-loss']]) {
      const refused = await project.run(args);
      expect(refused.code, refused.output).not.toBe(0);
      expect(refused.output).toContain('prices.amount: 1 values would not fit maxDigits 15 with decimalPlaces 2, no more than 13 digits before the decimal point');
    }
    expect((await runOk(project, ['migrate', '--plan'])).stdout).toContain(pending.replace(/\.json$/, ''));
  });

  it('once every value fits, the same change applies', async () => {
    // Back to the applied declaration to change the value, then the same change again.
    rmSync(join(project.migrationsDir, project.migrationFiles().at(-1)!));
    project.write('prices.ts', prices('field.integer()'));
    await withServer((send) => send('PATCH', big.url as string, { amount: 1 }));
    project.write('prices.ts', prices('field.decimal({ maxDigits: 15, decimalPlaces: 2 })'));
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    expect(await amounts()).toEqual([['fits', '9999999999999.00'], ['small', '-5.00'], ['big', '1.00']]);
  });

  it('narrowing decimalPlaces rounds half away from zero, as migrate says when it asks for --allow-data-loss', async () => {
    await withServer(async (send) => {
      for (const [label, amount] of [['up', '0.25'], ['down', '-0.25'], ['near', '0.24']]) await send('POST', '/api/v1/prices/', { label, amount });
    });
    project.write('prices.ts', prices('field.decimal({ maxDigits: 15, decimalPlaces: 1 })'));
    await runOk(project, ['makemigrations']);
    const refused = await project.run(['migrate']);
    expect(refused.code, refused.output).not.toBe(0);
    expect(refused.output).toContain('narrowing prices.amount from 2 to 1 decimal places would round 3 values half away from zero');
    await runOk(project, ['migrate', '--allow-data-loss']);
    expect(await amounts()).toEqual([['fits', '9999999999999.0'], ['small', '-5.0'], ['big', '1.0'], ['up', '0.3'], ['down', '-0.3'], ['near', '0.2']]);
  });
});

describe('declaration errors', () => {
  let database: TestDatabase;
  const projects: Project[] = [];
  const OK_TAGS = `import { defineResource, field } from 'restwire';
export default defineResource({ name: 'tags', fields: { name: field.string({ maxLength: 20 }) } });
`;
  const widgets = (body: string, name = 'widgets') => `import { defineResource, field } from 'restwire';
const n: number = 10;
export default defineResource({ name: '${name}', fields: { ${body} } });
`;
  const attempt = async (file: string, source: string, command = 'makemigrations') => {
    const project = createProject(database, { 'tags.ts': OK_TAGS, [file]: source });
    projects.push(project);
    const result = await project.run([command], {}, 15_000);
    expect(result.code, result.output).not.toBe(0);
    expect(result.code, 'exits by itself').not.toBeNull();
    expect(result.output).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m);
    expect(project.migrationFiles()).toEqual([]);
    return result.output;
  };

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
  });
  afterAll(async () => {
    for (const project of projects) project.cleanup();
    await database?.drop();
  });

  it('an unknown field option names the file, the collection, the field and the option', async () => {
    const output = await attempt('widgets.ts', widgets("title: field.string({ maxLength: n, colour: 'red' } as any)"));
    for (const part of ['widgets.ts', 'widgets', 'title', 'colour']) expect(output).toContain(part);
  });

  it('a reference to an undeclared collection', async () => {
    const output = await attempt('widgets.ts', widgets("maker: field.reference('ghosts')"), 'migrate');
    for (const part of ['widgets.ts', 'widgets', 'maker', 'ghosts']) expect(output).toContain(part);
  });

  it('an ordering on a missing field', async () => {
    const source = `import { defineResource, field } from 'restwire';
export default defineResource({ name: 'widgets', fields: { title: field.string({ maxLength: 10 }) }, orderings: ['weight'] });
`;
    const output = await attempt('widgets.ts', source, 'serve');
    for (const part of ['widgets.ts', 'widgets', 'weight']) expect(output).toContain(part);
  });

  it('a reserved name and a bad name', async () => {
    const reserved = await attempt('people.ts', widgets('nick: field.string({ maxLength: n })', 'users'));
    for (const part of ['people.ts', 'users', 'reserved']) expect(reserved).toContain(part);
    const bad = await attempt('bad.ts', widgets('nick: field.string({ maxLength: n })', 'Bad-Name'));
    for (const part of ['bad.ts', 'Bad-Name']) expect(bad).toContain(part);
  });

  it('a file with a syntax error: its name and the loader’s message', async () => {
    const output = await attempt('broken.ts', "import { defineResource, field } from 'restwire';\nexport default defineResource({ name: 'broken', fields: { a: field.string({ maxLength: 3 }) }\n");
    expect(output).toContain('broken.ts');
    expect(output).toMatch(/Expected|Unexpected|error/i);
  });
});
