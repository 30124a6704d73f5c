import { Command, InvalidArgumentError } from 'commander';
import { UsernameTaken, passwordProblems, usernameProblems } from '../auth/users.js';
import { ConfigError, ENVIRONMENT, loadConfig, type FolderOptions, type ListenOptions } from '../config.js';
import { openStorage } from '../db/database.js';
import { migrateToLatest, pendingMigrations } from '../db/migrations.js';
import { writeMigrationFile } from '../db/migration-files.js';
import { describeOperation, diffStates, replay, type FieldRename } from '../db/migration-operations.js';
import { collectionsWithRows } from '../db/data-loss-guard.js';
import { applyUserMigrations, pendingUserMigrations } from '../db/user-migrations.js';
import { declaredState } from '../resources/registry.js';
import { InitError, initProject } from './init.js';
import { loadProject } from './project.js';
import { relative, resolve } from 'node:path';
import { UserStore } from '../auth/users.js';
import { LastAdmin, ROLE_MESSAGES, ROLE_NAME, roleProblems } from '../auth/roles.js';
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

/** The environment variables, for the end of `--help`: configuration is read from them alone. */
function environmentHelp(): string {
  const column = 40; // a longer name gets its meaning on the next line, as commander does
  const lines = ENVIRONMENT.map(([name, meaning]) => `  ${name.length > column ? `${name}\n  ${''.padEnd(column)}` : name.padEnd(column)}  ${meaning}`);
  return `\nEnvironment (read once at start-up; a bad value stops with a message naming it):\n${lines.join('\n')}\n`;
}

const program = new Command('restwire')
  .description('Resource API server with signed, reliable webhook deliveries')
  .version(VERSION)
  .addHelpText('after', environmentHelp);

/** `--resources DIR` and `--migrations DIR`, after the subcommand (RESOURCES.md §7 "CLI"). */
function withFolders(command: Command): Command {
  return command
    .option('--resources <dir>', 'folder of resource declarations (RESOURCES_DIR; default ./resources when it exists)')
    .option('--migrations <dir>', 'folder of migration files (MIGRATIONS_DIR; default ./migrations)');
}

program
  .command('init')
  .description('write a new project (package.json, an example declaration in resources/, its migration) into DIR')
  .argument('[dir]', 'a new or empty folder', '.')
  .action((dir: string) => {
    let written: string[];
    try {
      written = initProject(dir);
    } catch (error) {
      if (error instanceof InitError) fail(error.message);
      throw error;
    }
    const inside = relative(process.cwd(), resolve(dir));
    const where = inside.startsWith('..') ? resolve(dir) : inside;
    const quoted = /^[\w./-]+$/.test(where) ? where : `'${where.replaceAll("'", "'\\''")}'`;
    process.stdout.write(`Wrote a restwire project in ${where ? quoted : 'this folder'}:\n`);
    for (const file of written) process.stdout.write(`  ${file}\n`);
    process.stdout.write(`\nNext:\n${where ? `  cd ${quoted}\n` : ''}  npm install\n  npm start   # serves http://127.0.0.1:8000\n`);
  });

withFolders(program
  .command('serve')
  .description('serve the API (and deliver webhooks) on HOST:PORT')
  .option('--host <host>', 'address to listen on, e.g. 0.0.0.0 for every interface (HOST; default 127.0.0.1)')
  .option('--port <port>', 'port to listen on, 0 for any free one (PORT; default 8000)', parseListenPort)
  .option('--workers <n>', 'processes sharing the port (node:cluster); 0 means one per core', parseWorkers))
  .addHelpText('after', environmentHelp)
  .action(async (options: { workers?: number } & FolderOptions & ListenOptions) => {
    const config = loadConfig(process.env, options);
    if (options.workers === undefined) await serve(config);
    else await serveCluster(config, options.workers === 0 ? availableParallelism() : options.workers);
  });

