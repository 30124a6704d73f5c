import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import { RateLimiterRes } from 'rate-limiter-flexible';
import { afterAll, describe, expect, it } from 'vitest';
import { parseRate } from '../../config.js';
import { StoreHealth, openRedisStore, type RedisStore, type StoreReporting } from './redis-store.js';
import { RequestThrottle } from './request-throttle.js';

/** A StoreReporting that records what it was told. */
function recorder() {
  const seen = { warn: [] as string[], info: [] as string[], outages: 0, errors: 0 };
  const reporting: StoreReporting = {
    log: { warn: (_details, message) => seen.warn.push(message), info: (_details, message) => seen.info.push(message) },
    counters: { outages: { inc: () => seen.outages++ }, errors: { inc: () => seen.errors++ } },
  };
  return { seen, reporting };
}

const rates = { anon: parseRate('RATE_LIMIT_ANON', '3/minute'), user: parseRate('RATE_LIMIT_USER', '10/minute') };

describe('StoreHealth', () => {
  it('reports each outage once: one warning however many reconnect attempts fail, one info when ready', () => {
    const { seen, reporting } = recorder();
    const client = new EventEmitter();
    new StoreHealth(reporting).watch(client as never);
    client.emit('ready');
    expect(seen).toMatchObject({ warn: [], info: [], outages: 0 });
    for (let i = 0; i < 5; i++) {
      client.emit('error', new Error('connect ECONNREFUSED'));
      client.emit('reconnecting', 100);
    }
    expect(seen.warn).toHaveLength(1);
    expect(seen.outages).toBe(1);
    client.emit('ready');
    client.emit('ready');
    expect(seen.info).toHaveLength(1);
    client.emit('reconnecting', 100);
    client.emit('ready');
    expect(seen).toMatchObject({ outages: 2 });
    expect(seen.warn).toHaveLength(2);
    expect(seen.info).toHaveLength(2);
  });
});

describe('Redis store, unreachable', () => {
  let store: RedisStore;
  afterAll(() => store?.close());

  it('fails open: starts at once, counts in memory per process, and reports the outage once', async () => {
    const { seen, reporting } = recorder();
    const started = Date.now();
    store = await openRedisStore({ redisUrl: 'redis://127.0.0.1:1', redisKeyPrefix: 'restwire-unit' }, reporting);
    expect(Date.now() - started).toBeLessThan(2_000);
    const throttle = new RequestThrottle(rates, store.limiters);
    const states = [];
    for (let i = 0; i < 4; i++) states.push(await throttle.hit({ ip: '192.0.2.9' }));
    expect(states.map((s) => [s.allowed, s.remaining])).toEqual([
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
    ]);
    expect(states[0]!.resetSeconds).toBe(60);
    expect(seen.errors).toBe(4);
    expect(seen.outages).toBe(1);
    expect(seen.warn).toHaveLength(1);
  });
});

describe.skipIf(!process.env.TEST_REDIS_URL)('Redis store, shared', () => {
  const prefix = `restwire-unit-${randomBytes(6).toString('hex')}`;
  const config = { redisUrl: process.env.TEST_REDIS_URL ?? null, redisKeyPrefix: prefix };
  const stores: RedisStore[] = [];
  const raw = new Redis(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true });
  afterAll(async () => {
    await Promise.all(stores.map((store) => store.close()));
    const keys = await raw.keys(`${prefix}:*`);
    if (keys.length > 0) await raw.del(...keys);
    await raw.quit();
  });

  it('enforces one limit across two connections (two processes) atomically, under the key prefix', async () => {
    const { seen, reporting } = recorder();
    stores.push(await openRedisStore(config, reporting), await openRedisStore(config, reporting));
    const throttles = stores.map((store) => new RequestThrottle(rates, store.limiters));
    const states = await Promise.all(Array.from({ length: 30 }, (_, i) => throttles[i % 2]!.hit({ userId: 42 })));
    expect(states.filter((s) => s.allowed)).toHaveLength(10);
    expect(new Set(states.filter((s) => s.allowed).map((s) => s.remaining))).toEqual(new Set([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]));
    expect(await raw.keys(`${prefix}:*`)).toEqual([`${prefix}:rate:user:42`]);
    expect(await raw.pttl(`${prefix}:rate:user:42`)).toBeGreaterThan(55_000);
    expect(seen).toMatchObject({ errors: 0, outages: 0, warn: [] });
  });

  it('serves get() for login throttling from the same store', async () => {
    const limiter = stores[0]!.limiters(rates.anon, 'probe');
    await limiter.consume('k');
    const other = stores[1]!.limiters(rates.anon, 'probe');
    const result = await other.get('k');
    expect(result).toBeInstanceOf(RateLimiterRes);
    expect(result!.consumedPoints).toBe(1);
  });
});
