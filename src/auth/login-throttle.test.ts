import { randomBytes } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { Throttled } from '../http/errors.js';
import { openRedisStore, type RedisStore } from '../http/throttling/redis-store.js';
import { LOGIN_LIMITS, LoginThrottle, throttledVerifier } from './login-throttle.js';
import type { User } from '../http/caller.js';

const alice: User = { id: 1, username: 'alice', passwordChangedAt: 0 };

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
    const verify = throttledVerifier(inner, new LoginThrottle());
    for (let i = 0; i < 10; i++) expect(await verify('alice', 'wrong', request)).toBeNull();
    await expect(verify('alice', 'wrong', request)).rejects.toBeInstanceOf(Throttled);
    inner.mockClear();
    await expect(verify('alice', 'right', request)).rejects.toBeInstanceOf(Throttled);
    expect(inner).not.toHaveBeenCalled();
  });

  it('checks at most 11 passwords of a burst of 300 for one username: the right one at #290 is refused', async () => {
    // Each check takes a while, as scrypt does, so the whole burst is in flight at once.
    const inner = vi.fn(async (_username: string, password: string) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      return password === 'right' ? alice : null;
    });
    const verify = throttledVerifier(inner, new LoginThrottle());
    const outcomes = await Promise.all(
      Array.from({ length: 300 }, (_, i) => outcome(verify('alice', i === 289 ? 'right' : 'wrong', request))),
    );
    expect(inner.mock.calls.length).toBeLessThanOrEqual(11);
    expect(outcomes[289]).not.toBe('ok');
    expect(outcomes.filter((o) => o !== 'ok')).toHaveLength(300 - 10);
  });

  it('lets known-good credentials through on a look at the count, and refuses them once blocked', async () => {
    const inner = vi.fn(async (_username: string, password: string) => (password === 'right' ? alice : null));
    const throttle = new LoginThrottle();
    const verify = throttledVerifier(inner, throttle, (_username, password) => password === 'right');
    // A busy client's concurrent requests never count against it.
    const burst = await Promise.all(Array.from({ length: 50 }, () => verify('alice', 'right', request)));
    expect(burst.every((user) => user === alice)).toBe(true);
    for (let i = 0; i < 10; i++) expect(await verify('alice', 'wrong', request)).toBeNull();
    await expect(verify('alice', 'wrong', request)).rejects.toBeInstanceOf(Throttled);
    await expect(verify('alice', 'right', request)).rejects.toBeInstanceOf(Throttled);
  });

  it('does not count successes', async () => {
    const inner = vi.fn(async () => alice);
    const verify = throttledVerifier(inner, new LoginThrottle());
    for (let i = 0; i < 20; i++) expect(await verify('alice', 'right', request)).toEqual(alice);
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

  it('checks at most 11 passwords of a burst of 300 spread over two processes', async () => {
    const quiet = { log: { warn() {}, info() {} }, counters: { outages: { inc() {} }, errors: { inc() {} } } };
    const config = { redisUrl: process.env.TEST_REDIS_URL!, redisKeyPrefix: prefix };
    stores.push(await openRedisStore(config, quiet), await openRedisStore(config, quiet));
    const inner = vi.fn(async (_username: string, password: string) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      return password === 'right' ? alice : null;
    });
    const verifiers = stores.map((store) => throttledVerifier(inner, new LoginThrottle(store.limiters)));
    const request = { ip: '10.0.0.1' } as FastifyRequest;
    const outcomes = await Promise.all(
      Array.from({ length: 300 }, (_, i) => outcome(verifiers[i % 2]!('alice', i === 289 ? 'right' : 'wrong', request))),
    );
    expect(inner.mock.calls.length).toBeLessThanOrEqual(11);
    expect(outcomes[289]).not.toBe('ok');
  });
});
