// When a failed delivery is tried again (API.md §4 "Delivery guarantees", §6 "Retries"):
// a schedule of N delays gives N retries after the first attempt, each with ±20 % jitter, and a
// Retry-After on 429 or 503 may lengthen a wait up to the schedule's largest delay, never shorten it.

/** Jitter spreads retries of a burst of failures so they do not all land on a receiver at once. */
const JITTER = 0.2;

/** Options for `retryDelaySeconds`. */
export interface RetryDelayOptions {
  /** Seconds asked for by the receiver's Retry-After on a 429 or 503. */
  retryAfterSeconds?: number;
  /** Uniform random number in [0, 1) (default Math.random); injectable for tests. */
  random?: () => number;
}

/**
 * Seconds to wait after the `failedAttempts`-th failed attempt (1-based) before the next one,
 * or null when the schedule is used up and the delivery is failed.
 */
export function retryDelaySeconds(
  schedule: readonly number[],
  failedAttempts: number,
  { retryAfterSeconds, random = Math.random }: RetryDelayOptions = {},
): number | null {
  if (!Number.isInteger(failedAttempts) || failedAttempts < 1) {
    throw new RangeError(`failedAttempts must be an integer of at least 1, got ${failedAttempts}`);
  }
  const scheduled = schedule[failedAttempts - 1];
  if (scheduled === undefined) return null;
  const jittered = scheduled * (1 - JITTER + 2 * JITTER * random());
  // A receiver's Retry-After may lengthen the wait, capped so that one cannot park a delivery
  // beyond the schedule's horizon (API.md §4), but never shorten it: `Retry-After: 0` on every
  // 503 used up the whole two-day schedule in 121 ms (issue 11, finding 4).
  if (retryAfterSeconds !== undefined && Number.isFinite(retryAfterSeconds) && retryAfterSeconds >= 0) {
    return Math.max(jittered, Math.min(retryAfterSeconds, Math.max(...schedule)));
  }
  return jittered;
}

/**
 * Reads a Retry-After header (RFC 9110 §10.2.3): delta-seconds, or an HTTP-date turned into the
 * seconds left until it (0 if past). Returns undefined when absent or unreadable.
 */
export function parseRetryAfter(value: string | undefined, now: number = Date.now()): number | undefined {
  if (typeof value !== 'string') return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) {
    const seconds = Number(text);
    return Number.isSafeInteger(seconds) ? seconds : undefined;
  }
  // Date.parse reads far more than HTTP-dates; requiring the day-name start of all three
  // RFC 9110 §5.6.7 formats keeps junk such as "soon 5" from becoming a date.
  if (!/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? /.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, Math.ceil((at - now) / 1000));
}
