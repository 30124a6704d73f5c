import type { FastifyReply, FastifyRequest } from 'fastify';
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Prometheus metrics (API.md §5); every name starts with `restwire_` (API.md §6). */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'restwire_' });

  const requests = new Counter({
    name: 'restwire_http_requests_total',
    help: 'HTTP requests answered, by method, route and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'restwire_http_request_duration_seconds',
    help: 'Time from request to response, by method and route.',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });

  /** onResponse hook: counts the request under its route pattern (never the raw URL, to bound labels). */
  function recordRequest(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    const route = request.routeOptions.url ?? 'unmatched';
    requests.inc({ method: request.method, route, status: String(reply.statusCode) });
    latency.observe({ method: request.method, route }, reply.elapsedTime / 1000);
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

  return { registry, recordRequest, rateLimitStore };
}

export type Metrics = ReturnType<typeof createMetrics>;
