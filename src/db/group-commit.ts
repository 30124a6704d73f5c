import { CompiledQuery, type Kysely, type Transaction } from 'kysely';
import { dropHeldChanges, heldChangeCount, holdChanges, releaseChanges } from './change-log.js';
import { afterFailure, sendIfAnswered, sendLater } from './pipelining.js';

/** A piece of write work that runs inside a transaction it shares with others. */
export type TransactionWork<DB, T> = (trx: Transaction<DB>) => Promise<T>;

interface Unit<DB> {
  readonly work: TransactionWork<DB, unknown>;
  /** Committed in a transaction of its own, never shared. */
  readonly alone: boolean;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

// Run once or twice per write, so compiled once.
const SAVEPOINT = CompiledQuery.raw('savepoint unit');
const RELEASE = CompiledQuery.raw('release unit');
const ROLLBACK_TO = CompiledQuery.raw('rollback to unit');
// One unit's end and the next one's start in one query text (PostgreSQL's simple protocol takes
// several statements; SQLite's driver one), sent without waiting when the unit's statements have
// all answered: waiting for each unit's release cost a PostgreSQL create about a fifth of serve's
// CPU (issue 21).
const RELEASE_AND_SAVEPOINT = CompiledQuery.raw('release unit; savepoint unit');

/**
 * Group commit for SQLite (issue #6): write transactions that arrive together share one
 * BEGIN IMMEDIATE … COMMIT. On SQLite every commit appends each page it touched to the WAL, and
 * a burst of single-row inserts touches the same few pages, so one commit for many requests
 * writes (and later checkpoints) a fraction of the pages. Committing was a quarter of a create's
 * time when each request had its own transaction.
 *
 * What each caller sees is unchanged:
 * - its work runs alone, in arrival order, inside a SAVEPOINT, so a unit that throws rolls back
 *   its own writes only and the others still commit;
 * - its promise settles only after the shared COMMIT, so nothing is acknowledged before it is
 *   committed (as durable as `synchronous = NORMAL` makes a commit: it survives a killed
 *   process); if the COMMIT fails, every unit of the batch fails with that error, and if a
 *   statement error ends the transaction itself (a full disk, an I/O error), every unit fails
 *   with that error.
 *
 * A batch starts on the next turn of the event loop after its first unit arrives (so requests
 * parsed in the same I/O phase join it) and takes at most `maxBatch` units; units that arrive
 * while a batch runs form the next one. Work must use only the `trx` it is given and must not
 * swallow database errors: SQLite has one connection, so a unit that waits for anything else
 * holds up every query of the process, and a nested `run` (or a query through `db` instead of
 * `trx`) would wait forever. (An AsyncLocalStorage guard against nesting was tried: its promise
 * hooks cost a tenth of every request's CPU.)
 *
 * PostgreSQL uses it too, with a few batches at once (`lanes`), each on its own pooled connection:
 * the change log's numbering (change-log.ts) holds the counter's row lock until commit, so
 * transactions of one write each would commit one at a time, each waiting for its own WAL flush.
 */
export class GroupCommit<DB> {
  readonly #db: Kysely<DB>;
  readonly #maxBatch: number;
  readonly #beforeCommit: ((trx: Transaction<DB>) => Promise<void>) | null;
  readonly #lanes: number;
  readonly #multiStatement: boolean;
  readonly #queue: Unit<DB>[] = [];
  /** Batches running now (each its own transaction), at most `#lanes`. */
  #running = 0;
  #scheduled = false;

  /**
   * `beforeCommit` runs once per shared transaction, after its last unit (the change log's
   * numbering). `lanes` batches may run at once, each in its own transaction (1 on SQLite: one
   * connection; more on PostgreSQL, whose batches number their changes one after the other).
   * `multiStatement`: the driver runs a query text of several statements (PostgreSQL's), so a
   * unit's release and the next unit's savepoint go as one.
   */
  constructor(
    db: Kysely<DB>,
    {
      maxBatch = 64,
      lanes = 1,
      beforeCommit,
      multiStatement = false,
    }: { maxBatch?: number; lanes?: number; beforeCommit?: (trx: Transaction<DB>) => Promise<void>; multiStatement?: boolean } = {},
  ) {
    if (!Number.isSafeInteger(maxBatch) || maxBatch < 1) throw new RangeError('maxBatch must be a positive integer');
    if (!Number.isSafeInteger(lanes) || lanes < 1) throw new RangeError('lanes must be a positive integer');
    this.#db = db;
    this.#maxBatch = maxBatch;
    this.#lanes = lanes;
    this.#multiStatement = multiStatement;
    this.#beforeCommit = beforeCommit ?? null;
  }

