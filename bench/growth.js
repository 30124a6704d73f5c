// `npm run bench:growth` (issue #13, "Growth"): does restwire cost the same when it holds a lot?
//
//   (a) a page of 100 near the end of a 1,000,000-record keyset walk against the first page;
//   (b) GET one experience with 1,000,000 records against 100;
//   (c) webhook delivery throughput with 1,000 webhooks against 10.
//
// Records are seeded straight into the database after `restwire migrate` (SQLite: one
// transaction, one prepared INSERT of the columns restwire writes; PostgreSQL: one INSERT …
// SELECT over generate_series, then ANALYZE as autovacuum would), not through the API, which
// would take hours. The small and the large store are served side by side and loaded in
// alternating slices (bench/load.js), as bench/run.js does, so noise from other work on a
// shared machine falls on both. Traffic goes to 127.0.0.1 only. Not part of `npm run bench`
// (nor of CI): it prints its figures and writes bench/out/growth-<backend>.json.
//
// Every GET in (a) and (b) is made to miss restwire's representation cache (which would
// otherwise answer a repeated URL without reading the database): pages carry a `limit` that
// rotates through 33 values just under 100 on both sides of a comparison, GET one rotates
// through ids (all 100 of the small store; uniformly random ids of the large one). The
// cached figures (one URL hammered) are measured beside them.
import { execFileSync } from 'node:child_process';
import { hkdfSync, randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import pg from 'pg';
import { measureAlternating } from './load.js';
import { Processes } from './processes.js';
import { Receivers } from './receivers.js';
import { basicAuth, bearerAuth, call, createWebhook, freshStore, restwireEnv, startServe } from './restwire.js';
import { Deployment, commitBacklog, drainBacklog } from './webhook-throughput.js';

const BIN = fileURLToPath(new URL('../bin/restwire.js', import.meta.url));
const OUT_DIR = new URL('./out/', import.meta.url);
// Set, as a deployment would, so that the benchmark can name a late page's cursor (issuedCursor).
const SECRET_KEY = randomBytes(32).toString('hex');
const log = (message) => process.stderr.write(`growth: ${message}\n`);

function options() {
  const { values } = parseArgs({
    options: {
      records: { type: 'string', default: '1000000' },
      small: { type: 'string', default: '100' },
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      connections: { type: 'string', default: '50' },
      'page-connections': { type: 'string', default: '1' },
      hooks: { type: 'string', default: '1000' },
      'few-hooks': { type: 'string', default: '10' },
      events: { type: 'string', default: '10000' },
      rounds: { type: 'string', default: '3' },
      'no-webhooks': { type: 'boolean', default: false },
      'no-http': { type: 'boolean', default: false },
    },
  });
  const n = (name) => Number(values[name]);
  return {
    records: n('records'),
    small: n('small'),
    load: { duration: n('duration'), warmup: n('warmup'), connections: n('connections') },
    pageConnections: n('page-connections'),
    hooks: n('hooks'),
    fewHooks: n('few-hooks'),
    events: n('events'),
    rounds: n('rounds'),
    http: !values['no-http'],
    webhooks: !values['no-webhooks'],
    databaseUrl: process.env.BENCH_DATABASE_URL || null,
  };
}

/** `restwire migrate` on the store, waiting for it to finish. */
function migrate(env) {
  execFileSync(process.execPath, [BIN, 'migrate'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
}

/**
 * Inserts `count` experiences owned by `ownerId` straight into the database, oldest first,
 * one millisecond apart and ending now. Resolves with the seconds it took.
 */
async function seed(store, ownerId, count) {
  const started = performance.now();
  const end = Date.now();
  if (store.databaseUrl) {
    const client = new pg.Client({ connectionString: store.databaseUrl });
    await client.connect();
    try {
      await client.query(
        `insert into experiences (title, q_like_dislike, owner_id, created_at, updated_at)
         select 'Seed experience ' || n, 'Seeded record ' || n || '.', $1, $2::bigint + n, $2::bigint + n
         from generate_series(1, $3::int) as n`,
        [ownerId, end - count, count],
      );
      await client.query('analyze experiences');
    } finally {
      await client.end();
    }
  } else {
    const db = new Database(join(store.dataDir, 'restwire.sqlite3'));
    try {
      const insert = db.prepare('insert into experiences (title, q_like_dislike, owner_id, created_at, updated_at) values (?, ?, ?, ?, ?)');
      db.transaction(() => {
        for (let n = 1; n <= count; n++) {
          const at = end - count + n;
          insert.run(`Seed experience ${n}`, `Seeded record ${n}.`, ownerId, at, at);
        }
      })();
      db.pragma('wal_checkpoint(TRUNCATE)');
    } finally {
      db.close();
    }
  }
  return Math.round(performance.now() - started) / 1000;
}

/** `created_at` of one experience, read from the database. */
async function createdAtOf(store, id) {
  if (store.databaseUrl) {
    const client = new pg.Client({ connectionString: store.databaseUrl });
    await client.connect();
    try {
      return Number((await client.query('select created_at from experiences where id = $1', [id])).rows[0].created_at);
    } finally {
      await client.end();
    }
  }
  const db = new Database(join(store.dataDir, 'restwire.sqlite3'), { readonly: true });
  try {
    return db.prepare('select created_at from experiences where id = ?').get(id).created_at;
  } finally {
    db.close();
  }
}

/** A store with `count` experiences, served: { server, store, ids: [first, last], seedSeconds }. */
async function seededServer(processes, databaseUrl, count, name) {
  const store = await freshStore(processes, { databaseUrl });
  const env = restwireEnv(store, { SECRET_KEY });
  migrate(env);
  // serve once so that it creates the admin user (ADMIN_USERNAME), whose id owns the records
  let server = await startServe(processes, env, `${name} (admin)`);
  const me = await call(server, 'GET', '/api/v1/users/me/', { authorization: basicAuth });
  await server.stop();
  if (me.status !== 200) throw new Error(`GET /api/v1/users/me/ answered ${me.status}`);
  log(`${name}: seeding ${count.toLocaleString('en')} experiences …`);
  const seedSeconds = await seed(store, me.body.id, count);
  log(`${name}: seeded in ${seedSeconds} s`);
  server = await startServe(processes, env, name);
  const first = (await call(server, 'GET', '/api/v1/experiences/?ordering=id&limit=1')).body.results[0].id;
  const last = (await call(server, 'GET', '/api/v1/experiences/?ordering=-id&limit=1')).body.results[0].id;
  return { server, store, env, ids: [first, last], seedSeconds };
}

const pathOf = (url) => {
  const parsed = new URL(url, 'http://127.0.0.1');
  return `${parsed.pathname}${parsed.search}`;
};

/**
 * A `next` cursor as restwire issues it for a page ending at row (`value`, `id`) of `ordering`:
 * made with restwire's own CursorCodec (dist/http/pagination.js) and the key `serve` derives
 * from SECRET_KEY (src/auth/keys.ts). Walking 10,000 pages through `next` links to get there
 * took too long to be part of a benchmark (see the walk below for why); the server is checked
 * to accept the cursor and to answer the page it names.
 */
async function issuedCursor(secretKey, ordering, value, id) {
  const { CursorCodec } = await import('../dist/http/pagination.js');
  const codec = new CursorCodec(Buffer.from(hkdfSync('sha256', secretKey, 'restwire', 'cursor', 32)));
  return codec.encode({ ordering, value, id, reverse: false });
}

/** Follows `next` links from `path` for `pages` pages, one request at a time; mean ms per page. */
async function walk(server, path, pages) {
  const times = [];
  let lastPath = path;
  while (path && times.length < pages) {
    const started = performance.now();
    const answer = await call(server, 'GET', path);
    times.push(performance.now() - started);
    if (answer.status !== 200) throw new Error(`GET ${path} answered ${answer.status}: ${JSON.stringify(answer.body)}`);
    lastPath = path;
    path = answer.body.next ? pathOf(answer.body.next) : null;
  }
  const sorted = [...times].sort((a, b) => a - b);
  const round = (x) => Math.round(x * 100) / 100;
  return { pages: times.length, meanMs: round(times.reduce((a, b) => a + b, 0) / times.length), medianMs: round(sorted[Math.floor(sorted.length / 2)]), lastPath };
}

/** How the database plans and times the list queries at this size (SQLite: EXPLAIN QUERY PLAN; PostgreSQL: EXPLAIN ANALYZE). */
async function explain(store, lastId, createdAt, middleId, middleCreatedAt) {
  const queries = {
    'first page, ordering=id (restwire)': ['select * from experiences order by id asc limit 101', []],
    'late page, ordering=id (before 2026-11-23 04:50: key > v or (key = v and id > i))': ['select * from experiences where (id > $1 or (id = $2 and id > $3)) order by id asc limit 101', [lastId - 100, lastId - 100, lastId - 100]],
    'late page, ordering=id, as a range (id > v; restwire since 04:50)': ['select * from experiences where id > $1 order by id asc limit 101', [lastId - 100]],
    'late page, ordering=created_at (before 04:50: the OR form)': ['select * from experiences where (created_at > $1 or (created_at = $2 and id > $3)) order by created_at asc, id asc limit 101', [createdAt, createdAt, lastId - 100]],
    'late page, ordering=created_at, row values ((key, id) > (v, i); restwire since 04:50)': ['select * from experiences where (created_at, id) > ($1, $2) order by created_at asc, id asc limit 101', [createdAt, lastId - 100]],
    'middle page, ordering=id (before 04:50: the OR form)': ['select * from experiences where (id > $1 or (id = $2 and id > $3)) order by id asc limit 101', [middleId, middleId, middleId]],
    'middle page, ordering=created_at (before 04:50: the OR form)': ['select * from experiences where (created_at > $1 or (created_at = $2 and id > $3)) order by created_at asc, id asc limit 101', [middleCreatedAt, middleCreatedAt, middleId]],
    'middle page, ordering=created_at, row values': ['select * from experiences where (created_at, id) > ($1, $2) order by created_at asc, id asc limit 101', [middleCreatedAt, middleId]],
    'GET one (restwire)': ['select * from experiences where id = $1', [lastId - 100]],
  };
  const out = {};
  if (store.databaseUrl) {
    const client = new pg.Client({ connectionString: store.databaseUrl });
    await client.connect();
    try {
      for (const [name, [query, params]] of Object.entries(queries)) {
        const { rows } = await client.query(`explain (analyze, costs off) ${query}`, params);
        out[name] = rows.map((r) => r['QUERY PLAN']);
      }
    } finally {
      await client.end();
    }
  } else {
    const db = new Database(join(store.dataDir, 'restwire.sqlite3'), { readonly: true });
    try {
      for (const [name, [query, params]] of Object.entries(queries)) {
        const sqliteQuery = query.replace(/\$\d/g, '?');
        const plan = db.prepare(`explain query plan ${sqliteQuery}`).all(...params).map((r) => r.detail);
        const statement = db.prepare(sqliteQuery);
        statement.all(...params);
        const started = performance.now();
        for (let i = 0; i < 5; i++) statement.all(...params);
        out[name] = [...plan, `${Math.round(((performance.now() - started) / 5) * 1000) / 1000} ms (mean of 5, warm)`];
      }
    } finally {
      db.close();
    }
  }
  return out;
}

/** A page request whose `limit` rotates through 68…100 (33 values: more than the cache's 32 entries). */
function rotatingLimit(path) {
  let k = 0;
  const base = path.replace(/([?&])limit=100/, '$1limit=LIMIT');
  return {
    path: base.replace('LIMIT', '100'),
    setupRequest: (request) => ({ ...request, path: base.replace('LIMIT', String(100 - (k++ % 33))) }),
  };
}

/** GET one, over ids [first, last]: round robin when `random` is false, else uniformly random. */
function rotatingId([first, last], random) {
  let k = 0;
  const span = last - first + 1;
  return {
    path: `/api/v1/experiences/${first}/`,
    setupRequest: (request) => ({
      ...request,
      path: `/api/v1/experiences/${first + (random ? Math.floor(Math.random() * span) : k++ % span)}/`,
    }),
  };
}

const row = (label, result) => ({ label, ...result });

async function runHttp(processes, opts) {
  const small = await seededServer(processes, opts.databaseUrl, opts.small, `small (${opts.small})`);
  const large = await seededServer(processes, opts.databaseUrl, opts.records, `large (${opts.records})`);
  const lastId = large.ids[1];
  const createdAt = await createdAtOf(large.store, lastId - 100);
  const idCursor = await issuedCursor(SECRET_KEY, 'id', lastId - 100, lastId - 100);
  const createdCursor = await issuedCursor(SECRET_KEY, 'created_at', createdAt, lastId - 100);
  const lastPage = `/api/v1/experiences/?ordering=id&limit=100&cursor=${idCursor}`;
  const lastCreatedPage = `/api/v1/experiences/?ordering=created_at&limit=100&cursor=${createdCursor}`;
  // The middle of the walk too: a planner may pick another plan near either end (PostgreSQL does).
  const middleId = Math.round((large.ids[0] + lastId) / 2);
  const middleCreatedPage = `/api/v1/experiences/?ordering=created_at&limit=100&cursor=${await issuedCursor(SECRET_KEY, 'created_at', await createdAtOf(large.store, middleId), middleId)}`;
  const middlePage = `/api/v1/experiences/?ordering=id&limit=100&cursor=${await issuedCursor(SECRET_KEY, 'id', middleId, middleId)}`;
  for (const path of [lastPage, lastCreatedPage]) {
    const answer = await call(large.server, 'GET', path);
    if (answer.status !== 200 || answer.body.results[0]?.id !== lastId - 99 || answer.body.next !== null) {
      throw new Error(`the last page was not what the cursor names: ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`);
    }
  }
  log('EXPLAIN …');
  const plans = await explain(large.store, lastId, createdAt, middleId, await createdAtOf(large.store, middleId));
  for (const [name, plan] of Object.entries(plans)) log(`  ${name}: ${plan.join(' | ')}`);
  log('walks: the first 100 pages, and the last 100 (from a cursor 100 pages before the end) …');
  const lateStart = `/api/v1/experiences/?ordering=id&limit=100&cursor=${await issuedCursor(SECRET_KEY, 'id', lastId - 10_000, lastId - 10_000)}`;
  const walked = {
    first: await walk(large.server, '/api/v1/experiences/?ordering=id&limit=100', 100),
    last: await walk(large.server, lateStart, 100),
  };
  log(`  first 100 pages: mean ${walked.first.meanMs} ms; last 100: mean ${walked.last.meanMs} ms (ended at the last page: ${walked.last.lastPath === lastPage})`);
  const firstPage = '/api/v1/experiences/?ordering=id&limit=100';
  const pairs = [
    ['page: large, first (ordering=id)', large.server, rotatingLimit(firstPage)],
    ['page: large, last (ordering=id)', large.server, rotatingLimit(lastPage)],
    ['page: large, last (ordering=created_at)', large.server, rotatingLimit(lastCreatedPage)],
    ['page: large, middle (ordering=id)', large.server, rotatingLimit(middlePage)],
    ['page: large, middle (ordering=created_at)', large.server, rotatingLimit(middleCreatedPage)],
    ['page: large, default ordering (-id) first page', large.server, rotatingLimit('/api/v1/experiences/?limit=100')],
    ['page: small, first', small.server, rotatingLimit(firstPage)],
    ['GET one: small, 100 ids round robin', small.server, rotatingId(small.ids, false)],
    ['GET one: large, random ids', large.server, rotatingId(large.ids, true)],
    ['GET one cached: small, one id', small.server, { path: `/api/v1/experiences/${small.ids[1]}/` }],
    ['GET one cached: large, one id', large.server, { path: `/api/v1/experiences/${large.ids[1]}/` }],
  ];
  // Pages at one connection: a page that costs a scan of the table would otherwise queue 50
  // requests deep in the server and spill into the next slice (of another scenario).
  const pageLoad = { ...opts.load, connections: opts.pageConnections };
  const pagePairs = pairs.filter(([label]) => label.startsWith('page'));
  const onePairs = pairs.filter(([label]) => !label.startsWith('page'));
  log(`loading ${pagePairs.length} page scenarios (${pageLoad.connections} connection(s)) in alternating slices …`);
  const pageResults = await measureAlternating(pagePairs.map(([, server, request]) => ({ server, request })), pageLoad);
  log(`loading ${onePairs.length} GET one scenarios (${opts.load.connections} connections) in alternating slices …`);
  const oneResults = await measureAlternating(onePairs.map(([, server, request]) => ({ server, request })), opts.load);
  const rows = [
    ...pagePairs.map(([label], i) => row(label, { connections: pageLoad.connections, ...pageResults[i] })),
    ...onePairs.map(([label], i) => row(label, { connections: opts.load.connections, ...oneResults[i] })),
  ];
  for (const r of rows) log(`  ${r.label}: ${r.requestsPerSecond} req/s, p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms, non-2xx ${r.non2xx}, errors ${r.errors}`);
  await small.server.stop();
  await large.server.stop();
  return { seedSeconds: large.seedSeconds, walk: walked, plans, rows };
}

/** `count` users beyond the admin, by signup; resolves with their Authorization headers. */
async function signUp(server, count) {
  const headers = [];
  for (let n = 1; n <= count; n++) {
    const credentials = { username: `hooks${n}`, password: `growth-password-${n}-x` };
    const answer = await call(server, 'POST', '/api/v1/users/', { json: credentials });
    if (answer.status !== 201) throw new Error(`signup answered ${answer.status}: ${JSON.stringify(answer.body)}`);
    const token = await call(server, 'POST', '/api/v1/auth/token/', { json: credentials });
    if (token.status !== 200) throw new Error(`token answered ${token.status}: ${JSON.stringify(token.body)}`);
    headers.push(`Bearer ${token.body.access_token}`);
  }
  return headers;
}

/** A store and serve (SQLite: dispatcher in serve; PostgreSQL: one worker) with `hooks` webhooks. */
async function hookedDeployment(processes, receivers, opts, hooks) {
  const store = await freshStore(processes, { databaseUrl: opts.databaseUrl });
  const deployment = new Deployment(processes, restwireEnv(store, { ALLOW_SIGNUP: 'true' }), opts.databaseUrl ? 1 : 0);
  const started = await deployment.start();
  if (started.skipped) throw new Error(started.skipped);
  const admin = (await bearerAuth(deployment.server)).authorization;
  const users = [admin, ...(await signUp(deployment.server, Math.ceil(hooks / 20) - 1))];
  for (let hook = 0; hook < hooks; hook++) {
    const created = await createWebhook(deployment.server, users[Math.floor(hook / 20)], receivers.url(hook));
    if (created.skipped) throw new Error(created.skipped);
  }
  return { deployment, admin, hooks };
}

async function runWebhooks(processes, opts) {
  const receivers = await Receivers.start(processes, opts.hooks);
  try {
    log(`webhooks: ${opts.fewHooks} and ${opts.hooks} …`);
    const few = await hookedDeployment(processes, receivers, opts, opts.fewHooks);
    const many = await hookedDeployment(processes, receivers, opts, opts.hooks);
    // the pings of webhook creation are delivered before anything is timed
    for (let tries = 0; tries < 300; tries++) {
      if ((await receivers.counts()).pings >= opts.fewHooks + opts.hooks) break;
      await sleep(100);
    }
    const wait = { stallMs: 15_000, maxWaitMs: 300_000 };
    const drains = { few: [], many: [] };
    for (let round = 0; round < opts.rounds; round++) {
      for (const [name, setup] of [['few', few], ['many', many]]) {
        const { deployment, admin, hooks } = setup;
        await deployment.pauseDispatch();
        const committed = await commitBacklog(deployment.server, admin, opts.events, hooks);
        await receivers.reset();
        await deployment.resumeDispatch();
        const drained = await drainBacklog(receivers, committed, wait);
        log(`  round ${round + 1}, ${hooks} webhooks: ${drained.received}/${drained.expected} in ${drained.firstToLastSeconds} s = ${drained.deliveriesPerSecond} deliveries/s`);
        drains[name].push(drained);
      }
    }
    await few.deployment.stop();
    await many.deployment.stop();
    const summary = (list) => {
      const received = list.reduce((sum, d) => sum + d.received - 1, 0);
      const seconds = list.reduce((sum, d) => sum + (d.firstToLastSeconds ?? 0), 0);
      return { deliveriesPerSecond: seconds ? Math.round(received / seconds) : null, rounds: list };
    };
    return { fewHooks: opts.fewHooks, hooks: opts.hooks, events: opts.events, few: summary(drains.few), many: summary(drains.many) };
  } finally {
    await receivers.stop();
  }
}

async function main() {
  const opts = options();
  const processes = new Processes();
  const interrupt = () => void processes.cleanUp().finally(() => process.exit(130));
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  process.once('exit', () => processes.cleanUpNow());
  const report = {
    date: new Date().toISOString(),
    backend: opts.databaseUrl ? 'postgres' : 'sqlite',
    loadAverageAtStart: loadavg().map((l) => Math.round(l * 100) / 100),
    options: { ...opts, databaseUrl: undefined },
  };
  try {
    if (opts.http) report.http = await runHttp(processes, opts);
    if (opts.webhooks) report.webhooks = await runWebhooks(processes, opts);
  } finally {
    await processes.cleanUp();
  }
  report.loadAverageAtEnd = loadavg().map((l) => Math.round(l * 100) / 100);
  const ratio = (a, b) => Math.round((a / b) * 100) / 100;
  if (report.http) {
    const by = (prefix) => report.http.rows.find((r) => r.label.startsWith(prefix)).requestsPerSecond;
    report.ratios = {
      lastPageOverFirst: ratio(by('page: large, last (ordering=id)'), by('page: large, first')),
      lastCreatedPageOverFirst: ratio(by('page: large, last (ordering=created_at)'), by('page: large, first')),
      middlePageOverFirst: ratio(by('page: large, middle (ordering=id)'), by('page: large, first')),
      middleCreatedPageOverFirst: ratio(by('page: large, middle (ordering=created_at)'), by('page: large, first')),
      largeFirstPageOverSmall: ratio(by('page: large, first'), by('page: small, first')),
      getOneLargeOverSmall: ratio(by('GET one: large'), by('GET one: small')),
      getOneCachedLargeOverSmall: ratio(by('GET one cached: large'), by('GET one cached: small')),
    };
  }
  if (report.webhooks) report.ratios = { ...report.ratios, manyHooksOverFew: ratio(report.webhooks.many.deliveriesPerSecond, report.webhooks.few.deliveriesPerSecond) };
  mkdirSync(OUT_DIR, { recursive: true });
  writeFileSync(new URL(`growth-${report.backend}.json`, OUT_DIR), `${JSON.stringify(report, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify({ ratios: report.ratios, load: [report.loadAverageAtStart, report.loadAverageAtEnd] }, null, 2)}\n`);
  log(`wrote bench/out/growth-${report.backend}.json`);
}

main().catch((error) => {
  log(error instanceof Error ? error.stack ?? error.message : String(error));
  process.exitCode = 1;
});
