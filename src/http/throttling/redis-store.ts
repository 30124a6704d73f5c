import { Redis } from 'ioredis';
import { RateLimiterCompatibleAbstract, RateLimiterMemory, RateLimiterRedis, type RateLimiterRes } from 'rate-limiter-flexible';
import type { Config } from '../../config.js';
import type { LimiterFactory } from './request-throttle.js';

/**
 * The shared rate-limit store (API.md §0 "Shared rate-limit store", issue #4). With `REDIS_URL`
 * set, every `serve` process counts in one Redis, atomically (rate-limiter-flexible's Lua
 * script: SET NX EX, INCRBY, PTTL), so N processes enforce one limit together, not N of them.
 *
 * When Redis cannot answer, the API fails OPEN: requests keep being served and counted in the
 * process's own memory (rate-limiter-flexible's `insuranceLimiter`), so the X-Rate-Limit-*
 * headers stay meaningful and abuse is still bounded, per process, until Redis returns. Failing
 * closed would turn a cache outage into a full API outage; a limit that is briefly N times
 * looser is the smaller harm. The outage is logged once (warn, then info on recovery) and
 * counted in /metrics.
 */

/** Where outages are reported: the app logger and the /metrics counters (`metrics.rateLimitStore`). */
export interface StoreReporting {
  readonly log: {
    warn(details: object, message: string): void;
    info(details: object, message: string): void;
  };
  readonly counters: {
    /** Incremented once per outage. */
    readonly outages: { inc(): void };
    /** Incremented for every operation the fallback answered instead of Redis. */
    readonly errors: { inc(): void };
  };
}

/**
 * How long one rate-limit command may take before the request falls back to memory: what a hung
 * Redis can add to a request, once per command, until the connection is dropped (`StoreHealth`).
 */
const COMMAND_TIMEOUT_MS = 150;
/** Reconnect delays grow by 100 ms per attempt up to this, and never stop (`retryStrategy`). */
const MAX_RECONNECT_DELAY_MS = 2_000;

/**
 * Watches one Redis connection and reports each outage once: a warning when it is lost (or the
 * first connection fails), an info line when it is ready again. ioredis emits `error` on every
 * failed reconnect attempt, so logging those would repeat for as long as the outage lasts.
 */
export class StoreHealth {
  private down = false;
  private downSince = 0;
  private lastError: Error | null = null;
  private client: Pick<Redis, 'status' | 'ping' | 'disconnect'> | null = null;
  private probing = false;

  constructor(private readonly reporting: StoreReporting) {}

  /** Subscribes to the client's connection events (ioredis: `error`, `reconnecting`, `ready`). */
  watch(client: Pick<Redis, 'on' | 'status' | 'ping' | 'disconnect'>): void {
    this.client = client;
    // An `error` listener is required anyway: without one ioredis prints every failed attempt.
    client.on('error', (error: Error) => (this.lastError = error));
    // `reconnecting` follows every unintended close (never `quit()`), including a failed first connect.
    client.on('reconnecting', () => this.lost());
    client.on('ready', () => this.restored());
  }

  /** An operation was answered by the in-process fallback instead of Redis. */
  fellBack(): void {
    this.reporting.counters.errors.inc();
    if (this.client?.status === 'ready') void this.probe(this.client);
  }

  /**
   * A fallback on a connection that is up means a command failed or timed out on it. A Redis
   * that accepts connections but has stopped answering (SIGSTOP, a stuck host) keeps the
   * connection "ready", so each request would wait out its own command timeout and nothing
   * would be logged (issue 11, finding 6). If a PING times out too, that is an outage: it is
   * logged, and the connection is ended, so every later command fails at once (the stream is no
   * longer writable) and falls back. A stopped server cannot acknowledge the close, so the
   * reconnection, and the recovery it logs, follow as soon as the server runs again.
   */
  private async probe(client: Pick<Redis, 'status' | 'ping' | 'disconnect'>): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    try {
      await client.ping();
    } catch (error) {
      this.lastError = error as Error;
      if (client.status === 'ready') {
        this.lost();
        client.disconnect(true);
      }
    } finally {
      this.probing = false;
    }
  }

  private lost(): void {
    if (this.down) return;
    this.down = true;
    this.downSince = Date.now();
    this.reporting.counters.outages.inc();
    this.reporting.log.warn(
      { reason: this.lastError?.message },
      'rate-limit store (Redis) unreachable: serving on, with limits counted per process until it returns',
    );
  }

  private restored(): void {
    if (!this.down) return;
    this.down = false;
    this.lastError = null;
    this.reporting.log.info({ outageMs: Date.now() - this.downSince }, 'rate-limit store (Redis) reachable again: limits are shared again');
  }
}

/** The process's one Redis connection and the limiters that count in it. */
export interface RedisStore {
  /** Shared by everything that needs Redis (login throttling too): one connection per process. */
  readonly client: Redis;
  readonly limiters: LimiterFactory;
  close(): Promise<void>;
}

/**
 * Connects to `REDIS_URL` (waiting for the first attempt only, so an unreachable Redis never
 * blocks start-up) and returns the shared client and its limiters.
 */
