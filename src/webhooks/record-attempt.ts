import type { Kysely } from 'kysely';
import type { Storage } from '../db/database.js';
import type { Database, DeliveryRow } from '../db/schema.js';
import { retryDelaySeconds } from './retry-schedule.js';
import type { AttemptOutcome } from './send-attempt.js';

/**
 * The "record attempt" and "schedule retry" stages (STYLE.md 7; API.md §4 "Delivery guarantees"):
 * what an attempt did goes into the delivery log, the webhook's `last_response`, and decides the
 * delivery's next state. Outcomes are written in batches, one transaction per batch, because at
 * thousands of deliveries a second a transaction per attempt is what limits throughput.
 */

/** A webhook whose deliveries have all failed for this long is disabled (API.md §4). */
export const DISABLE_AFTER_MS = 3 * 86_400_000;

export interface AttemptRecord {
  readonly delivery: DeliveryRow;
  readonly outcome: AttemptOutcome;
  readonly finishedAt: number;
}

/** The delivery's next state after an attempt. */
export function nextState(
  delivery: Pick<DeliveryRow, 'attempts' | 'next_attempt_at'>,
  outcome: AttemptOutcome,
  schedule: readonly number[],
  now: number,
): { status: 'delivered' | 'retrying' | 'failed'; nextAttemptAt: number } {
  if (outcome.ok) return { status: 'delivered', nextAttemptAt: delivery.next_attempt_at };
  // 410 Gone: the receiver says it is gone for good; no retries (API.md §4).
  if (outcome.statusCode === 410) return { status: 'failed', nextAttemptAt: delivery.next_attempt_at };
  const delay = retryDelaySeconds(schedule, delivery.attempts + 1, {
    ...(outcome.retryAfterSeconds !== undefined ? { retryAfterSeconds: outcome.retryAfterSeconds } : {}),
  });
  if (delay === null) return { status: 'failed', nextAttemptAt: delivery.next_attempt_at };
  return { status: 'retrying', nextAttemptAt: now + Math.round(delay * 1000) };
}

/** Stops a webhook's deliveries, saying why (`disabled_reason`, API.md §4). */
export async function disableWebhook(db: Kysely<Database>, webhookId: number, reason: string): Promise<void> {
  await db.updateTable('webhooks').set({ active: 0, disabled_reason: reason, updated_at: Date.now() }).where('id', '=', webhookId).execute();
}

function responseMessage(outcome: AttemptOutcome): string {
  return outcome.ok ? 'OK' : (outcome.error ?? 'failed');
}

/** Writes a batch of attempt outcomes and the webhooks' resulting state in one transaction. */
export async function recordAttempts(storage: Storage, records: readonly AttemptRecord[], schedule: readonly number[]): Promise<void> {
  if (records.length === 0) return;
  await storage.db.transaction().execute(async (trx) => {
    for (const { delivery, outcome, finishedAt } of records) {
      const state = nextState(delivery, outcome, schedule, finishedAt);
      await trx
        .updateTable('deliveries')
        .set({
          status: state.status,
          attempts: delivery.attempts + 1,
          next_attempt_at: state.nextAttemptAt,
          lease_until: null,
          status_code: outcome.statusCode,
          duration_ms: Math.round(outcome.durationMs),
          delivered_at: outcome.ok ? finishedAt : null,
          request_headers: JSON.stringify(outcome.requestHeaders),
          response_headers: JSON.stringify(outcome.responseHeaders),
          response_body: outcome.responseBody,
        })
        .where('id', '=', delivery.id)
        .execute();
    }

    // The webhook's state follows its latest attempt in the batch.
    const latest = new Map<number, AttemptRecord>();
    for (const record of records) latest.set(record.delivery.webhook_id, record);
    for (const [webhookId, { outcome, finishedAt }] of latest) {
      const lastResponse = {
        last_response_code: outcome.statusCode,
        last_response_status: outcome.ok ? 'ok' : 'failed',
        last_response_message: responseMessage(outcome),
        updated_at: finishedAt,
      };
      if (outcome.ok) {
        await trx.updateTable('webhooks').set({ ...lastResponse, failing_since: null }).where('id', '=', webhookId).execute();
      } else if (outcome.statusCode === 410) {
        await trx
          .updateTable('webhooks')
          .set({
            ...lastResponse,
            active: 0,
            disabled_reason: `The receiver answered 410 Gone at ${new Date(finishedAt).toISOString()}; deliveries stopped.`,
          })
          .where('id', '=', webhookId)
          .execute();
      } else {
        const hook = await trx.selectFrom('webhooks').select(['failing_since']).where('id', '=', webhookId).executeTakeFirst();
        if (!hook) continue;
        const failingSince = hook.failing_since ?? finishedAt;
        const disable = finishedAt - failingSince >= DISABLE_AFTER_MS;
        await trx
          .updateTable('webhooks')
          .set({
            ...lastResponse,
            failing_since: failingSince,
            ...(disable
              ? {
                  active: 0,
                  disabled_reason: `Every delivery failed for 3 days (since ${new Date(failingSince).toISOString()}); deliveries stopped.`,
                }
              : {}),
          })
          .where('id', '=', webhookId)
          .execute();
      }
    }
  });
}
