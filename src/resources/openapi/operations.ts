// The `paths` of the OpenAPI document: for every registered view, an operation per method it has,
// plus HEAD and OPTIONS. A method of one of a resource's two views (collection and record) is
// described from the declaration (its schemas, list parameters and filters); any other from its
// action's `docs`, or from its methods and media types alone. `/healthz`, `/readyz` and
// `/metrics` come last.

import { OPERATION_ENDPOINTS, type OperationEndpoint } from '../../http/operations.js';
import { SUPPORTED_MEDIA_TYPES } from '../../http/parsers.js';
import { JSON_TYPE } from '../../http/renderers.js';
import type { View } from '../../http/view.js';
import type { QueryFilter } from '../filters.js';
import { expandPathsOf, MAX_EXPAND_PATHS } from '../viewset/expansion.js';
import { fieldNamesOf } from '../viewset/sparse-fields.js';
import { collectionPathOf, recordRouteOf, type ActionName, type Resource } from '../resource.js';
import { takesIdempotencyKey } from '../../http/idempotency.js';
import { ANONYMOUS_OR_ANY_SCHEME, ANY_SCHEME, ETAG, NOT_MODIFIED, problems, ref, success } from './components.js';
import { defaultsInWords } from './schemas.js';
import {
  OPERATION_METHODS,
  type MediaTypeObject,
  type OperationMethod,
  type OperationObject,
  type OperationVerb,
  type ParameterObject,
  type PathItemObject,
  type Reference,
  type RequestBodyObject,
  type ResponseObject,
  type SchemaObject,
} from './types.js';

/**
 * One path item per view, with an operation for each method it has, HEAD beside GET and OPTIONS on
 * every path, then the operations endpoints; and each view's tag, in order. `names` are the
 * collections' component stems (schemas.ts `componentNames`), `filters` their list filters.
 */
export function describePaths(
  resources: readonly Resource[],
  names: ReadonlyMap<string, string>,
  filters: ReadonlyMap<string, readonly QueryFilter[]>,
  views: readonly View[],
): { paths: Record<string, PathItemObject>; tags: string[] } {
  const tags: string[] = [];
  const paths: Record<string, PathItemObject> = {};
  const operationIds = new Set<string>();
  for (const view of views) {
    const parameters = pathParameters(view.path);
    const tag = tagOf(view.path);
    if (!tags.includes(tag)) tags.push(tag);
    const item: PathItemObject = parameters.length ? { parameters } : {};
    for (const method of OPERATION_METHODS) {
      if (!view.actions[method]) continue;
      // An action with its own docs (signup, `createDocs`) is described by them, as any view's.
      const declared = view.actions[method]!.docs ? null : declaredAction(resources, view, method);
      const operation = declared
        ? resourceOperation(declared.resource, names.get(declared.resource.name)!, view, declared.action, filters.get(declared.resource.name) ?? [], shapeParameters(declared.resource, resources))
        : genericOperation(view, method, parameters.length > 0);
      const stem = declared ? (declared.resource.nestedUnder ? pathStem(collectionPathOf(declared.resource)) : declared.resource.name) : pathStem(view.path);
      let operationId = `${stem}_${operation.action}`;
      // OpenAPI requires unique ids; two views differing only in a parameter would otherwise clash.
      for (let n = 2; operationIds.has(operationId); n++) operationId = `${stem}_${operation.action}_${n}`;
      operationIds.add(operationId);
      // REQUESTS.md §1: every POST and PATCH but the sign-in endpoints' takes an Idempotency-Key.
      if (takesIdempotencyKey(method, view.path)) {
        operation.parameters = [...(operation.parameters ?? []), ref('parameters', 'Idempotency-Key')];
        operation.responses = { ...operation.responses, ...(operation.responses['409'] ? problems(422) : problems(409, 422)) };
      }
      item[method.toLowerCase() as OperationMethod] = {
        operationId,
        summary: `${view.name}: ${operation.action.replace('_', ' ')}`,
        ...(view.description ? { description: view.description } : {}),
        tags: [tag],
        ...(operation.parameters ? { parameters: operation.parameters } : {}),
        ...(operation.requestBody ? { requestBody: operation.requestBody } : {}),
        responses: operation.responses,
        // Whether an anonymous caller may call it is the action's own permission, asked with no
        // user: reads of open collections and the auth endpoints allow it; writes need a scheme.
        security: view.actions[method]!.permission.hasPermission({ method, user: null }) ? ANONYMOUS_OR_ANY_SCHEME : ANY_SCHEME,
      };
    }
    if (item.get) item.head = headOperation(item.get);
    item.options = optionsOperation(view, pathStem(view.path), tag, operationIds);
    paths[openApiPath(view.path)] = item;
  }
  for (const endpoint of OPERATION_ENDPOINTS) paths[endpoint.path] = operationsPathItem(endpoint);
  return { paths, tags };
}

