import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VERSION } from '../version.js';
import { createGuardedAgent } from './guarded-agent.js';
import { RESPONSE_BODY_LIMIT, sendAttempt } from './send-attempt.js';
import { generateSecret } from './secrets.js';
import { signDelivery } from './signing.js';
import { verifyDelivery } from './verify.js';

/** What the receiver saw of each request, by path. */
interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

describe('sendAttempt', () => {
  const received = new Map<string, Received>();
  let bigResponse: { written: number; finished: boolean; closed: Promise<void> } | undefined;
  let server: Server;
  let base: string;
  const agent = createGuardedAgent({ allowPrivate: true });

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const path = req.url ?? '/';
        received.set(path, { headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        switch (path) {
          case '/ok':
            res.writeHead(200, { 'content-type': 'text/plain', 'x-receiver': ['a', 'b'] }).end('thanks');
            return;
          case '/accepted':
            res.writeHead(202).end();
            return;
          case '/fail':
            res.writeHead(500).end('{"error":"boom"}');
            return;
          case '/gone':
            res.writeHead(410).end('gone');
            return;
          case '/busy':
            res.writeHead(429, { 'retry-after': '120' }).end();
            return;
          case '/unavailable':
            res.writeHead(503, { 'retry-after': new Date(Date.now() + 30_000).toUTCString() }).end();
            return;
          case '/redirect':
            res.writeHead(302, { location: '/ok?followed' }).end();
            return;
          case '/hang':
            return; // never answers
          case '/slow-body':
            res.writeHead(200);
            res.write('partial'); // ... and never ends
            return;
          case '/large':
            sendLarge(res);
            return;
          default:
            res.writeHead(404).end();
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await agent.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  /** Streams up to 16 MiB of 'x', honouring back-pressure, and records whether it all went out. */
  function sendLarge(res: import('node:http').ServerResponse): void {
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const state = { written: 0, finished: false, closed: Promise.resolve() };
    state.closed = new Promise((resolve) => res.on('close', () => resolve()));
    res.on('finish', () => (state.finished = true));
    bigResponse = state;
    res.writeHead(200, { 'content-type': 'text/plain' });
    const pump = (): void => {
      while (state.written < 16 * 1024 * 1024 && !res.destroyed) {
        state.written += chunk.length;
        if (!res.write(chunk)) {
          res.once('drain', pump);
          return;
        }
      }
      if (!res.destroyed) res.end();
    };
    pump();
  }

  const body = JSON.stringify({ zen: 'Keep it logically awesome. ✓', hook_id: 1 });
  const send = (path: string, extra: { timeoutMs?: number } = {}) =>
    sendAttempt({ url: base + path, headers: { 'X-Service-Event': 'ping' }, body, dispatcher: agent, ...extra });

  it('delivers a signed body with the required headers; 2xx is ok', async () => {
    const secret = generateSecret();
    const signature = signDelivery({ deliveryId: 'd-1', timestamp: Math.floor(Date.now() / 1000), body, secrets: [secret] });
    const started = performance.now();
    const outcome = await sendAttempt({
      url: `${base}/ok`,
      headers: { 'X-Service-Delivery': 'd-1', ...signature },
      body,
      dispatcher: agent,
    });
    expect(outcome).toMatchObject({ ok: true, statusCode: 200, responseBody: 'thanks', error: null });
    expect(outcome.retryAfterSeconds).toBeUndefined();
    expect(outcome.responseHeaders['content-type']).toBe('text/plain');
    expect(outcome.responseHeaders['x-receiver']).toBe('a, b');
    // The attempt's own duration in whole milliseconds: within what the caller waited.
    expect(Number.isInteger(outcome.durationMs)).toBe(true);
    expect(outcome.durationMs).toBeGreaterThanOrEqual(0);
    expect(outcome.durationMs).toBeLessThanOrEqual(Math.ceil(performance.now() - started));

    const seen = received.get('/ok') as Received;
    expect(seen.body).toBe(body);
    expect(seen.headers['content-type']).toBe('application/json');
    expect(seen.headers['content-length']).toBe(String(Buffer.byteLength(body)));
    expect(seen.headers['user-agent']).toBe(`restwire-hookshot/${VERSION}`);
    expect(seen.headers['x-service-delivery']).toBe('d-1');
    expect(verifyDelivery(secret, seen.headers, seen.body)).toBe(true);

    // requestHeaders is exactly what went out, names lower-cased.
    expect(outcome.requestHeaders).toEqual({
      'x-service-delivery': 'd-1',
      ...signature,
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'user-agent': `restwire-hookshot/${VERSION}`,
    });
  });

  it('sends to the path and query string of the target URL as they are', async () => {
    const outcome = await send('/hooks/in?token=a%2Fb&team=1');
    // The receiver answers 404 to any path it does not know: the request reached the path asked for.
    expect(outcome).toMatchObject({ statusCode: 404 });
    expect(received.get('/hooks/in?token=a%2Fb&team=1')?.body).toBe(body);
  });

  it('counts any 2xx as delivered', async () => {
    expect(await send('/accepted')).toMatchObject({ ok: true, statusCode: 202, error: null });
  });

  it('reports a 500 as a failure with its body', async () => {
    expect(await send('/fail')).toMatchObject({
      ok: false,
      statusCode: 500,
      responseBody: '{"error":"boom"}',
      error: 'HTTP 500',
    });
  });

  it('reports 410 Gone with its status, for the dispatcher to disable the webhook', async () => {
    expect(await send('/gone')).toMatchObject({ ok: false, statusCode: 410, error: 'HTTP 410' });
  });

  it('passes on Retry-After from a 429 (seconds) and a 503 (HTTP date)', async () => {
    expect(await send('/busy')).toMatchObject({ ok: false, statusCode: 429, retryAfterSeconds: 120 });
    const unavailable = await send('/unavailable');
    expect(unavailable).toMatchObject({ ok: false, statusCode: 503 });
    expect(unavailable.retryAfterSeconds).toBeGreaterThanOrEqual(28);
    expect(unavailable.retryAfterSeconds).toBeLessThanOrEqual(31);
  });

  it('does not follow a redirect; a 3xx is a failure', async () => {
    received.clear();
    const outcome = await send('/redirect');
    expect(outcome).toMatchObject({ ok: false, statusCode: 302, error: 'redirect not followed (HTTP 302)' });
    expect(outcome.responseHeaders.location).toBe('/ok?followed');
    expect([...received.keys()]).toEqual(['/redirect']);
  });

  it('gives up on a receiver that never answers after timeoutMs', async () => {
    const outcome = await send('/hang', { timeoutMs: 300 });
    expect(outcome).toMatchObject({ ok: false, statusCode: null, error: 'timeout after 300 ms' });
    expect(outcome.durationMs).toBeGreaterThanOrEqual(290);
    expect(outcome.durationMs).toBeLessThan(3000);
  });

  it('counts the body against the timeout too (connect to last byte)', async () => {
    const outcome = await send('/slow-body', { timeoutMs: 300 });
    expect(outcome).toMatchObject({ ok: false, statusCode: 200, error: 'timeout after 300 ms' });
    expect(outcome.durationMs).toBeLessThan(3000);
  });

  it('keeps the first 64 KiB of a large body and stops downloading the rest', async () => {
    const outcome = await send('/large');
    expect(outcome).toMatchObject({ ok: true, statusCode: 200 });
    expect(outcome.responseBody).toHaveLength(RESPONSE_BODY_LIMIT);
    expect(outcome.responseBody).toBe('x'.repeat(64 * 1024));
    const state = bigResponse as NonNullable<typeof bigResponse>;
    await state.closed;
    expect(state.finished).toBe(false); // the connection was cut before 16 MiB went out
  });

  it('reports a refused connection', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const outcome = await sendAttempt({ url: `http://127.0.0.1:${port}/`, headers: {}, body, dispatcher: agent });
    expect(outcome).toMatchObject({ ok: false, statusCode: null, responseBody: '', error: 'connection refused' });
    expect(outcome.responseHeaders).toEqual({});
  });

  it('reports a target the guard refuses, without connecting', async () => {
    received.clear();
    const strict = createGuardedAgent({ allowPrivate: false });
    try {
      const outcome = await sendAttempt({ url: `${base}/ok`, headers: {}, body, dispatcher: strict });
      expect(outcome.ok).toBe(false);
      expect(outcome.statusCode).toBeNull();
      expect(outcome.error).toMatch(/^target refused: target_url resolves to a loopback address; /);
      expect(received.size).toBe(0);
    } finally {
      await strict.close();
    }
  });

  it('never throws, even for an unusable URL', async () => {
    const outcome = await sendAttempt({ url: 'not a url', headers: {}, body, dispatcher: agent });
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toEqual(expect.any(String));
  });
});
