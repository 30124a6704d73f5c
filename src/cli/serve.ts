import { buildApp, logsInfo, type App, type AppOptions } from '../app.js';
import type { Config } from '../config.js';
import { ensureFirstUser } from './first-user.js';
import { openProject } from './project.js';
import { onShutdownSignal } from './shutdown.js';

export interface ServeOptions extends AppOptions {
  /** Run the webhook dispatcher in this process (config.dispatcherInServe unless a cluster decides). */
  readonly dispatcher?: boolean;
}

/** Starts the API server; resolves once listening. SIGTERM/SIGINT drain and exit 0 (API.md §5). */
export async function serve(config: Config, options: ServeOptions = {}): Promise<App> {
  const { project, storage } = await openProject(config);
  const app = await buildApp(config, storage, { registry: project.registry, ...options });
  const notice = await ensureFirstUser(app.users, config);
  if (notice) process.stdout.write(`${notice}\n`);
  const address = await app.server.listen({ host: config.host, port: config.port });
  // Fastify logs where it listens at info; an operator who turned logs down still needs to know.
  if (!logsInfo(config)) process.stdout.write(`restwire: listening at ${address}\n`);
  if (options.dispatcher ?? config.dispatcherInServe) await app.dispatcher.start();

  onShutdownSignal(async (signal) => {
    app.server.log.info({ signal, deadlineMs: config.drainTimeoutMs }, 'draining in-flight requests');
    // Fastify stops accepting, answers 503 to new requests on kept-alive sockets, and waits
    // for in-flight ones, but only until DRAIN_TIMEOUT_SECONDS: a slow client must not hold
    // the process (issue 11, finding 5).
    await closeWithin(app, config.drainTimeoutMs);
    // Stop claiming; in-flight attempts finish and are recorded (API.md §5).
    await app.dispatcher.stop();
    await storage.close();
  });
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
