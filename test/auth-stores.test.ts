import type { FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, createTestDatabase, type TestDatabase } from './support/server.js';
import { loadConfig } from '../src/config.js';
import { openStorage, type Storage } from '../src/db/database.js';
import { AuthenticationFailed, InvalidToken } from '../src/http/errors.js';
import { createAuthentication } from '../src/auth/authentication.js';
import { loadKeys } from '../src/auth/keys.js';
import { RefreshTokens } from '../src/auth/refresh-tokens.js';
import { SessionStore } from '../src/auth/sessions.js';
import type { User } from '../src/http/caller.js';
import { UserStore } from '../src/auth/users.js';

/** The stores behind sign-in, on each database backend (what the black-box suite cannot reach: clocks, races, password changes). */
describe.each(BACKENDS)('sign-in stores on %s', (backend) => {
  let database: TestDatabase;
  let storage: Storage;
  let users: UserStore;
  let alice: User;
  const request = { ip: '10.1.2.3' } as FastifyRequest;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    storage = await openStorage({ databaseUrl: database.url, dataDir: database.env.DATA_DIR! });
    users = new UserStore(storage.db);
    alice = await users.create('alice', 'alice-password-1');
  });
  afterAll(async () => {
    await storage?.close();
    await database?.drop();
  });

  describe('refresh tokens', () => {
    it('works once; a second use revokes the whole family', async () => {
      const tokens = new RefreshTokens(storage.db, 3600);
      const first = await tokens.issue(alice.id);
      expect(first).toMatch(/^[A-Za-z0-9_-]{43}$/);
      const redeemed = await tokens.redeem(first);
      expect(redeemed.userId).toBe(alice.id);
      const second = await tokens.issue(alice.id, redeemed.family);
      await expect(tokens.redeem(first)).rejects.toThrow(/already used/);
      await expect(tokens.redeem(second)).rejects.toBeInstanceOf(AuthenticationFailed);
      const otherFamily = await tokens.issue(alice.id);
      expect((await tokens.redeem(otherFamily)).userId).toBe(alice.id);
    });

    it('stores only hashes', async () => {
      const token = await new RefreshTokens(storage.db, 3600).issue(alice.id);
      const rows = await storage.db.selectFrom('refresh_tokens').select('id_hash').execute();
      expect(rows.map((row) => row.id_hash)).not.toContain(token);
      expect(rows.every((row) => /^[0-9a-f]{64}$/.test(row.id_hash))).toBe(true);
    });

    it('lets only one of two racing refreshes through', async () => {
      const tokens = new RefreshTokens(storage.db, 3600);
      const token = await tokens.issue(alice.id);
      const results = await Promise.allSettled([tokens.redeem(token), tokens.redeem(token)]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    });

    it('refuses expired, unknown and malformed tokens', async () => {
      const clock = { now: Date.now() };
      const tokens = new RefreshTokens(storage.db, 60, () => clock.now);
      const token = await tokens.issue(alice.id);
      clock.now += 61_000;
      await expect(tokens.redeem(token)).rejects.toThrow(/expired/);
      await expect(tokens.redeem('A'.repeat(43))).rejects.toBeInstanceOf(AuthenticationFailed);
      await expect(tokens.redeem('eyJhbGciOiJIUzI1NiJ9.e30.x')).rejects.toBeInstanceOf(AuthenticationFailed);
      await expect(tokens.redeem('')).rejects.toBeInstanceOf(AuthenticationFailed);
    });
  });

  describe('sessions', () => {
    const policy = { idleMs: 120_000, absoluteMs: 600_000, secureCookies: false };

    it('finds a live session and its CSRF token; hashes the id at rest', async () => {
      const sessions = new SessionStore(storage.db, policy);
      const session = await sessions.create(alice.id);
      expect(await sessions.find(session.id)).toEqual({ user: alice, csrfToken: session.csrfToken });
      const stored = await storage.db.selectFrom('sessions').select('id_hash').execute();
      expect(stored.map((row) => row.id_hash)).not.toContain(session.id);
      await sessions.delete(session.id);
      expect(await sessions.find(session.id)).toBeNull();
    });

    it('ends after the idle time, unless used within it', async () => {
      const clock = { now: Date.now() };
      const sessions = new SessionStore(storage.db, policy, () => clock.now);
      const used = await sessions.create(alice.id);
      const idle = await sessions.create(alice.id);
      clock.now += 100_000;
      expect(await sessions.find(used.id)).not.toBeNull();
      clock.now += 100_000;
      expect(await sessions.find(used.id)).not.toBeNull();
      expect(await sessions.find(idle.id)).toBeNull();
    });

    it('ends after the absolute lifetime however busy', async () => {
      const clock = { now: Date.now() };
      const sessions = new SessionStore(storage.db, policy, () => clock.now);
      const session = await sessions.create(alice.id);
      for (let elapsed = 0; elapsed < 600_000; elapsed += 60_000) {
        expect(await sessions.find(session.id)).not.toBeNull();
        clock.now += 60_000;
      }
      clock.now += 1;
      expect(await sessions.find(session.id)).toBeNull();
    });

    it('ignores ids it did not issue', async () => {
      const sessions = new SessionStore(storage.db, policy);
      expect(await sessions.find('x'.repeat(43))).toBeNull();
      expect(await sessions.find("' or 1=1 --")).toBeNull();
    });

    it('sets HttpOnly only on the session cookie, and Secure when asked', () => {
      const plain = new SessionStore(storage.db, policy).cookiesFor({ id: 'S', csrfToken: 'C' });
      expect(plain).toEqual(['sessionid=S; Max-Age=600; Path=/; HttpOnly; SameSite=Lax', 'csrftoken=C; Max-Age=600; Path=/; SameSite=Lax']);
      const secure = new SessionStore(storage.db, { ...policy, secureCookies: true }).cookiesFor({ id: 'S', csrfToken: 'C' });
      expect(secure.every((cookie) => cookie.includes('; Secure'))).toBe(true);
    });
  });

  describe('a password change', () => {
    it('ends refresh tokens and sessions, voids access tokens and cached credentials in this process', async () => {
      const bob = await users.create('bob', 'bob-password-1');
      const config = loadConfig({ DATA_DIR: database.env.DATA_DIR });
      const keys = await loadKeys(storage.db, null);
      const auth = await createAuthentication({ config, storage, keys, users });

      expect(await auth.verify('bob', 'bob-password-1', request)).toEqual(bob);
      const { accessToken } = await auth.accessTokens.issue(bob);
      const refresh = await auth.refreshTokens.issue(bob.id);
      const session = await auth.sessions.create(bob.id);
      // The password moves on in the same millisecond at the earliest; make it a later one.
      await new Promise((resolve) => setTimeout(resolve, 5));

      await users.setPassword(bob.id, 'bob-password-2');

      await expect(auth.accessTokens.verify(accessToken)).rejects.toBeInstanceOf(InvalidToken);
      expect(await auth.verify('bob', 'bob-password-1', request)).toBeNull();
      expect(await auth.verify('bob', 'bob-password-2', request)).toMatchObject({ id: bob.id });
      await expect(auth.refreshTokens.redeem(refresh)).rejects.toBeInstanceOf(AuthenticationFailed);
      expect(await auth.sessions.find(session.id)).toBeNull();
    });
  });
});
