import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN, startServer, type RunningServer, type StartOptions, type TestDatabase } from './server.js';

/**
 * A user's project outside the checkout, as `npm install restwire` leaves it: a folder with
 * `package.json` `{"type":"module"}`, `node_modules/restwire` linking to this checkout, a
 * `resources/` folder of declaration files and (once written) a `migrations/` folder. Commands
 * run with the project as their working directory, so the default folders are the ones used.
 */
const CHECKOUT = new URL('../../', import.meta.url).pathname.replace(/\/$/, '');
const BIN = join(CHECKOUT, 'bin/restwire.js');

export interface CommandResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout and stderr together, for messages that may go to either. */
  readonly output: string;
}

export interface Project {
  readonly dir: string;
  readonly resourcesDir: string;
  readonly migrationsDir: string;
  /** Writes (or replaces) a file of the resources folder. */
  write(file: string, source: string): void;
  remove(file: string): void;
  /** The migration files' names, sorted. */
  migrationFiles(): string[];
  readMigration(name: string): string;
  /**
   * Runs `node bin/restwire.js ...args` in the project, with the database's env and `env`. A
   * command still running after `timeoutMs` (a `serve` that should have refused) is killed and
   * reported with code null. `as` runs it as another user (the tests' process must be root).
   */
  run(args: readonly string[], env?: Record<string, string>, timeoutMs?: number, as?: { uid: number; gid: number }): Promise<CommandResult>;
  /** `restwire serve` in the project (startServer with cwd = the project). */
  start(options?: StartOptions): Promise<RunningServer>;
  cleanup(): void;
}

/** Creates a project with the given resource files, bound to a test database. */
export function createProject(database: TestDatabase, files: Record<string, string>): Project {
  const dir = mkdtempSync(join(tmpdir(), 'restwire-project-'));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'my-api', private: true, type: 'module' }, null, 2));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(CHECKOUT, join(dir, 'node_modules', 'restwire'), 'dir');
  const resourcesDir = join(dir, 'resources');
  const migrationsDir = join(dir, 'migrations');
  mkdirSync(resourcesDir);
  for (const [file, source] of Object.entries(files)) writeFileSync(join(resourcesDir, file), source);

  const baseEnv = () => ({
    PATH: process.env.PATH ?? '',
    HOST: '127.0.0.1',
    PORT: '0',
    ADMIN_USERNAME: ADMIN.username,
    ADMIN_PASSWORD: ADMIN.password,
    ...database.env,
  });

  return {
    dir,
    resourcesDir,
    migrationsDir,
    write: (file, source) => writeFileSync(join(resourcesDir, file), source),
    remove: (file) => rmSync(join(resourcesDir, file), { force: true }),
    migrationFiles: () => (existsSync(migrationsDir) ? readdirSync(migrationsDir).filter((name) => !name.startsWith('.')).sort() : []),
    readMigration: (name) => readFileSync(join(migrationsDir, name), 'utf8'),
    run(args, env = {}, timeoutMs = 30_000, as = undefined) {
      const child = spawn(process.execPath, [BIN, ...args], { ...as, cwd: dir, env: { ...baseEnv(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      return new Promise((resolve, reject) => {
        child.once('error', reject);
        child.once('close', (code) => {
          clearTimeout(timer);
          resolve({ code, stdout, stderr, output: stdout + stderr });
        });
      });
    },
    start: (options = {}) => startServer(database, { ...options, cwd: dir }),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Runs a command and fails the test with its output when it does not exit 0. */
export async function runOk(project: Project, args: readonly string[], env?: Record<string, string>): Promise<CommandResult> {
  const result = await project.run(args, env);
  if (result.code !== 0) throw new Error(`restwire ${args.join(' ')} exited ${result.code}:\n${result.output}`);
  return result;
}
