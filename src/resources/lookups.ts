// One field compared by one lookup (Django's names), as a `WHERE` condition: what a list filter
// (`?year__gte=1990`, filters.ts) and an access rule term (`year__gte=1990`, access/rules.ts)
// both build, so one language serves lists, webhook filters and access (ACCESS.md §2). A value is
// read by the field's own rules; references take an id or a path of their target.

import { sql, type SqlBool } from 'kysely';
import type { Condition } from '../db/dynamic-tables.js';
import { columnOf, joinTableOf } from '../db/schema-state.js';
import { MESSAGES } from '../http/messages.js';
import type { Field, ParseContext } from './fields/field.js';
import { readReference } from './fields/relations.js';

/** Filter lookups (Django's names): `exact` is `?year=1999`, the others `?year__gte=1990`. */
export const LOOKUPS = ['exact', 'contains', 'icontains', 'gt', 'gte', 'lt', 'lte', 'in', 'isnull'] as const;
export type Lookup = (typeof LOOKUPS)[number];

/** Field types stored as text, which `contains` and `search` can look in. */
export const TEXT_TYPES: readonly string[] = ['string', 'text', 'email', 'url', 'choice'];

/** Values compared in all: one per parameter, one per item of an `__in`. */
export const MAX_FILTER_VALUES = 100;

/** What a lookup compares: a declared field, or (field null) `owner` or `id`, which hold ids. */
export interface LookupTarget {
  /** The collection's table (a `references` field's join table is named after it). */
  readonly table: string;
  readonly name: string;
  readonly field: Field | null;
}

/** A lookup's condition for a value, or the message for a bad one. */
export type LookupReader = (text: string) => { condition: Condition } | { error: string };

const COMPARE: Partial<Record<Lookup, '=' | '>' | '>=' | '<' | '<='>> = { exact: '=', gt: '>', gte: '>=', lt: '<', lte: '<=' };
const NOT_FOR_LISTS = 'This lookup does not apply to a list of references.';

/** `lower(column) like %value%`, LIKE's wildcards escaped; `lower()` folds every script on both databases. */
export function containsCondition(column: string, value: string): Condition {
  const pattern = `%${value.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return () => sql<SqlBool>`lower(${sql.ref(column)}) like ${pattern} escape '\\'`;
}

/** Reads one value by the field's rules; references (and `owner`, `id`) take an id, references a path too. */
function readValue(field: Field | null, text: string, context: ParseContext): { value: unknown } | { error: string } {
  if (field === null || field.type === 'reference' || field.type === 'references') {
    if (/^[1-9]\d{0,15}$/.test(text.trim())) return { value: Number(text.trim()) };
    if (field === null) return { error: 'Must be a positive integer id.' };
    const found = readReference(text, field.to!, context);
    return 'error' in found ? found : { value: found.id };
  }
  const parsed = field.parse(text, context);
  return parsed.ok ? { value: parsed.value } : { error: parsed.errors.join(' ') };
}

/** The column a target compares (null: a `references` field, compared through its join table). */
export function lookupColumn(target: LookupTarget): string | null {
  if (target.field === null) return target.name === 'owner' ? 'owner_id' : 'id';
  return columnOf(target.name, target.field);
}

/** Reads values of `target` compared by `lookup` into conditions. */
export function lookupReader(target: LookupTarget, lookup: Lookup, context: ParseContext): LookupReader {
  const { field } = target;
  const column = lookupColumn(target);
  const join = joinTableOf(target.table, target.name);
  return (text) => {
    if (lookup === 'contains' || lookup === 'icontains') {
      return column === null ? { error: NOT_FOR_LISTS } : { condition: containsCondition(column, text) };
    }
    if (lookup === 'isnull') {
      if (text !== 'true' && text !== 'false') return { error: MESSAGES.invalidBoolean };
      if (column === null) return { error: NOT_FOR_LISTS };
      return { condition: (eb) => eb(column, text === 'true' ? 'is' : 'is not', null) };
    }
    if (lookup === 'in') {
      const items = text.split(',');
      if (items.length > MAX_FILTER_VALUES) return { error: `Give at most ${MAX_FILTER_VALUES} values; this gives ${items.length}.` };
      const values: unknown[] = [];
      for (const item of items) {
        const read = readValue(field, item, context);
        if ('error' in read) return read;
        values.push(read.value);
      }
      // One `in (…)`, not a chain of `or`: SQLite parses a chain as a tree as deep as it is long.
      if (column !== null) return { condition: (eb) => eb(column, 'in', values as never[]) };
      return { condition: (eb) => eb('id', 'in', eb.selectFrom(join).select('from_id').where('to_id', 'in', values as number[])) };
    }
    const read = readValue(field, text, context);
    if ('error' in read) return read;
    if (lookup === 'exact') {
      // A `references` field: records with a join row to this target.
      if (column === null) return { condition: (eb) => eb('id', 'in', eb.selectFrom(join).select('from_id').where('to_id', '=', read.value as number)) };
      return { condition: (eb) => eb(column, '=', read.value as never) };
    }
    if (column === null) return { error: NOT_FOR_LISTS };
    return { condition: (eb) => eb(column, COMPARE[lookup]!, read.value as never) };
  };
}
