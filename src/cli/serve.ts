import { buildApp, logsInfo, type App, type AppOptions } from '../app.js';
import type { Config } from '../config.js';
import { DispatcherProcess } from './dispatcher-process.js';
import { ensureFirstUser } from './first-user.js';
import { openProject } from './project.js';
import { onShutdownSignal } from './shutdown.js';

export interface ServeOptions extends AppOptions {
  /** Fork a dispatcher process (config.dispatcherInServe unless a cluster decides). */
  readonly dispatcher?: boolean;
}

/**
 * How long a stopping dispatcher process may take beyond an attempt's own timeout: recording the
 * last outcomes and closing its database.
 */
const DISPATCHER_STOP_GRACE_MS = 5_000;

/**
 * Starts the API server; resolves once listening. Unless DISPATCHER_IN_SERVE=false, webhooks are
 * delivered by a process of its own (dispatcher-process.ts). SIGTERM/SIGINT drain and exit 0
 * (API.md §5).
 */
export async function serve(config: Config, options: ServeOptions = {}): Promise<App> {
  const { dispatcher: delivers = config.dispatcherInServe, onDeliveriesQueued, ...appOptions } = options;
  const { project, storage } = await openProject(config);
  let dispatcher: DispatcherProcess | null = null;
  const app = await buildApp(config, storage, {
    registry: project.registry,
    ...appOptions,
    onDeliveriesQueued: () => {
      dispatcher?.wake();
      onDeliveriesQueued?.();
    },
  });
  // Before anything slow: a SIGTERM from here on drains, and stops the dispatcher process.
  const shutdown = onShutdownSignal(async (signal) => {
    app.server.log.info({ signal, deadlineMs: config.drainTimeoutMs }, 'draining in-flight requests');
    // Fastify stops accepting, answers 503 to new requests on kept-alive sockets, and waits
    // for in-flight ones, but only until DRAIN_TIMEOUT_SECONDS: a slow client must not hold
    // the process (issue 11, finding 5).
    await closeWithin(app, config.drainTimeoutMs);
    // The dispatcher stops claiming; in-flight attempts finish and are recorded (API.md §5).
    await dispatcher?.stop(Math.max(config.drainTimeoutMs, config.webhookTimeoutMs) + DISPATCHER_STOP_GRACE_MS);
    await storage.close();
  });
  const notice = await ensureFirstUser(app.users, config);
  if (notice) process.stdout.write(`${notice}\n`);
  const address = await app.server.listen({ host: config.host, port: config.port });
  // Fastify logs where it listens at info; an operator who turned logs down still needs to know.
  if (!logsInfo(config)) process.stdout.write(`restwire: listening at ${address}\n`);
  if (delivers) {
    // Forked once migrations are applied (it opens the database without migrating) and this
    // process listens, so it never delays "listening"; it claims all due work as it starts.
    dispatcher = new DispatcherProcess({ config, log: app.server.log, onFatal: () => shutdown('SIGTERM', 1) });
    dispatcher.start();
    const child = dispatcher;
    app.metrics.include(() => child.metrics());
  }
  return app;
}

/** Closes the server, cutting the connections still open once `deadlineMs` has passed. */
async function closeWithin(app: App, deadlineMs: number): Promise<void> {
  const deadline = setTimeout(() => {
    app.server.log.warn({ deadlineMs }, 'drain deadline passed: closing the connections still open');
    app.server.server.closeAllConnections();
  }, deadlineMs);
  try {
    await app.server.close();
  } finally {
    clearTimeout(deadline);
  }
}
