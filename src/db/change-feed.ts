import { CHANGES_CHANNEL, changePositions, readChanges, type LoggedChange } from './change-log.js';
import type { Storage } from './database.js';
import { listenOn } from './delivery-queue.js';

// One reader of the change log per process (issue 23, STREAMS.md §4): it follows the log in
// position order and hands each batch of committed changes to its subscribers (the open streams'
// hub), so a change costs one query per process, never one per stream. It is woken by NOTIFY on
// PostgreSQL (sent by the numbering step, db/change-log.ts), by this process's own commits, and
// by a cheap poll of the one-row counter: on SQLite that is how the other processes of
// `serve --workers` (and any `restwire` command writing the same file) reach it.
//
// While no subscriber wants the changes themselves (no stream is open in the process), the feed
// reads nothing: it only moves its position to what it is told has committed (the position a
// commit numbered, NOTIFY's payload, the polled counter) and says so. Reading and parsing every
// commit's rows for nobody was a tenth of a create's CPU (issue 18); a stream that opens later
// starts at the moved position, or reads the log itself from its own (`since`, `Last-Event-ID`).

/** Changes read per query while catching up. */
export const FEED_BATCH = 500;

export interface ChangeFeedOptions {
  /** How often the counter is polled: SQLite's cross-process wake-up, PostgreSQL's safety net. */
  readonly pollMs?: number;
  readonly onError: (error: unknown) => void;
}

/** What the feed tells a subscriber, in position order. */
export interface ChangeSubscriber {
  /** True while it needs the changes themselves; while no subscriber does, none are read. */
  wanted(): boolean;
  /** Committed changes, after the last position told. */
  changes(changes: readonly LoggedChange[]): void;
  /** Every position up to `last` committed, and was not read: nobody wanted it. */
  skipped(last: number): void;
}

/** Follows the change log from the position it started at. */
export class ChangeFeed {
  readonly #storage: Storage;
  readonly #options: ChangeFeedOptions;
  readonly #subscribers = new Set<ChangeSubscriber>();
  #last = 0;
  #reading: Promise<void> | null = null;
  #again = false;
  #stops: Array<() => unknown> = [];

  constructor(storage: Storage, options: ChangeFeedOptions) {
    this.#storage = storage;
    this.#options = options;
  }

  /** The last position told to subscribers, read or skipped. */
  get last(): number {
    return this.#last;
  }

  /** Starts following at the last committed position. */
  async start(): Promise<void> {
    this.#last = (await changePositions(this.#storage.db)).last;
    // A PostgreSQL commit's own position comes with its NOTIFY: unless changes are wanted now, that is enough.
    const committed = (last: number | null) => {
      if (last !== null) this.wake(last);
      else if (this.#wanted()) this.wake();
    };
    this.#stops.push(this.#storage.onChangesCommitted(committed));
    // A numbering transaction's payload is its last position; another NOTIFY may carry none.
    const notified = (payload?: string) => this.wake(payload && /^\d+$/.test(payload) ? Number(payload) : undefined);
    this.#stops.push(listenOn(this.#storage, CHANGES_CHANNEL, notified, this.#options.onError));
    const poll = setInterval(() => void this.#poll(), this.#options.pollMs ?? (this.#storage.dialect === 'sqlite' ? 200 : 5_000));
    poll.unref();
    this.#stops.push(() => clearInterval(poll));
  }

  /** Adds a subscriber; returns a function that removes it. */
  subscribe(subscriber: ChangeSubscriber): () => void {
    this.#subscribers.add(subscriber);
    return () => this.#subscribers.delete(subscriber);
  }

  /**
   * Reads what committed since the last read, now (coalesced with a read under way); `committed`,
   * when known, is a position up to which every change has committed.
   */
  wake(committed?: number): void {
    if (this.#reading) {
      this.#again = true;
      return;
    }
    if (committed !== undefined && !this.#wanted()) {
      this.#skipTo(committed);
      return;
    }
    this.#reading = this.#readAll().finally(() => {
      this.#reading = null;
      if (this.#again) {
        this.#again = false;
        this.wake();
      }
    });
  }

  #wanted(): boolean {
    for (const subscriber of this.#subscribers) if (subscriber.wanted()) return true;
    return false;
  }

  #skipTo(last: number): void {
    if (last <= this.#last) return;
    this.#last = last;
    for (const subscriber of this.#subscribers) subscriber.skipped(last);
  }

  async #poll(): Promise<void> {
    try {
      const { last } = await changePositions(this.#storage.db);
      if (last > this.#last) this.wake(last);
    } catch (error) {
      this.#options.onError(error);
    }
  }

  async #readAll(): Promise<void> {
    try {
      for (;;) {
        if (!this.#wanted()) {
          const { last } = await changePositions(this.#storage.db);
          // Asked again after the wait: a subscriber that came meanwhile is given the changes.
          if (!this.#wanted()) return this.#skipTo(last);
        }
        const changes = await readChanges(this.#storage.db, this.#last, FEED_BATCH);
        if (changes.length === 0) return;
        this.#last = changes.at(-1)!.position;
        for (const subscriber of this.#subscribers) subscriber.changes(changes);
        if (changes.length < FEED_BATCH) return;
      }
    } catch (error) {
      this.#options.onError(error);
    }
  }

  async stop(): Promise<void> {
    const stops = this.#stops;
    this.#stops = [];
    for (const stop of stops) await stop();
    await this.#reading;
  }
}
