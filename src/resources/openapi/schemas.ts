// The JSON Schemas of a collection, from its field declarations: the record as shown, a page of
// records, the request bodies of create/update and PATCH, and the record view's detail; and the
// component names each collection takes (`Experience`, `PaginatedExperienceList` …).

import { representationFields, type Resource } from '../resource.js';
import { relationsOf } from '../viewset/expansion.js';
import { ref } from './components.js';
import type { SchemaObject } from './types.js';

/** A record path string (API.md §1: relations are paths). */
function recordPathSchema(collection: string, description: string): SchemaObject {
  return { type: 'string', format: 'uri-reference', pattern: `^/api/v1/${collection}/[1-9][0-9]*/$`, description };
}

/** The record representation: every field present (but those with a read rule), read-only ones marked. */
export function recordSchema(resource: Resource): SchemaObject {
  const properties: Record<string, SchemaObject> = {
    url: resource.nestedUnder
      ? {
          type: 'string',
          format: 'uri-reference',
          pattern: `^/api/v1/${resource.nestedUnder.collection}/[1-9][0-9]*/${resource.name}/[1-9][0-9]*/$`,
          description: 'This record’s own path.',
          readOnly: true,
        }
      : { ...recordPathSchema(resource.name, 'This record’s own path.'), readOnly: true },
    id: { type: 'integer', minimum: 1, readOnly: true },
  };
  for (const [name, field] of Object.entries(resource.fields)) if (!field.writeOnly && !resource.detailOnly.includes(name)) properties[name] = field.schema();
  for (const [name, field] of Object.entries(resource.computed)) properties[name] = field.schema();
  if (resource.owner) properties.owner = { ...recordPathSchema('users', 'The user who created it.'), readOnly: true };
  for (const [name, relation] of Object.entries(resource.related)) {
    properties[name] = { type: 'array', readOnly: true, items: recordPathSchema(relation.collection, `A path in ${relation.collection}.`) };
  }
  if (resource.timestamps) {
    properties.created_at = { type: 'string', format: 'date-time', readOnly: true, description: 'RFC 3339, UTC.' };
    properties.updated_at = { type: 'string', format: 'date-time', readOnly: true, description: 'RFC 3339, UTC.' };
  }
  // Shown to some callers only (a user's roles), so never required.
  for (const [name, schema] of Object.entries(resource.callerMembers)) properties[name] = schema;
  // Only with `?expand=` (REQUESTS.md §2); and `?fields=` leaves members out, whatever `required` says.
  const relations = [...relationsOf(resource).keys()];
  if (relations.length) {
    properties.expand = {
      type: 'object',
      readOnly: true,
      description: `With \`?expand=\`: each relation named (${relations.join(', ')}) as its record (null when unreadable) or list of records.`,
    };
  }
  // A field with a read rule is absent where the caller may not read it (ACCESS.md §3): never required.
  const required = representationFields(resource).filter((name) => !resource.fieldAccess[name]?.read);
  return { type: 'object', description: resource.description, required, properties };
}

/** A request body: the writable fields, required as declared unless `partial` (PATCH). */
function inputSchema(resource: Resource, partial: boolean): SchemaObject {
  const writable = Object.entries(resource.fields).filter(([, field]) => !field.readOnly);
  const properties = Object.fromEntries(
    writable.map(([name, field]) => {
      const shownSchema = field.schema();
      // Null is accepted only from a nullable field (an optional one may be left out instead).
      const types = ([] as unknown[]).concat(shownSchema.type ?? []).filter((type) => type !== 'null' || field.nullable);
      // Decimals are read from a number or a numeric string; shown as a string.
      if (field.type === 'decimal') types.push('number');
      const schema = shownSchema.type === undefined ? shownSchema : { ...shownSchema, type: types.length === 1 ? types[0] : types };
      return [name, field.type === 'decimal' ? { ...schema, pattern: undefined } : schema];
    }),
  );
  const required = partial ? [] : writable.filter(([, field]) => field.required).map(([name]) => name);
  return defaultsInWords({
    type: 'object',
    description: 'Strings are trimmed before they are checked. Unknown and read-only fields are ignored.',
    ...(required.length ? { required } : {}),
    properties: JSON.parse(JSON.stringify(properties)) as SchemaObject,
  });
}

