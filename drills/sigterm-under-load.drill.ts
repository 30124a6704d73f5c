import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { adminAuth, createTestDatabase, startServer, type RunningServer, type TestDatabase } from '../test/support/server.js';
import { createWebhook, jsonRequest, listAll, report, sleep, until, tearDown } from './support.js';

/**
 * Drill 7 (issue 11): slow clients and SIGTERM under load. Bodies trickling in slower than
 * REQUEST_TIMEOUT_SECONDS are cut off with 408; then SIGTERM arrives while clients write, a
 * slow-but-legal upload is in flight and deliveries are in flight to a receiver that takes
 * 1.5 s: the in-flight requests are answered, the in-flight deliveries finish and are recorded,
 * and the process exits 0 within the documented deadline (DRAIN_TIMEOUT_SECONDS plus the
 * webhook timeout, README "Operations"). Restarted, it has lost nothing.
 */
const REQUEST_TIMEOUT_S = 2;
const DRAIN_TIMEOUT_S = 3;
const WEBHOOK_TIMEOUT_S = 3;
const ENV = {
  WEBHOOK_ALLOW_PRIVATE: 'true',
  REQUEST_TIMEOUT_SECONDS: String(REQUEST_TIMEOUT_S),
  DRAIN_TIMEOUT_SECONDS: String(DRAIN_TIMEOUT_S),
  WEBHOOK_TIMEOUT_SECONDS: String(WEBHOOK_TIMEOUT_S),
  WEBHOOK_RETRY_SCHEDULE: '1,1,1,1,1',
};

