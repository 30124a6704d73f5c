import { createHash } from 'node:crypto';
import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Rate } from '../config.js';
import { Throttled } from '../http/errors.js';
import { memoryLimiter, type LimiterFactory } from '../throttling/request-throttle.js';
import type { CredentialVerifier } from './authenticators.js';

/**
 * Brute-force protection (API.md §6, "Login throttling"): failed logins by any scheme count.
 * More than 10 failures for one username in 15 minutes, or 100 from one IP, answer 429 with
 * Retry-After for that username or IP until the window ends, correct password or not, since
 * otherwise the block would not slow a guesser down. The window is fixed and starts at the
 * first failure, as the request rate limit's does.
 *
 * Counted by rate-limiter-flexible through the same LimiterFactory as the request throttle, so
 * the counts are shared across processes whenever that factory is Redis-backed.
 */
export interface LoginThrottleLimits {
  readonly perUsername: Rate;
  readonly perIp: Rate;
}

export const LOGIN_LIMITS: LoginThrottleLimits = {
  perUsername: { limit: 10, windowSeconds: 15 * 60, text: '10/15 minutes' },
  perIp: { limit: 100, windowSeconds: 15 * 60, text: '100/15 minutes' },
};

/** Usernames come from the client and may be long; the key is a fixed-length digest of one. */
const usernameKey = (username: string): string => createHash('sha256').update(username).digest('base64url').slice(0, 22);

/**
 * How long a username or address found under its limit is not looked up again. With Redis every
 * check was two round trips on every Basic request (issue #6); a failure through this process
 * forgets the memo at once, so only another process's failures are seen up to this much later.
 */
const CLEAR_FOR_MS = 1000;

export class LoginThrottle {
  private readonly byUsername: RateLimiterAbstract;
  private readonly byIp: RateLimiterAbstract;
  private readonly clearUntil = new Map<string, number>();

  constructor(
    factory: LimiterFactory = memoryLimiter,
    private readonly limits: LoginThrottleLimits = LOGIN_LIMITS,
  ) {
    // Bare names: the Redis store adds the deployment's REDIS_KEY_PREFIX (redis-store.ts).
    this.byUsername = factory(limits.perUsername, 'login:user');
    this.byIp = factory(limits.perIp, 'login:ip');
  }

  /** Throws Throttled while the username or the IP is over its limit. */
  async check(username: string, ip: string): Promise<void> {
    const userKey = usernameKey(username);
    const now = Date.now();
    if ((this.clearUntil.get(`u:${userKey}`) ?? 0) > now && (this.clearUntil.get(`i:${ip}`) ?? 0) > now) return;
    const [user, address] = await Promise.all([this.byUsername.get(userKey), this.byIp.get(ip)]);
    const blocked = [
      user && user.consumedPoints > this.limits.perUsername.limit ? user : null,
      address && address.consumedPoints > this.limits.perIp.limit ? address : null,
    ];
    throwIfBlocked(blocked);
    if (this.clearUntil.size >= 10_000) this.clearUntil.clear();
    this.clearUntil.set(`u:${userKey}`, now + CLEAR_FOR_MS);
    this.clearUntil.set(`i:${ip}`, now + CLEAR_FOR_MS);
  }

  /** Counts a failure; throws Throttled when it is the one that crosses a limit. */
  async recordFailure(username: string, ip: string): Promise<void> {
    const userKey = usernameKey(username);
    this.clearUntil.delete(`u:${userKey}`);
    this.clearUntil.delete(`i:${ip}`);
    const outcomes = await Promise.allSettled([this.byUsername.consume(userKey), this.byIp.consume(ip)]);
    const blocked: Array<RateLimiterRes | null> = [];
    for (const outcome of outcomes) {
      if (outcome.status === 'fulfilled') continue;
      // rate-limiter-flexible rejects with a RateLimiterRes when over the limit, an Error on a store failure.
      if (!(outcome.reason instanceof RateLimiterRes)) throw outcome.reason;
      blocked.push(outcome.reason);
    }
    throwIfBlocked(blocked);
  }
}

function throwIfBlocked(results: ReadonlyArray<RateLimiterRes | null>): void {
  let waitMs = 0;
  for (const result of results) if (result) waitMs = Math.max(waitMs, result.msBeforeNext, 1);
  if (waitMs === 0) return;
  const seconds = Math.max(1, Math.ceil(waitMs / 1000));
  throw new Throttled(seconds, `Too many failed logins. Try again in ${seconds} seconds.`);
}

/** Wraps a verifier with the throttle: refused while blocked, and every failure counted. */
export function throttledVerifier(inner: CredentialVerifier, throttle: LoginThrottle): CredentialVerifier {
  return async function verifyThrottled(username, password, request) {
    await throttle.check(username, request.ip);
    const user = await inner(username, password, request);
    if (!user) await throttle.recordFailure(username, request.ip);
    return user;
  };
}
