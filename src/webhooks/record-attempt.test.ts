import { describe, expect, it } from 'vitest';
import { nextState } from './record-attempt.js';
import type { AttemptOutcome } from './send-attempt.js';

const outcome = (statusCode: number | null, extra: Partial<AttemptOutcome> = {}): AttemptOutcome => ({
  ok: statusCode !== null && statusCode >= 200 && statusCode < 300,
  statusCode,
  durationMs: 5,
  requestHeaders: {},
  responseHeaders: {},
  responseBody: '',
  error: statusCode !== null && statusCode < 300 ? null : 'failed',
  ...extra,
});

describe('nextState', () => {
  const delivery = { attempts: 0, next_attempt_at: 1000 };
  const now = 1_000_000;

  it('marks a 2xx delivered', () => {
    expect(nextState(delivery, outcome(204), [10], now).status).toBe('delivered');
  });

  it('fails at once on 410 Gone, whatever the schedule', () => {
    expect(nextState(delivery, outcome(410), [10, 60], now).status).toBe('failed');
  });

  it('retries on the schedule with ±20 % jitter', () => {
    for (let i = 0; i < 50; i++) {
      const state = nextState(delivery, outcome(500), [10, 60], now);
      expect(state.status).toBe('retrying');
      expect(state.nextAttemptAt - now).toBeGreaterThanOrEqual(8000);
      expect(state.nextAttemptAt - now).toBeLessThanOrEqual(12000);
    }
  });

  it('fails once the N retries of an N-delay schedule are used up', () => {
    expect(nextState({ attempts: 1, next_attempt_at: 0 }, outcome(500), [10, 60], now).status).toBe('retrying');
    expect(nextState({ attempts: 2, next_attempt_at: 0 }, outcome(500), [10, 60], now).status).toBe('failed');
    expect(nextState(delivery, outcome(null), [], now).status).toBe('failed');
  });

  it('honours Retry-After on 429/503, capped at the largest delay', () => {
    expect(nextState(delivery, outcome(429, { retryAfterSeconds: 30 }), [10, 60], now).nextAttemptAt).toBe(now + 30_000);
    expect(nextState(delivery, outcome(503, { retryAfterSeconds: 9999 }), [10, 60], now).nextAttemptAt).toBe(now + 60_000);
  });
});