withFolders(program
  .command('worker')
  .description('deliver webhooks only (run several on PostgreSQL; set DISPATCHER_IN_SERVE=false on serve to leave delivery to workers)'))
  .addHelpText('after', environmentHelp)
  .action(async (options: FolderOptions) => {
    await worker(loadConfig(process.env, options));
  });

program
  .command('listen')
  .description('run a local webhook receiver that verifies and prints every delivery')
  .requiredOption('--port <port>', 'port to listen on', parsePort)
  .requiredOption('--secret <secret>', "the webhook's secret (whsec_…)")
  .option('--host <host>', 'address to listen on', '127.0.0.1')
  .option('--validate', "check each body against its event's JSON Schema from the event catalog")
  .option('--catalog <url|file>', 'where --validate reads the catalog: a server URL or a saved copy', 'http://127.0.0.1:8000/api/v1/events/')
  .action(async (options: { port: number; secret: string; host: string; validate?: boolean; catalog: string }) => {
    // Loaded at start-up, so a server that is not there fails now, not on the first delivery.
    const validator = options.validate ? await (await import('./event-catalog.js')).loadEventCatalog(options.catalog) : undefined;
    const listener = await startListener({ port: options.port, host: options.host, secret: options.secret, ...(validator ? { validator } : {}) });
    if (validator) process.stdout.write(`restwire listen: validating ${validator.events.join(', ')} against ${options.catalog}\n`);
    process.stdout.write(`restwire listen: receiving webhooks at http://${options.host}:${listener.port}/ (Ctrl-C to stop)\n`);
    onShutdownSignal(() => listener.close());
  });

withFolders(program
  .command('migrate')
  .description("apply restwire's pending migrations, then the migrations folder's, and exit")
  .option('--plan', 'print what would be applied, and apply nothing')
  .option('--allow-data-loss', 'apply migrations that remove fields or collections holding data, or round stored decimals'))
  .action(async (options: { plan?: boolean; allowDataLoss?: boolean } & FolderOptions) => {
    const config = loadConfig(process.env, options);
    const project = await loadProject(config);
    const storage = await openStorage(config, { migrate: false });
    try {
      if (options.plan) {
        const own = await pendingMigrations(storage.db);
        const files = await pendingUserMigrations(storage.db, project.files);
        if (own.length === 0 && files.length === 0) process.stdout.write('No migrations to apply.\n');
        for (const name of own) process.stdout.write(`restwire ${name}\n`);
        for (const file of files) {
          process.stdout.write(`${file.name}\n`);
          for (const operation of file.operations) process.stdout.write(`  - ${describeOperation(operation)}\n`);
        }
      } else {
        const applied = [...(await migrateToLatest(storage.db)), ...(await applyUserMigrations(storage.db, project.files, { allowDataLoss: options.allowDataLoss === true }))];
        process.stdout.write(applied.length ? `Applied: ${applied.join(', ')}\n` : 'No migrations to apply: the database is up to date.\n');
      }
      if (project.unmigrated.length > 0) {
        process.stdout.write(`Note: the declarations have ${project.unmigrated.length} change(s) no migration describes yet; run \`restwire makemigrations\`.\n`);
      }
    } finally {
      await storage.close();
    }
  });

