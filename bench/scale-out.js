// Issue 21 item 5: `restwire serve --workers N` (node:cluster) against one `serve` process, both
// against the floor of their database (bench/floor.js), in alternating slices of one run
// (bench/load.js), for GET one and POST (Bearer). Each server has a fresh store of its own. Every
// row also says where the machine's CPU went during its slices (memory.js watchCpu): the server's
// node processes, PostgreSQL's backends for that server's database, Redis, the load generator
// (autocannon runs in this process) and the whole machine, other work on it included; so the
// figures show what limits first when everything shares the machine's cores.
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import pg from 'pg';
import { GET_ONE, post, startFloor } from './http-scenarios.js';
import { measureAlternating } from './load.js';
import { bearerAuth, freshStore, restwireEnv, seedExperiences, startServe } from './restwire.js';

const SEED = 150;

/** The process is a local one of this name (/proc/<pid>/comm): a pid a remote server reports is not. */
const isLocal = (pid, name) => {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === name;
  } catch {
    return false;
  }
};

/** The pid of the local Redis server at `url` (INFO server), or null. */
async function redisPid(url) {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    const pid = Number(/^process_id:(\d+)/m.exec(await redis.info('server'))?.[1]);
    return isLocal(pid, 'redis-server') ? pid : null;
  } finally {
    redis.disconnect();
  }
}

/**
 * What the section asks PostgreSQL, through one connection to `adminUrl` and one to each
 * database it looks into: `backends(url)` resolves with the pids of the local backends connected
 * to that URL's database; `commits(url)` is a probe (bench/load.js) counting the experiences
 * created meanwhile and the transactions that committed them (distinct `xmin`: a group commit's
 * creates share one), so that a row says how many creates each commit carried. `close()` ends
 * every connection.
 */
async function postgresWatch(adminUrl) {
  const clients = new Map();
  const client = async (url) => {
    if (!clients.has(url)) {
      const opened = new pg.Client({ connectionString: url });
      clients.set(url, opened.connect().then(() => opened));
    }
    return clients.get(url);
  };
  const admin = await client(adminUrl);
  return {
    async backends(databaseUrl) {
      const name = new URL(databaseUrl).pathname.slice(1);
      const { rows } = await admin.query('select pid from pg_stat_activity where datname = $1', [name]);
      return rows.map((row) => row.pid).filter((pid) => isLocal(pid, 'postgres'));
    },
    commits: (databaseUrl) => async () => {
      const db = await client(databaseUrl);
      const { rows: [{ last }] } = await db.query('select coalesce(max(id), 0)::bigint as last from experiences');
      return async () => {
        const { rows: [counted] } = await db.query('select count(*)::int as creates, count(distinct xmin::text)::int as commits from experiences where id > $1', [last]);
        return counted;
      };
    },
    close: () => Promise.all([...clients.values()].map(async (opened) => (await opened).end())),
  };
}

/** CPU seconds as a share of one core over the wall time: 100 % = one core busy throughout. */
const percentOfCore = (seconds, wall) => (seconds === null || !wall ? null : Math.round((seconds / wall) * 100));
const round = (value) => Math.round(value * 100) / 100;

/**
 * Runs the section; resolves with { backend, redis, workers, seeded, rows, comparisons }.
 * `options`: { load, databaseUrl, redisUrl, compareWorkers }.
 */
export async function runScaleOut(processes, options, log) {
  const workers = options.compareWorkers;
  const single = await freshStore(processes, options);
  const clustered = await freshStore(processes, options);
  const floor = await startFloor(processes, single, options.databaseUrl);
  const one = { ...(await startServe(processes, restwireEnv(single), 'restwire serve', ['serve'])), databaseUrl: single.databaseUrl };
  const many = {
    ...(await startServe(processes, restwireEnv(clustered), `restwire serve --workers ${workers}`, ['serve', '--workers', String(workers)])),
    databaseUrl: clustered.databaseUrl,
  };
  log(`serve at ${one.url} (pid ${one.pid}), serve --workers ${workers} at ${many.url} (pid ${many.pid}), ` +
    `floor at ${floor.url} (pid ${floor.pid}), on ${single.backend}${single.redisUrl ? ' + Redis' : ''}`);

  const postgres = single.databaseUrl ? await postgresWatch(options.databaseUrl) : null;
  try {
    return await measureAll(options, { single, floor, one, many, postgres, redis: single.redisUrl ? await redisPid(single.redisUrl) : null }, log);
  } finally {
    await postgres?.close();
    await Promise.all([floor.stop(), one.stop(), many.stop()]);
  }
}

/**
 * Where the CPU went during a row's slices: for the server, PostgreSQL's backends, Redis and
 * autocannon, { percent of one core, µs per request answered }; for the whole machine and
 * `other` (the machine less those four: other work on it), the percent.
 */
