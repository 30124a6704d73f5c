import type { FastifyReply, FastifyRequest } from 'fastify';
import { AggregatorRegistry, Counter, Gauge, Registry, collectDefaultMetrics, type Metric, type MetricObjectWithValues, type MetricValue as PromMetricValue } from 'prom-client';

/** A registry's metrics as `getMetricsAsJSON` gives them: what another process sends for /metrics. */
export type MetricsJson = MetricObjectWithValues<PromMetricValue<string>>[];

/** Prometheus metrics (API.md §5); every name starts with `restwire_` (API.md §6). */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'restwire_' });

  const requests = new RequestSeries();
  registry.registerMetric(requests.countMetric('restwire_http_requests_total', 'HTTP requests answered, by method, route and status.'));
  registry.registerMetric(
    requests.latencyMetric('restwire_http_request_duration_seconds', 'Time from request to response, by method and route.'),
  );

  /** onResponse hook: counts the request under its route pattern (never the raw URL, to bound labels). */
  function recordRequest(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    requests.record(request.method, request.routeOptions.url ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000);
    done();
  }

  // The shared rate-limit store (issue #4): while Redis is unreachable each process counts on its
  // own, so operators need to see when and how often that happened.
  const rateLimitStore = {
    outages: new Counter({
      name: 'restwire_rate_limit_store_outages_total',
      help: 'Times the shared rate-limit store (Redis) became unreachable; limits were per process until it returned.',
      registers: [registry],
    }),
    errors: new Counter({
      name: 'restwire_rate_limit_store_errors_total',
      help: 'Rate-limit operations the shared store (Redis) could not answer; the in-process fallback counted them.',
      registers: [registry],
    }),
  };

  // Event streams (STREAMS.md §4): counted, never logged per message.
  const streams = {
    open: new Gauge({ name: 'restwire_streams_open', help: 'Event streams open in this process.', registers: [registry] }),
    messages: new Counter({ name: 'restwire_stream_messages_total', help: 'Messages sent on event streams (keep-alive comments not counted).', registers: [registry] }),
  };

  // Families another process keeps (serve's dispatcher process, cli/dispatcher-process.ts), asked
  // for at each scrape; null when it cannot answer, and the scrape goes on without them.
  const sources: Array<() => Promise<MetricsJson | null>> = [];
  /** Adds another process's metrics to /metrics. */
  function include(source: () => Promise<MetricsJson | null>): void {
    sources.push(source);
  }
  /**
   * The /metrics body: this registry's families and the other processes'. prom-client rebuilds
   * theirs from JSON (AggregatorRegistry.aggregate, as for cluster workers) and merges the
   * registries (Registry.merge, which refuses a family kept on both sides: none is).
   */
  async function render(): Promise<string> {
    const others = (await Promise.all(sources.map((source) => source()))).filter((json): json is MetricsJson => json !== null);
    if (others.length === 0) return registry.metrics();
    return Registry.merge([registry, AggregatorRegistry.aggregate(others)]).metrics();
  }

  return { registry, recordRequest, rateLimitStore, streams, include, render };
}

export type Metrics = ReturnType<typeof createMetrics>;

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

interface MetricValue {
  metricName?: string;
  labels: Record<string, string | number>;
  value: number;
}

interface Series {
  readonly method: string;
  readonly route: string;
  readonly status: number;
  count: number;
  sum: number;
  /** Observations per bucket (not cumulative); the last slot is +Inf. */
  readonly buckets: number[];
}

/**
 * Request counts and latencies, kept as plain numbers per (method, route, status) and turned
 * into Prometheus series only when scraped. prom-client's labelled Counter and Histogram hash
 * their labels on every observation, which cost a fifth of a small GET's time (issue #6 profile).
 */
class RequestSeries {
  private readonly series = new Map<string, Series>();

  record(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${status} ${route}`;
    let series = this.series.get(key);
    if (series === undefined) {
      series = { method, route, status, count: 0, sum: 0, buckets: new Array<number>(LATENCY_BUCKETS.length + 1).fill(0) };
      this.series.set(key, series);
    }
    series.count++;
    series.sum += seconds;
    let bucket = 0;
    while (bucket < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[bucket]!) bucket++;
    series.buckets[bucket]!++;
  }

  countMetric(name: string, help: string): Metric {
    return this.metric(name, help, 'counter', () =>
      [...this.series.values()].map((s) => ({ labels: { method: s.method, route: s.route, status: String(s.status) }, value: s.count })),
    );
  }

  latencyMetric(name: string, help: string): Metric {
    return this.metric(name, help, 'histogram', () => {
      // The histogram is by method and route; statuses of one route are summed.
      const byRoute = new Map<string, { method: string; route: string; count: number; sum: number; buckets: number[] }>();
      for (const s of this.series.values()) {
        const key = `${s.method} ${s.route}`;
        const total = byRoute.get(key) ?? { method: s.method, route: s.route, count: 0, sum: 0, buckets: new Array<number>(s.buckets.length).fill(0) };
        total.count += s.count;
        total.sum += s.sum;
        s.buckets.forEach((n, i) => (total.buckets[i]! += n));
        byRoute.set(key, total);
      }
      return [...byRoute.values()].flatMap(({ method, route, count, sum, buckets }) => {
        let cumulative = 0;
        const values: MetricValue[] = LATENCY_BUCKETS.map((le, i) => {
          cumulative += buckets[i]!;
          return { metricName: `${name}_bucket`, labels: { le, method, route }, value: cumulative };
        });
        values.push({ metricName: `${name}_bucket`, labels: { le: '+Inf', method, route }, value: count });
        values.push({ metricName: `${name}_sum`, labels: { method, route }, value: sum });
        values.push({ metricName: `${name}_count`, labels: { method, route }, value: count });
        return values;
      });
    });
  }

  private metric(name: string, help: string, type: 'counter' | 'histogram', values: () => MetricValue[]): Metric {
    // A minimal prom-client metric: the registry only calls get() when it renders /metrics.
    return { name, help, type, aggregator: 'sum', get: async () => ({ name, help, type, aggregator: 'sum', values: values() }) } as unknown as Metric;
  }
}
