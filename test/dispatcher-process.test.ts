import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from './support/receiver.js';
import { BACKENDS, adminAuth, createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * `serve` delivers from a child process of its own (issue 21 item 1, cli/dispatcher-process.ts):
 * SIGTERM waits for the attempt in flight and records it; a dispatcher process that dies is
 * replaced and delivery goes on; a serve killed with -9 leaves no dispatcher process behind;
 * /metrics shows the dispatcher's series.
 */
const SERVE_ENV = { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: Array(30).fill(1).join(','), LOG_LEVEL: 'info' };
const STARTED = /"dispatcherPid":(\d+),"msg":"dispatcher process delivering webhooks"/g;

async function until<T>(check: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The pids of the dispatcher processes the server reported starting, in order. */
const dispatcherPids = (server: RunningServer) => [...server.output().matchAll(STARTED)].map((match) => Number(match[1]));

/** Whether a process is running (not gone, not a zombie waiting to be reaped). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

async function api(server: RunningServer, method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: adminAuth, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

const events = (receiver: Receiver) => receiver.received.filter((r) => r.headers['x-service-event'] === 'experience');
const titles = (receiver: Receiver) => events(receiver).map((r) => (JSON.parse(r.body) as { experience: { title: string } }).experience.title);

describe.each(BACKENDS)("serve's dispatcher process on %s", (backend) => {
  let database: TestDatabase;
  let server: RunningServer | undefined;
  let receiver: Receiver | undefined;
  let slow: Server | undefined;
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await receiver?.close();
    slow?.closeAllConnections();
    await new Promise((resolve) => (slow ? slow.close(resolve) : resolve(undefined)));
    await database?.drop();
  });

  it('is replaced when it dies, shows its metrics, and leaves with a serve killed -9', async () => {
    database = await createTestDatabase(backend);
    receiver = await startReceiver();
    server = await startServer(database, { env: SERVE_ENV });
    const first = await until(() => dispatcherPids(server!)[0], 'the dispatcher process started');
    expect(first).not.toBe(server.process.pid);
    const hook = await api(server, 'POST', '/api/v1/webhooks/', { target_url: receiver.url, events: ['experience'] });
    expect(hook.status).toBe(201);
    expect((await api(server, 'POST', '/api/v1/experiences/', { title: 'before', q_like_dislike: 'like' })).status).toBe(201);
    await receiver.waitFor(() => events(receiver!).length === 1, 30_000);

    // The dispatcher's own series, from the child, beside the API process's.
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/^restwire_webhook_attempts_total\{outcome="success"\} [1-9]/m);
    expect(metrics).toMatch(/^restwire_webhook_queue_depth \d+$/m);
    expect(metrics).toMatch(/^restwire_http_requests_total\{/m);

    process.kill(first, 'SIGKILL');
    const second = await until(() => dispatcherPids(server!)[1], 'another dispatcher process started');
    expect(server.output()).toContain('the dispatcher process exited; starting another');
    expect((await api(server, 'POST', '/api/v1/experiences/', { title: 'after', q_like_dislike: 'like' })).status).toBe(201);
    // Delivery goes on in the new process. (It may send "before" again: killed before it had
    // recorded that attempt, the first process's lease is taken back. At least once, API.md §6.)
    await receiver.waitFor(() => titles(receiver!).includes('after'), 30_000);

    server.process.kill('SIGKILL');
    await server.stop('SIGKILL');
    await until(() => !running(second), 'the dispatcher process exited with serve', 10_000);
  }, 120_000);

  it('on SIGTERM waits for the delivery in flight, records it, then exits 0 (API.md §5)', async () => {
    // A receiver that answers an event 1.5 s after it arrives (pings at once).
    const arrived: number[] = [];
    let answeredAt: number | null = null;
    slow = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        if (request.headers['x-service-event'] !== 'experience') return void response.writeHead(204).end();
        arrived.push(Date.now());
        setTimeout(() => {
          answeredAt = Date.now();
          response.writeHead(204).end();
        }, 1500);
      });
    });
    await new Promise<void>((resolve) => slow!.listen(0, '127.0.0.1', resolve));
    const port = (slow.address() as { port: number }).port;
    server = await startServer(database, { env: SERVE_ENV });
    const hook = await api(server, 'POST', '/api/v1/webhooks/', { target_url: `http://127.0.0.1:${port}/hook`, events: ['experience'] });
    expect(hook.status).toBe(201);
    expect((await api(server, 'POST', '/api/v1/experiences/', { title: 'in flight at SIGTERM', q_like_dislike: 'like' })).status).toBe(201);
    await until(() => arrived.length === 1, 'the delivery arrived');

    expect(await server.stop('SIGTERM')).toBe(0);
    // serve exited only after the receiver had answered…
    expect(answeredAt).not.toBeNull();
    // …and the attempt was recorded: a server that delivers nothing shows it delivered, once.
    server = await startServer(database, { env: { ...SERVE_ENV, DISPATCHER_IN_SERVE: 'false' } });
    const log = await api(server, 'GET', `/api/v1/webhooks/${String(hook.body.id)}/deliveries/`);
    const results = log.body.results as Array<{ event: string; status: string; attempts: number }>;
    expect(results.find((delivery) => delivery.event === 'experience')).toMatchObject({ status: 'delivered', attempts: 1 });
    expect(arrived).toHaveLength(1);
    // No dispatcher process when DISPATCHER_IN_SERVE=false.
    expect(dispatcherPids(server)).toEqual([]);
  }, 120_000);
});
