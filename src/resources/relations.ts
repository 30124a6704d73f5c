// Relations between declared collections (RESOURCES.md §2): loading `references` lists and reverse
// lists for a page of records (one query per relation, never one per record), and checking that
// every referenced record exists. Deleting a referenced record is the viewset's (`viewset/delete-rules.ts`),
// since each affected record raises its own event.

import { CompiledQuery, type QueryResult } from 'kysely';
import type { AnyBuilder, DynamicDb } from '../db/dynamic-tables.js';
import { sendAhead } from '../db/pipelining.js';
import type { User } from '../http/caller.js';
import { readCondition } from './access/compile.js';
import { joinTableOf } from '../db/schema-state.js';
import { recordPath } from '../http/paths.js';
import { messages as referenceMessages } from './fields/relations.js';
import type { Resource } from './resource.js';


/** Finds a declared collection by name (the registry's lookup). */
export type CollectionLookup = (name: string) => Resource | undefined;

function appendTo<T>(lists: Map<number, T[]>, key: number, item: T): void {
  const list = lists.get(key);
  if (list) list.push(item);
  else lists.set(key, [item]);
}

/** Each `references` field's target ids per record, in id order. */
export async function loadReferenceLists(
  executor: DynamicDb,
  resource: Resource,
  ids: readonly number[],
): Promise<Map<string, Map<number, number[]>>> {
  const lists = new Map<string, Map<number, number[]>>();
  for (const [name, field] of Object.entries(resource.fields)) {
    if (field.type !== 'references' || field.writeOnly) continue;
    const byRecord = new Map<number, number[]>();
    if (ids.length > 0) {
      const rows = (await executor
        .selectFrom(joinTableOf(resource.table, name))
        .select(['from_id', 'to_id'])
        .where('from_id', 'in', ids)
        .orderBy('to_id')
        .execute()) as Array<{ from_id: number; to_id: number }>;
      for (const row of rows) appendTo(byRecord, Number(row.from_id), Number(row.to_id));
    }
    lists.set(name, byRecord);
  }
  return lists;
}

/**
 * Each reverse list's paths per record (`related: {books: {collection: 'books', field: 'author'}}`):
 * for a `viewer` (a caller, null when anonymous), only the records they may read (ACCESS.md §2);
 * without one (restwire's own use: events), every record.
 */
export async function loadRelatedLists(
  executor: DynamicDb,
  resource: Resource,
  ids: readonly number[],
  lookup: CollectionLookup,
  viewer?: User | null,
): Promise<Map<string, Map<number, string[]>>> {
  const lists = new Map<string, Map<number, string[]>>();
  for (const [name, relation] of Object.entries(resource.related)) {
    const source = lookup(relation.collection)!;
    const byRecord = new Map<number, string[]>();
    if (ids.length > 0) {
      const many = source.fields[relation.field]?.type === 'references';
      const readable = viewer === undefined ? null : readCondition(source.access, viewer);
      let query = many
        ? executor
            .selectFrom(joinTableOf(source.table, relation.field))
            .select(['from_id as id', 'to_id as target'])
            .where('to_id', 'in', ids)
            .orderBy('from_id')
        : executor
            .selectFrom(source.table)
            .select(['id', `${relation.field}_id as target`])
            .where(`${relation.field}_id`, 'in', ids)
            .orderBy('id');
      if (readable) query = many ? query.where('from_id', 'in', (eb: AnyBuilder) => eb.selectFrom(source.table).select('id').where(readable)) : query.where(readable);
      const rows = (await query.execute()) as Array<{ id: number; target: number }>;
      for (const row of rows) appendTo(byRecord, Number(row.target), recordPath(source.name, Number(row.id)));
    }
    lists.set(name, byRecord);
  }
  return lists;
}

/**
 * DRF's "Invalid hyperlink - Object does not exist." for every reference in `values` (field →
 * id, or ids for a list) whose record is missing, or one the `viewer` may not read (ACCESS.md
 * §2: as if it did not exist), one query per target collection. Every query is sent before this
 * returns its promise (on PostgreSQL without waiting for the answer, db/pipelining.ts), so a
 * statement the caller sends next shares their round trip and runs after them.
 */
