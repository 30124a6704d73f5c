// The request scenarios of issue #6 and #13. Each is loaded against restwire, the bare-Fastify
// memory baseline (bench/baseline.js) and the floor of restwire's database (bench/floor.js: bare
// Fastify doing the same SQL with the same driver) in alternating slices of the same run, so
// every restwire row has a ratio to both.
import { fileURLToPath } from 'node:url';
import { measure, measureAlternating } from './load.js';
import { Receivers } from './receivers.js';
import {
  EXPERIENCE,
  basicAuth,
  bearerAuth,
  call,
  createWebhook,
  freshStore,
  restwireEnv,
  seedExperiences,
  startServe,
} from './restwire.js';

const BASELINE = fileURLToPath(new URL('./baseline.js', import.meta.url));
const FLOOR = fileURLToPath(new URL('./floor.js', import.meta.url));
const SEED = 150; // ≥ 100, so the page of 100 is full and has a `next`

/** The request shapes, shared with bench/profile.js. */
export const GET_ONE = { path: '/api/v1/experiences/1/' };
export const GET_PAGE = { path: '/api/v1/experiences/?limit=100' };
export const post = (authorization) => ({
  path: '/api/v1/experiences/',
  method: 'POST',
  headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
  body: JSON.stringify(EXPERIENCE),
});

/** Writers beside readers: connections of the load given to creates in the mixed scenario. */
const MIXED_WRITERS = 10;
/** Records read at random in the mixed scenario. */
const MIXED_RECORDS = 100;
/**
 * GET one of MIXED_RECORDS records at random while MIXED_WRITERS connections create (issue 21):
 * a record is rarely read twice between two writes here, so a server that reuses responses pays
 * for the token without reusing; `authorization` is the writers'.
 */
export const getOneMixed = (authorization) => ({
  path: '/api/v1/experiences/1/',
  setupRequest: (request) => ({ ...request, path: `/api/v1/experiences/${1 + Math.floor(Math.random() * MIXED_RECORDS)}/` }),
  beside: { request: post(authorization), connections: MIXED_WRITERS },
});

/**
 * The targets of issue #13 by backend, each { row, of: the row it is compared with, ratio: at
 * least this much of its requests/s, label }. `of` is a floor row (the same database work done
 * by bare Fastify, bench/floor.js) or, for the page, the memory baseline (restwire renders a
 * page once per data version, so its floor is memory).
 */
export const TARGETS = {
  sqlite: [
    { row: 'restwire-get-one', of: 'floor-get-one', ratio: 0.8, label: 'SQLite GET one ≥ 0.80× floor' },
    { row: 'restwire-post-bearer', of: 'floor-post', ratio: 1.0, label: 'SQLite POST Bearer ≥ 1.0× floor' },
    { row: 'restwire-post-basic', of: 'floor-post', ratio: 1.0, label: 'SQLite POST Basic ≥ 1.0× floor' },
    { row: 'restwire-get-page', of: 'baseline-get-page', ratio: 1.0, label: 'SQLite page of 100 ≥ 1.0× memory baseline' },
  ],
  postgres: [
    { row: 'restwire-get-one', of: 'floor-get-one', ratio: 0.7, label: 'PostgreSQL GET one ≥ 0.70× floor' },
    { row: 'restwire-post-bearer', of: 'floor-post', ratio: 0.7, label: 'PostgreSQL POST Bearer ≥ 0.70× floor' },
    { row: 'restwire-post-basic', of: 'floor-post', ratio: 0.7, label: 'PostgreSQL POST Basic ≥ 0.70× floor' },
  ],
};
export const PEAK_RSS_TARGET_MIB = 150;

