// What a migration operation does to the tables, the part both databases share: create tables,
// join tables and indexes, drop them, move a `references` field's rows to a renamed join table,
// rescale a decimal. What differs — changing a column in place, casting, the primary key's type,
// foreign-key enforcement during a migration — is left to one subclass per database, as Django's
// `BaseDatabaseSchemaEditor` leaves it to `db/backends/<vendor>/schema.py`: `sqlite.ts` and
// `postgres.ts`, one of which `factory.ts` picks for a connection. Table and column names follow
// `schema-state.ts`; an editor trusts the data-loss guard (`data-loss-guard.ts`) to have refused
// an operation the stored rows cannot take before it is asked to apply it.

import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Operation } from '../migration-operations.js';
import {
  columnOf,
  columnTypeOf,
  indexColumnOf,
  indexOf,
  joinTableOf,
  scaleOf,
  uniqueIndexOf,
  type CollectionState,
  type FieldState,
  type SchemaState,
} from '../schema-state.js';

// Migrations run against an untyped Kysely: the typed schema describes the result, not the steps.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- Kysely's own migration type
export type AnyDb = Kysely<any>;

/** One field's column changing in place (an `alterField` operation), as a dialect needs it. */
export interface ColumnChange {
  readonly table: string;
  /** The field's name; its column is `column`. */
  readonly name: string;
  readonly column: string;
  readonly before: CollectionState;
  readonly after: CollectionState;
  readonly was: FieldState;
  readonly wanted: FieldState;
  /** The column's new value from its old one (rescaled or cast); null when the value stays as it is. */
  readonly converted: RawBuilder<unknown> | null;
  /** Rows whose NULL becomes the field's default as it turns required (the guard counted them). */
  readonly nullsToFill: number;
}

/** The SQL of migration operations on one database; `factory.ts` picks the subclass. */
export abstract class SchemaEditor {
  constructor(protected readonly db: AnyDb) {}

  /** An auto-incrementing integer primary key that is never reused. */
  abstract primaryKeyType(): RawBuilder<unknown>;

  /**
   * Runs all of one `migrate`'s files with foreign keys unenforced where the database's table
   * changes need that (SQLite's rebuilds); by default, as it is (PostgreSQL keeps them on).
   */
  withoutForeignKeyEnforcement<T>(run: (db: AnyDb) => Promise<T>): Promise<T> {
    return run(this.db);
  }

  /** Fails the migration (rolling it back) when it left a reference to a missing row. */
  async checkForeignKeys(): Promise<void> {
    // PostgreSQL checks every statement as it runs.
  }

  /** Changes the tables from `state` to `next`, the state after `op`. */
  async apply(state: SchemaState, next: SchemaState, op: Operation, nullsToFill: number): Promise<void> {
    const table = op.collection;
    switch (op.op) {
      case 'createCollection':
        return this.createCollection(table, next[table]!);
      case 'removeCollection':
        for (const [name, field] of Object.entries(state[table]!.fields)) {
          if (field.type === 'references') await this.db.schema.dropTable(joinTableOf(table, name)).execute();
        }
        return this.db.schema.dropTable(table).execute();
      case 'addIndex':
        return this.createIndex(table, next[table]!, op.field);
      case 'removeIndex':
        return this.db.schema.dropIndex(indexOf(table, op.field)).execute();
      case 'addField':
        if (op.state.type === 'references') return this.createJoinTable(table, op.field, op.state.to!);
        return this.addColumn(table, state[table]!, next[table]!, op.field, op.state);
      case 'removeField': {
        const field = state[table]!.fields[op.field]!;
        if (field.type === 'references') return this.db.schema.dropTable(joinTableOf(table, op.field)).execute();
        return this.dropColumn(table, state[table]!, next[table]!, columnOf(op.field, field)!);
      }
      case 'renameField':
        return this.#renameField(table, state[table]!, next[table]!, op.from, op.to);
      case 'alterField': {
        const was = state[table]!.fields[op.field]!;
        const column = columnOf(op.field, was)!;
        const converted = this.#converted(column, was, op.state);
        const [before, after] = [state[table]!, next[table]!];
        return this.alterColumn({ table, name: op.field, column, before, after, was, wanted: op.state, converted, nullsToFill });
      }
      case 'alterCollection':
        return this.alterCollection(table, state[table]!, next[table]!);
    }
  }

  /** Adds field `name`'s column (`after` has it, `before` not). */
  protected abstract addColumn(table: string, before: CollectionState, after: CollectionState, name: string, field: FieldState): Promise<void>;

  /** Drops `column` (`before` has it, `after` not). */
  protected abstract dropColumn(table: string, before: CollectionState, after: CollectionState, column: string): Promise<void>;

  /** Renames field `from`'s column to field `to`'s, keeping its values and its indexes. */
  protected abstract renameColumn(table: string, before: CollectionState, after: CollectionState, from: string, to: string): Promise<void>;

  /** Changes a field's column in place: type or scale, target, null, default, unique. */
  protected abstract alterColumn(change: ColumnChange): Promise<void>;

  /** Adds or removes `owner_id` and the timestamps; records that predate their timestamps get the migration's time. */
  protected abstract alterCollection(table: string, before: CollectionState, after: CollectionState): Promise<void>;

  /** `ref` converted to column type `type`. */
  protected abstract cast(ref: RawBuilder<unknown>, type: string): RawBuilder<unknown>;

  protected async createCollection(table: string, collection: CollectionState) {
    await this.createTable(table, collection);
    for (const [name, field] of Object.entries(collection.fields)) {
      if (field.type === 'references') await this.createJoinTable(table, name, field.to!);
    }
    await this.createIndexes(table, collection);
  }

