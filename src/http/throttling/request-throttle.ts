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
 * (API.md §6). In one process it is counted in a plain map of windows, synchronously: with
 * rate-limiter-flexible's memory store every request paid for a promise and a timer-backed record
 * (issue 21). A `factory` (Redis, or a cluster's shared store) counts through rate-limiter-flexible
 * instead, so that the count is atomic across processes.
 */
export class RequestThrottle {
  private readonly anonymous: Windows;
  private readonly authenticated: Windows;

  constructor(rates: { anon: Rate; user: Rate }, factory: LimiterFactory | null = null) {
    // Bare names: the Redis store adds the deployment's REDIS_KEY_PREFIX (redis-store.ts).
    this.anonymous = factory ? new SharedWindows(factory(rates.anon, 'rate:anon'), rates.anon) : new MemoryWindows(rates.anon);
    this.authenticated = factory ? new SharedWindows(factory(rates.user, 'rate:user'), rates.user) : new MemoryWindows(rates.user);
  }

  /** Counts one request against the key and reports the window's state (at once when counted in memory). */
  hit(key: ThrottleKey): ThrottleState | Promise<ThrottleState> {
    return 'userId' in key ? this.authenticated.take(String(key.userId), 1) : this.anonymous.take(key.ip, 1);
  }

  /**
   * Whether the key's next request may be refused, as far as this process has seen: its window
   * is used up. A read may start before its count is answered only when this is false
   * (pipeline.ts), so a caller over the limit costs no reads.
   */
  mayRefuse(key: ThrottleKey): boolean {
    return 'userId' in key ? this.authenticated.mayRefuse(String(key.userId)) : this.anonymous.mayRefuse(key.ip);
  }

  /**
   * Counts `points` more requests against the key if the window has that many left; if not,
   * counts none and reports `allowed: false` (a batch over the remaining limit is refused whole,
   * REQUESTS.md §4). In a shared store two takes at once may both pass a check they would not
   * pass together: the window's count stays exact, only the refusal may come one request late.
   */
  take(key: ThrottleKey, points: number): ThrottleState | Promise<ThrottleState> {
    return 'userId' in key ? this.authenticated.takeAll(String(key.userId), points) : this.anonymous.takeAll(key.ip, points);
  }
}

/** One rate's windows: `take` counts even past the limit (every request costs 1), `takeAll` counts nothing then. */
interface Windows {
  take(id: string, points: number): ThrottleState | Promise<ThrottleState>;
  takeAll(id: string, points: number): ThrottleState | Promise<ThrottleState>;
  /** Whether the key's window was used up at its last count seen here, and is not yet over. */
  mayRefuse(id: string): boolean;
}

/** How many refused keys a shared store's windows remember for `mayRefuse`. */
const MAX_REFUSED_KEYS = 10_000;

interface Window {
  count: number;
  /** Date.now() at which the window ends. */
  readonly endsAt: number;
}

/** Fixed windows of one process, in a map swept of ended windows now and then. */
class MemoryWindows implements Windows {
  private readonly windows = new Map<string, Window>();
  private readonly windowMs: number;
  private nextSweep = 0;

  constructor(private readonly rate: Rate) {
    this.windowMs = rate.windowSeconds * 1000;
  }

  take(id: string, points: number): ThrottleState {
    const now = Date.now();
    const window = this.current(id, now);
    window.count += points;
    return this.state(window, now, window.count <= this.rate.limit);
  }

  takeAll(id: string, points: number): ThrottleState {
    const now = Date.now();
    const window = this.current(id, now);
    if (this.rate.limit - window.count < points) return this.state(window, now, false);
    window.count += points;
    return this.state(window, now, true);
  }

  mayRefuse(id: string): boolean {
    const window = this.windows.get(id);
    return window !== undefined && window.count >= this.rate.limit && window.endsAt > Date.now();
  }

  private current(id: string, now: number): Window {
    let window = this.windows.get(id);
    if (window === undefined || window.endsAt <= now) {
      // Ended windows of keys never seen again would stay for ever: drop them, at most once a window (or minute).
      if (now >= this.nextSweep) {
        for (const [key, old] of this.windows) if (old.endsAt <= now) this.windows.delete(key);
        this.nextSweep = now + Math.min(this.windowMs, 60_000);
      }
      window = { count: 0, endsAt: now + this.windowMs };
      this.windows.set(id, window);
    }
    return window;
  }

  private state(window: Window, now: number, allowed: boolean): ThrottleState {
    return {
      allowed,
      limit: this.rate.limit,
      remaining: Math.max(0, this.rate.limit - window.count),
      resetSeconds: Math.max(0, Math.ceil((window.endsAt - now) / 1000)),
    };
  }
}

/** One request (or a batch's requests) waiting for its key's count in a shared store. */
interface Waiting {
  readonly points: number;
  resolve(state: ThrottleState): void;
  reject(error: unknown): void;
}

/**
 * Windows counted by rate-limiter-flexible in a store shared by processes (Redis, a cluster's
 * primary). The requests one key makes in one turn of the event loop are counted by one command
 * of their summed points (issue 21: one Redis command and one Lua script per request were an
 * eighth of a PostgreSQL GET's CPU). That is exact, across processes too: the store adds the sum
 * atomically and answers the window's new total, so the requests take the counts just below it
 * in order, as if each had been sent on its own with no other process's in between.
 */
class SharedWindows implements Windows {
  /** Requests counted in this turn, by key; sent together once the turn's I/O has been read. */
  private pending = new Map<string, Waiting[]>();
  /** Keys whose window was used up at their last count here, with when that window ends (`mayRefuse`). */
  private readonly refused = new Map<string, number>();

  constructor(
    private readonly limiter: RateLimiterAbstract,
    private readonly rate: Rate,
  ) {}

  take(id: string, points: number): Promise<ThrottleState> {
    return new Promise((resolve, reject) => {
      const waiting = this.pending.get(id);
      if (waiting !== undefined) {
        waiting.push({ points, resolve, reject });
        return;
      }
      // setImmediate, not a microtask: requests read from other sockets in the same poll phase join the command.
      if (this.pending.size === 0) setImmediate(() => this.flush());
      this.pending.set(id, [{ points, resolve, reject }]);
    });
  }

  async takeAll(id: string, points: number): Promise<ThrottleState> {
    const current = await this.limiter.get(id);
    if (current !== null && this.rate.limit - current.consumedPoints < points) {
      return toState(Object.assign(current, { remainingPoints: Math.max(0, this.rate.limit - current.consumedPoints) }), this.rate.limit, false);
    }
    return this.take(id, points);
  }

  mayRefuse(id: string): boolean {
    const endsAt = this.refused.get(id);
    if (endsAt === undefined) return false;
    if (endsAt > Date.now()) return true;
    this.refused.delete(id);
    return false;
  }

  private flush(): void {
    const batches = this.pending;
    this.pending = new Map();
    for (const [id, waiting] of batches) void this.count(id, waiting);
  }

  private async count(id: string, waiting: readonly Waiting[]): Promise<void> {
    let total = 0;
    for (const one of waiting) total += one.points;
    let result: RateLimiterRes;
    try {
      result = await this.limiter.consume(id, total);
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) {
        for (const one of waiting) one.reject(rejection);
        return;
      }
      result = rejection;
    }
    // The store's total after this sum: the first request took the count just above what went before.
    let consumed = result.consumedPoints - total;
    const resetSeconds = Math.max(0, Math.ceil(result.msBeforeNext / 1000));
    for (const one of waiting) {
      consumed += one.points;
      one.resolve({ allowed: consumed <= this.rate.limit, limit: this.rate.limit, remaining: Math.max(0, this.rate.limit - consumed), resetSeconds });
    }
    this.refused.delete(id);
    if (consumed >= this.rate.limit) {
      this.refused.set(id, Date.now() + result.msBeforeNext);
      // Bounded: the oldest refusal is forgotten first (that key's next read may then start before its count).
      if (this.refused.size > MAX_REFUSED_KEYS) this.refused.delete(this.refused.keys().next().value!);
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
