import { randomBytes } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { Throttled } from '../http/errors.js';
import type { User } from '../http/caller.js';
import { openRedisStore, type RedisStore } from '../http/throttling/redis-store.js';
import { CredentialCache } from './credential-cache.js';
import { LOGIN_LIMITS, LoginThrottle, throttledVerifier } from './login-throttle.js';
import { PasswordChangeLog } from './password-changes.js';

const alice: User = { id: 1, username: 'alice', passwordChangedAt: 0, roles: [] };

const newCache = () => new CredentialCache(randomBytes(32), new PasswordChangeLog(900_000));

/** A password check that takes a while, as scrypt does, so that a burst is in flight at once. */
const slowCheck = () =>
  vi.fn(async (_username: string, password: string) => {
    await new Promise((resolve) => setTimeout(resolve, 20));
    return password === 'right' ? alice : null;
  });

async function outcome(promise: Promise<unknown>): Promise<'ok' | number> {
  try {
    await promise;
    return 'ok';
  } catch (error) {
    if (error instanceof Throttled) return error.retryAfterSeconds;
    throw error;
  }
}

/** One attempt that fails: reserved, then failed. */
const fail = async (throttle: LoginThrottle, username: string, ip: string) => (await throttle.reserve(username, ip)).failed();

describe('LoginThrottle', () => {
  it('allows 10 failures for a username in 15 minutes; the 11th and everything after are 429', async () => {
    const throttle = new LoginThrottle();
    for (let i = 0; i < 10; i++) {
      expect(await outcome(throttle.check('alice', '10.0.0.1'))).toBe('ok');
      expect(await outcome(fail(throttle, 'alice', '10.0.0.1'))).toBe('ok');
    }
    const retryAfter = await outcome(fail(throttle, 'alice', '10.0.0.1'));
    expect(retryAfter).toBeGreaterThan(890);
    expect(retryAfter).toBeLessThanOrEqual(900);
    // Blocked for that username from anywhere, while other usernames go on.
    expect(await outcome(throttle.check('alice', '10.0.0.2'))).toBeGreaterThan(0);
    expect(await outcome(throttle.check('bob', '10.0.0.1'))).toBe('ok');
  });

  it('allows 100 failures from one IP, whatever the usernames', async () => {
    const throttle = new LoginThrottle();
    for (let i = 0; i < 100; i++) expect(await outcome(fail(throttle, `user${i}`, '10.0.0.9'))).toBe('ok');
    expect(await outcome(fail(throttle, 'one-more', '10.0.0.9'))).toBeGreaterThan(0);
    expect(await outcome(throttle.check('alice', '10.0.0.9'))).toBeGreaterThan(0);
    expect(await outcome(throttle.check('alice', '10.0.0.10'))).toBe('ok');
  });

  it('lets the username in again when the window ends', async () => {
    const second = { limit: 2, windowSeconds: 1, text: '2/second' };
    const throttle = new LoginThrottle(undefined, { perUsername: second, perIp: LOGIN_LIMITS.perIp });
    await fail(throttle, 'alice', '10.0.0.1');
    await fail(throttle, 'alice', '10.0.0.1');
    expect(await outcome(fail(throttle, 'alice', '10.0.0.1'))).toBe(1);
    expect(await outcome(throttle.check('alice', '10.0.0.1'))).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect(await outcome(throttle.check('alice', '10.0.0.1'))).toBe('ok');
  });
});

