import type { FastifyInstance } from 'fastify';
import type { Storage } from '../db/database.js';
import type { Metrics } from './metrics.js';
import { sendProblem } from './problem-handler.js';
import { DatabaseUnavailable } from './errors.js';

/** How the OpenAPI document describes one of these endpoints (they are routes, not views). */
export interface OperationEndpoint {
  readonly path: string;
  readonly summary: string;
  /** By status: what it means, its media type and the JSON Schema of its body. */
  readonly responses: Readonly<Record<string, { description: string; mediaType: string; schema: Record<string, unknown> }>>;
}

/** `/healthz`, `/readyz` and `/metrics` as registered below, for the OpenAPI document (issue 22 item 19). */
export const OPERATION_ENDPOINTS: readonly OperationEndpoint[] = [
  {
    path: '/healthz',
    summary: 'Alive: the process answers.',
    responses: { '200': { description: 'Alive.', mediaType: 'application/json', schema: statusSchema({ status: 'ok' }) } },
  },
  {
    path: '/readyz',
    summary: 'Ready: the database is reachable.',
    responses: {
      '200': { description: 'Ready.', mediaType: 'application/json', schema: statusSchema({ status: 'ready', database: 'ok' }) },
      '503': { description: 'The database is not reachable.', mediaType: 'application/problem+json', schema: { $ref: '#/components/schemas/Problem' } },
    },
  },
  {
    path: '/metrics',
    summary: 'Prometheus metrics: requests, latencies, deliveries by outcome, queue depth.',
    responses: { '200': { description: 'The Prometheus text exposition format.', mediaType: 'text/plain', schema: { type: 'string' } } },
  },
];

function statusSchema(values: Record<string, string>): Record<string, unknown> {
  return {
    type: 'object',
    required: Object.keys(values),
    properties: Object.fromEntries(Object.entries(values).map(([name, value]) => [name, { type: 'string', enum: [value] }])),
  };
}

/** `/healthz`, `/readyz` and `/metrics` (API.md §5): outside /api/v1/, so never rate limited. */
export function registerOperations(app: FastifyInstance, { storage, metrics }: { storage: Storage; metrics: Metrics }): void {
  app.get('/healthz', async function healthz(_request, reply) {
    reply.header('cache-control', 'no-store').send({ status: 'ok' });
  });

  app.get('/readyz', async function readyz(_request, reply) {
    reply.header('cache-control', 'no-store');
    if (await storage.ping()) return reply.send({ status: 'ready', database: 'ok' });
    sendProblem(reply, new DatabaseUnavailable('The database is not reachable.'));
  });

  app.get('/metrics', async function metricsText(_request, reply) {
    reply.header('content-type', metrics.registry.contentType).send(await metrics.render());
  });
}
