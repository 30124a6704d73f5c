import { CompiledQuery, sql, type Kysely, type Transaction } from 'kysely';
import type { DynamicDb } from './dynamic-tables.js';
import { sendLater } from './pipelining.js';
import type { ChangeLogRow, Database } from './schema.js';

// The change log (issue 23, STREAMS.md §3): one row per committed change, the record as it was
// shown and its columns, so that any process can tell any stream what changed, in commit order,
// and a client can resume after a position. Rows are written with position null by the change's
// listener (webhooks/change-log.ts) and numbered as the transaction's last step
// (`numberChanges`, called by Storage.transact just before COMMIT):
//
// - the step runs `UPDATE change_positions SET last = last + n`, which locks the counter's row
//   until the transaction ends, so the next transaction's numbering waits for this commit;
// - PostgreSQL releases a transaction's locks only after its commit is visible to new snapshots,
//   so a transaction numbered later becomes visible later: whoever reads "position > N" and sees
//   position P also sees every position below P. Sequence values or transaction ids, taken
//   earlier in a transaction, would not (concurrent transactions commit out of order);
// - SQLite has one writer, so its commits are in order already; the same step serves both, and a
//   group commit (group-commit.ts) numbers its whole batch once;
// - a writer that need not number its own (the dispatcher's outcome batches, `deferred`) commits
//   its rows with position null, unseen by readers, and the next numbering step of any
//   transaction numbers them with its own: on PostgreSQL that step takes the counter's lock
//   first and then counts and numbers in one statement, so the rows it numbers are exactly the
//   ones it counted, whatever commits meanwhile.
//
// Only the tail of a writing transaction (one statement and the COMMIT on PostgreSQL, sent
// together) is serialised: see
// docs/ARCHITECTURE.md for what it costs concurrent writers.

type Executor = Transaction<Database> | Kysely<Database>;
/** database.ts's `Dialect`, spelled here: database.ts imports this file. */
type Dialect = 'sqlite' | 'postgres';

/** The PostgreSQL channel a numbering transaction notifies (the new last position as payload). */
export const CHANGES_CHANNEL = 'restwire_changes';

/** What the listener writes for one change. */
export interface NewChange {
  readonly collection: string;
  readonly recordId: number;
  readonly action: 'created' | 'updated' | 'deleted';
  readonly record: Record<string, unknown>;
  readonly changes: Record<string, unknown> | null;
  readonly row: Record<string, unknown>;
  readonly previous: Record<string, unknown> | null;
}

/** A committed change as readers see it: what was written, with its position. */
export interface LoggedChange extends NewChange {
  readonly position: number;
}

// Transactions that appended changes not numbered yet; a WeakSet so a rolled-back one is forgotten.
const unnumbered = new WeakSet<object>();

/** Rows one INSERT writes (10 values a row: far below either database's bound-parameter limit). */
const INSERT_BATCH = 1_000;

// Changes a write unit holds back to append together, by transaction: a batch's hundred creates
// log theirs in one INSERT instead of one each (issue 20).
const held = new WeakMap<object, NewChange[]>();

/**
 * Holds the changes appended in `trx` from now on, until `releaseChanges` or `stopHoldingChanges`.
 * Returns false, holding nothing anew, when `trx` holds them already (a batch request in a group
 * commit's transaction): the outer holder appends them.
 */
export function holdChanges(trx: object): boolean {
  if (held.has(trx)) return false;
  held.set(trx, []);
  return true;
}

/** Appends the changes held in `trx`, in the order they were made, and holds no more. */
export async function releaseChanges(trx: Executor | DynamicDb): Promise<void> {
  const changes = held.get(trx);
  held.delete(trx);
  // A viewset's transaction, typed for its collections' tables: the same connection.
  if (changes) await appendChanges(trx as unknown as Executor, changes);
}

/** Forgets the changes held in `trx` and holds no more (their writes rolled back). */
export function stopHoldingChanges(trx: object): void {
  held.delete(trx);
}

/** How many changes `trx` holds: where a savepoint starts, to drop those made after it if it rolls back. */
export function heldChangeCount(trx: object): number {
  return held.get(trx)?.length ?? 0;
}

/** Drops the changes `trx` holds from position `from` on: their savepoint rolled back. */
export function dropHeldChanges(trx: object, from: number): void {
  held.get(trx)?.splice(from);
}

/**
 * Appends changes, unnumbered, within the change's transaction (or holds them, see `holdChanges`).
 * `deferred`: the transaction's last step does not number them; the next numbering of any
 * transaction does (`numberPending`).
 */
