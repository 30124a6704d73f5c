// Gathers finished attempts' outcomes for the "record attempt" stage (record-attempt.ts): an
// outcome waits a few milliseconds for the others finishing with it, and all are written in one
// transaction (one commit, not hundreds, issue #6). An attempt's slot is freed only once its
// outcome is stored, so `add` resolves then.

import type { FastifyBaseLogger } from 'fastify';
import type { Storage } from '../db/database.js';
import { announceDeliveries } from '../db/delivery-queue.js';
import { numberSoon } from './delivery-changes.js';
import { recordAttempts, type AttemptRecord } from './record-attempt.js';

/** How long finished attempts wait to be recorded together. */
const FLUSH_DELAY_MS = 5;
/** The most outcomes one transaction records. */
const RECORDS_PER_TRANSACTION = 64;

export interface OutcomeBatchOptions {
  readonly storage: Storage;
  /** The retry schedule the recorder computes next attempts from. */
  readonly schedule: readonly number[];
  readonly log: FastifyBaseLogger;
}

/** Outcomes waiting to be recorded together, and the write in progress. */
export class OutcomeBatch {
  private pending: AttemptRecord[] = [];
  /** Whether `pending` holds an attempt of an ordered webhook (see `flush`). */
  private freesOrderedWork = false;
  private flushing: Promise<void> | null = null;
  private flushTimer: Promise<void> | null = null;
  /** The numbering of the recorded outcomes' changes (delivery-changes.ts), under way. */
  private numbering: Promise<void> | null = null;

  constructor(private readonly options: OutcomeBatchOptions) {}

  /**
   * Adds an outcome; resolves once it is stored. `freesOrderedWork`: the attempt was the head of
   * an ordered record's queue, so recording it makes the next delivery of that record claimable.
   */
  add(record: AttemptRecord, freesOrderedWork: boolean): Promise<void> {
    this.pending.push(record);
    if (freesOrderedWork) this.freesOrderedWork = true;
    return this.scheduleFlush();
  }

  /**
   * Resolves once the outcomes pending now are stored. Writes wait a few milliseconds to gather
   * the outcomes of attempts finishing together into one transaction (one commit, not hundreds).
   */
  private scheduleFlush(): Promise<void> {
    this.flushTimer ??= new Promise<void>((resolve) => setTimeout(resolve, FLUSH_DELAY_MS)).then(() => {
      this.flushTimer = null;
      return this.write();
    });
    return this.flushTimer;
  }

  /** Writes pending outcomes now, and waits for their changes' numbering (on stop, after the last attempts finished). */
  async flush(): Promise<void> {
    await this.write();
    await this.numbering;
  }

  private async write(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    const announce = this.freesOrderedWork;
    this.freesOrderedWork = false;
    const { storage, log } = this.options;
    this.flushing = this.record(batch)
      .then(() => {
        // The deliveries' streams hear of the outcomes once numbered; a slot need not wait for that.
        this.numbering = numberSoon(storage).catch((error: unknown) => log.warn({ err: error }, 'could not number delivery changes yet; the next write will'));
        // The next delivery of an ordered record became claimable: other workers hear it now,
        // not at their next idle poll (this one wakes itself when the attempt's slot frees).
        return announce ? announceDeliveries(storage, storage.db) : undefined;
      })
      .catch((error: unknown) => {
        // The leases stay; the deliveries are retried once they expire (at least once, API.md §4).
        log.error({ err: error, count: batch.length }, 'could not record delivery attempts');
      })
      .finally(() => {
        this.flushing = null;
      });
    await this.flushing;
  }

  /**
   * Records `batch`, RECORDS_PER_TRANSACTION outcomes a transaction: on SQLite each holds the one
   * write lock, which serve's API process waits for meanwhile (the dispatcher runs in a process
   * of its own, cli/dispatcher-process.ts), so a drain's 512 outcomes must not hold it at once.
   */
  private async record(batch: readonly AttemptRecord[]): Promise<void> {
    for (let start = 0; start < batch.length; start += RECORDS_PER_TRANSACTION) {
      await recordAttempts(this.options.storage, batch.slice(start, start + RECORDS_PER_TRANSACTION), this.options.schedule);
    }
  }
}