export function missingReferences(
  executor: DynamicDb,
  resource: Resource,
  values: Readonly<Record<string, unknown>>,
  lookup: CollectionLookup,
  viewer: User | null,
): Promise<Record<string, string[]>> {
  const wanted = new Map<string, Set<number>>();
  for (const [name, value] of Object.entries(values)) {
    const field = resource.fields[name];
    if (!field?.to || value === null || value === undefined) continue;
    const ids = wanted.get(field.to) ?? new Set<number>();
    for (const id of Array.isArray(value) ? (value as number[]) : [value as number]) ids.add(id);
    wanted.set(field.to, ids);
  }
  const asked: Array<{ target: string; answer: Promise<QueryResult<{ id: number }>> }> = [];
  for (const [target, ids] of wanted) {
    if (ids.size === 0) continue;
    const targetResource = lookup(target);
    const table = targetResource?.table ?? target;
    const readable = readCondition(targetResource?.access ?? null, viewer);
    const list = [...ids];
    // Several lists may name one collection: in slices, each within SQLite's 32,766 parameters.
    for (let start = 0; start < list.length; start += 10_000) {
      const slice = list.slice(start, start + 10_000);
      asked.push({ target, answer: sendAhead(executor, readable ? executor.selectFrom(table).select('id').where('id', 'in', slice).where(readable).compile() : existenceQuery(executor, table, slice)) });
    }
  }
  return Promise.all(asked.map(({ answer }) => answer)).then((answers) => {
    const existing = new Map<string, Set<number>>();
    answers.forEach(({ rows }, index) => {
      const target = asked[index]!.target;
      const found = existing.get(target) ?? new Set<number>();
      for (const row of rows) found.add(Number(row.id));
      existing.set(target, found);
    });
    const errors: Record<string, string[]> = {};
    for (const [name, value] of Object.entries(values)) {
      const field = resource.fields[name];
      if (!field?.to || value === null || value === undefined) continue;
      const found = existing.get(field.to) ?? new Set<number>();
      const messages = (Array.isArray(value) ? (value as number[]) : [value as number])
        .filter((id) => !found.has(id))
        .map(() => referenceMessages.doesNotExist);
      if (messages.length) errors[name] = messages;
    }
    return errors;
  });
}

// `select id from <table> where id in (…)` by dialect adapter, table and number of ids: a create
// checks its references with it, and building it with Kysely each time cost more than running it
// (issue 20 profile; the viewset's insert is compiled once per column set for the same reason).
const existenceQueries = new WeakMap<object, Map<string, string>>();
function existenceQuery(executor: DynamicDb, table: string, ids: readonly number[]): CompiledQuery<{ id: number }> {
  const adapter = executor.getExecutor().adapter;
  let known = existenceQueries.get(adapter);
  if (!known) existenceQueries.set(adapter, (known = new Map()));
  const key = `${ids.length} ${table}`;
  const text = known.get(key);
  if (text !== undefined) return CompiledQuery.raw(text, [...ids]) as CompiledQuery<{ id: number }>;
  const compiled = executor.selectFrom(table).select('id').where('id', 'in', ids).compile() as CompiledQuery<{ id: number }>;
  // Remembered only if Kysely bound exactly the ids, in order (it always has).
  if (compiled.parameters.length === ids.length && compiled.parameters.every((value, index) => value === ids[index])) known.set(key, compiled.sql);
  return compiled;
}

/** A field of some collection that refers to records of `target` with a `reference`. */
export interface Referrer {
  readonly resource: Resource;
  readonly field: string;
  readonly onDelete: 'protect' | 'cascade' | 'setNull';
}

/** Every `reference` field, in every collection, that points at `target`. */
export function referrersOf(target: string, collections: readonly Resource[]): Referrer[] {
  const found: Referrer[] = [];
  for (const resource of collections) {
    for (const [name, field] of Object.entries(resource.fields)) {
      if (field.type === 'reference' && field.to === target) found.push({ resource, field: name, onDelete: field.onDelete ?? 'protect' });
    }
  }
  return found;
}
