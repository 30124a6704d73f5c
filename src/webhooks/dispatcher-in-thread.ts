// The dispatcher thread's program (started by dispatcher-thread.ts): the dispatcher `restwire
// worker` runs, on a database connection of its own, with its metrics in a registry of its own
// that the serving thread asks for at each scrape. A failure here is not caught: it ends the
// thread, which the serving thread logs and starts again.

import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { Registry } from 'prom-client';
import { openStorage } from '../db/database.js';
import { createLogger } from '../http/logging.js';
import { createDispatcher } from './dispatcher.js';
import type { DispatcherThreadData, FromDispatcherThread, ToDispatcherThread } from './dispatcher-thread.js';

/**
 * The thread's PostgreSQL pool: its claim loop, the outcome batch being written, retention, lease
 * releases and the LISTEN connection. The API's pool (10) stays the API's own.
 */
const DISPATCHER_CONNECTIONS = 5;

async function runDispatcherThread(port: MessagePort, { config, secretKey }: DispatcherThreadData): Promise<void> {
  const log = await createLogger(config);
  // `serve` migrated before starting the thread.
  const storage = await openStorage(config, { migrate: false, maxConnections: DISPATCHER_CONNECTIONS });
  const registry = new Registry();
  const dispatcher = createDispatcher(config, storage, { secretKey, log, registry });
  const send = (message: FromDispatcherThread) => port.postMessage(message);
  let started: Promise<void> = Promise.resolve();

  port.on('message', (message: ToDispatcherThread) => {
    switch (message.type) {
      case 'wake':
        dispatcher.wake();
        break;
      case 'metrics':
        void registry.metrics().then(
          (text) => send({ type: 'metrics', id: message.id, text }),
          (error: unknown) => {
            log.warn({ err: error }, 'could not collect delivery metrics');
            send({ type: 'metrics', id: message.id, text: '' });
          },
        );
        break;
      case 'stop':
        // In a worker thread, process.exit ends the thread, once everything in flight is recorded
        // (a stop that comes while starting waits for the start).
        void started
          .then(() => dispatcher.stop())
          .then(() => storage.close())
          .then(() => process.exit(0));
        break;
    }
  });
  started = dispatcher.start();
  await started;
  send({ type: 'started' });
}

void runDispatcherThread(parentPort!, workerData as DispatcherThreadData);