/** Adds the ratio columns and flags to the measured rows; returns { rows, targets }. */
function compare(rows, backend, redis) {
  const byId = new Map(rows.map((row) => [row.id, row]));
  const ratioTo = (row, id) => {
    const other = byId.get(id);
    return other && !other.skipped ? round(row.requestsPerSecond / other.requestsPerSecond) : null;
  };
  for (const row of rows) {
    if (row.skipped) continue;
    if (row.baseline) row.vsBaseline = ratioTo(row, row.baseline);
    if (row.floor) row.vsFloor = ratioTo(row, row.floor);
    row.rssMet = row.peakRssMiB === null ? null : row.peakRssMiB <= PEAK_RSS_TARGET_MIB;
    // No answer at all within a slice (a stalled server on a busy machine) is a failure too, not 0 req/s.
    row.flagged = row.non2xx > 0 || row.errors > 0 || row.timeouts > 0 || row.requests === 0;
  }
  const store = backend === 'postgres' && redis ? 'PostgreSQL + Redis' : backend === 'postgres' ? 'PostgreSQL' : 'SQLite';
  const targets = TARGETS[backend].map(({ row: id, of, ratio, label }) => {
    const row = byId.get(id);
    const other = byId.get(of);
    const measured = row && !row.skipped ? ratioTo(row, of) : null;
    return {
      label: label.replace(/^PostgreSQL/, store),
      row: id,
      of,
      ratio,
      figure: row?.skipped ? null : row?.requestsPerSecond ?? null,
      reference: other?.skipped ? null : other?.requestsPerSecond ?? null,
      measured,
      met: measured === null ? null : measured >= ratio,
    };
  });
  const restwire = rows.filter((row) => row.server === 'restwire' && !row.skipped && row.peakRssMiB !== null);
  const worst = restwire.reduce((max, row) => (max === null || row.peakRssMiB > max.peakRssMiB ? row : max), null);
  targets.push({
    label: `${store} peak RSS ≤ ${PEAK_RSS_TARGET_MIB} MiB in every scenario`,
    row: worst?.id ?? null,
    rss: true,
    figure: worst?.peakRssMiB ?? null,
    reference: PEAK_RSS_TARGET_MIB,
    measured: worst ? round(worst.peakRssMiB / PEAK_RSS_TARGET_MIB) : null,
    met: worst ? restwire.every((row) => row.rssMet) : null,
    scenario: worst?.name ?? null,
  });
  return { rows, targets };
}

const round = (value) => Math.round(value * 100) / 100;

/**
 * Starts bench/floor.js on the store's kind of database: its own SQLite file, or its own fresh
 * PostgreSQL database (its URL as the handle's `databaseUrl`, null on SQLite).
 */
export async function startFloor(processes, store, databaseUrl) {
  const env = { PATH: process.env.PATH ?? '', FLOOR_SEED: String(SEED) };
  if (store.backend === 'postgres') env.FLOOR_DATABASE_URL = await processes.database(databaseUrl);
  else env.FLOOR_SQLITE_FILE = `${processes.tempDir('restwire-floor-')}/floor.sqlite3`;
  const floor = await processes.startServer(`floor (${store.backend})`, FLOOR, [], env, { readyPath: GET_ONE.path });
  return { ...floor, databaseUrl: env.FLOOR_DATABASE_URL ?? null };
}

/**
 * Starts the memory baseline, the database floor and restwire, seeds, and loads every scenario,
 * the servers of one scenario in alternating slices; resolves with { rows, targets, … }.
 * `options`: { load: {duration, warmup, connections}, databaseUrl, redisUrl }.
 */
