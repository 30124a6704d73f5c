// Starting the real restwire CLI for a benchmark, and the few API calls the benchmark makes
// outside the timed load (token, seed records, webhooks), as a client would.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../bin/restwire.js', import.meta.url));

/**
 * How the CLI's shebang starts Node (`#!/usr/bin/env -S [NAME=value …] node [flags …]`): the
 * environment and V8 flags `restwire` runs with when started as a command (issue 21: the young
 * generation's size). The benchmark starts `node bin/restwire.js` with the same, so that it
 * measures what a deployment runs.
 */
export const CLI_LAUNCH = (() => {
  const words = readFileSync(BIN, 'utf8').split('\n', 1)[0].replace(/^#!\S*env\s+(-S\s+)?/, '').split(/\s+/).filter(Boolean);
  const node = words.indexOf('node');
  const env = Object.fromEntries(words.slice(0, Math.max(0, node)).map((word) => word.split('=', 2)));
  return { env, nodeArgs: node === -1 ? [] : words.slice(node + 1) };
})();

export const ADMIN = { username: 'bench-admin', password: 'bench-password-1' };

/** Basic credentials for the bench user. */
export const basicAuth = `Basic ${Buffer.from(`${ADMIN.username}:${ADMIN.password}`).toString('base64')}`;

/** Where a store lives: a fresh SQLite folder, or a fresh PostgreSQL database (and Redis). */
export async function freshStore(processes, { databaseUrl, redisUrl }) {
  return {
    backend: databaseUrl ? 'postgres' : 'sqlite',
    dataDir: processes.tempDir('restwire-bench-'),
    databaseUrl: databaseUrl ? await processes.database(databaseUrl) : null,
    redisUrl: redisUrl ?? null,
  };
}

/** The environment every restwire process of one benchmark shares. */
export function restwireEnv(store, extra = {}) {
  return {
    PATH: process.env.PATH ?? '',
    DATA_DIR: store.dataDir,
    ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    ...(store.redisUrl ? { REDIS_URL: store.redisUrl } : {}),
    ADMIN_USERNAME: ADMIN.username,
    ADMIN_PASSWORD: ADMIN.password,
    // Rate limits lifted (issue #6): the benchmark measures the work, not the 429s.
    RATE_LIMIT_ANON: '1000000000/hour',
    RATE_LIMIT_USER: '1000000000/hour',
    LOG_LEVEL: 'warn',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    ACCESS_TOKEN_SECONDS: '86400',
    ...extra,
  };
}

/** `restwire serve` on a free port of 127.0.0.1; resolves once /healthz answers. */
export function startServe(processes, env, name = 'restwire serve', args = ['serve'], nodeArgs = []) {
  return processes.startServer(name, BIN, args, { ...CLI_LAUNCH.env, ...env }, { readyPath: '/healthz', nodeArgs: [...CLI_LAUNCH.nodeArgs, ...nodeArgs] });
}

/**
 * `restwire worker`; resolves with its handle once it has stayed up for a second, or with
 * { skipped } when the CLI has no such command yet.
 */
export async function startWorker(processes, env, name = 'restwire worker') {
  const handle = processes.start(name, BIN, ['worker'], { ...CLI_LAUNCH.env, ...env }, { nodeArgs: CLI_LAUNCH.nodeArgs });
  const outcome = await Promise.race([
    handle.exited.then((code) => ({ code })),
    new Promise((resolve) => setTimeout(() => resolve(null), 1000)),
  ]);
  if (outcome === null) return handle;
  if (/unknown command/i.test(handle.output())) return { skipped: 'no `restwire worker` command' };
  throw new Error(`${name} exited (${outcome.code}):\n${handle.output()}`);
}

/** One JSON request; resolves with { status, body } (body parsed when JSON). */
export async function call(server, method, path, { authorization, json } = {}) {
  const headers = { accept: 'application/json' };
  if (authorization) headers.authorization = authorization;
  if (json !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers,
    body: json === undefined ? undefined : JSON.stringify(json),
  });
  const text = await response.text();
  let body = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON; keep the text for the error message
  }
  return { status: response.status, body };
}

/** An error naming the request and what came back. */
function unexpected(what, { status, body }) {
  return new Error(`${what} answered ${status}: ${typeof body === 'string' ? body : JSON.stringify(body)}`.slice(0, 600));
}

/** `Bearer <token>` from POST /api/v1/auth/token/ (API.md §3), or { skipped } when it is missing. */
export async function bearerAuth(server) {
  const answer = await call(server, 'POST', '/api/v1/auth/token/', { json: ADMIN });
  if (answer.status === 404 || answer.status === 405) return { skipped: 'no token endpoint' };
  if (answer.status !== 200 || typeof answer.body?.access_token !== 'string') throw unexpected('POST /api/v1/auth/token/', answer);
  return { authorization: `Bearer ${answer.body.access_token}` };
}

/** The body every benchmark create sends. */
export const EXPERIENCE = { title: 'Benchmark experience', q_like_dislike: 'Liked how quickly it answered.\nWould measure again.' };

/** POST one experience; resolves with its id. */
export async function createExperience(server, authorization, body = EXPERIENCE) {
  const answer = await call(server, 'POST', '/api/v1/experiences/', { authorization, json: body });
  if (answer.status !== 201) throw unexpected('POST /api/v1/experiences/', answer);
  return answer.body.id;
}

/** Creates `count` experiences, `concurrency` at a time. */
export async function seedExperiences(server, authorization, count, concurrency = 8) {
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const n = ++next;
      await createExperience(server, authorization, { title: `Seed experience ${n}`, q_like_dislike: `Seeded record ${n}.` });
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
}

/** POST /api/v1/webhooks/ for every event (API.md §4); resolves with { id } or { skipped }. */
export async function createWebhook(server, authorization, targetUrl, { ordering } = {}) {
  const json = { target_url: targetUrl, events: ['*'], ...(ordering ? { ordering } : {}) };
  const answer = await call(server, 'POST', '/api/v1/webhooks/', { authorization, json });
  if (answer.status === 404 || answer.status === 405) return { skipped: 'no webhooks endpoint' };
  if (answer.status !== 201) throw unexpected('POST /api/v1/webhooks/', answer);
  return { id: answer.body.id };
}
