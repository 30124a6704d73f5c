/**
 * Typed API errors. Routes throw these; `problem-handler.ts` alone turns them into
 * `application/problem+json` (RFC 9457) responses, so no route builds an error body itself.
 */
export type FieldErrors = Record<string, string[]>;

/** The base of every error a client may see; `code` is stable and becomes the problem `type`. */
export class ApiError extends Error {
  readonly status: number = 500;
  readonly code: string = 'server_error';
  readonly title: string = 'Internal Server Error';
  /** Extra response headers (WWW-Authenticate, Allow, Retry-After …). */
  readonly headers: Record<string, string> = {};
  /** Extra members of the problem body (e.g. `errors`, `available`). */
  readonly extensions: Record<string, unknown> = {};

  constructor(detail?: string) {
    super(detail);
    this.name = new.target.name;
  }

  get detail(): string {
    return this.message || this.title;
  }
}

export class ParseError extends ApiError {
  override readonly status = 400;
  override readonly code = 'parse_error';
  override readonly title = 'Malformed request';
}

export class ValidationError extends ApiError {
  override readonly status = 400;
  override readonly code = 'validation_error';
  override readonly title = 'Invalid input';
  constructor(readonly errors: FieldErrors, detail = 'One or more fields are invalid.') {
    super(detail);
    this.extensions.errors = errors;
  }
}

/** Bad query parameter (limit, cursor, ordering, filters): a 400, never silently ignored. */
export class InvalidQuery extends ValidationError {}

export class AuthenticationFailed extends ApiError {
  override readonly status = 401;
  override readonly code: string = 'authentication_failed';
  override readonly title: string = 'Authentication failed';
  // RFC 9110 §11.6.1: a 401 must carry a challenge; Basic is the scheme every client knows.
  override readonly headers: Record<string, string> = { 'www-authenticate': 'Basic realm="api"' };
}

/** A rejected Bearer token (RFC 6750 §3.1): 401 on any method, with a Bearer challenge (API.md §6). */
export class InvalidToken extends AuthenticationFailed {
  override readonly code = 'invalid_token';
  override readonly title = 'Invalid token';
  // API.md §1 gives every 401 the same challenge, `Basic realm="api"`; the Bearer error is in
  // the problem body.
}

export class NotAuthenticated extends AuthenticationFailed {
  override readonly code = 'not_authenticated';
  override readonly title = 'Authentication required';
  constructor(detail = 'Authentication credentials were not provided.') {
    super(detail);
  }
}

export class PermissionDenied extends ApiError {
  override readonly status = 403;
  override readonly code: string = 'permission_denied';
  override readonly title: string = 'Permission denied';
  constructor(detail = 'You do not have permission to perform this action.') {
    super(detail);
  }
}

/**
 * A request outside an API key's scopes (ACCESS.md §5), with RFC 6750 §3.1's challenge so a
 * client can tell it from a permission the user lacks.
 */
export class InsufficientScope extends PermissionDenied {
  override readonly code = 'insufficient_scope';
  override readonly title = 'Insufficient scope';
  override readonly headers: Record<string, string> = { 'www-authenticate': 'Bearer error="insufficient_scope"' };
  constructor(detail = 'This API key’s scopes do not allow this request.') {
    super(detail);
  }
}

export class NotFound extends ApiError {
  override readonly status = 404;
  override readonly code = 'not_found';
  override readonly title = 'Not found';
  constructor(detail = 'No resource at this address.') {
    super(detail);
  }
}

export class MethodNotAllowed extends ApiError {
  override readonly status = 405;
  override readonly code = 'method_not_allowed';
  override readonly title = 'Method not allowed';
  constructor(method: string, allowed: readonly string[]) {
    super(`Method ${method} is not allowed here.`);
    this.headers.allow = allowed.join(', ');
  }
}

export class NotAcceptable extends ApiError {
  override readonly status = 406;
  override readonly code = 'not_acceptable';
  override readonly title = 'Not acceptable';
  constructor(available: readonly string[]) {
    super(`Could not satisfy the Accept header; available: ${available.join(', ')}.`);
    this.extensions.available = available;
  }
}

/** The request (headers or body) did not arrive in time (the server's requestTimeout). */
export class RequestTimeout extends ApiError {
  override readonly status = 408;
  override readonly code = 'request_timeout';
  override readonly title = 'Request timeout';
  override readonly headers: Record<string, string> = { connection: 'close' };
}

export class PreconditionFailed extends ApiError {
  override readonly status = 412;
  override readonly code = 'precondition_failed';
  override readonly title = 'Precondition failed';
  constructor(detail = 'If-Match does not match the current representation.') {
    super(detail);
  }
}

export class PayloadTooLarge extends ApiError {
  override readonly status = 413;
  override readonly code = 'payload_too_large';
  override readonly title = 'Payload too large';
}

export class UnsupportedMediaType extends ApiError {
  override readonly status = 415;
  override readonly code = 'unsupported_media_type';
  override readonly title = 'Unsupported media type';
  constructor(contentType: string, supported: readonly string[]) {
    super(`Unsupported media type "${contentType}"; send one of: ${supported.join(', ')}.`);
    this.extensions.supported = supported;
  }
}

/** RFC 6585 §5: the request's header section is larger than the server reads. */
export class HeadersTooLarge extends ApiError {
  override readonly status = 431;
  override readonly code = 'headers_too_large';
  override readonly title = 'Request header fields too large';
}

export class Throttled extends ApiError {
  override readonly status = 429;
  override readonly code = 'throttled';
  override readonly title = 'Too many requests';
  constructor(readonly retryAfterSeconds: number, detail?: string) {
    super(detail ?? `Request was throttled. Expected available in ${retryAfterSeconds} seconds.`);
    this.headers['retry-after'] = String(retryAfterSeconds);
  }
}

