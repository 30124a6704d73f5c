// `?expand=` (REQUESTS.md §2): a record's related records shown inside it, in a member `expand`,
// as a GET of them would show them to the caller (their read rules, permission, scope and
// `represent` / `representFor` hooks). The viewset asks the related collection's own viewset for
// them (`ShownRecords`), so there is one way to show a record. A whole page is expanded with one
// query per relation and level, never one per record: the ids come from the members the page
// already shows (paths), so a member the caller may not see (a field rule) is not expanded either.

import { readsAreShared } from '../access/compile.js';
import { fieldsAreShared } from '../access/field-rules.js';
import type { ApiRequest } from '../../http/view.js';
import { InvalidQuery } from '../../http/errors.js';
import { MESSAGES } from '../../http/messages.js';
import type { CollectionLookup } from '../relations.js';
import type { Resource } from '../resource.js';

/** How deep `a.b.c` may go, and how many comma-separated paths one request may name (REQUESTS.md §2). */
export const MAX_EXPAND_DEPTH = 3;
export const MAX_EXPAND_PATHS = 10;

/** A relation a record shows as a path (`reference`, `owner`) or a list of paths (`references`, reverse lists). */
export interface Relation {
  readonly target: string;
  readonly many: boolean;
}

/** The relations to expand, by name, each with what to expand inside its records. */
export type ExpandTree = ReadonlyMap<string, ExpandTree>;

const relationsByResource = new WeakMap<Resource, ReadonlyMap<string, Relation>>();

/** A collection's relations by member name: reference fields, `owner` and reverse lists (worked out once per declaration). */
export function relationsOf(resource: Resource): ReadonlyMap<string, Relation> {
  const known = relationsByResource.get(resource);
  if (known) return known;
  const relations = new Map<string, Relation>();
  for (const [name, field] of Object.entries(resource.fields)) {
    if (field.writeOnly || field.to === undefined) continue;
    if (field.type === 'reference' || field.type === 'references') relations.set(name, { target: field.to, many: field.type === 'references' });
  }
  if (resource.owner) relations.set('owner', { target: 'users', many: false });
  for (const [name, related] of Object.entries(resource.related)) relations.set(name, { target: related.collection, many: true });
  relationsByResource.set(resource, relations);
  return relations;
}

/** Every path `?expand=` accepts on a collection, `author` to `author.publisher.owner` (OpenAPI's enum). */
export function expandPathsOf(resource: Resource, lookup: CollectionLookup, depth = MAX_EXPAND_DEPTH): string[] {
  if (depth === 0) return [];
  return [...relationsOf(resource)].flatMap(([name, { target }]) => {
    const next = lookup(target);
    return [name, ...(next ? expandPathsOf(next, lookup, depth - 1).map((path) => `${name}.${path}`) : [])];
  });
}

function invalidExpand(message: string): InvalidQuery {
  return new InvalidQuery({ expand: [message] }, MESSAGES.invalidQuery);
}

/**
 * Reads `?expand=` (a repeated parameter counts as one list): null when absent or empty, else the
 * tree of relations to load; a name that is no relation, a path over MAX_EXPAND_DEPTH or more
 * than MAX_EXPAND_PATHS paths is a 400 naming `expand` and the name.
 */
export function parseExpand(resource: Resource, lookup: CollectionLookup, value: unknown): ExpandTree | null {
  if (value === undefined) return null;
  const paths = String(value).split(',').filter((path) => path !== '');
  if (paths.length === 0) return null;
  if (paths.length > MAX_EXPAND_PATHS) throw invalidExpand(`At most ${MAX_EXPAND_PATHS} paths may be expanded; this asks for ${paths.length}.`);
  const tree = new Map<string, Map<string, unknown>>();
  for (const path of paths) {
    const names = path.split('.');
    if (names.length > MAX_EXPAND_DEPTH) throw invalidExpand(`"${path}" is deeper than ${MAX_EXPAND_DEPTH} levels.`);
    let collection: Resource | undefined = resource;
    let level = tree;
    for (const name of names) {
      const relation = relationsOf(collection!).get(name);
      if (!relation) throw invalidExpand(`"${name}" is not a relation of ${collection!.name}${path === name ? '' : ` (in "${path}")`}.`);
      if (!level.has(name)) level.set(name, new Map());
      level = level.get(name) as Map<string, Map<string, unknown>>;
      collection = lookup(relation.target);
    }
  }
  return tree as unknown as ExpandTree;
}

/**
 * Whether a page may be shared between callers (the representation cache): not when a scope, a
 * `representFor` or a read rule makes it differ between them, for the collection itself or for
 * the reverse lists it shows (ACCESS.md §6).
 */
export function pagesAreShared(resource: Resource, lookup: CollectionLookup): boolean {
  return (
    !resource.hooks.scope &&
    !resource.hooks.representFor &&
    fieldsAreShared(resource) &&
    [resource, ...Object.values(resource.related).map((relation) => lookup(relation.collection))].every((shown) => readsAreShared(shown?.access ?? null))
  );
}

/** Whether what `tree` expands is the same for every caller: each collection reached reads alike for all, anonymous ones included. */
export function expansionIsShared(resource: Resource, lookup: CollectionLookup, tree: ExpandTree): boolean {
  const relations = relationsOf(resource);
  return [...tree].every(([name, inner]) => {
    const target = lookup(relations.get(name)!.target)!;
    return target.permission.hasPermission({ method: 'GET', user: null }) && pagesAreShared(target, lookup) && expansionIsShared(target, lookup, inner);
  });
}

/** Records of `collection` by id, as a GET of them would show them to the request's caller, each expanded by `tree`. */
export type ShownRecords = (collection: string, ids: readonly number[], tree: ExpandTree, request: ApiRequest) => Promise<Map<number, Record<string, unknown>>>;

/** The id at the end of a record path (`/api/v1/authors/3/`). */
function idOfPath(path: unknown): number | null {
  const match = typeof path === 'string' ? /\/(\d+)\/$/.exec(path) : null;
  return match ? Number(match[1]) : null;
}

/**
 * Adds `expand` to each record (changed in place): for each relation of `tree`, its record (or
 * null) or its list of records, leaving out what the caller may not read. One `shown` call per
 * relation for all of `records`.
 */
export async function expandRecords(
  resource: Resource,
  records: readonly Record<string, unknown>[],
  tree: ExpandTree,
  request: ApiRequest,
  shown: ShownRecords,
): Promise<void> {
  const relations = relationsOf(resource);
  for (const [name, inner] of tree) {
    const relation = relations.get(name)!;
    const pathsOf = (record: Record<string, unknown>): unknown[] => (Array.isArray(record[name]) ? (record[name] as unknown[]) : [record[name]]);
    const ids = new Set<number>();
    for (const record of records) {
      if (!(name in record)) continue;
      for (const path of pathsOf(record)) {
        const id = idOfPath(path);
        if (id !== null) ids.add(id);
      }
    }
    const found = ids.size ? await shown(relation.target, [...ids], inner, request) : new Map<number, Record<string, unknown>>();
    for (const record of records) {
      // A member the caller is not shown (a field rule) is not expanded (REQUESTS.md §3).
      if (!(name in record)) continue;
      const expand = (record.expand ??= {}) as Record<string, unknown>;
      const related = pathsOf(record).map((path) => found.get(idOfPath(path) ?? 0) ?? null);
      expand[name] = relation.many ? related.filter((item) => item !== null) : (related[0] ?? null);
    }
  }
}
