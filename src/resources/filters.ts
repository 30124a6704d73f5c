// List filters generated from a declaration's `filters` and `search` (RESOURCES.md §3): `exact` as
// `?year=1999`, other lookups as `?year__gte=1990`, references by id or path, `?search=` over the
// search fields. A value is read by the field's own rules, so a bad one is a 400 naming the
// parameter with the field's message, never ignored.

import { sql, type SqlBool } from 'kysely';
import type { Condition } from '../db/dynamic-tables.js';
import { columnOf, joinTableOf } from '../db/schema-state.js';
import type { FieldErrors } from '../http/errors.js';
import { MESSAGES } from '../http/messages.js';
import type { Field, ParseContext } from './fields/field.js';
import { readReference } from './fields/relations.js';
import type { Lookup, Resource } from './resource.js';


/** One query parameter a list accepts. */
export interface QueryFilter {
  readonly param: string;
  readonly description: string;
  /** JSON Schema of the parameter's value, for OpenAPI. */
  readonly schema: Record<string, unknown>;
  /** Its value is a comma-separated list (`__in`): each item counts against MAX_FILTER_VALUES. */
  readonly list?: true;
  /** The condition for a value, or the message for a bad one. */
  read(value: string): { condition: Condition } | { error: string };
}

/**
 * What one filter may cost (issue 22): a list's query string and a webhook's filter alike. A
 * webhook's filter runs inside every write to its collection, whoever writes, so its size is
 * every writer's cost; past these limits SQLite's expression tree and PostgreSQL's stack give
 * out (a 500), and long before that every write slows.
 */
export const MAX_FILTER_TERMS = 20;
/** Values compared in all: one per parameter, one per item of an `__in`. */
export const MAX_FILTER_VALUES = 100;

const COMPARE: Partial<Record<Lookup, '=' | '>' | '>=' | '<' | '<='>> = { exact: '=', gt: '>', gte: '>=', lt: '<', lte: '<=' };
const DESCRIBE: Record<Lookup, string> = {
  exact: 'equal to',
  contains: 'containing, ignoring case,',
  icontains: 'containing, ignoring case,',
  gt: 'greater than',
  gte: 'greater than or equal to',
  lt: 'less than',
  lte: 'less than or equal to',
  in: 'one of (comma-separated)',
  isnull: 'null (`true`) or not (`false`):',
};

