import { CHANGES_CHANNEL, changePositions, readChanges, type LoggedChange } from './change-log.js';
import type { Storage } from './database.js';
import { listenOn } from './delivery-queue.js';

// One reader of the change log per process (issue 23, STREAMS.md §4): it follows the log in
// position order and hands each batch of committed changes to its subscribers (the open streams'
// hub), so a change costs one query per process, never one per stream. It is woken by NOTIFY on
// PostgreSQL (sent by the numbering step, db/change-log.ts), by this process's own commits, and
// by a cheap poll of the one-row counter: on SQLite that is how the other processes of
// `serve --workers` (and any `restwire` command writing the same file) reach it.

/** Changes read per query while catching up. */
export const FEED_BATCH = 500;

export interface ChangeFeedOptions {
  /** How often the counter is polled: SQLite's cross-process wake-up, PostgreSQL's safety net. */
  readonly pollMs?: number;
  readonly onError: (error: unknown) => void;
}

export type ChangeSubscriber = (changes: readonly LoggedChange[]) => void;

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

  /** The last position handed to subscribers: what they have been told of. */
  get last(): number {
    return this.#last;
  }

  /** Starts following at the last committed position. */
  async start(): Promise<void> {
    this.#last = (await changePositions(this.#storage.db)).last;
    const wake = () => this.wake();
    this.#stops.push(this.#storage.onChangesCommitted(wake));
    const stopListening = listenOn(this.#storage, CHANGES_CHANNEL, wake, this.#options.onError);
    this.#stops.push(stopListening);
    const poll = setInterval(() => void this.#poll(), this.#options.pollMs ?? (this.#storage.dialect === 'sqlite' ? 200 : 5_000));
    poll.unref();
    this.#stops.push(() => clearInterval(poll));
  }

  /** Adds a subscriber; returns a function that removes it. */
  subscribe(subscriber: ChangeSubscriber): () => void {
    this.#subscribers.add(subscriber);
    return () => this.#subscribers.delete(subscriber);
  }

  /** Reads what committed since the last read, now (coalesced with a read under way). */
  wake(): void {
    if (this.#reading) {
      this.#again = true;
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

  async #poll(): Promise<void> {
    try {
      if ((await changePositions(this.#storage.db)).last > this.#last) this.wake();
    } catch (error) {
      this.#options.onError(error);
    }
  }

  async #readAll(): Promise<void> {
    try {
      for (;;) {
        const changes = await readChanges(this.#storage.db, this.#last, FEED_BATCH);
        if (changes.length === 0) return;
        this.#last = changes.at(-1)!.position;
        for (const subscriber of this.#subscribers) subscriber(changes);
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
