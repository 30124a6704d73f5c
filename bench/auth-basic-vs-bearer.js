// Issue #3: "Basic that stays fast". Starts restwire on SQLite (a fresh DATA_DIR, 127.0.0.1,
// rate limits lifted), then loads POST /api/v1/experiences/ with the same JSON body for
// `--seconds` (default 5) with Basic credentials and as long with a Bearer token (in halves,
// interleaved), and prints both rates and their ratio. Target: Basic ≥ 80 % of Bearer (the credential cache spares Basic the
// scrypt check on all but its first request).
//
//   npm run build && node bench/auth-basic-vs-bearer.js [--seconds 5] [--connections 10]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';

const { values: args } = parseArgs({
  options: { seconds: { type: 'string', default: '5' }, connections: { type: 'string', default: '10' } },
});
const SECONDS = Math.min(60, Math.max(1, Number(args.seconds)));
const CONNECTIONS = Math.min(100, Math.max(1, Number(args.connections)));
const ADMIN = { username: 'bench-admin', password: 'bench-password-1' };
const BIN = new URL('../bin/restwire.js', import.meta.url).pathname;

async function freePort() {
  const probe = createServer();
  await new Promise((resolve, reject) => probe.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

async function startServer(dataDir) {
  const port = await freePort();
  const child = spawn(process.execPath, [BIN, 'serve'], {
    env: {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: String(port),
      DATA_DIR: dataDir,
      ADMIN_USERNAME: ADMIN.username,
      ADMIN_PASSWORD: ADMIN.password,
      RATE_LIMIT_ANON: '1000000000/hour',
      RATE_LIMIT_USER: '1000000000/hour',
      ACCESS_TOKEN_SECONDS: '86400',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const url = `http://127.0.0.1:${port}`;
  for (let tries = 0; tries < 300; tries++) {
    if (child.exitCode !== null) throw new Error(`restwire exited before listening:\n${output}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) return { child, url };
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  child.kill('SIGTERM');
  throw new Error(`restwire did not start within 30 s:\n${output}`);
}

function load(url, authorization, seconds) {
  return autocannon({
    url: `${url}/api/v1/experiences/`,
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ title: 'Benchmark', q_like_dislike: 'like' }),
    connections: CONNECTIONS,
    duration: seconds,
  });
}

/** Folds the runs of one scheme into one row: total requests over total time, worst latencies. */
const summary = (results) => ({
  requestsPerSecond: Math.round(results.reduce((n, r) => n + r.requests.total, 0) / results.reduce((s, r) => s + r.duration, 0)),
  p50Ms: Math.max(...results.map((r) => r.latency.p50)),
  p99Ms: Math.max(...results.map((r) => r.latency.p99)),
  non2xx: results.reduce((n, r) => n + r.non2xx, 0),
  errors: results.reduce((n, r) => n + r.errors, 0),
});

const dataDir = mkdtempSync(join(tmpdir(), 'restwire-bench-auth-'));
let server;
const cleanUp = () => {
  if (server && server.child.exitCode === null) server.child.kill('SIGTERM');
  rmSync(dataDir, { recursive: true, force: true });
};
process.once('SIGINT', () => {
  cleanUp();
  process.exit(130);
});

try {
  server = await startServer(dataDir);
  const basic = `Basic ${Buffer.from(`${ADMIN.username}:${ADMIN.password}`).toString('base64')}`;
  const response = await fetch(`${server.url}/api/v1/auth/token/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(ADMIN),
  });
  if (response.status !== 200) throw new Error(`token endpoint answered ${response.status}: ${await response.text()}`);
  const bearer = `Bearer ${(await response.json()).access_token}`;

  // Warm-up (discarded): the JIT, SQLite's page cache and the credential cache settle.
  await load(server.url, basic, 1);
  await load(server.url, bearer, 1);
  // Basic, Bearer, Bearer, Basic, half the time each: the table grows and the machine's other
  // load drifts during the run, and this order shares both out evenly.
  const half = SECONDS / 2;
  const runs = { basic: [], bearer: [] };
  for (const scheme of ['basic', 'bearer', 'bearer', 'basic']) {
    runs[scheme].push(await load(server.url, scheme === 'basic' ? basic : bearer, half));
  }
  const basicResult = summary(runs.basic);
  const bearerResult = summary(runs.bearer);
  const ratio = basicResult.requestsPerSecond / bearerResult.requestsPerSecond;

  console.log(`POST /api/v1/experiences/ on SQLite, ${CONNECTIONS} connections, ${SECONDS} s each`);
  console.table({ basic: basicResult, bearer: bearerResult });
  console.log(`Basic/Bearer: ${(ratio * 100).toFixed(1)} % (target ≥ 80 %) ${ratio >= 0.8 ? 'OK' : 'BELOW TARGET'}`);
  if (basicResult.non2xx || bearerResult.non2xx || basicResult.errors || bearerResult.errors) {
    console.log('warning: some requests failed; the rates above are not comparable');
    process.exitCode = 1;
  }
} finally {
  cleanUp();
}
