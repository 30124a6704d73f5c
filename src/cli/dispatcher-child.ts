// The program of serve's dispatcher process (forked by dispatcher-process.ts): the dispatcher
// `restwire worker` runs (delivery.ts), with serve's configuration (sent over the IPC
// channel, never on the command line) and its metrics in a registry of its own that serve asks
// for at each scrape. It stops when serve says so (after serve has drained HTTP), on SIGTERM or
// SIGINT (a terminal's Ctrl-C reaches both processes), and at once when the channel closes: serve
// is gone (kill -9), and a dispatcher left behind would deliver beside the next serve's.

import { setPriority } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import { Registry } from 'prom-client';
import type { Config } from '../config.js';
import { isDatabaseUnavailable } from '../db/outage.js';
import { createLogger } from '../http/logging.js';
import type { FromDispatcherChild, ToDispatcherChild } from './dispatcher-process.js';
import { startDelivery, type Delivery } from './delivery.js';

const send = (message: FromDispatcherChild) => process.send?.(message);

/** A dispatcher delivering, and the registry of its metrics. */
interface Running {
  readonly delivery: Delivery;
  readonly registry: Registry;
}

let delivery: Promise<Running | null> | null = null;
let stopping = false;
/**
 * This process's nice value: where serve and its dispatcher both want the CPU, serve's answers
 * come first and delivery takes what is left (issue 21 item 1, the backlog drill; delivery is
 * asynchronous, a request is waited for). On an idle core it runs as fast as at serve's priority.
 */
const DISPATCHER_NICE = 10;
/** How often a dispatcher process forked during a database outage tries to start again. */
const START_RETRY_MS = 1_000;

/** Stops claiming, finishes and records the attempts in flight, then exits (API.md §5). */
function stop(): void {
  if (stopping) return;
  stopping = true;
  void (delivery ?? Promise.resolve(null))
    .then((running) => running?.delivery.stop())
    .then(() => process.exit(0));
}

/**
 * Starts delivering once the database answers. serve rides out a database outage (503s until it
 * returns, docs/RELIABILITY.md drill 2), and forks this process again if it dies, so one that
 * starts (or restarts) during an outage waits for the database rather than exit: exiting over and
 * over would make serve give up on it. Resolves null when told to stop first.
 */
async function startWhenReachable(config: Config, log: FastifyBaseLogger): Promise<Running | null> {
  for (let told = false; !stopping; ) {
    // A registry per try: a try that failed may have registered metrics in its own.
    const registry = new Registry();
    try {
      return { delivery: await startDelivery(config, { log, registry }), registry };
    } catch (error) {
      if (!isDatabaseUnavailable(error)) throw error;
      if (!told) log.warn({ err: error }, 'the dispatcher process cannot reach the database; it starts delivering once it can');
      told = true;
      await new Promise((resolve) => setTimeout(resolve, START_RETRY_MS));
    }
  }
  return null;
}

async function start(config: Config): Promise<void> {
  const log = await createLogger(config);
  try {
    setPriority(DISPATCHER_NICE);
  } catch (error) {
    log.warn({ err: error }, "could not lower the dispatcher process's priority; delivery competes with the API for the CPU");
  }
  process.on('uncaughtException', (error) => {
    log.fatal({ err: error }, 'the dispatcher process failed');
    process.exit(1);
  });
  delivery = startWhenReachable(config, log);
  const running = await delivery;
  if (running === null) return;
  const { registry } = running;
  process.on('message', (message: ToDispatcherChild) => {
    if (message.type === 'wake') running.delivery.dispatcher.wake();
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
