// One load scenario: a warm-up (discarded, so the JIT and caches settle), then a timed
// autocannon run against 127.0.0.1 while the server's peak RSS is watched.
import autocannon from 'autocannon';
import { cpuSeconds, mib, processTree, watchCpu, watchPeakRss, watchPeakTree } from './memory.js';

/** Runs autocannon and resolves with its result (rejects on a setup error). */
function cannon(options) {
  return autocannon({ pipelining: 1, ...options });
}

/**
 * Measures one request shape against one server.
 * `request`: { path, method?, headers?, body? }; `server`: { url, pid };
 * `load`: { duration, warmup, connections }.
 * Resolves with a row of figures (requests/s, p50/p99 ms, non-2xx, peak RSS MiB, and the
 * server's CPU time per request in µs, user + kernel, where /proc can tell).
 * `groups`, when given, resolves with other processes to watch ([{ name, pids }]: a database's
 * backends, Redis); the row's `machineCpu` then says where the CPU went (memory.js watchCpu).
 * `probe`, when given, is called before the timed run and resolves with a function that, called
 * after it, resolves with counts of what happened meanwhile ({ name: number }), the row's `probed`.
 * `request.beside`, when given ({ request, connections }), is a second load on the same server
 * during the warm-up and the timed run (writers beside readers): the row's figures are the main
 * load's, with the second's requests/s as `besideRequestsPerSecond` (its non-2xx added to the row's).
 */
export async function measure(server, request, load, { groups = null, probe = null } = {}) {
  const options = {
    url: `${server.url}${request.path}`,
    method: request.method ?? 'GET',
    headers: request.headers ?? {},
    body: request.body,
    connections: load.connections,
  };
  // A request whose path changes per send (bench/growth.js: rotating ids, defeating the
  // representation cache): autocannon calls `setupRequest(request)` before each one.
  if (request.setupRequest) options.requests = [{ method: options.method, setupRequest: request.setupRequest }];
  const beside = request.beside
    ? (duration) =>
        cannon({
          url: `${server.url}${request.beside.request.path}`,
          method: request.beside.request.method ?? 'GET',
          headers: request.beside.request.headers ?? {},
          body: request.beside.request.body,
          connections: request.beside.connections,
          duration,
        })
    : null;
  if (load.warmup > 0) await Promise.all([cannon({ ...options, duration: load.warmup }), beside?.(load.warmup)]);
  // A cluster's workers are the server's children: its memory is theirs and its own together.
  const tree = processTree(server.pid);
  const memory = watchPeakRss(tree);
  // Several processes: what they take together, their shared pages once (the summed RSS counts them in each).
  const together = tree.length > 1 ? watchPeakTree(tree) : null;
  const machine = groups ? watchCpu(await groups()) : null;
  const probed = probe ? await probe() : null;
  const cpuBefore = cpuSeconds(tree);
  let result;
  let besideResult = null;
  let peak;
  let ownPeak;
  let machineCpu = null;
  try {
    [result, besideResult] = await Promise.all([cannon({ ...options, duration: load.duration }), beside?.(load.duration) ?? null]);
  } finally {
    const peaks = memory.stop();
    const treePeak = together?.stop() ?? null;
    peak = together ? treePeak : peaks.some((p) => p === null) ? null : peaks.reduce((sum, p) => sum + p, 0);
    ownPeak = peaks[0] ?? null;
    machineCpu = machine?.stop() ?? null;
  }
  const cpuAfter = cpuSeconds(tree);
  const counts = probed ? await probed() : null;
  const cpu = cpuBefore && cpuAfter ? cpuAfter.user + cpuAfter.system - cpuBefore.user - cpuBefore.system : null;
  const codes = Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, { count }]) => [code, count]));
  return {
    requestsPerSecond: Math.round(result.requests.mean),
    requests: result.requests.total,
    seconds: result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx + (besideResult?.non2xx ?? 0),
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes: codes,
    // One process: its peak RSS. Several (serve and its dispatcher process, a cluster): the peak
    // of the first one's RSS plus its children's private memory, each shared page once (memory.js, watchPeakTree).
    peakRssMiB: mib(peak),
    // The server's own process (serve, or a cluster's primary), its peak RSS, without its
    // children: equal to peakRssMiB when it has none.
    ownPeakRssMiB: mib(ownPeak),
    cpuSeconds: cpu,
    cpuUsPerRequest: cpuPerRequest(cpu, result.requests.total),
    machineCpu,
    probed: counts,
    ...(besideResult ? { besideRequests: besideResult.requests.total } : {}),
  };
}

