// The performance targets of issues #18 (access rules, API keys), #19 (declared logic) and #20
// (Idempotency-Key, expand, batch). Each group serves a small project of its own declarations
// (a temp folder, its own fresh store), and loads a feature against the same request without it
// in alternating slices (bench/load.js), so each ratio comes from the same moments of the machine.
// The server's CPU per request comes with every row (from /proc, as `bench:profile` measures it).
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { PEAK_RSS_TARGET_MIB } from './http-scenarios.js';
import { measureAlternating } from './load.js';
import { mib, watchPeakRss } from './memory.js';
import { BIN, call, freshStore, restwireEnv, startServe } from './restwire.js';

export const FEATURE_GROUPS = ['access', 'logic', 'requests'];
const CHECKOUT = fileURLToPath(new URL('../', import.meta.url));
const SEED = 150;
const READER = { username: 'bench-reader', password: 'bench-reader-password-1' };

/** A declaration of `name` with `fields`, owned records, read by `read`, written by its owner. */
const declaration = (name, fields, { read = "'*'", extra = '' } = {}) => `import { defineResource, field } from 'restwire';
export default defineResource({
  name: '${name}',
  fields: { ${fields} },
  owner: true,
  access: { read: ${read}, create: '@authenticated', update: 'owner=@me', delete: 'owner=@me' },${extra}
});
`;
const NOTE_FIELDS = "title: field.string({ maxLength: 100 }), body: field.text({ maxLength: 5000 })";
// #19: uses only `validators`, `field.computed` and `hooks.afterCreate` (LOGIC.md §1-§3).
const ITEM_FIELDS = 'title: field.string({ maxLength: 100 }), quantity: field.integer({ default: 1 })';
const LOGIC_FIELDS = "title: field.string({ maxLength: 100, validators: [(v) => (String(v).trim() === '' ? 'Not blank, please.' : null)] }), " +
  'quantity: field.integer({ default: 1 }), double: field.computed(field.integer(), (r) => Number(r.quantity) * 2)';

const GROUPS = {
  access: {
    issue: 18,
    files: {
      'open_notes.ts': declaration('open_notes', NOTE_FIELDS),
      'own_notes.ts': declaration('own_notes', NOTE_FIELDS, { read: "'owner=@me'" }),
      // Read by all, each email by its owner only: a page of 100 that differs per caller.
      'cards.ts': declaration('cards', `${NOTE_FIELDS}, email: field.string({ maxLength: 100, required: false, access: { read: 'owner=@me' } })`),
    },
    run: runAccess,
  },
  logic: {
    issue: 19,
    files: {
      'plain_items.ts': declaration('plain_items', ITEM_FIELDS),
      'logic_items.ts': declaration('logic_items', LOGIC_FIELDS, { extra: '\n  hooks: { async afterCreate() {} },' }),
    },
    run: runLogic,
  },
  requests: {
    issue: 20,
    files: {
      'authors.ts': declaration('authors', 'name: field.string({ maxLength: 100 })'),
      'books.ts': declaration('books', "title: field.string({ maxLength: 100 }), author: field.reference('authors')"),
    },
    run: runRequests,
  },
};

const json = (authorization, body, headers = {}) => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization, ...headers },
  body: JSON.stringify(body),
});
const get = (path, authorization) => ({ path, headers: { authorization } });

/** The project folder, as `npm install restwire` leaves one (test/support/project.ts does the same). */
function project(processes, files) {
  const dir = processes.tempDir('restwire-bench-project-');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'bench', private: true, type: 'module' }));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(CHECKOUT, join(dir, 'node_modules', 'restwire'), 'dir');
  mkdirSync(join(dir, 'resources'));
  for (const [file, source] of Object.entries(files)) writeFileSync(join(dir, 'resources', file), source);
  return dir;
}

/** makemigrations, migrate and serve in a fresh project; { server } or { skipped } when the declarations are refused. */
async function serveProject(processes, options, files) {
  const dir = project(processes, files);
  const store = await freshStore(processes, options);
  const env = restwireEnv(store, { RESOURCES_DIR: join(dir, 'resources'), MIGRATIONS_DIR: join(dir, 'migrations'), ALLOW_SIGNUP: 'true' });
  for (const command of ['makemigrations', 'migrate']) {
    const handle = processes.start(`restwire ${command}`, BIN, [command], env);
    if ((await handle.exited) !== 0) {
      const said = handle.output().trim().split('\n').filter(Boolean).slice(-2).join(' ');
      return { skipped: `restwire ${command} refused the declarations: ${said.slice(0, 300)}` };
    }
  }
  return { server: await startServe(processes, env), backend: store.backend };
}

