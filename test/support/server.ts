import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/**
 * Black-box harness: starts the real `restwire` CLI on a real port, on SQLite in a fresh
 * DATA_DIR or on a fresh PostgreSQL database created (and dropped) for the test.
 */
export type Backend = 'sqlite' | 'postgres';

const BIN = new URL('../../bin/restwire.js', import.meta.url).pathname;

/** SQLite always; PostgreSQL too when TEST_DATABASE_URL is set (as .ci/run does). */
export const BACKENDS: Backend[] = process.env.TEST_DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite'];

export const ADMIN = { username: 'admin', password: 'admin-password-1' };

/** An isolated database: a temp folder, or a new PostgreSQL database. */
export interface TestDatabase {
  readonly backend: Backend;
  readonly env: Record<string, string>;
  readonly url: string | null;
  drop(): Promise<void>;
}

export async function createTestDatabase(backend: Backend): Promise<TestDatabase> {
  const dataDir = mkdtempSync(join(tmpdir(), 'restwire-test-'));
  if (backend === 'sqlite') {
    return {
      backend,
      env: { DATA_DIR: dataDir },
      url: null,
      drop: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const adminUrl = process.env.TEST_DATABASE_URL!;
  const name = `restwire_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    backend,
    env: { DATA_DIR: dataDir, DATABASE_URL: url.toString() },
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface RunningServer {
  readonly url: string;
  readonly port: number;
  readonly process: ChildProcess;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** Sends a signal and waits for exit; returns the exit code (or the signal name). */
  stop(signal?: NodeJS.Signals): Promise<number | string | null>;
}

export interface StartOptions {
  readonly env?: Record<string, string>;
  readonly args?: readonly string[];
  /** What the process prints once ready (default: Fastify's "Server listening at …"). */
  readonly ready?: RegExp;
  /** The working directory (a user's project folder); default: this process's. */
  readonly cwd?: string;
  /** Runs this program and arguments instead of `node bin/restwire.js` + `args` (e.g. under `script`). */
  readonly command?: readonly [string, readonly string[]];
}

/** Spawns `restwire serve` (or `args`) on a free port and waits until it listens. */
export async function startServer(database: TestDatabase, options: StartOptions = {}): Promise<RunningServer> {
  const [program, args] = options.command ?? [process.execPath, [BIN, ...(options.args ?? ['serve'])]];
  const child = spawn(program, args, {
    env: {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: '0',
      ADMIN_USERNAME: ADMIN.username,
      ADMIN_PASSWORD: ADMIN.password,
      RATE_LIMIT_ANON: '100000/hour',
      RATE_LIMIT_USER: '100000/hour',
      LOG_LEVEL: 'info',
      ...database.env,
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(options.cwd ? { cwd: options.cwd } : {}),
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  let stopping = false;
  const exited = new Promise<number | string | null>((resolve) =>
    child.once('exit', (code, signal) => {
      // A server that dies under a test shows up there as ECONNREFUSED: say why, with its last words.
      if (!stopping) process.stderr.write(`[server ${child.pid}] exited (${code ?? signal}) without stop(); its last output:\n${output.slice(-4000)}\n`);
      resolve(code ?? signal);
    }),
  );

  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start within 20 s:\n${output}`)), 20_000);
    const onData = () => {
      const match = (options.ready ?? /Server listening at (http:\/\/127\.0\.0\.1:\d+)/).exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1] ?? 'http://127.0.0.1:0');
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code}) before listening:\n${output}`));
    });
  });

  return {
    url,
    port: Number(new URL(url).port),
    process: child,
    output: () => output,
    async stop(signal = 'SIGTERM') {
      stopping = true;
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** `Authorization: Basic …` for a user and password. */
export function basic(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
}

export const adminAuth = basic(ADMIN.username, ADMIN.password);

/** Creates a user with the CLI, as an operator would. */
export async function createUser(database: TestDatabase, username: string, password: string): Promise<void> {
  const child = spawn(process.execPath, [BIN, 'createuser', username, '--password-stdin'], {
    env: { PATH: process.env.PATH ?? '', ...database.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  child.stdin.end(`${password}\n`);
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`createuser failed (${code}): ${output}`);
}
