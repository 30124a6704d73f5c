import type { Kysely, Transaction } from 'kysely';
import { appendChanges, numberPending, type NewChange } from '../db/change-log.js';
import type { Storage } from '../db/database.js';
import type { Database, DeliveryRow } from '../db/schema.js';

// A webhook's deliveries in the change log (issue 23, STREAMS.md §1): the outbox, the redelivery
// actions and the dispatcher write delivery rows outside the viewset, so each logs its creations
// and status changes here, in the transaction of the row change, numbered at commit with every
// other change. Only rows are logged (the writers hold no viewset): the deliveries' streams show
// each change from its row as a GET shows it (`changesLoggedAsRows`, resources/viewset/stream.ts).
//
// The dispatcher's outcome batches do not number their own changes: numbering takes the counter's
// lock until commit (db/change-log.ts), which would make every batch's commit wait for the API's
// writes and theirs for it. Their rows are `deferred`: committed unnumbered (no stream sees them
// yet), and numbered together by the next write of anyone, or at the latest NUMBER_DELAY_MS later
// by `numberSoon`: one short numbering transaction for every batch committed meanwhile.

type Executor = Transaction<Database> | Kysely<Database>;

/** The collection the deliveries are served as (deliveries-log.ts). */
const COLLECTION = 'deliveries';

/** A delivery row as the writers hold it; `payload` may be missing (never logged). */
export type DeliveryColumns = Omit<DeliveryRow, 'payload'> & { payload?: string };

/** A delivery's columns but its payload: what an INSERT … RETURNING hands the log. */
export const LOGGED_COLUMNS = [
  'id', 'guid', 'webhook_id', 'event', 'action', 'status', 'attempts', 'next_attempt_at', 'lease_until', 'status_code', 'duration_ms',
  'delivered_at', 'redelivery', 'request_headers', 'response_headers', 'response_body', 'created_at', 'record_key', 'payload_of',
] as const satisfies ReadonlyArray<keyof DeliveryColumns>;

/**
 * What an attempt sent and received: not logged. They were most of the bytes the log wrote per
 * attempt, and on SQLite, where the dispatcher shares serve's writer, halved the drain rate
 * (bench/RESULTS.md 2026-11-26). A delivery's own stream reads them from the delivery
 * (deliveries-log.ts `latestAttempts`); nothing else shows them.
 */
const ATTEMPT_DETAIL = ['request_headers', 'response_headers', 'response_body'] as const;

/**
 * The row as logged: without its payload, which never changes and which the representation reads
 * from the delivery itself (`payload_of`), so the log does not copy every payload sent, and
 * without the attempt's request and response.
 */
function loggedRow(row: DeliveryColumns): Record<string, unknown> {
  const { payload: _payload, ...columns } = row;
  const logged: Record<string, unknown> = { ...columns, payload: '', payload_of: row.payload_of ?? row.id };
  for (const name of ATTEMPT_DETAIL) delete logged[name];
  return logged;
}

function changeOf(action: 'created' | 'updated', row: DeliveryColumns, previous: DeliveryColumns | null): NewChange {
  const id = Number(row.id);
  return {
    collection: COLLECTION,
    recordId: id,
    action,
    // What a stream shows a reader who may no longer read it; every other message is built from `row`.
    record: { url: `/api/v1/webhooks/${Number(row.webhook_id)}/deliveries/${id}/`, id },
    changes: action === 'updated' ? {} : null,
    row: loggedRow(row),
    previous: previous === null ? null : loggedRow(previous),
  };
}

/** Logs new deliveries, in the transaction that inserted them. */
export async function logDeliveriesCreated(trx: Executor, rows: readonly DeliveryColumns[]): Promise<void> {
  await appendChanges(trx, rows.map((row) => changeOf('created', row, null)));
}

/**
 * Logs deliveries' new states (an attempt's outcome), in the transaction that wrote them, for a
 * later numbering (`numberSoon`).
 */
export async function logDeliveriesUpdated(trx: Executor, updates: ReadonlyArray<{ readonly row: DeliveryColumns; readonly previous: DeliveryColumns }>): Promise<void> {
  await appendChanges(trx, updates.map(({ row, previous }) => changeOf('updated', row, previous)), { deferred: true });
}

/** How long deferred changes wait to be numbered together: what they add to a stream's latency. */
export const NUMBER_DELAY_MS = 50;

const numberings = new WeakMap<Storage, Promise<void>>();

/**
 * Numbers the deferred changes committed so far, within NUMBER_DELAY_MS, in one transaction shared
 * by every call meanwhile; resolves once it has committed. If it fails, the changes stay committed
 * and unnumbered, and the next numbering (any write's) takes them.
 */
export function numberSoon(storage: Storage): Promise<void> {
  let numbering = numberings.get(storage);
  if (numbering === undefined) {
    numbering = new Promise((resolve) => setTimeout(resolve, NUMBER_DELAY_MS))
      .then(() => {
        numberings.delete(storage);
        return storage.transact(async (trx) => numberPending(trx));
      });
    numberings.set(storage, numbering);
  }
  return numbering;
}
