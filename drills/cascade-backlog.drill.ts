import Sqlite from 'better-sqlite3';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from '../test/support/project.js';
import { adminAuth, basic, createTestDatabase, createUser, type RunningServer, type TestDatabase } from '../test/support/server.js';
import { createWebhook, jsonRequest, percentile, report, sleep, tearDown, until } from './support.js';

/**
 * Drill 8 (issue 22): deleting a post with 10,000 comments cascades to 10,001 `deleted` events
 * for 20 webhooks (200,020 deliveries). The delete must not stall the server, and while its
 * backlog drains another user's reads and deliveries must stay quick (their owner is at their
 * share, so the claim query leaves the backlog's webhooks out).
 */
const CHILDREN = 10_000;
const HOOKS = 20;
const DRAIN_WINDOW_MS = 20_000;
const ENV = { WEBHOOK_ALLOW_PRIVATE: 'true', LOG_LEVEL: 'warn' };
const POSTS = `import { defineResource, field } from 'restwire';
export default defineResource({ name: 'posts', fields: { title: field.string({ maxLength: 80 }) }, event: 'post' });
`;
const COMMENTS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'comments',
  fields: {
    body: field.string({ maxLength: 80 }),
    post: field.reference('posts', { onDelete: 'cascade' }),
    reply_to: field.reference('comments', { nullable: true, required: false, onDelete: 'cascade' }),
  },
  // Filters index their columns. Without an index on reply_to_id each deleted comment's
  // foreign-key check scans the whole table (SQLite and PostgreSQL alike): 14 s here (issue 22).
  filters: { post: ['exact'], reply_to: ['exact'] },
  event: 'comment',
});
`;

describe('a cascade of 10,000 deletions to 20 webhooks', () => {
  let database: TestDatabase;
  let project: Project | undefined;
  let server: RunningServer | undefined;
  let receiver: Server | undefined;
  afterAll(async () => {
    await tearDown({ server, receiver, database });
    project?.cleanup();
  });

  it('deletes without stalling the server and drains without slowing another user', { timeout: 900_000 }, async () => {
    const drillStarted = Date.now();
    database = await createTestDatabase('sqlite');
    let backlogReceived = 0;
    /** When each of carol's posts reached her webhook. */
    const carolArrivals = new Map<number, number>();
    receiver = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        if (request.url === '/carol' && request.headers['x-service-event'] === 'post') {
          const { post } = JSON.parse(Buffer.concat(chunks).toString()) as { post: { id: number } };
          carolArrivals.set(post.id, performance.now());
        } else if (request.headers['x-service-event'] === 'comment') {
          backlogReceived++;
        }
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver!.listen(0, '127.0.0.1', resolve));
    const port = (receiver.address() as { port: number }).port;

    project = createProject(database, { 'posts.ts': POSTS, 'comments.ts': COMMENTS });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    server = await project.start({ env: ENV, ready: /listening at (http:\/\/127\.0\.0\.1:\d+)/ });
    const api = server.url;
    await createUser(database, 'carol', 'carol-password-1');
    const carol = basic('carol', 'carol-password-1');
    for (let i = 0; i < HOOKS; i++) await createWebhook(server, `http://127.0.0.1:${port}/a${i}`, adminAuth, ['post', 'comment']);
    await createWebhook(server, `http://127.0.0.1:${port}/carol`, carol, ['post']);
    const posted = await fetch(`${api}/api/v1/posts/`, jsonRequest('POST', { title: 'Busy thread' }));
    expect(posted.status).toBe(201);
    const post = (await posted.json()) as { id: number; url: string };

    // The comments are written straight into the table: their creation is not what is measured.
    const file = new Sqlite(join(database.env.DATA_DIR!, 'restwire.sqlite3'));
    const now = Date.now();
    const insert = file.prepare('insert into comments (body, post_id, reply_to_id, created_at, updated_at) values (?, ?, ?, ?, ?)');
    file.transaction(() => {
      let previous: number | null = null;
      for (let n = 0; n < CHILDREN; n++) {
        // Every tenth is a reply to the one before: reached through the post and through its parent.
        const id = Number(insert.run(`c${n}`, post.id, n % 10 === 9 ? previous : null, now, now).lastInsertRowid);
        previous = id;
      }
    })();

    /** Carol reads a page of posts; the time it took. */
    const carolGet = async (): Promise<number> => {
      const started = performance.now();
      const response = await fetch(`${api}/api/v1/posts/?limit=20`, { headers: { authorization: carol } });
      expect(response.status).toBe(200);
      await response.arrayBuffer();
      return performance.now() - started;
    };
    /** Carol writes a post; how long until it reached her webhook. */
    const carolDelivery = async (title: string): Promise<number> => {
      const response = await fetch(`${api}/api/v1/posts/`, jsonRequest('POST', { title }, carol));
      expect(response.status).toBe(201);
      const { id } = (await response.json()) as { id: number };
      const answered = performance.now();
      await until(() => carolArrivals.has(id), 60_000, `carol's post ${id} was not delivered`);
      return carolArrivals.get(id)! - answered;
    };
    const idleGets: number[] = [];
    for (let i = 0; i < 40; i++) idleGets.push(await carolGet());
    const idleDeliveries: number[] = [];
    for (let i = 0; i < 5; i++) idleDeliveries.push(await carolDelivery(`idle ${i}`));

    // The delete, with carol reading all the while.
    let deleting = true;
    const getsDuringDelete: number[] = [];
    const reader = (async () => {
      while (deleting) {
        getsDuringDelete.push(await carolGet());
        await sleep(20);
      }
    })();
    const started = performance.now();
    const deleted = await fetch(`${api}${post.url}`, { method: 'DELETE', headers: { authorization: adminAuth } });
    const deleteMs = performance.now() - started;
    deleting = false;
    await reader;
    expect(deleted.status).toBe(204);

    // Every comment deleted, every deletion written to every webhook, once.
    const counts = file.prepare(`select (select count(*) from comments) as comments,
      (select count(*) from deliveries where action = 'deleted' and record_key like 'comments:%') as deliveries,
      (select count(distinct webhook_id || ' ' || record_key) from deliveries where action = 'deleted' and record_key like 'comments:%') as distinct_deliveries`).get() as Record<string, number>;
    expect(counts).toEqual({ comments: 0, deliveries: CHILDREN * HOOKS, distinct_deliveries: CHILDREN * HOOKS });

    // The drain: carol reads and writes while the backlog goes out.
    const drainStarted = performance.now();
    const receivedAtStart = backlogReceived;
    const drainGets: number[] = [];
    const drainDeliveries: number[] = [];
    await Promise.all([
      (async () => {
        while (performance.now() - drainStarted < DRAIN_WINDOW_MS) drainGets.push(await carolGet());
      })(),
      (async () => {
        for (let i = 0; performance.now() - drainStarted < DRAIN_WINDOW_MS; i++) {
          drainDeliveries.push(await carolDelivery(`during ${i}`));
          await sleep(250);
        }
      })(),
    ]);
    const drainSeconds = (performance.now() - drainStarted) / 1000;
    const leftWaiting = (file.prepare(`select count(*) as n from deliveries where status in ('pending', 'retrying')`).get() as { n: number }).n;
    file.close();

    const ms = (value: number) => Math.round(value * 10) / 10;
    const figures = {
      children: CHILDREN,
      webhooks: HOOKS,
      deliveriesWritten: counts.deliveries,
      deleteMs: Math.round(deleteMs),
      otherGetsDuringDelete: getsDuringDelete.length,
      otherGetMaxDuringDeleteMs: ms(Math.max(...getsDuringDelete)),
      otherGetP50IdleMs: ms(percentile(idleGets, 0.5)),
      otherGetP50DrainMs: ms(percentile(drainGets, 0.5)),
      otherGetP99DrainMs: ms(percentile(drainGets, 0.99)),
      otherDeliveryP50IdleMs: ms(percentile(idleDeliveries, 0.5)),
      otherDeliveryP50DrainMs: ms(percentile(drainDeliveries, 0.5)),
      otherDeliveryMaxDrainMs: ms(Math.max(...drainDeliveries)),
      drainDeliveriesPerSecond: Math.round((backlogReceived - receivedAtStart) / drainSeconds),
      leftWaitingAfterWindow: leftWaiting,
      seconds: Math.round((Date.now() - drillStarted) / 1000),
    };
    report('cascade-backlog', figures);
    // Generous bounds for a shared machine. Before issue 22 here: the delete 18.8 s, carol's GET
    // p50 213 ms and delivery p50 390 ms while the backlog drained (docs/RELIABILITY.md).
    expect(deleteMs).toBeLessThan(30_000);
    expect(percentile(drainGets, 0.5)).toBeLessThan(100);
    expect(percentile(drainDeliveries, 0.5)).toBeLessThan(250);
  });
});
