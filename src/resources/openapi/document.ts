// The OpenAPI 3.1 document (API.md §5), generated from the resource declarations and the
// registered views, never kept by hand: a resource's schema, parameters and operations come from
// its declaration, and any other view (auth, webhooks …) is described from its name,
// description, path and methods, so it appears as soon as it is registered. This file assembles
// it from the parts the other files of this folder build: schemas.ts, operations.ts, events.ts
// and the fixed components.ts.

import type { View } from '../../http/view.js';
import type { QueryFilter } from '../filters.js';
import type { Resource } from '../resource.js';
import { ANONYMOUS_OR_ANY_SCHEME, HEADERS, PARAMETERS, PROBLEM_SCHEMA, problemResponses, SECURITY_SCHEMES } from './components.js';
import { eventWebhooks } from './events.js';
import { describePaths } from './operations.js';
import { collectionSchemas, componentNames } from './schemas.js';
import type { OpenApiDocument, SchemaObject } from './types.js';

/** What the document is built from. */
export interface OpenApiOptions {
  readonly resources: readonly Resource[];
  /** Each collection's list filters, by collection name (the viewsets build them). */
  readonly filters: ReadonlyMap<string, readonly QueryFilter[]>;
  readonly views: readonly View[];
  readonly version: string;
  readonly title?: string;
}

const DESCRIPTION = [
  'A Django REST Framework–style resource API. Paths end with `/`. Responses are chosen by `Accept`:',
  '`application/json` (default; the bodies documented here), `text/html` (the browsable API) and, for',
  'records and collections, `text/csv` (the same fields, one row per record). Request bodies may be JSON, URL-encoded forms or multipart forms; unknown and read-only',
  'fields are ignored. Errors are `application/problem+json` (RFC 9457). Every response carries the',
  '`X-Rate-Limit-*` headers. A method a path does not have is a 405 with `Allow`.',
].join(' ');

/** Builds the whole document. Pure: the same declarations and views give the same document. */
export function buildOpenApi({ resources, filters, views, version, title = 'restwire' }: OpenApiOptions): OpenApiDocument {
  const schemas: Record<string, SchemaObject> = { Problem: PROBLEM_SCHEMA };
  const names = componentNames(resources, Object.keys(schemas));
  const tags = new Map<string, string | undefined>();
  for (const resource of resources) {
    Object.assign(schemas, collectionSchemas(resource, names.get(resource.name)!));
    // A nested collection is documented under its parent's tag (its paths begin with the parent).
    if (!resource.nestedUnder) tags.set(resource.name, resource.description);
  }

  const { paths, tags: viewTags } = describePaths(resources, names, filters, views);
  for (const tag of viewTags) if (!tags.has(tag)) tags.set(tag, undefined);
  tags.set('operations', 'Health, readiness and metrics, outside `/api/v1/`: no credentials, no rate limit.');

  return {
    openapi: '3.1.0',
    info: { title, version, description: DESCRIPTION },
    tags: [...tags].map(([name, description]) => (description ? { name, description } : { name })),
    paths,
    components: {
      schemas,
      parameters: PARAMETERS,
      headers: HEADERS,
      responses: problemResponses(),
      securitySchemes: SECURITY_SCHEMES,
    },
    // Any one scheme, or none: reads are open to anonymous callers (API.md §2, §3).
    security: ANONYMOUS_OR_ANY_SCHEME,
    webhooks: eventWebhooks(resources),
  };
}

