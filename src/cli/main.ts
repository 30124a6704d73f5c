import { Command, InvalidArgumentError } from 'commander';
import { UsernameTaken, passwordProblems, usernameProblems } from '../auth/users.js';
import { ConfigError, loadConfig } from '../config.js';
import { openStorage } from '../db/database.js';
import { migrateToLatest } from '../db/migrations.js';
import { UserStore } from '../auth/users.js';
import { loadKeys } from '../auth/keys.js';
import { PasswordChangeLog } from '../auth/password-changes.js';
import { AccessTokens, createKeyring } from '../auth/tokens.js';
import { VERSION } from '../version.js';
import { availableParallelism } from 'node:os';
import { serveCluster } from './cluster.js';
import { serve } from './serve.js';
import { onShutdownSignal } from './shutdown.js';
import { worker } from './worker.js';
import { startListener } from './listen.js';

/** Reads all of standard input; `--password-stdin` strips one trailing newline (API.md §6). */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
}

function fail(message: string): never {
  process.stderr.write(`restwire: ${message}\n`);
  process.exit(1);
}

const program = new Command('restwire')
  .description('Resource API server with signed, reliable webhook deliveries')
  .version(VERSION);

program
  .command('serve')
  .description('serve the API (and deliver webhooks) on HOST:PORT')
  .option('--workers <n>', 'processes sharing the port (node:cluster); 0 means one per core', parseWorkers)
  .action(async (options: { workers?: number }) => {
    const config = loadConfig();
    if (options.workers === undefined) await serve(config);
    else await serveCluster(config, options.workers === 0 ? availableParallelism() : options.workers);
  });

program
  .command('worker')
  .description('deliver webhooks only (run several on PostgreSQL; set DISPATCHER_IN_SERVE=false on serve to leave delivery to workers)')
  .action(async () => {
    await worker(loadConfig());
  });

program
  .command('listen')
  .description('run a local webhook receiver that verifies and prints every delivery')
  .requiredOption('--port <port>', 'port to listen on', parsePort)
  .requiredOption('--secret <secret>', "the webhook's secret (whsec_…)")
  .option('--host <host>', 'address to listen on', '127.0.0.1')
  .action(async (options: { port: number; secret: string; host: string }) => {
    const listener = await startListener({ port: options.port, host: options.host, secret: options.secret });
    process.stdout.write(`restwire listen: receiving webhooks at http://${options.host}:${listener.port}/ (Ctrl-C to stop)\n`);
    onShutdownSignal(() => listener.close());
  });

program
  .command('migrate')
  .description('apply pending database migrations and exit')
  .action(async () => {
    const config = loadConfig();
    const storage = await openStorage(config, { migrate: false });
    try {
      const applied = await migrateToLatest(storage.db);
      process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'database is up to date\n');
    } finally {
      await storage.close();
    }
  });

program
  .command('createuser')
  .description('create a user; the password is read from standard input')
  .argument('<name>', 'user name')
  .requiredOption('--password-stdin', 'read the password from standard input')
  .action(async (name: string) => {
    const username = name.trim();
    const password = await readStdin();
    const problems = [...usernameProblems(username), ...passwordProblems(password, username)];
    if (problems.length) fail(problems.join(' '));
    const storage = await openStorage(loadConfig());
    try {
      const user = await new UserStore(storage.db).create(username, password);
      process.stdout.write(`created user "${user.username}" (id ${user.id})\n`);
    } catch (error) {
      if (error instanceof UsernameTaken) fail(error.message);
      throw error;
    } finally {
      await storage.close();
    }
  });

program
  .command('setpassword')
  .description("set a user's password (read from standard input); their sessions and refresh tokens end")
  .argument('<name>', 'user name')
  .requiredOption('--password-stdin', 'read the password from standard input')
  .action(async (name: string) => {
    const password = await readStdin();
    const problems = passwordProblems(password, name);
    if (problems.length) fail(problems.join(' '));
    const storage = await openStorage(loadConfig());
    try {
      const users = new UserStore(storage.db);
      const user = await users.findByUsername(name);
      if (!user) fail(`no user named "${name}"`);
      await users.setPassword(user.id, password);
      process.stdout.write(`password of "${user.username}" changed\n`);
    } finally {
      await storage.close();
    }
  });

program
  .command('token')
  .description('print an access token for a user (alone on stdout, for scripts)')
  .argument('<name>', 'user name')
  .action(async (name: string) => {
    const config = loadConfig();
    const storage = await openStorage(config);
    try {
      const user = await new UserStore(storage.db).findByUsername(name);
      if (!user) fail(`no user named "${name}"`);
      const keys = await loadKeys(storage.db, config.secretKey);
      // This process verifies nothing, so it needs no knowledge of password changes.
      const tokens = new AccessTokens(await createKeyring(keys.derive('access-token')), config.accessTokenSeconds, new PasswordChangeLog(0));
      process.stdout.write(`${(await tokens.issue(user)).accessToken}\n`);
    } finally {
      await storage.close();
    }
  });

function parseWorkers(value: string): number {
  const workers = Number(value);
  if (!/^\d+$/.test(value) || workers > 64) throw new InvalidArgumentError('expected a number of processes from 0 to 64');
  return workers;
}

export function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port < 1 || port > 65_535) throw new InvalidArgumentError('expected a port from 1 to 65535');
  return port;
}

program.parseAsync().catch((error: unknown) => {
  if (error instanceof ConfigError) fail(`configuration error: ${error.message}`);
  fail(error instanceof Error ? error.message : String(error));
});