/** `/api/v1/experiences/:id/` → `/api/v1/experiences/{id}/`. */
function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
}

/**
 * The body of a success: JSON when the view offers it. The browsable HTML and CSV of the same URL
 * (chosen by `Accept`) are named in the document's description, not here: listed beside JSON
 * they would type every body as `Record | string` in generated clients (issue #10).
 */
function content(mediaTypes: readonly string[], schema: SchemaObject): Record<string, MediaTypeObject> {
  if (mediaTypes.includes(JSON_TYPE)) return { [JSON_TYPE]: { schema } };
  return Object.fromEntries(mediaTypes.map((type) => [type, { schema: { type: 'string' } }]));
}

function requestBody(schema: SchemaObject, required: boolean): RequestBodyObject {
  return { required, content: Object.fromEntries(SUPPORTED_MEDIA_TYPES.map((type) => [type, { schema }])) };
}

/** What the two operation builders produce; `describePaths` adds the id, summary and tags. */
interface OperationParts {
  action: string;
  parameters?: Array<ParameterObject | Reference>;
  requestBody?: RequestBodyObject;
  responses: Record<string, ResponseObject | Reference>;
}

/** DRF's action names per method, as drf-spectacular uses them in operation ids of other views. */
const ACTION_OF: Record<OperationVerb, string> = {
  GET: 'retrieve',
  POST: 'create',
  PUT: 'update',
  PATCH: 'partial_update',
  DELETE: 'destroy',
};

// The viewset's routes (`viewset/index.ts`): which action each method of the two views runs.
const COLLECTION_ACTIONS: Partial<Record<OperationVerb, ActionName>> = { GET: 'list', POST: 'create' };
const RECORD_ACTIONS: Partial<Record<OperationVerb, ActionName>> = { GET: 'retrieve', PUT: 'update', PATCH: 'partial_update', DELETE: 'destroy' };

/**
 * The declared action a view's method runs, or null when the view is not one of the resource's
 * two or the method is not one of its declared actions, which is then described like any other view.
 */
function declaredAction(resources: readonly Resource[], view: View, method: OperationVerb) {
  for (const resource of resources) {
    const table = view.path === collectionPathOf(resource) ? COLLECTION_ACTIONS : view.path === recordRouteOf(resource) ? RECORD_ACTIONS : null;
    const action = table?.[method];
    if (action && resource.operations.includes(action)) return { resource, action };
  }
  return null;
}

/**
 * `expand` and `fields` (REQUESTS.md §2, §3), comma-separated lists of the collection's relation
 * paths and member names; `expand` only where the collection has relations.
 */
function shapeParameters(resource: Resource, resources: readonly Resource[]): ParameterObject[] {
  const paths = expandPathsOf(resource, (name) => resources.find((other) => other.name === name));
  const list = (names: string[], maxItems?: number): SchemaObject => ({ type: 'array', items: { type: 'string', enum: names }, ...(maxItems ? { maxItems } : {}) });
  return [
    ...(paths.length
      ? [{
          name: 'expand',
          in: 'query' as const,
          required: false,
          description: 'Related records to show in the member `expand`, as a GET of them shows them to the caller; `a.b` expands inside `a` (3 levels at most). CSV ignores it.',
          style: 'form' as const,
          explode: false,
          schema: list(paths, MAX_EXPAND_PATHS),
        }]
      : []),
    {
      name: 'fields',
      in: 'query',
      required: false,
      description: 'Only these members of each record (`url` is always kept); `expand.NAME` keeps that expansion.',
      style: 'form',
      explode: false,
      schema: list(fieldNamesOf(resource)),
    },
  ];
}