/**
 * A request schema whose optional properties state their default in words instead of with
 * `default`: client generators read `default` as "always present" (openapi-typescript 7's
 * `defaultNonNullable`, on by default) and would make callers send it (issue 22 item 19). The
 * record schemas keep `default`: in a response the value is always there.
 */
export function defaultsInWords(schema: SchemaObject): SchemaObject {
  const properties = schema.properties as Record<string, SchemaObject> | undefined;
  if (!properties) return schema;
  const required = new Set((schema.required as string[] | undefined) ?? []);
  const stated = Object.entries(properties).map(([name, property]) => {
    if (required.has(name) || property.default === undefined) return [name, property];
    const { default: value, ...rest } = property;
    const words = `Default: \`${JSON.stringify(value)}\`.`;
    return [name, { ...rest, description: typeof rest.description === 'string' ? `${rest.description} ${words}` : words }];
  });
  return { ...schema, properties: Object.fromEntries(stated) };
}

/** A page of a list: the neighbouring pages' paths and the records. */
function pageSchema(label: string): SchemaObject {
  const link = { type: ['string', 'null'], format: 'uri-reference', description: 'Path of the neighbouring page, or null.' };
  return {
    type: 'object',
    required: ['next', 'previous', 'results'],
    properties: { next: link, previous: link, results: { type: 'array', items: ref('schemas', label) } },
  };
}

/**
 * Every schema component of one collection, named from its stem `label`: the record, a page of
 * them, the request bodies its actions read, and the record view's own when it shows more.
 */
export function collectionSchemas(resource: Resource, label: string): Record<string, SchemaObject> {
  const schemas: Record<string, SchemaObject> = {};
  const record = recordSchema(resource);
  schemas[label] = record;
  schemas[`Paginated${label}List`] = pageSchema(label);
  // A create described by its own docs (signup's credentials) reads no `…Request` component.
  const readsRequest = (resource.operations.includes('update') && !resource.updateDocs) || (resource.operations.includes('create') && !resource.createDocs);
  if (readsRequest) schemas[`${label}Request`] = inputSchema(resource, false);
  if (resource.operations.includes('partial_update') && !resource.updateDocs) schemas[`Patched${label}Request`] = inputSchema(resource, true);
  // A record with fields only its own view shows (a delivery's request and response).
  if (resource.detailOnly.length) {
    const detailProperties = Object.fromEntries(resource.detailOnly.map((name) => [name, resource.fields[name]!.schema()]));
    schemas[`${label}Detail`] = {
      ...record,
      required: [...(record.required as string[]), ...resource.detailOnly],
      properties: { ...(record.properties as SchemaObject), ...detailProperties },
    };
  }
  return schemas;
}

/** The component names one collection takes, from the stem its label gives. */
function componentsOf(stem: string): string[] {
  return [stem, `Paginated${stem}List`, `${stem}Request`, `Patched${stem}Request`, `${stem}Detail`];
}

/**
 * Each collection's component stem, by collection name (issue 22 item 10): its label in
 * PascalCase, keeping only what OpenAPI allows in a component name (`^[a-zA-Z0-9.\-_]+$`), so
 * `job_positions` ("Job Position") is `JobPosition`. restwire's own collections are named first,
 * so theirs never change; a stem whose names are taken (by `Problem`, or by a collection named
 * before) gets the first free number: a collection `user` is `User2` beside the built-in `User`.
 */
export function componentNames(resources: readonly Resource[], fixed: readonly string[]): Map<string, string> {
  const taken = new Set(fixed);
  const names = new Map<string, string>();
  const ordered = [...resources.filter((resource) => resource.builtin), ...resources.filter((resource) => !resource.builtin)];
  for (const resource of ordered) {
    const base = pascalCase(resource.label) || pascalCase(resource.name) || 'Record';
    let stem = base;
    for (let n = 2; componentsOf(stem).some((name) => taken.has(name)); n++) stem = `${base}${n}`;
    for (const name of componentsOf(stem)) taken.add(name);
    names.set(resource.name, stem);
  }
  return names;
}

/** `Job Position` → `JobPosition`, `café menu` → `CafeMenu`: letters and digits only. */
function pascalCase(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .split(/[^A-Za-z0-9]+/)
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join('');
}
