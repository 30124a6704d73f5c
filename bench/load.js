// One load scenario: a warm-up (discarded, so the JIT and caches settle), then a timed
// autocannon run against 127.0.0.1 while the server's peak RSS is watched.
import autocannon from 'autocannon';
import { mib, processTree, watchPeakRss } from './memory.js';

/** Runs autocannon and resolves with its result (rejects on a setup error). */
function cannon(options) {
  return autocannon({ pipelining: 1, ...options });
}

/**
 * Measures one request shape against one server.
 * `request`: { path, method?, headers?, body? }; `server`: { url, pid };
 * `load`: { duration, warmup, connections }.
 * Resolves with a row of figures (requests/s, p50/p99 ms, non-2xx, peak RSS MiB).
 */
export async function measure(server, request, load) {
  const options = {
    url: `${server.url}${request.path}`,
    method: request.method ?? 'GET',
    headers: request.headers ?? {},
    body: request.body,
    connections: load.connections,
  };
  if (load.warmup > 0) await cannon({ ...options, duration: load.warmup });
  // A cluster's workers are the server's children: its memory is theirs and its own together.
  const memory = watchPeakRss(processTree(server.pid));
  let result;
  let peak;
  try {
    result = await cannon({ ...options, duration: load.duration });
  } finally {
    const peaks = memory.stop();
    peak = peaks.some((p) => p === null) ? null : peaks.reduce((sum, p) => sum + p, 0);
  }
  const codes = Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, { count }]) => [code, count]));
  return {
    requestsPerSecond: Math.round(result.requests.mean),
    requests: result.requests.total,
    seconds: result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes: codes,
    peakRssMiB: mib(peak),
  };
}
