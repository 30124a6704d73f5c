import { RateLimiterMemory, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Rate } from '../../config.js';

/** What the X-Rate-Limit-* headers report (SEED.md §8). */
export interface ThrottleState {
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  /** Whole seconds left in the current window: never a timestamp. */
  readonly resetSeconds: number;
}

/** Who a request counts against: the user when authenticated, else the client IP (API.md §1). */
export type ThrottleKey = { userId: number } | { ip: string };

/** Builds the limiter for one rate; memory by default, Redis when configured (`redisLimiters` in redis-store.ts). */
export type LimiterFactory = (rate: Rate, keyPrefix: string) => RateLimiterAbstract;

export const memoryLimiter: LimiterFactory = (rate, keyPrefix) =>
  new RateLimiterMemory({ points: rate.limit, duration: rate.windowSeconds, keyPrefix });

/**
 * The API's request rate limit: a fixed window that starts at the key's first request
 * (API.md §6), counted by rate-limiter-flexible so that the Redis store is atomic across processes.
 */
export class RequestThrottle {
  private readonly anonymous: RateLimiterAbstract;
  private readonly authenticated: RateLimiterAbstract;

  constructor(
    private readonly rates: { anon: Rate; user: Rate },
    factory: LimiterFactory = memoryLimiter,
  ) {
    // Bare names: the Redis store adds the deployment's REDIS_KEY_PREFIX (redis-store.ts).
    this.anonymous = factory(rates.anon, 'rate:anon');
    this.authenticated = factory(rates.user, 'rate:user');
  }

  /** Counts one request against the key and reports the window's state. */
  async hit(key: ThrottleKey): Promise<ThrottleState> {
    const [limiter, rate, id] = this.limiterOf(key);
    try {
      return toState(await limiter.consume(id), rate.limit, true);
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) return toState(rejection, rate.limit, false);
      throw rejection;
    }
  }

  /**
   * Counts `points` more requests against the key if the window has that many left; if not,
   * counts none and reports `allowed: false` (a batch over the remaining limit is refused whole,
   * REQUESTS.md §4). Two takes at once may both pass a check they would not pass together: the
   * window's count stays exact, only the refusal may come one request late.
   */
  async take(key: ThrottleKey, points: number): Promise<ThrottleState> {
    const [limiter, rate, id] = this.limiterOf(key);
    const current = await limiter.get(id);
    if (current !== null && rate.limit - current.consumedPoints < points) {
      return toState(Object.assign(current, { remainingPoints: Math.max(0, rate.limit - current.consumedPoints) }), rate.limit, false);
    }
    try {
      return toState(await limiter.consume(id, points), rate.limit, true);
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) return toState(rejection, rate.limit, false);
      throw rejection;
    }
  }

  private limiterOf(key: ThrottleKey): [RateLimiterAbstract, Rate, string] {
    return 'userId' in key ? [this.authenticated, this.rates.user, String(key.userId)] : [this.anonymous, this.rates.anon, key.ip];
  }
}

function toState(result: RateLimiterRes, limit: number, allowed: boolean): ThrottleState {
  return {
    allowed,
    limit,
    remaining: Math.max(0, result.remainingPoints),
    resetSeconds: Math.max(0, Math.ceil(result.msBeforeNext / 1000)),
  };
}