export async function runHttpScenarios(processes, options, log) {
  const baseline = await processes.startServer('baseline', BASELINE, [], { PATH: process.env.PATH ?? '' }, { readyPath: GET_ONE.path });
  const store = await freshStore(processes, options);
  const floor = await startFloor(processes, store, options.databaseUrl);
  const args = options.workers === null ? ['serve'] : ['serve', '--workers', String(options.workers)];
  const server = await startServe(processes, restwireEnv(store), args.join(' '), args);
  log(`restwire on ${store.backend}${store.redisUrl ? ' + Redis' : ''} at ${server.url} (pid ${server.pid}); ` +
    `floor at ${floor.url} (pid ${floor.pid}); memory baseline at ${baseline.url} (pid ${baseline.pid})`);

  const bearer = await bearerAuth(server);
  const writer = bearer.authorization ?? basicAuth;
  await seedExperiences(server, writer, SEED);
  const page = await call(server, 'GET', GET_PAGE.path);
  if (page.status !== 200 || page.body?.results?.length !== 100) {
    throw new Error(`seeding failed: GET ${GET_PAGE.path} answered ${page.status} with ${page.body?.results?.length} results`);
  }
  log(`seeded ${SEED} experiences${bearer.skipped ? ` (Basic: ${bearer.skipped})` : ''}`);

  const rows = [];
  const kinds = new Map([[baseline, 'baseline'], [floor, 'floor'], [server, 'restwire']]);
  /** Adds a row; when it answered non-2xx, notes what one request answers now. */
  const record = async (row, target, request) => {
    if (row.non2xx > 0) {
      const sample = await call(target, request.method ?? 'GET', request.path, {
        authorization: request.headers?.authorization,
        json: request.body ? JSON.parse(request.body) : undefined,
      });
      row.note = [row.note, `a request now answers ${sample.status}: ${JSON.stringify(sample.body).slice(0, 160)}`].filter(Boolean).join('; ');
    }
    rows.push(row);
    return row;
  };
  /**
   * One scenario: `runs` = [{ id, name, target, request, ...extra }], loaded in alternating
   * slices so their ratios come from the same moments of a shared machine.
   */
  const scenario = async (title, runs) => {
    log(`  ${title}: ${runs.map((r) => kinds.get(r.target)).join(', ')}, alternating …`);
    const figures = await measureAlternating(runs.map(({ target, request }) => ({ server: target, request })), options.load);
    for (const [index, { id, name, target, request, ...extra }] of runs.entries()) {
      await record({ id, name, server: kinds.get(target), ...extra, ...figures[index] }, target, request);
    }
  };
  const skip = (id, name, reason, extra = {}) => {
    log(`  ${name}: skipped: ${reason}`);
    rows.push({ id, name, server: 'restwire', skipped: reason, ...extra });
  };
  const against = (of) => ({ baseline: `baseline-${of}`, floor: `floor-${of}` });

  await scenario('GET one', [
    { id: 'baseline-get-one', name: 'GET one (memory baseline)', target: baseline, request: GET_ONE },
    { id: 'floor-get-one', name: `GET one (${store.backend} floor)`, target: floor, request: GET_ONE },
    { id: 'restwire-get-one', name: 'GET one experience', target: server, request: GET_ONE, ...against('get-one') },
  ]);
  await scenario('GET page of 100', [
    { id: 'baseline-get-page', name: 'GET page of 100 (memory baseline)', target: baseline, request: GET_PAGE },
    { id: 'floor-get-page', name: `GET page of 100 (${store.backend} floor)`, target: floor, request: GET_PAGE },
    { id: 'restwire-get-page', name: 'GET page of 100', target: server, request: GET_PAGE, ...against('get-page') },
  ]);
  {
    const readers = { ...options.load, connections: Math.max(1, options.load.connections - MIXED_WRITERS) };
    log(`  GET one of ${MIXED_RECORDS} at random, ${MIXED_WRITERS} writers beside: floor, restwire, alternating …`);
    const runs = [
      { id: 'floor-get-one-mixed', name: `GET one at random, writers beside (${store.backend} floor)`, target: floor, request: getOneMixed(null) },
      { id: 'restwire-get-one-mixed', name: 'GET one at random, writers beside', target: server, request: getOneMixed(writer), floor: 'floor-get-one-mixed' },
    ];
    const figures = await measureAlternating(runs.map(({ target, request }) => ({ server: target, request })), readers);
    for (const [index, { id, name, target, request, ...extra }] of runs.entries()) {
      const row = await record({ id, name, server: kinds.get(target), ...extra, ...figures[index] }, target, request);
      row.note = [`${readers.connections} readers; ${MIXED_WRITERS} writers beside made ${row.besideRequestsPerSecond} creates/s`, row.note].filter(Boolean).join('; ');
    }
  }
  const posts = [
    { id: 'baseline-post', name: 'POST create (memory baseline)', target: baseline, request: post(null) },
    { id: 'floor-post', name: `POST create (${store.backend} floor)`, target: floor, request: post(null) },
  ];
  // Bearer and Basic alternate too: whichever ran second would otherwise always insert into a
  // bigger table.
  if (bearer.skipped) skip('restwire-post-bearer', 'POST create, Bearer', bearer.skipped, against('post'));
  else posts.push({ id: 'restwire-post-bearer', name: 'POST create, Bearer', target: server, request: post(bearer.authorization), ...against('post') });
  posts.push({ id: 'restwire-post-basic', name: 'POST create, Basic', target: server, request: post(basicAuth), ...against('post') });
  await scenario('POST create', posts);
  await floor.stop();

  const receivers = await Receivers.start(processes, 1);
  try {
    const hook = await createWebhook(server, writer, receivers.url(0));
    if (hook.skipped) {
      skip('restwire-post-webhook', 'POST create, 1 webhook', hook.skipped, against('post'));
    } else {
      await receivers.reset();
      log('  POST create, 1 webhook …');
      const request = post(writer);
      const figures = await measure(server, request, options.load);
      const row = await record({ id: 'restwire-post-webhook', name: 'POST create, 1 webhook', server: 'restwire', ...against('post'), ...figures }, server, request);
      const { deliveries } = await receivers.counts();
      row.deliveriesReceived = deliveries;
      row.note = [`${bearer.skipped ? 'Basic' : 'Bearer'}; ${deliveries} deliveries received by the end (warm-up included)`, row.note]
        .filter(Boolean)
        .join('; ');
    }
  } finally {
    await receivers.stop();
  }
  await server.stop();
  await baseline.stop();
  return { backend: store.backend, redis: Boolean(store.redisUrl), workers: options.workers, seeded: SEED, ...compare(rows, store.backend, Boolean(store.redisUrl)) };
}
