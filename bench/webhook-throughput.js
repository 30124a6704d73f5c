// Webhook throughput (issue #6): experience changes fanned out to 10 local receivers.
//
// An "event" here is one delivery to one webhook, so 1,000 creates × 10 webhooks = 10,000
// events. Two phases per configuration:
//   1. steady: creates paced so that deliveries are due at `eventRate`/s (500/s = 50 creates/s
//      to 10 webhooks) while the dispatcher runs; per delivery, the time from the create's
//      response (the commit, as the client sees it) to the receiver getting the first attempt.
//   2. backlog: with nothing dispatching, `events` deliveries' worth of creates are committed;
//      then the dispatcher starts and drains them. Sustained deliveries/s = deliveries / (last
//      arrival − first arrival): the dispatcher's own pace, not the API's create rate. The
//      peak RSS while draining is the "bounded with a backlog" figure.
// Configurations: SQLite with the dispatcher in `serve` (stopped for the backlog by restarting
// serve with DISPATCHER_IN_SERVE=false); PostgreSQL with 1 and 2 `restwire worker` processes
// (serve always with DISPATCHER_IN_SERVE=false) when BENCH_DATABASE_URL is set.
import { setTimeout as sleep } from 'node:timers/promises';
import { watchPeakRss, mib } from './memory.js';
import { Receivers, now } from './receivers.js';
import {
  EXPERIENCE,
  basicAuth,
  bearerAuth,
  call,
  createWebhook,
  freshStore,
  restwireEnv,
  startServe,
  startWorker,
} from './restwire.js';

const HOOKS = 10;

/** The targets of issue #6 for webhooks. */
export const WEBHOOK_TARGETS = { sqliteDeliveriesPerSecond: 3000, commitToFirstAttemptP99Ms: 50, peakRssMiB: 150 };
const BACKLOG_CONCURRENCY = 16;

/** Nearest-rank percentile of sorted numbers, rounded to 0.1 ms. */
function percentile(sorted, p) {
  if (!sorted.length) return null;
  const value = sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
  return Math.round(value * 10) / 10;
}

/**
 * Waits until `expected` deliveries arrived, none arrived for `stallMs`, or `maxWaitMs` passed;
 * resolves with the count.
 */
export async function awaitDeliveries(receivers, expected, { stallMs, maxWaitMs }) {
  const deadline = Date.now() + maxWaitMs;
  let last = -1;
  let lastChange = Date.now();
  for (;;) {
    const { deliveries } = await receivers.counts();
    if (deliveries >= expected || Date.now() > deadline) return deliveries;
    if (deliveries !== last) {
      last = deliveries;
      lastChange = Date.now();
    } else if (Date.now() - lastChange > stallMs) {
      return deliveries;
    }
    await sleep(100);
  }
}

/** POSTs one create, recording when its response arrived; resolves with the experience id. */
async function timedCreate(server, authorization, committedAt) {
  const answer = await call(server, 'POST', '/api/v1/experiences/', { authorization, json: EXPERIENCE });
  const at = now();
  if (answer.status !== 201) throw new Error(`POST /api/v1/experiences/ answered ${answer.status}: ${JSON.stringify(answer.body)}`);
  committedAt.set(answer.body.id, at);
  return answer.body.id;
}

/** Phase 1: creates at a steady pace (open loop: a slow answer does not delay the next send). */
async function steadyPhase(server, authorization, receivers, { eventRate, seconds, wait }) {
  await receivers.reset();
  const createsPerSecond = eventRate / HOOKS;
  const creates = Math.max(1, Math.round(createsPerSecond * seconds));
  const interval = 1000 / createsPerSecond;
  const committedAt = new Map();
  const inFlight = [];
  let lateMs = 0;
  const start = performance.now();
  for (let i = 0; i < creates; i++) {
    const due = start + i * interval;
    const ahead = due - performance.now();
    if (ahead > 0) await sleep(ahead);
    else lateMs = Math.max(lateMs, -ahead);
    inFlight.push(timedCreate(server, authorization, committedAt));
  }
  await Promise.all(inFlight);
  const expected = creates * HOOKS;
  const received = await awaitDeliveries(receivers, expected, wait);
  const latencies = (await receivers.arrivals())
    .filter((arrival) => committedAt.has(arrival.experienceId))
    .map((arrival) => arrival.at - committedAt.get(arrival.experienceId))
    .sort((a, b) => a - b);
  return {
    eventRate,
    creates,
    expected,
    received,
    commitToFirstAttemptP50Ms: percentile(latencies, 50),
    commitToFirstAttemptP99Ms: percentile(latencies, 99),
    commitToFirstAttemptMaxMs: percentile(latencies, 100),
    pacingLateMs: Math.round(lateMs),
  };
}