/** A non-admin user (admins pass every rule) and their Bearer token. */
async function reader(server) {
  const signup = await call(server, 'POST', '/api/v1/users/', { json: READER });
  if (signup.status !== 201) throw new Error(`signup answered ${signup.status}: ${JSON.stringify(signup.body)}`);
  const token = await call(server, 'POST', '/api/v1/auth/token/', { json: READER });
  if (token.status !== 200) throw new Error(`token answered ${token.status}: ${JSON.stringify(token.body)}`);
  return `Bearer ${token.body.access_token}`;
}

/** Creates `count` records of `collection` through batches of 100 (REQUESTS.md §4). */
async function seed(server, authorization, collection, count, body) {
  for (let done = 0; done < count; done += 100) {
    const requests = Array.from({ length: Math.min(100, count - done) }, (_, i) => ({ method: 'POST', path: `/api/v1/${collection}/`, body: body(done + i + 1) }));
    const answer = await call(server, 'POST', '/api/v1/batch/', { authorization, json: { requests } });
    if (answer.status !== 200) throw new Error(`seeding ${collection} answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 300)}`);
  }
}

async function runAccess(server, authorization, pairs) {
  const note = (n) => ({ title: `Note ${n}`, body: `Body of note ${n}.` });
  await seed(server, authorization, 'open_notes', SEED, note);
  await seed(server, authorization, 'own_notes', SEED, note);
  const key = await call(server, 'POST', '/api/v1/keys/', { authorization, json: { name: 'bench', scopes: ['*:read'] } });
  if (key.status !== 201) throw new Error(`POST /api/v1/keys/ answered ${key.status}: ${JSON.stringify(key.body)}`);
  const withKey = `Bearer ${key.body.key}`;
  const one = await pairs('GET one', [
    { id: 'open-get-one', name: "GET one, read '*'", request: get('/api/v1/open_notes/1/', authorization) },
    { id: 'own-get-one', name: "GET one, read 'owner=@me'", request: get('/api/v1/own_notes/1/', authorization) },
  ]);
  const page = await pairs('GET page of 100', [
    { id: 'open-page', name: "GET page of 100, read '*'", request: get('/api/v1/open_notes/?limit=100', authorization) },
    { id: 'own-page', name: "GET page of 100, read 'owner=@me'", request: get('/api/v1/own_notes/?limit=100', authorization) },
  ]);
  const auth = await pairs('Bearer token vs API key', [
    { id: 'token-get-one', name: "GET one 'owner=@me', Bearer token", request: get('/api/v1/own_notes/1/', authorization) },
    { id: 'key-get-one', name: "GET one 'owner=@me', API key (rwk_…)", request: get('/api/v1/own_notes/1/', withKey) },
  ]);
  await seed(server, authorization, 'cards', SEED, (n) => ({ ...note(n), email: `card${n}@example.com` }));
  return [
    cpuWithin("#18 read 'owner=@me' GET one: CPU/request within 15 % of read '*'", one, 1.15),
    cpuWithin("#18 read 'owner=@me' page of 100: CPU/request within 15 % of read '*'", page, 1.15),
    cpuMore('#18 API key: CPU/request ≤ Bearer token + 5 µs', auth, 5),
    await rssOfCallers(server, authorization, CALLERS),
  ];
}

/** How many different users read a page of 100 in turn (#18); BENCH_CALLERS to change. */
const CALLERS = Number(process.env.BENCH_CALLERS ?? 1000);

/**
 * #18: a page of 100 that differs per caller (a field rule), read by one user, then by `count`
 * users in turn (each page filed per caller): the server's peak RSS in the second phase at most
 * 20 MiB above the first's.
 */
