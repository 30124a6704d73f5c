// The dispatcher thread's program (started by dispatcher-thread.ts): the dispatcher `restwire
// worker` runs, on a database connection of its own, with its metrics in a registry of its own
// that the serving thread asks for at each scrape. A failure here is not caught: it ends the
// thread, which the serving thread logs and starts again.

import { setPriority } from 'node:os';
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

/**
 * This thread's nice value. Where both want the CPU, the API's thread gets it first, so a drain
 * never adds its work to a request's wait (the backlog drill); an idle API leaves delivery all of
 * it. Linux keeps a nice value per thread (setpriority on "the calling process" sets the calling
 * thread's); elsewhere it would lower the whole process, so it is set on Linux only.
 */
const DISPATCHER_NICE = 10;

async function runDispatcherThread(port: MessagePort, { config, secretKey }: DispatcherThreadData): Promise<void> {
  const log = await createLogger(config);
  try {
    if (process.platform === 'linux') setPriority(DISPATCHER_NICE);
  } catch (error) {
    log.warn({ err: error }, 'could not lower the dispatcher thread\'s priority; delivery competes with the API for the CPU');
  }
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
