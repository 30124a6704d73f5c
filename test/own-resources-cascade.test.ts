import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { BACKENDS, adminAuth, createTestDatabase, type RunningServer, type TestDatabase } from './support/server.js';

// Deleting a record whose referrers cascade (RESOURCES.md §2, issue 22): every record the
// cascade reaches is deleted, once, and raises its own `deleted` event to each webhook, even
// when a record is reached twice (a reply is a comment of the post and a reply to a comment)
// and when the cascade is large enough to be deleted in batches.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const POSTS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'posts',
  fields: { title: field.string({ maxLength: 80 }) },
  event: 'post',
});
`;
const COMMENTS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'comments',
  fields: {
    body: field.string({ maxLength: 80 }),
    post: field.reference('posts', { onDelete: 'cascade' }),
    reply_to: field.reference('comments', { nullable: true, required: false, onDelete: 'cascade' }),
  },
  event: 'comment',
});
`;

describe.each(BACKENDS)('cascading deletes on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  const hooks: Json[] = [];
  const send = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json', authorization: adminAuth },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: response.status === 204 ? null : ((await response.json()) as Json) };
  };
  const create = async (collection: string, body: Json): Promise<Json> => {
    const { status, body: record } = await send('POST', `/api/v1/${collection}/`, body);
    expect(status, JSON.stringify(record)).toBe(201);
    return record!;
  };
  /** Every delivery a webhook holds (the deliveries log, page by page). */
  const deliveriesOf = async (hook: Json): Promise<Json[]> => {
    const found: Json[] = [];
    let next: string | null = `/api/v1/webhooks/${hook.id}/deliveries/?limit=100`;
    while (next) {
      const page = (await send('GET', next.replace(server.url, ''))).body!;
      found.push(...(page.results as Json[]));
      next = page.next as string | null;
    }
    return found;
  };
  /** The record keys (`<collection>:<id>`) of a webhook's `deleted` deliveries, one per delivery. */
  const deletedKeys = async (hook: Json): Promise<string[]> =>
    (await deliveriesOf(hook)).filter((d) => d.action === 'deleted').map((d) => String(d.record));

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'posts.ts': POSTS, 'comments.ts': COMMENTS });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    // Deliveries stay in the table (no dispatcher), where the test counts them.
    server = await project.start({ env: { WEBHOOK_ALLOW_PRIVATE: 'true', DISPATCHER_IN_SERVE: 'false' } });
    for (const port of [9, 10]) {
      const hook = await send('POST', '/api/v1/webhooks/', { target_url: `http://127.0.0.1:${port}/hook`, events: ['post', 'comment'] });
      expect(hook.status).toBe(201);
      hooks.push(hook.body!);
    }
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    project?.cleanup();
    await database?.drop();
  });

  it('deletes a post with a comment and a reply to it (reached twice), each raising its event', async () => {
    const post = await create('posts', { title: 'Thread' });
    const comment = await create('comments', { body: 'first', post: post.url });
    const reply = await create('comments', { body: 'reply', post: post.url, reply_to: comment.url });
    const deleted = await send('DELETE', post.url);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(204);
    for (const record of [post, comment, reply]) expect((await send('GET', record.url)).status).toBe(404);
    const wanted = [`posts:${post.id}`, `comments:${comment.id}`, `comments:${reply.id}`];
    for (const hook of hooks) expect((await deletedKeys(hook)).filter((key) => wanted.includes(key)).sort()).toEqual([...wanted].sort());
  });

  it('deletes every comment of a post with 1,500 and writes each deletion to each webhook once', { timeout: 300_000 }, async () => {
    const post = await create('posts', { title: 'Busy thread' });
    const comments: Json[] = [];
    let made = 0;
    await Promise.all(Array.from({ length: 6 }, async () => {
      while (made < 1500) {
        const n = made++;
        // Every tenth is a reply to the one before it: reached through the post and its parent.
        const parent = n % 10 === 9 ? comments[comments.length - 1] : undefined;
        comments.push(await create('comments', { body: `c${n}`, post: post.url, ...(parent ? { reply_to: parent.url } : {}) }));
      }
    }));
    const before = new Map<number, number>();
    for (const hook of hooks) before.set(hook.id, (await deletedKeys(hook)).length);
    const deleted = await send('DELETE', post.url);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(204);
    const left = (await send('GET', '/api/v1/comments/?limit=100')).body!.results as Json[];
    expect(left.filter((c) => c.post === post.url)).toEqual([]);
    for (const hook of hooks) {
      const keys = await deletedKeys(hook);
      expect(keys.length - before.get(hook.id)!).toBe(1501);
      const wanted = [`posts:${post.id}`, ...comments.map((c) => `comments:${c.id}`)];
      expect(keys.filter((key) => wanted.includes(key)).sort()).toEqual(wanted.sort());
    }
  });
});
