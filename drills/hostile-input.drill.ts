import { connect } from 'node:net';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { adminAuth, createTestDatabase, startServer, type RunningServer, type TestDatabase } from '../test/support/server.js';
import { jsonRequest, report } from './support.js';

/**
 * Drill 6 (issue 11): a property-based test (fast-check) throws random methods, paths (with
 * random ids, percent-encoded, absolute-form, slashes doubled or dropped), query strings,
 * headers and bodies at every route of /api/v1/openapi.json, as raw HTTP. No answer is a 5xx,
 * the server never dies, and a rejected request (4xx) changes nothing stored: a snapshot of
 * every table before and after each one must be equal.
 *
 * No webhook is ever sent: the dispatcher is off, and a `target_url` is only ever a loopback
 * literal, so no host name is even resolved (the drills' network rule).
 */
const RUNS = Number(process.env.HOSTILE_INPUT_RUNS ?? 4000);
const SAFE_TARGETS = ['http://127.0.0.1:9/hook', 'http://[::1]:9/x', 'https://127.0.0.1/'];
const FIELDS = ['title', 'q_like_dislike', 'target_url', 'events', 'secret', 'active', 'username', 'password', 'refresh_token', 'owner', 'id'];

/** A string value, never a URL with a host name (no DNS lookups, no traffic beyond loopback). */
const value = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  fc.constantFrom('', ' ', '\u0000', '\ud800', 'like', '*', 'experience', ...SAFE_TARGETS, 'whsec_AAAA'),
  fc.integer().map(String),
);
const jsonValue = fc.oneof(value, fc.integer(), fc.boolean(), fc.constant(null), fc.array(value, { maxLength: 3 }), fc.dictionary(value, value, { maxKeys: 2 }));
const safe = (text: string) => (/https?:/i.test(text) && !SAFE_TARGETS.some((t) => text.includes(t)) ? 'x' : text);

const body = fc.oneof(
  fc.constant({ type: undefined as string | undefined, text: '' }),
  fc.dictionary(fc.constantFrom(...FIELDS), jsonValue, { maxKeys: 5 }).map((o) => ({ type: 'application/json', text: safe(JSON.stringify(o)) })),
  fc.json({ maxDepth: 3 }).map((text) => ({ type: 'application/json', text: safe(text) })),
  fc.dictionary(fc.constantFrom(...FIELDS), value, { maxKeys: 4 }).map((o) => ({
    type: 'application/x-www-form-urlencoded',
    text: safe(new URLSearchParams(o).toString()),
  })),
  fc.tuple(fc.constantFrom(...FIELDS), value, fc.constantFrom('utf-8', 'latin1', '')).map(([name, v, charset]) => ({
    type: 'multipart/form-data; boundary=XyZ',
    text: safe(`--XyZ\r\nContent-Disposition: form-data; name="${name}"\r\n${charset ? `Content-Type: text/plain; charset=${charset}\r\n` : ''}\r\n${v}\r\n--XyZ--\r\n`),
  })),
  fc.tuple(fc.constantFrom('text/plain', 'application/json; charset=latin1', 'application/xml', 'multipart/form-data', 'application/json'), fc.string()).map(([type, text]) => ({
    type,
    text: safe(text),
  })),
);

