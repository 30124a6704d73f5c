// `npm run bench:streams` (issue 23, Performance; STREAMS.md): restwire's event streams against a
// floor, bare `node:http` writing the same SSE messages to the same number of clients
// (bench/streams-floor.js), on SQLite and, when BENCH_DATABASE_URL is set, on PostgreSQL too.
//   1. idle: RSS of one `serve` with N idle streams minus with none (target ≤ 100 MiB for 10,000);
//   2. fanout: one change to N streams, from the write's 201 to each client's message (p99 ≤ 1 s),
//      and its ratio to the floor's;
//   3. rate: 1,000 changes a second to 100 streams for 30 s: none lost, none out of order;
//   4. api: the API's GET one p99 with 1,000 open streams within 1.2× of with none.
// The clients are raw `http.request`s in child processes (bench/streams-clients.js), so the writer
// here times its 201s on an event loop of its own. Every child process, temp folder and database
// is removed on the way out, on error and on Ctrl-C too.
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { cpus, loadavg, release, totalmem, type } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { measure } from './load.js';
import { cpuSeconds, mib, processTree } from './memory.js';
import { Processes } from './processes.js';
import { EXPERIENCE, bearerAuth, freshStore, restwireEnv, seedExperiences, startServe } from './restwire.js';

const CLIENTS = fileURLToPath(new URL('./streams-clients.js', import.meta.url));
const FLOOR = fileURLToPath(new URL('./streams-floor.js', import.meta.url));
const RESULTS = new URL('./RESULTS.md', import.meta.url);
const OUT_DIR = new URL('./out/', import.meta.url);
const SCENARIOS = ['idle', 'fanout', 'rate', 'api'];

const USAGE = `usage: npm run bench:streams -- [options]

  --quick              small counts, a few seconds each (checks that it works)
  --no-write           do not append to bench/RESULTS.md (bench/out/streams-latest.json is still written)
  --only LIST          only these scenarios, comma-separated: ${SCENARIOS.join(', ')}
  --streams N          idle and fan-out streams (default 10000; --quick 200)
  --fanouts N          changes fanned out, one at a time (default 5; --quick 2)
  --rate N             changes a second in the rate scenario (default 1000; --quick 200)
  --rate-streams N     streams in the rate scenario (default 100; --quick 10)
  --seconds N          seconds of the rate scenario (default 30; --quick 3)
  --batch N            creates per write in the rate scenario: 1 = POST /api/v1/experiences/ each,
                       more = POST /api/v1/batch/ of N (one transaction) (default 1)
  --api-streams N      open streams in the api scenario (default 1000; --quick 50)
  --duration N         autocannon seconds per condition in the api scenario (default 10; --quick 1)
  --connections N      autocannon connections (default 50)
  --client-processes N child processes holding the streams (default 1)
  --no-floor           skip the bare node:http floor
  --cpu-prof DIR       run restwire with --cpu-prof, its profiles written to DIR when it stops
  --note TEXT          a remark written with the section in bench/RESULTS.md

  BENCH_DATABASE_URL=postgres://…  also run on a fresh PostgreSQL database there
  BENCH_REDIS_URL=redis://…        give restwire REDIS_URL on PostgreSQL

  restwire runs with STREAM_MAX_PER_USER=100000 and the rate limits lifted (1e9/hour): the bench
  opens every stream as one user.`;