export async function appendChanges(trx: Executor, changes: readonly NewChange[], { deferred = false }: { deferred?: boolean } = {}): Promise<void> {
  if (changes.length === 0) return;
  const holding = deferred ? undefined : held.get(trx);
  if (holding) {
    holding.push(...changes);
    return;
  }
  const now = Date.now();
  if (changes.length === 1) {
    // Every single write logs one change: its INSERT is compiled once per dialect, as the viewset's
    // hottest SELECT is; building it with Kysely per write was a visible part of a create's CPU (issue 18).
    // Sent without waiting on PostgreSQL (db/pipelining.ts): its answer matters only at commit.
    const compiled = singleInsertOf(trx);
    await sendLater(trx, CompiledQuery.raw(compiled.sql, rowValues(changes[0]!, now)));
    if (!deferred) unnumbered.add(trx);
    return;
  }
  for (let start = 0; start < changes.length; start += INSERT_BATCH) {
    const insert = trx
      .insertInto('change_log')
      .values(
        changes.slice(start, start + INSERT_BATCH).map((change) => ({
          position: null,
          collection: change.collection,
          record_id: change.recordId,
          action: change.action,
          record: JSON.stringify(change.record),
          changes: change.changes === null ? null : JSON.stringify(change.changes),
          row: JSON.stringify(change.row),
          previous: change.previous === null ? null : JSON.stringify(change.previous),
          created_at: now,
        })),
      )
      .compile();
    await sendLater(trx, insert);
  }
  if (!deferred) unnumbered.add(trx);
}

/** Makes the transaction's last step number every change still unnumbered (deferred ones). */
export function numberPending(trx: Transaction<Database>): void {
  unnumbered.add(trx);
}

/** One change's columns, in the order of SINGLE_INSERT_COLUMNS. */
function rowValues(change: NewChange, now: number): unknown[] {
  return [
    null,
    change.collection,
    change.recordId,
    change.action,
    JSON.stringify(change.record),
    change.changes === null ? null : JSON.stringify(change.changes),
    JSON.stringify(change.row),
    change.previous === null ? null : JSON.stringify(change.previous),
    now,
  ];
}

// The one-row INSERT, by the executor's dialect adapter (shared by a database and its transactions).
const singleInserts = new WeakMap<object, CompiledQuery>();
function singleInsertOf(trx: Executor): CompiledQuery {
  const adapter = trx.getExecutor().adapter;
  let compiled = singleInserts.get(adapter);
  if (!compiled) {
    compiled = trx
      .insertInto('change_log')
      .values({ position: null, collection: '', record_id: 0, action: 'created', record: '', changes: null, row: '', previous: null, created_at: 0 })
      .compile();
    singleInserts.set(adapter, compiled);
  }
  return compiled;
}

const COUNT_UNNUMBERED = CompiledQuery.raw('select count(*) as n from change_log where position is null');

// PostgreSQL numbers in two statements sent together with the COMMIT. The counter's lock first:
// once held, no other numbering runs until this transaction ends, and a statement started after it
// sees every earlier numbering committed. Then one statement counts and numbers the unnumbered rows
// (its own, and deferred ones committed before it) from one snapshot, so a deferred batch
// committing meanwhile is left whole for the next numbering, never half-counted, and NOTIFYs the
// new last position (no row, and no NOTIFY, when nothing was unnumbered).
const LOCK_COUNTER = CompiledQuery.raw('select last from change_positions where id = 1 for update');
// The unnumbered rows are read by an index scan of change_log_unnumbered (migration 0012), not the
// bitmap scan the planner prefers for a few hundred rows: only an index scan marks the entries of
// rows numbered since the last vacuum as dead, so the next numbering skips them instead of visiting
// each one's heap page again, under the counter's lock (thousands of them per numbering otherwise).
const INDEX_SCAN_ONLY = CompiledQuery.raw('set local enable_bitmapscan = off');
const NUMBER_POSTGRES = CompiledQuery.raw(`
  with pending as (
    select id, row_number() over (order by id) as rank, count(*) over () as n from change_log where position is null
  ), counter as (
    update change_positions set last = last + (select count(*) from pending) where id = 1 and exists (select from pending) returning last
  ), numbered as (
    update change_log set position = counter.last - pending.n + pending.rank from pending, counter where change_log.id = pending.id
  )
  select last, pg_notify('${CHANGES_CHANNEL}', last::text) from counter`);

/**
 * The transaction's last step: numbers its changes (in the order they were written) after the
 * last position taken, holding the counter's row lock until commit. Returns null when the
 * transaction logged no changes, else the last position taken (null on PostgreSQL, where the
 * numbering is sent with the COMMIT: its NOTIFY carries the position).
 */
