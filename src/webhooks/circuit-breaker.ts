// The circuit breaker of the "send" stage (STYLE.md 7; issue 11, finding 1): a webhook whose
// receiver keeps timing out or refusing connections is cut to one attempt at a time — a probe —
// until an attempt gets an answer again, as Convoy's circuit breaker does. Its other deliveries
// wait in the queue, not in this process's memory or its shared slots. State is per process:
// with several workers each learns on its own after `tripAfter` failures of its own attempts.

import type { AttemptOutcome } from './send-attempt.js';

/** Consecutive timeouts or connection failures that open a webhook's circuit. */
export const TRIP_AFTER = 3;

/** What a change of state was, so the dispatcher can log it and act on it. */
export type BreakerTransition = 'opened' | 'closed' | null;

/** Tracks consecutive failures without an answer per webhook; open circuits get one slot. */
export class CircuitBreaker {
  private readonly failures = new Map<number, number>();
  private readonly open = new Set<number>();

  constructor(private readonly tripAfter: number = TRIP_AFTER) {
    if (!Number.isInteger(tripAfter) || tripAfter < 1) throw new RangeError(`tripAfter must be a whole number of at least 1, got ${tripAfter}`);
  }

  /**
   * Counts an attempt's outcome. Any HTTP answer, even a 500, closes the circuit: the receiver is
   * there and answers quickly, and the retry schedule deals with its errors. Only attempts that got
   * no answer at all (timeout, refused, reset) count towards opening it.
   */
  record(webhookId: number, outcome: Pick<AttemptOutcome, 'statusCode'>): BreakerTransition {
    if (outcome.statusCode !== null) {
      this.failures.delete(webhookId);
      return this.open.delete(webhookId) ? 'closed' : null;
    }
    const count = (this.failures.get(webhookId) ?? 0) + 1;
    this.failures.set(webhookId, count);
    if (count >= this.tripAfter && !this.open.has(webhookId)) {
      this.open.add(webhookId);
      return 'opened';
    }
    return null;
  }

  /** True while the webhook gets only a probe at a time. */
  isOpen(webhookId: number): boolean {
    return this.open.has(webhookId);
  }

  /** Attempts the webhook may have in flight: `normal`, or 1 while its circuit is open. */
  limit(webhookId: number, normal: number): number {
    return this.open.has(webhookId) ? 1 : normal;
  }

  /** The webhooks whose circuits are open. */
  openIds(): Iterable<number> {
    return this.open;
  }

  /** How many circuits are open (the metric). */
  get openCount(): number {
    return this.open.size;
  }
}
