import type { FastifyRequest } from 'fastify';
import { describe, expect, it, vi } from 'vitest';
import { Throttled } from '../http/errors.js';
import { LOGIN_LIMITS, LoginThrottle, throttledVerifier } from './login-throttle.js';
import type { User } from './user.js';

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

describe('LoginThrottle', () => {
  it('allows 10 failures for a username in 15 minutes; the 11th and everything after are 429', async () => {
    const throttle = new LoginThrottle();
    for (let i = 0; i < 10; i++) {
      expect(await outcome(throttle.check('alice', '10.0.0.1'))).toBe('ok');
      expect(await outcome(throttle.recordFailure('alice', '10.0.0.1'))).toBe('ok');
    }
    const retryAfter = await outcome(throttle.recordFailure('alice', '10.0.0.1'));
    expect(retryAfter).toBeGreaterThan(890);
    expect(retryAfter).toBeLessThanOrEqual(900);
    // Blocked for that username from anywhere, while other usernames go on.
    expect(await outcome(throttle.check('alice', '10.0.0.2'))).toBeGreaterThan(0);
    expect(await outcome(throttle.check('bob', '10.0.0.1'))).toBe('ok');
  });

  it('allows 100 failures from one IP, whatever the usernames', async () => {
    const throttle = new LoginThrottle();
    for (let i = 0; i < 100; i++) expect(await outcome(throttle.recordFailure(`user${i}`, '10.0.0.9'))).toBe('ok');
    expect(await outcome(throttle.recordFailure('one-more', '10.0.0.9'))).toBeGreaterThan(0);
    expect(await outcome(throttle.check('alice', '10.0.0.9'))).toBeGreaterThan(0);
    expect(await outcome(throttle.check('alice', '10.0.0.10'))).toBe('ok');
  });

  it('lets the username in again when the window ends', async () => {
    const second = { limit: 2, windowSeconds: 1, text: '2/second' };
    const throttle = new LoginThrottle(undefined, { perUsername: second, perIp: LOGIN_LIMITS.perIp });
    await throttle.recordFailure('alice', '10.0.0.1');
    await throttle.recordFailure('alice', '10.0.0.1');
    expect(await outcome(throttle.recordFailure('alice', '10.0.0.1'))).toBe(1);
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

  it('does not count successes', async () => {
    const inner = vi.fn(async () => alice);
    const verify = throttledVerifier(inner, new LoginThrottle());
    for (let i = 0; i < 20; i++) expect(await verify('alice', 'right', request)).toEqual(alice);
  });
});
