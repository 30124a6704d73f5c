import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Authenticator, Identity, User } from './caller.js';
import type { RequestThrottle, ThrottleKey, ThrottleState } from './throttling/request-throttle.js';
import { entityTag, noneMatch } from './conditional.js';
import { readIdempotencyKey, takesIdempotencyKey, type Idempotency } from './idempotency.js';
import { InsufficientScope, MethodNotAllowed, NotAcceptable, NotAuthenticated, PermissionDenied, Throttled, type ApiError } from './errors.js';
import { EVENT_STREAM_TYPE, type StreamRegistry } from './event-stream.js';
import { negotiate } from './negotiation.js';
import { parseBody, type RequestData } from './parsers.js';
import { renderBrowsable } from './browsable/index.js';
import { BROWSABLE_SECURITY_HEADERS } from './security-headers.js';
import { CONTENT_TYPES, CSV_TYPE, HTML_TYPE, JSON_TYPE, renderCsv, renderJson, type Renderer } from './renderers.js';
import { RepresentationCache, ReuseTracker, type CachedRepresentation } from './representation-cache.js';
import { scopesAllow } from './scopes.js';
import { allowedMethods, type Action, type ApiRequest, type ApiResponse, type Method, type View } from './view.js';

/**
 * The request pipeline, in the order DRF's `APIView.initial()` reads, adapted to Fastify's
 * lifecycle. Every `/api/v1/` request runs these stages and no others:
 *
 *   initial  (onRequest, headers only)   route → 405 → negotiate → authenticate → throttle
 *   (Fastify reads the body, up to 1 MiB → 413)
 *   dispatch (route handler)              [initial, for a GET or HEAD: no body to read first]
 *                                         permit → Idempotency-Key (replay, or handle in a write
 *                                         unit that stores the response: idempotency.ts)
 *                                         → handle (parses the body on first use) → render
 *                                         (a GET whose action has a `version` may reuse its last rendering)
 *
 * Throttling runs for every request that reaches `initial`, even one refused on the way (API.md
 * §1: rate-limit headers on every response; "every request costs 1"), which is why it sits
 * before the permission check instead of after it as in DRF.
 */
export const API_PREFIX = '/api/v1/';

/**
 * Whether a request path (`requestPath`) is an API path, counted and given X-Rate-Limit-*
 * headers. `/api/v1` without its slash is one too: the not-found handler answers it with a 308
 * (API.md §1, §6).
 */
export function isApiRequest(path: string): boolean {
  return path.startsWith(API_PREFIX) || path === '/api/v1';
}

const ABSOLUTE_FORM = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i;

/**
 * The request target as the router matched it, split into path and query (`?…` or ''): an
 * absolute-form target (RFC 9112 §3.2.2, `GET http://host/api/v1/`) loses its scheme and
 * authority, and percent-escapes of unreserved characters are decoded (`/%61pi/` is `/api/`).
 * Deciding from the raw URL instead let such requests reach a view without the pipeline's first
 * stage: unthrottled, and a 500 (issue 11, finding 7).
 */
export function requestPath(url: string): [path: string, query: string] {
  let [path, query] = requestTarget(url);
  if (path.includes('%')) {
    try {
      // decodeURI leaves escapes of reserved characters (%2F, %3F …) alone, as the router does.
      path = decodeURI(path);
    } catch {
      // Not valid percent-encoding: Fastify has refused it already (FST_ERR_BAD_URL).
    }
  }
  return [path, query];
}

/**
 * The request target split into path and query as sent, still percent-encoded; an absolute-form
 * target loses its scheme and authority. What a `Location` built from the request may hold.
 */
export function requestTarget(url: string): [path: string, query: string] {
  const queryStart = url.indexOf('?');
  let path = queryStart === -1 ? url : url.slice(0, queryStart);
  const query = queryStart === -1 ? '' : url.slice(queryStart);
  if (path.charCodeAt(0) !== 47) path = path.replace(ABSOLUTE_FORM, '') || '/';
  return [path, query];
}

