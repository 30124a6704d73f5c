import { CompiledQuery, sql, type Kysely, type Transaction } from 'kysely';
import type pg from 'pg';
import type { Storage } from './database.js';
import type { Database, DeliveryRow } from './schema.js';
import { sendLater } from './pipelining.js';

/**
 * The delivery queue's dialect-specific SQL, in one place (STYLE.md 6): claiming due work with
 * `FOR UPDATE SKIP LOCKED` on PostgreSQL so any number of workers share it, and LISTEN/NOTIFY to
 * wake them. On SQLite there is one dispatcher and the database's single writer does the locking.
 */
export const CHANNEL = 'restwire_deliveries';

/** Deliveries waiting for an attempt: new, or scheduled for a retry. */
export const WAITING = ['pending', 'retrying'] as const;

export interface ClaimOptions {
  readonly now: number;
  readonly limit: number;
  /** The lease: another worker may take the delivery after this (a worker that died). */
  readonly leaseUntil: number;
  /** Webhooks this worker has at its concurrency cap; their work is left for later. */
  readonly excludeWebhookIds: readonly number[];
  /** Users whose webhooks hold their fair share of this worker; their work is left for later. */
  readonly excludeOwnerIds?: readonly number[];
  /**
   * How many deliveries this worker can still take per webhook and per user (`of`, else
   * `otherwise`): the claim leases no more than that, so it never leases what it would give back.
   */
  readonly room: ClaimRoom;
}

export interface ClaimRoom {
  readonly webhooks: { readonly of: ReadonlyMap<number, number>; readonly otherwise: number };
  readonly owners: { readonly of: ReadonlyMap<number, number>; readonly otherwise: number };
}

/** `column`'s room: a CASE over the ids with their own, literals (ids and counts are integers), so both dialects type it as one. */
function roomOf(column: string, { of, otherwise }: ClaimRoom['webhooks']) {
  const literal = (value: number) => {
    if (!Number.isSafeInteger(value)) throw new Error(`claim room must be an integer, got ${value}`);
    return sql.lit(value);
  };
  if (of.size === 0) return literal(otherwise);
  const cases = [...of].map(([id, room]) => sql`when ${literal(id)} then ${literal(room)}`);
  return sql`case ${sql.ref(column)} ${sql.join(cases, sql` `)} else ${literal(otherwise)} end`;
}

/**
 * Leases up to `limit` due deliveries of active webhooks (and pings, which are asked for), oldest
 * due first, and returns them. The status list is spelled out, not bound, so that the partial
 * index on waiting deliveries (migration 0003) matches it.
 *
 * For a webhook with `ordering = 'record'` only the oldest waiting delivery of each record is
 * claimable (issue 14): a later one stays in the table until the earlier one is delivered or has
 * finally failed. The rule is in the claim itself, so it holds for any number of workers: the
 * earlier delivery stays `pending` while leased and in flight, and a worker killed mid-attempt
 * leaves it leased until its lease expires, when it is claimed (and sent) again before the rest.
 * Within one record, delivery ids follow commit order: a write holds the record's row lock until
 * it commits, so the next write about that record enqueues after it.
 */
