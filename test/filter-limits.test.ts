import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, type RunningServer, type TestDatabase } from './support/server.js';

// Issue 22, items 1 and 8: what a filter may cost. A list's filters and a webhook's `filter`
// share one language; a filter too large to run, or holding a NUL, is a 400, and a webhook's
// filter (run inside every write to its collection, whoever writes) never fails or stalls
// another user's write, even one stored before these limits existed.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const SCORES = `import { defineResource, field } from 'restwire';

export default defineResource({
  name: 'scores',
  fields: {
    title: field.string({ maxLength: 200 }),
    score: field.integer({ min: 0, max: 1000000 }),
  },
  owner: true,
  filters: { title: ['exact'], score: ['exact', 'in'] },
  search: ['title'],
  event: 'score',
});
`;

const values = (n: number) => Array.from({ length: n }, (_, i) => i + 1).join(',');

describe.each(BACKENDS)('filter limits on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  let receiver: Receiver;
  const bob = basic('bob', 'bob-password-1');

  const call = async (method: string, path: string, body?: unknown, auth: string | null = adminAuth) => {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: { accept: 'application/json', ...(auth ? { authorization: auth } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, type: response.headers.get('content-type') ?? '', body: (text ? JSON.parse(text) : {}) as Json };
  };
  const newHook = (filter: unknown) => call('POST', '/api/v1/webhooks/', { target_url: receiver.url, events: ['score'], filter });

  /** Writes a webhook's stored `filter` column directly: a filter stored before the limits existed. */
  async function storeFilter(id: number, filter: Record<string, string>): Promise<void> {
    const text = JSON.stringify(filter);
    if (backend === 'sqlite') {
      const db = new SQLite(join(database.env.DATA_DIR!, 'restwire.sqlite3'));
      db.pragma('busy_timeout = 10000');
      db.prepare('update webhooks set filter = ? where id = ?').run(text, id);
      db.close();
      return;
    }
    const client = new pg.Client({ connectionString: database.url! });
    await client.connect();
    await client.query('update webhooks set filter = $1 where id = $2', [text, id]);
    await client.end();
  }

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'scores.ts': SCORES });
    await runOk(project, ['makemigrations']);
    receiver = await startReceiver();
    server = await project.start({ env: { WEBHOOK_ALLOW_PRIVATE: 'true', LOG_LEVEL: 'warn' }, ready: /listening at (http:\/\/127\.0\.0\.1:\d+)/ });
    await createUser(database, 'bob', 'bob-password-1');
  });
  afterAll(async () => {
    await receiver?.close();
    await server?.stop();
    await database?.drop();
    project?.cleanup();
  });

  it('a list refuses `__in` with 1,100 values: 400 problem+json naming the limit', async () => {
    const response = await call('GET', `/api/v1/scores/?score__in=${values(1100)}`);
    expect(response.status).toBe(400);
    expect(response.type).toContain('application/problem+json');
    expect(response.body.errors.score__in[0]).toMatch(/at most 100 values/);
    // At the limit, the list answers.
    expect((await call('GET', `/api/v1/scores/?score__in=${values(100)}`)).status).toBe(200);
  });

  it('a list refuses a NUL in any filter value, anonymous or not: 400', async () => {
    for (const query of ['search=%00', 'title=a%00b', 'score__in=1,%00']) {
      const response = await call('GET', `/api/v1/scores/?${query}`, undefined, null);
      expect(response.status, query).toBe(400);
      expect(response.type).toContain('application/problem+json');
      expect(JSON.stringify(response.body.errors), query).toMatch(/NUL/);
    }
  });

  it('a webhook filter too large to run, or holding a NUL, is refused 400 and not stored', async () => {
    const refused = [
      { score: `score__in=${values(1001)}`, expect: /at most 100 values/ },
      { score: 'search=%00', expect: /NUL/ },
      { score: Array.from({ length: 40_000 }, (_, i) => `search=t${i}`).join('&'), expect: /at most 20 parameters/ },
    ];
    for (const filter of refused) {
      const response = await newHook({ score: filter.score });
      expect(response.status).toBe(400);
      expect(response.type).toContain('application/problem+json');
      expect(response.body.errors.filter.join(' ')).toMatch(filter.expect);
    }
    const hooks = await call('GET', '/api/v1/webhooks/?limit=100');
    expect(hooks.body.results).toEqual([]);
    // Two `__in` of 60: 120 values in all.
    const together = await newHook({ score: `score__in=${values(60)}&score__in=${values(60)}` });
    expect(together.status).toBe(400);
    expect(together.body.errors.filter.join(' ')).toMatch(/at most 100 values in all/);
    // At the limits, a filter is accepted: 20 parameters, 100 values.
    const atLimit = await newHook({ score: [`score__in=${values(81)}`, ...Array.from({ length: 19 }, (_, i) => `search=t${i}`)].join('&') });
    expect(atLimit.status, JSON.stringify(atLimit.body)).toBe(201);
    expect((await call('DELETE', `/api/v1/webhooks/${atLimit.body.id}/`)).status).toBe(204);
  });

  it("another user's writes succeed, and a sound filter still hears of them, with hostile filters stored", async () => {
    const hostile = [
      { score: `score__in=${values(1001)}` },
      { score: 'search=\u0000' },
      { score: Array.from({ length: 40_000 }, (_, i) => `search=t${i}`).join('&') },
    ];
    for (const filter of hostile) {
      const created = await newHook({ score: 'score=1' });
      expect(created.status).toBe(201);
      await storeFilter(created.body.id as number, filter);
    }
    const sound = await newHook({ score: 'score=5' });
    expect(sound.status).toBe(201);

    const created = await call('POST', '/api/v1/scores/', { title: 'bob', score: 5 }, bob);
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const updated = await call('PATCH', `/api/v1/scores/${created.body.id}/`, { title: 'bob again' }, bob);
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    const deleted = await call('DELETE', `/api/v1/scores/${created.body.id}/`, undefined, bob);
    expect(deleted.status).toBe(204);

    const actions = (list: typeof receiver.received) =>
      list.filter((r) => r.headers['x-service-event'] === 'score').map((r) => (JSON.parse(r.body) as Json).action as string);
    await receiver.waitFor((list) => actions(list).length >= 3);
    expect(actions(receiver.received).sort()).toEqual(['created', 'deleted', 'updated']);
  });
});