async function rssOfCallers(server, authorization, count) {
  const callers = [];
  let made = 0;
  const lane = async () => {
    while (made < count) {
      const n = ++made;
      const user = { username: `bench-caller-${n}`, password: 'bench-caller-password-1' };
      const signup = await call(server, 'POST', '/api/v1/users/', { json: user });
      const token = signup.status === 201 ? await call(server, 'POST', '/api/v1/auth/token/', { json: user }) : signup;
      if (token.status !== 200) throw new Error(`caller ${n}: ${token.status} ${JSON.stringify(token.body).slice(0, 200)}`);
      callers.push(`Bearer ${token.body.access_token}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, lane));
  const peak = async (authorizations) => {
    const watch = watchPeakRss([server.pid]);
    let sent = 0;
    const result = await autocannon({
      url: `${server.url}/api/v1/cards/?limit=100`,
      connections: 10,
      amount: 3 * count,
      setupRequest: (request) => ({ ...request, headers: { ...request.headers, authorization: authorizations[sent++ % authorizations.length] } }),
    });
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`page of 100 as ${authorizations.length} callers: ${result.non2xx} non-2xx, ${result.errors} errors`);
    return mib(watch.stop()[0]);
  };
  const one = await peak([authorization]);
  const many = await peak(callers);
  const measured = one === null || many === null ? null : round(many - one);
  return {
    label: `#18 page of 100 as ${count} different users in turn: peak RSS within 20 MiB of one user's`,
    figure: many,
    reference: one,
    unit: 'MiB peak RSS',
    measured,
    difference: true,
    met: measured === null ? null : measured <= 20,
  };
}

async function runLogic(server, authorization, pairs) {
  const item = (n) => ({ title: `Item ${n}`, quantity: n });
  await seed(server, authorization, 'plain_items', SEED, item);
  await seed(server, authorization, 'logic_items', SEED, item);
  const targets = [];
  for (const [what, path, request] of [
    ['GET one', '1/', (p) => get(p, authorization)],
    ['GET page of 100', '?limit=100', (p) => get(p, authorization)],
    ['POST create', '', (p) => ({ path: p, ...json(authorization, item(7)) })],
  ]) {
    const rows = await pairs(what, [
      { id: `plain-${what}`, name: `${what}, no logic`, request: request(`/api/v1/plain_items/${path}`) },
      { id: `logic-${what}`, name: `${what}, validator + computed + afterCreate`, request: request(`/api/v1/logic_items/${path}`) },
    ]);
    targets.push(cpuWithin(`#19 ${what}: CPU/request within 10 % of the same without logic`, rows, 1.1));
  }
  return targets;
}

async function runRequests(server, authorization, pairs) {
  await seed(server, authorization, 'authors', 20, (n) => ({ name: `Author ${n}` }));
  await seed(server, authorization, 'books', SEED, (n) => ({ title: `Book ${n}`, author: `/api/v1/authors/${(n % 20) + 1}/` }));
  const book = { title: 'Benchmark book', author: '/api/v1/authors/1/' };
  const lists = await pairs('GET page of 100 books', [
    { id: 'books-page', name: 'GET page of 100 books', request: get('/api/v1/books/?limit=100', authorization) },
    { id: 'books-page-expand', name: 'GET page of 100 books ?expand=author', request: get('/api/v1/books/?limit=100&expand=author', authorization) },
  ]);
  let sent = 0;
  // Both built per request by autocannon (setupRequest), the keyed one adding its key: a request
  // autocannon builds once and reuses cost the client (on the same 2 cores as the server) so much
  // less that the plain row measured the client's savings too (issue 20: 0.54x with one built
  // once, 0.84x with both built per request, in the same minutes).
  const posts = await pairs('POST with and without Idempotency-Key', [
    { id: 'post', name: 'POST book', request: { path: '/api/v1/books/', ...json(authorization, book), setupRequest: (request) => request } },
    {
      id: 'post-key',
      name: 'POST book, Idempotency-Key (a new one each)',
      request: {
        path: '/api/v1/books/',
        ...json(authorization, book),
        setupRequest: (request) => ({ ...request, headers: { ...request.headers, 'idempotency-key': `bench-${process.pid}-${++sent}` } }),
      },
    },
  ]);
  const batch = { requests: Array.from({ length: 100 }, () => ({ method: 'POST', path: '/api/v1/books/', body: book })) };
  const batches = await pairs('100 POSTs vs one batch of 100', [
    { id: 'post-one', name: 'POST book (1 record each)', request: { path: '/api/v1/books/', ...json(authorization, book) }, records: 1 },
    { id: 'batch-100', name: 'POST /api/v1/batch/ of 100 creates', request: { path: '/api/v1/batch/', ...json(authorization, batch) }, records: 100 },
  ]);
  return [
    rateAtLeast('#20 POST with Idempotency-Key ≥ 0.8× req/s of POST without', posts, 0.8),
    {
      note: undefined,
      ...rateAtLeast('#20 page of 100 ?expand=author ≥ 0.5× req/s of the plain page', lists, 0.5),
      // Not counted by the bench (restwire has no statement log): by construction, the page's
      // own query plus one per relation and level (REQUESTS.md §2, README).
      sql: 'SQL statements per uncached request: 1 for the page + 1 for `author` (one per relation and level, by construction; not counted here)',
    },
    rateAtLeast('#20 batch of 100 creates ≥ 5× records/s of separate POSTs', batches, 5, 'records'),
  ];
}

const round = (value) => Math.round(value * 100) / 100;
/** A target judged on rows of which one had failures (non-2xx, errors) is neither met nor not. */
const judged = (target, rows) => (rows.some((row) => row.flagged) ? { ...target, met: null, note: 'rows FLAGGED: requests failed' } : target);
/** [without, with]: the feature's CPU per request at most `ratio`× the one without it. */
const cpuWithin = (label, [without, withIt], ratio) => {
  const measured = without.cpuUsPerRequest && withIt.cpuUsPerRequest ? round(withIt.cpuUsPerRequest / without.cpuUsPerRequest) : null;
  return judged({ label, figure: withIt.cpuUsPerRequest, reference: without.cpuUsPerRequest, unit: 'µs CPU/request', measured, met: measured === null ? null : measured <= ratio }, [without, withIt]);
};
const cpuMore = (label, [without, withIt], micros) => {
  const measured = without.cpuUsPerRequest !== null && withIt.cpuUsPerRequest !== null ? round(withIt.cpuUsPerRequest - without.cpuUsPerRequest) : null;
  return judged({ label, figure: withIt.cpuUsPerRequest, reference: without.cpuUsPerRequest, unit: 'µs CPU/request', measured, difference: true, met: measured === null ? null : measured <= micros }, [without, withIt]);
};
const rateAtLeast = (label, [without, withIt], ratio, unit = 'req/s') => {
  const rate = (row) => (unit === 'records' ? row.requestsPerSecond * row.records : row.requestsPerSecond);
  const measured = rate(without) > 0 ? round(rate(withIt) / rate(without)) : null;
  return judged({ label, figure: rate(withIt), reference: rate(without), unit: unit === 'records' ? 'records/s' : 'req/s', measured, met: measured === null ? null : measured >= ratio }, [without, withIt]);
};

/** Issue #21's "peak RSS ≤ 150 MiB in every scenario", for the server of one group (a declared project's). */
function peakRssTarget(group, rows) {
  const peaks = rows.map((row) => row.peakRssMiB).filter((peak) => typeof peak === 'number');
  const peak = peaks.length ? Math.max(...peaks) : null;
  return judged(
    {
      label: `#21 peak RSS ≤ ${PEAK_RSS_TARGET_MIB} MiB in every ${group} scenario`,
      figure: peak,
      reference: PEAK_RSS_TARGET_MIB,
      unit: 'MiB',
      measured: peak === null ? null : Math.round((peak / PEAK_RSS_TARGET_MIB) * 100) / 100,
      met: peak === null ? null : peak <= PEAK_RSS_TARGET_MIB,
    },
    rows,
  );
}

/**
 * Runs the named groups on the store `options` names (BENCH_DATABASE_URL or SQLite); resolves
 * with { backend, groups: [{ name, issue, rows, targets } or { name, issue, skipped }] }.
 */
export async function runFeatureScenarios(processes, options, names, log) {
  const groups = [];
  let backend = options.databaseUrl ? 'postgres' : 'sqlite';
  for (const name of names) {
    const group = GROUPS[name];
    const served = await serveProject(processes, options, group.files);
    if (served.skipped) {
      log(`  ${name} (#${group.issue}): skipped: ${served.skipped}`);
      groups.push({ name, issue: group.issue, skipped: served.skipped });
      continue;
    }
    const { server } = served;
    backend = served.backend;
    log(`${name} (#${group.issue}): restwire on ${backend} at ${server.url} (pid ${server.pid})`);
    const rows = [];
    const pairs = async (title, runs) => {
      log(`  ${title}, alternating …`);
      const figures = await measureAlternating(runs.map(({ request }) => ({ server, request })), options.load);
      const measured = runs.map(({ id, name: rowName, records }, index) => ({ id, name: rowName, records, ...figures[index] }));
      for (const row of measured) row.flagged = row.non2xx > 0 || row.errors > 0 || row.timeouts > 0 || row.requests === 0;
      rows.push(...measured);
      return measured;
    };
    const targets = await group.run(server, await reader(server), pairs);
    targets.push(peakRssTarget(name, rows));
    groups.push({ name, issue: group.issue, rows, targets });
    await server.stop();
  }
  return { backend, groups };
}
