import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { adminAuth, basic, createTestDatabase, createUser, startServer, type RunningServer, type TestDatabase } from '../test/support/server.js';
import { createWebhook, jsonRequest, listAll, percentile, report, sampleRss, sleep, until } from './support.js';

/**
 * Drill 4 (issue 11): six hostile receivers on 127.0.0.1 (never answers, trickles a byte a
 * second, answers 2 GiB, redirects to a private address, 429 with Retry-After, 503 with
 * Retry-After: 0) beside two healthy webhooks of two users. None delays the healthy ones,
 * the server's memory stays bounded, and the deliveries log records each outcome.
 * Redirects point at 10.0.0.1 and at a 127.0.0.1 canary: they must never be followed.
 */
const TIMEOUT_S = 3;
const WRITES = 60;
const GiB2 = 2 * 1024 ** 3;

interface Delivery {
  id: number;
  guid: string;
  status: string;
  status_code: number | null;
  attempts: number;
}

describe('hostile receivers', () => {
  let database: TestDatabase;
  let server: RunningServer | undefined;
  const listeners: Server[] = [];
  afterAll(async () => {
    await server?.stop('SIGKILL');
    for (const listener of listeners) {
      listener.closeAllConnections();
      listener.close();
    }
    await database?.drop();
  });

  async function listen(handler: (request: IncomingMessage, response: ServerResponse, body: string) => void): Promise<number> {
    const listener = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => handler(request, response, Buffer.concat(chunks).toString()));
    });
    listeners.push(listener);
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    return (listener.address() as { port: number }).port;
  }

  it('keeps healthy webhooks on time, memory bounded, and records every outcome', async () => {
    const drillStarted = Date.now();
    database = await createTestDatabase('sqlite');
    server = await startServer(database, {
      env: { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_TIMEOUT_SECONDS: String(TIMEOUT_S), WEBHOOK_RETRY_SCHEDULE: '2,5,5,5,5,5,5,5' },
    });
    const running = server;
    await createUser(database, 'bob', 'bob-password-1');
    const bob = basic('bob', 'bob-password-1');

    // Healthy receivers: when each experience's event arrived.
    const arrivals = { admin: new Map<number, number>(), bob: new Map<number, number>() };
    const healthyPort = await listen((request, response, body) => {
      if (request.headers['x-service-event'] === 'experience') {
        const { experience } = JSON.parse(body) as { experience: { id: number } };
        const seen = request.url === '/bob' ? arrivals.bob : arrivals.admin;
        if (!seen.has(experience.id)) seen.set(experience.id, Date.now());
      }
      response.writeHead(204).end();
    });
    let canaryHits = 0;
    const canaryPort = await listen((_request, response) => {
      canaryHits++;
      response.writeHead(204).end();
    });
    const attemptsAt = new Map<string, number[]>(); // `${path} ${guid}` → attempt times
    let hugeBytes = 0;
    let hugeRequests = 0;
    let maxHugeBytes = 0;
    const hostilePort = await listen((request, response) => {
      const key = `${request.url} ${String(request.headers['x-service-delivery'])}`;
      const times = attemptsAt.get(key) ?? [];
      times.push(Date.now());
      attemptsAt.set(key, times);
      switch (request.url) {
        case '/never':
          return; // never answers
        case '/trickle': {
          response.writeHead(200, { 'content-type': 'text/plain', 'content-length': '1000' });
          const timer = setInterval(() => response.write('x'), 1_000);
          response.on('close', () => clearInterval(timer));
          return;
        }
        case '/huge': {
          // 2 GiB announced and produced on demand, never held: written while the socket takes it.
          hugeRequests++;
          let sent = 0;
          const chunk = Buffer.alloc(64 * 1024, 'h');
          response.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(GiB2) });
          const pump = () => {
            while (sent < GiB2 && !response.destroyed) {
              sent += chunk.length;
              hugeBytes += chunk.length;
              maxHugeBytes = Math.max(maxHugeBytes, sent);
              if (!response.write(chunk)) return void response.once('drain', pump);
            }
            if (!response.destroyed) response.end();
          };
          response.on('close', () => undefined);
          pump();
          return;
        }
        case '/redirect-private':
          return void response.writeHead(302, { location: 'http://10.0.0.1/hook' }).end();
        case '/redirect-loopback':
          return void response.writeHead(307, { location: `http://127.0.0.1:${canaryPort}/stolen` }).end();
        case '/429':
          return void (times.length === 1 ? response.writeHead(429, { 'retry-after': '4' }).end() : response.writeHead(204).end());
        case '/503':
          return void (times.length === 1 ? response.writeHead(503, { 'retry-after': '0' }).end() : response.writeHead(204).end());
        default:
          response.writeHead(404).end();
      }
    });

    const rss = sampleRss(running.process.pid!);
    await createWebhook(running, `http://127.0.0.1:${healthyPort}/admin`, adminAuth, ['experience']);
    await createWebhook(running, `http://127.0.0.1:${healthyPort}/bob`, bob, ['experience']);

    /** Writes at a steady pace, alternating users; returns each healthy latency (write → arrival). */
    const writeAndMeasure = async (writes: number) => {
      const sentAt = new Map<number, number>();
      for (let i = 0; i < writes; i++) {
        const started = Date.now();
        const response = await fetch(`${running.url}/api/v1/experiences/`, jsonRequest('POST', { title: `w ${i}`, q_like_dislike: 'like' }, i % 2 ? bob : adminAuth));
        expect(response.status).toBe(201);
        sentAt.set(((await response.json()) as { id: number }).id, started);
        await sleep(150);
      }
      await until(() => [...sentAt.keys()].every((id) => arrivals.admin.has(id) && arrivals.bob.has(id)), 30_000, 'healthy deliveries missing');
      return [...sentAt].flatMap(([id, at]) => [arrivals.admin.get(id)! - at, arrivals.bob.get(id)! - at]);
    };

    const baseline = await writeAndMeasure(20);
    const hostile: Record<string, number> = {};
    for (const path of ['/never', '/trickle', '/huge', '/redirect-private', '/redirect-loopback', '/429', '/503']) {
      hostile[path] = await createWebhook(running, `http://127.0.0.1:${hostilePort}${path}`, adminAuth, ['*']);
    }
    const stormStarted = Date.now();
    const storm = await writeAndMeasure(WRITES);
    const stormMs = Date.now() - stormStarted;
    // Let the 429 and 503 retries come due (Retry-After 4 s; the schedule's 2 s ± 20 %).
    await sleep(6_000);
    const memory = rss.stop();

    const log = async (path: string) => listAll<Delivery>(running, `/api/v1/webhooks/${hostile[path]}/deliveries/`);
    const hook = async (path: string) =>
      ((await (await fetch(`${running.url}/api/v1/webhooks/${hostile[path]}/`, { headers: { authorization: adminAuth } })).json()) as {
        last_response: { code: number | null; message: string };
      }).last_response;
    const outcomes: Record<string, unknown> = {};
    for (const path of Object.keys(hostile)) {
      const deliveries = await log(path);
      const byStatus: Record<string, number> = {};
      for (const d of deliveries) byStatus[d.status] = (byStatus[d.status] ?? 0) + 1;
      outcomes[path] = { deliveries: deliveries.length, ...byStatus, lastResponse: (await hook(path)).message };
    }

    // Never answers, trickles: timed out, never delivered, no status code held against them.
    for (const path of ['/never', '/trickle']) {
      const deliveries = await log(path);
      expect(deliveries.some((d) => d.status === 'delivered')).toBe(false);
      expect(deliveries.filter((d) => d.attempts > 0).length).toBeGreaterThan(0);
      expect((await hook(path)).message).toMatch(/timeout/);
    }
    // 2 GiB: the first 64 KiB kept, the rest never downloaded; the attempt is a delivered 200.
    const huge = await log('/huge');
    expect(huge.filter((d) => d.attempts > 0).every((d) => d.status === 'delivered' && d.status_code === 200)).toBe(true);
    const latest = (await (await fetch(`${running.url}/api/v1/webhooks/${hostile['/huge']}/deliveries/${huge[0]!.id}/`, { headers: { authorization: adminAuth } })).json()) as {
      response: { payload: string };
    };
    expect(latest.response.payload.length).toBe(64 * 1024);
    expect(maxHugeBytes).toBeLessThan(64 * 1024 ** 2);
    // Redirects: recorded as their 3xx, never followed.
    for (const [path, code] of [['/redirect-private', 302], ['/redirect-loopback', 307]] as const) {
      const deliveries = await log(path);
      expect(deliveries.every((d) => d.status !== 'delivered')).toBe(true);
      expect(deliveries.filter((d) => d.attempts > 0).every((d) => d.status_code === code)).toBe(true);
      expect((await hook(path)).message).toBe(`redirect not followed (HTTP ${code})`);
    }
    expect(canaryHits).toBe(0);
    // 429 with Retry-After: 4 waits 4 s; 503 with Retry-After: 0 waits the schedule's 2 s (± 20 %).
    const gaps = (path: string) =>
      [...attemptsAt].filter(([key, times]) => key.startsWith(`${path} `) && times.length >= 2).map(([, times]) => times[1]! - times[0]!);
    for (const [path, least] of [['/429', 3_900], ['/503', 1_550]] as const) {
      const seen = gaps(path);
      expect(seen.length).toBeGreaterThan(WRITES / 2);
      expect(Math.min(...seen)).toBeGreaterThanOrEqual(least);
      const deliveries = await log(path);
      expect(deliveries.filter((d) => d.status === 'failed')).toEqual([]);
      outcomes[`${path} gap`] = { minMs: Math.min(...seen), maxMs: Math.max(...seen) };
    }

    const p99 = percentile(storm, 0.99);
    report('hostile-receivers', {
      healthyBaseline: { deliveries: baseline.length, p50Ms: percentile(baseline, 0.5), p99Ms: percentile(baseline, 0.99) },
      healthyUnderHostile: { deliveries: storm.length, p50Ms: percentile(storm, 0.5), p99Ms: p99, maxMs: Math.max(...storm) },
      writes: WRITES,
      stormSeconds: Math.round(stormMs / 1000),
      outcomes,
      hugeRequests,
      hugeBytesSentTotalMiB: Math.round(hugeBytes / 1024 ** 2),
      hugeBytesMaxPerRequestMiB: Math.round((maxHugeBytes / 1024 ** 2) * 10) / 10,
      canaryHits,
      rssStartMiB: memory.startMiB,
      rssMaxMiB: memory.maxMiB,
      seconds: Math.round((Date.now() - drillStarted) / 1000),
    });
    expect(p99).toBeLessThan(1_000);
    expect(memory.maxMiB).toBeLessThan(400);
  });
});