function parseOptions(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      'no-write': { type: 'boolean', default: false },
      only: { type: 'string' },
      streams: { type: 'string' },
      fanouts: { type: 'string' },
      rate: { type: 'string' },
      'rate-streams': { type: 'string' },
      seconds: { type: 'string' },
      batch: { type: 'string' },
      'api-streams': { type: 'string' },
      duration: { type: 'string' },
      connections: { type: 'string' },
      'client-processes': { type: 'string' },
      'no-floor': { type: 'boolean', default: false },
      'cpu-prof': { type: 'string' },
      note: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const number = (name, fallback, min, max = Number.MAX_SAFE_INTEGER) => {
    if (values[name] === undefined) return fallback;
    const n = Number(values[name]);
    if (!Number.isInteger(n) || n < min || n > max) throw new Error(`--${name}: expected a whole number from ${min} to ${max}, got ${values[name]}`);
    return n;
  };
  const only = values.only === undefined ? SCENARIOS : values.only.split(',').map((name) => name.trim()).filter(Boolean);
  for (const name of only) if (!SCENARIOS.includes(name)) throw new Error(`--only: unknown scenario ${name}; one of ${SCENARIOS.join(', ')}`);
  const quick = values.quick;
  return {
    quick,
    write: !values['no-write'],
    scenarios: only,
    streams: number('streams', quick ? 200 : 10_000, 1, 100_000),
    fanouts: number('fanouts', quick ? 2 : 5, 1, 100),
    rate: number('rate', quick ? 200 : 1000, 1, 100_000),
    rateStreams: number('rate-streams', quick ? 10 : 100, 1, 100_000),
    seconds: number('seconds', quick ? 3 : 30, 1, 3600),
    batch: number('batch', 1, 1, 100),
    apiStreams: number('api-streams', quick ? 50 : 1000, 1, 100_000),
    load: { duration: number('duration', quick ? 1 : 10, 1, 600), warmup: quick ? 0.5 : 2, connections: number('connections', 50, 1, 1000) },
    clientProcesses: number('client-processes', 1, 1, 16),
    floor: !values['no-floor'],
    cpuProfDir: values['cpu-prof'] ?? null,
    note: values.note ?? null,
    databaseUrl: process.env.BENCH_DATABASE_URL || null,
    redisUrl: process.env.BENCH_REDIS_URL || null,
  };
}

const log = (message) => process.stderr.write(`bench:streams: ${message}\n`);
const now = () => performance.timeOrigin + performance.now();
const round = (value, digits = 1) => (value === null || value === undefined ? null : Math.round(value * 10 ** digits) / 10 ** digits);

/** The `p`-th percentile (0–100) of numbers, nearest rank. */
function percentile(values, p) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** Open file descriptors a process may hold (soft limit), from /proc; null elsewhere. */
function openFileLimit() {
  try {
    const match = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    return match ? Number(match[1]) : null;
  } catch {
    return null;
  }
}

