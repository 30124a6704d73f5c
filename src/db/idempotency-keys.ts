// The stored responses of Idempotency-Key requests (REQUESTS.md §1), and the one dialect
// difference in handling them: how a key being processed is held against other processes.

import { createHash } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Dialect } from './database.js';
import type { DynamicDb } from './dynamic-tables.js';
import type { Database, IdempotencyKeysTable } from './schema.js';

/** A stored response, as its row holds it. */
export type StoredResponse = IdempotencyKeysTable;

/** The unexpired response stored under the caller's key, if any. */
export async function findStoredResponse(executor: DynamicDb, userId: number, key: string, now: number): Promise<StoredResponse | undefined> {
  return (await executor
    .selectFrom('idempotency_keys')
    .selectAll()
    .where('user_id', '=', userId)
    .where('key', '=', key)
    .where('expires_at', '>', now)
    .executeTakeFirst()) as StoredResponse | undefined;
}

/**
 * Stores a response in `trx`, replacing an expired one not yet pruned under the same key (an
 * unexpired one cannot be there: the key is held, and was looked up, in this transaction).
 */
export async function storeResponse(trx: DynamicDb, row: StoredResponse): Promise<void> {
  const { user_id: _user, key: _key, ...rest } = row;
  await trx.insertInto('idempotency_keys').values(row).onConflict((conflict) => conflict.columns(['user_id', 'key']).doUpdateSet(rest)).execute();
}

/**
 * Holds the caller's key for the rest of `trx`, or returns false when another transaction holds
 * it (a request with the key still being processed). PostgreSQL: a transaction-level advisory
 * lock, which ends with the transaction, or with its connection when the process is killed. SQLite:
 * the one write lock a transaction holds already keeps other processes out until it commits; the
 * caller keeps requests of its own process apart.
 */
export async function holdKey(dialect: Dialect, trx: DynamicDb, userId: number, key: string): Promise<boolean> {
  if (dialect === 'sqlite') return true;
  // 64 bits of the SHA-256 of user and key: a collision only makes one request wait its turn (409).
  const lock = createHash('sha256').update(`${userId}\n${key}`).digest().readBigInt64BE(0);
  const { rows } = await sql<{ held: boolean }>`select pg_try_advisory_xact_lock(${lock.toString()}::bigint) as held`.execute(trx);
  return rows[0]!.held;
}

/** Deletes the stored responses that have expired; returns how many. */
export async function pruneStoredResponses(db: Kysely<Database>, now: number): Promise<number> {
  const result = await db.deleteFrom('idempotency_keys').where('expires_at', '<=', now).executeTakeFirst();
  return Number(result.numDeletedRows);
}
