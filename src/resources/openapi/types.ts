// The shape of the OpenAPI 3.1 document restwire generates (API.md §5): the objects the builders
// in this folder produce and docs-page.ts reads, typed only as far as restwire fills them, and the
// methods the document has operations for.

import type { Method } from '../../http/view.js';

/** A JSON Schema 2020-12 object (OpenAPI 3.1 uses JSON Schema as is). */
export type SchemaObject = Record<string, unknown>;
// A type alias, not an interface, so a reference may stand wherever a schema object may.
export type Reference = { readonly $ref: string };
export interface ParameterObject {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  description?: string;
  /** A comma-separated list is `form` without `explode` (`?expand=a,b`). */
  style?: 'form' | 'simple';
  explode?: boolean;
  schema: SchemaObject;
}
export interface HeaderObject {
  description: string;
  schema: SchemaObject;
}
export interface MediaTypeObject {
  schema: SchemaObject;
}
export interface ResponseObject {
  description: string;
  headers?: Record<string, HeaderObject | Reference>;
  content?: Record<string, MediaTypeObject>;
}
export interface RequestBodyObject {
  required: boolean;
  content: Record<string, MediaTypeObject>;
}
export interface OperationObject {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  parameters?: Array<ParameterObject | Reference>;
  requestBody?: RequestBodyObject;
  responses: Record<string, ResponseObject | Reference>;
  security?: Array<Record<string, string[]>>;
}
export type OperationMethod = 'get' | 'head' | 'options' | 'post' | 'put' | 'patch' | 'delete';
export type PathItemObject = { parameters?: ParameterObject[] } & Partial<Record<OperationMethod, OperationObject>>;
export interface SecuritySchemeObject {
  type: 'http' | 'apiKey';
  description: string;
  scheme?: string;
  bearerFormat?: string;
  in?: 'cookie';
  name?: string;
}

export interface OpenApiDocument {
  openapi: '3.1.0';
  info: { title: string; version: string; description: string };
  tags: Array<{ name: string; description?: string }>;
  paths: Record<string, PathItemObject>;
  components: {
    schemas: Record<string, SchemaObject>;
    parameters: Record<string, ParameterObject>;
    headers: Record<string, HeaderObject>;
    responses: Record<string, ResponseObject>;
    securitySchemes: Record<string, SecuritySchemeObject>;
  };
  security: Array<Record<string, string[]>>;
  /** OpenAPI 3.1: the requests restwire sends, one per event (RESOURCES.md §4). */
  webhooks: Record<string, PathItemObject>;
}

/** The methods documented; HEAD (GET without a body) and OPTIONS (metadata) exist on every path. */
export const OPERATION_METHODS: ReadonlyArray<Exclude<Method, 'HEAD' | 'OPTIONS'>> = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
/** One of OPERATION_METHODS. */
export type OperationVerb = (typeof OPERATION_METHODS)[number];