const cpuPerRequest = (seconds, requests) => (seconds === null || requests === 0 ? null : Math.round((seconds * 1e7) / requests) / 10);

/**
 * Measures several (server, request) pairs in alternating slices, each round in the other order
 * (A B C, C B A, A B C …), so that none always runs second — on a busier machine, or on a table
 * the one before it just grew — nor always first after another's warm-up, and ratios between
 * them hold even when other work comes and goes on the machine (issues #13, #20).
 * `pairs`: [{ server, request, groups?, probe? }] (`groups`, `probe` as for measure). Each pair
 * gets its own warm-up, then `rounds` slices of duration/rounds seconds (at least 1); its row adds
 * the slices up (requests/s over the whole time; p50 the mean of the slices', p99 the worst
 * slice's, peak RSS the highest; CPU and probed counts summed).
 */
export async function measureAlternating(pairs, load, rounds = alternatingRounds(load)) {
  const slice = { ...load, warmup: 0, duration: Math.max(1, Math.round(load.duration / rounds)) };
  const slices = pairs.map(() => []);
  for (const { server, request } of pairs) if (load.warmup > 0) await measure(server, request, { ...load, duration: load.warmup, warmup: 0 });
  for (let round = 0; round < rounds; round++) {
    const order = [...pairs.keys()];
    if (round % 2 === 1) order.reverse();
    for (const index of order) {
      const { server, request, groups, probe } = pairs[index];
      slices[index].push(await measure(server, request, slice, { groups, probe }));
    }
  }
  return slices.map((parts) => {
    const add = (name) => parts.reduce((sum, part) => sum + part[name], 0);
    const statusCodes = {};
    for (const part of parts) for (const [code, count] of Object.entries(part.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + count;
    const peaks = parts.map((part) => part.peakRssMiB);
    return {
      requestsPerSecond: Math.round(add('requests') / add('seconds')),
      requests: add('requests'),
      seconds: add('seconds'),
      p50Ms: Math.round((parts.reduce((sum, part) => sum + part.p50Ms, 0) / parts.length) * 10) / 10,
      p99Ms: Math.max(...parts.map((part) => part.p99Ms)),
      non2xx: add('non2xx'),
      errors: add('errors'),
      timeouts: add('timeouts'),
      statusCodes,
      peakRssMiB: peaks.some((peak) => peak === null) ? null : Math.max(...peaks),
      ownPeakRssMiB: parts.some((part) => part.ownPeakRssMiB === null) ? null : Math.max(...parts.map((part) => part.ownPeakRssMiB)),
      cpuSeconds: parts.some((part) => part.cpuSeconds === null) ? null : add('cpuSeconds'),
      cpuUsPerRequest: parts.some((part) => part.cpuSeconds === null) ? null : cpuPerRequest(add('cpuSeconds'), add('requests')),
      machineCpu: addMachineCpu(parts.map((part) => part.machineCpu)),
      probed: parts[0].probed ? Object.fromEntries(Object.keys(parts[0].probed).map((name) => [name, parts.reduce((sum, part) => sum + part.probed[name], 0)])) : null,
      ...(parts[0].besideRequests !== undefined ? { besideRequestsPerSecond: Math.round(add('besideRequests') / add('seconds')) } : {}),
      slices: parts.length,
    };
  });
}

/** The slices' watchCpu figures added up (a figure null where any slice's was), or null when none were watched. */
function addMachineCpu(figures) {
  if (figures.some((figure) => figure === null)) return null;
  const sum = (read) => (figures.some((figure) => read(figure) === null) ? null : figures.reduce((total, figure) => total + read(figure), 0));
  return {
    wallSeconds: sum((figure) => figure.wallSeconds),
    groups: Object.fromEntries(Object.keys(figures[0].groups).map((name) => [name, sum((figure) => figure.groups[name])])),
    loadGenerator: sum((figure) => figure.loadGenerator),
    machine: sum((figure) => figure.machine),
  };
}

/** Slices of about 2 s: 5 rounds of a 10 s scenario, 2 rounds of a 1 s one (--quick). */
function alternatingRounds(load) {
  return Math.max(2, Math.min(5, Math.round(load.duration / 2)));
}