/** Resident memory of a process and its children, in bytes (Linux /proc), or null. */
function rss(pid) {
  let total = 0;
  for (const each of processTree(pid)) {
    try {
      const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${each}/status`, 'utf8'));
      if (!match) return null;
      total += Number(match[1]) * 1024;
    } catch {
      return null;
    }
  }
  return total;
}

/** The median of five RSS samples over a second, after `settleMs` (GC and allocator settle). */
async function settledRss(pid, settleMs) {
  await sleep(settleMs);
  const samples = [];
  for (let i = 0; i < 5; i++) {
    samples.push(rss(pid));
    await sleep(200);
  }
  return samples.includes(null) ? null : percentile(samples, 50);
}

/** The client child processes, driven over IPC (bench/streams-clients.js). */
class Clients {
  #handles = [];
  #pending = new Map();
  #seq = 0;
  /** Streams each child holds. */
  #counts = [];

  static async start(processes, count) {
    const clients = new Clients();
    for (let i = 0; i < count; i++) {
      const handle = processes.start(`stream clients ${i + 1}`, CLIENTS, [], { PATH: process.env.PATH ?? '' }, { ipc: true });
      await new Promise((resolve, reject) => {
        handle.child.once('message', (message) => (message.ready ? resolve() : reject(new Error('clients: unexpected first message'))));
        handle.exited.then((code) => reject(new Error(`clients exited (${code}): ${handle.output()}`)));
      });
      handle.child.on('message', (message) => {
        const pending = clients.#pending.get(message.seq);
        if (!pending) return;
        clients.#pending.delete(message.seq);
        if (message.ok) pending.resolve(message);
        else pending.reject(new Error(`clients: ${message.error}`));
      });
      clients.#handles.push(handle);
      clients.#counts.push(0);
    }
    return clients;
  }

  #call(index, type, args = {}) {
    const seq = ++this.#seq;
    return new Promise((resolve, reject) => {
      this.#pending.set(seq, { resolve, reject });
      this.#handles[index].child.send({ seq, type, ...args });
    });
  }

  #all(type, args = {}) {
    return Promise.all(this.#handles.map((_, index) => this.#call(index, type, typeof args === 'function' ? args(index) : args)));
  }

  /** Opens `count` streams split over the children; resolves with { opened, failed, errors, ms }. */
  async open(url, headers, count, concurrency = 100) {
    const share = (index) => Math.floor(count / this.#handles.length) + (index < count % this.#handles.length ? 1 : 0);
    const started = now();
    const answers = await this.#all('open', (index) => ({ url, headers, count: share(index), concurrency: Math.ceil(concurrency / this.#handles.length) }));
    answers.forEach((answer, index) => (this.#counts[index] += answer.opened));
    const opened = answers.reduce((sum, answer) => sum + answer.opened, 0);
    return { opened, failed: count - opened, errors: answers.flatMap((answer) => answer.errors), seconds: round((now() - started) / 1000) };
  }

  mode(name) {
    return this.#all('mode', { name });
  }

  /** Arrival times of `recordId` on every stream (or as many as came within `timeoutMs`). */
  async arrivals(recordId, timeoutMs) {
    const answers = await this.#all('await', (index) => ({ recordId, count: this.#counts[index], timeoutMs }));
    return answers.flatMap((answer) => answer.times);
  }

  async verify(ids) {
    const answers = await this.#all('verify', { ids });
    return { rows: answers.flatMap((answer) => answer.rows), failures: answers.flatMap((answer) => answer.failures) };
  }

  async openCount() {
    const answers = await this.#all('count');
    return answers.reduce((sum, answer) => sum + answer.open, 0);
  }

  async close() {
    await this.#all('close');
    this.#counts.fill(0);
  }
}

/** One JSON request on a keep-alive agent; resolves with { status, body, at: when the response began }. */
function request(agent, url, method, headers, body) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(url, {
      method,
      agent,
      headers: { accept: 'application/json', ...headers, ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }) },
    });
    req.on('error', reject);
    req.on('response', (response) => {
      const at = now();
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (text += chunk));
      response.on('end', () => {
        let parsed = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          // not JSON: kept as text for the error message
        }
        resolve({ status: response.statusCode, body: parsed, at });
      });
    });
    req.end(payload);
  });
}

/** What a server under test offers the scenarios: where streams open and how one change is made. */
function restwireTarget(server, authorization) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  return {
    name: 'restwire',
    pid: server.pid,
    streamUrl: `${server.url}/api/v1/experiences/`,
    headers: { authorization },
    agent,
    async create(n) {
      const sentAt = now();
      const answer = await request(agent, `${server.url}/api/v1/experiences/`, 'POST', { authorization }, { title: `Stream bench ${n}`, q_like_dislike: EXPERIENCE.q_like_dislike });
      if (answer.status !== 201) throw new Error(`POST /api/v1/experiences/ answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 300)}`);
      return { ids: [answer.body.id], at: answer.at, sentAt };
    },
    async createBatch(n, size) {
      const requests = Array.from({ length: size }, (_, i) => ({ method: 'POST', path: '/api/v1/experiences/', body: { title: `Stream bench ${n}.${i}`, q_like_dislike: EXPERIENCE.q_like_dislike } }));
      const answer = await request(agent, `${server.url}/api/v1/batch/`, 'POST', { authorization }, { requests });
      if (answer.status !== 200) throw new Error(`POST /api/v1/batch/ answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 300)}`);
      return { ids: answer.body.responses.map((each) => each.body.id), at: answer.at };
    },
  };
}

function floorTarget(server) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  return {
    name: 'floor',
    pid: server.pid,
    streamUrl: `${server.url}/stream`,
    headers: {},
    agent,
    async create(n) {
      const sentAt = now();
      const answer = await request(agent, `${server.url}/publish`, 'POST', {}, { title: `Stream bench ${n}`, q_like_dislike: EXPERIENCE.q_like_dislike });
      if (answer.status !== 201) throw new Error(`floor /publish answered ${answer.status}`);
      return { ids: [answer.body.id], at: answer.at, sentAt };
    },
  };
}

/**
 * Scenarios 1 and 2 on one target: RSS with none, open `count` streams, RSS with them, then
 * `fanouts` changes one at a time, each timed from its 201 to every stream's message.
 */
async function idleAndFanout(target, clients, options) {
  const result = { streams: options.streams };
  const before = await settledRss(target.pid, 1000);
  const cpuBefore = cpuSeconds(processTree(target.pid));
  const opened = await clients.open(target.streamUrl, target.headers, options.streams);
  const cpuAfter = cpuSeconds(processTree(target.pid));
  log(`  ${target.name}: opened ${opened.opened} of ${options.streams} streams in ${opened.seconds} s${opened.failed ? ` (${opened.failed} failed: ${opened.errors.slice(0, 2).join('; ')})` : ''}`);
  result.opened = opened.opened;
  result.failed = opened.failed;
  result.errors = opened.errors.slice(0, 3);
  result.openSeconds = opened.seconds;
  result.openCpuMsPerStream = cpuBefore && cpuAfter && opened.opened ? round(((cpuAfter.user + cpuAfter.system - cpuBefore.user - cpuBefore.system) * 1000) / opened.opened, 2) : null;
  const after = await settledRss(target.pid, 3000);
  result.rssNoneMiB = mib(before);
  result.rssWithMiB = mib(after);
  result.rssDeltaMiB = before === null || after === null ? null : mib(after - before);
  result.kibPerStream = before === null || after === null || !opened.opened ? null : round((after - before) / 1024 / opened.opened, 2);
  result.stillOpen = await clients.openCount();
  if (options.scenarios.includes('fanout') && opened.opened > 0) {
    result.fanouts = [];
    for (let i = 0; i < options.fanouts; i++) {
      const cpu0 = cpuSeconds(processTree(target.pid));
      const { ids, at, sentAt } = await target.create(`fanout ${i + 1}`);
      const times = await clients.arrivals(ids[0], 30_000);
      const cpu1 = cpuSeconds(processTree(target.pid));
      const latencies = times.map((time) => time - at);
      const row = {
        received: latencies.length,
        p50Ms: round(percentile(latencies, 50)),
        p99Ms: round(percentile(latencies, 99)),
        maxMs: round(Math.max(...latencies)),
        // From the POST sent, not its 201: a server that writes the messages before the 201 (or
        // a writer that reads the 201 late) makes the 201-based figure small or negative.
        fromSendP99Ms: round(percentile(times.map((time) => time - sentAt), 99)),
        beforeThe201: latencies.filter((latency) => latency < 0).length,
        // Server CPU from the write to the last message (includes the create itself).
        serverCpuMs: cpu0 && cpu1 ? Math.round((cpu1.user + cpu1.system - cpu0.user - cpu0.system) * 1000) : null,
      };
      result.fanouts.push(row);
      log(`  ${target.name}: fan-out ${i + 1}: ${row.received}/${opened.opened} received, p50 ${row.p50Ms} ms, p99 ${row.p99Ms} ms, max ${row.maxMs} ms (p99 from the POST sent ${row.fromSendP99Ms} ms; ${row.beforeThe201} before the 201; server CPU ${row.serverCpuMs} ms)`);
      await sleep(500);
    }
    const p99s = result.fanouts.map((row) => row.p99Ms ?? Infinity);
    result.p99Ms = percentile(p99s, 50); // the median fan-out's p99
    result.worstP99Ms = Math.max(...p99s);
    result.allReceived = result.fanouts.every((row) => row.received === opened.opened);
    result.fromSendP99Ms = percentile(result.fanouts.map((row) => row.fromSendP99Ms), 50);
    result.beforeThe201 = result.fanouts.reduce((sum, row) => sum + row.beforeThe201, 0);
    result.serverCpuMs = percentile(result.fanouts.map((row) => row.serverCpuMs ?? 0), 50);
  }
  await clients.close();
  return result;
}

/** Scenario 3: `rate` changes a second for `seconds` to `rateStreams` streams; what arrived. */
async function rateScenario(target, clients, options) {
  const opened = await clients.open(target.streamUrl, target.headers, options.rateStreams);
  if (opened.failed) throw new Error(`rate: ${opened.failed} streams failed to open: ${opened.errors[0]}`);
  await clients.mode('verify');
  const ids = [];
  const errors = [];
  let failedWrites = 0;
  const size = options.batch;
  const writesPerSecond = options.rate / size;
  const totalWrites = Math.round(writesPerSecond * options.seconds);
  const maxInFlight = 64;
  let sent = 0;
  let inFlight = 0;
  const started = now();
  const cpu0 = cpuSeconds(processTree(target.pid));
  // Paced to the rate, at most `maxInFlight` at once; writing stops after `seconds` even when the
  // server could not keep up (the achieved rate says so), then the last writes are awaited.
  const stopAt = started + options.seconds * 1000;
  let stopped = false;
  await new Promise((resolve) => {
    const tick = () => {
      if (now() >= stopAt) stopped = true;
      const due = stopped ? sent : Math.min(totalWrites, Math.floor(((now() - started) / 1000) * writesPerSecond) + 1);
      while (sent < due && inFlight < maxInFlight) {
        const n = ++sent;
        inFlight++;
        const write = size === 1 ? target.create(`rate ${n}`) : target.createBatch(n, size);
        write
          .then(({ ids: created }) => ids.push(...created))
          .catch((error) => {
            failedWrites++;
            if (errors.length < 3) errors.push(error.message);
          })
          .finally(() => {
            inFlight--;
            if ((sent === totalWrites || stopped) && inFlight === 0) resolve();
          });
      }
      if (sent < totalWrites && !stopped) setTimeout(tick, 2);
      else if (inFlight === 0) resolve();
    };
    tick();
  });
  const writeSeconds = (now() - started) / 1000;
  // Wait until every stream has every change (or 30 s more).
  const expected = ids.length;
  const deadline = now() + 30_000;
  let verified;
  for (;;) {
    verified = await clients.verify(ids);
    const done = verified.rows.every((row) => row.missing === 0);
    if (done || now() > deadline) break;
    await sleep(250);
  }
  const drainedSeconds = (now() - started) / 1000;
  const cpu1 = cpuSeconds(processTree(target.pid));
  const sum = (name) => verified.rows.reduce((total, row) => total + row[name], 0);
  const result = {
    streams: opened.opened,
    batch: size,
    targetRate: options.rate,
    seconds: options.seconds,
    changes: expected,
    achievedRate: Math.round(expected / writeSeconds),
    // Writes refused (a 503 from a starved pool, say) made no change: nothing for a stream to miss.
    failedWrites,
    writeErrors: errors,
    messages: sum('messages'),
    expectedMessages: expected * opened.opened,
    lost: sum('missing'),
    outOfOrder: sum('outOfOrder'),
    duplicates: sum('duplicates'),
    reconnects: sum('reconnects'),
    resets: sum('resets'),
    failures: verified.failures.slice(0, 3),
    deliveredSecondsAfterLastWrite: round(drainedSeconds - writeSeconds),
    serverCpuPerSecond: cpu0 && cpu1 ? round((cpu1.user + cpu1.system - cpu0.user - cpu0.system) / drainedSeconds, 2) : null,
  };
  log(`  ${target.name}: rate: ${result.changes} changes at ${result.achievedRate}/s to ${result.streams} streams: ${result.messages}/${result.expectedMessages} messages, ${result.lost} lost, ${result.outOfOrder} out of order, ${result.duplicates} twice, ${result.reconnects} reconnects`);
  await clients.close();
  await clients.mode('latency');
  return result;
}

/** Scenario 4: GET one with none and with `apiStreams` open streams, alternating. */
async function apiScenario(server, target, clients, options, authorization) {
  const getOne = { path: '/api/v1/experiences/1/', headers: { authorization } };
  const rounds = options.quick ? 1 : 3;
  const slice = { ...options.load, warmup: 0, duration: Math.max(1, Math.round(options.load.duration / rounds)) };
  await measure(server, getOne, { ...options.load, duration: options.load.warmup, warmup: 0 });
  const none = [];
  const withStreams = [];
  let opened = 0;
  for (let i = 0; i < rounds; i++) {
    none.push(await measure(server, getOne, slice));
    const open = await clients.open(target.streamUrl, target.headers, options.apiStreams);
    opened = open.opened;
    await sleep(500);
    withStreams.push(await measure(server, getOne, slice));
    await clients.close();
    await sleep(500);
  }
  const summary = (parts) => ({
    requestsPerSecond: Math.round(parts.reduce((sum, part) => sum + part.requests, 0) / parts.reduce((sum, part) => sum + part.seconds, 0)),
    p50Ms: round(parts.reduce((sum, part) => sum + part.p50Ms, 0) / parts.length),
    p99Ms: Math.max(...parts.map((part) => part.p99Ms)),
    slicesP99Ms: parts.map((part) => part.p99Ms),
    non2xx: parts.reduce((sum, part) => sum + part.non2xx + part.errors + part.timeouts, 0),
  });
  const result = { streams: opened, none: summary(none), with: summary(withStreams) };
  result.ratio = result.none.p99Ms > 0 ? round(result.with.p99Ms / result.none.p99Ms, 2) : null;
  log(`  api: GET one p99 ${result.none.p99Ms} ms with none, ${result.with.p99Ms} ms with ${opened} streams (${result.ratio}×)`);
  return result;
}

/** Every scenario on one store (SQLite or PostgreSQL), with its floor beside it. */
async function runBackend(processes, options, databaseUrl) {
  const store = await freshStore(processes, { databaseUrl, redisUrl: databaseUrl ? options.redisUrl : null });
  const env = restwireEnv(store, { STREAM_MAX_PER_USER: '100000' });
  const nodeArgs = options.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`] : [];
  const server = await startServe(processes, env, `restwire serve (${store.backend})`, ['serve'], nodeArgs);
  log(`${store.backend}: restwire at ${server.url} (pid ${server.pid})`);
  const auth = await bearerAuth(server);
  if (auth.skipped) throw new Error(auth.skipped);
  const { authorization } = auth;
  await seedExperiences(server, authorization, 5);
  const clients = await Clients.start(processes, options.clientProcesses);
  const restwire = restwireTarget(server, authorization);
  // Warm the stream path (JIT, prepared statements) before anything is timed.
  await clients.open(restwire.streamUrl, restwire.headers, 20);
  await restwire.create('warm-up');
  await sleep(300);
  await clients.close();

  const result = { backend: store.backend + (store.backend === 'postgres' && store.redisUrl ? ' + Redis' : ''), restwire: {}, floor: null };
  const wants = (name) => options.scenarios.includes(name);
  if (wants('idle') || wants('fanout')) {
    log(`${store.backend}: ${options.streams} streams, idle then ${options.fanouts} fan-outs`);
    result.restwire.idle = await idleAndFanout(restwire, clients, options);
    if (options.floor) {
      const floorServer = await processes.startServer('streams floor', FLOOR, [], { PATH: process.env.PATH ?? '' });
      const floor = floorTarget(floorServer);
      result.floor = await idleAndFanout(floor, clients, options);
      floor.agent.destroy();
      await floorServer.stop();
    }
  }
  if (wants('rate')) {
    log(`${store.backend}: ${options.rate} changes/s to ${options.rateStreams} streams for ${options.seconds} s (${options.batch === 1 ? 'one POST each' : `batches of ${options.batch}`})`);
    result.restwire.rate = await rateScenario(restwire, clients, options);
  }
  if (wants('api')) {
    log(`${store.backend}: GET one with none and with ${options.apiStreams} streams`);
    result.restwire.api = await apiScenario(server, restwire, clients, options, authorization);
  }
  restwire.agent.destroy();
  await server.stop();
  return result;
}

