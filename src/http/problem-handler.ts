import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, NotFound, ParseError, PayloadTooLarge, UnsupportedMediaType } from './errors.js';
import { SUPPORTED_MEDIA_TYPES } from './parsers.js';
import { API_PREFIX, requestPath } from './pipeline.js';

/**
 * The one place errors become responses: `application/problem+json` (RFC 9457) with `type`,
 * `title`, `status`, `detail` and any extensions, plus the error's headers. Never a stack trace.
 */
export const PROBLEM_TYPE = 'application/problem+json';

/** Maps Fastify's own coded errors (body limit, bad content length …) onto ApiErrors. */
function fromFastify(error: FastifyError): ApiError | null {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new PayloadTooLarge('The request body is larger than 1 MiB.');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new UnsupportedMediaType(String(error.message), SUPPORTED_MEDIA_TYPES);
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ParseError(error.message);
    default:
      if (error.statusCode === 404) return new NotFound();
      if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
        return new ParseError(error.message);
      }
      return null;
  }
}

/** Sends an ApiError as problem+json. */
export function sendProblem(reply: FastifyReply, error: ApiError): void {
  const body = {
    type: `urn:restwire:problem:${error.code}`,
    title: error.title,
    status: error.status,
    detail: error.detail,
    ...error.extensions,
  };
  reply.code(error.status).headers(error.headers).header('content-type', `${PROBLEM_TYPE}; charset=utf-8`).send(JSON.stringify(body));
}

/** Fastify error handler: any thrown value becomes a problem response; 5xx are logged. */
export function problemHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const apiError = error instanceof ApiError ? error : fromFastify(error);
  if (apiError === null || apiError.status >= 500) {
    // The server's logger, with the id named here: below LOG_LEVEL=info requests have no child
    // logger of their own (app.ts).
    request.server.log.error({ err: error, reqId: request.id }, 'request failed');
  }
  sendProblem(reply, apiError ?? new ApiError('The server could not complete the request.'));
}

/** Unknown paths: 308 to the trailing-slash form under /api/v1 (API.md §6), else a 404 problem. */
export function notFoundHandler(request: FastifyRequest, reply: FastifyReply): void {
  const [path, query] = requestPath(request.url);
  if ((path === '/api/v1' || path.startsWith(API_PREFIX)) && !path.endsWith('/')) {
    reply.redirect(`${path}/${query}`, 308);
    return;
  }
  sendProblem(reply, new NotFound());
}

/**
 * Errors Fastify raises before routing (a URL that is not valid percent-encoding): still a
 * problem+json body, never Fastify's own format. They are not counted by the rate limit, since
 * no hook has run (API.md §1).
 */
export function frameworkErrorHandler(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  sendProblem(reply, error.code === 'FST_ERR_BAD_URL' ? new ParseError('The request URL is malformed.') : new ParseError(error.message));
}
