import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { SignJWT, base64url, decodeJwt, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN,
  BACKENDS,
  adminAuth,
  basic,
  createTestDatabase,
  createUser,
  startServer,
  type RunningServer,
  type TestDatabase,
} from './support/server.js';

/**
 * Sign-in for every kind of client (API.md §3, §6 "Status codes", "Login throttling",
 * "Sessions"; issue #3), seen from outside: a real server on a real port.
 */
const FORM = 'application/x-www-form-urlencoded';
const PROBLEM = 'application/problem+json; charset=utf-8';
const BIN = new URL('../bin/restwire.js', import.meta.url).pathname;
const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();

interface TokenPair {
  access_token: string;
  token_type: string;
  expires_in: number;
  refresh_token: string;
}

/** A browser's cookie jar, reduced to what these tests need. */
interface Session {
  sessionid: string;
  csrftoken: string;
  cookie: string;
  setCookie: string[];
}

/** Runs `restwire token NAME` against the test database. */
function tokenCommand(database: TestDatabase, name: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, 'token', name], { env: { PATH: process.env.PATH ?? '', ...database.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

describe.each(BACKENDS)('sign-in on %s', (backend) => {
  let database: TestDatabase;
  /** Defaults: 15-minute tokens, signup off, http PUBLIC_URL. */
  let server: RunningServer;
  /** Same database, ACCESS_TOKEN_SECONDS=1, ALLOW_SIGNUP=true, an https PUBLIC_URL. */
  let other: RunningServer;
  /** Every secret a client saw; none may appear in a server's log. */
  const secrets = new Set<string>([ADMIN.password, 'bob-password-1']);

  const call = (target: () => RunningServer) => (path: string, init: RequestInit = {}) =>
    fetch(`${target().url}${path}`, { redirect: 'manual', ...init });
  const api = call(() => server);
  const otherApi = call(() => other);
  const postForm = (path: string, fields: Record<string, string>, headers: Record<string, string> = {}, via = api) =>
    via(path, { method: 'POST', headers: { 'content-type': FORM, ...headers }, body: form(fields) });

  async function obtainToken(username: string, password: string, via = api): Promise<TokenPair> {
    const response = await postForm('/api/v1/auth/token/', { username, password }, {}, via);
    expect(response.status).toBe(200);
    const pair = (await response.json()) as TokenPair;
    secrets.add(pair.access_token).add(pair.refresh_token);
    return pair;
  }

  async function login(username: string, password: string, via = api): Promise<Session> {
    const response = await postForm('/api/v1/auth/session/', { username, password }, {}, via);
    expect(response.status).toBe(204);
    const setCookie = response.headers.getSetCookie();
    const value = (name: string) => setCookie.find((c) => c.startsWith(`${name}=`))!.split(';')[0]!.slice(name.length + 1);
    const session = { sessionid: value('sessionid'), csrftoken: value('csrftoken'), setCookie, cookie: '' };
    session.cookie = `sessionid=${session.sessionid}; csrftoken=${session.csrftoken}`;
    secrets.add(session.sessionid).add(session.csrftoken);
    return session;
  }

  const createExperience = (headers: Record<string, string>, via = api) =>
    postForm('/api/v1/experiences/', { title: 'Signed in', q_like_dislike: 'like' }, headers, via);

  async function expectProblem(response: Response, status: number): Promise<Record<string, unknown>> {
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toBe(PROBLEM);
    const body = (await response.json()) as Record<string, unknown>;
    expect(body.status).toBe(status);
    return body;
  }

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    server = await startServer(database);
    await createUser(database, 'bob', 'bob-password-1');
    other = await startServer(database, {
      env: { ACCESS_TOKEN_SECONDS: '1', ALLOW_SIGNUP: 'true', PUBLIC_URL: 'https://restwire.example' },
    });
  });
  afterAll(async () => {
    await server?.stop();
    await other?.stop();
    await database?.drop();
  });

  describe('tokens', () => {
    it('issues a Bearer pair for form or JSON credentials, not to be cached', async () => {
      const response = await postForm('/api/v1/auth/token/', { username: 'bob', password: 'bob-password-1' });
      expect(response.status).toBe(200);
      expect(response.headers.get('cache-control')).toBe('no-store');
      const pair = (await response.json()) as TokenPair;
      expect(Object.keys(pair).sort()).toEqual(['access_token', 'expires_in', 'refresh_token', 'token_type']);
      expect(pair).toMatchObject({ token_type: 'Bearer', expires_in: 900 });
      expect(decodeProtectedHeader(pair.access_token)).toMatchObject({ alg: 'HS256', kid: expect.any(String) });
      expect(decodeJwt(pair.access_token)).toMatchObject({ sub: '2', name: 'bob', typ: 'access', pwd: expect.any(Number) });
      secrets.add(pair.access_token).add(pair.refresh_token);

      const json = await api('/api/v1/auth/token/', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'bob', password: 'bob-password-1' }),
      });
      expect(json.status).toBe(200);
      secrets.add(((await json.json()) as TokenPair).access_token);
    });

    it('authenticates writes and reads with Authorization: Bearer', async () => {
      const { access_token } = await obtainToken('bob', 'bob-password-1');
      const created = await createExperience({ authorization: `Bearer ${access_token}` });
      expect(created.status).toBe(201);
      expect(await created.json()).toMatchObject({ owner: '/api/v1/users/2/' });
      const me = await api('/api/v1/users/me/', { headers: { authorization: `Bearer ${access_token}` } });
      expect(await me.json()).toMatchObject({ id: 2, username: 'bob' });
    });

    it('answers 400 with field errors for missing or non-string credentials', async () => {
      const empty = await expectProblem(await postForm('/api/v1/auth/token/', {}), 400);
      expect(empty.errors).toEqual({ username: ['This field is required.'], password: ['This field is required.'] });
      const typed = await api('/api/v1/auth/token/', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 7, password: 'x' }),
      });
      expect((await expectProblem(typed, 400)).errors).toEqual({ username: ['Not a valid string.'] });
      await expectProblem(await api('/api/v1/auth/token/', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"username":' }), 400);
    });

    it('answers 401 alike for a wrong password and an unknown user', async () => {
      const wrong = await expectProblem(await postForm('/api/v1/auth/token/', { username: 'bob', password: 'not-it' }), 401);
      const unknown = await expectProblem(await postForm('/api/v1/auth/token/', { username: 'nobody', password: 'not-it' }), 401);
      expect(unknown).toEqual(wrong);
    });

    it('offers only POST on the token endpoints', async () => {
      const response = await api('/api/v1/auth/token/');
      expect(response.status).toBe(405);
      expect(response.headers.get('allow')).toBe('OPTIONS, POST');
      expect((await api('/api/v1/auth/token/refresh/')).status).toBe(405);
    });

    it('refreshes into a new pair and retires the old refresh token', async () => {
      const first = await obtainToken('bob', 'bob-password-1');
      const response = await postForm('/api/v1/auth/token/refresh/', { refresh_token: first.refresh_token });
      expect(response.status).toBe(200);
      expect(response.headers.get('cache-control')).toBe('no-store');
      const second = (await response.json()) as TokenPair;
      secrets.add(second.access_token).add(second.refresh_token);
      expect(second.refresh_token).not.toBe(first.refresh_token);
      const me = await api('/api/v1/users/me/', { headers: { authorization: `Bearer ${second.access_token}` } });
      expect(me.status).toBe(200);

      // A retired token presented again: it was copied. The family goes, the newest token too.
      await expectProblem(await postForm('/api/v1/auth/token/refresh/', { refresh_token: first.refresh_token }), 401);
      await expectProblem(await postForm('/api/v1/auth/token/refresh/', { refresh_token: second.refresh_token }), 401);
      // Other logins of the same user are other families, untouched.
      const unrelated = await obtainToken('bob', 'bob-password-1');
      expect((await postForm('/api/v1/auth/token/refresh/', { refresh_token: unrelated.refresh_token })).status).toBe(200);
    });

    it('refuses an access token at the refresh endpoint, and a missing field', async () => {
      const { access_token } = await obtainToken('bob', 'bob-password-1');
      await expectProblem(await postForm('/api/v1/auth/token/refresh/', { refresh_token: access_token }), 401);
      await expectProblem(await postForm('/api/v1/auth/token/refresh/', { refresh_token: 'garbage' }), 401);
      const missing = await expectProblem(await postForm('/api/v1/auth/token/refresh/', {}), 400);
      expect(missing.errors).toEqual({ refresh_token: ['This field is required.'] });
    });

    it('refuses expired tokens (ACCESS_TOKEN_SECONDS=1)', async () => {
      const { access_token, expires_in } = await obtainToken('bob', 'bob-password-1', otherApi);
      expect(expires_in).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 2_100));
      const body = await expectProblem(await otherApi('/api/v1/users/me/', { headers: { authorization: `Bearer ${access_token}` } }), 401);
      expect(body.detail).toMatch(/expired/);
    });

    it('shares its key between processes on one database', async () => {
      // Issued by the process with the default 15-minute lifetime, so a slow machine cannot
      // expire it before the other process verifies it.
      const { access_token } = await obtainToken('bob', 'bob-password-1');
      expect((await otherApi('/api/v1/users/me/', { headers: { authorization: `Bearer ${access_token}` } })).status).toBe(200);
    });

    it('answers 401 problem+json for every bad Bearer token, on reads too', async () => {
      const { access_token } = await obtainToken('bob', 'bob-password-1');
      const [header, payload, signature] = access_token.split('.') as [string, string, string];
      const claims = decodeJwt(access_token);
      const kid = decodeProtectedHeader(access_token).kid!;
      const none = `${base64url.encode(JSON.stringify({ alg: 'none', typ: 'JWT' }))}.${payload}.`;
      const elevated = `${header}.${base64url.encode(JSON.stringify({ ...claims, sub: '1', name: 'admin' }))}.${signature}`;
      const resign = (alg: string, protectedKid: string) =>
        new SignJWT(claims).setProtectedHeader({ alg, kid: protectedKid }).sign(randomBytes(alg === 'HS512' ? 64 : 32));
      const bad = [
        '',
        'x',
        'a.b.c',
        access_token.slice(0, -5),
        `${header}.${payload}`,
        none,
        elevated,
        await resign('HS256', kid),
        await resign('HS512', kid),
        await resign('HS256', 'unknown-kid'),
      ];
      for (const token of bad) {
        for (const request of [
          () => api('/api/v1/experiences/', { headers: { authorization: `Bearer ${token}` } }),
          () => createExperience({ authorization: `Bearer ${token}` }),
        ]) {
          const response = await request();
          const body = await expectProblem(response, 401);
          expect(response.headers.get('www-authenticate')).toBe('Basic realm="api"');
          expect(body.type).toBe('urn:restwire:problem:invalid_token');
        }
      }
    });

    it('ignores schemes it does not know, and refuses a garbled Basic header', async () => {
      for (const authorization of ['Token abc', 'Digest username="bob"', 'garbage', 'Negotiate']) {
        expect((await api('/api/v1/experiences/', { headers: { authorization } })).status).toBe(200);
        const write = await expectProblem(await createExperience({ authorization }), 401);
        expect(write.type).toBe('urn:restwire:problem:not_authenticated');
      }
      for (const authorization of ['Basic !!!', `Basic ${Buffer.from('no-colon').toString('base64')}`, 'Basic']) {
        await expectProblem(await api('/api/v1/experiences/', { headers: { authorization } }), 401);
      }
    });

    it('prints a token with `restwire token NAME`, and exits 1 for an unknown user', async () => {
      const printed = await tokenCommand(database, 'bob');
      expect(printed.code).toBe(0);
      expect(printed.stdout).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+\n$/);
      const token = printed.stdout.trim();
      secrets.add(token);
      const me = await api('/api/v1/users/me/', { headers: { authorization: `Bearer ${token}` } });
      expect(await me.json()).toMatchObject({ username: 'bob' });

      const unknown = await tokenCommand(database, 'nobody');
      expect(unknown.code).toBe(1);
      expect(unknown.stdout).toBe('');
      expect(unknown.stderr).toMatch(/nobody/);
    });
  });

  describe('sessions', () => {
    it('logs in with HttpOnly, SameSite=Lax cookies and a readable CSRF cookie', async () => {
      const session = await login('bob', 'bob-password-1');
      const [sessionCookie, csrfCookie] = [
        session.setCookie.find((c) => c.startsWith('sessionid='))!,
        session.setCookie.find((c) => c.startsWith('csrftoken='))!,
      ];
      expect(sessionCookie).toMatch(/; HttpOnly/);
      expect(sessionCookie).toMatch(/; SameSite=Lax/);
      expect(sessionCookie).toMatch(/; Path=\//);
      expect(sessionCookie).not.toMatch(/; Secure/);
      expect(csrfCookie).not.toMatch(/HttpOnly/);
      expect(csrfCookie).toMatch(/; SameSite=Lax/);
      const me = await api('/api/v1/users/me/', { headers: { cookie: session.cookie } });
      expect(await me.json()).toMatchObject({ username: 'bob' });
    });

    it('marks the cookies Secure when PUBLIC_URL is https', async () => {
      const session = await login('bob', 'bob-password-1', otherApi);
      expect(session.setCookie.every((c) => c.includes('; Secure'))).toBe(true);
    });

    it('rotates the CSRF token at every login', async () => {
      const first = await login('bob', 'bob-password-1');
      const second = await login('bob', 'bob-password-1');
      expect(second.csrftoken).not.toBe(first.csrftoken);
      expect(second.sessionid).not.toBe(first.sessionid);
    });

    it('needs X-CSRFToken equal to the session token for unsafe methods (403 otherwise)', async () => {
      const session = await login('bob', 'bob-password-1');
      const other = await login('bob', 'bob-password-1');
      const missing = await expectProblem(await createExperience({ cookie: session.cookie }), 403);
      expect(missing.detail).toMatch(/CSRF/);
      await expectProblem(await createExperience({ cookie: session.cookie, 'x-csrftoken': 'forged' }), 403);
      await expectProblem(await createExperience({ cookie: session.cookie, 'x-csrftoken': other.csrftoken }), 403);
      // A cookie-tossing attacker who replaces the csrftoken cookie still does not know the session's token.
      await expectProblem(
        await createExperience({ cookie: `sessionid=${session.sessionid}; csrftoken=forged`, 'x-csrftoken': 'forged' }),
        403,
      );
      const ok = await createExperience({ cookie: session.cookie, 'x-csrftoken': session.csrftoken });
      expect(ok.status).toBe(201);
      expect(await ok.json()).toMatchObject({ owner: '/api/v1/users/2/' });
      // Safe methods need nothing.
      expect((await api('/api/v1/users/me/', { headers: { cookie: session.cookie } })).status).toBe(200);
    });

    it('refuses unsafe session requests from another origin', async () => {
      const session = await login('bob', 'bob-password-1');
      const headers = { cookie: session.cookie, 'x-csrftoken': session.csrftoken };
      await expectProblem(await createExperience({ ...headers, origin: 'https://evil.example' }), 403);
      await expectProblem(await createExperience({ ...headers, origin: 'null' }), 403);
      await expectProblem(await createExperience({ ...headers, referer: 'https://evil.example/page' }), 403);
      expect((await createExperience({ ...headers, origin: server.url })).status).toBe(201);
      expect((await createExperience({ ...headers, referer: `${server.url}/api/v1/` })).status).toBe(201);

      const secure = await login('bob', 'bob-password-1', otherApi);
      const secureHeaders = { cookie: secure.cookie, 'x-csrftoken': secure.csrftoken };
      expect((await createExperience({ ...secureHeaders, origin: 'https://restwire.example' }, otherApi)).status).toBe(201);
      await expectProblem(await createExperience({ ...secureHeaders, origin: 'http://restwire.example' }, otherApi), 403);
    });

    it('refuses a session login from another origin (login CSRF): 403, no cookies', async () => {
      for (const headers of [{ origin: 'https://evil.example' }, { origin: 'null' }, { referer: 'https://evil.example/page' }]) {
        const refused = await postForm('/api/v1/auth/session/', { username: 'bob', password: 'bob-password-1' }, headers);
        expect((await expectProblem(refused, 403)).detail).toMatch(/another origin/);
        expect(refused.headers.getSetCookie()).toEqual([]);
      }
      const own = await postForm('/api/v1/auth/session/', { username: 'bob', password: 'bob-password-1' }, { origin: server.url });
      expect(own.status).toBe(204);
      const viaPublicUrl = await postForm(
        '/api/v1/auth/session/',
        { username: 'bob', password: 'bob-password-1' },
        { origin: 'https://restwire.example' },
        otherApi,
      );
      expect(viaPublicUrl.status).toBe(204);
    });

    it('lets Basic and Bearer requests through without a CSRF token, even beside a session cookie', async () => {
      const session = await login('bob', 'bob-password-1');
      const { access_token } = await obtainToken('bob', 'bob-password-1');
      expect((await createExperience({ cookie: session.cookie, authorization: `Bearer ${access_token}` })).status).toBe(201);
      const asAdmin = await createExperience({ cookie: session.cookie, authorization: adminAuth });
      expect(asAdmin.status).toBe(201);
      expect(await asAdmin.json()).toMatchObject({ owner: '/api/v1/users/1/' });
    });

    it('logs out with the CSRF token; the old cookie then means anonymous, never a 500', async () => {
      const session = await login('bob', 'bob-password-1');
      await expectProblem(await api('/api/v1/auth/session/', { method: 'DELETE', headers: { cookie: session.cookie } }), 403);
      const logout = await api('/api/v1/auth/session/', { method: 'DELETE', headers: { cookie: session.cookie, 'x-csrftoken': session.csrftoken } });
      expect(logout.status).toBe(204);
      const cleared = logout.headers.getSetCookie();
      expect(cleared).toHaveLength(2);
      expect(cleared.every((c) => /^(sessionid|csrftoken)=;/.test(c) && c.includes('Max-Age=0'))).toBe(true);

      await expectProblem(await api('/api/v1/users/me/', { headers: { cookie: session.cookie } }), 401);
      expect((await api('/api/v1/experiences/', { headers: { cookie: session.cookie } })).status).toBe(200);
      await expectProblem(await createExperience({ cookie: session.cookie, 'x-csrftoken': session.csrftoken }), 401);
      const again = await api('/api/v1/auth/session/', { method: 'DELETE', headers: { cookie: session.cookie, 'x-csrftoken': session.csrftoken } });
      expect(again.status).toBe(204);
    });

    it('treats a forged or garbled session cookie as no session', async () => {
      for (const cookie of [`sessionid=${randomBytes(32).toString('base64url')}`, 'sessionid=%%%', 'sessionid=', 'garbage']) {
        await expectProblem(await api('/api/v1/users/me/', { headers: { cookie } }), 401);
        await expectProblem(await createExperience({ cookie, 'x-csrftoken': 'x' }), 401);
      }
    });

    it('answers 400 and 401 at login as the token endpoint does', async () => {
      expect((await expectProblem(await postForm('/api/v1/auth/session/', { username: 'bob' }), 400)).errors).toEqual({
        password: ['This field is required.'],
      });
      const failed = await postForm('/api/v1/auth/session/', { username: 'bob', password: 'not-it' });
      await expectProblem(failed, 401);
      expect(failed.headers.getSetCookie()).toEqual([]);
    });
  });

  describe('signup', () => {
    it('is a 405 while ALLOW_SIGNUP is off', async () => {
      const response = await postForm('/api/v1/users/', { username: 'carol', password: 'carol-secret-9' });
      expect(response.status).toBe(405);
      expect(response.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
    });

    it('creates a user who can then sign in, when ALLOW_SIGNUP=true', async () => {
      const options = await otherApi('/api/v1/users/', { method: 'OPTIONS' });
      expect(options.headers.get('allow')).toBe('GET, HEAD, OPTIONS, POST');
      expect(await options.json()).toMatchObject({ actions: { POST: { username: { required: true }, password: { required: true } } } });

      secrets.add('carol-secret-9');
      const response = await postForm('/api/v1/users/', { username: 'carol', password: 'carol-secret-9' }, {}, otherApi);
      expect(response.status).toBe(201);
      const body = (await response.json()) as { url: string; id: number };
      expect(body).toEqual({ url: `/api/v1/users/${body.id}/`, id: body.id, username: 'carol', experiences: [] });
      expect(response.headers.get('location')).toBe(body.url);
      expect(JSON.stringify(body)).not.toContain('carol-secret-9');
      await obtainToken('carol', 'carol-secret-9');
    });

    it('refuses duplicates and weak or invalid input with field errors', async () => {
      const cases: Array<[Record<string, string>, Record<string, unknown>]> = [
        [{ username: 'carol', password: 'another-secret-1' }, { username: ['A user with that username already exists.'] }],
        [{ username: 'no spaces!', password: 'another-secret-1' }, { username: [expect.stringMatching(/valid username/)] }],
        [{ username: 'dave', password: 'short1' }, { password: [expect.stringMatching(/too short/)] }],
        [{ username: 'dave', password: '12345678901' }, { password: ['This password is entirely numeric.'] }],
        [{ username: 'daveydavey', password: 'DaveyDavey' }, { password: ['The password is too similar to the username.'] }],
        [{}, { username: ['This field is required.'], password: ['This field is required.'] }],
      ];
      for (const [fields, errors] of cases) {
        const body = await expectProblem(await postForm('/api/v1/users/', fields, {}, otherApi), 400);
        expect(body.errors).toEqual(errors);
      }
    });
  });

  describe('login throttling', () => {
    async function tokenStatus(username: string, password: string): Promise<Response> {
      return postForm('/api/v1/auth/token/', { username, password });
    }

    it('answers 429 with Retry-After after more than 10 failures for a username, for every scheme', async () => {
      await createUser(database, 'victim', 'victim-password-1');
      secrets.add('victim-password-1');
      for (let i = 0; i < 10; i++) expect((await tokenStatus('victim', `wrong-${i}`)).status).toBe(401);
      const blocked = await expectProblem(await tokenStatus('victim', 'wrong-11'), 429);
      expect(blocked.type).toBe('urn:restwire:problem:throttled');

      const right = await tokenStatus('victim', 'victim-password-1');
      await expectProblem(right, 429);
      const retryAfter = Number(right.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThan(800);
      expect(retryAfter).toBeLessThanOrEqual(900);
      await expectProblem(await api('/api/v1/users/me/', { headers: { authorization: basic('victim', 'victim-password-1') } }), 429);
      await expectProblem(await postForm('/api/v1/auth/session/', { username: 'victim', password: 'victim-password-1' }), 429);
      // Others sign in as usual.
      expect((await tokenStatus('bob', 'bob-password-1')).status).toBe(200);
    });

    it('counts failures of every scheme together', async () => {
      await createUser(database, 'victim2', 'victim2-password-1');
      for (let i = 0; i < 4; i++) expect((await tokenStatus('victim2', 'wrong')).status).toBe(401);
      for (let i = 0; i < 3; i++) {
        expect((await api('/api/v1/users/me/', { headers: { authorization: basic('victim2', 'wrong') } })).status).toBe(401);
      }
      for (let i = 0; i < 3; i++) expect((await postForm('/api/v1/auth/session/', { username: 'victim2', password: 'wrong' })).status).toBe(401);
      await expectProblem(await createExperience({ authorization: basic('victim2', 'wrong') }), 429);
    });

    it('lets in 16 concurrent right Basic requests on a cold credential cache, and still refuses a guessing burst after 10 failures', async () => {
      await createUser(database, 'busy', 'busy-password-1');
      secrets.add('busy-password-1');
      const me = () => api('/api/v1/users/me/', { headers: { authorization: basic('busy', 'busy-password-1') } });
      const burst = await Promise.all(Array.from({ length: 16 }, () => me()));
      expect(burst.map((r) => r.status)).toEqual(Array(16).fill(200));

      const guesses = await Promise.all(Array.from({ length: 30 }, (_, i) => tokenStatus('busy', `guess-${i}`)));
      const statuses = guesses.map((r) => r.status);
      expect(statuses.filter((s) => s === 401)).toHaveLength(10);
      expect(statuses.filter((s) => s === 429)).toHaveLength(20);
      await expectProblem(await me(), 429);
    });

    describe('per IP', () => {
      let fresh: RunningServer;
      beforeAll(async () => {
        // A process of its own: its IP count starts at zero, and the block does not spill into other tests.
        fresh = await startServer(database);
      });
      afterAll(async () => {
        await fresh?.stop();
      });

      it('answers 429 after more than 100 failures from one IP, whatever the usernames', async () => {
        const attempt = (username: string, password: string) =>
          fetch(`${fresh.url}/api/v1/auth/token/`, { method: 'POST', headers: { 'content-type': FORM }, body: form({ username, password }) });
        const statuses: number[] = [];
        for (let batch = 0; batch < 100; batch += 5) {
          const responses = await Promise.all([0, 1, 2, 3, 4].map((i) => attempt(`stranger${batch + i}`, 'guess')));
          statuses.push(...responses.map((r) => r.status));
        }
        expect(statuses).toEqual(Array(100).fill(401));
        expect((await attempt('stranger-last', 'guess')).status).toBe(429);
        const admin = await attempt(ADMIN.username, ADMIN.password);
        expect(admin.status).toBe(429);
        expect(Number(admin.headers.get('retry-after'))).toBeGreaterThan(0);
      });
    });
  });

  it('never writes passwords, tokens or cookies to its logs', async () => {
    expect(secrets.size).toBeGreaterThan(20);
    for (const output of [server.output(), other.output()]) {
      expect(output).toContain('request completed');
      for (const secret of secrets) expect(output).not.toContain(secret);
      expect(output.toLowerCase()).not.toContain('set-cookie');
      expect(output).not.toMatch(/"statusCode":5\d\d/);
    }
  });
});
