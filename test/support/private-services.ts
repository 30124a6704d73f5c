import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A PostgreSQL cluster and a Redis server of the test's own, on their own ports and data
 * directories, for drills that stop, hang or restart them (issue 11). The shared servers that
 * other tests and other people use are never touched.
 */

/** Whether a program is on PATH. */
export function hasProgram(name: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** The kernel's range of ephemeral ports (the local ports of outgoing connections). */
function ephemeralPorts(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (low && high) return [low, high];
  } catch {
    // Not Linux: IANA's range.
  }
  return [49_152, 65_535];
}

async function canListen(port: number): Promise<boolean> {
  const server = createServer();
  const listening = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => resolve(true));
  });
  if (listening) await new Promise((resolve) => server.close(resolve));
  return listening;
}

/**
 * A port nobody listens on at the moment, for a server started later on it (and perhaps
 * restarted on it after an outage). Below the ephemeral range: a port the system hands out
 * (listen(0)) is also the local port of any outgoing connection on the machine, or of a client's
 * reconnect attempt to the stopped server itself (a TCP self-connect), and then the later bind
 * fails with EADDRINUSE.
 */
export async function freePort(): Promise<number> {
  const [low] = ephemeralPorts();
  const from = 10_000;
  const to = Math.max(from + 1_000, low) - 1;
  for (let tries = 0; tries < 50; tries++) {
    const port = from + Math.floor(Math.random() * (to - from + 1));
    if (await canListen(port)) return port;
  }
  throw new Error(`no free port between ${from} and ${to}`);
}

export interface PrivatePostgres {
  readonly url: string;
  stop(): void;
  start(): void;
  remove(): void;
}

/** initdb refuses to run as root; then the cluster belongs to the `postgres` user. */
function asClusterOwner(command: string, args: string[]): void {
  const root = process.getuid?.() === 0;
  const [file, argv] = root ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
  execFileSync(file, argv, { stdio: 'ignore', timeout: 60_000 });
}

/** Creates and starts a throw-away cluster: trust authentication, 127.0.0.1 only. */
export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'restwire-pg-'));
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString());
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
  const port = await freePort();
  asClusterOwner('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  const start = () => asClusterOwner('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'log'), '-w', 'start']);
  start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop: () => asClusterOwner('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']),
    start,
    remove() {
      try {
        asClusterOwner('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        // Already stopped.
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface PrivateRedis {
  readonly url: string;
  /** The running redis-server (a new one after `restart`). */
  readonly process: ChildProcess;
  /** SIGSTOP: the server keeps its connections but answers nothing, as a hung one does. */
  hang(): void;
  /** SIGCONT. */
  resume(): void;
  /** SIGKILL: connections refused from then on; the data (none is persisted) is gone. */
  kill(): Promise<void>;
  /** Starts a fresh redis-server on the same port, after `kill`. */
  restart(): Promise<void>;
  remove(): Promise<void>;
}

/** Spawns redis-server with no persistence and waits until it accepts connections. */
async function launchRedis(port: number, dir: string): Promise<{ child: ChildProcess; exited: Promise<unknown> }> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${output}`)), 10_000);
    child.stdout!.on('data', () => {
      if (/Ready to accept connections/.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => reject(new Error(`redis-server exited (${code}):\n${output}`)));
  });
  return { child, exited: new Promise((resolve) => child.once('exit', resolve)) };
}

/** Starts a redis-server with no persistence in a directory of its own. */
export async function startPrivateRedis(): Promise<PrivateRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'restwire-redis-'));
  const port = await freePort();
  let current = await launchRedis(port, dir);
  const kill = async () => {
    const { child, exited } = current;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
      await exited;
    }
  };
  return {
    url: `redis://127.0.0.1:${port}`,
    get process() {
      return current.child;
    },
    hang: () => current.child.kill('SIGSTOP'),
    resume: () => current.child.kill('SIGCONT'),
    kill,
    async restart() {
      current = await launchRedis(port, dir);
    },
    async remove() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