/** One stream more than STREAM_MAX_PER_USER for this caller in this process (STREAMS.md §1). */
export class TooManyStreams extends ApiError {
  override readonly status = 429;
  override readonly code = 'too_many_streams';
  override readonly title = 'Too many open streams';
  constructor(limit: number, retryAfterSeconds: number) {
    super(`At most ${limit} event streams may be open at once; close one first.`);
    this.headers['retry-after'] = String(retryAfterSeconds);
  }
}

export class ServiceUnavailable extends ApiError {
  override readonly status = 503;
  override readonly code = 'service_unavailable';
  override readonly title = 'Service unavailable';
}

/** The database cannot be reached or used for now (db/outage.ts); clients should retry. */
export class DatabaseUnavailable extends ServiceUnavailable {
  override readonly headers: Record<string, string> = { 'retry-after': '5' };
  constructor(detail = 'The database is not reachable; try again shortly.') {
    super(detail);
  }
}

/**
 * The client closed its connection before the answer (nginx's 499): no one reads this response.
 * Thrown by long work (a batch) to roll back what it did for a caller that is gone (REQUESTS.md §4).
 */
export class ClientClosedRequest extends ApiError {
  override readonly status = 499;
  override readonly code = 'client_closed_request';
  override readonly title = 'Client closed request';
}

/** The change conflicts with other records (a protected reference): nothing was changed. */
export class Conflict extends ApiError {
  override readonly status = 409;
  override readonly code = 'conflict';
  override readonly title = 'Conflict';
}

/** A request with this Idempotency-Key is still being processed (REQUESTS.md §1): retry later. */
export class IdempotencyKeyInUse extends ApiError {
  override readonly status = 409;
  override readonly code = 'idempotency_key_in_use';
  override readonly title = 'Request in progress';
  override readonly headers: Record<string, string> = { 'retry-after': '1' };
  constructor(detail = 'A request with this Idempotency-Key is still being processed; nothing was done. Retry shortly.') {
    super(detail);
  }
}

/** The Idempotency-Key was used with another request (method, path or body) (REQUESTS.md §1). */
export class IdempotencyKeyReused extends ApiError {
  override readonly status = 422;
  override readonly code = 'idempotency_key_reused';
  override readonly title = 'Idempotency-Key reused';
  constructor(detail = 'This Idempotency-Key was used with a different request (method, path or body); nothing was done.') {
    super(detail);
  }
}

/**
 * A request of a batch failed (REQUESTS.md §4): its status, title and errors, with its position
 * (`failed_index`) and the answers of the requests before it; nothing of the batch was stored.
 */
export class BatchRequestFailed extends ApiError {
  override readonly status: number;
  override readonly code: string;
  override readonly title: string;
  constructor(failed: ApiError, index: number, responses: readonly unknown[]) {
    super(failed.detail);
    this.status = failed.status;
    this.code = failed.code;
    this.title = failed.title;
    // A 403 or 412 carries no `errors` (REQUESTS.md §4); challenges stay with the batch itself.
    const { errors, ...extensions } = failed.extensions;
    Object.assign(this.extensions, extensions, errors !== undefined && failed.status !== 403 && failed.status !== 412 ? { errors } : {}, { failed_index: index, responses });
    for (const [name, value] of Object.entries(failed.headers)) if (name !== 'www-authenticate') this.headers[name] = value;
  }
}

/** The problem+json body of an error (RFC 9457), built once here for every response that carries one. */
export function problemBody(error: ApiError): { type: string; title: string; status: number; detail: string; [member: string]: unknown } {
  return {
    type: `urn:restwire:problem:${error.code}`,
    title: error.title,
    status: error.status,
    detail: error.detail,
    ...error.extensions,
  };
}

/** The statuses a declaration's own code may answer with (LOGIC.md §3 `reject`). */
export const REJECT_STATUSES = [400, 403, 404, 409, 422] as const;
export type RejectStatus = (typeof REJECT_STATUSES)[number];

const REJECTED: Record<RejectStatus, { code: string; title: string }> = {
  400: { code: 'invalid', title: 'Invalid request' },
  403: { code: 'permission_denied', title: 'Permission denied' },
  404: { code: 'not_found', title: 'Not found' },
  409: { code: 'conflict', title: 'Conflict' },
  422: { code: 'unprocessable', title: 'Unprocessable content' },
};

// Marks a Rejected across copies of the package: a project's declarations may import another
// copy of restwire than the one serving them (as `isResource` allows).
const REJECTED_MARK = Symbol.for('restwire.rejected');

/** A request a declaration's hook or action refused with `reject(status, detail, errors?)` (LOGIC.md §3). */
export class Rejected extends ApiError {
  override readonly status: RejectStatus;
  override readonly code: string;
  override readonly title: string;
  readonly [REJECTED_MARK] = true;

  /** `error` as this copy's Rejected when it is one from any copy of the package; else null. */
  static from(error: unknown): Rejected | null {
    if (error instanceof Rejected) return error;
    if (typeof error !== 'object' || error === null || (error as Record<symbol, unknown>)[REJECTED_MARK] !== true) return null;
    const { status, message, extensions } = error as Rejected;
    return new Rejected(status, message, extensions.errors as FieldErrors | undefined);
  }

  constructor(status: RejectStatus, detail: string, errors?: FieldErrors) {
    super(detail);
    this.status = status;
    ({ code: this.code, title: this.title } = errors && status === 400 ? { code: 'validation_error', title: 'Invalid input' } : REJECTED[status]);
    if (errors) this.extensions.errors = errors;
  }
}
