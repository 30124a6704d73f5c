import type { FastifyInstance } from 'fastify';
import type { Storage } from '../db/database.js';
import type { Metrics } from './metrics.js';
import { sendProblem } from './problem-handler.js';
import { DatabaseUnavailable } from './errors.js';

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
    reply.header('content-type', metrics.registry.contentType).send(await metrics.registry.metrics());
  });
}
