// Starting and stopping a dispatcher, as `restwire worker` and serve's dispatcher process
// (dispatcher-child.ts) both do. Kept apart from worker.ts so the child loads only what delivery
// needs, not the project's declarations (project.ts): serve checked and migrated them before it forked.

import type { FastifyBaseLogger } from 'fastify';
import type { Registry } from 'prom-client';
import { loadKeys } from '../auth/keys.js';
import type { Config } from '../config.js';
import { openStorage, type Storage } from '../db/database.js';
import { createDispatcher, type Dispatcher } from '../webhooks/dispatcher.js';

/** A dispatcher delivering, and how to stop it. */
export interface Delivery {
  readonly dispatcher: Dispatcher;
  /** Stops claiming, lets attempts in flight finish and records them, closes the database (API.md §5). */
  stop(): Promise<void>;
}

/**
 * Starts the dispatcher on `storage`, or on the database opened without migrating (serve's
 * dispatcher process: serve migrated before it forked it). `registry` receives its metrics.
 */
export async function startDelivery(
  config: Config,
  { log, storage: given, registry }: { log: FastifyBaseLogger; storage?: Storage; registry?: Registry },
): Promise<Delivery> {
  const storage = given ?? (await openStorage(config, { migrate: false }));
  let dispatcher: Dispatcher;
  try {
    const keys = await loadKeys(storage.db, config.secretKey);
    dispatcher = createDispatcher(config, storage, { secretKey: keys.secretKey, log, ...(registry ? { registry } : {}) });
    await dispatcher.start();
  } catch (error) {
    // A database that cannot be reached: what this opened is closed, so a caller may try again.
    if (!given) await storage.close();
    throw error;
  }
  return {
    dispatcher,
    async stop() {
      await dispatcher.stop();
      await storage.close();
    },
  };
}
