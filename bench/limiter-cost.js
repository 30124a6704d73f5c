// What the request rate limiter costs (issue #4): the memory store against the Redis store.
//
//   npm run build && REDIS_URL=redis://127.0.0.1:6379 node bench/limiter-cost.js [--duration 5] [--rounds 2]
//
// 1. Over HTTP: `restwire serve` (SQLite) with each store, autocannon GET /api/v1/experiences/1/
//    for --duration seconds after a warm-up, in ABBA order over --rounds so that a change in the
//    machine's load during the run does not favour one store. Limits are lifted (a huge limit), which is still the
//    memory path: with the memory store that run is "limits effectively off" too, since the
//    limiter cannot be switched off (API.md §1: the headers are on every response).
// 2. In process: RequestThrottle.hit() alone, one at a time and 50 in flight, so the limiter's
//    own cost shows without HTTP, SQLite and autocannon sharing the two cores.
//
// Keys go under a fresh REDIS_KEY_PREFIX and are deleted at the end; every child process and
// temp folder is removed on the way out (bench/processes.js).
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { measure } from './load.js';
import { Processes } from './processes.js';
import { basicAuth, createExperience, freshStore, restwireEnv, startServe } from './restwire.js';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '1' },
    connections: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '2' },
    hits: { type: 'string', default: '20000' },
  },
});
const load = { duration: Number(values.duration), warmup: Number(values.warmup), connections: Number(values.connections) };
const HITS = Number(values.hits);
const ROUNDS = Number(values.rounds);
const REDIS_URL = process.env.REDIS_URL ?? process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `restwire-bench-${randomBytes(6).toString('hex')}`;

const { loadConfig, parseRate } = await import('../dist/config.js');
const { openRedisStore } = await import('../dist/http/throttling/redis-store.js');
const { RequestThrottle, memoryLimiter } = await import('../dist/http/throttling/request-throttle.js');

/** Over HTTP: one server per store, one record, autocannon on it. */
async function httpRow(processes, store) {
  const where = await freshStore(processes, { redisUrl: store === 'redis' ? REDIS_URL : null });
  const server = await startServe(processes, restwireEnv(where, { REDIS_KEY_PREFIX: PREFIX }), `restwire serve (${store})`);
  try {
    const id = await createExperience(server, basicAuth);
    const row = await measure(server, { path: `/api/v1/experiences/${id}/` }, load);
    if (row.non2xx > 0 || row.errors > 0) throw new Error(`${store}: ${row.non2xx} non-2xx, ${row.errors} errors`);
    return { store, ...row };
  } finally {
    await server.stop();
  }
}

/** In process: microseconds per hit, sequential and with `inFlight` concurrent callers. */
async function directRow(store, factory) {
  const rates = { anon: parseRate('RATE_LIMIT_ANON', '1000000000/hour'), user: parseRate('RATE_LIMIT_USER', '1000000000/hour') };
  const throttle = new RequestThrottle(rates, factory);
  for (let i = 0; i < 2000; i++) await throttle.hit({ ip: '127.0.0.1' }); // warm-up
  let started = process.hrtime.bigint();
  for (let i = 0; i < HITS; i++) await throttle.hit({ ip: '127.0.0.1' });
  const sequentialUs = Number(process.hrtime.bigint() - started) / 1000 / HITS;
  const inFlight = 50;
  let next = 0;
  started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next++ < HITS) await throttle.hit({ ip: '127.0.0.1' });
    }),
  );
  const concurrentUs = Number(process.hrtime.bigint() - started) / 1000 / HITS;
  return { store, sequentialUs, hitsPerSecond: Math.round(1e6 / concurrentUs) };
}

const processes = new Processes();
const onSignal = () => void processes.cleanUp().then(() => process.exit(130));
process.once('SIGINT', onSignal);
process.once('SIGTERM', onSignal);
const silent = { warn() {}, info() {} };
const counters = { outages: { inc() {} }, errors: { inc() { throw new Error('the Redis store fell back to memory during the benchmark'); } } };
let redisStore;
try {
  const http = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (const store of round % 2 === 0 ? ['memory', 'redis'] : ['redis', 'memory']) http.push(await httpRow(processes, store));
  }
  const mean = (store, field) => {
    const rows = http.filter((row) => row.store === store);
    return rows.reduce((sum, row) => sum + row[field], 0) / rows.length;
  };

  redisStore = await openRedisStore(loadConfig({ REDIS_URL, REDIS_KEY_PREFIX: PREFIX }), { log: silent, counters });
  const direct = [await directRow('memory', memoryLimiter), await directRow('redis', redisStore.limiters)];

  process.stdout.write(`\nGET /api/v1/experiences/{id}/, ${load.connections} connections, ${load.duration} s each (after ${load.warmup} s warm-up), SQLite\n\n`);
  process.stdout.write('| store | requests/s | p50 ms | p99 ms |\n|---|---:|---:|---:|\n');
  for (const row of http) process.stdout.write(`| ${row.store} | ${row.requestsPerSecond} | ${row.p50Ms} | ${row.p99Ms} |\n`);
  for (const store of ['memory', 'redis']) {
    process.stdout.write(`| ${store}, mean | ${Math.round(mean(store, 'requestsPerSecond'))} | ${mean(store, 'p50Ms').toFixed(1)} | ${mean(store, 'p99Ms').toFixed(1)} |\n`);
  }
  process.stdout.write(`\nredis / memory throughput: ${(mean('redis', 'requestsPerSecond') / mean('memory', 'requestsPerSecond')).toFixed(2)}\n`);
  process.stdout.write(`\nRequestThrottle.hit() in process, ${HITS} hits\n\n| store | µs per hit (one at a time) | hits/s (50 in flight) |\n|---|---:|---:|\n`);
  for (const row of direct) process.stdout.write(`| ${row.store} | ${row.sequentialUs.toFixed(1)} | ${row.hitsPerSecond} |\n`);
} finally {
  await redisStore?.close();
  const redis = new Redis(REDIS_URL);
  const keys = await redis.keys(`${PREFIX}:*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
  await processes.cleanUp();
}
