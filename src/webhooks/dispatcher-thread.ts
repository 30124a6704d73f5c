// Where `serve` runs its dispatcher: a thread of its own (node:worker_threads), so claiming,
// signing, sending and recording 20,000 deliveries never waits in the API's event loop, and
// API requests never wait behind them (issue 21 item 1; the backlog drill). The thread runs the
// same Dispatcher as `restwire worker` (dispatcher-in-thread.ts) on its own database connection
// (SQLite: a second connection to the same WAL file; PostgreSQL: a small pool of its own), so its
// leases, fairness, ordering and SIGTERM drain are the dispatcher's own. This side starts it,
// passes on wake-ups (a commit that queued work), asks it for its metrics at scrape time, stops
// it on SIGTERM once it has finished and recorded the attempts in flight, and starts it again
// if it fails; if it keeps failing, the process stops loudly rather than serve without delivery.

import { Worker } from 'node:worker_threads';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.js';

/** What the thread starts from (structured-cloned into it). */
export interface DispatcherThreadData {
  readonly config: Config;
  readonly secretKey: string;
}

/** Messages to the dispatcher thread. */
export type ToDispatcherThread = { type: 'wake' } | { type: 'metrics'; id: number } | { type: 'stop' };

/** Messages from the dispatcher thread. */
export type FromDispatcherThread = { type: 'started' } | { type: 'metrics'; id: number; text: string };

const ENTRY = new URL('./dispatcher-in-thread.js', import.meta.url);
/** A scrape does not wait longer for the thread's metrics; /metrics answers without them. */
const SCRAPE_TIMEOUT_MS = 2_000;
/** A failed thread is started again after this. */
const RESTART_DELAY_MS = 1_000;
/** More failures than this within RESTART_WINDOW_MS stop the process (`onFatal`). */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;

export interface DispatcherThreadOptions {
  readonly config: Config;
  readonly secretKey: string;
  readonly log: FastifyBaseLogger;
  /** The thread keeps failing: the process must stop (with a non-zero exit) rather than go on without delivery. */
  readonly onFatal: (error: Error) => void;
  /** The thread's program (default dispatcher-in-thread.js); tests give one that fails on purpose. */
  readonly entry?: URL;
  /** How long a failed thread waits to start again (default 1 s). */
  readonly restartDelayMs?: number;
}

/** The dispatcher thread of this process, seen from the thread that started it. */
export class DispatcherThread {
  readonly #options: DispatcherThreadOptions;
  #worker: Worker | null = null;
  #stopping = false;
  #wakeQueued = false;
  #restartTimer: NodeJS.Timeout | null = null;
  #failures: number[] = [];
  readonly #scrapes = new Map<number, (text: string) => void>();
  #lastScrape = 0;

  constructor(options: DispatcherThreadOptions) {
    this.#options = options;
  }

  /** Starts the thread; resolves once its dispatcher claims (rejects if it cannot start). */
  start(): Promise<void> {
    this.#stopping = false;
    return this.#spawn(true);
  }

  /** Asks the dispatcher to look for work now (after a commit that queued some). */
  wake(): void {
    if (this.#wakeQueued || this.#worker === null) return;
    // The commits answered together by one group commit wake it with one message.
    this.#wakeQueued = true;
    queueMicrotask(() => {
      this.#wakeQueued = false;
      this.#post({ type: 'wake' });
    });
  }

  /** The thread's metrics as exposition text; '' when it is not running or does not answer in time. */
  metricsText(): Promise<string> {
    if (this.#worker === null) return Promise.resolve('');
    const id = ++this.#lastScrape;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#scrapes.delete(id);
        resolve('');
      }, SCRAPE_TIMEOUT_MS);
      this.#scrapes.set(id, (text) => {
        clearTimeout(timer);
        resolve(text);
      });
      this.#post({ type: 'metrics', id });
    });
  }

  /** Stops claiming; resolves once in-flight attempts are finished and recorded and the thread has exited (API.md §5). */
  async stop(): Promise<void> {
    this.#stopping = true;
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    const worker = this.#worker;
    if (worker === null) return;
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    this.#post({ type: 'stop' });
    await exited;
  }

  #post(message: ToDispatcherThread): void {
    this.#worker?.postMessage(message);
  }

  #spawn(first: boolean): Promise<void> {
    const { config, secretKey, log, entry = ENTRY } = this.#options;
    const data: DispatcherThreadData = { config, secretKey };
    const worker = new Worker(entry, { workerData: data, name: 'restwire dispatcher' });
    this.#worker = worker;
    return new Promise((resolve, reject) => {
      let started = false;
      let failure: Error | null = null;
      worker.on('message', (message: FromDispatcherThread) => {
        if (message.type === 'started') {
          started = true;
          resolve();
        } else {
          this.#scrapes.get(message.id)?.(message.text);
          this.#scrapes.delete(message.id);
        }
      });
      worker.on('error', (error) => {
        failure = error;
        log.error({ err: error }, 'the dispatcher thread failed');
      });
      worker.on('exit', (code) => {
        this.#worker = null;
        for (const answer of this.#scrapes.values()) answer('');
        this.#scrapes.clear();
        if (this.#stopping) return;
        if (first && !started) reject(failure ?? new Error(`the dispatcher thread exited (code ${code}) before it started`));
        else this.#restart(failure ?? new Error(`the dispatcher thread exited (code ${code})`));
      });
    });
  }

  /** Starts a failed thread again, unless it keeps failing: then `onFatal`. */
  #restart(cause: Error): void {
    const now = Date.now();
    this.#failures = this.#failures.filter((at) => at > now - RESTART_WINDOW_MS);
    this.#failures.push(now);
    const { log, onFatal } = this.#options;
    if (this.#failures.length > MAX_RESTARTS) {
      log.fatal({ err: cause, failures: this.#failures.length }, 'the dispatcher thread keeps failing; stopping');
      onFatal(cause);
      return;
    }
    log.error({ err: cause }, 'the dispatcher thread stopped; starting it again');
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = null;
      // A thread that fails to start exits, and its exit comes back here.
      if (!this.#stopping) void this.#spawn(false);
    }, this.#options.restartDelayMs ?? RESTART_DELAY_MS);
  }
}
