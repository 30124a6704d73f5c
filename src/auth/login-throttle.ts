import { createHash } from 'node:crypto';
import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Rate } from '../config.js';
import { Throttled } from '../http/errors.js';
import { memoryLimiter, type LimiterFactory } from '../http/throttling/request-throttle.js';
import type { CredentialVerifier } from './authenticators.js';
import type { CredentialCache } from './credential-cache.js';
import type { User } from '../http/caller.js';

/**
 * Brute-force protection (API.md §6, "Login throttling"): failed logins by any scheme count, and
 * only those: a right password, a refused attempt and a check the store could not make give
 * their count back (issue 22, item 2). More than 10 failures for one username in 15 minutes, or
 * 100 from one IP, answer 429 with Retry-After for that username or IP until the window ends,
 * correct password or not, since otherwise the block would not slow a guesser down. The window
 * is fixed and starts at the first attempt, as the request rate limit's does.
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
 * How long a username or address found under its limit is not looked up again, for credentials
 * the cache already knows to be right. With Redis every check was two round trips on every Basic
 * request (issue #6); an attempt through this process forgets the memo at once, so only another
 * process's failures are seen up to this much later.
 */
const CLEAR_FOR_MS = 1000;

/**
 * A password check counted before it runs (`LoginThrottle.reserve`): it ends as a success, which
 * gives the count back, as a failure, which keeps it, or abandoned (the check threw), which gives
 * it back too.
 */
export interface LoginAttempt {
  /** The password was right: the attempt is not a failure and stops counting. */
  succeeded(): Promise<void>;
  /** The password was wrong: the attempt stays counted; throws Throttled when it crossed a limit. */
  failed(): void;
  /** The password could not be checked (the user store failed): no failure, not counted. */
  abandoned(): Promise<void>;
}

export class LoginThrottle {
  private readonly byUsername: RateLimiterAbstract;
  private readonly byIp: RateLimiterAbstract;
  private readonly clearUntil = new Map<string, number>();

  constructor(
    factory: LimiterFactory = memoryLimiter,
    private readonly limits: LoginThrottleLimits = LOGIN_LIMITS,
  ) {
    // Bare names: the Redis store adds the deployment's REDIS_KEY_PREFIX (redis-store.ts). One
    // point more than the failures allowed: after 10 failures an 11th attempt is still checked
    // (API.md §6 refuses "more than 10"), and it is that one's failure that answers 429.
    this.byUsername = factory(oneMore(limits.perUsername), 'login:user');
    this.byIp = factory(oneMore(limits.perIp), 'login:ip');
  }

  /**
   * Throws Throttled while the username or the IP is over its limit; counts nothing. Only for
   * credentials already known to be right (a credential-cache hit): every other attempt must
   * `reserve`, or a burst would pass this check before any of its failures was counted.
   */
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

  /**
   * Counts an attempt before its password is checked, in one atomic increment per key (in memory
   * or in Redis), so that however many attempts arrive at once, no more than the limit allows
   * are ever checked (issue 11, finding 3: a burst of 300 all passed a separate check first).
   * Throws Throttled when the username or the IP is already over its limit; a refused attempt
   * checks no password, so it gives back what it counted on both keys (else a busy client's
   * refusals would add up to its IP's block, issue 22, item 2).
   */
  async reserve(username: string, ip: string): Promise<LoginAttempt> {
    const userKey = usernameKey(username);
    this.clearUntil.delete(`u:${userKey}`);
    this.clearUntil.delete(`i:${ip}`);
    const outcomes = await Promise.allSettled([this.byUsername.consume(userKey), this.byIp.consume(ip)]);
    // Giving the count back is best effort: a store error must not fail a right password.
    const giveBack = async () => {
      await Promise.allSettled([this.byUsername.reward(userKey), this.byIp.reward(ip)]);
    };
    const counted: RateLimiterRes[] = [];
    const blocked: RateLimiterRes[] = [];
    for (const outcome of outcomes) {
      if (outcome.status === 'fulfilled') counted.push(outcome.value);
      // rate-limiter-flexible rejects with a RateLimiterRes when over the limit (having counted
      // the point all the same), an Error on a store failure.
      else if (outcome.reason instanceof RateLimiterRes) blocked.push(outcome.reason);
      else throw outcome.reason;
    }
    if (blocked.length > 0) {
      await giveBack();
      throwIfBlocked(blocked);
    }
    const [user, address] = counted as [RateLimiterRes, RateLimiterRes];
    return {
      succeeded: giveBack,
      abandoned: giveBack,
      failed: () =>
        throwIfBlocked([
          user.consumedPoints > this.limits.perUsername.limit ? user : null,
          address.consumedPoints > this.limits.perIp.limit ? address : null,
        ]),
    };
  }
}

function oneMore(rate: Rate): Rate {
  return { ...rate, limit: rate.limit + 1 };
}

function throwIfBlocked(results: ReadonlyArray<RateLimiterRes | null>): void {
  let waitMs = 0;
  for (const result of results) if (result) waitMs = Math.max(waitMs, result.msBeforeNext, 1);
  if (waitMs === 0) return;
  const seconds = Math.max(1, Math.ceil(waitMs / 1000));
  throw new Throttled(seconds, `Too many failed logins. Try again in ${seconds} seconds.`);
}

/**
 * Wraps a verifier (the user store's slow check) with the throttle and the credential cache:
 * refused while blocked, and every full check counted before the password is checked, given
 * back if it was right. Credentials the cache knows only look at the count, so a busy Basic
 * client costs no Redis writes. Concurrent requests of one address with the same credentials
 * share one full check (`CredentialCache.checkOnce`), counted once while it runs: on a cold
 * cache a burst of right passwords would otherwise fill the count with checks not yet known to
 * succeed and be refused (issue 22, item 2). Each request of a failed shared check counts as a
 * failure, and a burst of different guesses is counted one by one, so guessing is bounded as
 * before.
 */
export function throttledVerifier(inner: CredentialVerifier, throttle: LoginThrottle, cache: CredentialCache): CredentialVerifier {
  return async function verifyThrottled(username, password, request) {
    if (cache.get(username, password)) {
      await throttle.check(username, request.ip);
      // Asked again after the wait: a password change in between voids the entry.
      const user = cache.get(username, password);
      if (user) return user;
    }
    let checked = false;
    const user = await cache.checkOnce(username, password, request.ip, async () => {
      checked = true;
      const attempt = await throttle.reserve(username, request.ip);
      let user: User | null;
      try {
        user = await inner(username, password, request);
      } catch (error) {
        await attempt.abandoned();
        throw error;
      }
      if (user) await attempt.succeeded();
      else attempt.failed();
      return user;
    });
    // A request that shared another's failed check is a failed login of its own, as before.
    if (!user && !checked) (await throttle.reserve(username, request.ip)).failed();
    return user;
  };
}
