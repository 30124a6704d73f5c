import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, adminAuth, createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';
import { startReceiver, type Receiver } from './support/receiver.js';

/** `restwire serve --workers 2`: one service on one port, one rate limit, webhooks delivered. */
describe.each(BACKENDS)('serve --workers 2 on %s', (backend) => {
  let database: TestDatabase;
  let server: RunningServer;
  let receiver: Receiver;
  beforeAll(async () => {
    database = await createTestDatabase(backend);
    receiver = await startReceiver();
    server = await startServer(database, {
      args: ['serve', '--workers', '2'],
      env: { RATE_LIMIT_ANON: '10/minute', WEBHOOK_ALLOW_PRIVATE: 'true' },
    });
  });
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await receiver?.close();
    await database?.drop();
  });

  it('enforces one anonymous limit across the workers', async () => {
    const statuses = await Promise.all(Array.from({ length: 30 }, () => fetch(`${server.url}/api/v1/experiences/`).then((r) => r.status)));
    expect(statuses.filter((s) => s === 200)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(20);
  });

  it('delivers the webhooks of changes made in any worker', async () => {
    const hook = await fetch(`${server.url}/api/v1/webhooks/`, {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ target_url: receiver.url, events: ['experience'] }),
    });
    expect(hook.status).toBe(201);
    for (let i = 0; i < 10; i++) {
      const created = await fetch(`${server.url}/api/v1/experiences/`, {
        method: 'POST',
        headers: { authorization: adminAuth, 'content-type': 'application/json' },
        body: JSON.stringify({ title: `clustered ${i}`, q_like_dislike: 'like' }),
      });
      expect(created.status).toBe(201);
    }
    const events = (await receiver.waitFor((list) => list.filter((r) => r.headers['x-service-event'] === 'experience').length >= 10)).filter(
      (r) => r.headers['x-service-event'] === 'experience',
    );
    expect(new Set(events.map((r) => r.headers['x-service-delivery'])).size).toBe(10);
  });

  it('stops every process and exits 0 on SIGTERM', async () => {
    expect(await server.stop('SIGTERM')).toBe(0);
  });
});