/** Per-request state the stages hand on to each other. */
export interface ApiState {
  view: View | null;
  /** The normalised path and query (`requestPath`): what views, links and caches see. */
  path: string;
  query: string;
  mediaType: string;
  identity: Identity | null;
  throttle: ThrottleState | null;
  /** The count a shared store has not answered yet, when the request's read may run meanwhile (`initial`). */
  counting: Promise<void> | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    api: ApiState | null;
  }
  interface FastifyContextConfig {
    view?: View;
  }
}

export interface PipelineOptions {
  /** Tried in order; the first that recognises the request decides (API.md §3). */
  readonly authenticators: readonly Authenticator[];
  readonly throttle: RequestThrottle;
  /** Keyed POST and PATCH requests (REQUESTS.md §1); without it the header is ignored. */
  readonly idempotency?: Idempotency;
  /** Opens the event streams GETs ask for (STREAMS.md §1). */
  readonly streams: StreamRegistry;
}

/** The refusal DRF gives: 401 when the caller did not authenticate, 403 when they did. */
export function permissionDenied(identity: Identity | null): ApiError {
  return identity === null ? new NotAuthenticated() : new PermissionDenied();
}

/**
 * The permit stage: the action `method` runs on `view`, if an API key's scopes allow it (ACCESS.md
 * §5) and then the action's permission does (401 / 403). A batch's requests pass it one by one.
 */
export function permittedAction(view: View, method: Method, identity: Identity | null): Action {
  const scopes = identity?.scopes;
  if (scopes !== undefined && !scopesAllow(scopes, view.keyAccess, method)) throw new InsufficientScope();
  const action = view.actions[method === 'HEAD' ? 'GET' : (method as keyof View['actions'])];
  if (action === undefined) throw new MethodNotAllowed(method, allowedMethods(view));
  if (!action.permission.hasPermission({ method, user: identity?.user ?? null })) throw permissionDenied(identity);
  return action;
}

