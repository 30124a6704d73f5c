// The stored responses of Idempotency-Key requests (REQUESTS.md §1), and the one dialect
// difference in handling them: how a key being processed is held against other processes.
//
// A keyed request costs two statements more than the same request without a key on SQLite, three
// on PostgreSQL (issue 20: the keyed POST was half as fast with four more): `claimKey` at the
// start of the write's transaction (holds the key and reads what is stored under it: one
// statement on SQLite, two sent together on PostgreSQL) and `storeResponse` at its end. They are
// written once per dialect here rather than built with Kysely per request, which cost more than
// running them. Only the claim is waited for: the store goes out with what follows (PostgreSQL
// pipelining, pipelining.ts), so a keyed write waits one round trip more than a plain one, not two.

import { createHash } from 'node:crypto';
import { CompiledQuery, type Kysely } from 'kysely';
import type { Dialect } from './database.js';
import { sendAhead, sendLater } from './pipelining.js';
import type { DynamicDb } from './dynamic-tables.js';
import type { Database, IdempotencyKeysTable } from './schema.js';

/** A stored response, as its row holds it. */
export type StoredResponse = IdempotencyKeysTable;
/** What a replay needs of a stored response. */
export type StoredAnswer = Pick<StoredResponse, 'request_hash' | 'status' | 'headers' | 'body'>;

/** What `claimKey` found: whether the key is held by this transaction, and the unexpired response stored under it. */
export interface Claim {
  readonly held: boolean;
  readonly stored: StoredAnswer | null;
}

const ANSWER_COLUMNS = 'request_hash, status, headers, body';
const STORED_COLUMNS = ['user_id', 'key', 'request_hash', 'status', 'headers', 'body', 'created_at', 'expires_at'] as const;
const STATEMENTS = {
  sqlite: {
    // `claimKey` reads the key only. The one write lock the transaction holds (BEGIN IMMEDIATE) keeps other processes
    // out until it commits; the caller keeps requests of its own process apart.
    find: `select ${ANSWER_COLUMNS} from idempotency_keys where user_id = ? and key = ? and expires_at > ?`,
    // What is under the key by then has expired (the claim found none unexpired, and the write
    // lock has been held since): it is replaced.
    store: `insert into idempotency_keys (${STORED_COLUMNS.join(', ')}) values (${STORED_COLUMNS.map(() => '?').join(', ')})
      on conflict (user_id, key) do update set ${STORED_COLUMNS.slice(2).map((column) => `${column} = excluded.${column}`).join(', ')}`,
  },
  postgres: {
    // A transaction-level advisory lock, which ends with the transaction, or with its connection
    // when the process is killed, and only once its commit is visible to new snapshots. `lock`
    // takes it, and `claim`, sent in the same round trip, reads the key in a snapshot taken after
    // it: every response stored under the key by an earlier holder is seen there. So `store`, made
    // under the lock, cannot find the key taken, and it goes out without holding up the
    // transaction's next write (`failsAlone: false`, pipelining.ts). `claim` takes the lock again
    // (advisory locks nest within a session) so that it removes an expired response not yet
    // pruned only under the lock, and `store` is a plain insert that no unexpired response survives.
    lock: 'select pg_try_advisory_xact_lock($1::bigint) as held',
    claim: `with claim as (select pg_try_advisory_xact_lock($1::bigint) as held),
      expired as (delete from idempotency_keys where user_id = $2 and key = $3 and expires_at <= $4 and (select held from claim))
      select k.request_hash, k.status, k.headers, k.body
      from claim left join idempotency_keys k on k.user_id = $2 and k.key = $3 and k.expires_at > $4`,
    find: `select ${ANSWER_COLUMNS} from idempotency_keys where user_id = $1 and key = $2 and expires_at > $3`,
    store: `insert into idempotency_keys (${STORED_COLUMNS.join(', ')}) values (${STORED_COLUMNS.map((_, index) => `$${index + 1}`).join(', ')})`,
  },
} as const;

/**
 * Holds the caller's key for the rest of `trx` and reads the unexpired response stored under it:
 * `held` is false when another transaction holds the key (a request with it still being processed).
 */
export async function claimKey(dialect: Dialect, trx: DynamicDb, userId: number, key: string, now: number): Promise<Claim> {
  if (dialect === 'sqlite') {
    const { rows } = await trx.executeQuery<StoredAnswer>(CompiledQuery.raw(STATEMENTS.sqlite.find, [userId, key, now]));
    return { held: true, stored: rows[0] ?? null };
  }
  // 64 bits of the SHA-256 of user and key: a collision only makes one request wait its turn (409).
  const lock = createHash('sha256').update(`${userId}\n${key}`).digest().readBigInt64BE(0).toString();
  const locked = sendAhead(trx, CompiledQuery.raw(STATEMENTS.postgres.lock, [lock]) as CompiledQuery<{ held: boolean }>);
  // Awaited after the claim; if the claim fails first, its error is the one thrown.
  locked.catch(() => {});
  const { rows } = await trx.executeQuery<StoredAnswer>(CompiledQuery.raw(STATEMENTS.postgres.claim, [lock, userId, key, now]));
  // Held by the first statement, or not at all: one held only since the second might have been
  // let go by a transaction whose response that statement's snapshot is too old to see.
  const held = (await locked).rows[0]!.held;
  const stored = rows[0]!;
  return { held, stored: stored.request_hash === null ? null : stored };
}

/** The unexpired response stored under the caller's key, if any (outside a transaction). */
export async function findStoredResponse(dialect: Dialect, executor: DynamicDb, userId: number, key: string, now: number): Promise<StoredAnswer | null> {
  const { rows } = await executor.executeQuery<StoredAnswer>(CompiledQuery.raw(STATEMENTS[dialect].find, [userId, key, now]));
  return rows[0] ?? null;
}

/**
 * Stores a response in `trx`, after `claimKey` held the key and found none. On PostgreSQL it is
 * sent without waiting (pipelining.ts); under the claim's lock no other transaction can have
 * stored one meanwhile.
 */
export async function storeResponse(dialect: Dialect, trx: DynamicDb, row: StoredResponse): Promise<void> {
  const parameters = STORED_COLUMNS.map((column) => row[column]);
  await sendLater(trx, CompiledQuery.raw(STATEMENTS[dialect].store, parameters), { failsAlone: false });
}

/**
 * Whether `error` says a response was stored under the key by another transaction after
 * `claimKey` (PostgreSQL): not expected under the claim's lock, and answered by a replay if it
 * happens (a process of an older restwire, whose claim could miss it).
 */
export function isStoredMeanwhile(error: unknown): boolean {
  const { code, constraint } = (error ?? {}) as { code?: unknown; constraint?: unknown };
  return code === '23505' && constraint === 'idempotency_keys_pkey';
}

/** Deletes the stored responses that have expired; returns how many. */
export async function pruneStoredResponses(db: Kysely<Database>, now: number): Promise<number> {
  const result = await db.deleteFrom('idempotency_keys').where('expires_at', '<=', now).executeTakeFirst();
  return Number(result.numDeletedRows);
}