/** One declared action of a resource, with the schemas (named from `label`) and parameters its declaration gives. */
function resourceOperation(
  resource: Resource,
  label: string,
  view: View,
  action: ActionName,
  queryFilters: readonly QueryFilter[],
  shape: readonly ParameterObject[],
): OperationParts {
  const body = content(view.mediaTypes, ref('schemas', label));
  const detailBody = resource.detailOnly.length ? content(view.mediaTypes, ref('schemas', `${label}Detail`)) : body;
  switch (action) {
    case 'list': {
      const orderings = resource.orderings.flatMap((ordering) => [ordering, `-${ordering}`]);
      const filters = queryFilters.map(
        (filter): ParameterObject => ({ name: filter.param, in: 'query', required: false, description: filter.description, schema: filter.schema }),
      );
      return {
        action,
        parameters: [
          ref('parameters', 'limit'),
          ref('parameters', 'cursor'),
          {
            name: 'ordering',
            in: 'query',
            required: false,
            description: 'Sort order; a leading `-` sorts descending.',
            schema: { type: 'string', enum: orderings, default: resource.defaultOrdering },
          },
          ...filters,
          ...shape,
          ref('parameters', 'If-None-Match'),
        ],
        responses: {
          '200': success('A page of records.', { ...ETAG, Link: ref('headers', 'Link') }, content(view.mediaTypes, ref('schemas', `Paginated${label}List`))),
          ...NOT_MODIFIED,
          ...problems(400, 401, 406, 429),
        },
      };
    }
    case 'retrieve':
      return {
        action,
        parameters: [...shape, ref('parameters', 'If-None-Match')],
        responses: { '200': success('The record.', ETAG, detailBody), ...NOT_MODIFIED, ...problems(400, 401, 403, 404, 406, 429) },
      };
    case 'create': {
      // Members only the create shows (a webhook's secret, once, with `Cache-Control: no-store`).
      const shown = resource.createShows;
      const created = shown.length
        ? content(view.mediaTypes, {
            allOf: [
              ref('schemas', label),
              { type: 'object', required: [...shown], properties: Object.fromEntries(shown.map((name) => [name, { type: 'string', description: 'Shown here, once.' }])) },
            ],
          })
        : body;
      const headers = { Location: ref('headers', 'Location'), ...(shown.length ? { 'Cache-Control': ref('headers', 'Cache-Control') } : {}) };
      return {
        action,
        requestBody: requestBody(ref('schemas', `${label}Request`), true),
        responses: { '201': success('Created.', headers, created), ...problems(400, 401, 403, 406, 413, 415, 429) },
      };
    }
    case 'update':
    case 'partial_update':
      return {
        action,
        parameters: [ref('parameters', 'If-Match')],
        // API.md §2: PUT needs every writable field, PATCH none.
        requestBody: requestBody(ref('schemas', `${action === 'partial_update' ? 'Patched' : ''}${label}Request`), action === 'update'),
        responses: { '200': success('The updated record.', {}, body), ...problems(400, 401, 403, 404, 406, 412, 413, 415, 429) },
      };
    case 'destroy':
      return {
        action,
        parameters: [ref('parameters', 'If-Match')],
        responses: { '204': success('Deleted.', {}), ...problems(401, 403, 404, 406, 409, 412, 429) },
      };
  }
}

/** A view without a declaration: described by its action's docs, or from its methods and media types. */
function genericOperation(view: View, method: OperationVerb, hasParams: boolean): OperationParts {
  const notFound = hasParams ? [404] : [];
  const docs = view.actions[method]!.docs;
  if (docs) {
    const responses: Record<string, ResponseObject | Reference> = {};
    for (const [status, { description, schema, headers = [] }] of Object.entries(docs.responses)) {
      const named = Object.fromEntries(headers.map((name) => [name, ref('headers', name)]));
      responses[status] = success(description, method === 'GET' ? { ...ETAG, ...named } : named, schema ? { [JSON_TYPE]: { schema } } : undefined);
    }
    const unsafe = method !== 'GET';
    return {
      action: ACTION_OF[method],
      ...(method === 'GET' ? { parameters: [ref('parameters', 'If-None-Match')] } : {}),
      ...(docs.request ? { requestBody: requestBody(defaultsInWords(docs.request.schema), docs.request.required) } : {}),
      responses: {
        ...responses,
        ...(method === 'GET' ? NOT_MODIFIED : {}),
        ...problems(...(docs.request ? [400] : []), 401, 403, ...notFound, 406, ...(unsafe && docs.request ? [413, 415] : []), 429),
      },
    };
  }
  const anything: SchemaObject = {};
  switch (method) {
    case 'GET':
      return {
        action: ACTION_OF[method],
        parameters: [ref('parameters', 'If-None-Match')],
        responses: { '200': success('OK.', ETAG, content(view.mediaTypes, anything)), ...NOT_MODIFIED, ...problems(401, 403, ...notFound, 406, 429) },
      };
    case 'DELETE':
      return { action: ACTION_OF[method], responses: { '204': success('Done; no body.', {}), ...problems(401, 403, ...notFound, 406, 429) } };
    default:
      return {
        action: ACTION_OF[method],
        requestBody: requestBody({ type: 'object' }, false),
        responses: {
          '2XX': success('Done.', {}, content(view.mediaTypes, anything)),
          ...problems(400, 401, 403, ...notFound, 406, 413, 415, 429),
        },
      };
  }
}

