// A write unit (REQUESTS.md §1, §4): one transaction that several writes share, owned by whoever
// opened it (the Idempotency-Key stage, a batch, a declaration hook's `ctx.collection(…)`), and
// handed to each write explicitly on its request. Not AsyncLocalStorage: its promise hooks cost a
// tenth of every request's CPU (group-commit.ts).

import { CompiledQuery, type Transaction } from 'kysely';
import { dropHeldChanges, heldChangeCount } from './change-log.js';
import type { DynamicDb } from './dynamic-tables.js';
import { isTransactionConflict } from './outage.js';
import { afterFailure, sendLater } from './pipelining.js';
import type { Database } from './schema.js';

/**
 * A transaction that writes join instead of opening their own. Everything a request with a unit
 * reads or writes goes through `trx`: on SQLite the transaction holds the one connection, so a
 * query through `storage.db` (or a nested `Storage.transact`) would wait for ever.
 */
export interface WriteUnit {
  readonly trx: DynamicDb;
  /** Run by the unit's owner once `trx` has committed (dispatcher wake-ups); dropped on rollback. */
  readonly afterCommit: (() => void)[];
  /**
   * True when the owner rolls its whole transaction back if any write in it fails (a batch, a
   * keyed request): a write then needs no savepoint of its own, two statements fewer each (on
   * PostgreSQL two round trips; issue 20).
   */
  readonly rollsBackWhole?: boolean;
}

/** Runs `callbacks` once the write they follow has committed: now, or after its unit's commit. */
export function afterCommitOf(unit: WriteUnit | undefined, callbacks: readonly (() => void)[]): void {
  if (unit) unit.afterCommit.push(...callbacks);
  else for (const callback of callbacks) callback();
}

// Nested savepoints may share a name: ROLLBACK TO and RELEASE act on the latest (SQLite and
// PostgreSQL alike).
const SAVEPOINT = CompiledQuery.raw('savepoint write_unit');
const RELEASE = CompiledQuery.raw('release write_unit');
const ROLLBACK_TO = CompiledQuery.raw('rollback to write_unit');

/**
 * Runs `work` in the unit's transaction: in a savepoint, so that if it throws its writes alone
 * roll back, unless the unit is rolled back whole then anyway.
 */
export function inUnit<T>(unit: WriteUnit, work: (trx: DynamicDb) => Promise<T>): Promise<T> {
  return unit.rollsBackWhole ? work(unit.trx) : inSavepoint(unit.trx, work);
}

/** Runs `work` in a savepoint of `trx`: if it throws, its writes alone roll back, and the error goes on. */
export async function inSavepoint<T>(trx: DynamicDb, work: (trx: DynamicDb) => Promise<T>): Promise<T> {
  // Sent with the work's first statement on PostgreSQL (pipelining.ts). The release is awaited:
  // what the work sent without waiting fails here, within this savepoint.
  await sendLater(trx, SAVEPOINT);
  const held = heldChangeCount(trx);
  let result: T;
  try {
    result = await work(trx);
  } catch (error) {
    // The changes held back to log together (a batch's) roll back with their writes.
    dropHeldChanges(trx, held);
    try {
      await afterFailure(trx, ROLLBACK_TO);
      await trx.executeQuery(RELEASE);
    } catch {
      // The error ended the transaction itself (an I/O error, a full disk): the owner's
      // transaction fails with it.
    }
    throw error;
  }
  await trx.executeQuery(RELEASE);
  return result;
}

/**
 * `Storage.transact`, all `transactAgainOnConflict` needs. Not `Storage` itself: this module's
 * types are part of the package's (declarations' hooks see a WriteUnit), and database.ts's
 * refer to pg's, which an installed restwire does not carry.
 */
interface Transacting {
  transact<T>(work: (trx: Transaction<Database>) => Promise<T>, options?: { alone?: boolean }): Promise<T>;
}

/** Runs of a transaction that lost a deadlock or a serialization check before its error is answered. */
export const TRANSACTION_ATTEMPTS = 4;

/**
 * Runs `work` in a `Storage.transact` transaction. One that lost a deadlock or a serialization
 * check to another transaction (PostgreSQL's 40P01 and 40001) kept nothing: it runs again, in a
 * transaction of its own (holding no other write's locks), up to TRANSACTION_ATTEMPTS runs in
 * all, and then its error goes on (a 503: problem-handler.ts). For a write and for a unit's owner
 * (a batch, a keyed request); `work` keeps nothing outside its transaction, so it can run again.
 */
export async function transactAgainOnConflict<T>(storage: Transacting, work: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await storage.transact(work, { alone: attempt > 1 });
    } catch (error) {
      if (attempt < TRANSACTION_ATTEMPTS && isTransactionConflict(error)) continue;
      throw error;
    }
  }
}
