// How the viewset writes: one transaction per write that tells the change listeners (the webhook
// outbox) inside it and runs what they return once committed, turning a race the input checks
// could not see into a 400 or 409; and the SQL a write runs: a create's insert, compiled once per
// column set, the field values as columns, and the join tables of `references` fields.

import type { CompiledQuery } from 'kysely';
import type { Storage } from '../../db/database.js';
import type { DynamicDb, Row } from '../../db/dynamic-tables.js';
import { afterCommitOf, inUnit, transactAgainOnConflict, type WriteUnit } from '../../db/write-unit.js';
import { columnOf, joinTableOf, uniqueIndexOf } from '../../db/schema-state.js';
import { Conflict, ValidationError } from '../../http/errors.js';
import type { Change, ChangeListener, Resource } from '../resource.js';

/** Tells the listeners of a change (`before`: of a record about to change, see ChangeListener). */
export type Notify = ((trx: DynamicDb, change: Change) => Promise<void>) & {
  /** The write's transaction has begun: listeners send what they will read (ChangeListener.prepare). */
  prepare(trx: DynamicDb, resource: Resource): Promise<void>;
  before(trx: DynamicDb, resource: Resource, id: number): Promise<void>;
  /** Several changes at once, in order (a cascade's batch): listeners may write them together. */
  all(trx: DynamicDb, changes: readonly Change[]): Promise<void>;
};

/** What the writes of one collection's viewset need. */
export interface WritesOptions {
  readonly storage: Storage;
  /** Told of every committed change, inside its transaction. */
  readonly listeners: readonly ChangeListener[];
  /** The input checks' message for a value already taken (a unique index's race says the same). */
  readonly uniqueMessage: (name: string) => string;
}

/** A collection's write transaction and the statements a create or update runs. */
export function buildWrites(resource: Resource, options: WritesOptions) {
  const { storage, listeners, uniqueMessage } = options;
  const table = resource.table;
  const fieldEntries = Object.entries(resource.fields);
  const manyFields = fieldEntries.filter(([, field]) => field.type === 'references');

  // Building an insert with Kysely cost more than running it (issue #6 profile). A create writes
  // the same columns every time, so its SQL is compiled once per column set; only the values
  // change, in the order the columns were first compiled in.
  const inserts = new Map<string, { compiled: CompiledQuery<Row>; columns: string[] }>();
  /** The insert of one row with these columns, its SQL reused from the first insert of the same set. */
  function compiledInsert(executor: DynamicDb, values: Record<string, unknown>): CompiledQuery<Row> {
    const keys = Object.keys(values);
    const key = keys.join(',');
    const known = inserts.get(key);
    if (known) return { ...known.compiled, parameters: known.columns.map((column) => values[column]) };
    const compiled = executor.insertInto(table).values(values).returningAll().compile() as CompiledQuery<Row>;
    // Remembered only if Kysely bound exactly the values, in column order (it always has), and
    // none was undefined or null (Kysely leaves an undefined column out; a reused statement would bind NULL).
    const bound = keys.map((column) => values[column]);
    const exact = compiled.parameters.length === bound.length && compiled.parameters.every((value, index) => value === bound[index]);
    if (exact && !bound.includes(undefined)) inserts.set(key, { compiled, columns: keys });
    return compiled;
  }

  /** Field values → columns (references go to join tables). */
  function columnValues(values: Record<string, unknown>): Record<string, unknown> {
    const row: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(values)) {
      const field = resource.fields[name]!;
      if (field.type !== 'references') row[columnOf(name, field)!] = value;
    }
    return row;
  }

  /** Writes the `references` fields given in `values` to their join tables (`replace`: an update's). */
  async function writeReferenceLists(executor: DynamicDb, id: number, values: Record<string, unknown>, replace: boolean): Promise<void> {
    for (const [name] of manyFields) {
      const ids = values[name] as number[] | undefined;
      if (ids === undefined) continue;
      const join = joinTableOf(table, name);
      if (replace) await executor.deleteFrom(join).where('from_id', '=', id).execute();
      if (ids.length) await executor.insertInto(join).values(ids.map((to) => ({ from_id: id, to_id: to }))).execute();
    }
  }

  /**
   * Runs a write in one transaction with the listeners it notifies, then, once committed, the
   * callbacks they returned (so a dispatcher is woken only for work that exists) and those the
   * write put in `later` (its hooks' `afterCommit`). A run that lost a deadlock keeps neither. A unique or
   * foreign-key violation the checks could not see (a race) is a 400 or 409, never a 500.
   * Given a request's write `unit`, the write joins its transaction in a savepoint instead (a
   * failure rolls back this write alone) and leaves the callbacks to the unit's owner, who runs
   * them after its commit (`db/write-unit.ts`); never a nested `Storage.transact`.
   */
  async function writeTransaction<T>(work: (trx: DynamicDb, notify: Notify, later: Array<() => void>) => Promise<T>, unit?: WriteUnit): Promise<T> {
    const afterCommit: Array<() => void> = [];
    const later: Array<() => void> = [];
    const notify: Notify = Object.assign(
      async (trx: DynamicDb, change: Change) => {
        for (const listener of listeners) {
          const callback = await listener(trx as never, change);
          if (callback) afterCommit.push(callback);
        }
      },
      {
        async prepare(trx: DynamicDb, changing: Resource) {
          for (const listener of listeners) await listener.prepare?.(trx as never, changing);
        },
        async before(trx: DynamicDb, changing: Resource, id: number) {
          for (const listener of listeners) await listener.beforeChange?.(trx as never, { resource: changing, id });
        },
        async all(trx: DynamicDb, changes: readonly Change[]) {
          if (changes.length === 0) return;
          for (const listener of listeners) {
            if (listener.changes) {
              const callback = await listener.changes(trx as never, changes);
              if (callback) afterCommit.push(callback);
              continue;
            }
            for (const change of changes) {
              const callback = await listener(trx as never, change);
              if (callback) afterCommit.push(callback);
            }
          }
        },
      },
    );
    let result: T;
    try {
      // A write that lost a deadlock to another shared commit (PostgreSQL) runs again, alone. A
      // unit's owner (a batch, a keyed request) does so for its whole transaction instead.
      result = unit
        ? await inUnit(unit, (trx) => work(trx, notify, later))
        : await transactAgainOnConflict(storage, (trx) => {
            afterCommit.length = 0;
            later.length = 0;
            return work(trx as unknown as DynamicDb, notify, later);
          });
    } catch (error) {
      throw resource.hooks.constraintError?.(error) ?? constraintError(error) ?? error;
    }
    afterCommitOf(unit, [...afterCommit, ...later]);
    return result;
  }

  function constraintError(error: unknown): Error | null {
    const { code, constraint, message } = (error ?? {}) as { code?: string; constraint?: string; message?: string };
    if (code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE') {
      for (const [name, field] of fieldEntries) {
        const column = columnOf(name, field);
        // PostgreSQL names the index; SQLite says "UNIQUE constraint failed: books.isbn".
        if (column && (constraint === uniqueIndexOf(table, column) || new RegExp(`: ${table}\\.${column}$`).test(message ?? ''))) {
          return new ValidationError({ [name]: [uniqueMessage(name)] });
        }
      }
    }
    if (code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY') {
      return new Conflict('A record this change refers to was changed at the same time; nothing was changed. Try again.');
    }
    return null;
  }

  return { compiledInsert, columnValues, writeReferenceLists, writeTransaction };
}
