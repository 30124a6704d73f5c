// The fixed components of the OpenAPI document, the same whatever is declared: the Problem schema
// and the problem responses (API.md §1), the shared headers and parameters, the security schemes
// (API.md §3); and the small builders that point at them (`ref`, `problems`, `success`), which
// every operation uses.

import { DEFAULT_LIMIT, MAX_LIMIT } from '../../http/pagination.js';
import { BODY_LIMIT } from '../../http/parsers.js';
import { PROBLEM_TYPE } from '../../http/problem-handler.js';
import type { HeaderObject, MediaTypeObject, OpenApiDocument, ParameterObject, Reference, ResponseObject, SchemaObject, SecuritySchemeObject } from './types.js';

/** A reference to a component of this document: `ref('schemas', 'Problem')`. */
export const ref = (kind: keyof OpenApiDocument['components'], name: string): Reference => ({ $ref: `#/components/${kind}/${name}` });

/** The security schemes (API.md §3), tried in this order; no credentials at all is an anonymous caller. */
export const SECURITY_SCHEMES: Record<string, SecuritySchemeObject> = {
  basicAuth: { type: 'http', scheme: 'basic', description: 'Username and password (RFC 7617). Wrong credentials are a 401 on any method.' },
  bearerAuth: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: 'An access token from `POST /api/v1/auth/token/`, renewed with `POST /api/v1/auth/token/refresh/`.',
  },
  cookieAuth: {
    type: 'apiKey',
    in: 'cookie',
    name: 'sessionid',
    description: 'The session cookie set by `POST /api/v1/auth/session/`. Unsafe methods also need `X-CSRFToken` equal to the `csrftoken` cookie.',
  },
};

/** An operation's `security` when it needs credentials: any one scheme. */
export const ANY_SCHEME = Object.keys(SECURITY_SCHEMES).map((name) => ({ [name]: [] as string[] }));
/** An operation's `security` when an anonymous caller may call it too. */
export const ANONYMOUS_OR_ANY_SCHEME = [...ANY_SCHEME, {}];

/** The response headers operations refer to (`#/components/headers/…`). */
export const HEADERS: Record<string, HeaderObject> = {
  'X-Rate-Limit-Limit': { description: 'Requests allowed in the current window.', schema: { type: 'integer', minimum: 0 } },
  'X-Rate-Limit-Remaining': { description: 'Requests left in the current window, this one counted.', schema: { type: 'integer', minimum: 0 } },
  'X-Rate-Limit-Reset': { description: 'Seconds until the current window ends (not a timestamp).', schema: { type: 'integer', minimum: 0 } },
  'Retry-After': { description: 'Seconds to wait before trying again.', schema: { type: 'integer', minimum: 1 } },
  ETag: { description: 'A strong entity tag of this representation, for `If-None-Match` and `If-Match`.', schema: { type: 'string' } },
  Location: { description: 'The path of the record created.', schema: { type: 'string', format: 'uri-reference' } },
  Link: { description: 'RFC 8288 links to the `next` and `prev` pages.', schema: { type: 'string' } },
  'WWW-Authenticate': { description: 'The challenge: `Basic realm="api"`.', schema: { type: 'string' } },
  Allow: { description: 'The methods this path has.', schema: { type: 'string' } },
  'Set-Cookie': { description: 'The `sessionid` (HttpOnly) and `csrftoken` cookies, set or cleared.', schema: { type: 'string' } },
  'Cache-Control': { description: '`no-store`: the body holds a secret or credentials.', schema: { type: 'string' } },
  'X-Change-Position': {
    description: 'The position of the last change committed before this read (`0` before any): open the stream of this URL with `since` set to it to hear exactly the changes after the read.',
    schema: { type: 'integer', minimum: 0 },
  },
};

const RATE_LIMIT_HEADERS = {
  'X-Rate-Limit-Limit': ref('headers', 'X-Rate-Limit-Limit'),
  'X-Rate-Limit-Remaining': ref('headers', 'X-Rate-Limit-Remaining'),
  'X-Rate-Limit-Reset': ref('headers', 'X-Rate-Limit-Reset'),
};

/** `#/components/schemas/Problem`, the body of every error. */
export const PROBLEM_SCHEMA: SchemaObject = {
  type: 'object',
  description: 'An RFC 9457 problem. Extra members: `errors` for invalid input, `available` (406), `supported` (415).',
  required: ['type', 'title', 'status', 'detail'],
  properties: {
    type: { type: 'string', format: 'uri-reference', description: 'A stable identifier of the kind of problem.' },
    title: { type: 'string' },
    status: { type: 'integer', minimum: 400, maximum: 599 },
    detail: { type: 'string' },
    errors: {
      type: 'object',
      description: 'Messages per field or query parameter.',
      additionalProperties: { type: 'array', items: { type: 'string' } },
    },
  },
};

