import type { FastifyRequest } from 'fastify';
import type { WriteUnit } from '../db/write-unit.js';
import type { Identity, Permission, User } from './caller.js';
import type { RequestData } from './parsers.js';
import type { EventStreamStart } from './event-stream.js';
import type { KeyAccess } from './scopes.js';

export const METHODS = ['GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type Method = (typeof METHODS)[number];

/** What a handler sees of a request once the pipeline has negotiated and authenticated it. */
export interface ApiRequest {
  readonly raw: FastifyRequest;
  /** The HTTP method; HEAD runs the GET action. */
  readonly method: Method;
  /** The path without the query string, e.g. `/api/v1/experiences/7/`. */
  readonly path: string;
  readonly params: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string>>;
  readonly user: User | null;
  readonly identity: Identity | null;
  /** The negotiated response media type. */
  readonly mediaType: string;
  /** The parsed body (parsed once, on first use). */
  data(): Promise<RequestData>;
  /**
   * The transaction this request's writes join, when its owner opened one (an Idempotency-Key,
   * a batch): the action reads and writes through it and leaves committing, and what runs after
   * the commit, to the owner (`db/write-unit.ts`).
   */
  readonly unit?: WriteUnit;
}

/** What a handler returns; the pipeline renders it in the negotiated media type. */
export interface ApiResponse {
  readonly status?: number;
  /** Omitted for 204. */
  readonly body?: unknown;
  /** A list sends the header once per value (several `Set-Cookie`). */
  readonly headers?: Readonly<Record<string, string | string[]>>;
  /** The CSV columns, when fewer than the view's (`?fields=`, REQUESTS.md §3). */
  readonly columns?: readonly string[];
  /** A GET asked for `text/event-stream`: the stream to open instead of a body (STREAMS.md §1). */
  readonly stream?: EventStreamStart;
}

/**
 * How the OpenAPI document describes an action that is not a declared collection's (auth, the
 * root, `users/me` …); schemas are JSON Schema objects or `{ $ref }`s to `#/components/schemas`.
 */
export interface ActionDocs {
  readonly request?: { readonly schema: Record<string, unknown>; readonly required: boolean };
  /** Status → what it means, its JSON body (none for a 204) and the named headers it sets. */
  readonly responses: Readonly<Record<string, { readonly description: string; readonly schema?: Record<string, unknown>; readonly headers?: readonly string[] }>>;
}

/** One method of a view: who may call it and what it does. */
export interface Action {
  readonly permission: Permission;
  handle(request: ApiRequest): Promise<ApiResponse>;
  /** The success responses and body, for OpenAPI (otherwise described generically). */
  readonly docs?: ActionDocs;
  /**
   * For a GET whose response depends only on the URL, the media type and stored data (and, with
   * `perCaller`, on who asks): a token that changes whenever that data may have changed, or null when none can be
   * had. While it holds, the pipeline sends the response it rendered before instead of calling
   * `handle` (`representation-cache.ts`).
   */
  version?(request: ApiRequest): Promise<string | null>;
  /**
   * With `version`: true when the response also depends on who asks (a read rule, a field rule
   * or a scope filters it per caller, ACCESS.md §6); it is then reused only for the same user
   * with the same roles and API key scopes, never for another caller.
   */
  perCaller?(request: ApiRequest): boolean;
  /**
   * True when `handle` only reads stored data (no write, no call out, no stream opened): a GET
   * counted in a shared store may then run it before its count is answered, and drop what it
   * read if the count refuses the request (issue 21).
   */
  readonly readsOnly?: boolean;
}

/**
 * An endpoint: a path and the actions it offers. Views are data; `pipeline.ts` runs every one
 * through the same stages, and `resources/viewset/` builds them from resource declarations.
 */
export interface View {
  /** Human name, used as the HTML title and in OPTIONS metadata. */
  readonly name: string;
  readonly description?: string;
  /**
   * The collection an API key's scopes must name to use this view (ACCESS.md §5); without one,
   * every key may read it and none may write to it (`scopes.ts`).
   */
  readonly keyAccess?: KeyAccess;
  /** A Fastify route pattern, e.g. `/api/v1/experiences/:id/`. */
  readonly path: string;
  readonly actions: Partial<Record<Exclude<Method, 'HEAD' | 'OPTIONS'>, Action>>;
  /** Media types this view renders, the default first. */
  readonly mediaTypes: readonly string[];
  /** Field names, in order: the CSV header row. */
  readonly columns?: readonly string[];
  /**
   * DRF-style metadata for OPTIONS (field descriptions per writable action): for a caller (null:
   * anonymous), only the actions their sign-in and roles could allow (ACCESS.md §2), as DRF's
   * metadata runs the permission check; without one, every writable action (the page's forms).
   */
  readonly metadata?: (caller?: User | null) => Record<string, unknown>;
  /** A list's query controls, for the browsable API's ordering and filter form. */
  readonly listControls?: ListControls;
  /**
   * The browsable page that draws a GET's 200 body, when not the generic one: a dashboard (the
   * webhooks and their deliveries, API.md §4) or a page for people (login, the API docs). Named
   * by the declaration or view that needs it, so the renderer knows no routes.
   */
  readonly page?: PageTemplate;
  /**
   * The view's own actions (a declaration's `actions`, DRF's `@action`), offered on its browsable
   * page: a link for a GET, a button (or a form, with their fields' metadata) for a POST.
   */
  readonly extraActions?: readonly ViewAction[];
}

/** An action below a view's path, as its browsable page offers it. */
export interface ViewAction {
  readonly label: string;
  /** Below the collection's path, or the record's URL: `close/`. */
  readonly path: string;
  readonly method: 'GET' | 'POST';
  /** The fields its POST reads, as OPTIONS describes them. */
  readonly fields?: Readonly<Record<string, Record<string, unknown>>>;
}

/** Draws a view's body as the main part of a browsable page. */
export type PageTemplate = (body: unknown, context: RenderContext) => string;

/** What a renderer is told besides the body. */
export interface RenderContext {
  /** Column order for CSV: the resource's declared fields. */
  columns: readonly string[];
  title: string;
  /** The request's method: a page drawn for a GET's body must not be handed an OPTIONS description. */
  method: string;
  /** The request URL, query string included. */
  path: string;
  status: number;
  allow: readonly string[];
  /** The view rendered: its description, field metadata and list controls (HTML). */
  view: View;
  /** The caller, or null: the HTML pages show who is logged in and offer owners their forms. */
  user: User | null;
  /** The response headers so far, rate-limit headers included (HTML shows them); read on demand. */
  headers(): Readonly<Record<string, string>>;
}

/** The orderings and filter parameters a collection accepts (from its declaration). */
export interface ListControls {
  /** Ordering names, each ascending and descending (`title`, `-title`). */
  readonly orderings: readonly string[];
  readonly defaultOrdering: string;
  readonly filters: readonly { readonly param: string; readonly description: string }[];
}

const allowedByView = new WeakMap<View, readonly Method[]>();

/** The methods a view answers, as sent in `Allow` (worked out once per view: views do not change). */
export function allowedMethods(view: View): readonly Method[] {
  let methods = allowedByView.get(view);
  if (methods === undefined) {
    methods = METHODS.filter((method) =>
      method === 'HEAD' ? view.actions.GET !== undefined : method === 'OPTIONS' || view.actions[method] !== undefined,
    );
    allowedByView.set(view, methods);
  }
  return methods;
}