/** met / NOT met / – for a target, with the figure and the limit. */
function targets(result, options) {
  const rows = [];
  const { idle, rate, api } = result.restwire;
  const floor = result.floor;
  const full = options.streams >= 10_000;
  // Smaller counts (--quick) check that the bench works; they judge no target but a failure.
  const judged = (row, isFull) => (isFull || row.met === false ? row : { ...row, met: null, note: 'smaller than the target\'s counts' });
  if (idle && options.scenarios.includes('idle')) {
    const delta = idle.rssDeltaMiB;
    rows.push(judged({
      label: `${idle.streams} idle streams: RSS with them − with none ≤ 100 MiB${full ? '' : ' (target is for 10,000)'}`,
      restwire: delta === null ? null : `+${delta} MiB (${idle.rssNoneMiB} → ${idle.rssWithMiB}; ${idle.kibPerStream} KiB/stream)`,
      floor: floor?.rssDeltaMiB == null ? null : `+${floor.rssDeltaMiB} MiB (${floor.kibPerStream} KiB/stream)`,
      ratio: floor?.rssDeltaMiB > 0 && delta !== null ? round(delta / floor.rssDeltaMiB, 2) : null,
      met: delta === null || idle.failed > 0 ? null : delta <= 100,
    }, full));
  }
  if (idle?.fanouts) {
    rows.push(judged({
      label: `one change to ${idle.opened} streams: p99 201 → message ≤ 1 s (median of ${idle.fanouts.length} fan-outs' p99)`,
      restwire: `${idle.p99Ms} ms (p99s ${idle.fanouts.map((row) => row.p99Ms).join(', ')}; p50s ${idle.fanouts.map((row) => row.p50Ms).join(', ')}); from the POST sent ${idle.fromSendP99Ms} ms; server CPU ${idle.serverCpuMs} ms a fan-out${idle.beforeThe201 ? `; ${idle.beforeThe201} messages arrived before their 201` : ''}${idle.allReceived ? '' : ' NOT ALL RECEIVED'}`,
      floor: floor?.fanouts ? `${floor.p99Ms} ms (p99s ${floor.fanouts.map((row) => row.p99Ms).join(', ')}); from the POST sent ${floor.fromSendP99Ms} ms; server CPU ${floor.serverCpuMs} ms` : null,
      ratio: floor?.p99Ms > 0 ? round(idle.p99Ms / floor.p99Ms, 2) : null,
      met: idle.failed > 0 || !idle.allReceived ? false : idle.p99Ms <= 1000,
    }, full));
  }
  if (rate) {
    const rateMet = rate.achievedRate >= 0.95 * rate.targetRate;
    rows.push(judged({
      label: `${rate.targetRate} changes/s to ${rate.streams} streams for ${rate.seconds} s: none lost, none out of order`,
      restwire: `${rate.changes} changes at ${rate.achievedRate}/s${rate.batch > 1 ? ` (batches of ${rate.batch})` : ''}${rate.failedWrites ? ` (${rate.failedWrites} writes refused: ${rate.writeErrors[0].slice(0, 60)}…)` : ''}; ${rate.messages}/${rate.expectedMessages} messages; ${rate.lost} lost, ${rate.outOfOrder} out of order, ${rate.duplicates} twice, ${rate.reconnects} reconnects; all in ${rate.deliveredSecondsAfterLastWrite} s after the last write; server CPU ${rate.serverCpuPerSecond} s a second`,
      floor: null,
      ratio: null,
      met: rate.lost === 0 && rate.outOfOrder === 0 && rate.duplicates === 0 ? (rateMet ? true : null) : false,
      note: rateMet ? undefined : `the writer reached ${rate.achievedRate} changes/s, not ${rate.targetRate}`,
    }, rate.targetRate >= 1000 && rate.streams >= 100 && rate.seconds >= 30));
  }
  if (api) {
    rows.push(judged({
      label: `GET one p99 with ${api.streams} open streams ≤ 1.2× with none`,
      restwire: `${api.with.p99Ms} ms (${api.with.requestsPerSecond} req/s) vs ${api.none.p99Ms} ms (${api.none.requestsPerSecond} req/s); slices ${api.with.slicesP99Ms.join(', ')} vs ${api.none.slicesP99Ms.join(', ')}`,
      floor: null,
      ratio: api.ratio,
      met: api.with.non2xx + api.none.non2xx > 0 ? null : api.ratio !== null && api.ratio <= 1.2,
    }, api.streams >= 1000));
  }
  return rows;
}

