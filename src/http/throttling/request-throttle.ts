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
    const [limiter, rate, id] =
      'userId' in key ? [this.authenticated, this.rates.user, String(key.userId)] : [this.anonymous, this.rates.anon, key.ip];
    try {
      return toState(await limiter.consume(id), rate.limit, true);
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) return toState(rejection, rate.limit, false);
      throw rejection;
    }
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
