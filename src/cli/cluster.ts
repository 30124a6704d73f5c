import cluster, { type Worker } from 'node:cluster';
import { RateLimiterCluster, RateLimiterClusterMaster } from 'rate-limiter-flexible';
import { loadKeys } from '../auth/keys.js';
import { UserStore } from '../auth/users.js';
import type { Config } from '../config.js';
import type { LimiterFactory } from '../http/throttling/request-throttle.js';
import { createDispatcher, type Dispatcher } from '../webhooks/dispatcher.js';
import { ensureFirstUser } from './first-user.js';
import { openProject } from './project.js';
import { serve } from './serve.js';
import { onShutdownSignal } from './shutdown.js';
import { createLogger } from '../http/logging.js';

/**
 * `restwire serve --workers N` (node:cluster): N processes share the port so the API uses every
 * core. The primary does what must happen once: migrations, the first user, the webhook
 * dispatcher (on SQLite there must be exactly one), and, without Redis, the rate-limit counts
 * all workers share (rate-limiter-flexible's cluster limiter), so the limit stays one limit.
 */
const WAKE = 'restwire:deliveries-queued';

/** Runs the primary or a worker, whichever this process is. */
export async function serveCluster(config: Config, workers: number): Promise<void> {
  if (cluster.isPrimary) await runPrimary(config, workers);
  else await runWorker(config);
}

async function runPrimary(config: Config, workers: number): Promise<void> {
  const log = await createLogger(config);
  const { storage } = await openProject(config);
  const keys = await loadKeys(storage.db, config.secretKey);
  const notice = await ensureFirstUser(new UserStore(storage.db), config);
  if (notice) process.stdout.write(`${notice}\n`);
  if (config.redisUrl === null) new RateLimiterClusterMaster();

  let dispatcher: Dispatcher | null = null;
  if (config.dispatcherInServe) {
    dispatcher = createDispatcher(config, storage, { secretKey: keys.secretKey, log });
    await dispatcher.start();
  }
  cluster.on('message', (_worker, message: unknown) => {
    if (message === WAKE) dispatcher?.wake();
  });

  let stopping = false;
  const shutdown = onShutdownSignal(async (signal) => {
    stopping = true;
    log.info({ signal }, 'stopping workers');
    const exits = Object.values(cluster.workers ?? {}).map(
      (worker) =>
        new Promise<void>((resolve) => {
          if (!worker || worker.isDead()) return resolve();
          worker.once('exit', () => resolve());
          worker.process.kill('SIGTERM');
        }),
    );
    await Promise.all(exits);
    await dispatcher?.stop();
    await storage.close();
  });
  const fork = (): Worker => cluster.fork();
  // A worker that dies is replaced, unless workers keep dying at once (a database that is down,
  // a port in use): then the cluster stops rather than fork in a tight loop.
  const recentExits: number[] = [];
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    const now = Date.now();
    recentExits.push(now);
    while (recentExits[0]! < now - 10_000) recentExits.shift();
    if (recentExits.length > 2 * workers) {
      log.fatal({ exits: recentExits.length }, 'workers keep exiting; stopping the cluster');
      shutdown('SIGTERM', 1);
      return;
    }
    log.error({ pid: worker.process.pid, code, signal }, 'worker exited; starting another');
    setTimeout(fork, 500);
  });
  for (let i = 0; i < workers; i++) fork();
  log.info({ workers, pid: process.pid }, 'cluster primary started');
}

async function runWorker(config: Config): Promise<void> {
  // Without Redis every limit is counted in the primary, so N workers together allow the limit, not N times it.
  const limiterFactory: LimiterFactory | undefined =
    config.redisUrl === null
      ? (rate, keyPrefix) => new RateLimiterCluster({ points: rate.limit, duration: rate.windowSeconds, keyPrefix, timeoutMs: 3000 })
      : undefined;
  await serve(config, {
    dispatcher: false,
    ...(limiterFactory ? { limiterFactory } : {}),
    onDeliveriesQueued: () => process.send?.(WAKE),
  });
}
