// The program of serve's dispatcher process (forked by dispatcher-process.ts): the dispatcher
// `restwire worker` runs (delivery.ts), with serve's configuration (sent over the IPC
// channel, never on the command line) and its metrics in a registry of its own that serve asks
// for at each scrape. It stops when serve says so (after serve has drained HTTP), on SIGTERM or
// SIGINT (a terminal's Ctrl-C reaches both processes), and at once when the channel closes: serve
// is gone (kill -9), and a dispatcher left behind would deliver beside the next serve's.

import { Registry } from 'prom-client';
import type { Config } from '../config.js';
import { createLogger } from '../http/logging.js';
import type { FromDispatcherChild, ToDispatcherChild } from './dispatcher-process.js';
import { startDelivery, type Delivery } from './delivery.js';

const send = (message: FromDispatcherChild) => process.send?.(message);

let delivery: Promise<Delivery> | null = null;
let stopping = false;

/** Stops claiming, finishes and records the attempts in flight, then exits (API.md §5). */
function stop(): void {
  if (stopping) return;
  stopping = true;
  void (delivery ?? Promise.resolve(null))
    .then((running) => running?.stop())
    .then(() => process.exit(0));
}

async function start(config: Config): Promise<void> {
  const log = await createLogger(config);
  process.on('uncaughtException', (error) => {
    log.fatal({ err: error }, 'the dispatcher process failed');
    process.exit(1);
  });
  const registry = new Registry();
  delivery = startDelivery(config, { log, registry });
  const running = await delivery;
  process.on('message', (message: ToDispatcherChild) => {
    if (message.type === 'wake') running.dispatcher.wake();
    else if (message.type === 'metrics') {
      void registry.getMetricsAsJSON().then(
        (metrics) => send({ type: 'metrics', id: message.id, metrics }),
        (error: unknown) => {
          log.warn({ err: error }, 'could not collect delivery metrics');
          send({ type: 'metrics', id: message.id, metrics: null });
        },
      );
    }
  });
  send({ type: 'started' });
}

process.on('message', (message: ToDispatcherChild) => {
  if (message.type === 'start' && delivery === null && !stopping) void start(message.config);
  else if (message.type === 'stop') stop();
});
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.on('disconnect', () => process.exit(0));
send({ type: 'ready' });
