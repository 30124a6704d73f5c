import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { BACKENDS, adminAuth, createTestDatabase, type RunningServer, type TestDatabase } from './support/server.js';

// Inputs of declared collections the review of issue 22 found answered 500, or stored the wrong
// thing: huge reference lists (item 8), cursors used on another list or over long values (11),
// non-finite json numbers (15), and a required references field left out (17).

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const TAGS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'tags',
  fields: { name: field.string({ maxLength: 50 }), rank: field.string({ maxLength: 20, required: false }) },
  orderings: ['name', 'rank'],
});
`;
const POSTS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'posts',
  fields: {
    title: field.string({ maxLength: 20000 }),
    rank: field.integer({ required: false }),
    data: field.json({ required: false }),
    tags: field.references('tags', { maxItems: 20 }),
    topics: field.references('tags'),
  },
  orderings: ['title', 'rank'],
});
`;
const BUNDLES = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'bundles',
  fields: { label: field.string({ maxLength: 40 }), size: field.integer(), items: field.references('tags', { required: true }) },
});
`;

describe.each(BACKENDS)('inputs of declared collections on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  const api = (path: string, init: RequestInit = {}) => fetch(`${server.url}${path}`, init);
  const sendText = async (method: string, path: string, text: string) => {
    const response = await api(path, { method, headers: { 'content-type': 'application/json', authorization: adminAuth }, body: text });
    return { status: response.status, headers: response.headers, body: (response.status === 204 ? {} : await response.json()) as Json };
  };
  const send = (method: string, path: string, body: unknown) => sendText(method, path, JSON.stringify(body));
  const get = async (path: string) => {
    const response = await api(path);
    return { status: response.status, headers: response.headers, body: (await response.json()) as Json };
  };
  let tag: Json;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'tags.ts': TAGS, 'posts.ts': POSTS, 'bundles.ts': BUNDLES });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    server = await project.start({ env: { DISPATCHER_IN_SERVE: 'false' } });
    tag = (await send('POST', '/api/v1/tags/', { name: 'first', rank: 'a' })).body;
  });
  afterAll(async () => {
    await server?.stop();
    project?.cleanup();
    await database?.drop();
  });

  const manyPaths = (count: number) => Array.from({ length: count }, (_, index) => `/api/v1/tags/${index + 1}/`);

  it('refuses a references list longer than maxItems with a 400, before looking at its items (item 8)', async () => {
    const started = Date.now();
    const refused = await send('POST', '/api/v1/posts/', { title: 'big', tags: manyPaths(40_000) });
    expect(refused.status).toBe(400);
    expect(refused.body.errors).toEqual({ tags: ['Ensure this field has no more than 20 elements.'] });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect((await get('/api/v1/posts/')).body.results).toEqual([]);
  });

  it('bounds a references list without maxItems with a 400, not a 500 (item 8)', async () => {
    const refused = await send('POST', '/api/v1/posts/', { title: 'big', topics: manyPaths(40_000) });
    expect(refused.status).toBe(400);
    expect(refused.body.errors).toEqual({ topics: ['Ensure this field has no more than 1000 elements.'] });
    // Duplicates are still named, once per repeat.
    const twice = await send('POST', '/api/v1/posts/', { title: 'twice', topics: [tag.url, tag.url] });
    expect(twice.status).toBe(400);
    expect(twice.body.errors).toEqual({ topics: [`Duplicate reference ${tag.url}.`] });
  });

  it('refuses a json value with a number beyond a double (1e400) instead of storing null (item 15)', async () => {
    for (const text of ['1e400', '-1e400', '{"a": [1, 2e999]}']) {
      const refused = await sendText('POST', '/api/v1/posts/', `{"title": "inf", "data": ${text}}`);
      expect(refused.status, text).toBe(400);
      expect(refused.body.errors).toEqual({ data: ['Value must be valid JSON: a number is out of range (it must be finite).'] });
    }
    const kept = await sendText('POST', '/api/v1/posts/', '{"title": "finite", "data": {"a": [1e300, -0.5]}}');
    expect(kept.status).toBe(201);
    expect(kept.body.data).toEqual({ a: [1e300, -0.5] });
    expect((await send('DELETE', kept.body.url, undefined)).status).toBe(204);
  });

  it('reports a required references field left out of a POST or PUT, with the other fields (item 17)', async () => {
    const created = await send('POST', '/api/v1/bundles/', {});
    expect(created.status).toBe(400);
    expect(created.body.errors).toEqual({
      label: ['This field is required.'],
      size: ['This field is required.'],
      items: ['This field is required.'],
    });
    const bundle = await send('POST', '/api/v1/bundles/', { label: 'one', size: 1, items: [tag.url] });
    expect(bundle.status).toBe(201);
    const put = await send('PUT', bundle.body.url, { label: 'two' });
    expect(put.status).toBe(400);
    expect(put.body.errors).toEqual({ size: ['This field is required.'], items: ['This field is required.'] });
    // PATCH may leave it out.
    expect((await send('PATCH', bundle.body.url, { label: 'two' })).status).toBe(200);
  });

  it('answers "Invalid cursor" for a cursor of another collection (item 11)', async () => {
    for (const name of ['b', 'c']) expect((await send('POST', '/api/v1/tags/', { name, rank: name })).status).toBe(201);
    for (const rank of [1, 2]) expect((await send('POST', '/api/v1/posts/', { title: `p${rank}`, rank })).status).toBe(201);
    const page = await get('/api/v1/tags/?ordering=rank&limit=1');
    const cursor = new URL(page.body.next as string, server.url).searchParams.get('cursor')!;
    // Same ordering name, another column type: PostgreSQL failed comparing text to bigint (500);
    // SQLite answered an empty page.
    const misused = await get(`/api/v1/posts/?ordering=rank&limit=1&cursor=${encodeURIComponent(cursor)}`);
    expect(misused.status).toBe(400);
    expect(misused.body.errors).toEqual({ cursor: ['Invalid cursor.'] });
    // On its own list it still works.
    const second = await get(`/api/v1/tags/?ordering=rank&limit=1&cursor=${encodeURIComponent(cursor)}`);
    expect(second.status).toBe(200);
    expect(second.body.results).toHaveLength(1);
  });

  it('keeps cursors short over long ordering values, walking every record once both ways (item 11)', async () => {
    // Titles of 15,000 characters that share their first 14,990 and sort differently from their ids.
    const stem = 'x'.repeat(14_990);
    const suffixes = ['j', 'b', 'h', 'a', 'f', 'd', 'b', 'i', 'c', 'e'];
    const titles = new Map<number, string>();
    for (const [index, suffix] of suffixes.entries()) {
      // Two share a whole title ('b'): the id breaks the tie.
      const title = `${stem}${suffix}${suffix === 'b' ? '' : String(index).padStart(9, '0')}`;
      const created = await send('POST', '/api/v1/posts/', { title });
      expect(created.status).toBe(201);
      titles.set(created.body.id as number, title);
    }
    const expected = [...titles.keys()].sort((a, b) => {
      const [ta, tb] = [titles.get(a)!, titles.get(b)!];
      return ta < tb ? -1 : ta > tb ? 1 : a - b;
    });
    const walk = async (first: string, rel: 'next' | 'previous') => {
      const seen: number[] = [];
      let path: string | null = first;
      while (path) {
        const page = await get(path);
        expect(page.status, path).toBe(200);
        expect((page.headers.get('link') ?? '').length).toBeLessThan(4_096);
        const longOnes = (page.body.results as Json[]).filter((post) => String(post.title).startsWith(stem));
        seen.push(...(rel === 'next' ? longOnes.map((post) => post.id as number) : longOnes.map((post) => post.id as number).reverse()));
        path = page.body[rel] as string | null;
      }
      return seen;
    };
    expect(await walk('/api/v1/posts/?ordering=title&limit=3', 'next')).toEqual(expected);
    expect(await walk('/api/v1/posts/?ordering=-title&limit=3', 'next')).toEqual([...expected].reverse());
    // Walking back from the last page.
    let last = '/api/v1/posts/?ordering=title&limit=3';
    for (let page = await get(last); page.body.next; page = await get(last)) last = page.body.next as string;
    const back = await walk(last, 'previous');
    expect(back.reverse()).toEqual(expected);

    // The record a cursor stands at is deleted before the cursor is used: nothing after it is skipped.
    const firstPage = await get('/api/v1/posts/?ordering=title&limit=3');
    const shown = (firstPage.body.results as Json[]).map((post) => post.id as number);
    expect((await send('DELETE', `/api/v1/posts/${shown[2]}/`, undefined)).status).toBe(204);
    const rest = await walk(firstPage.body.next as string, 'next');
    const remaining = expected.filter((id) => !shown.includes(id));
    expect(rest.filter((id) => !shown.includes(id))).toEqual(remaining);
  });
});