  /**
   * Runs `work` in a shared transaction (or, `alone`, in one of its own); settles once that
   * transaction has committed.
   */
  run<T>(work: TransactionWork<DB, T>, alone = false): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ work, alone, resolve: resolve as (value: unknown) => void, reject });
      this.#schedule();
    });
  }

  /** Starts a batch on the next turn of the event loop, if a lane is free and none is about to start. */
  #schedule(): void {
    if (this.#scheduled || this.#running >= this.#lanes || this.#queue.length === 0) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      while (this.#running < this.#lanes && this.#queue.length > 0) {
        this.#running += 1;
        void this.#commit(this.#queue.splice(0, this.#nextBatchSize())).finally(() => {
          this.#running -= 1;
          this.#schedule();
        });
      }
    });
  }

  /** The queue's first units up to `maxBatch`, ending before a unit that must run alone (or with it, if first). */
  #nextBatchSize(): number {
    if (this.#queue[0]!.alone) return 1;
    const limit = Math.min(this.#maxBatch, this.#queue.length);
    let size = 1;
    while (size < limit && !this.#queue[size]!.alone) size += 1;
    return size;
  }

  async #commit(batch: readonly Unit<DB>[]): Promise<void> {
    if (batch.length === 1) {
      // Alone, a unit's failure rolls back the transaction; no savepoint needed.
      const unit = batch[0]!;
      await this.#db
        .transaction()
        .execute(async (trx) => {
          const value = await unit.work(trx);
          await this.#beforeCommit?.(trx);
          return value;
        })
        .then(unit.resolve, unit.reject);
      return;
    }
    const outcomes: Outcome[] = [];
    try {
      await this.#db.transaction().execute(async (trx) => {
        // The units' changes are logged in one statement after the last unit, not one each (a
        // unit that fails drops its own).
        holdChanges(trx);
        // The next unit's savepoint, when it was set with the last unit's release (PostgreSQL):
        // `early` is the answer to that pair if it went without waiting (`sendIfAnswered`).
        let setWithRelease: { early: Promise<unknown> | null } | null = null;
        for (const [index, unit] of batch.entries()) {
          const savepoint = setWithRelease;
          setWithRelease = null;
          // On PostgreSQL the savepoint rides with the unit's first statement (pipelining.ts).
          if (savepoint === null) await sendLater(trx, SAVEPOINT);
          const changesBefore = heldChangeCount(trx);
          try {
            const value = await unit.work(trx);
            if (this.#multiStatement && index < batch.length - 1) {
              // Whatever the unit sent without waiting must fail here, in its own savepoint, never
              // in the next unit's: the release waits for those answers, unless all have come.
              setWithRelease = await sendIfAnswered(trx, RELEASE_AND_SAVEPOINT);
            } else {
              await trx.executeQuery(RELEASE);
            }
            outcomes.push({ ok: true, value });
          } catch (error) {
            // A savepoint set with the last unit's release, which failed, is not this unit's:
            // rolling back to it would undo a unit told it succeeded. The transaction has failed.
            if (savepoint?.early && !(await savepoint.early.then(() => true, () => false))) throw error;
            dropHeldChanges(trx, changesBefore);
            try {
              await afterFailure(trx, ROLLBACK_TO);
              await trx.executeQuery(RELEASE);
            } catch {
              // The error ended the transaction itself (an I/O error, a full disk): the whole
              // batch fails below with that error, the one worth logging; nothing was committed.
              throw error;
            }
            outcomes.push({ ok: false, error });
          }
        }
        await releaseChanges(trx);
        await this.#beforeCommit?.(trx);
      });
    } catch (error) {
      for (const unit of batch) unit.reject(error);
      return;
    }
    batch.forEach((unit, index) => {
      const outcome = outcomes[index]!;
      if (outcome.ok) unit.resolve(outcome.value);
      else unit.reject(outcome.error);
    });
  }
}