/** The problem responses (API.md §1 status codes), shared by every operation that can give them. */
const PROBLEMS: Record<number, { name: string; description: string; headers?: Record<string, Reference> }> = {
  400: { name: 'BadRequest', description: 'A malformed body, invalid fields or a bad query parameter; `errors` says which.' },
  401: {
    name: 'Unauthorized',
    description: 'Credentials are required, or the ones sent are wrong (on any method).',
    headers: { 'WWW-Authenticate': ref('headers', 'WWW-Authenticate') },
  },
  403: { name: 'Forbidden', description: 'Authenticated but not allowed (e.g. another user’s record, or a missing CSRF token).' },
  404: { name: 'NotFound', description: 'Nothing at this address.' },
  405: {
    name: 'MethodNotAllowed',
    description: 'The path does not have this method (answered before authentication).',
    headers: { Allow: ref('headers', 'Allow') },
  },
  406: { name: 'NotAcceptable', description: 'No offered media type satisfies `Accept`; `available` lists them.' },
  409: {
    name: 'Conflict',
    description: 'Other records refer to this one and protect it (the detail says how many), or a request with the same `Idempotency-Key` is still being processed (with `Retry-After`); nothing changed.',
  },
  412: { name: 'PreconditionFailed', description: '`If-Match` does not match the current representation.' },
  422: { name: 'IdempotencyKeyReused', description: 'The `Idempotency-Key` was used with a different request (method, path or body); nothing was done.' },
  413: { name: 'PayloadTooLarge', description: `The request body is larger than ${BODY_LIMIT / 1024 / 1024} MiB.` },
  415: { name: 'UnsupportedMediaType', description: 'The body’s `Content-Type` is not one this API reads; `supported` lists them.' },
  429: {
    name: 'TooManyRequests',
    description: 'The rate limit is used up; `Retry-After` says when to try again.',
    headers: { 'Retry-After': ref('headers', 'Retry-After') },
  },
};

/** `#/components/responses/…`: one per problem status, and `NotModified` (304). */
export function problemResponses(): Record<string, ResponseObject> {
  const responses: Record<string, ResponseObject> = {};
  for (const { name, description, headers } of Object.values(PROBLEMS)) {
    responses[name] = {
      description,
      headers: { ...headers, ...RATE_LIMIT_HEADERS },
      content: { [PROBLEM_TYPE]: { schema: ref('schemas', 'Problem') } },
    };
  }
  responses.NotModified = { description: 'Not modified: `If-None-Match` matched.', headers: { ETag: ref('headers', 'ETag'), ...RATE_LIMIT_HEADERS } };
  return responses;
}

/** The parameters operations share (`#/components/parameters/…`): paging and preconditions. */
export const PARAMETERS: Record<string, ParameterObject> = {
  limit: {
    name: 'limit',
    in: 'query',
    required: false,
    description: 'Records per page.',
    schema: { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT },
  },
  cursor: {
    name: 'cursor',
    in: 'query',
    required: false,
    description: 'An opaque position from a `next` or `previous` link; one the server did not issue is a 400.',
    schema: { type: 'string' },
  },
  since: {
    name: 'since',
    in: 'query',
    required: false,
    description: 'With `Accept: text/event-stream`: start the stream after this change position (an `X-Change-Position`); a position whose changes were pruned gets one `reset` message.',
    schema: { type: 'integer', minimum: 0 },
  },
  'Last-Event-ID': {
    name: 'Last-Event-ID',
    in: 'header',
    required: false,
    description: 'With `Accept: text/event-stream`: resume after this position (what `EventSource` sends when it reconnects); wins over `since`.',
    schema: { type: 'string' },
  },
  'If-None-Match': {
    name: 'If-None-Match',
    in: 'header',
    required: false,
    description: 'A 304 when it matches the current ETag.',
    schema: { type: 'string' },
  },
  'Idempotency-Key': {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    description:
      'Makes a retry safe (REQUESTS.md §1): 1–255 printable ASCII characters, no spaces; an authenticated caller only. The first request is processed and its answer stored for IDEMPOTENCY_TTL_HOURS; the same request again gets that answer with `Idempotent-Replayed: true`, a different one with the same key a 422, and one while the first is still processed a 409.',
    schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
  },
  'If-Match': {
    name: 'If-Match',
    in: 'header',
    required: false,
    description: 'A 412 when it does not match the current ETag.',
    schema: { type: 'string' },
  },
};

/** The problem responses of these statuses, as references: `problems(401, 404)`. */
export function problems(...statuses: number[]): Record<string, Reference> {
  return Object.fromEntries(statuses.map((status) => [String(status), ref('responses', PROBLEMS[status]!.name)]));
}

/** Success responses carry the rate-limit headers too (API.md §1: every response). */
export function success(description: string, extraHeaders: Record<string, Reference>, body?: Record<string, MediaTypeObject>): ResponseObject {
  return { description, headers: { ...extraHeaders, ...RATE_LIMIT_HEADERS }, ...(body ? { content: body } : {}) };
}

/** The `ETag` header of a GET's answer. */
export const ETAG = { ETag: ref('headers', 'ETag') };
/** The 304 a GET with a matching `If-None-Match` gets. */
export const NOT_MODIFIED = { '304': ref('responses', 'NotModified') };
