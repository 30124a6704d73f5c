// Webhooks under the read rules (ACCESS.md §4): a webhook hears of a change only when its owner
// may read the record, judged in the change's transaction with the owner's roles at that moment.
// A collection whose read rule is `*` costs nothing (ACCESS.md §7). Otherwise a change costs one
// read of the owners' roles and at most one query for all owners whose rule is a condition on the
// record (the rule folds to true or false on sign-in and roles alone for the others), never one
// per webhook.

import type { CompiledQuery, Kysely, Transaction } from 'kysely';
import type { Condition, DynamicDb } from '../db/dynamic-tables.js';
import type { Database } from '../db/schema.js';
import type { User } from '../http/caller.js';
import { storedRoles } from '../auth/roles.js';
import { compileRule, readsAreShared } from '../resources/access/compile.js';
import { fieldsAreShared } from '../resources/access/field-rules.js';
import type { Resource } from '../resources/resource.js';
import { isTrue, withId } from './webhook-filters.js';

type Executor = Transaction<Database> | Kysely<Database>;

/** Owners whose rule is a condition, answered per query: keeps a query's parameters far below both databases' limits. */
const OWNERS_PER_QUERY = 50;
/** Owners' roles read per query. */
const ROLES_PER_QUERY = 500;
/** The id a query is compiled with, replaced by the record's on each run. */
const ANY_ID = -1;
/** Compiled queries kept (per collection and set of owners with their roles). */
const MAX_COMPILED = 200;

/** Webhook owners as the rules see them, with their roles as stored now. */
export type Owners = ReadonlyMap<number, User>;

/** Which webhook owners may read a record, per change. */
export class WebhookAccess {
  private readonly compiled = new Map<string, readonly CompiledQuery<Record<string, unknown>>[]>();
  /** Whether a collection's read rule is `*`, asked of every change, answered once. */
  private readonly shared = new WeakMap<Resource, boolean>();

  constructor(private readonly db: DynamicDb) {}

  /**
   * The owners with their roles, read in the change's transaction (not the per-process role
   * cache: a role granted in an earlier transaction counts at once); null when the collection's
   * read rule is `*` and no field has a read rule, so every owner reads all of every record and
   * nothing is asked (ACCESS.md §3, §4: field rules judge bodies with the owner as the caller).
   */
  async owners(trx: Executor, resource: Resource, ownerIds: Iterable<number>): Promise<Owners | null> {
    let shared = this.shared.get(resource);
    if (shared === undefined) this.shared.set(resource, (shared = readsAreShared(resource.access) && fieldsAreShared(resource)));
    if (shared) return null;
    const ids = [...new Set(ownerIds)];
    const owners = new Map<number, User>();
    for (let start = 0; start < ids.length; start += ROLES_PER_QUERY) {
      const rows = await trx.selectFrom('users').select(['id', 'username', 'roles', 'password_changed_at']).where('id', 'in', ids.slice(start, start + ROLES_PER_QUERY)).execute();
      for (const row of rows) owners.set(row.id, { id: row.id, username: row.username, passwordChangedAt: row.password_changed_at, roles: storedRoles(row.roles) });
    }
    // A webhook whose owner is gone (deleted with its webhooks, in this very transaction) reads nothing.
    return owners;
  }

  /** The ids of the owners who may read record `id` of `resource` now (ACCESS.md §2 `read`). */
  async readers(trx: Executor, resource: Resource, id: number, owners: Owners): Promise<Set<number>> {
    const readers = new Set<number>();
    // Owners read for field rules alone: the record's rule is `*`.
    if (readsAreShared(resource.access)) return new Set(owners.keys());
    const conditional: { user: User; condition: Condition }[] = [];
    for (const user of owners.values()) {
      const verdict = compileRule(resource.access!.read, user);
      if (verdict === true) readers.add(user.id);
      else if (verdict !== false) conditional.push({ user, condition: verdict });
    }
    if (conditional.length === 0) return readers;
    const queries = this.queries(resource, conditional);
    for (const [index, query] of queries.entries()) {
      const chunk = conditional.slice(index * OWNERS_PER_QUERY, (index + 1) * OWNERS_PER_QUERY);
      const { rows } = await trx.executeQuery(withId(query, id));
      // No row: the record does not exist (any more); nobody reads it.
      chunk.forEach(({ user }, column) => {
        if (isTrue(rows[0]?.[`r${column}`])) readers.add(user.id);
      });
    }
    return readers;
  }

  /**
   * One column per owner, compiled once per collection and set of owners with their roles: the
   * rule's conditions depend on nothing else (the owner's id for `@me`, roles for `@role`).
   * A read rule is the declaration's own, checked at start-up, so unlike a webhook filter it
   * needs no savepoint: if it fails, the writer's own reads fail too.
   */
  private queries(resource: Resource, conditional: readonly { user: User; condition: Condition }[]): readonly CompiledQuery<Record<string, unknown>>[] {
    const key = `${resource.name}\n${JSON.stringify(conditional.map(({ user }) => [user.id, user.roles]))}`;
    const known = this.compiled.get(key);
    if (known) return known;
    const queries: CompiledQuery<Record<string, unknown>>[] = [];
    for (let start = 0; start < conditional.length; start += OWNERS_PER_QUERY) {
      const chunk = conditional.slice(start, start + OWNERS_PER_QUERY);
      const query = this.db
        .selectFrom(resource.table)
        .select((eb) => chunk.map(({ condition }, column) => eb.and([condition(eb)]).as(`r${column}`)))
        .where('id', '=', ANY_ID)
        .compile() as CompiledQuery<Record<string, unknown>>;
      // `withId` replaces the last parameter: the `where` comes after every term of the select.
      if (query.parameters.at(-1) !== ANY_ID) throw new Error('webhook access query: the record id is not the last parameter');
      queries.push(query);
    }
    if (this.compiled.size >= MAX_COMPILED) this.compiled.clear();
    this.compiled.set(key, queries);
    return queries;
  }
}