export function createPipeline({ authenticators, throttle, idempotency, streams }: PipelineOptions) {
  const representations = new RepresentationCache();
  // Pages filtered per caller (ACCESS.md §6), by caller: many callers' pages, so bounded by their
  // total size too (a page of 100 is some 30 KB; 1,000 users in turn must not grow the process by
  // more than 20 MiB, issue 18).
  const callerRepresentations = new RepresentationCache({ maxEntries: 1_000, maxTotalLength: 6 * 1024 * 1024 });
  // Actions whose responses are rarely reused (records read under steady writes) skip the token.
  const reuse = new ReuseTracker<Action>();

  async function authenticate(request: FastifyRequest): Promise<Identity | null> {
    for (const authenticator of authenticators) {
      const identity = await authenticator.authenticate(request);
      if (identity) return identity;
    }
    return null;
  }

  function throttleKey(request: FastifyRequest, state: ApiState): ThrottleKey {
    return state.identity ? { userId: state.identity.user.id } : { ip: request.ip };
  }

  /** Counts the request; at once when counted in memory, else a promise of the count (Redis). */
  function applyThrottle(request: FastifyRequest, reply: FastifyReply, state: ApiState): Promise<void> | undefined {
    const counted = throttle.hit(throttleKey(request, state));
    if (counted instanceof Promise) return counted.then((result) => applyCount(reply, state, result));
    applyCount(reply, state, counted);
  }

  function applyCount(reply: FastifyReply, state: ApiState, result: ThrottleState): void {
    state.throttle = result;
    reply.header('x-rate-limit-limit', result.limit);
    reply.header('x-rate-limit-remaining', result.remaining);
    reply.header('x-rate-limit-reset', result.resetSeconds);
    if (!result.allowed) throw new Throttled(Math.max(1, result.resetSeconds));
  }

  /**
   * Stage 1 as an onRequest hook, for requests that may carry a body: they are refused (405,
   * 406, 401, 429) before Fastify reads it. A GET or HEAD to a view has none to read, so its
   * stage 1 runs at the top of `dispatch` instead: the same stages in the same order, without a
   * hook stage and its promise on the way (issue 21, GET one's cost).
   */
  function onRequest(request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void {
    if ((request.method === 'GET' || request.method === 'HEAD') && request.routeOptions.config.view !== undefined) {
      done();
      return;
    }
    initial(request, reply, false).then(() => done(), done);
  }

  /**
   * Stage 1: what can be decided from the request line and headers alone. With `overlap` (a GET
   * or HEAD, stage 1 in its handler), a count the store has not answered yet is left in
   * `state.counting` instead of awaited: the request's read may run meanwhile (`afterCount`),
   * unless this process has seen the caller's window used up, so a caller over the limit costs no reads.
   */
  async function initial(request: FastifyRequest, reply: FastifyReply, overlap: boolean): Promise<void> {
    const [path, query] = requestPath(request.url);
    const view = request.routeOptions.config.view ?? null;
    // A matched view is an API request whatever the target looked like.
    if (view === null && !isApiRequest(path)) return;
    const state: ApiState = { view, path, query, mediaType: JSON_TYPE, identity: null, throttle: null, counting: null };
    request.api = state;
    // Added to, not replacing, what CORS put there (Vary: Origin).
    const vary = reply.getHeader('vary');
    reply.header('vary', vary ? `${String(vary)}, Accept` : 'Accept');
    // Paths that match no view are counted against the client's IP and answered by the
    // not-found handler; they are not authenticated.
    if (view !== null) {
      try {
        const allowed = allowedMethods(view);
        // API.md §6: a method the path does not have is a 405 before authentication is looked at.
        if (!allowed.includes(request.method as Method)) throw new MethodNotAllowed(request.method, allowed);
        const offers = request.method === 'OPTIONS' ? optionsMediaTypes(view) : request.method === 'GET' ? view.mediaTypes : withoutStreams(view.mediaTypes);
        const mediaType = negotiate(request.headers.accept, offers);
        // The stream is named where it is documented (OpenAPI), not among the renderings a 406 lists.
        if (mediaType === null) throw new NotAcceptable(withoutStreams(offers));
        state.mediaType = mediaType;
        state.identity = await authenticate(request);
      } catch (error) {
        // Counted all the same; a 429 answers before what stage 1 refused.
        await applyThrottle(request, reply, state);
        throw error;
      }
    }
    const counting = applyThrottle(request, reply, state);
    if (counting === undefined) return;
    // A stream is opened by the action itself: never before its count.
    if (overlap && state.mediaType !== EVENT_STREAM_TYPE && !throttle.mayRefuse(throttleKey(request, state))) state.counting = counting;
    else await counting;
  }

  /** Stage 2 (handler): permission (an API key's scopes, then the action's), the view's action, rendering. */
  async function dispatch(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (request.api === null) await initial(request, reply, true);
    const state = request.api!;
    // The count still under way (a GET or HEAD counted in Redis): awaited before anything is sent.
    let counting = state.counting;
    const view = state.view!;
    const method = request.method as Method;
    if (method === 'OPTIONS') {
      // An API key first: within its scopes, whatever its user may do (ACCESS.md §5; OPTIONS is a read).
      const scopes = state.identity?.scopes;
      if (scopes !== undefined && !scopesAllow(scopes, view.keyAccess, method)) throw new InsufficientScope();
      reply.header('allow', allowedMethods(view).join(', '));
      return send(request, reply, render(request, reply, view, { body: describe(view, state.identity?.user ?? null) }));
    }
    let action: Action;
    try {
      action = permittedAction(view, method, state.identity);
    } catch (error) {
      // A 429 answers before a 401 or 403, as when the count is awaited in stage 1.
      await counting;
      throw error;
    }
    const apiRequest = toApiRequest(request, state);
    // After permission: a write that needs a user is a 401 with or without a key (REQUESTS.md §1).
    const idempotencyKey = idempotency && takesIdempotencyKey(method, state.path) ? readIdempotencyKey(request, state.identity !== null) : null;
    if (idempotencyKey !== null) {
      const { representation, replayed } = await idempotency!(request, state.identity!.user.id, idempotencyKey, async (unit) =>
        render(request, reply, view, await action.handle({ ...apiRequest, unit })),
      );
      if (replayed) reply.header('idempotent-replayed', 'true');
      return send(request, reply, representation);
    }
    // Asked before the action reads, so what is filed under a version is never older than it.
    // HTML pages show the caller and their rate-limit headers, so they are never reused.
    const reusable =
      action.version && (method === 'GET' || method === 'HEAD') && state.mediaType !== HTML_TYPE && state.mediaType !== EVENT_STREAM_TYPE && reuse.worthAsking(action);
    // With the count under way, the first read runs beside it: the version, or an action that only reads.
    if (counting !== null && !reusable && action.readsOnly !== true) {
      await counting;
      counting = null;
    }
    const version = reusable ? await afterCount(counting, () => action.version!(apiRequest)) : null;
    if (version === null) {
      const response = await afterCount(counting, () => action.handle(apiRequest));
      // A stream is this stage's fourth rendering: opened here, filled by the action (STREAMS.md §1).
      if (response.stream) return streams.open(request, reply, callerKey(request, state), response.stream);
      return send(request, reply, render(request, reply, view, response));
    }
    const perCaller = action.perCaller?.(apiRequest) ?? false;
    const cache = perCaller ? callerRepresentations : representations;
    const key = `${perCaller ? `${whoAsks(state.identity)} ` : ''}${state.mediaType} ${state.path}${state.query}`;
    let representation = cache.get(version, key);
    reuse.record(action, representation !== undefined);
    if (representation === undefined) {
      representation = render(request, reply, view, await action.handle(apiRequest));
      if (representation.status === 200) cache.set(version, key, representation);
    }
    send(request, reply, representation);
  }

  /**
   * Counts `points` more requests against the caller of `request` (a batch's requests, REQUESTS.md
   * §4): a 429 counting none when fewer are left. Returns what X-Rate-Limit-Remaining now says.
   */
  async function charge(request: ApiRequest, points: number): Promise<number> {
    const key = request.identity ? { userId: request.identity.user.id } : { ip: request.raw.ip };
    const taken = throttle.take(key, points);
    const result = taken instanceof Promise ? await taken : taken;
    if (!result.allowed) throw new Throttled(Math.max(1, result.resetSeconds), `This batch counts as ${points + 1} requests, itself and each in it; ${result.remaining} more were left in this window. Nothing was done.`);
    return result.remaining;
  }

  return { onRequest, dispatch, charge };
}

/**
 * Everything about the caller a per-caller response depends on: the user, their roles at this
 * request (a role granted or taken is another key) and an API key's scopes.
 */
function whoAsks(identity: Identity | null): string {
  if (identity === null) return '-';
  const { user, scopes } = identity;
  return `${user.id} ${JSON.stringify(user.roles)} ${scopes === undefined ? '*' : JSON.stringify(scopes)}`;
}

/**
 * Runs `work` while the request's count (`counting`, under way in a shared store) is answered,
 * and hands back what it found only if the count allowed the request: a refusal (429) wins over
 * the work's result or error, which are then dropped. Without a count under way, runs `work`.
 */
async function afterCount<T>(counting: Promise<void> | null, work: () => Promise<T>): Promise<T> {
  if (counting === null) return work();
  const outcome = work();
  // Handled at once (a rejection left unhandled while the count is awaited would end the
  // process); its error is thrown below, once the count allowed the request.
  outcome.catch(() => {});
  await counting;
  return outcome;
}

/** Whom the stream limit counts a stream against: the user, else the client's IP (STREAMS.md §1). */
function callerKey(request: FastifyRequest, state: ApiState): string {
  return state.identity ? `user:${state.identity.user.id}` : `ip:${request.ip}`;
}

/** Streams answer GET only; other methods negotiate among the rest. */
function withoutStreams(mediaTypes: readonly string[]): readonly string[] {
  return mediaTypes.includes(EVENT_STREAM_TYPE) ? mediaTypes.filter((type) => type !== EVENT_STREAM_TYPE) : mediaTypes;
}

function toApiRequest(request: FastifyRequest, state: ApiState): ApiRequest {
  let parsed: Promise<RequestData> | undefined;
  return {
    raw: request,
    method: request.method as Method,
    path: state.path,
    params: request.params as Record<string, string>,
    query: request.query as Record<string, string>,
    user: state.identity?.user ?? null,
    identity: state.identity,
    mediaType: state.mediaType,
    data: () => (parsed ??= parseBody(request.body as Buffer | undefined, request.headers['content-type'])),
  };
}

/**
 * OPTIONS answers with a JSON description on every path (API.md §1), the HTML-only ones (the docs
 * page) included, which offer JSON first for it (issue 22 item 19).
 */
function optionsMediaTypes(view: View): readonly string[] {
  return view.mediaTypes.includes(JSON_TYPE) ? view.mediaTypes : [JSON_TYPE, ...view.mediaTypes];
}

/** DRF's SimpleMetadata: name, description, renders, parses and, per writable action, the fields. */
function describe(view: View, caller: User | null): Record<string, unknown> {
  return {
    name: view.name,
    description: view.description ?? '',
    renders: withoutStreams(view.mediaTypes),
    parses: ['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data'],
    ...(view.metadata?.(caller) ?? {}),
  };
}

/** Stage 3: render in the negotiated media type, with a strong ETag for a GET or HEAD that succeeded. */
/** One renderer per negotiated media type (API.md §1); HTML is the browsable API (issue 12). */
const RENDERERS: Record<string, Renderer> = {
  [JSON_TYPE]: renderJson,
  [HTML_TYPE]: renderBrowsable,
  [CSV_TYPE]: renderCsv,
};

function render(request: FastifyRequest, reply: FastifyReply, view: View, response: ApiResponse): CachedRepresentation {
  const status = response.status ?? 200;
  if (response.body === undefined) {
    return { status, headers: response.headers, contentType: null, text: null, etag: null };
  }
  const mediaType = request.api!.mediaType;
  // JSON needs no context: most responses skip building one (issue 21, garbage per request).
  const text = mediaType === JSON_TYPE ? renderJson(response.body) : RENDERERS[mediaType]!(response.body, {
    columns: response.columns ?? view.columns ?? [],
    title: view.name,
    method: request.method,
    path: `${request.api!.path}${request.api!.query}`,
    status,
    allow: allowedMethods(view),
    view,
    user: request.api!.identity?.user ?? null,
    headers: () => responseHeaders(reply, response, mediaType),
  });
  const etag = (request.method === 'GET' || request.method === 'HEAD') && status === 200 ? entityTag(text, mediaType) : null;
  // Every HTML answer is a browsable page, the docs page included: they get their CSP.
  const headers = mediaType === HTML_TYPE ? { ...response.headers, ...BROWSABLE_SECURITY_HEADERS } : response.headers;
  return { status, headers, contentType: CONTENT_TYPES[mediaType] ?? mediaType, text, etag };
}

/** What the response will carry: the headers set so far (Vary, X-Rate-Limit-*) and the action's. */
function responseHeaders(reply: FastifyReply, response: ApiResponse, mediaType: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries({ ...reply.getHeaders(), ...response.headers })) {
    if (value !== undefined && name !== 'set-cookie') headers[name] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  headers['content-type'] = CONTENT_TYPES[mediaType] ?? mediaType;
  return headers;
}

/** Sends a rendered response, or 304 when the client's If-None-Match already names it. */
function send(request: FastifyRequest, reply: FastifyReply, representation: CachedRepresentation): void {
  const { status, headers, contentType, text, etag } = representation;
  if (headers) reply.headers(headers);
  if (text === null) {
    reply.code(status).send();
    return;
  }
  if (etag !== null) {
    reply.header('etag', etag);
    // A 304 has no body, so no Content-Type (RFC 9110 §15.4.5; proxies such as Prism reject one).
    if (noneMatch(request.headers['if-none-match'], etag)) {
      reply.code(304).send();
      return;
    }
  }
  reply.header('content-type', contentType);
  reply.code(status).send(text);
}