const verdict = (row) => (row.met === null ? `– ${row.note ?? 'not judged'}` : row.met ? `met${row.note ? ` (${row.note})` : ''}` : `NOT met${row.note ? ` (${row.note})` : ''}`);

function markdown(report) {
  const lines = [`## Streams (issue 23), ${report.date}`, '', `Command: \`${report.command}\``, ''];
  const m = report.machine;
  lines.push(`Machine: ${m.cores} × ${m.model}, ${m.memoryGiB} GiB, ${m.os}, Node ${m.node}; load average (uptime) ${m.loadBefore.join(', ')} at the start, ${m.loadAfter.join(', ')} at the end.`);
  lines.push(`restwire: one \`serve\`, STREAM_MAX_PER_USER=100000, rate limits lifted (1e9/hour), every stream one Bearer user on \`/api/v1/experiences/\`; clients: raw \`http.request\` streams in ${report.options.clientProcesses} child process(es); floor: bare \`node:http\` (bench/streams-floor.js) writing the same messages.`);
  if (report.note) lines.push('', report.note);
  for (const result of report.results) {
    lines.push('', `### ${result.backend}`, '', '| Target | restwire | floor | ratio | met? |', '| --- | --- | --- | --- | --- |');
    for (const row of result.targets) lines.push(`| ${row.label} | ${row.restwire ?? '–'} | ${row.floor ?? '–'} | ${row.ratio === null || row.ratio === undefined ? '–' : `${row.ratio.toFixed(2)}×`} | ${verdict(row)} |`);
  }
  return `${lines.join('\n')}\n`;
}

