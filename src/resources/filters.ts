// List filters generated from a declaration's `filters` and `search` (RESOURCES.md §3): `exact` as
// `?year=1999`, other lookups as `?year__gte=1990`, references by id or path, `?search=` over the
// search fields. A value is read by the field's own rules, so a bad one is a 400 naming the
// parameter with the field's message, never ignored.

import type { Condition } from '../db/dynamic-tables.js';
import type { FieldErrors } from '../http/errors.js';
import type { ParseContext } from './fields/field.js';
import { containsCondition, lookupReader, MAX_FILTER_VALUES, type Lookup, type LookupReader } from './lookups.js';
import type { Resource } from './resource.js';

export { containsCondition, MAX_FILTER_VALUES } from './lookups.js';

/**
 * What a filter term on `field` becomes for one caller: the term, ANDed with the field's read
 * rule where it has one (ACCESS.md §3, access/field-rules.ts `fieldReadGuard`).
 */
export type FieldGuard = (field: string, condition: Condition) => Condition;

/** One query parameter a list accepts. */
export interface QueryFilter {
  readonly param: string;
  readonly description: string;
  /** JSON Schema of the parameter's value, for OpenAPI. */
  readonly schema: Record<string, unknown>;
  /** Its value is a comma-separated list (`__in`): each item counts against MAX_FILTER_VALUES. */
  readonly list?: true;
  /** The condition for a value, or the message for a bad one; `guard` narrows each field's term for a caller. */
  read(text: string, guard?: FieldGuard): ReturnType<LookupReader>;
}

/**
 * What one filter may cost (issue 22): a list's query string and a webhook's filter alike. A
 * webhook's filter runs inside every write to its collection, whoever writes, so its size is
 * every writer's cost; past these limits SQLite's expression tree and PostgreSQL's stack give
 * out (a 500), and long before that every write slows. (MAX_FILTER_VALUES, the values compared
 * in all, is in lookups.ts, which an `__in` checks.)
 */
export const MAX_FILTER_TERMS = 20;

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

/** Every query parameter a resource's list accepts, besides limit, cursor and ordering. */
export function buildFilters(resource: Resource, context: ParseContext): QueryFilter[] {
  const filters: QueryFilter[] = [];
  for (const [name, lookups] of Object.entries(resource.filters)) {
    const field = name === 'owner' && resource.owner ? null : resource.fields[name]!;
    const label = field === null ? 'owner (a user id)' : field.type === 'reference' || field.type === 'references' ? `${name} (an id or a path)` : name;
    const baseSchema = field === null ? { type: 'integer', minimum: 1 } : field.type === 'reference' || field.type === 'references' ? { type: 'string' } : stripMeta(field.schema());
    for (const lookup of lookups) {
      const read = lookupReader({ table: resource.table, name, field }, lookup, context);
      filters.push({
        param: lookup === 'exact' ? name : `${name}__${lookup}`,
        description: `Only records whose ${label} is ${DESCRIBE[lookup]} this value.`,
        ...(lookup === 'in' ? { list: true as const } : {}),
        schema: lookup === 'isnull' ? { type: 'boolean' } : lookup === 'in' || lookup === 'contains' || lookup === 'icontains' ? { type: 'string' } : baseSchema,
        read: (text, guard) => {
          const found = read(text);
          return guard && 'condition' in found ? { condition: guard(name, found.condition) } : found;
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
      // Each field is searched where the caller may read it (ACCESS.md §3).
      read: (text, guard = (_field, condition) => condition) => ({
        condition: (eb) => eb.or(columns.map((column) => guard(column, containsCondition(column, text))(eb))),
      }),
    });
  }
  return filters;
}

/**
 * Reads a list's filter parameters (for a caller, with their `guard`): a condition for each known one, or its message (the list's
 * 400 names the parameter; a filter over MAX_FILTER_TERMS or MAX_FILTER_VALUES is a
 * `non_field_errors` message).
 * Parameters no filter knows are the caller's: a list ignores them (as DRF does); a webhook's
 * filter refuses them (webhooks/subscriptions.ts).
 */
export function readFilterParams(
  filters: ReadonlyMap<string, QueryFilter>,
  params: Iterable<readonly [string, string]>,
  guard?: FieldGuard,
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
    const read = filter.read(value, guard);
    if ('error' in read) errors[param] = [read.error];
    else conditions.push(read.condition);
  }
  return { conditions, errors };
}

function stripMeta(schema: Record<string, unknown>): Record<string, unknown> {
  const { title: _title, description: _description, default: _default, readOnly: _readOnly, writeOnly: _writeOnly, ...rest } = schema;
  return rest;
}