/** A POST whose body arrives in `parts` pieces `everyMs` apart; resolves with the raw answer. */
function uploadSlowly(port: number, body: string, parts: number, everyMs: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.setEncoding('latin1');
    let text = '';
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(text));
    socket.write(
      `POST /api/v1/experiences/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${adminAuth}\r\nConnection: close\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
    );
    const size = Math.ceil(body.length / parts);
    let sent = 0;
    const timer = setInterval(() => {
      if (!socket.writable || sent >= body.length) return clearInterval(timer);
      socket.write(body.slice(sent, sent + size));
      sent += size;
    }, everyMs);
  });
}

describe('slow clients and SIGTERM under load', () => {
  let database: TestDatabase;
  let server: RunningServer | undefined;
  let receiver: Server | undefined;
  afterAll(async () => {
    await tearDown({ server, receiver, database });
  });

  it('cuts slow bodies off, finishes what is in flight, and exits 0 within the drain deadline', async () => {
    const drillStarted = Date.now();
    database = await createTestDatabase('sqlite');
    server = await startServer(database, { env: ENV });
    const first = server;
    // The receiver answers after 1.5 s until the first process exits, then at once; it notes
    // each delivery id it answered 2xx.
    let delayMs = 1_500;
    const answered = new Map<string, number>();
    const createdEvents = new Set<number>();
    receiver = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () =>
        setTimeout(() => {
          const guid = String(request.headers['x-service-delivery']);
          response.writeHead(204).end(() => answered.set(guid, (answered.get(guid) ?? 0) + 1));
          if (request.headers['x-service-event'] === 'experience') {
            createdEvents.add((JSON.parse(Buffer.concat(chunks).toString()) as { experience: { id: number } }).experience.id);
          }
        }, delayMs),
      );
    });
    await new Promise<void>((resolve) => receiver!.listen(0, '127.0.0.1', resolve));
    const port = (receiver.address() as { port: number }).port;
    const hookId = await createWebhook(first, `http://127.0.0.1:${port}/hook`, adminAuth, ['experience']);

    // 1. Three bodies trickling a byte every 500 ms: each cut off with a 408 after ~2 s.
    const trickleStarted = Date.now();
    const trickles = await Promise.all([0, 1, 2].map(() => uploadSlowly(first.port, JSON.stringify({ title: 'slow', q_like_dislike: 'x'.repeat(200) }), 200, 500)));
    const trickleMs = Date.now() - trickleStarted;
    for (const answer of trickles) expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(trickleMs).toBeLessThan((REQUEST_TIMEOUT_S + 3) * 1000);

    // 2. Load: four clients writing; a legal slow upload (1.2 s) and new trickles in flight.
    const results: Array<{ startedAt: number; status: number | 'error'; id?: number }> = [];
    let stop = false;
    const clients = Array.from({ length: 4 }, async (_, c) => {
      for (let i = 0; !stop; i++) {
        const startedAt = Date.now();
        try {
          const response = await fetch(`${first.url}/api/v1/experiences/`, jsonRequest('POST', { title: `load ${c}.${i}`, q_like_dislike: 'like' }));
          const body = (await response.json()) as { id?: number };
          results.push({ startedAt, status: response.status, ...(body.id ? { id: body.id } : {}) });
        } catch {
          results.push({ startedAt, status: 'error' });
          return;
        }
      }
    });
    await sleep(1_500);
    const slowUpload = uploadSlowly(first.port, JSON.stringify({ title: 'slow but legal', q_like_dislike: 'like' }), 4, 300);
    const lateTrickle = uploadSlowly(first.port, JSON.stringify({ title: 'too slow', q_like_dislike: 'x'.repeat(100) }), 100, 500);
    await sleep(400);
    const deliveredBeforeTerm = answered.size;
    const sigtermAt = Date.now();
    const exitCode = first.stop('SIGTERM');
    const code = await exitCode;
    const exitMs = Date.now() - sigtermAt;
    delayMs = 0;
    stop = true;
    await Promise.all(clients);
    const slowAnswer = await slowUpload;
    const lateAnswer = await lateTrickle;

    expect(code).toBe(0);
    expect(exitMs).toBeLessThan((DRAIN_TIMEOUT_S + WEBHOOK_TIMEOUT_S) * 1000 + 1_000);
    // The slow but legal upload, in flight at SIGTERM, was answered.
    expect(slowAnswer).toMatch(/^HTTP\/1\.1 201 /);
    // The trickle was cut: by its 408, or at the drain deadline with nothing written.
    expect(lateAnswer === '' || /^HTTP\/1\.1 (408|503) /.test(lateAnswer)).toBe(true);
    // Every request sent well before SIGTERM was answered 201; later ones 201, 503 or refused.
    const before = results.filter((r) => r.startedAt < sigtermAt - 100);
    expect(before.every((r) => r.status === 201)).toBe(true);
    expect(results.every((r) => r.status === 201 || r.status === 503 || r.status === 'error')).toBe(true);
    // In-flight deliveries finished before the exit.
    const answeredAtExit = new Map(answered);
    expect(answeredAtExit.size).toBeGreaterThan(deliveredBeforeTerm);

    // 3. Restarted: every acknowledged record is there, every event delivered, and the
    // deliveries answered before the exit were recorded (not sent again).
    server = await startServer(database, { env: ENV });
    const second = server;
    const acknowledged = results.filter((r) => r.status === 201).map((r) => r.id!);
    const slowId = (JSON.parse(slowAnswer.split('\r\n\r\n')[1] ?? '{}') as { id: number }).id;
    acknowledged.push(slowId);
    const listed = new Set((await listAll<{ id: number }>(second, '/api/v1/experiences/')).map((r) => r.id));
    expect(acknowledged.filter((id) => !listed.has(id))).toEqual([]);
    await until(() => acknowledged.every((id) => createdEvents.has(id)), 60_000, 'events of acknowledged records not delivered');
    await sleep(2_000);
    const resent = [...answeredAtExit.keys()].filter((guid) => answered.get(guid)! > 1);
    expect(resent).toEqual([]);
    const log = await listAll<{ status: string }>(second, `/api/v1/webhooks/${hookId}/deliveries/`);
    expect(log.filter((d) => d.status === 'failed')).toEqual([]);
    expect(await second.stop('SIGTERM')).toBe(0);

    report('sigterm-under-load', {
      trickles: trickles.length,
      trickleCutAfterMs: trickleMs,
      requestsDuringLoad: results.length,
      answered201: results.filter((r) => r.status === 201).length,
      answered503: results.filter((r) => r.status === 503).length,
      refusedAfterTerm: results.filter((r) => r.status === 'error').length,
      slowUploadInFlight: slowAnswer.slice(9, 12),
      lateTrickle: lateAnswer.slice(9, 12) || 'closed',
      deliveriesFinishedDuringDrain: answeredAtExit.size - deliveredBeforeTerm,
      resentAfterRestart: resent.length,
      exitCode: code,
      exitMs,
      deadlineMs: (DRAIN_TIMEOUT_S + WEBHOOK_TIMEOUT_S) * 1000,
      recordsChecked: acknowledged.length,
      lost: 0,
      seconds: Math.round((Date.now() - drillStarted) / 1000),
    });
  });
});