export async function numberChanges(trx: Transaction<Database>, dialect: Dialect): Promise<{ readonly last: number | null } | null> {
  if (!unnumbered.has(trx)) return null;
  unnumbered.delete(trx);
  if (dialect === 'postgres') {
    // Sent with the COMMIT (db/pipelining.ts): the counter's lock is held from here to the commit,
    // and no round trip to this process happens inside it, so a busy event loop here never keeps
    // other writers from numbering (docs/ARCHITECTURE.md).
    await sendLater(trx, INDEX_SCAN_ONLY);
    await sendLater(trx, LOCK_COUNTER);
    await sendLater(trx, NUMBER_POSTGRES);
    return { last: null };
  }
  // The unnumbered rows are this transaction's and deferred ones committed before it (SQLite's one
  // writer: nothing commits meanwhile). (A group commit's rolled-back unit took its rows with it.)
  const { rows } = await trx.executeQuery<{ n: number | string }>(COUNT_UNNUMBERED);
  const count = Number(rows[0]?.n ?? 0);
  if (count === 0) return null;
  const counter = await sql<{ last: number | string }>`update change_positions set last = last + ${count} where id = 1 returning last`.execute(trx);
  const last = Number(counter.rows[0]!.last);
  await sql`
    update change_log set position = ${last - count} + numbered.rank
    from (select id, row_number() over (order by id) as rank from change_log where position is null) numbered
    where change_log.id = numbered.id`.execute(trx);
  return { last };
}

/** The last committed position (0 before any change) and the newest one pruning has removed. */
export async function changePositions(db: Executor): Promise<{ last: number; prunedThrough: number }> {
  const row = await db.selectFrom('change_positions').select(['last', 'pruned_through']).where('id', '=', 1).executeTakeFirst();
  return { last: Number(row?.last ?? 0), prunedThrough: Number(row?.pruned_through ?? 0) };
}

/** Up to `limit` committed changes after `after`, in position order. */
export async function readChanges(db: Executor, after: number, limit: number): Promise<LoggedChange[]> {
  const rows = await db.selectFrom('change_log').selectAll().where('position', '>', after).orderBy('position').limit(limit).execute();
  return rows.map(loggedChange);
}

function loggedChange(row: ChangeLogRow): LoggedChange {
  return {
    position: Number(row.position),
    collection: row.collection,
    recordId: Number(row.record_id),
    action: row.action as LoggedChange['action'],
    record: JSON.parse(row.record) as Record<string, unknown>,
    changes: row.changes === null ? null : (JSON.parse(row.changes) as Record<string, unknown>),
    row: JSON.parse(row.row) as Record<string, unknown>,
    previous: row.previous === null ? null : (JSON.parse(row.previous) as Record<string, unknown>),
  };
}

/** Rows one pruning statement deletes. */
const PRUNE_BATCH = 500;

/**
 * Deletes one batch of changes written before `before`, oldest first, and records the newest
 * position removed, so a stream asked to resume at or before it is told to `reset`. Returns how
 * many were deleted.
 */
export async function pruneChanges(db: Kysely<Database>, before: number): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const newest = await sql<{ p: number | string | null }>`
      select max(position) as p from (
        select position from change_log where position is not null and created_at < ${before} order by position limit ${PRUNE_BATCH}
      ) oldest`.execute(trx);
    const through = newest.rows[0]?.p;
    if (through === null || through === undefined) return 0;
    const result = await trx.deleteFrom('change_log').where('position', '<=', Number(through)).executeTakeFirst();
    await trx
      .updateTable('change_positions')
      .set({ pruned_through: sql`case when pruned_through > ${Number(through)} then pruned_through else ${Number(through)} end` })
      .where('id', '=', 1)
      .execute();
    return Number(result.numDeletedRows);
  });
}

/**
 * A query over one stored row instead of its table: `query` (a `SELECT … FROM "<table>" WHERE
 * <condition>`, compiled) runs with a common table expression of the same name shadowing the
 * table, holding only `row`, so a stream's filters and read rule judge the record as it was at
 * the change, not as it is now. The one dialect difference: PostgreSQL types the row by the
 * table's own row type (`json_populate_record`), SQLite needs no types.
 */
export function overStoredRow(dialect: Dialect, table: string, query: CompiledQuery, row: Record<string, unknown>): CompiledQuery {
  const name = `"${table.replaceAll('"', '""')}"`;
  if (dialect === 'postgres') {
    const param = query.parameters.length + 1;
    return CompiledQuery.raw(`with ${name} as (select * from json_populate_record(null::${name}, $${param}::json)) ${query.sql}`, [...query.parameters, JSON.stringify(row)]);
  }
  const columns = Object.keys(row);
  const select = columns.map((column) => `? as "${column.replaceAll('"', '""')}"`).join(', ');
  const values = columns.map((column) => {
    const value = row[column];
    return typeof value === 'boolean' ? Number(value) : value;
  });
  return CompiledQuery.raw(`with ${name} as (select ${select}) ${query.sql}`, [...values, ...query.parameters]);
}