  protected async createTable(table: string, collection: CollectionState) {
    let builder = this.db.schema.createTable(table).addColumn('id', this.primaryKeyType());
    for (const column of columnsOf(collection)) {
      builder = builder.addColumn(column.name, column.type, (c) => {
        if (column.notNull) c = c.notNull();
        if (column.default !== undefined) c = c.defaultTo(column.default);
        return column.references ? c.references(`${column.references}.id`) : c;
      });
    }
    await builder.execute();
  }

  protected async createJoinTable(collection: string, field: string, target: string) {
    const table = joinTableOf(collection, field);
    await this.db.schema
      .createTable(table)
      .addColumn('from_id', 'bigint', (c) => c.notNull().references(`${collection}.id`).onDelete('cascade'))
      .addColumn('to_id', 'bigint', (c) => c.notNull().references(`${target}.id`).onDelete('cascade'))
      .addPrimaryKeyConstraint(`${table}__pkey`, ['from_id', 'to_id'])
      .execute();
    // Deleting a target record cascades through to_id; without this index that scans the table.
    await this.db.schema.createIndex(`${table}__to_id__idx`).on(table).columns(['to_id', 'from_id']).execute();
  }

  /** Every unique and ordering index of `collection`. */
  protected async createIndexes(table: string, collection: CollectionState) {
    for (const [name, field] of Object.entries(collection.fields)) {
      if (field.unique && field.type !== 'references') await this.createUniqueIndex(table, columnOf(name, field)!);
    }
    for (const entry of collection.indexes) await this.createIndex(table, collection, entry);
  }

  protected async createUniqueIndex(table: string, column: string) {
    await this.db.schema.createIndex(uniqueIndexOf(table, column)).on(table).column(column).unique().execute();
  }

  protected async createIndex(table: string, collection: CollectionState, entry: string) {
    await this.db.schema.createIndex(indexOf(table, entry)).on(table).columns([indexColumnOf(collection, entry)!, 'id']).execute();
  }

  /** Adds or drops the unique index of a column changed in place. */
  protected async changeUniqueIndex(table: string, column: string, was: FieldState, wanted: FieldState) {
    if (was.unique && !wanted.unique) await this.db.schema.dropIndex(uniqueIndexOf(table, column)).execute();
    if (!was.unique && wanted.unique) await this.createUniqueIndex(table, column);
  }

  async #renameField(table: string, before: CollectionState, after: CollectionState, from: string, to: string) {
    const field = before.fields[from]!;
    if (field.type !== 'references') return this.renameColumn(table, before, after, from, to);
    // A new join table and the rows moved, rather than renames: its constraint and index names
    // follow the table's, and SQLite cannot rename an index.
    await this.createJoinTable(table, to, field.to!);
    await sql`insert into ${sql.table(joinTableOf(table, to))} (from_id, to_id)
      select from_id, to_id from ${sql.table(joinTableOf(table, from))}`.execute(this.db);
    await this.db.schema.dropTable(joinTableOf(table, from)).execute();
  }

  /**
   * The new value of a column whose field changes storage type or scale, from its old value;
   * null when the stored value stays as it is.
   */
  #converted(column: string, was: FieldState, wanted: FieldState): RawBuilder<unknown> | null {
    const ref = sql.ref(column);
    const [from, to] = [scaleOf(was), scaleOf(wanted)];
    // integer ↔ decimal and decimalPlaces changes rescale: a decimal is stored × 10^decimalPlaces.
    if (from !== null && to !== null && from !== to) {
      return to > from ? sql`${ref} * ${sql.lit(10 ** (to - from))}` : roundedDivision(ref, from - to);
    }
    const type = columnTypeOf(wanted)!;
    if (type === columnTypeOf(was)) return null;
    return this.cast(ref, type);
  }
}

/** One column of a collection's table, as `createTable` and `addColumn` spell it. */
export interface ColumnSpec {
  readonly name: string;
  readonly type: 'bigint' | 'integer' | 'text';
  readonly notNull: boolean;
  readonly default?: string | number | null;
  /** The table whose `id` it refers to. */
  readonly references?: string;
}

/** A collection's columns after `id`, in table order (schema-state.ts). */
export function columnsOf(collection: CollectionState): ColumnSpec[] {
  const columns: ColumnSpec[] = [];
  for (const [name, field] of Object.entries(collection.fields)) {
    const column = columnOf(name, field);
    if (column === null) continue;
    columns.push({
      name: column,
      type: columnTypeOf(field)!,
      notNull: !field.null,
      ...(field.default !== undefined && { default: field.default }),
      ...(field.type === 'reference' && { references: field.to! }),
    });
  }
  if (collection.owner) columns.push({ name: 'owner_id', type: 'bigint', notNull: true, references: 'users' });
  if (collection.timestamps) {
    columns.push({ name: 'created_at', type: 'bigint', notNull: true }, { name: 'updated_at', type: 'bigint', notNull: true });
  }
  return columns;
}

/**
 * A stored decimal with `places` fewer digits after the point, rounded half away from zero (what
 * PostgreSQL's numeric does; 0.125 → 0.13, −0.125 → −0.13). Integer division truncates toward
 * zero on both databases, so half the divisor is added to the magnitude first. The data-loss
 * guard's refusal counts the values this changes.
 */
function roundedDivision(ref: RawBuilder<unknown>, places: number): RawBuilder<unknown> {
  const [divisor, half] = [sql.lit(10 ** places), sql.lit(10 ** places / 2)];
  return sql`case when ${ref} < 0 then -((-${ref} + ${half}) / ${divisor}) else (${ref} + ${half}) / ${divisor} end`;
}
