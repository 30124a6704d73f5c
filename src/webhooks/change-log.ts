import type { Kysely, Transaction } from 'kysely';
import { appendChanges, type NewChange } from '../db/change-log.js';
import type { DynamicDb, Row } from '../db/dynamic-tables.js';
import type { Database } from '../db/schema.js';
import type { Change, ChangeListener } from '../resources/resource.js';

// The change log's writer (issue 23): a change listener beside the webhook outbox (outbox.ts), so
// every change of every collection is logged in its own transaction, whether or not a stream
// listens, with what a stream needs to build its message for any reader (STREAMS.md §2). The log
// is numbered at commit and read by each process's change feed (db/change-feed.ts).

type Executor = Transaction<Database> | Kysely<Database>;

/** The listener that logs every change; writes nothing else and wakes nothing (NOTIFY is sent at numbering). */
export function changeLogListener(): ChangeListener {
  async function logged(trx: Executor, change: Change): Promise<NewChange> {
    const id = Number(change.record.id);
    // Every viewset write hands its rows over; a listener called otherwise reads the row it needs.
    const row = change.row ?? (((await (trx as unknown as DynamicDb).selectFrom(change.resource.table).selectAll().where('id', '=', id).executeTakeFirst()) as Row | undefined) ?? { id });
    return {
      collection: change.resource.name,
      recordId: id,
      action: change.action,
      record: change.record,
      changes: change.action === 'updated' ? (change.changes ?? {}) : null,
      row,
      previous: change.action === 'updated' ? (change.previous ?? null) : null,
    };
  }

  async function logChange(trx: Executor, change: Change): Promise<void> {
    await appendChanges(trx, [await logged(trx, change)]);
  }

  /** A cascade's batch: logged in a few statements, in order. */
  async function logChanges(trx: Executor, changes: readonly Change[]): Promise<void> {
    const entries: NewChange[] = [];
    for (const change of changes) entries.push(await logged(trx, change));
    await appendChanges(trx, entries);
  }
  return Object.assign(logChange, { changes: logChanges });
}