/** Phase 2a: commits `events` deliveries' worth of creates, 16 at a time; resolves with seconds taken. */
export async function commitBacklog(server, authorization, events, hooks = HOOKS) {
  const creates = Math.ceil(events / hooks);
  const committedAt = new Map();
  const started = now();
  let next = 0;
  const lane = async () => {
    while (next < creates) {
      next++;
      await timedCreate(server, authorization, committedAt);
    }
  };
  await Promise.all(Array.from({ length: BACKLOG_CONCURRENCY }, lane));
  return { creates, expected: creates * hooks, createsSeconds: Math.round(now() - started) / 1000, ids: new Set(committedAt.keys()) };
}

/** Phase 2b: waits for the backlog to arrive; the sustained rate from first to last arrival. */
export async function drainBacklog(receivers, backlog, wait) {
  await awaitDeliveries(receivers, backlog.expected, wait);
  // Only the backlog's own deliveries (not a straggler of the steady phase).
  const times = (await receivers.arrivals())
    .filter((arrival) => backlog.ids.has(arrival.experienceId))
    .map((arrival) => arrival.at)
    .sort((a, b) => a - b);
  const received = times.length;
  const spanMs = received > 1 ? times.at(-1) - times[0] : null;
  const { ids, ...counts } = backlog;
  return {
    ...counts,
    received,
    firstToLastSeconds: spanMs === null ? null : Math.round(spanMs) / 1000,
    deliveriesPerSecond: spanMs ? Math.round(((received - 1) * 1000) / spanMs) : null,
  };
}

/**
 * What delivers for one configuration: the dispatcher inside serve (SQLite), or N workers
 * beside a serve that does not dispatch (PostgreSQL).
 */
export class Deployment {
  constructor(processes, env, workerCount) {
    this.processes = processes;
    this.workerCount = workerCount;
    this.dispatchingEnv = workerCount > 0 ? { ...env, DISPATCHER_IN_SERVE: 'false' } : env;
    this.quietEnv = { ...env, DISPATCHER_IN_SERVE: 'false' };
    this.workerEnv = env;
    this.server = null;
    this.workers = [];
  }

  /** Starts serve (and the workers); resolves with { skipped } when there is no worker command. */
  async start() {
    this.server = await startServe(this.processes, this.dispatchingEnv);
    return this.#startWorkers();
  }

  /**
   * Starts the workers together (so none gets a head start on a backlog); resolves with
   * { skipped } or { started: pids of the new workers }.
   */
  async #startWorkers() {
    const names = Array.from({ length: this.workerCount }, (_, n) => `restwire worker ${n + 1}`);
    const workers = await Promise.all(names.map((name) => startWorker(this.processes, this.workerEnv, name)));
    const missing = workers.find((worker) => worker.skipped);
    if (missing) return missing;
    this.workers.push(...workers);
    return { started: workers.map((worker) => worker.pid) };
  }

  /** Stops whatever dispatches, keeping the API up. */
  async pauseDispatch() {
    if (this.workerCount > 0) {
      await Promise.all(this.workers.splice(0).map((worker) => worker.stop()));
    } else {
      await this.server.stop();
      this.server = await startServe(this.processes, this.quietEnv);
    }
  }

  /**
   * Starts dispatching again (SQLite: a fresh serve, which picks up due work at start-up).
   * Resolves with { skipped } or { started: pids of the processes it started }.
   */
  async resumeDispatch() {
    if (this.workerCount > 0) return this.#startWorkers();
    await this.server.stop();
    this.server = await startServe(this.processes, this.dispatchingEnv);
    return { started: [this.server.pid] };
  }

  get pids() {
    return [this.server.pid, ...this.workers.map((worker) => worker.pid)];
  }

  async stop() {
    await Promise.all(this.workers.splice(0).map((worker) => worker.stop()));
    await this.server?.stop();
  }
}

/** Peak RSS in MiB as { serve, workers: [] } from a watcher over `Deployment.pids`. */
function peaksOf(watcher) {
  const [serve, ...workers] = watcher.stop().map(mib);
  return { serve, workers };
}

