import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isDatabaseUnavailable, isPreparedStatementOutdated, isTransactionConflict, type DatabaseOutage } from '../db/outage.js';
import { ApiError, DatabaseUnavailable, problemBody, HeadersTooLarge, NotFound, ParseError, PayloadTooLarge, RequestTimeout, UnsupportedMediaType } from './errors.js';
import { SUPPORTED_MEDIA_TYPES } from './parsers.js';
import { renderProblemPage } from './browsable/index.js';
import { API_PREFIX, requestPath, requestTarget } from './pipeline.js';
import { CONTENT_TYPES, HTML_TYPE } from './renderers.js';
import { BROWSABLE_SECURITY_HEADERS, SECURITY_HEADERS } from './security-headers.js';

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

/** Sends an ApiError as problem+json; without `challenge`, a 401 carries no WWW-Authenticate. */
export function sendProblem(reply: FastifyReply, error: ApiError, { challenge = true } = {}): void {
  const body = problemBody(error);
  const { 'www-authenticate': _challenge, ...rest } = error.headers;
  reply.code(error.status).headers(challenge ? error.headers : rest).header('content-type', `${PROBLEM_TYPE}; charset=utf-8`).send(JSON.stringify(body));
}

/**
 * A browser that negotiated the browsable API (a GET with Accept: text/html) gets the problem as
 * a page it can act on (log in, wait), as DRF's browsable API does; everyone else problem+json.
 */
function sendProblemPage(request: FastifyRequest, reply: FastifyReply, error: ApiError): void {
  // No Basic challenge: the browser would put its own login dialog over the page's login link.
  const { 'www-authenticate': _challenge, ...headers_ } = error.headers;
  reply.code(error.status).headers(headers_).headers(BROWSABLE_SECURITY_HEADERS);
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (value !== undefined && !(name in BROWSABLE_SECURITY_HEADERS)) headers[name] = String(value);
  }
  const page = renderProblemPage(problemBody(error), { path: request.url, user: request.api?.identity?.user ?? null, headers });
  reply.header('content-type', CONTENT_TYPES[HTML_TYPE]).send(page);
}

/**
 * The Fastify error handler: any thrown value becomes a problem response; 5xx are logged, except
 * a database outage: a 503 with Retry-After, reported once per outage by `outage`, not a stack
 * per request (issue 11, finding 9).
 */
export function createProblemHandler(outage: DatabaseOutage) {
  return function problemHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
    let problem: ApiError;
    if (!(error instanceof ApiError) && isDatabaseUnavailable(error)) {
      outage.noted(error);
      problem = new DatabaseUnavailable();
    } else if (isPreparedStatementOutdated(error)) {
      // A write that ran into a migration made meanwhile: nothing was changed, and a retry works.
      problem = new DatabaseUnavailable('The database was migrated while this request ran; nothing was changed, try again.');
    } else if (isTransactionConflict(error)) {
      // A deadlock lost on every run (db/write-unit.ts transactAgainOnConflict): nothing was changed.
      problem = new DatabaseUnavailable('This write collided with others at the same moment; nothing was changed, try again.');
    } else {
      const apiError = error instanceof ApiError ? error : fromFastify(error);
      if (apiError === null || apiError.status >= 500) {
        // The server's logger, with the id named here: below LOG_LEVEL=info requests have no child
        // logger of their own (app.ts).
        request.server.log.error({ err: error, reqId: request.id }, 'request failed');
      }
      problem = apiError ?? new ApiError('The server could not complete the request.');
    }
    if (request.method === 'GET' && request.api?.mediaType === HTML_TYPE) sendProblemPage(request, reply, problem);
    // A browser answers a 401 with a Basic challenge with its own login dialog, even when a page's
    // script made the request; the browsable API's script asks for none (as Spring Security does).
    else sendProblem(reply, problem, { challenge: request.headers['x-requested-with'] !== 'XMLHttpRequest' });
  };
}

/** Unknown paths: 308 to the trailing-slash form under /api/v1 (API.md §6), else a 404 problem. */
export function notFoundHandler(request: FastifyRequest, reply: FastifyReply): void {
  const [path] = requestPath(request.url);
  if (path === '/' && (request.method === 'GET' || request.method === 'HEAD')) {
    // Nothing lives at the root: a browser (or `curl -L`) opening the bare host lands on the API
    // root instead of a 404 (issue 19). 302, not 308: the root may serve a page of its own one day.
    reply.redirect(API_PREFIX, 302);
    return;
  }
  if ((path === '/api/v1' || path.startsWith(API_PREFIX)) && !path.endsWith('/')) {
    // The Location keeps the path as sent, percent-encoded: decoded, `/api/v1/users/%00` put a
    // NUL in a header and answered 500 (found by the hostile-input drill).
    const [sent, query] = requestTarget(request.url);
    reply.redirect(`${sent}/${query}`, 308);
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
  // No onRequest hook has run, so securityHeaders has not either.
  reply.headers(SECURITY_HEADERS);
  sendProblem(reply, error.code === 'FST_ERR_BAD_URL' ? new ParseError('The request URL is malformed.') : new ParseError(error.message));
}

/**
 * Node's HTTP parser refuses some requests before Fastify sees them (`clientError`): headers over
 * the limit, bytes a request line may not hold, a request that did not arrive within
 * requestTimeout. Fastify's default answer is its own JSON; this writes the same problem+json as
 * every other error, on the raw socket, and closes it (issue 11, finding 12a). Not counted by the
 * rate limit: no request exists to count.
 */
export function clientErrorHandler(error: NodeJS.ErrnoException, socket: Socket): void {
  // A reset connection has no one to answer (https://nodejs.org/api/http.html#event-clienterror).
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // As Node's own handler: never write into the middle of a response already under way.
  if (socket.writable && socket.bytesWritten === 0) {
    const problem = fromClientError(error);
    const body = JSON.stringify(problemBody(problem));
    const headers = {
      ...SECURITY_HEADERS,
      ...problem.headers,
      'content-type': `${PROBLEM_TYPE}; charset=utf-8`,
      'content-length': String(Buffer.byteLength(body)),
      connection: 'close',
    };
    const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
    socket.write(`HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status]}\r\n${head}\r\n${body}`);
  }
  socket.destroy();
}

function fromClientError(error: NodeJS.ErrnoException): ApiError {
  switch (error.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new RequestTimeout('The request did not arrive in time.');
    case 'HPE_HEADER_OVERFLOW':
      return new HeadersTooLarge('The request headers are larger than the server accepts.');
    default:
      return new ParseError('The request is not valid HTTP/1.1.');
  }
}