export async function claimDueDeliveries(storage: Storage, options: ClaimOptions): Promise<DeliveryRow[]> {
  const { now, limit, leaseUntil, excludeWebhookIds, excludeOwnerIds = [], room } = options;
  /** Whether delivery `d` of webhook `w` may be claimed now. */
  const claimable = (d: string) => sql`${sql.ref(`${d}.status`)} in ('pending', 'retrying') and ${sql.ref(`${d}.next_attempt_at`)} <= ${now}
        and (${sql.ref(`${d}.lease_until`)} is null or ${sql.ref(`${d}.lease_until`)} < ${now}) and (w.active = 1 or ${sql.ref(`${d}.event`)} = 'ping')
        and (w.ordering <> 'record' or ${sql.ref(`${d}.record_key`)} is null or not exists (
          select 1 from deliveries e
          where e.webhook_id = ${sql.ref(`${d}.webhook_id`)} and e.record_key = ${sql.ref(`${d}.record_key`)} and e.id < ${sql.ref(`${d}.id`)}
            and e.status in ('pending', 'retrying')))`;
  const lock = storage.dialect === 'postgres' ? sql`for update of d skip locked` : sql``;
  // With webhooks or owners left out (at their cap or share), walking the waiting index in due
  // order would step over every delivery of theirs before reaching another's: a 200k backlog of
  // one user made each claim 150 ms (issue 22). So the others' webhooks are each read by an index
  // seek (deliveries_waiting_webhooks, migration 0006), `limit` at most each, and the oldest taken.
  const excluding = excludeWebhookIds.length > 0 || excludeOwnerIds.length > 0;
  const eligible = sql`${excludeWebhookIds.length ? sql`w.id not in (${sql.join(excludeWebhookIds)})` : sql`1 = 1`}
        ${excludeOwnerIds.length ? sql`and w.owner_id not in (${sql.join(excludeOwnerIds)})` : sql``}`;
  const perWebhook = sql`select c.id from deliveries c where c.webhook_id = w.id and ${claimable('c')}
          order by c.next_attempt_at, c.id limit ${limit}`;
  // PostgreSQL reads each webhook's head with LATERAL; SQLite, which has none, with a correlated
  // `IN (… LIMIT)` that it runs once per webhook.
  const candidates =
    storage.dialect === 'postgres'
      ? sql`select h.id from webhooks w cross join lateral (${perWebhook}) h where ${eligible}`
      : sql`select d2.id from webhooks w join deliveries d2 on d2.id in (${perWebhook}) where ${eligible}`;
  const due = sql`select d.id, d.webhook_id, d.next_attempt_at, w.owner_id from deliveries d join webhooks w on w.id = d.webhook_id
      where ${excluding ? sql`d.id in (${candidates}) and ` : sql``}${claimable('d')}
      order by d.next_attempt_at, d.id
      limit ${limit}
      ${lock}`;
  // The due rows are ranked per webhook and then per user, oldest first, and only those within the
  // rooms are leased: before, a webhook one short of its lane's cap had 256 rows leased and 255
  // given back, both row updates, on every attempt it finished (the window functions are a level
  // above the locking read, where PostgreSQL allows them).
  const leased = sql`select by_owner.id from (
          select by_webhook.id, by_webhook.owner_room,
            row_number() over (partition by by_webhook.owner_id order by by_webhook.next_attempt_at, by_webhook.id) as owner_rank
          from (
            select due.id, due.next_attempt_at, due.owner_id,
              ${roomOf('due.webhook_id', room.webhooks)} as webhook_room, ${roomOf('due.owner_id', room.owners)} as owner_room,
              row_number() over (partition by due.webhook_id order by due.next_attempt_at, due.id) as webhook_rank
            from (${due}) due
          ) by_webhook where by_webhook.webhook_rank <= by_webhook.webhook_room
        ) by_owner where by_owner.owner_rank <= by_owner.owner_room`;
  const result = await sql<DeliveryRow>`
    update deliveries set lease_until = ${leaseUntil}
    where id in (${leased})
    returning *`.execute(storage.db);
  return resolvePayloads(storage.db, result.rows);
}

/**
 * Gives each redelivery its original's payload (a redelivery refers to it, `payload_of`,
 * rather than copying it; issue 22), in one query for all of `rows`.
 */
export async function resolvePayloads<R extends { payload: string; payload_of: number | string | null }>(
  db: Kysely<Database>,
  rows: R[],
): Promise<R[]> {
  const ids = [...new Set(rows.filter((row) => row.payload_of !== null).map((row) => Number(row.payload_of)))];
  if (ids.length === 0) return rows;
  const originals = await db.selectFrom('deliveries').select(['id', 'payload']).where('id', 'in', ids).execute();
  const payloadOf = new Map(originals.map((original) => [Number(original.id), original.payload]));
  return rows.map((row) => (row.payload_of === null ? row : { ...row, payload: payloadOf.get(Number(row.payload_of)) ?? row.payload }));
}

/** Gives back leases, so the work is claimable at once (work this worker will not do after all). */
export async function releaseLeases(db: Kysely<Database>, ids: readonly number[]): Promise<void> {
  if (ids.length === 0) return;
  await db.updateTable('deliveries').set({ lease_until: null }).where('id', 'in', ids).execute();
}

