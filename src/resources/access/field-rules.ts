// Field rules for one caller (ACCESS.md §3): which fields of which records a caller may not read,
// and which they may not write. A field's rule folds per caller as a collection's does
// (compile.ts): true costs nothing, false hides the field from every record, and a condition is
// judged per record by a 0/1 column (`CASE WHEN … THEN 1 ELSE 0 END`) in the query that reads
// the rows, or, for rows read without it, in one query for all of them: never one per record.
// Nothing here knows of HTTP requests: the viewset and the webhook outbox both ask with a
// `User | null`, so a webhook's body is judged with its owner as the caller (ACCESS.md §4).

import type { SelectQueryBuilder } from 'kysely';
import type { Condition, DynamicDb, Row } from '../../db/dynamic-tables.js';
import type { User } from '../../http/caller.js';
import type { FieldGuard } from '../filters.js';
import type { Change, Resource } from '../resource.js';
import { compileRule, conditionOf, type Verdict } from './compile.js';
import type { FieldRuleAction } from './rules.js';

/** Each restricted field's verdict for one caller; a field every record shows them is left out. */
export function fieldVerdicts(resource: Resource, action: FieldRuleAction, user: User | null): Map<string, Exclude<Verdict, true>> {
  const verdicts = new Map<string, Exclude<Verdict, true>>();
  for (const [name, rules] of Object.entries(resource.fieldAccess)) {
    const rule = rules[action];
    if (rule === null) continue;
    const verdict = compileRule(rule, user);
    if (verdict !== true) verdicts.set(name, verdict);
  }
  return verdicts;
}

/** Whether every caller reads every field of every record: a page may then be shared (ACCESS.md §6, §7). */
export function fieldsAreShared(resource: Resource): boolean {
  return Object.values(resource.fieldAccess).every((rules) => rules.read === null);
}

// The 0/1 column of a field's read verdict; restwire's own prefix, so no field can take its name.
const READS = 'restwire_reads_';

/**
 * A SELECT with one 0/1 column per field whose read rule the caller's records decide, so the
 * page and its verdicts come from one snapshot. `hiddenFields` reads them from the rows.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the table is known only at run time
export function selectFieldReads<Q extends SelectQueryBuilder<any, any, any>>(query: Q, resource: Resource, user: User | null): Q {
  let selected = query;
  for (const [name, verdict] of fieldVerdicts(resource, 'read', user)) {
    if (typeof verdict !== 'function') continue;
    selected = selected.select((eb) => eb.case().when(verdict(eb)).then(1).else(0).end().as(`${READS}${name}`)) as Q;
  }
  return selected;
}

/** The rows of `ids` with a 0/1 column per field whose verdict is a condition (at most 500 ids a query). */
async function judge(executor: DynamicDb, resource: Resource, conditions: ReadonlyMap<string, Condition>, ids: readonly number[]): Promise<Map<number, Row>> {
  const judged = new Map<number, Row>();
  for (let start = 0; start < ids.length; start += 500) {
    let query = executor.selectFrom(resource.table).select('id').where('id', 'in', ids.slice(start, start + 500));
    for (const [name, condition] of conditions) query = query.select((eb) => eb.case().when(condition(eb)).then(1).else(0).end().as(`${READS}${name}`));
    for (const row of (await query.execute()) as Row[]) judged.set(Number(row.id), row);
  }
  return judged;
}

/**
 * Which restricted fields each record hides from `user` (null: anonymous), as `executor` sees
 * the records now: record id → the field names; a record that hides nothing is left out, and
 * one that no longer exists hides every restricted field (judge a record about to be deleted
 * before its delete, in the same transaction). Given rows read with
 * `selectFieldReads`, no query is run; else one for all of them. Admins, and fields whose rule
 * is `*`, hide nothing and cost nothing.
 */
export async function hiddenFields(
  resource: Resource,
  user: User | null,
  executor: DynamicDb,
  records: readonly (Row | number)[],
): Promise<Map<number, ReadonlySet<string>>> {
  const hidden = new Map<number, ReadonlySet<string>>();
  const verdicts = fieldVerdicts(resource, 'read', user);
  if (verdicts.size === 0 || records.length === 0) return hidden;
  const never = [...verdicts].filter(([, verdict]) => verdict === false).map(([name]) => name);
  const conditions = new Map([...verdicts].flatMap(([name, verdict]) => (typeof verdict === 'function' ? [[name, verdict] as const] : [])));
  const judged = new Map<number, Row>();
  const unjudged: number[] = [];
  for (const record of records) {
    const row = typeof record === 'number' ? null : record;
    const id = Number(row ? row.id : record);
    if (row && [...conditions.keys()].every((name) => `${READS}${name}` in row)) judged.set(id, row);
    else unjudged.push(id);
  }
  if (conditions.size > 0 && unjudged.length > 0) for (const [id, row] of await judge(executor, resource, conditions, unjudged)) judged.set(id, row);
  for (const record of records) {
    const id = Number(typeof record === 'number' ? record : record.id);
    const row = judged.get(id);
    const names = [...never, ...[...conditions.keys()].filter((name) => Number(row?.[`${READS}${name}`]) !== 1)];
    if (names.length > 0) hidden.set(id, new Set(names));
  }
  return hidden;
}

