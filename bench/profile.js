// Where a request's time goes: restwire alone, one request shape at a time, with the server's
// own CPU time per request (user and kernel, from /proc) and, with --prof, a V8 CPU profile
// summarised by function. Not a comparison with the baseline: that is `npm run bench`.
// --floor loads bench/floor.js (bare Fastify doing the same database work) instead, so the
// two profiles can be set side by side (issue #13).
//
//   node bench/profile.js --scenario get --scenario post [--duration 8] [--prof] [--top 30] [--floor]
//
// Scenarios: root (GET /api/v1/, the pipeline without a database read), get (one experience),
// page (a page of 100), post (create with Bearer), basic (create with Basic), postkey (create
// with a new Idempotency-Key each), batch (POST /api/v1/batch/ of 100 creates: CPU per batch),
// webhook (create with Bearer while one webhook for every event sends to a loopback receiver; with
// --prof serve's dispatcher process writes a profile of its own). Server CPU is serve's; its
// dispatcher process's follows it.
// BENCH_DATABASE_URL / BENCH_REDIS_URL as for `npm run bench`. Needs Linux for the CPU figures.
import { copyFileSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { GET_ONE, GET_PAGE, post } from './http-scenarios.js';
import { cpuSeconds, processTree } from './memory.js';
import { Processes } from './processes.js';
import { Receivers } from './receivers.js';
import { EXPERIENCE, createWebhook, basicAuth, bearerAuth, freshStore, restwireEnv, seedExperiences, startServe } from './restwire.js';

const FLOOR = fileURLToPath(new URL('./floor.js', import.meta.url));

const SCENARIOS = {
  root: () => ({ path: '/api/v1/' }),
  get: () => GET_ONE,
  page: () => GET_PAGE,
  post: (bearer) => post(bearer),
  basic: () => post(basicAuth),
  // Issue #20: a create with a new Idempotency-Key each, and a batch of 100 creates.
  postkey: (bearer) => {
    let sent = 0;
    const request = post(bearer);
    const setupRequest = (r) => ({ ...r, headers: { ...r.headers, 'idempotency-key': `profile-${process.pid}-${Date.now()}-${++sent}` } });
    return { ...request, requests: [{ method: request.method, setupRequest }] };
  },
  webhook: (bearer) => post(bearer),
  batch: (bearer) => ({ ...post(bearer), path: '/api/v1/batch/', body: JSON.stringify({ requests: Array.from({ length: 100 }, () => ({ method: 'POST', path: '/api/v1/experiences/', body: EXPERIENCE })) }) }),
};

/** The heaviest functions of a .cpuprofile, by self time and by time including callees. */
function summarise(file, top) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const label = ({ callFrame: f }) =>
    `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(dist|src)\//, '$1/')}:${f.lineNumber + 1}`;
  const sampled = new Map();
  let total = 0;
  profile.samples.forEach((id, index) => {
    const delta = profile.timeDeltas[index] ?? 0;
    sampled.set(id, (sampled.get(id) ?? 0) + delta);
    total += delta;
  });
  const self = new Map();
  const inclusive = new Map();
  for (const [id, time] of sampled) {
    const own = label(nodes.get(id));
    self.set(own, (self.get(own) ?? 0) + time);
    const seen = new Set();
    for (let at = id; at !== undefined; at = parent.get(at)) {
      const name = label(nodes.get(at));
      if (!seen.has(name)) inclusive.set(name, (inclusive.get(name) ?? 0) + time);
      seen.add(name);
    }
  }
  const print = (title, times) => {
    console.log(`\n${title}`);
    for (const [name, time] of [...times].sort((a, b) => b[1] - a[1]).slice(0, top)) {
      console.log(`${((100 * time) / total).toFixed(1).padStart(6)} %  ${name}`);
    }
  };
  print('self time', self);
  print('including callees', inclusive);
}

