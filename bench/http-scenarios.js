// The request scenarios of issue #6, each loaded in turn against restwire and, where it has
// the same shape, against the bare-Fastify baseline measured in the same run.
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

/**
 * The targets of issue #6, as { of: the row it is compared with, ratio: at least this much of
 * its requests/s }.
 */
export const TARGETS = {
  'restwire-get-one': { of: 'baseline-get-one', ratio: 0.7 },
  'restwire-get-page': { of: 'baseline-get-page', ratio: 0.6 },
  'restwire-post-bearer': { of: 'baseline-post', ratio: 0.5 },
  'restwire-post-basic': { of: 'restwire-post-bearer', ratio: 0.8 },
};
export const PEAK_RSS_TARGET_MIB = 150;

/** Adds the ratio columns and the flags to the measured rows. */
function compare(rows) {
  const byId = new Map(rows.map((row) => [row.id, row]));
  for (const row of rows) {
    if (row.skipped) continue;
    const base = byId.get(row.baseline);
    if (base && !base.skipped) row.vsBaseline = round(row.requestsPerSecond / base.requestsPerSecond);
    const target = TARGETS[row.id];
    const other = target && byId.get(target.of);
    if (target && other && !other.skipped) {
      const ratio = round(row.requestsPerSecond / other.requestsPerSecond);
      row.target = { of: target.of, ratio: target.ratio, measured: ratio, met: ratio >= target.ratio };
    }
    if (row.id === 'restwire-post-basic' && other && !other.skipped) row.vsBearer = row.target.measured;
    row.rssMet = row.peakRssMiB === null ? null : row.peakRssMiB <= PEAK_RSS_TARGET_MIB;
    row.flagged = row.non2xx > 0 || row.errors > 0 || row.timeouts > 0;
  }
  return rows;
}

const round = (value) => Math.round(value * 100) / 100;

/**
 * Starts the baseline and restwire, seeds, loads every scenario in turn; resolves with rows.
 * `options`: { load: {duration, warmup, connections}, databaseUrl, redisUrl }.
 */
export async function runHttpScenarios(processes, options, log) {
  const baseline = await processes.startServer('baseline', BASELINE, [], { PATH: process.env.PATH ?? '' }, { readyPath: GET_ONE.path });
  const store = await freshStore(processes, options);
  const args = options.workers === null ? ['serve'] : ['serve', '--workers', String(options.workers)];
  const server = await startServe(processes, restwireEnv(store), args.join(' '), args);
  log(`restwire on ${store.backend}${store.redisUrl ? ' + Redis' : ''} at ${server.url} (pid ${server.pid}); baseline at ${baseline.url} (pid ${baseline.pid})`);

  const bearer = await bearerAuth(server);
  const writer = bearer.authorization ?? basicAuth;
  await seedExperiences(server, writer, SEED);
  const page = await call(server, 'GET', GET_PAGE.path);
  if (page.status !== 200 || page.body?.results?.length !== 100) {
    throw new Error(`seeding failed: GET ${GET_PAGE.path} answered ${page.status} with ${page.body?.results?.length} results`);
  }
  log(`seeded ${SEED} experiences${bearer.skipped ? ` (Basic: ${bearer.skipped})` : ''}`);

  const rows = [];
  const run = async (id, name, target, request, extra = {}) => {
    log(`  ${name} …`);
    const figures = await measure(target, request, options.load);
    const row = { id, name, server: target === baseline ? 'baseline' : 'restwire', ...extra, ...figures };
    if (figures.non2xx > 0) {
      const sample = await call(target, request.method ?? 'GET', request.path, {
        authorization: request.headers?.authorization,
        json: request.body ? JSON.parse(request.body) : undefined,
      });
      row.note = [row.note, `a request now answers ${sample.status}: ${JSON.stringify(sample.body).slice(0, 160)}`].filter(Boolean).join('; ');
    }
    rows.push(row);
    return row;
  };
  const skip = (id, name, reason, extra = {}) => {
    log(`  ${name}: skipped: ${reason}`);
    rows.push({ id, name, server: 'restwire', skipped: reason, ...extra });
  };

  await run('baseline-get-one', 'GET one (baseline)', baseline, GET_ONE);
  await run('restwire-get-one', 'GET one experience', server, GET_ONE, { baseline: 'baseline-get-one' });
  await run('baseline-get-page', 'GET page of 100 (baseline)', baseline, GET_PAGE);
  await run('restwire-get-page', 'GET page of 100', server, GET_PAGE, { baseline: 'baseline-get-page' });
  await run('baseline-post', 'POST create (baseline)', baseline, post(null));
  if (bearer.skipped) {
    skip('restwire-post-bearer', 'POST create, Bearer', bearer.skipped, { baseline: 'baseline-post' });
    await run('restwire-post-basic', 'POST create, Basic', server, post(basicAuth), { baseline: 'baseline-post' });
  } else {
    // Compared with each other (Basic ≥ 80 % of Bearer), so measured in alternating slices:
    // whichever ran second would otherwise always insert into a bigger table.
    log('  POST create, Bearer and Basic, alternating …');
    const [withBearer, withBasic] = await measureAlternating(server, [post(bearer.authorization), post(basicAuth)], options.load);
    const note = `${withBearer.slices} slices each, alternating with the other`;
    rows.push({ id: 'restwire-post-bearer', name: 'POST create, Bearer', server: 'restwire', baseline: 'baseline-post', note, ...withBearer });
    rows.push({ id: 'restwire-post-basic', name: 'POST create, Basic', server: 'restwire', baseline: 'baseline-post', note, ...withBasic });
  }

  const receivers = await Receivers.start(processes, 1);
  try {
    const hook = await createWebhook(server, writer, receivers.url(0));
    if (hook.skipped) {
      skip('restwire-post-webhook', 'POST create, 1 webhook', hook.skipped, { baseline: 'baseline-post' });
    } else {
      await receivers.reset();
      const row = await run('restwire-post-webhook', 'POST create, 1 webhook', server, post(writer), { baseline: 'baseline-post' });
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
  return { backend: store.backend, redis: Boolean(store.redisUrl), workers: options.workers, seeded: SEED, rows: compare(rows) };
}