withFolders(program
  .command('makemigrations')
  .description('write one migration file describing how the declarations differ from the migrations folder')
  .option('--name <name>', 'a name for the new file (lowercase letters, digits, _)', parseMigrationName)
  .option('--rename <rename>', 'a renamed field, COLLECTION.OLD:NEW (repeat for several)', collectRename, []))
  .action(async (options: { name?: string; rename: FieldRename[] } & FolderOptions) => {
    const config = loadConfig(process.env, options);
    const project = await loadProject(config);
    const described = replay(project.files.flatMap((file) => file.operations));
    const operations = diffStates(described, declaredState(project.registry), { renames: options.rename });
    if (operations.length === 0) {
      process.stdout.write('No changes detected\n');
      return;
    }
    // RESOURCES.md §5: a new required field needs a default when its collection has records.
    const needDefault = operations.filter(
      (operation) => operation.op === 'addField' && !operation.state.null && operation.state.default === undefined && operation.state.type !== 'references',
    );
    if (needDefault.length > 0) {
      const storage = await openStorage(config, { migrate: false });
      try {
        const withRows = await collectionsWithRows(storage.db, needDefault.map((operation) => operation.collection));
        for (const operation of needDefault) {
          if (operation.op === 'addField' && withRows.has(operation.collection)) {
            fail(
              `${operation.collection}.${operation.field} is a new required field without a default, and ${operation.collection} has records. ` +
                'Give it a `default` (or make it `required: false`) in its declaration, then run makemigrations again.',
            );
          }
        }
      } finally {
        await storage.close();
      }
    }
    const path = writeMigrationFile(config.migrationsDir, operations, options.name);
    process.stdout.write(`Wrote ${relative(process.cwd(), path) || path}:\n`);
    for (const operation of operations) process.stdout.write(`  - ${describeOperation(operation)}\n`);
  });

program
  .command('createuser')
  .description('create a user; the password is read from standard input')
  .argument('<name>', 'user name')
  .requiredOption('--password-stdin', 'read the password from standard input')
  .option('--role <role>', 'give the user this role (repeat for several)', collectRole, [])
  .action(async (name: string, options: { role: string[] }) => {
    const username = name.trim();
    const password = await readStdin();
    const problems = [...usernameProblems(username), ...passwordProblems(password, username), ...roleProblems(options.role)];
    if (problems.length) fail(problems.join(' '));
    const storage = await openStorage(loadConfig());
    try {
      const user = await new UserStore(storage.db).create(username, password, options.role);
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
  .command('roles')
  .description("print a user's roles, one a line; or change them with --add and --remove")
  .argument('<name>', 'user name')
  .option('--add <role>', 'give the user this role (repeat for several)', collectRole, [])
  .option('--remove <role>', 'take this role from the user (repeat for several)', collectRole, [])
  .action(async (name: string, options: { add: string[]; remove: string[] }) => {
    const storage = await openStorage(loadConfig());
    try {
      const users = new UserStore(storage.db);
      const user = await users.findByUsername(name);
      if (!user) fail(`no user named "${name}"`);
      let roles = user.roles;
      if (options.add.length > 0 || options.remove.length > 0) {
        const wanted = [...roles, ...options.add].filter((role) => !options.remove.includes(role));
        const problems = roleProblems(wanted);
        if (problems.length) fail(problems.join(' '));
        try {
          roles = await users.setRoles(user.id, wanted);
        } catch (error) {
          if (error instanceof LastAdmin) fail(error.message);
          throw error;
        }
      }
      for (const role of roles) process.stdout.write(`${role}\n`);
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

/** One `--role`, `--add` or `--remove`: a valid role name (ACCESS.md §1), collected in order. */
function collectRole(value: string, previous: string[]): string[] {
  if (!ROLE_NAME.test(value)) throw new InvalidArgumentError(ROLE_MESSAGES.badName(value));
  return [...previous, value];
}

function parseMigrationName(value: string): string {
  if (!/^[a-z0-9_]{1,64}$/.test(value)) throw new InvalidArgumentError('expected lowercase letters, digits and _ (at most 64)');
  return value;
}

function collectRename(value: string, previous: FieldRename[]): FieldRename[] {
  const match = /^([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*):([a-z][a-z0-9_]*)$/.exec(value);
  if (!match) throw new InvalidArgumentError('expected COLLECTION.OLD:NEW, e.g. books.name:title');
  return [...previous, { collection: match[1]!, from: match[2]!, to: match[3]! }];
}

function parseWorkers(value: string): number {
  const workers = Number(value);
  if (!/^\d+$/.test(value) || workers > 64) throw new InvalidArgumentError('expected a number of processes from 0 to 64');
  return workers;
}

/** `serve --port`: as PORT, 0 lets the system choose. */
function parseListenPort(value: string): number {
  return value === '0' ? 0 : parsePort(value);
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