async function main() {
  const { values } = parseArgs({
    options: {
      scenario: { type: 'string', multiple: true, default: ['get'] },
      duration: { type: 'string', default: '8' },
      connections: { type: 'string', default: '50' },
      prof: { type: 'boolean', default: false },
      top: { type: 'string', default: '30' },
      floor: { type: 'boolean', default: false },
    },
  });
  for (const name of values.scenario) if (!SCENARIOS[name]) throw new Error(`unknown scenario ${name}; one of ${Object.keys(SCENARIOS).join(', ')}`);
  const processes = new Processes();
  process.once('exit', () => processes.cleanUpNow());
  try {
    const store = await freshStore(processes, { databaseUrl: process.env.BENCH_DATABASE_URL, redisUrl: process.env.BENCH_REDIS_URL });
    const profileDir = processes.tempDir('restwire-profile-');
    const nodeArgs = values.prof ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
    let server;
    let bearer = { skipped: 'floor' };
    if (values.floor) {
      const env = { PATH: process.env.PATH ?? '', FLOOR_SEED: '150' };
      if (store.databaseUrl) env.FLOOR_DATABASE_URL = store.databaseUrl;
      else env.FLOOR_SQLITE_FILE = join(store.dataDir, 'floor.sqlite3');
      server = await processes.startServer('floor', FLOOR, [], env, { readyPath: GET_ONE.path, nodeArgs });
    } else {
      server = await startServe(processes, restwireEnv(store), 'restwire serve', ['serve'], nodeArgs);
      bearer = await bearerAuth(server);
      await seedExperiences(server, bearer.authorization ?? basicAuth, 150);
    }
    console.log(`${values.floor ? 'floor (bench/floor.js)' : 'restwire'} on ${store.backend}${store.redisUrl ? ' + Redis' : ''}, ${values.connections} connections, ${values.duration} s per scenario after 2 s warm-up`);
    for (const name of values.scenario) {
      if (name === 'webhook' && !values.floor) {
        const receivers = await Receivers.start(processes, 1);
        const hook = await createWebhook(server, bearer.authorization ?? basicAuth, receivers.url(0));
        if (hook.skipped) throw new Error(`webhook scenario: ${hook.skipped}`);
      }
      const { path, ...request } = SCENARIOS[name](values.floor ? null : bearer.authorization ?? basicAuth);
      const options = { url: `${server.url}${path}`, connections: Number(values.connections), ...request };
      await autocannon({ ...options, duration: 2 });
      // serve's dispatcher process, apart: it delivers what the requests queued.
      const children = processTree(server.pid).slice(1);
      const before = cpuSeconds([server.pid]);
      const childrenBefore = cpuSeconds(children);
      const result = await autocannon({ ...options, duration: Number(values.duration) });
      const after = cpuSeconds([server.pid]);
      const childrenAfter = cpuSeconds(children);
      const perRequest = (seconds) => ((seconds * 1e6) / result.requests.total).toFixed(1);
      const cpu = before && after
        ? `server CPU ${perRequest(after.user + after.system - before.user - before.system)} µs/request (kernel ${perRequest(after.system - before.system)})`
        : 'server CPU n/a';
      const childCpu = children.length && childrenBefore && childrenAfter
        ? `; its dispatcher process ${perRequest(childrenAfter.user + childrenAfter.system - childrenBefore.user - childrenBefore.system)} µs/request`
        : '';
      console.log(`${name.padEnd(5)} ${Math.round(result.requests.mean)} req/s, p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, non-2xx ${result.non2xx}; ${cpu}${childCpu}`);
    }
    await server.stop();
    if (values.prof) {
      // serve's dispatcher process inherits --cpu-prof and writes its own profile: the larger
      // file is serve's (it ran the requests), the others are summarised after it.
      const files = readdirSync(profileDir)
        .filter((name) => name.endsWith('.cpuprofile'))
        .map((name) => join(profileDir, name))
        .sort((a, b) => statSync(b).size - statSync(a).size);
      if (files.length === 0) throw new Error('the server wrote no profile');
      const outDir = new URL('./out/', import.meta.url).pathname;
      mkdirSync(outDir, { recursive: true });
      for (const [index, file] of files.entries()) {
        const base = values.floor ? 'floor' : index === 0 ? 'restwire' : `restwire-child-${index}`;
        const kept = join(outDir, `${base}.cpuprofile`);
        copyFileSync(file, kept);
        console.log(`\nprofile: ${kept} (open in Chrome DevTools › Performance, or speedscope)`);
        summarise(kept, Number(values.top));
      }
    }
  } finally {
    await processes.cleanUp();
  }
}

main().catch((error) => {
  console.error(`profile: ${error.stack ?? error}`);
  process.exitCode = 1;
});
