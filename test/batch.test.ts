import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStream } from './support/event-stream.js';
import { createProject, runOk, type Project } from './support/project.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { BACKENDS, adminAuth, createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * REQUESTS.md §4: `POST /api/v1/batch/` runs its requests in order in one transaction, each
 * through the same permissions, validation and events as on its own; one failing stores nothing
 * and raises no event; `$N.url` refers to an earlier request's record.
 */
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const AUTHORS = `import { defineResource, field } from 'restwire';
export default defineResource({ name: 'authors', fields: { name: field.string({ maxLength: 80 }) }, event: 'author' });
`;
const TAGS = `import { defineResource, field } from 'restwire';
export default defineResource({ name: 'tags', fields: { name: field.string({ maxLength: 80 }) } });
`;
const BOOKS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'books',
  fields: {
    title: field.string({ maxLength: 80 }),
    author: field.reference('authors', { onDelete: 'cascade' }),
    tags: field.references('tags', { required: false }),
  },
  event: 'book',
});
`;
const SERVE_ENV = { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: Array(10).fill(1).join(',') };

async function batch(server: RunningServer, requests: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${server.url}/api/v1/batch/`, {
    method: 'POST',
    headers: { authorization: adminAuth, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ requests }),
  });
}

describe.each(BACKENDS)('batch on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  let receiver: Receiver;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'authors.ts': AUTHORS, 'tags.ts': TAGS, 'books.ts': BOOKS });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    server = await project.start({ env: SERVE_ENV });
    receiver = await startReceiver();
    const hook = await fetch(`${server.url}/api/v1/webhooks/`, {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ target_url: receiver.url, events: ['author', 'book'] }),
    });
    expect(hook.status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await receiver?.close();
    await server?.stop();
    project?.cleanup();
    await database?.drop();
  });

  const names = async (collection: string, member = 'name'): Promise<string[]> => {
    const page = (await (await fetch(`${server.url}/api/v1/${collection}/?limit=100`, { headers: { authorization: adminAuth } })).json()) as { results: Json[] };
    return page.results.map((record) => String(record[member]));
  };
  /** The events the receiver got, as `event action name-or-title`. */
  const events = () =>
    receiver.received.map((r) => {
      const body = JSON.parse(r.body) as Json;
      const record = (body.author ?? body.book ?? {}) as Json;
      return `${String(r.headers['x-service-event'])} ${String(body.action)} ${String(record.name ?? record.title)}`;
    });

  it('runs every request in order, with $N.url in a path, a member and a list item; events after the commit', async () => {
    const response = await batch(server, [
      { method: 'POST', path: '/api/v1/authors/', body: { name: 'Ann' } },
      { method: 'POST', path: '/api/v1/tags/', body: { name: 'sea' } },
      { method: 'POST', path: '/api/v1/books/', body: { title: 'Tides', author: '$0.url', tags: ['$1.url'] } },
      { method: 'PATCH', path: '$2.url', body: { title: 'Tides, revised' } },
      { method: 'POST', path: '/api/v1/books/', body: { title: 'Draft', author: '$0.url' } },
      { method: 'DELETE', path: '$4.url' },
    ]);
    expect(response.status).toBe(200);
    const { responses } = (await response.json()) as { responses: Json[] };
    expect(responses.map((answer) => answer.status)).toEqual([201, 201, 201, 200, 201, 204]);
    const [author, tag, book, patched] = responses.map((answer) => answer.body as Json);
    expect(responses[0]!.headers).toEqual({ Location: author!.url });
    expect(book).toMatchObject({ author: author!.url, tags: [tag!.url] });
    expect(patched).toMatchObject({ url: book!.url, title: 'Tides, revised' });
    expect(responses[5]).not.toHaveProperty('body');
    expect(await names('books', 'title')).toEqual(['Tides, revised']);
    const expected = ['author created Ann', 'book created Tides', 'book updated Tides, revised', 'book created Draft', 'book deleted Draft'];
    await receiver.waitFor(() => expected.every((event) => events().includes(event)));
    // One event per change, none twice (the webhook's own ping aside).
    expect(events().filter((event) => !event.startsWith('ping')).sort()).toEqual([...expected].sort());
  });

  it('a request failing in the middle: its status, errors and failed_index; nothing stored, no event', async () => {
    const response = await batch(server, [
      { method: 'POST', path: '/api/v1/authors/', body: { name: 'Ghost' } },
      { method: 'POST', path: '/api/v1/books/', body: { title: '', author: '$0.url' } },
      { method: 'POST', path: '/api/v1/authors/', body: { name: 'Never' } },
    ]);
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const problem = (await response.json()) as Json;
    expect(problem).toMatchObject({ status: 400, failed_index: 1, errors: { title: [expect.any(String)] } });
    expect(problem.responses).toHaveLength(1);
    expect(problem.responses[0]).toMatchObject({ status: 201, body: { name: 'Ghost' } });
    expect(await names('authors')).not.toContain('Ghost');
    // A later change's event arrives, and none of the failed batch's does.
    const marker = await fetch(`${server.url}/api/v1/authors/`, {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Marker' }),
    });
    expect(marker.status).toBe(201);
    await receiver.waitFor(() => events().includes('author created Marker'));
    expect(events().filter((event) => event.includes('Ghost') || event.includes('Never'))).toEqual([]);
  });

  it("a batch's changes reach a stream once committed, in order, with positions of their own; a failed batch's none", async () => {
    const stream = await openStream(`${server.url}/api/v1/authors/`, { authorization: adminAuth });
    try {
      expect(stream.status).toBe(200);
      const failed = await batch(server, [
        { method: 'POST', path: '/api/v1/authors/', body: { name: 'Streamed ghost' } },
        { method: 'POST', path: '/api/v1/books/', body: { title: '', author: '$0.url' } },
      ]);
      expect(failed.status).toBe(400);
      const names = ['Streamed 1', 'Streamed 2', 'Streamed 3'];
      const response = await batch(server, [
        ...names.slice(0, 2).map((name) => ({ method: 'POST', path: '/api/v1/authors/', body: { name } })),
        { method: 'PATCH', path: '$0.url', body: { name: names[2] } },
      ]);
      expect(response.status).toBe(200);
      const messages = await stream.waitFor(3);
      expect(messages.map((m) => [m.event, m.json().record.name])).toEqual([
        ['created', 'Streamed 1'],
        ['created', 'Streamed 2'],
        ['updated', 'Streamed 3'],
      ]);
      const positions = messages.map((m) => Number(m.id));
      // Each its own, growing: the deliveries the webhooks above get are changes too, logged in
      // the same transaction, so the authors' positions need not be consecutive.
      expect(positions[1]).toBeGreaterThan(positions[0]!);
      expect(positions[2]).toBeGreaterThan(positions[1]!);
    } finally {
      stream.close();
    }
  });

  it('a 404 or 412 fails the batch with its status and no errors', async () => {
    const missing = await batch(server, [
      { method: 'POST', path: '/api/v1/authors/', body: { name: 'Before 404' } },
      { method: 'PATCH', path: '/api/v1/authors/999999/', body: { name: 'x' } },
    ]);
    expect(missing.status).toBe(404);
    const problem = (await missing.json()) as Json;
    expect(problem.failed_index).toBe(1);
    expect(problem).not.toHaveProperty('errors');
    const [ann] = ((await (await fetch(`${server.url}/api/v1/authors/?limit=100`, { headers: { authorization: adminAuth } })).json()) as { results: Json[] }).results.filter((a) => a.name === 'Ann');
    const stale = await batch(server, [{ method: 'PATCH', path: ann!.url, headers: { 'If-Match': '"stale"' }, body: { name: 'Ann B.' } }]);
    expect(stale.status).toBe(412);
    expect((await stale.json()) as Json).toMatchObject({ failed_index: 0, responses: [] });
    expect(await names('authors')).not.toContain('Before 404');
    expect(await names('authors')).not.toContain('Ann B.');
  });

  it('$N of a later request, of a DELETE or of no request is a 400 with that request\'s failed_index', async () => {
    const later = await batch(server, [{ method: 'PATCH', path: '$1.url', body: { name: 'x' } }, { method: 'POST', path: '/api/v1/authors/', body: { name: 'y' } }]);
    expect(later.status).toBe(400);
    expect(((await later.json()) as Json).failed_index).toBe(0);
    const deleted = await batch(server, [
      { method: 'POST', path: '/api/v1/authors/', body: { name: 'Gone' } },
      { method: 'DELETE', path: '$0.url' },
      { method: 'POST', path: '/api/v1/books/', body: { title: 't', author: '$1.url' } },
    ]);
    expect(deleted.status).toBe(400);
    expect((await deleted.json()) as Json).toMatchObject({ failed_index: 2, errors: { author: [expect.any(String)] } });
    const none = await batch(server, [{ method: 'POST', path: '/api/v1/books/', body: { title: 't', author: '$7.url' } }]);
    expect(none.status).toBe(400);
    expect(((await none.json()) as Json).failed_index).toBe(0);
    expect(await names('authors')).not.toContain('Gone');
  });

  it("a webhook created in a batch hears the batch's later changes; one deleted in it, none of them", async () => {
    const second = await startReceiver();
    try {
      const created = await batch(server, [
        { method: 'POST', path: '/api/v1/authors/', body: { name: 'Before the hook' } },
        { method: 'POST', path: '/api/v1/webhooks/', body: { target_url: second.url, events: ['author'] } },
        { method: 'POST', path: '/api/v1/authors/', body: { name: 'After the hook' } },
      ]);
      expect(created.status).toBe(200);
      const hook = ((await created.json()) as { responses: Json[] }).responses[1]!.body as Json;
      const heard = () => second.received.map((r) => String(((JSON.parse(r.body) as Json).author as Json | undefined)?.name));
      // The first receiver hears both; it is asked to wait for them, so the second has had its turn too.
      await receiver.waitFor(() => events().includes('author created Before the hook') && events().includes('author created After the hook'));
      await second.waitFor(() => heard().includes('After the hook'));
      expect(heard()).not.toContain('Before the hook');

      const deleted = await batch(server, [
        { method: 'DELETE', path: hook.url },
        { method: 'POST', path: '/api/v1/authors/', body: { name: 'After the delete' } },
      ]);
      expect(deleted.status).toBe(200);
      expect(((await deleted.json()) as { responses: Json[] }).responses.map((answer) => answer.status)).toEqual([204, 201]);
      // A delivery to the deleted webhook would have failed the batch (its foreign key) or reached `second`.
      await receiver.waitFor(() => events().includes('author created After the delete'));
      expect(heard()).not.toContain('After the delete');
    } finally {
      await second.close();
    }
  });

  it('a malformed batch is a 400 without failed_index, nothing done', async () => {
    const create = { method: 'POST', path: '/api/v1/authors/', body: { name: 'Malformed' } };
    const cases: unknown[] = [
      'not a list',
      [],
      Array.from({ length: 101 }, () => create),
      [create, { method: 'GET', path: '/api/v1/authors/' }],
      [create, { ...create, headers: { 'Idempotency-Key': 'inner' } }],
    ];
    for (const requests of cases) {
      const response = await batch(server, requests);
      expect(response.status).toBe(400);
      const problem = (await response.json()) as Json;
      expect(problem).not.toHaveProperty('failed_index');
      expect(problem.errors).toHaveProperty('requests');
    }
    const huge = await batch(server, [{ ...create, body: { name: 'x'.repeat(1024 * 1024) } }]);
    expect(huge.status).toBe(413);
    expect(await names('authors')).not.toContain('Malformed');
  });

  it('replays a batch by its Idempotency-Key', async () => {
    const requests = [{ method: 'POST', path: '/api/v1/authors/', body: { name: 'Keyed' } }];
    const first = await batch(server, requests, { 'Idempotency-Key': 'batch-1' });
    expect(first.status).toBe(200);
    const text = await first.text();
    const again = await batch(server, requests, { 'Idempotency-Key': 'batch-1' });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.text()).toBe(text);
    expect((await names('authors')).filter((name) => name === 'Keyed')).toHaveLength(1);
  });

  it('a keyed batch failing after a write stores nothing of it, and its 400 is replayed, no event', async () => {
    const requests = [
      { method: 'POST', path: '/api/v1/authors/', body: { name: 'Keyed ghost' } },
      { method: 'POST', path: '/api/v1/books/', body: { title: '', author: '$0.url' } },
    ];
    const first = await batch(server, requests, { 'Idempotency-Key': 'batch-failing' });
    expect(first.status).toBe(400);
    const text = await first.text();
    expect(JSON.parse(text)).toMatchObject({ failed_index: 1 });
    const again = await batch(server, requests, { 'Idempotency-Key': 'batch-failing' });
    expect(again.status).toBe(400);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.text()).toBe(text);
    expect(await names('authors')).not.toContain('Keyed ghost');
    const marker = await fetch(`${server.url}/api/v1/authors/`, {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Keyed marker' }),
    });
    expect(marker.status).toBe(201);
    await receiver.waitFor(() => events().includes('author created Keyed marker'));
    expect(events().filter((event) => event.includes('Keyed ghost'))).toEqual([]);
  });
});