/** Percent-encodes every byte of the UTF-8 form but unreserved characters (never throws, unlike encodeURIComponent). */
const pct = (text: string) => [...Buffer.from(text, 'utf8')].map((b) => (/[A-Za-z0-9\-._~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`)).join('');

/** Percent-encodes some characters of a path, as a proxy or an attacker might. */
const percentEncodeSome = (path: string, picks: boolean[]) =>
  [...path].map((ch, i) => (picks[i % picks.length] && /[a-z0-9]/i.test(ch) ? `%${ch.charCodeAt(0).toString(16).toUpperCase()}` : ch)).join('');

const segmentArb = () => fc.oneof(
  fc.constantFrom('1', '2', '0', '-1', '01', '1.5', '99999999999999999999', 'me', 'abc', '%31', '%2e%2e', '..', '', '%ff', '%C0%AF', '%00', '%ED%A0%80'),
  fc.string({ maxLength: 8 }).map((text) => pct(text)),
);
describe('hostile input on every route', () => {
  let database: TestDatabase;
  let server: RunningServer | undefined;
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await database?.drop();
  });

  it(`answers ${RUNS} random requests without a 5xx, a crash, or a change from a rejected one`, async () => {
    const drillStarted = Date.now();
    database = await createTestDatabase('sqlite');
    server = await startServer(database, { env: { DISPATCHER_IN_SERVE: 'false', WEBHOOK_ALLOW_PRIVATE: 'true', LOG_LEVEL: 'warn' }, ready: /listening at (http:\/\/127\.0\.0\.1:\d+)/ });
    const running = server;
    // Something to find, change and delete: an experience, a webhook (with its ping delivery).
    expect((await fetch(`${running.url}/api/v1/experiences/`, jsonRequest('POST', { title: 'seed', q_like_dislike: 'like' }))).status).toBe(201);
    expect((await fetch(`${running.url}/api/v1/webhooks/`, jsonRequest('POST', { target_url: SAFE_TARGETS[0], events: ['*'] }))).status).toBe(201);
    const token = ((await (await fetch(`${running.url}/api/v1/auth/token/`, jsonRequest('POST', { username: 'admin', password: 'admin-password-1' }))).json()) as {
      access_token: string;
    }).access_token;
    const openapi = (await (await fetch(`${running.url}/api/v1/openapi.json`)).json()) as { paths: Record<string, unknown> };
    const routes = Object.keys(openapi.paths);
    expect(routes.length).toBeGreaterThan(5);

    const sqlite = new SQLite(join(database.env.DATA_DIR!, 'restwire.sqlite3'), { readonly: true, fileMustExist: true });
    const tables = (sqlite.prepare("select name from sqlite_master where type = 'table' and name not like 'sqlite_%'").all() as Array<{ name: string }>).map((t) => t.name);
    const snapshot = () => JSON.stringify(tables.map((name) => [name, sqlite.prepare(`select * from "${name}" order by rowid`).all()]));

    const request = fc.record({
      method: fc.oneof(fc.constantFrom('GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE'), fc.stringMatching(/^[A-Z]{1,7}$/)),
      route: fc.constantFrom(...routes),
      segments: fc.array(segmentArb(), { minLength: 3, maxLength: 3 }),
      spelling: fc.constantFrom('plain', 'plain', 'percent', 'absolute', 'double-slash', 'no-slash', 'dot-segment'),
      picks: fc.array(fc.boolean(), { minLength: 1, maxLength: 6 }),
      query: fc.dictionary(fc.constantFrom('limit', 'cursor', 'ordering', 'owner', 'title', 'search', 'status', 'format', 'page'), fc.oneof(value.map((text) => pct(text)), fc.constantFrom('%ff', '%', '%zz', '1%00')), { maxKeys: 3 }),
      auth: fc.constantFrom('', adminAuth, `Bearer ${token}`, 'Basic YWRtaW46d3Jvbmc=', 'Bearer x.y.z', 'Basic !!!', 'Digest a'),
      accept: fc.constantFrom('', '*/*', 'application/json', 'text/html', 'text/csv', 'application/xml', 'text/*;q=0', 'x'),
      extra: fc.array(fc.tuple(fc.constantFrom('cookie', 'x-csrftoken', 'if-match', 'if-none-match', 'origin', 'referer', 'x-forwarded-for', 'range', 'x-y'), fc.string({ maxLength: 40 })), { maxLength: 3 }),
      body,
    });

    const statuses = new Map<number | string, number>();
    const routesHit = new Set<string>();
    let rejected = 0;
    let snapshotsCompared = 0;
    const failures: string[] = [];
    let before = snapshot();

    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        let i = 0;
        let path = r.route.replace(/\{[^}]+\}/g, () => r.segments[i++ % 3]!);
        if (r.spelling === 'percent') path = percentEncodeSome(path, r.picks);
        if (r.spelling === 'double-slash') path = path.replace('/v1/', '//v1//');
        if (r.spelling === 'no-slash') path = path.replace(/\/$/, '');
        if (r.spelling === 'dot-segment') path = path.replace('/v1/', '/v1/./x/../');
        const search = Object.entries(r.query).map(([k, v]) => `${k}=${v}`).join('&');
        const target = `${r.spelling === 'absolute' ? `http://127.0.0.1:${running.port}` : ''}${path}${search ? `?${search}` : ''}`;
        const payload = Buffer.from(r.body.text, 'utf8');
        const headers = [
          `Host: 127.0.0.1:${running.port}`,
          'Connection: close',
          ...(r.auth ? [`Authorization: ${r.auth}`] : []),
          ...(r.accept ? [`Accept: ${r.accept}`] : []),
          ...(r.body.type ? [`Content-Type: ${r.body.type}`] : []),
          ...r.extra.map(([name, v]) => `${name}: ${v.replace(/[\r\n]/g, ' ')}`),
          ...(payload.length || r.method !== 'GET' ? [`Content-Length: ${payload.length}`] : []),
        ];
        const head = Buffer.from(`${r.method} ${target} HTTP/1.1\r\n${headers.join('\r\n')}\r\n\r\n`, 'latin1');
        const answer = await raw(running.port, Buffer.concat([head, payload]));
        const status = /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1];
        const code = status === undefined ? 'no answer' : Number(status);
        statuses.set(code, (statuses.get(code) ?? 0) + 1);
        routesHit.add(r.route);
        const label = `${r.method} ${target} → ${code}`;
        if (typeof code !== 'number' || code >= 500) failures.push(`${label}\n${answer.slice(0, 400)}`);
        expect(code, label).toBeTypeOf('number');
        expect(code as number, `${label}\n${answer.slice(0, 400)}`).toBeLessThan(500);
        const after = snapshot();
        if ((code as number) >= 400) {
          rejected++;
          snapshotsCompared++;
          expect(after === before, `${label}: a rejected request changed stored data`).toBe(true);
        }
        before = after;
      }),
      { numRuns: RUNS, verbose: 1 },
    );
    sqlite.close();

    expect(running.process.exitCode).toBeNull();
    expect((await fetch(`${running.url}/healthz`)).status).toBe(200);
    expect(running.output()).not.toMatch(/"level":50/);
    report('hostile-input', {
      requests: RUNS,
      routes: routes.length,
      routesHit: routesHit.size,
      statuses: Object.fromEntries([...statuses].sort()),
      rejected,
      snapshotsCompared,
      tables: tables.length,
      fiveHundreds: failures.length,
      crashes: 0,
      seconds: Math.round((Date.now() - drillStarted) / 1000),
    });
  });
});

/**
 * Sends raw bytes on a fresh connection and returns everything the server wrote until it closed
 * (`Connection: close`). The socket is not half-closed: Node's HTTP server takes a client's FIN
 * as an abort (httpAllowHalfOpen is off), and would drop any answer not yet written.
 */
function raw(port: number, bytes: Buffer): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1');
    socket.setTimeout(10_000, () => socket.destroy());
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(text));
    socket.write(bytes);
  });
}
