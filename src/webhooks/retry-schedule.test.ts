import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_SCHEDULE } from '../config.js';
import { parseRetryAfter, retryDelaySeconds } from './retry-schedule.js';

describe('retryDelaySeconds', () => {
  const schedule = [10, 60, 300];

  it('gives the Nth delay after the Nth failure, then null once the schedule is used up', () => {
    const middle = () => 0.5; // no jitter at the midpoint
    expect(retryDelaySeconds(schedule, 1, { random: middle })).toBe(10);
    expect(retryDelaySeconds(schedule, 2, { random: middle })).toBe(60);
    expect(retryDelaySeconds(schedule, 3, { random: middle })).toBe(300);
    expect(retryDelaySeconds(schedule, 4, { random: middle })).toBeNull();
  });

  it('makes N delays mean N retries: 1 attempt + N retries, then failed', () => {
    const attempts = (s: readonly number[]) => {
      let failed = 1;
      while (retryDelaySeconds(s, failed) !== null) failed++;
      return failed;
    };
    expect(attempts(DEFAULT_RETRY_SCHEDULE)).toBe(10);
    expect(attempts([5])).toBe(2);
    expect(attempts([])).toBe(1);
  });

  it('applies ±20 % uniform jitter', () => {
    expect(retryDelaySeconds(schedule, 2, { random: () => 0 })).toBeCloseTo(48);
    expect(retryDelaySeconds(schedule, 2, { random: () => 0.999999 })).toBeCloseTo(72, 3);
    expect(retryDelaySeconds(schedule, 2, { random: () => 0.25 })).toBeCloseTo(54);
    const samples = Array.from({ length: 2000 }, () => retryDelaySeconds([100], 1) as number);
    expect(Math.min(...samples)).toBeGreaterThanOrEqual(80);
    expect(Math.max(...samples)).toBeLessThan(120);
    // Uniform: each outer quarter of the range (80–90, 110–120) holds about a quarter of them.
    expect(samples.filter((s) => s < 90).length).toBeGreaterThan(350);
    expect(samples.filter((s) => s >= 110).length).toBeGreaterThan(350);
  });

  it('lets Retry-After lengthen a wait, without jitter, capped at the largest delay', () => {
    const random = () => 0;
    expect(retryDelaySeconds(schedule, 1, { retryAfterSeconds: 120, random })).toBe(120);
    expect(retryDelaySeconds(schedule, 1, { retryAfterSeconds: 10 ** 6, random })).toBe(300);
    expect(retryDelaySeconds(DEFAULT_RETRY_SCHEDULE, 1, { retryAfterSeconds: 10 ** 6 })).toBe(86400);
  });

  it('never lets Retry-After shorten a wait below the schedule (issue 11, finding 4)', () => {
    const random = () => 0.5;
    expect(retryDelaySeconds(schedule, 1, { retryAfterSeconds: 0, random })).toBe(10);
    expect(retryDelaySeconds(schedule, 2, { retryAfterSeconds: 5, random })).toBe(60);
    // Even with the most negative jitter, the wait is the schedule's less 20 %, never Retry-After's 0.
    expect(retryDelaySeconds(DEFAULT_RETRY_SCHEDULE, 9, { retryAfterSeconds: 0, random: () => 0 })).toBeCloseTo(86400 * 0.8);
  });

  it('still fails the delivery when the schedule is used up, whatever Retry-After says', () => {
    expect(retryDelaySeconds(schedule, 4, { retryAfterSeconds: 5 })).toBeNull();
  });

  it('ignores an unusable Retry-After', () => {
    expect(retryDelaySeconds(schedule, 1, { retryAfterSeconds: Number.NaN, random: () => 0.5 })).toBe(10);
    expect(retryDelaySeconds(schedule, 1, { retryAfterSeconds: -5, random: () => 0.5 })).toBe(10);
  });

  it.each([0, -1, 1.5, Number.NaN])('refuses failedAttempts %s', (n) => {
    expect(() => retryDelaySeconds(schedule, n)).toThrow(RangeError);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');

  it('reads delta-seconds', () => {
    expect(parseRetryAfter('120', now)).toBe(120);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
  });

  it('reads the three HTTP-date forms as seconds from now', () => {
    expect(parseRetryAfter('Wed, 01 Jan 2025 00:02:00 GMT', now)).toBe(120);
    expect(parseRetryAfter('Wednesday, 01-Jan-25 00:02:00 GMT', now)).toBe(120);
    expect(parseRetryAfter('Wed Jan  1 00:02:00 2025', now)).toBe(120);
  });

  it('rounds a fractional wait up and a past date to 0', () => {
    expect(parseRetryAfter('Wed, 01 Jan 2025 00:00:01 GMT', now - 500)).toBe(2);
    expect(parseRetryAfter('Tue, 31 Dec 2024 23:00:00 GMT', now)).toBe(0);
  });

  it.each([undefined, '', 'soon', '-5', '1.5', '5 minutes', 'soon 5', '2025-01-01', '99999999999999999999'])(
    'returns undefined for %j',
    (value) => {
      expect(parseRetryAfter(value, now)).toBeUndefined();
    },
  );

  it('defaults now to the clock', () => {
    const inAMinute = new Date(Date.now() + 60_000).toUTCString();
    expect(parseRetryAfter(inAMinute)).toBeGreaterThanOrEqual(59);
    expect(parseRetryAfter(inAMinute)).toBeLessThanOrEqual(60);
  });
});