describe.each(BACKENDS)('batch rate limits on %s', (backend) => {
  let database: TestDatabase;
  let server: RunningServer;
  beforeAll(async () => {
    database = await createTestDatabase(backend);
    server = await startServer(database, { env: { RATE_LIMIT_USER: '30/hour' } });
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  const creates = (n: number, title: string) => Array.from({ length: n }, () => ({ method: 'POST', path: '/api/v1/experiences/', body: { title, q_like_dislike: 'like' } }));
  const count = async (title: string) =>
    ((await (await fetch(`${server.url}/api/v1/experiences/?limit=100`, { headers: { authorization: adminAuth } })).json()) as { results: Json[] }).results.filter((r) => r.title === title).length;

  it('counts the batch and each request in it; a batch over the remaining limit is refused whole', async () => {
    const ten = await batch(server, creates(10, 'ten'));
    expect(ten.status).toBe(200);
    // 30 − (1 + 10)
    expect(ten.headers.get('x-rate-limit-remaining')).toBe('19');
    const over = await batch(server, creates(25, 'over'));
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
    // Nothing of it was stored; this GET counts too: 19 − 1 (the refused batch) − 1 = 17 left.
    expect(await count('over')).toBe(0);
    const rest = await batch(server, creates(16, 'rest'));
    expect(rest.status).toBe(200);
    expect(rest.headers.get('x-rate-limit-remaining')).toBe('0');
    expect((await batch(server, creates(1, 'none'))).status).toBe(429);
  });
});
