import type { FastifyBaseLogger } from 'fastify';
import type { Registry } from 'prom-client';
import { loadKeys } from '../auth/keys.js';
import type { Config } from '../config.js';
import { openStorage, type Storage } from '../db/database.js';
import { createDispatcher, type Dispatcher } from '../webhooks/dispatcher.js';
import { openProject } from './project.js';
import { onShutdownSignal } from './shutdown.js';
import { createLogger } from '../http/logging.js';

/**
 * `restwire worker`: a process that only delivers webhooks. On PostgreSQL any number share the
 * queue; on SQLite run one dispatcher in all (serve with DISPATCHER_IN_SERVE=false, or no worker).
 */
export async function worker(config: Config): Promise<void> {
  const log = await createLogger(config);
  // Refuses declarations the migrations do not describe, as serve does (RESOURCES.md §5).
  const { storage } = await openProject(config);
  const delivery = await startDelivery(config, { log, storage });
  log.info({ dialect: storage.dialect }, 'worker delivering webhooks');

  onShutdownSignal(async (signal) => {
    log.info({ signal }, 'worker stopping: finishing in-flight deliveries');
    await delivery.stop();
  });
}

/** A dispatcher delivering, and how to stop it. */
export interface Delivery {
  readonly dispatcher: Dispatcher;
  /** Stops claiming, lets attempts in flight finish and records them, closes the database (API.md §5). */
  stop(): Promise<void>;
}

/**
 * Starts the dispatcher on `storage`, or on the database opened without migrating (serve's
 * dispatcher process: serve migrated before it forked it). What `restwire worker` and the
 * process `serve` forks (dispatcher-child.ts) both run.
 */
export async function startDelivery(
  config: Config,
  { log, storage: given, registry }: { log: FastifyBaseLogger; storage?: Storage; registry?: Registry },
): Promise<Delivery> {
  const storage = given ?? (await openStorage(config, { migrate: false }));
  const keys = await loadKeys(storage.db, config.secretKey);
  const dispatcher = createDispatcher(config, storage, { secretKey: keys.secretKey, log, ...(registry ? { registry } : {}) });
  await dispatcher.start();
  return {
    dispatcher,
    async stop() {
      await dispatcher.stop();
      await storage.close();
    },
  };
}
