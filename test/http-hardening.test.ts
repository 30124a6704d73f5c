import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * What the server answers to requests a careless or hostile client sends (issue 11,
 * finding 12): problem+json even when Node's own HTTP parser refuses the request, strict bodies,
 * and the headers that keep a browser from sniffing, framing or scripting the pages.
 */
const PROBLEM = /^application\/problem\+json/;

/** Writes raw bytes to the server and returns everything it answers before closing. */
function rawExchange(port: number, bytes: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNRESET' ? resolve(answer) : reject(error)));
    socket.on('close', () => resolve(answer));
    socket.end(bytes);
  });
}

function parseRaw(answer: string): { status: number; headers: Record<string, string>; body: string } {
  const [head = '', body = ''] = answer.split('\r\n\r\n');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body };
}

describe('HTTP hardening', () => {
  let database: TestDatabase;
  let server: RunningServer;
  const api = (path: string, init: RequestInit = {}) => fetch(`${server.url}${path}`, { redirect: 'manual', ...init });

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    // No dispatcher: the webhooks made here must never be sent anywhere.
    server = await startServer(database, { env: { WEBHOOK_ALLOW_PRIVATE: 'true', DISPATCHER_IN_SERVE: 'false' } });
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  // Found by the hostile-input drill: a dashboard page was handed OPTIONS metadata and threw.
  it('describes the webhook and delivery views to a browser asking OPTIONS (no 500)', async () => {
    for (const path of ['/api/v1/webhooks/', '/api/v1/webhooks/1/', '/api/v1/webhooks/1/deliveries/', '/api/v1/webhooks/1/deliveries/1/']) {
      const response = await api(path, { method: 'OPTIONS', headers: { accept: 'text/html' } });
      expect(response.status, path).toBe(200);
      expect(response.headers.get('content-type'), path).toMatch(/^text\/html/);
    }
  });

  it('answers oversized headers with a 431 problem+json, not Node’s own body', async () => {
    const request = `GET /api/v1/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`;
    const answer = parseRaw(await rawExchange(server.port, Buffer.from(request)));
    expect(answer.status).toBe(431);
    expect(answer.headers['content-type']).toMatch(PROBLEM);
    expect(answer.headers['x-content-type-options']).toBe('nosniff');
    expect(JSON.parse(answer.body)).toMatchObject({ status: 431, type: 'urn:restwire:problem:headers_too_large' });
  });

  it('answers raw non-ASCII bytes in the request line with a 400 problem+json', async () => {
    const request = Buffer.concat([Buffer.from('GET /api/v1/caf'), Buffer.from([0xe9, 0xff]), Buffer.from('/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')]);
    const answer = parseRaw(await rawExchange(server.port, request));
    expect(answer.status).toBe(400);
    expect(answer.headers['content-type']).toMatch(PROBLEM);
    expect(JSON.parse(answer.body)).toMatchObject({ status: 400 });
  });

  it('redirects a path without its slash to the slash form as sent, percent-escapes kept (a NUL gave a 500)', async () => {
    for (const [path, location] of [
      ['/api/v1/users/%00', '/api/v1/users/%00/'],
      ['/api/v1/users/%0D%0Ax?limit=1', '/api/v1/users/%0D%0Ax/?limit=1'],
      ['/api/v1/experiences', '/api/v1/experiences/'],
    ]) {
      const response = await api(path!);
      expect(response.status, path).toBe(308);
      expect(response.headers.get('location')).toBe(location);
    }
  });

  it('sends a browser (or anyone) opening / to the API root; other methods on / stay a 404', async () => {
    for (const accept of ['text/html,application/xhtml+xml;q=0.9,*/*;q=0.8', 'application/json']) {
      const response = await api('/', { headers: { accept } });
      expect(response.status, accept).toBe(302);
      expect(response.headers.get('location')).toBe('/api/v1/');
    }
    const landed = await fetch(`${server.url}/`, { headers: { accept: 'text/html' } });
    expect(landed.status).toBe(200);
    expect(landed.url).toBe(`${server.url}/api/v1/`);
    expect(landed.headers.get('content-type')).toMatch(/^text\/html/);
    const posted = await api('/', { method: 'POST' });
    expect(posted.status).toBe(404);
    expect(posted.headers.get('content-type')).toMatch(PROBLEM);
  });

  it('refuses a JSON lone surrogate with a 400 instead of storing U+FFFD', async () => {
    const response = await api('/api/v1/experiences/', {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'application/json' },
      body: '{"title":"\\ud800","q_like_dislike":"like"}',
    });
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toMatch(PROBLEM);
    expect(((await response.json()) as { detail: string }).detail).toMatch(/lone surrogate/);
  });

  it('refuses a multipart part in another charset with a 400', async () => {
    const body = Buffer.concat([
      Buffer.from('--B\r\nContent-Disposition: form-data; name="title"\r\nContent-Type: text/plain; charset=latin1\r\n\r\ncaf'),
      Buffer.from([0xe9]),
      Buffer.from('\r\n--B\r\nContent-Disposition: form-data; name="q_like_dislike"\r\n\r\nlike\r\n--B--\r\n'),
    ]);
    const response = await api('/api/v1/experiences/', {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'multipart/form-data; boundary=B' },
      body,
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { detail: string }).detail).toMatch(/charset "latin1"/);
  });

  it('wants a list of webhook events in JSON; a form may still give a comma-separated string', async () => {
    const asJson = await api('/api/v1/webhooks/', {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ target_url: 'http://127.0.0.1:9/hook', events: 'experience' }),
    });
    expect(asJson.status).toBe(400);
    expect(await asJson.json()).toMatchObject({ errors: { events: ['Expected a non-empty list of event names.'] } });

    const asList = await api('/api/v1/webhooks/', {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ target_url: 'http://127.0.0.1:9/hook', events: ['experience'] }),
    });
    expect(asList.status).toBe(201);

    const asForm = await api('/api/v1/webhooks/', {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ target_url: 'http://127.0.0.1:9/hook', events: 'experience, *' }).toString(),
    });
    expect(asForm.status).toBe(201);
    expect(await asForm.json()).toMatchObject({ events: ['experience', '*'] });
  });

  it('sends CSP, X-Content-Type-Options and X-Frame-Options: on the HTML pages and on every other response', async () => {
    const page = await api('/api/v1/experiences/', { headers: { accept: 'text/html' } });
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    // The browsable pages run restwire's own script and stylesheet only (issue 12): nothing inline.
    const csp = page.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    for (const response of [page, await api('/api/v1/'), await api('/api/v1/nothing/'), await api('/elsewhere'), await api('/healthz'), await api('/api/v1/%zz/')]) {
      expect(response.headers.get('x-content-type-options'), response.url).toBe('nosniff');
      expect(response.headers.get('x-frame-options'), response.url).toBe('DENY');
      expect(response.headers.get('content-security-policy'), response.url).toContain("default-src 'none'");
      expect(response.headers.get('content-security-policy'), response.url).toContain("frame-ancestors 'none'");
    }
  });
});
