import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * API keys (ACCESS.md §5), seen from outside: created once and shown once, each user's own,
 * used as `Authorization: Bearer rwk_…` within their scopes, refused once expired or revoked.
 */
const PROBLEM = 'application/problem+json; charset=utf-8';

interface KeyRecord {
  id: number;
  url: string;
  name: string;
  scopes: string[];
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  key?: string;
}

describe.each(BACKENDS)('API keys on %s', (backend) => {
  let database: TestDatabase;
  let server: RunningServer;
  const bobAuth = basic('bob', 'bob-password-1');
  /** Every key a client saw; none may appear in the server's log. */
  const seen = new Set<string>();

  const api = (path: string, init: RequestInit = {}, via = () => server) => fetch(`${via().url}${path}`, { redirect: 'manual', ...init });
  const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
  const send = (method: string, path: string, authorization: string, body?: unknown, via = () => server) =>
    api(path, { method, headers: { authorization, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) }, via);

  async function createKey(authorization: string, body: Record<string, unknown>): Promise<KeyRecord & { key: string }> {
    const response = await send('POST', '/api/v1/keys/', authorization, body);
    expect(response.status, await response.clone().text()).toBe(201);
    const created = (await response.json()) as KeyRecord & { key: string };
    seen.add(created.key);
    return created;
  }

  async function expectInsufficientScope(response: Response): Promise<void> {
    expect(response.status).toBe(403);
    expect(response.headers.get('content-type')).toBe(PROBLEM);
    expect(response.headers.get('www-authenticate')).toBe('Bearer error="insufficient_scope"');
    expect(((await response.json()) as { type: string }).type).toMatch(/insufficient_scope$/);
  }

  async function expectInvalidToken(response: Response): Promise<void> {
    expect(response.status).toBe(401);
    expect(response.headers.get('content-type')).toBe(PROBLEM);
    expect(((await response.json()) as { type: string }).type).toMatch(/invalid_token$/);
  }

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    // First, so that its first start creates the admin.
    server = await startServer(database);
    await createUser(database, 'bob', 'bob-password-1');
    await createUser(database, 'carol', 'carol-password-1');
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  it('shows a new key once, in the 201, and never again', async () => {
    const response = await send('POST', '/api/v1/keys/', adminAuth, { name: 'deploy', scopes: ['experiences:read'] });
    expect(response.status).toBe(201);
    expect(response.headers.get('cache-control')).toBe('no-store');
    const created = (await response.json()) as KeyRecord & { key: string };
    seen.add(created.key);
    expect(created.key).toMatch(/^rwk_[A-Za-z0-9_-]{43}$/);
    expect(created).toMatchObject({ name: 'deploy', scopes: ['experiences:read'], prefix: created.key.slice(0, 12), last_used_at: null, expires_at: null });
    expect(created.url).toBe(`/api/v1/keys/${created.id}/`);
    expect(response.headers.get('location')).toBe(created.url);
    expect(Date.parse(created.created_at)).toBeGreaterThan(Date.now() - 60_000);

    const record = (await (await send('GET', created.url, adminAuth)).json()) as KeyRecord;
    expect(record).toEqual({ ...created, key: undefined });
    expect(Object.keys(record)).not.toContain('key');
    const list = (await (await send('GET', '/api/v1/keys/', adminAuth)).json()) as { results: KeyRecord[] };
    expect(list.results.map((key) => key.id)).toContain(created.id);
    expect(JSON.stringify(list)).not.toContain(created.key);
  });

  it('lists and shows only the caller’s own keys: another’s is a 404', async () => {
    const admins = await createKey(adminAuth, { name: 'admin’s', scopes: ['*:read'] });
    const bobs = await createKey(bobAuth, { name: 'bob’s', scopes: ['*:read'] });
    const list = (await (await send('GET', '/api/v1/keys/', bobAuth)).json()) as { results: KeyRecord[] };
    expect(list.results.map((key) => key.id)).toEqual([bobs.id]);
    expect((await send('GET', admins.url, bobAuth)).status).toBe(404);
    expect((await send('DELETE', admins.url, bobAuth)).status).toBe(404);
    expect((await send('GET', admins.url, adminAuth)).status).toBe(200);
  });

  it('acts as its user within its scopes', async () => {
    const reader = await createKey(bobAuth, { name: 'reader', scopes: ['experiences:read'] });
    const writer = await createKey(bobAuth, { name: 'writer', scopes: ['experiences:write', 'webhooks:read'] });

    expect((await api('/api/v1/experiences/', { headers: bearer(reader.key) })).status).toBe(200);
    expect((await api('/api/v1/experiences/', { method: 'HEAD', headers: bearer(reader.key) })).status).toBe(200);
    expect((await api('/api/v1/experiences/', { method: 'OPTIONS', headers: bearer(reader.key) })).status).toBe(200);
    await expectInsufficientScope(await send('POST', '/api/v1/experiences/', `Bearer ${reader.key}`, { title: 'no', q_like_dislike: 'like' }));
    await expectInsufficientScope(await api('/api/v1/webhooks/', { headers: bearer(reader.key) }));
    await expectInsufficientScope(await api('/api/v1/users/', { headers: bearer(reader.key) }));

    const created = await send('POST', '/api/v1/experiences/', `Bearer ${writer.key}`, { title: 'By key', q_like_dislike: 'like' });
    expect(created.status).toBe(201);
    const experience = (await created.json()) as { url: string; owner: string };
    expect(experience.owner).toMatch(/^\/api\/v1\/users\/\d+\/$/);
    const bob = (await (await api('/api/v1/users/me/', { headers: { authorization: bobAuth } })).json()) as { url: string };
    expect(experience.owner).toBe(bob.url);
    expect((await send('PATCH', experience.url, `Bearer ${writer.key}`, { title: 'Changed by key' })).status).toBe(200);
    expect((await api(experience.url, { headers: bearer(writer.key) })).status).toBe(200);
    expect((await api('/api/v1/webhooks/', { headers: bearer(writer.key) })).status).toBe(200);
    await expectInsufficientScope(await send('POST', '/api/v1/webhooks/', `Bearer ${writer.key}`, { target_url: 'http://127.0.0.1:9/' }));
    expect((await send('DELETE', experience.url, `Bearer ${writer.key}`)).status).toBe(204);

    // users/me answers every key, whatever its scopes.
    const me = await api('/api/v1/users/me/', { headers: bearer(reader.key) });
    expect(me.status).toBe(200);
    expect(((await me.json()) as { username: string }).username).toBe('bob');
  });

  it('never manages keys or users, whatever its scopes', async () => {
    const everything = await createKey(bobAuth, { name: 'everything', scopes: ['*:write'] });
    await expectInsufficientScope(await send('POST', '/api/v1/keys/', `Bearer ${everything.key}`, { name: 'child', scopes: ['*:read'] }));
    await expectInsufficientScope(await api('/api/v1/keys/', { headers: bearer(everything.key) }));
    await expectInsufficientScope(await send('DELETE', everything.url, `Bearer ${everything.key}`));
    expect((await api('/api/v1/users/', { headers: bearer(everything.key) })).status).toBe(200);
    expect((await api('/api/v1/webhooks/', { headers: bearer(everything.key) })).status).toBe(200);
  });

  it('refuses an unknown scope with a 400 naming scopes, and stores nothing', async () => {
    const before = ((await (await send('GET', '/api/v1/keys/', adminAuth)).json()) as { results: unknown[] }).results.length;
    for (const scopes of [['experiences:admin'], ['nothing:read'], ['keys:read'], ['users:write'], 'experiences:read', []]) {
      const response = await send('POST', '/api/v1/keys/', adminAuth, { name: 'bad', scopes });
      expect(response.status, JSON.stringify(scopes)).toBe(400);
      expect(Object.keys(((await response.json()) as { errors: Record<string, string[]> }).errors)).toEqual(['scopes']);
    }
    const after = ((await (await send('GET', '/api/v1/keys/', adminAuth)).json()) as { results: unknown[] }).results.length;
    expect(after).toBe(before);
  });

  it('allows at most 50 keys a user', async () => {
    for (let i = 0; i < 50; i++) await createKey(basic('carol', 'carol-password-1'), { name: `key ${i}`, scopes: ['experiences:read'] });
    const refused = await send('POST', '/api/v1/keys/', basic('carol', 'carol-password-1'), { name: 'one too many', scopes: ['experiences:read'] });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(await refused.json())).toContain('at most 50');
  });

  it('refuses an unknown key and an expired one with 401 invalid_token', async () => {
    await expectInvalidToken(await api('/api/v1/experiences/', { headers: bearer('rwk_thisKeyWasNeverIssuedByTheServerAtAll000000') }));
    const soon = await createKey(bobAuth, { name: 'short-lived', scopes: ['experiences:read'], expires_at: new Date(Date.now() + 1500).toISOString() });
    expect(soon.expires_at).not.toBeNull();
    expect((await api('/api/v1/experiences/', { headers: bearer(soon.key) })).status).toBe(200);
    await expect.poll(async () => (await api('/api/v1/experiences/', { headers: bearer(soon.key) })).status, { timeout: 5000, interval: 200 }).toBe(401);
    await expectInvalidToken(await api('/api/v1/experiences/', { headers: bearer(soon.key) }));
    const past = await send('POST', '/api/v1/keys/', bobAuth, { name: 'past', scopes: ['experiences:read'], expires_at: '2001-01-01T00:00:00Z' });
    expect(past.status).toBe(400);
    expect(Object.keys(((await past.json()) as { errors: Record<string, string[]> }).errors)).toEqual(['expires_at']);
  });

  it('refuses a revoked key at once', async () => {
    const key = await createKey(bobAuth, { name: 'revoked', scopes: ['experiences:read'] });
    expect((await api('/api/v1/experiences/', { headers: bearer(key.key) })).status).toBe(200);
    expect((await send('DELETE', key.url, bobAuth)).status).toBe(204);
    await expectInvalidToken(await api('/api/v1/experiences/', { headers: bearer(key.key) }));
    expect((await send('GET', key.url, bobAuth)).status).toBe(404);
  });

  it('records last_used_at, to the minute', async () => {
    const key = await createKey(bobAuth, { name: 'used', scopes: ['experiences:read'] });
    expect(key.last_used_at).toBeNull();
    expect((await api('/api/v1/experiences/', { headers: bearer(key.key) })).status).toBe(200);
    const record = (await (await send('GET', key.url, bobAuth)).json()) as KeyRecord;
    expect(record.last_used_at).not.toBeNull();
    const used = Date.parse(record.last_used_at!);
    expect(used % 60_000).toBe(0);
    expect(Date.now() - used).toBeLessThan(61_000);
  });

  it('counts a key’s requests against its user’s rate limit', async () => {
    const key = await createKey(bobAuth, { name: 'counted', scopes: ['experiences:read'] });
    const byKey = await api('/api/v1/experiences/', { headers: bearer(key.key) });
    const byPassword = await api('/api/v1/experiences/', { headers: { authorization: bobAuth } });
    expect(Number(byPassword.headers.get('x-rate-limit-remaining'))).toBe(Number(byKey.headers.get('x-rate-limit-remaining')) - 1);
  });

  it('never writes a key to the log', async () => {
    expect(seen.size).toBeGreaterThan(0);
    for (const key of seen) expect(server.output()).not.toContain(key);
  });

  it.runIf(backend === 'postgres')('refuses a revoked key in every process within 5 seconds', async () => {
    const other = await startServer(database);
    try {
      const key = await createKey(bobAuth, { name: 'shared', scopes: ['experiences:read'] });
      // The other process has the key in its lookup cache before the revoke.
      expect((await api('/api/v1/experiences/', { headers: bearer(key.key) }, () => other)).status).toBe(200);
      expect((await send('DELETE', key.url, bobAuth)).status).toBe(204);
      const revokedAt = Date.now();
      await expect
        .poll(async () => (await api('/api/v1/experiences/', { headers: bearer(key.key) }, () => other)).status, { timeout: 6000, interval: 100 })
        .toBe(401);
      expect(Date.now() - revokedAt).toBeLessThanOrEqual(5_100);
    } finally {
      await other.stop();
    }
  });
});