describe('throttledVerifier', () => {
  const request = { ip: '10.0.0.1' } as FastifyRequest;

  it('counts failures and refuses even the right password once blocked, without checking it', async () => {
    const inner = vi.fn(async (_username: string, password: string) => (password === 'right' ? alice : null));
    const verify = throttledVerifier(inner, new LoginThrottle(), newCache());
    for (let i = 0; i < 10; i++) expect(await verify('alice', 'wrong', request)).toBeNull();
    await expect(verify('alice', 'wrong', request)).rejects.toBeInstanceOf(Throttled);
    inner.mockClear();
    await expect(verify('alice', 'right', request)).rejects.toBeInstanceOf(Throttled);
    expect(inner).not.toHaveBeenCalled();
  });

  it('checks at most 11 passwords of a burst of 300 for one username: the right one at #290 is refused', async () => {
    const inner = slowCheck();
    const verify = throttledVerifier(inner, new LoginThrottle(), newCache());
    const outcomes = await Promise.all(
      Array.from({ length: 300 }, (_, i) => outcome(verify('alice', i === 289 ? 'right' : `wrong-${i}`, request))),
    );
    expect(inner.mock.calls.length).toBeLessThanOrEqual(11);
    expect(outcomes[289]).not.toBe('ok');
    expect(outcomes.filter((o) => o !== 'ok')).toHaveLength(300 - 10);
  });

  it('lets known-good credentials through on a look at the count, and refuses them once blocked', async () => {
    const inner = vi.fn(async (_username: string, password: string) => (password === 'right' ? alice : null));
    const throttle = new LoginThrottle();
    const cache = newCache();
    cache.set('alice', 'right', alice);
    const verify = throttledVerifier(inner, throttle, cache);
    // A busy client's concurrent requests never count against it.
    const burst = await Promise.all(Array.from({ length: 50 }, () => verify('alice', 'right', request)));
    expect(burst.every((user) => user === alice)).toBe(true);
    for (let i = 0; i < 10; i++) expect(await verify('alice', 'wrong', request)).toBeNull();
    await expect(verify('alice', 'wrong', request)).rejects.toBeInstanceOf(Throttled);
    await expect(verify('alice', 'right', request)).rejects.toBeInstanceOf(Throttled);
  });

  it('does not count successes', async () => {
    const inner = vi.fn(async () => alice);
    const verify = throttledVerifier(inner, new LoginThrottle(), newCache());
    for (let i = 0; i < 20; i++) expect(await verify('alice', 'right', request)).toEqual(alice);
  });

  it('checks a correct password in full once, then from the cache', async () => {
    const cache = newCache();
    const inner = vi.fn(async (username: string, password: string) => (username === 'alice' && password === 'right-pw' ? alice : null));
    const verify = throttledVerifier(inner, new LoginThrottle(), cache);
    expect(await verify('alice', 'right-pw', request)).toEqual(alice);
    expect(await verify('alice', 'right-pw', request)).toEqual(alice);
    expect(inner).toHaveBeenCalledTimes(1);
  });

  it('checks a wrong password in full every time', async () => {
    const cache = newCache();
    const inner = vi.fn(async () => null);
    const verify = throttledVerifier(inner, new LoginThrottle(), cache);
    for (let i = 0; i < 3; i++) expect(await verify('alice', 'wrong', request)).toBeNull();
    expect(inner).toHaveBeenCalledTimes(3);
    expect(cache.size).toBe(0);
  });

  it('lets in a burst of 16 right passwords on a cold cache, checked once, and counts later failures from zero', async () => {
    const inner = slowCheck();
    const verify = throttledVerifier(inner, new LoginThrottle(), newCache());
    const burst = await Promise.all(Array.from({ length: 16 }, () => outcome(verify('alice', 'right', request))));
    expect(burst).toEqual(Array(16).fill('ok'));
    expect(inner).toHaveBeenCalledTimes(1);
    // A burst of different guesses is still counted one by one: 10 failures, the rest refused.
    const guesses = await Promise.all(Array.from({ length: 30 }, (_, i) => outcome(verify('alice', `wrong-${i}`, request))));
    expect(guesses.filter((o) => o === 'ok')).toHaveLength(10);
    expect(inner).toHaveBeenCalledTimes(1 + 11);
  });

  it('counts each request of a burst with the same wrong password, checked once', async () => {
    const inner = slowCheck();
    const verify = throttledVerifier(inner, new LoginThrottle(), newCache());
    const burst = await Promise.all(Array.from({ length: 30 }, () => outcome(verify('alice', 'wrong', request))));
    expect(inner).toHaveBeenCalledTimes(1);
    expect(burst.filter((o) => o === 'ok')).toHaveLength(10);
    expect(await outcome(verify('alice', 'right', request))).toBeGreaterThan(0);
  });

  it('does not share a check under way with another address', async () => {
    const inner = slowCheck();
    const throttle = new LoginThrottle();
    const verify = throttledVerifier(inner, throttle, newCache());
    const blockedIp = { ip: '10.0.0.66' } as FastifyRequest;
    for (let i = 0; i < 101; i++) await outcome(verify(`user${i}`, 'wrong', blockedIp));
    const [allowed, refused] = await Promise.all([outcome(verify('alice', 'right', request)), outcome(verify('alice', 'right', blockedIp))]);
    expect(allowed).toBe('ok');
    expect(refused).toBeGreaterThan(0);
  });

  it('does not count refused attempts against the IP: the IP still allows its 100 failures', async () => {
    const verify = throttledVerifier(async () => null, new LoginThrottle(), newCache());
    for (let i = 0; i < 10; i++) expect(await outcome(verify('alice', `wrong-${i}`, request))).toBe('ok');
    expect(await outcome(verify('alice', 'wrong-10', request))).toBeGreaterThan(0);
    for (let i = 0; i < 200; i++) expect(await outcome(verify('alice', 'right', request))).toBeGreaterThan(0);
    // 11 failures so far from this IP: 89 more are checked, the next one is refused.
    for (let i = 0; i < 89; i++) expect(await outcome(verify(`user${i}`, 'wrong', request))).toBe('ok');
    expect(await outcome(verify('one-more', 'wrong', request))).toBeGreaterThan(0);
  });

  it('does not count a check the user store could not make', async () => {
    const down = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const inner = vi.fn(async (): Promise<User | null> => {
      throw down;
    });
    const verify = throttledVerifier(inner, new LoginThrottle(), newCache());
    for (let i = 0; i < 20; i++) await expect(verify('alice', `pw-${i}`, request)).rejects.toBe(down);
    inner.mockImplementation(async () => null);
    expect(await verify('alice', 'wrong', request)).toBeNull();
  });
});

