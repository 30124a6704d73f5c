// Webhook filters at write time (issue 14), bounded (issue 22). A filter is one subscriber's, but
// it runs inside every write to its collection, whoever writes: so each is read with the list
// endpoints' own filters and limits, all of a change's are answered by one query compiled once,
// and a filter that fails to run is the subscriber's loss, never the writer's.

import { CompiledQuery, sql, type Kysely, type SqlBool, type Transaction } from 'kysely';
import type { Condition, DynamicDb } from '../db/dynamic-tables.js';
import { afterFailure, prepared, sendAhead, sendLater } from '../db/pipelining.js';
import type { Database } from '../db/schema.js';
import type { User } from '../http/caller.js';
import { fieldReadGuard, fieldsAreShared } from '../resources/access/field-rules.js';
import { readFilterParams, type QueryFilter } from '../resources/filters.js';
import type { Resource } from '../resources/resource.js';

type Executor = Transaction<Database> | Kysely<Database>;

/** A webhook as the outbox reads it: its id and stored filter (JSON text, per event a query string). */
export interface FilteredWebhook {
  readonly id: number;
  readonly filter: string | null;
  /** Its owner, with roles as read in the change's transaction: a term on a field they may not read matches nothing of it (ACCESS.md §4). */
  readonly owner?: User | null;
}

/**
 * A stored filter that no longer reads (stored before the limits of issue 22, or before its
 * collection's filters changed): the subscriber hears of nothing rather than of everything.
 */
const MATCHES_NOTHING: readonly Condition[] = [() => sql<SqlBool>`1 = 0`];

/** Hooks answered per query: keeps a query's columns and parameters far below SQLite's and PostgreSQL's limits. */
const HOOKS_PER_QUERY = 10;
/** The id a query is compiled with, replaced by the record's on each run. */
const ANY_ID = -1;

const SAVEPOINT = CompiledQuery.raw('savepoint webhook_filter');
const RELEASE = CompiledQuery.raw('release savepoint webhook_filter');
const ROLLBACK = CompiledQuery.raw('rollback to savepoint webhook_filter');

interface Compiled {
  /** The condition lists it was compiled from, compared by identity: a changed filter is read anew. */
  readonly from: readonly (readonly Condition[])[];
  readonly queries: readonly CompiledQuery<Record<string, unknown>>[];
}

/** Each webhook's filter, read once into conditions, and the queries that answer them per collection. */
export class WebhookFilters {
  private readonly read = new Map<number, { text: string; queries: Record<string, string>; byEvent: Map<string, readonly Condition[]> }>();
  private readonly byCollection = new Map<string, ReadonlyMap<string, QueryFilter>>();
  private readonly compiled = new Map<string, Compiled>();

  constructor(
    private readonly db: DynamicDb,
    private readonly filtersOf: (collection: string) => readonly QueryFilter[],
  ) {}

  /** The conditions of a webhook's filter for `event`, or null when it has none for that event. */
  conditions(webhook: FilteredWebhook, event: string, resource: Resource): readonly Condition[] | null {
    if (webhook.filter === null) return null;
    let known = this.read.get(webhook.id);
    if (known?.text !== webhook.filter) {
      known = { text: webhook.filter, queries: JSON.parse(webhook.filter) as Record<string, string>, byEvent: new Map() };
      this.read.set(webhook.id, known);
    }
    const query = known.queries[event];
    if (query === undefined) return null;
    // With field read rules the owner's guard narrows each term (ACCESS.md §3, as list filters),
    // so the conditions are kept per owner's roles; else per event alone.
    const owner = webhook.owner ?? null;
    const key = fieldsAreShared(resource) ? event : `${event}\n${JSON.stringify([owner?.id ?? null, owner?.roles ?? null])}`;
    let conditions = known.byEvent.get(key);
    if (conditions === undefined) {
      // The same limits as when it was stored, so a filter stored before them costs no more.
      const guard = fieldsAreShared(resource) ? undefined : fieldReadGuard(resource, owner);
      const read = readFilterParams(this.collectionFilters(resource.name), new URLSearchParams(query), guard);
      conditions = Object.keys(read.errors).length ? MATCHES_NOTHING : read.conditions;
      known.byEvent.set(key, conditions);
    }
    return conditions;
  }

