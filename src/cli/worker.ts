import type { Config } from '../config.js';
import { startDelivery } from './delivery.js';
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
