// On a terminal, one line per request (http/logging.ts loads this only there).

import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

/**
 * On a terminal, Fastify's two request lines ("incoming request", "request completed") become one,
 * `GET /api/v1/experiences/ 200 3.1 ms`, written once the response is sent. The URL is the path
 * and query as sent; credentials never travel there.
 */
export class OneLinePerRequest extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const line = `${request.method} ${request.url} ${reply.statusCode} ${reply.elapsedTime.toFixed(1)} ms`;
    if (error) reply.log.error({ err: error }, line);
    else reply.log.info(line);
  }
}