/** A representation (or an update's `changes`) without the `hidden` fields; the same object when nothing is hidden. */
export function withoutFields<T extends Record<string, unknown>>(representation: T, hidden: ReadonlySet<string> | undefined): T {
  if (!hidden || hidden.size === 0) return representation;
  const copy: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(representation)) if (!hidden.has(name)) copy[name] = value;
  return copy as T;
}

/**
 * A change as `hidden` lets its reader see it (a webhook's owner, ACCESS.md §4): its record and
 * its `changes` without those fields, so the body built from it shows neither.
 */
export function changeWithout(change: Change, hidden: ReadonlySet<string> | undefined): Change {
  if (!hidden || hidden.size === 0) return change;
  return { ...change, record: withoutFields(change.record, hidden), ...(change.changes ? { changes: withoutFields(change.changes, hidden) } : {}) };
}

/**
 * A list filter's guard (ACCESS.md §3): a term on a field with a read rule matches only records
 * on which the caller may read that field. Undefined when the caller reads every field.
 */
export function fieldReadGuard(resource: Resource, user: User | null): FieldGuard | undefined {
  const verdicts = fieldVerdicts(resource, 'read', user);
  if (verdicts.size === 0) return undefined;
  return (field, condition) => {
    const verdict = verdicts.get(field);
    if (verdict === undefined) return condition;
    const readable = conditionOf(verdict)!;
    return (eb) => eb.and([condition(eb), readable(eb)]);
  };
}

/**
 * The fields `user` may not write (ACCESS.md §3: read-only for them): those whose write rule
 * fails for them whatever the record, and, given a record's id, those whose rule that record
 * fails as `executor` sees it.
 */
export async function unwritableFields(resource: Resource, user: User | null, executor?: DynamicDb, id?: number): Promise<Set<string>> {
  const verdicts = fieldVerdicts(resource, 'write', user);
  const names = new Set([...verdicts].filter(([, verdict]) => verdict === false).map(([name]) => name));
  const conditions = new Map([...verdicts].flatMap(([name, verdict]) => (typeof verdict === 'function' ? [[name, verdict] as const] : [])));
  if (executor && id !== undefined && conditions.size > 0) {
    const row = (await judge(executor, resource, conditions, [id])).get(id);
    for (const name of conditions.keys()) if (Number(row?.[`${READS}${name}`]) !== 1) names.add(name);
  }
  return names;
}

/** Owners judged per query: keeps a query's columns and parameters far below both databases' limits. */
const USERS_PER_QUERY = 50;

/**
 * Which restricted fields record `id` hides from each of `users`, as `executor` sees it now
 * (user id → the field names; one who is shown every field is left out): the webhook outbox asks
 * this of a change for all of its webhooks' owners (ACCESS.md §4), so the fields a condition
 * decides are judged in one query for all of them (per 50 owners), never one per owner.
 */
export async function hiddenFieldsOf(resource: Resource, users: readonly User[], executor: DynamicDb, id: number): Promise<Map<number, ReadonlySet<string>>> {
  const hidden = new Map<number, ReadonlySet<string>>();
  const judged: { user: User; never: string[]; conditions: [string, Condition][] }[] = [];
  for (const user of users) {
    const verdicts = [...fieldVerdicts(resource, 'read', user)];
    if (verdicts.length === 0) continue;
    const never = verdicts.filter(([, verdict]) => verdict === false).map(([name]) => name);
    const conditions = verdicts.flatMap(([name, verdict]) => (typeof verdict === 'function' ? [[name, verdict] as [string, Condition]] : []));
    if (conditions.length === 0) hidden.set(user.id, new Set(never));
    else judged.push({ user, never, conditions });
  }
  for (let start = 0; start < judged.length; start += USERS_PER_QUERY) {
    const chunk = judged.slice(start, start + USERS_PER_QUERY);
    let query = executor.selectFrom(resource.table).select('id').where('id', '=', id);
    chunk.forEach(({ conditions }, index) => {
      for (const [column, [, condition]] of conditions.entries()) query = query.select((eb) => eb.case().when(condition(eb)).then(1).else(0).end().as(`u${index}_${column}`));
    });
    // No row: the record is gone; it hides every restricted field.
    const row = (await query.executeTakeFirst()) as Row | undefined;
    chunk.forEach(({ user, never, conditions }, index) => {
      const names = [...never, ...conditions.filter((_, column) => Number(row?.[`u${index}_${column}`]) !== 1).map(([name]) => name)];
      if (names.length > 0) hidden.set(user.id, new Set(names));
    });
  }
  return hidden;
}
