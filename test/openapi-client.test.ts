import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import openapiTS from 'openapi-typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from './support/private-services.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { ADMIN, createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * Issue 10 item 7, tried as a user of third-party tools would: a client generated from the
 * served document with openapi-typescript + openapi-fetch compiles the README's walk-through
 * with no casts and no type arguments (besides `createClient<paths, JsonMedia>`: list and record
 * GETs also document their `text/event-stream`, so a client says it reads JSON), runs it against the
 * server, and a validating proxy (Prism, `--errors`) in front of the server sees no violation
 * over that walk-through and its error cases.
 */
const ROOT = new URL('..', import.meta.url).pathname;
const BIN = (name: string) => join(ROOT, 'node_modules', '.bin', name);

/** Runs a command to its end; resolves with its exit code and everything it printed. */
function run(command: string, args: readonly string[], options: { cwd: string; env?: Record<string, string> }): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code) => resolve({ code, output }));
  });
}

/**
 * The README's walk-through (tokens, experiences, users/me, webhooks, deliveries) and its error
 * cases, written as a user would with the generated `paths`: no `as`, no type arguments but
 * `createClient<paths, JsonMedia>`. It prints one JSON line of results for the test to check.
 */
const WALK_THROUGH = `import createClient from 'openapi-fetch';
import type { paths } from './schema.js';

// JSON bodies and problem+json errors; list and record GETs also document their event stream.
type JsonMedia = \`\${string}/\${string}json\`;

const baseUrl = process.env.BASE_URL ?? '';
const username = process.env.USERNAME ?? '';
const password = process.env.PASSWORD ?? '';
const anonymous = createClient<paths, JsonMedia>({ baseUrl });

function fail(step: string, status: number): never {
  throw new Error(step + ' answered ' + status);
}

// Tokens: exchange the password for an access token and a refresh token.
const token = await anonymous.POST('/api/v1/auth/token/', { body: { username, password } });
if (!token.data) fail('token', token.response.status);
const refreshToken: string = token.data.refresh_token;
const tokenType: 'Bearer' = token.data.token_type;
const client = createClient<paths, JsonMedia>({ baseUrl, headers: { Authorization: tokenType + ' ' + token.data.access_token } });

// Who am I?
const me = await client.GET('/api/v1/users/me/');
if (!me.data) fail('users/me', me.response.status);
const myName: string = me.data.username;

// Experiences: create, list, get, patch, delete.
const created = await client.POST('/api/v1/experiences/', { body: { title: 'Sunrise hike', q_like_dislike: 'like' } });
if (!created.data) fail('create experience', created.response.status);
const experienceId: number = created.data.id;
const location = created.response.headers.get('location');

const list = await client.GET('/api/v1/experiences/', { params: { query: { ordering: '-id', limit: 10 } } });
if (!list.data) fail('list experiences', list.response.status);
const listedTitles: string[] = list.data.results.map((experience) => experience.title);
const next: string | null = list.data.next;

const one = await client.GET('/api/v1/experiences/{id}/', { params: { path: { id: experienceId } } });
if (!one.data) fail('get experience', one.response.status);
const etag = one.response.headers.get('etag') ?? '';
const notModified = await client.GET('/api/v1/experiences/{id}/', { params: { path: { id: experienceId }, header: { 'If-None-Match': etag } } });

const patched = await client.PATCH('/api/v1/experiences/{id}/', {
  params: { path: { id: experienceId }, header: { 'If-Match': etag } },
  body: { title: 'Sunset hike' },
});
if (!patched.data) fail('patch experience', patched.response.status);
const patchedTitle: string = patched.data.title;

// Error cases: 412 (a stale If-Match), 400 (validation), 404, 401.
const stale = await client.PATCH('/api/v1/experiences/{id}/', {
  params: { path: { id: experienceId }, header: { 'If-Match': etag } },
  body: { title: 'Again' },
});
// A title of spaces fits the schema's minLength but is blank once trimmed: the server's 400.
const invalid = await client.POST('/api/v1/experiences/', { body: { title: '   ', q_like_dislike: 'like' } });
const invalidTitle: string[] | undefined = invalid.error?.errors?.title;
const missing = await client.GET('/api/v1/experiences/{id}/', { params: { path: { id: 999999 } } });
const missingType: string | undefined = missing.error?.type;
const forged = createClient<paths, JsonMedia>({ baseUrl, headers: { Authorization: 'Bearer not-a-token' } });
const unauthorized = await forged.POST('/api/v1/experiences/', { body: { title: 'No', q_like_dislike: 'like' } });
const badToken = await anonymous.POST('/api/v1/auth/token/', { body: { username, password: 'wrong-password' } });

// Webhooks: create one (its secret is shown once), ping it, read its deliveries, redeliver.
const hook = await client.POST('/api/v1/webhooks/', { body: { target_url: process.env.TARGET_URL ?? '', events: ['experience'] } });
if (!hook.data) fail('create webhook', hook.response.status);
const secret: string = hook.data.secret;
const webhookId: number = hook.data.id;
const hookAgain = await client.GET('/api/v1/webhooks/{id}/', { params: { path: { id: webhookId } } });
if (!hookAgain.data) fail('get webhook', hookAgain.response.status);
const secretShownAgain = 'secret' in hookAgain.data;
const ping = await client.POST('/api/v1/webhooks/{id}/pings/', { params: { path: { id: webhookId } } });

const second = await client.POST('/api/v1/experiences/', { body: { title: 'Webhooks are fun', q_like_dislike: 'like' } });
if (!second.data) fail('create experience', second.response.status);

let deliveries = await client.GET('/api/v1/webhooks/{id}/deliveries/', { params: { path: { id: webhookId } } });
for (let tries = 0; tries < 200 && !(deliveries.data && deliveries.data.results.every((d) => d.status === 'delivered') && deliveries.data.results.length >= 2); tries++) {
  await new Promise((resolve) => setTimeout(resolve, 50));
  deliveries = await client.GET('/api/v1/webhooks/{id}/deliveries/', { params: { path: { id: webhookId }, query: { status: 'delivered' } } });
}
if (!deliveries.data) fail('list deliveries', deliveries.response.status);
const first = deliveries.data.results[0];
if (!first) throw new Error('no delivery');
const delivery = await client.GET('/api/v1/webhooks/{id}/deliveries/{delivery_id}/', { params: { path: { id: webhookId, delivery_id: first.id } } });
if (!delivery.data) fail('get delivery', delivery.response.status);
const redelivered = await client.POST('/api/v1/webhooks/{id}/deliveries/{delivery_id}/attempts/', { params: { path: { id: webhookId, delivery_id: first.id } } });
if (!redelivered.data) fail('redeliver', redelivered.response.status);
const failedAgain = await client.POST('/api/v1/webhooks/{id}/deliveries/failed/attempts/', { params: { path: { id: webhookId } } });
if (!failedAgain.data) fail('redeliver failed', failedAgain.response.status);
const redeliveredCount: number = failedAgain.data.redelivered;

// Refresh, then clean up.
const refreshed = await anonymous.POST('/api/v1/auth/token/refresh/', { body: { refresh_token: refreshToken } });
const removedHook = await client.DELETE('/api/v1/webhooks/{id}/', { params: { path: { id: webhookId } } });
const removed = await client.DELETE('/api/v1/experiences/{id}/', { params: { path: { id: experienceId } } });
const gone = await client.GET('/api/v1/experiences/{id}/', { params: { path: { id: experienceId } } });

console.log(JSON.stringify({
  myName, experienceId, location, listedTitles, next, notModified: notModified.response.status, patchedTitle,
  stale: stale.response.status, invalid: invalid.response.status, invalidTitle,
  missing: missing.response.status, missingType, unauthorized: unauthorized.response.status, badToken: badToken.response.status,
  secret, secretShownAgain, ping: ping.response.status, deliveries: deliveries.data.results.map((d) => d.event),
  deliveryGuid: delivery.data.guid, deliveryRequest: delivery.data.request.payload !== undefined,
  redelivered: redelivered.response.status, redeliveredGuid: redelivered.data.guid, redeliveredFlag: redelivered.data.redelivery,
  redeliveredCount, refreshed: refreshed.response.status,
  removedHook: removedHook.response.status, removed: removed.response.status, gone: gone.response.status,
}));
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'es2022',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    strict: true,
    noEmit: true,
    skipLibCheck: false,
    types: ['node'],
    typeRoots: [join(ROOT, 'node_modules', '@types')],
  },
  files: ['walk-through.ts', 'schema.d.ts'],
};

describe('a client generated from the OpenAPI document (openapi-typescript + openapi-fetch)', () => {
  let database: TestDatabase;
  let server: RunningServer;
  let receiver: Receiver;
  let dir: string;

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    server = await startServer(database, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    receiver = await startReceiver();
    dir = mkdtempSync(join(tmpdir(), 'restwire-client-'));
    // The temp project resolves `openapi-fetch` and `@types/node` from this checkout.
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    const document = await (await fetch(`${server.url}/api/v1/openapi.json`)).json();
    writeFileSync(join(dir, 'openapi.json'), JSON.stringify(document));
    writeFileSync(join(dir, 'schema.d.ts'), await openapiTS(document));
    writeFileSync(join(dir, 'walk-through.ts'), WALK_THROUGH);
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(TSCONFIG, null, 2));
  }, 60_000);
  afterAll(async () => {
    await receiver?.close();
    await server?.stop();
    await database?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('writes the walk-through with no casts and no type arguments but createClient<paths, JsonMedia>', () => {
    expect(WALK_THROUGH).not.toMatch(/\bas\s+(?!const\b)[A-Za-z{[(]/);
    expect(WALK_THROUGH.match(/<[A-Za-z]+/g)).toEqual(['<paths', '<paths', '<paths']);
  });

  it('compiles with tsc --strict', async () => {
    const { code, output } = await run(BIN('tsc'), ['--noEmit', '--strict', '-p', 'tsconfig.json'], { cwd: dir });
    expect(output).toBe('');
    expect(code).toBe(0);
  }, 60_000);

  /** Runs the walk-through against `baseUrl` and returns what it printed. */
  async function walk(baseUrl: string): Promise<Record<string, unknown>> {
    const { code, output } = await run(BIN('tsx'), ['walk-through.ts'], {
      cwd: dir,
      env: { BASE_URL: baseUrl, USERNAME: ADMIN.username, PASSWORD: ADMIN.password, TARGET_URL: receiver.url },
    });
    expect(code, output).toBe(0);
    return JSON.parse(output.trim().split('\n').at(-1)!) as Record<string, unknown>;
  }

  const expectWalked = (result: Record<string, unknown>) => {
    expect(result).toMatchObject({
      myName: ADMIN.username,
      location: `/api/v1/experiences/${String(result.experienceId)}/`,
      next: null,
      notModified: 304,
      patchedTitle: 'Sunset hike',
      stale: 412,
      invalid: 400,
      invalidTitle: [expect.any(String)],
      missing: 404,
      missingType: expect.any(String),
      unauthorized: 401,
      badToken: 401,
      secret: expect.stringMatching(/.{16,}/),
      secretShownAgain: false,
      ping: 204,
      deliveryGuid: expect.any(String),
      deliveryRequest: true,
      redelivered: 202,
      redeliveredFlag: true,
      redeliveredCount: 0,
      refreshed: 200,
      removedHook: 204,
      removed: 204,
      gone: 404,
    });
    expect(result.listedTitles).toContain('Sunrise hike');
    expect(result.deliveries).toEqual(expect.arrayContaining(['experience', 'ping']));
    expect(result.redeliveredGuid).toBe(result.deliveryGuid);
  };

  it('runs the walk-through against the server', async () => {
    expectWalked(await walk(server.url));
  }, 60_000);

  describe('through a validating proxy (prism proxy --errors)', () => {
    let prism: ChildProcess;
    let prismUrl: string;
    let prismOutput = '';

    beforeAll(async () => {
      const port = await freePort();
      prismUrl = `http://127.0.0.1:${port}`;
      prism = spawn(BIN('prism'), ['proxy', '--errors', '-h', '127.0.0.1', '-p', String(port), join(dir, 'openapi.json'), server.url], {
        cwd: dir,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      prism.stdout!.on('data', (chunk: Buffer) => (prismOutput += chunk.toString()));
      prism.stderr!.on('data', (chunk: Buffer) => (prismOutput += chunk.toString()));
      const deadline = Date.now() + 30_000;
      while (!/Prism is listening/.test(prismOutput)) {
        if (Date.now() > deadline || prism.exitCode !== null) throw new Error(`prism did not start:\n${prismOutput}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }, 40_000);
    afterAll(async () => {
      if (prism && prism.exitCode === null) {
        const exited = new Promise((resolve) => prism.once('exit', resolve));
        prism.kill('SIGTERM');
        await exited;
      }
    });

    const violations = () => prismOutput.split('\n').filter((line) => /violation|\berror\b|\bwarn|fatal/i.test(line));

    it('sees no violation over the walk-through and its error cases', async () => {
      expectWalked(await walk(prismUrl));
      expect(violations()).toEqual([]);
    }, 60_000);

    it('sees no violation over 304s', async () => {
      const document = await fetch(`${prismUrl}/api/v1/openapi.json`);
      expect(document.status).toBe(200);
      const again = await fetch(`${prismUrl}/api/v1/openapi.json`, { headers: { 'if-none-match': document.headers.get('etag')! } });
      expect(again.status).toBe(304);
      const list = await fetch(`${prismUrl}/api/v1/experiences/`);
      const notModified = await fetch(`${prismUrl}/api/v1/experiences/`, { headers: { 'if-none-match': list.headers.get('etag')! } });
      expect(notModified.status).toBe(304);
      expect(violations()).toEqual([]);
    }, 30_000);

    // A method the document does not list for a path never reaches the server through Prism:
    // Prism answers the 405 itself (NO_METHOD_MATCHED). The server's own 405 is checked directly.
    it('answers a method the path lacks with 405, as the server does', async () => {
      const authorization = `Basic ${Buffer.from(`${ADMIN.username}:${ADMIN.password}`).toString('base64')}`;
      const direct = await fetch(`${server.url}/api/v1/users/me/`, { method: 'DELETE', headers: { authorization } });
      expect(direct.status).toBe(405);
      expect(direct.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(direct.headers.get('allow')).toMatch(/GET/);
      const before = violations().length;
      const proxied = await fetch(`${prismUrl}/api/v1/users/me/`, { method: 'DELETE', headers: { authorization } });
      expect(proxied.status).toBe(405);
      expect(violations().slice(before).every((line) => line.includes('NO_METHOD_MATCHED'))).toBe(true);
    }, 30_000);
  });
});