describe.skipIf(!process.env.TEST_REDIS_URL)('throttledVerifier on the Redis store', () => {
  const prefix = `restwire-unit-${randomBytes(6).toString('hex')}`;
  const stores: RedisStore[] = [];
  afterAll(async () => {
    await Promise.all(stores.map((store) => store.close()));
    const raw = new Redis(process.env.TEST_REDIS_URL!);
    const keys = await raw.keys(`${prefix}:*`);
    if (keys.length > 0) await raw.del(...keys);
    await raw.quit();
  });

  // 100 rather than 300 guesses: each is a Redis command now (the same guess is checked once per
  // process), and a busy machine answering one after the 150 ms command timeout would count it in
  // the process's own memory instead, as the store is meant to while Redis is slow.
  it('checks at most 11 passwords of a burst of 100 different guesses spread over two processes', async () => {
    const quiet = { log: { warn() {}, info() {} }, counters: { outages: { inc() {} }, errors: { inc() {} } } };
    const config = { redisUrl: process.env.TEST_REDIS_URL!, redisKeyPrefix: prefix };
    stores.push(await openRedisStore(config, quiet), await openRedisStore(config, quiet));
    const inner = vi.fn(async (_username: string, password: string) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      return password === 'right' ? alice : null;
    });
    const verifiers = stores.map((store) => throttledVerifier(inner, new LoginThrottle(store.limiters), newCache()));
    const request = { ip: '10.0.0.1' } as FastifyRequest;
    const outcomes = await Promise.all(
      Array.from({ length: 100 }, (_, i) => outcome(verifiers[i % 2]!('alice', i === 89 ? 'right' : `wrong-${i}`, request))),
    );
    expect(inner.mock.calls.length).toBeLessThanOrEqual(11);
    expect(outcomes[89]).not.toBe('ok');
  });
});
