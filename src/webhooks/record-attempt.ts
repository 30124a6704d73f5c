import { sql, type Kysely } from 'kysely';
import type { Storage } from '../db/database.js';
import type { Database, DeliveryRow } from '../db/schema.js';
import { logDeliveriesUpdated, type DeliveryColumns } from './delivery-changes.js';
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

/** Rows per UPDATE: 10 parameters each stays well under SQLite's and PostgreSQL's limits. */
const ROWS_PER_STATEMENT = 200;

/** The delivery as the attempt leaves it (its next state computed once: retries are jittered). */
function attempted({ delivery, outcome, finishedAt }: AttemptRecord, schedule: readonly number[]): DeliveryColumns {
  const state = nextState(delivery, outcome, schedule, finishedAt);
  return {
    ...delivery,
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
  };
}

/**
 * One UPDATE … FROM for many deliveries: a statement per delivery cost a round trip each on
 * PostgreSQL (issue #6). The rows are a UNION ALL of SELECTs, which both dialects accept (SQLite
 * has no column list on VALUES); the casts give PostgreSQL the types of the parameters.
 */
async function updateDeliveries(trx: Kysely<Database>, updated: readonly DeliveryColumns[]): Promise<void> {
  const rows = updated.map((row) => {
    return sql`select cast(${row.id} as bigint) as id, cast(${row.status} as varchar(16)) as status,
      cast(${row.attempts} as integer) as attempts, cast(${row.next_attempt_at} as bigint) as next_attempt_at,
      cast(${row.status_code} as integer) as status_code, cast(${row.duration_ms} as integer) as duration_ms,
      cast(${row.delivered_at} as bigint) as delivered_at, cast(${row.request_headers} as text) as request_headers,
      cast(${row.response_headers} as text) as response_headers, cast(${row.response_body} as text) as response_body`;
  });
  await sql`
    update deliveries set status = v.status, attempts = v.attempts, next_attempt_at = v.next_attempt_at,
      lease_until = null, status_code = v.status_code, duration_ms = v.duration_ms, delivered_at = v.delivered_at,
      request_headers = v.request_headers, response_headers = v.response_headers, response_body = v.response_body
    from (${sql.join(rows, sql` union all `)}) as v
    where deliveries.id = v.id`.execute(trx);
}

/**
 * Writes a batch of attempt outcomes and the webhooks' resulting state in one transaction, with
 * the deliveries' new states in the change log (their streams, issue 23), numbered later
 * (delivery-changes.ts `numberSoon`).
 */
export async function recordAttempts(storage: Storage, records: readonly AttemptRecord[], schedule: readonly number[]): Promise<void> {
  if (records.length === 0) return;
  const updated = records.map((record) => attempted(record, schedule));
  await storage.db.transaction().execute(async (trx) => {
    // The webhook's state follows its latest attempt in the batch. Webhooks are updated first and
    // in id order, so that every transaction locks a webhook before its deliveries, as deleting
    // a webhook (or its owner) does through the foreign keys' cascade, and workers recording at
    // once lock webhooks in the same order: no deadlock (PostgreSQL). A success that changes
    // nothing writes nothing (no row lock for other workers to wait on).
    const latest = new Map<number, AttemptRecord>();
    for (const record of records) latest.set(record.delivery.webhook_id, record);
    for (const [webhookId, { outcome, finishedAt }] of [...latest].sort(([a], [b]) => a - b)) {
      const lastResponse = {
        last_response_code: outcome.statusCode,
        last_response_status: outcome.ok ? 'ok' : 'failed',
        last_response_message: responseMessage(outcome),
      };
      if (outcome.ok) {
        await trx
          .updateTable('webhooks')
          .set({ ...lastResponse, failing_since: null })
          .where('id', '=', webhookId)
          .where((eb) =>
            eb.or([
              eb('last_response_status', '!=', 'ok'),
              eb('last_response_code', 'is', null),
              eb('last_response_code', '!=', outcome.statusCode),
              eb('failing_since', 'is not', null),
            ]),
          )
          .execute();
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
        const webhook = await trx.selectFrom('webhooks').select(['failing_since']).where('id', '=', webhookId).executeTakeFirst();
        if (!webhook) continue;
        const failingSince = webhook.failing_since ?? finishedAt;
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
    for (let start = 0; start < updated.length; start += ROWS_PER_STATEMENT) {
      await updateDeliveries(trx, updated.slice(start, start + ROWS_PER_STATEMENT));
    }
    await logDeliveriesUpdated(trx, records.map(({ delivery }, index) => ({ row: updated[index]!, previous: delivery })));
  });
}
