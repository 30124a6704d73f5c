import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Kysely } from 'kysely';
import { deliveriesByStatus, queueDepth } from '../db/delivery-queue.js';
import type { Database } from '../db/schema.js';
import type { AttemptOutcome } from './send-attempt.js';

/** What the dispatcher reports about itself at scrape time. */
export interface DispatcherGauges {
  /** Webhooks whose circuit is open in this process (cut to one probe at a time). */
  openCircuits(): number;
}

/**
 * The queue as the database holds it, for /metrics (API.md §5): deliveries waiting, and rows in
 * the delivery log by status. Read at scrape time from the database, so the API process reports
 * them whether or not it delivers (its dispatcher runs in a process of its own, cli/dispatcher-process.ts).
 */
export function createQueueMetrics(registry: Registry, db: Kysely<Database>): void {
  new Gauge({
    name: 'restwire_webhook_queue_depth',
    help: 'Deliveries waiting for an attempt (pending or retrying).',
    registers: [registry],
    async collect() {
      this.set(await queueDepth(db));
    },
  });
  new Gauge({
    name: 'restwire_webhook_deliveries',
    help: 'Rows in the delivery log, by status (kept for DELIVERY_RETENTION_DAYS).',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      const counts = await deliveriesByStatus(db);
      this.reset();
      for (const status of ['pending', 'retrying', 'delivered', 'failed']) this.set({ status }, counts.get(status) ?? 0);
    },
  });
}

/**
 * The dispatcher's own metrics for /metrics (API.md §5): attempts by outcome, their duration,
 * open circuits (issue 11), and what retention removed. Kept in the process that delivers.
 */
export function createDeliveryMetrics(registry: Registry, dispatcher: DispatcherGauges) {
  const attempts = new Counter({
    name: 'restwire_webhook_attempts_total',
    help: 'Webhook delivery attempts, by outcome (success, http_error, network_error).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'restwire_webhook_attempt_duration_seconds',
    help: 'Time from connect to last byte of a delivery attempt.',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  new Gauge({
    name: 'restwire_webhook_circuits_open',
    help: 'Webhooks whose receiver kept failing to answer, cut to one attempt at a time until it answers (this process).',
    registers: [registry],
    collect() {
      this.set(dispatcher.openCircuits());
    },
  });
  const pruned = new Counter({
    name: 'restwire_webhook_deliveries_pruned_total',
    help: 'Deliveries deleted by retention (older than DELIVERY_RETENTION_DAYS; never pending or retrying).',
    registers: [registry],
  });
  const truncated = new Counter({
    name: 'restwire_webhook_response_bodies_truncated_total',
    help: 'Stored response bodies cut to 1,024 characters by the per-webhook and per-user caps.',
    registers: [registry],
  });

  return {
    observePruning(done: { deleted: number; truncated: number }): void {
      pruned.inc(done.deleted);
      truncated.inc(done.truncated);
    },
    observeAttempt(outcome: AttemptOutcome): void {
      attempts.inc({ outcome: outcome.ok ? 'success' : outcome.statusCode === null ? 'network_error' : 'http_error' });
      duration.observe(outcome.durationMs / 1000);
    },
  };
}

export type DeliveryMetrics = ReturnType<typeof createDeliveryMetrics>;
