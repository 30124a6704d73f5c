// SQLite's schema editor. SQLite's ALTER TABLE cannot change a column, so any column change
// rebuilds the table (SQLite's documented 12-step procedure,
// https://www.sqlite.org/lang_altertable.html#otheralter): new table, rows copied, old table
// dropped, new one renamed. That needs foreign keys off — with them on, DROP TABLE deletes the
// rows first (cascading into join tables) and renaming rewrites other tables' references. They
// can only be turned off outside a transaction, so the migration's connection turns them off
// before BEGIN and back on after, and `PRAGMA foreign_key_check` runs before each commit: a
// migration that would leave a dangling reference rolls back.

import { sql, type Expression, type RawBuilder } from 'kysely';
import { columnOf, columnTypeOf, type CollectionState, type FieldState } from '../schema-state.js';
import { columnsOf, SchemaEditor, type AnyDb, type ColumnChange } from './base.js';

/** Changes tables on SQLite by rebuilding them. */
export class SqliteSchemaEditor extends SchemaEditor {
  primaryKeyType(): RawBuilder<unknown> {
    return sql`integer primary key autoincrement`;
  }

  /** Runs `run` on one connection with foreign keys off, turned back on after (see above). */
  override withoutForeignKeyEnforcement<T>(run: (db: AnyDb) => Promise<T>): Promise<T> {
    return this.db.connection().execute(async (connection) => {
      await sql`pragma foreign_keys = off`.execute(connection);
      try {
        return await run(connection);
      } finally {
        await sql`pragma foreign_keys = on`.execute(connection);
      }
    });
  }

  /** Fails the migration (rolling it back) when a rebuild left a reference to a missing row. */
  override async checkForeignKeys(): Promise<void> {
    const { rows } = await sql<{ table: string; parent: string }>`pragma foreign_key_check`.execute(this.db);
    if (rows.length > 0) {
      const first = rows[0]!;
      throw new Error(`${rows.length} rows would refer to missing records (first: a row of ${first.table} refers to ${first.parent})`);
    }
  }

  protected cast(ref: RawBuilder<unknown>, type: string): RawBuilder<unknown> {
    return sql`cast(${ref} as ${sql.raw(type)})`;
  }

  protected addColumn(table: string, before: CollectionState, after: CollectionState): Promise<void> {
    return this.#rebuild(table, after, keptColumns(before));
  }

  protected dropColumn(table: string, before: CollectionState, after: CollectionState): Promise<void> {
    return this.#rebuild(table, after, keptColumns(before));
  }

  protected renameColumn(table: string, before: CollectionState, after: CollectionState, from: string, to: string): Promise<void> {
    const field = before.fields[from]!;
    const [oldColumn, newColumn] = [columnOf(from, field)!, columnOf(to, field)!];
    return this.#rebuild(table, after, { ...keptColumns(before), [newColumn]: sql.ref(oldColumn) });
  }

  protected async alterColumn({ table, name, column, before, after, was, wanted, converted, nullsToFill }: ColumnChange): Promise<void> {
    const storageChanged = converted !== null || was.to !== wanted.to || was.null !== wanted.null || was.default !== wanted.default;
    // Only the unique index changes: the column stays as it is.
    if (!storageChanged) return this.changeUniqueIndex(table, column, was, wanted);
    let value: Expression<unknown> = converted ?? sql.ref(column);
    if (nullsToFill > 0) value = sql`coalesce(${value}, ${sql.lit(wanted.default)})`;
    await this.#checkConvertible(table, name, column, was, wanted);
    // The rebuild creates every index `after` has, the unique one included.
    return this.#rebuild(table, after, { ...keptColumns(before), [column]: value });
  }

  protected alterCollection(table: string, before: CollectionState, after: CollectionState): Promise<void> {
    const now = Date.now();
    const sources: Record<string, Expression<unknown>> = keptColumns(before);
    if (after.timestamps && !before.timestamps) Object.assign(sources, { created_at: sql.lit(now), updated_at: sql.lit(now) });
    return this.#rebuild(table, after, sources);
  }

  /** SQLite keeps a value that a cast cannot convert as it is; refuse rather than keep text in a number column. */
  async #checkConvertible(table: string, name: string, column: string, was: FieldState, wanted: FieldState) {
    if (columnTypeOf(was) !== 'text' || columnTypeOf(wanted) === 'text') return;
    const { rows } = await sql<{ n: number }>`select count(*) as n from ${sql.table(table)}
      where ${sql.ref(column)} is not null and cast(cast(${sql.ref(column)} as integer) as text) <> ${sql.ref(column)}`.execute(this.db);
    if (Number(rows[0]!.n) > 0) throw new Error(`${table}.${name}: ${rows[0]!.n} values are not whole numbers and cannot become ${wanted.type}`);
  }

  /**
   * Replaces `table` by one shaped as `after`, every row kept with its id. `sources` gives each
   * new column's value from the old row; a column it does not name gets its default.
   */
  async #rebuild(table: string, after: CollectionState, sources: Record<string, Expression<unknown>>) {
    const temporary = `${table}__rebuild`;
    await this.createTable(temporary, after);
    const columns = ['id', ...columnsOf(after).map((column) => column.name)];
    const values = columns.map((column) => {
      const spec = columnsOf(after).find((c) => c.name === column);
      return sources[column] ?? (column === 'id' ? sql.ref('id') : sql.lit(spec?.default ?? null));
    });
    await sql`insert into ${sql.table(temporary)} (${sql.join(columns.map((c) => sql.ref(c)))})
      select ${sql.join(values)} from ${sql.table(table)}`.execute(this.db);
    // AUTOINCREMENT's high-water mark lives in sqlite_sequence and goes with the dropped table;
    // carried over, so ids of deleted records are never reused.
    const { rows } = await sql<{ seq: number }>`select seq from sqlite_sequence where name = ${table}`.execute(this.db);
    await this.db.schema.dropTable(table).execute();
    await sql`alter table ${sql.table(temporary)} rename to ${sql.table(table)}`.execute(this.db);
    if (rows[0]) {
      await sql`update sqlite_sequence set seq = max(seq, ${rows[0].seq}) where name = ${table}`.execute(this.db);
      await sql`insert into sqlite_sequence (name, seq) select ${table}, ${rows[0].seq}
        where not exists (select 1 from sqlite_sequence where name = ${table})`.execute(this.db);
    }
    await this.createIndexes(table, after);
  }
}

/** Each column of `collection` copied as it is (a rebuild's starting point). */
function keptColumns(collection: CollectionState): Record<string, Expression<unknown>> {
  return Object.fromEntries(columnsOf(collection).map((column) => [column.name, sql.ref(column.name)]));
}