function cpuShares(figure, wall) {
  const groups = figure.machineCpu?.groups ?? {};
  const share = (seconds) => ({
    percent: percentOfCore(seconds, wall),
    usPerRequest: seconds === null || !figure.requests ? null : Math.round((seconds * 1e6) / figure.requests),
  });
  const parts = [figure.cpuSeconds, groups.postgres ?? 0, groups.redis ?? 0, figure.machineCpu?.loadGenerator ?? null];
  const machine = figure.machineCpu?.machine ?? null;
  const other = machine === null || parts.some((part) => part === null) ? null : Math.max(0, machine - parts.reduce((sum, part) => sum + part, 0));
  return {
    server: share(figure.cpuSeconds),
    postgres: share(groups.postgres ?? null),
    redis: share(groups.redis ?? null),
    loadGenerator: share(figure.machineCpu?.loadGenerator ?? null),
    machine: percentOfCore(machine, wall),
    other: percentOfCore(other, wall),
  };
}

/** The request shapes compared: the floor's, and restwire's with the caller's Bearer token. */
const SHAPES = [
  { shape: 'get-one', title: 'GET one', floor: GET_ONE, restwire: () => GET_ONE },
  { shape: 'post', title: 'POST create, Bearer', floor: post(null), restwire: (authorization) => post(authorization) },
];

async function measureAll(options, { single, floor, one, many, postgres, redis }, log) {
  const workers = options.compareWorkers;
  /** What each slice watches besides the server: its database's backends, and Redis where it uses it. */
  const groupsFor = (databaseUrl, usesRedis) => async () => [
    ...(postgres && databaseUrl ? [{ name: 'postgres', pids: await postgres.backends(databaseUrl) }] : []),
    ...(redis !== null && usesRedis ? [{ name: 'redis', pids: [redis] }] : []),
  ];
  // The floor has a database of its own, and no Redis.
  const servers = [{ kind: 'floor', name: `${single.backend} floor`, server: floor, databaseUrl: floor.databaseUrl, groups: groupsFor(floor.databaseUrl, false) }];
  for (const [kind, name, server] of [['one', 'serve (1 process)', one], ['many', `serve --workers ${workers}`, many]]) {
    const bearer = await bearerAuth(server);
    if (bearer.skipped) throw new Error(`${name}: ${bearer.skipped}`);
    await seedExperiences(server, bearer.authorization, SEED);
    servers.push({ kind, name, server, databaseUrl: server.databaseUrl, authorization: bearer.authorization, groups: groupsFor(server.databaseUrl, true) });
  }

  const rows = [];
  for (const { shape, title, floor: floorRequest, restwire } of SHAPES) {
    log(`  ${title}: ${servers.map(({ name }) => name).join(', ')}, alternating …`);
    const pairs = servers.map(({ kind, server, databaseUrl, authorization, groups }) => ({
      server,
      groups,
      request: kind === 'floor' ? floorRequest : restwire(authorization),
      probe: postgres && shape === 'post' ? postgres.commits(databaseUrl) : null,
    }));
    const figures = await measureAlternating(pairs, options.load);
    for (const [index, figure] of figures.entries()) {
      const { kind, name } = servers[index];
      const wall = figure.machineCpu?.wallSeconds ?? null;
      rows.push({
        id: `${kind}-${shape}`,
        shape,
        scenario: title,
        name,
        kind,
        ...figure,
        cpu: cpuShares(figure, wall),
        commits: figure.probed ? { ...figure.probed, perSecond: Math.round(figure.probed.commits / figure.seconds), createsPerCommit: figure.probed.commits ? round(figure.probed.creates / figure.probed.commits) : null } : null,
        flagged: figure.non2xx > 0 || figure.errors > 0 || figure.timeouts > 0 || figure.requests === 0,
      });
    }
  }
  const byId = new Map(rows.map((row) => [row.id, row]));
  for (const row of rows) {
    if (row.kind !== 'floor') row.vsFloor = round(row.requestsPerSecond / byId.get(`floor-${row.shape}`).requestsPerSecond);
    if (row.kind === 'many') row.vsOne = round(row.requestsPerSecond / byId.get(`one-${row.shape}`).requestsPerSecond);
  }
  const comparisons = SHAPES.map(({ shape, title }) => {
    const oneRow = byId.get(`one-${shape}`);
    const manyRow = byId.get(`many-${shape}`);
    return {
      label: `${title}: serve --workers ${workers} against serve`,
      figure: manyRow.requestsPerSecond,
      reference: oneRow.requestsPerSecond,
      measured: manyRow.vsOne,
      flagged: oneRow.flagged || manyRow.flagged,
    };
  });
  return { backend: single.backend, redis: Boolean(single.redisUrl), workers, seeded: SEED, rows, comparisons };
}
