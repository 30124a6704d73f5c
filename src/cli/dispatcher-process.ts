// Where `serve` delivers webhooks: a child process of its own (node:child_process fork, with an
// IPC channel) running what `restwire worker` runs (dispatcher-child.ts, delivery.ts), so
// claiming, signing, sending and recording never wait in the API's event loop and API requests
// never wait behind them (issue 21 item 1, the backlog drill). This side forks it once serve
// listens, passes on wake-ups (a commit that queued deliveries), asks for its metrics at each
// scrape, stops it on SIGTERM once HTTP has drained, and forks it again if it dies. The child
// exits when the channel closes, so a serve killed with -9 leaves no dispatcher behind to deliver
// beside the next one (on SQLite there must be one; API.md §6 "Retries"). A process rather than
// a worker thread (reverted, issue 21): its own heap, event loop and priority, and it ends with
// serve however serve ends.

import { fork, type ChildProcess } from 'node:child_process';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.js';
import type { MetricsJson } from '../http/metrics.js';

/** Messages to the dispatcher process. */
export type ToDispatcherChild = { type: 'start'; config: Config } | { type: 'wake' } | { type: 'metrics'; id: number } | { type: 'stop' };

/** Messages from the dispatcher process. */
export type FromDispatcherChild = { type: 'ready' } | { type: 'started' } | { type: 'metrics'; id: number; metrics: MetricsJson | null };

const ENTRY = new URL('./dispatcher-child.js', import.meta.url);
/**
 * Node flags of the child, after serve's own (the later wins): a 1 MiB young generation instead of
 * serve's 8 MiB semi-spaces (a delivery's objects live for one attempt), and an old generation
 * that grows by a fifth past what the last full collection kept. V8 otherwise lets it grow up to
 * 4x when collecting is cheap: draining a backlog, the child kept 16-20 MiB live and its old
 * generation grew to 38 MiB and more of dead delivery batches, and its RSS peaked at 181-187 MiB;
 * with 20 % it peaks at 121-122 MiB, draining 4,439-4,615 deliveries/s against 4,570-5,266
 * (bench/RESULTS.md, issue 21).
 * `restwire`'s shebang passes serve the same; here for a serve started by a bare `node`.
 */
const CHILD_FLAGS = ['--max-semi-space-size=1', '--heap-growing-percent=20'];
/** A scrape does not wait longer for the child's metrics; /metrics answers without them. */
const SCRAPE_TIMEOUT_MS = 2_000;
/** A child that died is forked again after this. */
const RESTART_DELAY_MS = 1_000;
/** More exits than this within RESTART_WINDOW_MS stop serve (`onFatal`): it must not serve on without delivering. */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;

export interface DispatcherProcessOptions {
  readonly config: Config;
  readonly log: FastifyBaseLogger;
  /** The child keeps dying: serve stops with a non-zero exit rather than go on without delivery. */
  readonly onFatal: () => void;
}

/** serve's dispatcher process, seen from serve. */
export class DispatcherProcess {
  readonly #options: DispatcherProcessOptions;
  #child: ChildProcess | null = null;
  #started = false;
  #stopping = false;
  #wakeQueued = false;
  #restartTimer: NodeJS.Timeout | null = null;
  #exits: number[] = [];
  readonly #scrapes = new Map<number, (metrics: MetricsJson | null) => void>();
  #lastScrape = 0;

  constructor(options: DispatcherProcessOptions) {
    this.#options = options;
  }

  /** Forks the child; it starts delivering a moment later (serve does not wait for it). */
  start(): void {
    const { config, log } = this.#options;
    // stdout and stderr are serve's: the child's log lines go where serve's go, in the same format.
    const child = fork(ENTRY, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [...process.execArgv, ...CHILD_FLAGS] });
    this.#child = child;
    this.#started = false;
    child.on('message', (message: FromDispatcherChild) => {
      // A stop sent while the child was still loading found no listener: it is asked again.
      if (message.type === 'ready') this.#send(this.#stopping ? { type: 'stop' } : { type: 'start', config });
      else if (message.type === 'started') {
        this.#started = true;
        log.info({ dispatcherPid: child.pid }, 'dispatcher process delivering webhooks');
      } else {
        this.#scrapes.get(message.id)?.(message.metrics);
        this.#scrapes.delete(message.id);
      }
    });
    // A send to a child that just died fails here, not in the caller; its exit is handled below.
    child.on('error', (error) => log.warn({ err: error }, 'could not reach the dispatcher process'));
    child.on('exit', (code, signal) => {
      if (this.#child === child) this.#child = null;
      this.#started = false;
      for (const answer of this.#scrapes.values()) answer(null);
      this.#scrapes.clear();
      if (!this.#stopping) this.#restart(code, signal);
    });
  }

  /** Asks the dispatcher to look for work now (after a commit that queued some). */
  wake(): void {
    if (this.#wakeQueued || !this.#started) return;
    // The commits answered together (one group commit) wake it with one message.
    this.#wakeQueued = true;
    queueMicrotask(() => {
      this.#wakeQueued = false;
      this.#send({ type: 'wake' });
    });
  }

  /** The child's metrics; null when it is not delivering or does not answer within 2 s. */
  metrics(): Promise<MetricsJson | null> {
    if (!this.#started) return Promise.resolve(null);
    const id = ++this.#lastScrape;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#scrapes.delete(id);
        resolve(null);
      }, SCRAPE_TIMEOUT_MS);
      this.#scrapes.set(id, (metrics) => {
        clearTimeout(timer);
        resolve(metrics);
      });
      this.#send({ type: 'metrics', id });
    });
  }

  /**
   * Stops forking; asks the child to stop claiming, finish the attempts in flight and record them
   * (API.md §5), and resolves once it has exited. One still running after `deadlineMs` is killed:
   * its leases go back at the next start (SQLite) or expire (PostgreSQL), so nothing is lost.
   */
  async stop(deadlineMs: number): Promise<void> {
    this.#stopping = true;
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    const child = this.#child;
    if (child === null || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    // A child still loading has claimed nothing, and listens for no message yet: SIGTERM ends it
    // at once then (later, its handler stops it as the message does).
    if (this.#started) this.#send({ type: 'stop' });
    else child.kill('SIGTERM');
    const deadline = setTimeout(() => {
      this.#options.log.warn({ deadlineMs }, 'the dispatcher process did not stop in time; killing it');
      child.kill('SIGKILL');
    }, deadlineMs);
    await exited;
    clearTimeout(deadline);
  }

  #send(message: ToDispatcherChild): void {
    const child = this.#child;
    if (child?.connected) child.send(message);
  }

  /** Forks a child that died again, unless children keep dying: then `onFatal`. */
  #restart(code: number | null, signal: NodeJS.Signals | null): void {
    const { log, onFatal } = this.#options;
    const now = Date.now();
    this.#exits = this.#exits.filter((at) => at > now - RESTART_WINDOW_MS);
    this.#exits.push(now);
    if (this.#exits.length > MAX_RESTARTS) {
      log.fatal({ code, signal, exits: this.#exits.length }, 'the dispatcher process keeps exiting; stopping');
      onFatal();
      return;
    }
    log.error({ code, signal }, 'the dispatcher process exited; starting another');
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = null;
      if (!this.#stopping) this.start();
    }, RESTART_DELAY_MS);
  }
}