/** One configuration: fresh store, serve (+ workers), 10 webhooks, both phases. */
async function runConfiguration(processes, receivers, config, options, log) {
  const store = await freshStore(processes, { databaseUrl: config.databaseUrl, redisUrl: options.redisUrl });
  const deployment = new Deployment(processes, restwireEnv(store), config.workers);
  const wait = { stallMs: options.stallMs, maxWaitMs: options.maxWaitMs };
  const skipped = (reason) => {
    log(`  ${config.label.name}: skipped: ${reason}`);
    return { ...config.label, skipped: reason };
  };
  try {
    const started = await deployment.start();
    if (started.skipped) return skipped(started.skipped);
    const bearer = await bearerAuth(deployment.server);
    const authorization = bearer.authorization ?? basicAuth;
    for (let hook = 0; hook < HOOKS; hook++) {
      const created = await createWebhook(deployment.server, authorization, receivers.url(hook), { ordering: options.ordered ? 'record' : undefined });
      if (created.skipped) return skipped(created.skipped);
    }
    await sleep(500); // let the ten pings go out before anything is timed

    log(`  ${config.label.name}: steady ${options.eventRate} events/s for ${options.steadySeconds} s …`);
    let watcher = watchPeakRss(deployment.pids);
    let steady;
    let steadyPeaks;
    try {
      steady = await steadyPhase(deployment.server, authorization, receivers, {
        eventRate: options.eventRate,
        seconds: options.steadySeconds,
        wait,
      });
    } finally {
      steadyPeaks = peaksOf(watcher);
    }

    log(`  ${config.label.name}: backlog of ${options.events} events, then drain …`);
    await deployment.pauseDispatch();
    const committed = await commitBacklog(deployment.server, authorization, options.events);
    await receivers.reset();
    const resumed = await deployment.resumeDispatch();
    if (resumed.skipped) return skipped(resumed.skipped);
    // The processes started for the drain count from their start: their whole life is the phase.
    watcher = watchPeakRss(deployment.pids, { whole: resumed.started });
    let backlog;
    let drainPeaks;
    try {
      backlog = await drainBacklog(receivers, committed, wait);
    } finally {
      drainPeaks = peaksOf(watcher);
    }
    return {
      ...config.label,
      auth: bearer.skipped ? 'Basic' : 'Bearer',
      steady,
      backlog,
      peakRssMiB: { steady: steadyPeaks, drain: drainPeaks },
    };
  } finally {
    await deployment.stop();
  }
}

/** Adds to each result the targets, met or not. */
function judge(results) {
  const measured = results.filter((result) => !result.skipped);
  for (const result of measured) {
    const targets = [];
    if (result.backend === 'sqlite') {
      const rate = result.backlog.deliveriesPerSecond;
      targets.push({ target: `≥ ${WEBHOOK_TARGETS.sqliteDeliveriesPerSecond} deliveries/s`, met: rate !== null && rate >= WEBHOOK_TARGETS.sqliteDeliveriesPerSecond });
    }
    const p99 = result.steady.commitToFirstAttemptP99Ms;
    const complete = result.steady.received === result.steady.expected;
    targets.push({ target: `p99 ≤ ${WEBHOOK_TARGETS.commitToFirstAttemptP99Ms} ms`, met: complete && p99 !== null && p99 <= WEBHOOK_TARGETS.commitToFirstAttemptP99Ms });
    const { steady, drain } = result.peakRssMiB;
    const rss = [steady.serve, ...steady.workers, drain.serve, ...drain.workers].filter((value) => value !== null);
    targets.push({ target: `RSS ≤ ${WEBHOOK_TARGETS.peakRssMiB} MiB`, met: rss.every((value) => value <= WEBHOOK_TARGETS.peakRssMiB) });
    if (result.backend === 'postgres' && result.workers === 2) {
      const one = measured.find((other) => other.backend === 'postgres' && other.workers === 1);
      if (one) targets.push({ target: 'faster than 1 worker', met: (result.backlog.deliveriesPerSecond ?? 0) > (one.backlog.deliveriesPerSecond ?? 0) });
    }
    result.targets = targets;
  }
  return results;
}

/**
 * Runs every configuration; resolves with their results.
 * `options`: { events, eventRate, steadySeconds, stallMs, maxWaitMs, databaseUrl, redisUrl }.
 */
export async function runWebhookThroughput(processes, options, log) {
  // --ordered: every webhook asks for per-record order (issue 14); each create is its own record.
  const ordered = options.ordered ? ', ordered webhooks' : '';
  const configurations = [{ label: { name: `SQLite, dispatcher in serve${ordered}`, backend: 'sqlite', workers: 0 }, workers: 0 }];
  if (options.databaseUrl) {
    for (const workers of [1, 2]) {
      configurations.push({
        label: { name: `PostgreSQL, ${workers} worker${workers > 1 ? 's' : ''}${ordered}`, backend: 'postgres', workers },
        workers,
        databaseUrl: options.databaseUrl,
      });
    }
  }
  const receivers = await Receivers.start(processes, HOOKS);
  const results = [];
  try {
    for (const config of configurations) {
      results.push(await runConfiguration(processes, receivers, config, options, log));
    }
  } finally {
    await receivers.stop();
  }
  return { hooks: HOOKS, redis: Boolean(options.redisUrl), events: options.events, eventRate: options.eventRate, steadySeconds: options.steadySeconds, results: judge(results) };
}