  /**
   * Of `webhooks`, those with a filter for `event`, each with whether the record `id` meets it now,
   * read in the change's transaction.
   */
  async verdicts(trx: Executor, resource: Resource, event: string, id: number, hooks: readonly FilteredWebhook[]): Promise<Map<number, boolean>> {
    const filtered = hooks.flatMap((webhook) => {
      const conditions = this.conditions(webhook, event, resource);
      return conditions === null ? [] : [{ id: webhook.id, conditions }];
    });
    const verdicts = new Map<number, boolean>();
    if (filtered.length === 0) return verdicts;
    const queries = this.queries(resource, filtered.map((webhook) => webhook.conditions));
    const answers = await runGuarded(trx, queries.map((query) => withId(query, id)));
    if (answers !== null) {
      answers.forEach((rows, index) => {
        const chunk = filtered.slice(index * HOOKS_PER_QUERY, (index + 1) * HOOKS_PER_QUERY);
        chunk.forEach((webhook, column) => verdicts.set(webhook.id, isTrue(rows[0]?.[`m${column}`])));
      });
      return verdicts;
    }
    // One filter failed to run (none should, within the limits): each alone, so it fails only its own.
    for (const webhook of filtered) {
      const alone = await runGuarded(trx, [withId(this.compile(resource, [webhook.conditions]), id)]);
      verdicts.set(webhook.id, isTrue(alone?.[0]?.[0]?.m0));
    }
    return verdicts;
  }

  /**
   * The queries answering these condition lists, one column each, compiled once per set of
   * filters: building a query of a few thousand terms with Kysely on every write would cost more
   * than running it (as the viewset's inserts, viewset/writes.ts, issue #6).
   */
  private queries(resource: Resource, lists: readonly (readonly Condition[])[]): readonly CompiledQuery<Record<string, unknown>>[] {
    const known = this.compiled.get(resource.name);
    if (known && known.from.length === lists.length && known.from.every((list, index) => list === lists[index])) return known.queries;
    const queries: CompiledQuery<Record<string, unknown>>[] = [];
    for (let start = 0; start < lists.length; start += HOOKS_PER_QUERY) queries.push(this.compile(resource, lists.slice(start, start + HOOKS_PER_QUERY)));
    this.compiled.set(resource.name, { from: lists, queries });
    return queries;
  }

  private compile(resource: Resource, lists: readonly (readonly Condition[])[]): CompiledQuery<Record<string, unknown>> {
    const compiled = this.db
      .selectFrom(resource.table)
      .select((eb) => lists.map((conditions, column) => eb.and(conditions.map((condition) => condition(eb))).as(`m${column}`)))
      .where('id', '=', ANY_ID)
      .compile() as CompiledQuery<Record<string, unknown>>;
    // `withId` replaces the last parameter: the `where` comes after every term of the select.
    if (compiled.parameters.at(-1) !== ANY_ID) throw new Error('webhook filter query: the record id is not the last parameter');
    // Parsing and planning a few thousand parameters costs PostgreSQL more than running them: 2.05
    // ms a run unnamed, 0.51 ms prepared, for 10 of the largest filters (drills/filter-cost).
    return prepared(compiled);
  }

  private collectionFilters(collection: string): ReadonlyMap<string, QueryFilter> {
    let map = this.byCollection.get(collection);
    if (!map) this.byCollection.set(collection, (map = new Map(this.filtersOf(collection).map((filter) => [filter.param, filter]))));
    return map;
  }
}

/** A compiled query run for record `id` (its last parameter, compiled as a placeholder id). */
export function withId<R>(query: CompiledQuery<R>, id: number): CompiledQuery<R> {
  return { ...query, parameters: [...query.parameters.slice(0, -1), id] };
}

/**
 * Runs queries in a savepoint: their rows, or null if one failed. On PostgreSQL a failed statement
 * aborts the whole transaction, which is the writer's; rolling back to the savepoint keeps it. The
 * savepoint and the queries go out together and the release after them without a wait, so a
 * change's filters cost the writer one round trip, not three per query (drills/filter-cost).
 */
async function runGuarded<R>(trx: Executor, queries: readonly CompiledQuery<R>[]): Promise<R[][] | null> {
  await sendLater(trx, SAVEPOINT);
  // Settled, not raced: on SQLite a failed query throws at once and the next still runs; none may
  // be left running when the savepoint is rolled back.
  const answers = await Promise.allSettled(queries.map((query) => sendAhead(trx, query)));
  if (answers.every((answer) => answer.status === 'fulfilled')) {
    await sendLater(trx, RELEASE);
    return answers.map((answer) => answer.value.rows);
  }
  await afterFailure(trx, ROLLBACK);
  await trx.executeQuery(RELEASE);
  return null;
}

/** A boolean column: PostgreSQL's true, SQLite's 1; null (a comparison with null) is no match. */
export function isTrue(value: unknown): boolean {
  return value === true || value === 1;
}