/**
 * At a dispatcher's start, on SQLite, takes back every lease: there is one dispatcher, so any
 * lease it finds was left by a process that was killed (API.md §6 "Retries"). On PostgreSQL
 * other workers may hold live leases; those left by a dead worker expire instead. Returns how
 * many were taken back.
 */
export async function recoverLeasesAtStart(storage: Storage): Promise<number> {
  if (storage.dialect !== 'sqlite') return 0;
  const result = await storage.db
    .updateTable('deliveries')
    .set({ lease_until: null })
    .where('lease_until', 'is not', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/**
 * When the next waiting delivery falls due, if one is scheduled after `now` (an index seek).
 * Work already due but not claimable (leased elsewhere, webhook inactive) is not counted: the
 * idle poll finds it when that changes.
 */
export async function nextDueAt(db: Kysely<Database>, now: number): Promise<number | null> {
  const result = await sql<{ due: number | string | null }>`
    select min(next_attempt_at) as due from deliveries
    where status in ('pending', 'retrying') and next_attempt_at > ${now}`.execute(db);
  const due = result.rows[0]?.due;
  return due == null ? null : Number(due);
}

/** How many deliveries wait for an attempt (the queue depth metric). */
export async function queueDepth(db: Kysely<Database>): Promise<number> {
  const row = await db
    .selectFrom('deliveries')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('status', 'in', WAITING)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** How many deliveries the table holds, by status (the retention metric, issue 11). */
export async function deliveriesByStatus(db: Kysely<Database>): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom('deliveries')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy('status')
    .execute();
  return new Map(rows.map((row) => [row.status, Number(row.n)]));
}

const ANNOUNCE = CompiledQuery.raw(`select pg_notify('${CHANNEL}', '')`);

/** Inside the transaction that enqueued work: wakes listening workers once it commits (PostgreSQL). */
export async function announceDeliveries(storage: Storage, trx: Transaction<Database> | Kysely<Database>): Promise<void> {
  // Within a write's transaction, sent with what follows it (db/pipelining.ts); only a fault of
  // the transaction can fail it.
  if (storage.dialect === 'postgres') await sendLater(trx, ANNOUNCE, { failsAlone: false });
}

/**
 * Calls `onWake` whenever another process enqueues work (PostgreSQL LISTEN on a dedicated
 * connection, re-established if it drops). Returns a function that stops listening. No-op on SQLite.
 */
export function listenForDeliveries(storage: Storage, onWake: () => void, onError: (error: Error) => void): () => Promise<void> {
  return listenOn(storage, CHANNEL, onWake, onError);
}

/**
 * Calls `onWake` with the payload on every NOTIFY of `channel` (and with none once listening
 * starts or restarts, for what was sent meanwhile), on a dedicated connection re-established if
 * it drops. No-op on SQLite.
 */
export function listenOn(storage: Storage, channel: string, onWake: (payload?: string) => void, onError: (error: Error) => void): () => Promise<void> {
  if (storage.dialect !== 'postgres' || storage.pool === null) return async () => {};
  const pool = storage.pool;
  let stopped = false;
  let client: pg.PoolClient | null = null;
  let retry: NodeJS.Timeout | null = null;

  const connect = async () => {
    try {
      const connection = await pool.connect();
      if (stopped) {
        connection.release();
        return;
      }
      client = connection;
      connection.on('notification', (message) => onWake(message.payload));
      connection.on('error', (error: Error) => {
        onError(error);
        connection.release(error);
        client = null;
        if (!stopped) retry = setTimeout(() => void connect(), 1000);
      });
      await connection.query(`listen ${channel}`);
      // Work may have been enqueued while we were not listening.
      onWake();
    } catch (error) {
      onError(error as Error);
      if (!stopped) retry = setTimeout(() => void connect(), 1000);
    }
  };
  void connect();

  return async () => {
    stopped = true;
    if (retry) clearTimeout(retry);
    const connection = client as pg.PoolClient | null;
    client = null;
    if (connection) {
      try {
        await connection.query(`unlisten ${channel}`);
      } finally {
        connection.release();
      }
    }
  };
}