function text(report) {
  const lines = [];
  for (const result of report.results) {
    lines.push(`${result.backend}:`);
    for (const row of result.targets) {
      lines.push(`  ${row.label}`);
      lines.push(`    restwire: ${row.restwire ?? '–'}`);
      if (row.floor) lines.push(`    floor:    ${row.floor}`);
      if (row.ratio !== null && row.ratio !== undefined) lines.push(`    ratio:    ${row.ratio.toFixed(2)}×`);
      lines.push(`    ${verdict(row)}`);
    }
  }
  return lines.join('\n');
}

function commandLine(argv) {
  const env = [];
  for (const name of ['BENCH_DATABASE_URL', 'BENCH_REDIS_URL']) {
    if (!process.env[name]) continue;
    const url = new URL(process.env[name]);
    url.password = '';
    env.push(`${name}=${url}`);
  }
  const shown = argv.filter((arg, i) => !arg.startsWith('--note') && argv[i - 1] !== '--note');
  const quoted = shown.map((arg) => (/^[\w./=:,-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", "'\\''")}'`));
  return [...env, `npm run bench:streams${quoted.length ? ` -- ${quoted.join(' ')}` : ''}`].join(' ');
}

const loads = () => loadavg().map((load) => round(load, 2));

async function main() {
  const argv = process.argv.slice(2);
  const options = parseOptions(argv);
  // Each stream is a socket in the server and one in a client process; children inherit this limit.
  const limit = openFileLimit();
  const needed = Math.max(options.streams, options.apiStreams, options.rateStreams) / options.clientProcesses + 1000;
  if (limit !== null && limit < Math.max(options.streams, options.apiStreams) + 1000) {
    throw new Error(`open files limit ${limit} is too low for ${options.streams} streams (the server holds one socket each): raise it (ulimit -n) and run again`);
  }
  if (limit !== null && limit < needed) throw new Error(`open files limit ${limit}: use more --client-processes`);
  const processes = new Processes();
  let stopping = false;
  const interrupt = (signal) => {
    if (stopping) return;
    stopping = true;
    log(`${signal}: stopping every child process and removing temp data`);
    void processes.cleanUp().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  process.once('exit', () => processes.cleanUpNow());

  const cores = cpus();
  const report = {
    date: new Date().toISOString(),
    command: commandLine(argv),
    note: options.note,
    options: { ...options, databaseUrl: undefined, redisUrl: undefined },
    machine: { cores: cores.length, model: cores[0]?.model.trim() ?? 'unknown', memoryGiB: Math.round(totalmem() / 2 ** 30), os: `${type()} ${release()}`, node: process.version, loadBefore: loads(), loadAfter: null },
    results: [],
  };
  try {
    for (const databaseUrl of [null, ...(options.databaseUrl ? [options.databaseUrl] : [])]) {
      const result = await runBackend(processes, options, databaseUrl);
      result.targets = targets(result, options);
      report.results.push(result);
    }
  } finally {
    await processes.cleanUp();
  }
  report.machine.loadAfter = loads();
  process.stdout.write(`\n${text(report)}\n`);
  mkdirSync(OUT_DIR, { recursive: true });
  writeFileSync(new URL('streams-latest.json', OUT_DIR), `${JSON.stringify(report, null, 2)}\n`);
  log('wrote bench/out/streams-latest.json');
  if (options.write) {
    if (!existsSync(RESULTS)) throw new Error('bench/RESULTS.md is missing');
    appendFileSync(RESULTS, `\n${markdown(report)}`);
    log('appended to bench/RESULTS.md');
  }
}

main().catch((error) => {
  log(error instanceof Error ? error.stack ?? error.message : String(error));
  process.exit(1);
});