/** `lower(column) like %value%`, LIKE's wildcards escaped; `lower()` folds every script on both databases. */
export function containsCondition(column: string, value: string): Condition {
  const pattern = `%${value.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return () => sql<SqlBool>`lower(${sql.ref(column)}) like ${pattern} escape '\\'`;
}

/** Reads one filter value by the field's rules; references take an id or a path of their target. */
function readValue(field: Field | null, text: string, context: ParseContext): { value: unknown } | { error: string } {
  if (field === null || field.type === 'reference' || field.type === 'references') {
    const target = field?.to ?? 'users';
    if (/^[1-9]\d{0,15}$/.test(text.trim())) return { value: Number(text.trim()) };
    if (field === null) return { error: 'Must be a positive integer id.' };
    const found = readReference(text, target, context);
    return 'error' in found ? found : { value: found.id };
  }
  const parsed = field.parse(text, context);
  return parsed.ok ? { value: parsed.value } : { error: parsed.errors.join(' ') };
}

/** Every query parameter a resource's list accepts, besides limit, cursor and ordering. */
export function buildFilters(resource: Resource, context: ParseContext): QueryFilter[] {
  const filters: QueryFilter[] = [];
  for (const [name, lookups] of Object.entries(resource.filters)) {
    const field = name === 'owner' && resource.owner ? null : resource.fields[name]!;
    const column = field === null ? 'owner_id' : columnOf(name, field);
    const label = field === null ? 'owner (a user id)' : field.type === 'reference' || field.type === 'references' ? `${name} (an id or a path)` : name;
    const baseSchema = field === null ? { type: 'integer', minimum: 1 } : field.type === 'reference' || field.type === 'references' ? { type: 'string' } : stripMeta(field.schema());
    for (const lookup of lookups) {
      const param = lookup === 'exact' ? name : `${name}__${lookup}`;
      const description = `Only records whose ${label} is ${DESCRIBE[lookup]} this value.`;
      const match = (value: unknown): Condition => {
        if (column === null) {
          // A `references` field: records with a join row to this target.
          const join = joinTableOf(resource.table, name);
          return (eb) => eb('id', 'in', eb.selectFrom(join).select('from_id').where('to_id', '=', value as number));
        }
        return (eb) => eb(column, '=', value as never);
      };
      filters.push({
        param,
        description,
        ...(lookup === 'in' ? { list: true as const } : {}),
        schema: lookup === 'isnull' ? { type: 'boolean' } : lookup === 'in' || lookup === 'contains' || lookup === 'icontains' ? { type: 'string' } : baseSchema,
        read(text) {
          if (lookup === 'contains' || lookup === 'icontains') {
            return column === null ? { error: 'This lookup does not apply to a list of references.' } : { condition: containsCondition(column, text) };
          }
          if (lookup === 'isnull') {
            if (text !== 'true' && text !== 'false') return { error: MESSAGES.invalidBoolean };
            if (column === null) return { error: 'This lookup does not apply to a list of references.' };
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
            const join = joinTableOf(resource.table, name);
            return { condition: (eb) => eb('id', 'in', eb.selectFrom(join).select('from_id').where('to_id', 'in', values as number[])) };
          }
          const read = readValue(field, text, context);
          if ('error' in read) return read;
          if (lookup === 'exact') return { condition: match(read.value) };
          if (column === null) return { error: 'This lookup does not apply to a list of references.' };
          return { condition: (eb) => eb(column, COMPARE[lookup]!, read.value as never) };
        },
      });
    }
  }
  if (resource.search.length > 0) {
    const columns = resource.search;
    filters.push({
      param: 'search',
      description: `Only records whose ${columns.join(' or ')} contains this text, ignoring case.`,
      schema: { type: 'string' },
      read: (text) => ({ condition: (eb) => eb.or(columns.map((column) => containsCondition(column, text)(eb))) }),
    });
  }
  return filters;
}

/**
 * Reads a list's filter parameters: a condition for each known one, or its message (the list's
 * 400 names the parameter; a filter over MAX_FILTER_TERMS or MAX_FILTER_VALUES is a
 * `non_field_errors` message).
 * Parameters no filter knows are the caller's: a list ignores them (as DRF does); a webhook's
 * filter refuses them (webhooks/subscriptions.ts).
 */
export function readFilterParams(
  filters: ReadonlyMap<string, QueryFilter>,
  params: Iterable<readonly [string, string]>,
): { conditions: Condition[]; errors: FieldErrors } {
  const known = [...params].filter(([param]) => filters.has(param));
  if (known.length > MAX_FILTER_TERMS) {
    return { conditions: [], errors: { non_field_errors: [`A filter may have at most ${MAX_FILTER_TERMS} parameters; this one has ${known.length}.`] } };
  }
  const values = known.reduce((sum, [param, value]) => sum + (filters.get(param)!.list ? value.split(',').length : 1), 0);
  // One `__in` over the limit is its own parameter's message (below); several together are this one.
  if (values > MAX_FILTER_VALUES && known.every(([param, value]) => !filters.get(param)!.list || value.split(',').length <= MAX_FILTER_VALUES)) {
    return { conditions: [], errors: { non_field_errors: [`A filter may compare at most ${MAX_FILTER_VALUES} values in all; this one compares ${values}.`] } };
  }
  const errors: FieldErrors = {};
  const conditions: Condition[] = [];
  for (const [param, value] of known) {
    const filter = filters.get(param)!;
    // PostgreSQL can neither store nor compare a NUL (a 500 "invalid byte sequence"); no value holds one.
    if (value.includes('\0')) {
      errors[param] = ['Must not contain a NUL character.'];
      continue;
    }
    const read = filter.read(value);
    if ('error' in read) errors[param] = [read.error];
    else conditions.push(read.condition);
  }
  return { conditions, errors };
}

function stripMeta(schema: Record<string, unknown>): Record<string, unknown> {
  const { title: _title, description: _description, default: _default, readOnly: _readOnly, writeOnly: _writeOnly, ...rest } = schema;
  return rest;
}