export async function openRedisStore(config: Pick<Config, 'redisUrl' | 'redisKeyPrefix'>, reporting: StoreReporting): Promise<RedisStore> {
  const health = new StoreHealth(reporting);
  const client = createRedis(config, health);
  await firstConnection(client);
  return { client, limiters: redisLimiters(client, health), close: () => closeRedis(client) };
}

/**
 * Opens a Redis connection with the options a rate-limit store needs (`openRedisStore` opens the
 * one a process shares). Every key is namespaced by `REDIS_KEY_PREFIX` here, once, via ioredis's
 * `keyPrefix` (it also applies to the limiter's Lua script), so callers use bare names.
 */
export function createRedis(config: Pick<Config, 'redisUrl' | 'redisKeyPrefix'>, health: StoreHealth): Redis {
  // `health` is not optional: it is also the `error` listener ioredis needs.
  if (config.redisUrl === null) throw new Error('createRedis needs REDIS_URL');
  const client = new Redis(config.redisUrl, {
    keyPrefix: `${config.redisKeyPrefix}:`,
    // Never queue commands while disconnected: a request must not wait for Redis to come back,
    // it falls back at once (see the module comment).
    enableOfflineQueue: false,
    // A command caught by a dropped connection is resent after one reconnect attempt at most,
    // then fails over (or sooner, by commandTimeout).
    maxRetriesPerRequest: 1,
    // A Redis that accepts connections but stops answering must not stall requests either: each
    // command gives up after this, and StoreHealth drops a connection that no longer answers,
    // so the outage is logged once and later requests do not wait at all.
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: 2_000,
    // Reconnect forever, with a capped linear backoff.
    retryStrategy: (attempt) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
  });
  health.watch(client);
  return client;
}

/**
 * Resolves once the first connection attempt settles (ready, failed, or `timeoutMs` passed), so
 * that a freshly started process does not count its first requests in memory merely because the
 * connection was still being made. Never rejects: an unreachable Redis does not stop start-up.
 */
function firstConnection(client: Redis, timeoutMs = 3_000): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      client.off('ready', done).off('reconnecting', done).off('end', done);
      resolve();
    };
    const timer = setTimeout(done, timeoutMs);
    client.once('ready', done).once('reconnecting', done).once('end', done);
  });
}

/** Closes the connection on shutdown: waits for replies in flight when connected, else drops it. */
async function closeRedis(client: Redis): Promise<void> {
  if (client.status === 'ready') {
    await client.quit().catch(() => client.disconnect());
  } else {
    client.disconnect();
  }
}

/**
 * Limiters that count in Redis, atomically across processes, and fall back to this process's
 * memory while Redis cannot answer. The fallback is rate-limiter-flexible's `insuranceLimiter`
 * rather than our own try/catch so that every operation (consume, get, penalty, delete … as login
 * throttling uses them) fails over the same way.
 */
export function redisLimiters(client: Redis, health: StoreHealth): LimiterFactory {
  return (rate, keyPrefix) => {
    const options = { points: rate.limit, duration: rate.windowSeconds, keyPrefix };
    return new RateLimiterRedis({
      ...options,
      storeClient: client,
      // Fail over at once while disconnected instead of sending a command that cannot be answered.
      rejectIfRedisNotReady: true,
      insuranceLimiter: new ReportedFallback(new RateLimiterMemory(options), health),
    });
  };
}

type Key = string | number;
/** rate-limiter-flexible's own option bag type for these methods. */
type Options = Parameters<RateLimiterMemory['consume']>[2];

/**
 * The in-memory insurance limiter, reporting every use, so /metrics shows how many operations
 * Redis could not answer (rate-limiter-flexible calls the insurance without telling anyone).
 * Built on the library's documented `RateLimiterCompatibleAbstract` extension point.
 */
class ReportedFallback extends RateLimiterCompatibleAbstract {
  override readonly keyPrefix: string;
  override blockDuration = 0;
  override execEvenly = false;

  constructor(
    private readonly memory: RateLimiterMemory,
    private readonly health: StoreHealth,
  ) {
    super();
    this.keyPrefix = memory.keyPrefix;
  }

  private use(): RateLimiterMemory {
    this.health.fellBack();
    return this.memory;
  }

  override consume(key: Key, points?: number, options?: Options): Promise<RateLimiterRes> {
    return this.use().consume(key, points, options);
  }
  override penalty(key: Key, points?: number, options?: Options): Promise<RateLimiterRes> {
    return this.use().penalty(key, points, options);
  }
  override reward(key: Key, points?: number, options?: Options): Promise<RateLimiterRes> {
    return this.use().reward(key, points, options);
  }
  override get(key: Key, options?: Options): Promise<RateLimiterRes | null> {
    return this.use().get(key, options);
  }
  override set(key: Key, points: number, seconds: number, options?: Options): Promise<RateLimiterRes> {
    return this.use().set(key, points, seconds, options);
  }
  override block(key: Key, seconds: number, options?: Options): Promise<RateLimiterRes> {
    return this.use().block(key, seconds, options);
  }
  override delete(key: Key, options?: Options): Promise<boolean> {
    return this.use().delete(key, options);
  }
}