/** Path parameters: ids are positive integers (API.md §1); any other name is a string. */
function pathParameters(path: string): ParameterObject[] {
  return [...path.matchAll(/:([A-Za-z_][A-Za-z0-9_]*)/g)].map(([, name]) => ({
    name: name!,
    in: 'path' as const,
    required: true,
    schema: name === 'id' || name!.endsWith('_id') ? { type: 'integer', minimum: 1 } : { type: 'string' },
  }));
}

/** `/api/v1/webhooks/:id/pings/` → `webhooks_pings`, the stem of an operation id. */
function pathStem(path: string): string {
  const segments = path.slice('/api/v1/'.length).split('/').filter((segment) => segment && !segment.startsWith(':'));
  return segments.join('_').replace(/\W/g, '_') || 'root';
}

/** The first segment after `/api/v1/`: `experiences`, `auth`, `webhooks` …; the root is `root`. */
function tagOf(path: string): string {
  return path.slice('/api/v1/'.length).split('/')[0]!.replace(/\W/g, '_') || 'root';
}

/** `/healthz`, `/readyz`, `/metrics` (API.md §5): plain routes, open to anyone, not rate limited. */
function operationsPathItem(endpoint: OperationEndpoint): PathItemObject {
  const name = endpoint.path.slice(1);
  const responses = Object.fromEntries(
    Object.entries(endpoint.responses).map(([status, { description, mediaType, schema }]) => [status, { description, content: { [mediaType]: { schema } } }]),
  );
  return { get: { operationId: name, summary: `${name}: ${endpoint.summary}`, tags: ['operations'], responses, security: [{}] } };
}

/** HEAD: the GET's answer without a body (RFC 9110 §9.3.2), same headers and statuses. */
function headOperation(get: OperationObject): OperationObject {
  const responses = Object.fromEntries(
    Object.entries(get.responses).map(([status, response]) => {
      if ('$ref' in response) return [status, response];
      const { content: _body, ...rest } = response;
      return [status, rest];
    }),
  );
  return { ...get, operationId: `${get.operationId}_head`, summary: get.summary.replace(/: [^:]*$/, ': headers only (HEAD)'), responses };
}

/** The body of an OPTIONS answer. */
const METADATA_SCHEMA: SchemaObject = {
  type: 'object',
  description: "DRF's SimpleMetadata: for views with writable fields, `actions` describes each field (type, required, read_only, label and its constraints).",
  required: ['name', 'description', 'renders', 'parses'],
  properties: {
    name: { type: 'string' },
    description: { type: 'string' },
    renders: { type: 'array', items: { type: 'string' } },
    parses: { type: 'array', items: { type: 'string' } },
    actions: { type: 'object', additionalProperties: { type: 'object', additionalProperties: { type: 'object' } } },
  },
};

/** OPTIONS: the view's metadata and `Allow`, answered without a permission check (API.md §1). */
function optionsOperation(view: View, stem: string, tag: string, operationIds: Set<string>): OperationObject {
  let operationId = `${stem}_metadata`;
  for (let n = 2; operationIds.has(operationId); n++) operationId = `${stem}_metadata_${n}`;
  operationIds.add(operationId);
  return {
    operationId,
    summary: `${view.name}: metadata (OPTIONS)`,
    tags: [tag],
    responses: {
      '200': success('The methods in `Allow`, and the view described.', { Allow: ref('headers', 'Allow') }, { [JSON_TYPE]: { schema: METADATA_SCHEMA } }),
      ...problems(401, 406, 429),
    },
    security: ANONYMOUS_OR_ANY_SCHEME,
  };
}
