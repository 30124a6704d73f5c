import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { hasProgram, startPrivatePostgres, type PrivatePostgres } from '../test/support/private-services.js';
import { adminAuth, type RunningServer, type TestDatabase } from '../test/support/server.js';

/**
 * What every drill shares: programs it must have (a missing one fails the drill, never skips
 * it), a private PostgreSQL as a TestDatabase, memory and latency figures, and the one line of
 * figures each drill prints for docs/RELIABILITY.md.
 */

/** Throws, naming the programs, unless all are on PATH: a drill that cannot run must fail. */
export function requirePrograms(...names: string[]): void {
  const missing = names.filter((name) => !hasProgram(name));
  if (missing.length) throw new Error(`this drill needs ${missing.join(', ')} on PATH (install them; drills never skip)`);
}

/** A throw-away PostgreSQL cluster (initdb + pg_ctl on its own port) seen as a TestDatabase. */
export async function privatePostgresDatabase(dataDir: string): Promise<{ database: TestDatabase; postgres: PrivatePostgres }> {
  requirePrograms('initdb', 'pg_ctl');
  const postgres = await startPrivatePostgres();
  return {
    postgres,
    database: {
      backend: 'postgres',
      env: { DATA_DIR: dataDir, DATABASE_URL: postgres.url },
      url: postgres.url,
      drop: async () => postgres.remove(),
    },
  };
}

/** A process's resident memory in MiB, from /proc (Linux). */
export function rssMiB(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Math.round(Number(match[1]) / 102.4) / 10 : Number.NaN;
}

/** Samples a process's RSS every `everyMs` until stopped; reports the first and the largest. */
export function sampleRss(pid: number, everyMs = 200): { stop(): { startMiB: number; maxMiB: number; samples: number } } {
  const startMiB = rssMiB(pid);
  let maxMiB = startMiB;
  let samples = 1;
  const timer = setInterval(() => {
    try {
      maxMiB = Math.max(maxMiB, rssMiB(pid));
      samples++;
    } catch {
      // The process exited.
    }
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      return { startMiB, maxMiB, samples };
    },
  };
}

/** The processes `pid` started that are still running (serve's dispatcher process, say). */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** The value below which `share` of the samples fall (nearest rank). */
export function percentile(samples: readonly number[], share: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(share * sorted.length) - 1))]!;
}

/** Prints a drill's figures on one line, prefixed so they are easy to find in CI output. */
export function report(drill: string, figures: Record<string, unknown>): void {
  const text = Object.entries(figures)
    .map(([name, value]) => `${name}=${typeof value === 'object' ? JSON.stringify(value) : String(value)}`)
    .join(' ');
  console.log(`[drill ${drill}] ${text}`);
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` every 100 ms until it holds; throws `message` after `timeoutMs`. */
export async function until(check: () => boolean | Promise<boolean>, timeoutMs: number, message: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${message} (not within ${timeoutMs} ms)`);
    await sleep(100);
  }
}

/** JSON request options with credentials. */
export function jsonRequest(method: string, body: unknown, auth = adminAuth): RequestInit {
  return { method, headers: { authorization: auth, 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

/** Every record of a collection, following `next` links (limit 100). */
export async function listAll<T>(server: RunningServer, path: string, auth = adminAuth): Promise<T[]> {
  const all: T[] = [];
  let next: string | null = `${path}${path.includes('?') ? '&' : '?'}limit=100`;
  while (next) {
    const response = await fetch(`${server.url}${next}`, { headers: { authorization: auth } });
    if (response.status !== 200) throw new Error(`GET ${next}: ${response.status} ${await response.text()}`);
    const page = (await response.json()) as { next: string | null; results: T[] };
    all.push(...page.results);
    next = page.next;
  }
  return all;
}

/** Creates a webhook for `events` at a 127.0.0.1 target (the drills' network rule), returns its id. */
export async function createWebhook(server: RunningServer, target: string, auth = adminAuth, events: string[] = ['*']): Promise<number> {
  const url = new URL(target);
  if (url.hostname !== '127.0.0.1' && url.hostname !== '[::1]') throw new Error(`drills register loopback targets only, not ${target}`);
  const response = await fetch(`${server.url}/api/v1/webhooks/`, jsonRequest('POST', { target_url: target, events }, auth));
  if (response.status !== 201) throw new Error(`webhook not created: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { id: number }).id;
}

/** A drill's teardown: kill its server, close its receiver, drop its database (each if made). */
export async function tearDown(parts: { server?: RunningServer; receiver?: Server; database?: TestDatabase }): Promise<void> {
  await parts.server?.stop('SIGKILL');
  parts.receiver?.closeAllConnections();
  parts.receiver?.close();
  await parts.database?.drop();
}

/**
 * Prints a server's log without its request lines (the dispatcher process logs there too): what
 * a drill shows when a wait times out, so the failure can be understood from CI's output.
 */
export function printServerLog(server: RunningServer | undefined, label: string, lines = 80): void {
  const log = (server?.output() ?? '')
    .split('\n')
    .filter((line) => !/"(incoming request|request completed)"/.test(line))
    .slice(-lines)
    .join('\n');
  process.stderr.write(`[${label}] server log without requests:\n${log}\n`);
}
