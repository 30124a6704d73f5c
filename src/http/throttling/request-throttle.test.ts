import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseRate } from '../../config.js';
import { RequestThrottle, memoryLimiter, type LimiterFactory } from './request-throttle.js';

const rates = { anon: parseRate('RATE_LIMIT_ANON', '3/minute'), user: parseRate('RATE_LIMIT_USER', '5/hour') };

describe('RequestThrottle (memory)', () => {
  afterEach(() => vi.useRealTimers());

  it('counts the current request in Remaining: a limit of 3 gives 2, 1, 0, then a refusal (API.md §6)', async () => {
    const throttle = new RequestThrottle(rates);
    const states = [];
    for (let i = 0; i < 5; i++) states.push(await throttle.hit({ ip: '192.0.2.1' }));
    expect(states.map((s) => [s.allowed, s.limit, s.remaining])).toEqual([
      [true, 3, 2],
      [true, 3, 1],
      [true, 3, 0],
      [false, 3, 0],
      [false, 3, 0],
    ]);
  });

  it('takes several requests at once only when that many are left (a batch, REQUESTS.md §4)', async () => {
    const throttle = new RequestThrottle(rates);
    const user = { userId: 7 };
    expect((await throttle.hit(user)).remaining).toBe(4);
    expect(await throttle.take(user, 3)).toMatchObject({ allowed: true, remaining: 1 });
    // Refused whole: nothing of it is counted.
    expect(await throttle.take(user, 2)).toMatchObject({ allowed: false, remaining: 1 });
    expect(await throttle.take(user, 1)).toMatchObject({ allowed: true, remaining: 0 });
    expect((await throttle.hit(user)).allowed).toBe(false);
  });

  it('reports Reset as whole seconds left in the window, never a timestamp', async () => {
    vi.useFakeTimers({ now: Date.UTC(2026, 0, 1) });
    const throttle = new RequestThrottle(rates);
    expect((await throttle.hit({ ip: '192.0.2.2' })).resetSeconds).toBe(60);
    vi.advanceTimersByTime(20_500);
    expect((await throttle.hit({ ip: '192.0.2.2' })).resetSeconds).toBe(40);
  });

  it('starts a new window when the old one ends (a fixed window from the first request)', async () => {
    vi.useFakeTimers({ now: Date.UTC(2026, 0, 1) });
    const throttle = new RequestThrottle(rates);
    for (let i = 0; i < 4; i++) await throttle.hit({ ip: '192.0.2.3' });
    vi.advanceTimersByTime(60_001);
    expect(await throttle.hit({ ip: '192.0.2.3' })).toMatchObject({ allowed: true, remaining: 2, resetSeconds: 60 });
  });

  it('keys users by id with the user rate, and anonymous callers by IP with the anonymous rate', async () => {
    const throttle = new RequestThrottle(rates);
    for (let i = 0; i < 3; i++) await throttle.hit({ ip: '192.0.2.4' });
    expect((await throttle.hit({ ip: '192.0.2.4' })).allowed).toBe(false);
    expect(await throttle.hit({ ip: '192.0.2.5' })).toMatchObject({ allowed: true, limit: 3, remaining: 2 });
    expect(await throttle.hit({ userId: 7 })).toMatchObject({ allowed: true, limit: 5, remaining: 4, resetSeconds: 3600 });
    expect(await throttle.hit({ userId: 8 })).toMatchObject({ remaining: 4 });
  });
});

describe('RequestThrottle (a shared store)', () => {
  /** rate-limiter-flexible's memory limiter standing in for Redis, with the points of each consume it was asked for. */
  function sharedStore() {
    const consumed: number[] = [];
    const factory: LimiterFactory = (rate, keyPrefix) => {
      const limiter = memoryLimiter(rate, keyPrefix);
      const consume = limiter.consume.bind(limiter);
      limiter.consume = (key, points = 1, options) => {
        consumed.push(points);
        return consume(key, points, options);
      };
      return limiter;
    };
    return { factory, consumed };
  }

  it("counts one key's requests of one turn with one command, each with the count it would have had alone", async () => {
    const { factory, consumed } = sharedStore();
    const throttle = new RequestThrottle(rates, factory);
    const states = await Promise.all(Array.from({ length: 5 }, () => throttle.hit({ ip: '192.0.2.10' })));
    expect(states.map((s) => [s.allowed, s.remaining])).toEqual([
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
      [false, 0],
    ]);
    expect(consumed).toEqual([5]);
    // Every request counted, the refused ones too (API.md §6): the next turn starts above the limit.
    expect(await throttle.hit({ ip: '192.0.2.10' })).toMatchObject({ allowed: false, remaining: 0 });
    expect(consumed).toEqual([5, 1]);
  });

  it('keeps keys apart within a turn, and a batch takes its points only when that many are left', async () => {
    const { factory } = sharedStore();
    const throttle = new RequestThrottle(rates, factory);
    const [a, b, c] = await Promise.all([throttle.hit({ userId: 1 }), throttle.hit({ userId: 2 }), throttle.hit({ userId: 1 })]);
    expect([a!.remaining, b!.remaining, c!.remaining]).toEqual([4, 4, 3]);
    expect(await throttle.take({ userId: 1 }, 4)).toMatchObject({ allowed: false, remaining: 3 });
    expect(await throttle.take({ userId: 1 }, 3)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('says a key may be refused once its window is used up here (a read then waits for its count)', async () => {
    const { factory } = sharedStore();
    const throttle = new RequestThrottle(rates, factory);
    const key = { ip: '192.0.2.11' };
    await Promise.all([throttle.hit(key), throttle.hit(key)]);
    expect(throttle.mayRefuse(key)).toBe(false);
    await throttle.hit(key);
    expect(throttle.mayRefuse(key)).toBe(true);
    expect(throttle.mayRefuse({ ip: '192.0.2.12' })).toBe(false);
  });
});
