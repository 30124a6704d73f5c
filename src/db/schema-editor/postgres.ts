// PostgreSQL's schema editor: every change is made in place with ALTER TABLE (a column's type
// with ALTER COLUMN … TYPE … USING, which converts the stored values as it goes), so no table is
// rebuilt and foreign keys stay enforced throughout; DDL is transactional, so a failed file
// leaves nothing behind.

import { sql, type RawBuilder } from 'kysely';
import { columnOf, columnTypeOf, indexOf, uniqueIndexOf, type CollectionState, type FieldState } from '../schema-state.js';
import { columnsOf, SchemaEditor, type ColumnChange } from './base.js';

/** Changes tables on PostgreSQL in place. */
export class PostgresSchemaEditor extends SchemaEditor {
  primaryKeyType(): RawBuilder<unknown> {
    return sql`bigserial primary key`;
  }

  protected cast(ref: RawBuilder<unknown>, type: string): RawBuilder<unknown> {
    return sql`${ref}::${sql.raw(type)}`;
  }

  protected async addColumn(table: string, _before: CollectionState, after: CollectionState, name: string, field: FieldState): Promise<void> {
    const column = columnOf(name, field)!;
    const [spec] = columnsOf({ ...after, owner: false, timestamps: false, fields: { [name]: field } });
    await this.db.schema
      .alterTable(table)
      .addColumn(column, spec!.type, (c) => {
        // PostgreSQL fills existing rows with the default as it adds the column.
        if (spec!.default !== undefined) c = c.defaultTo(spec!.default);
        if (spec!.notNull) c = c.notNull();
        return spec!.references ? c.references(`${spec!.references}.id`) : c;
      })
      .execute();
    if (field.unique) await this.createUniqueIndex(table, column);
  }

  protected async dropColumn(table: string, _before: CollectionState, _after: CollectionState, column: string): Promise<void> {
    await this.db.schema.alterTable(table).dropColumn(column).execute();
  }

  protected async renameColumn(table: string, before: CollectionState, _after: CollectionState, from: string, to: string): Promise<void> {
    const field = before.fields[from]!;
    const [oldColumn, newColumn] = [columnOf(from, field)!, columnOf(to, field)!];
    await this.db.schema.alterTable(table).renameColumn(oldColumn, newColumn).execute();
    if (field.unique) await sql`alter index ${sql.id(uniqueIndexOf(table, oldColumn))} rename to ${sql.id(uniqueIndexOf(table, newColumn))}`.execute(this.db);
    if (before.indexes.includes(from)) await sql`alter index ${sql.id(indexOf(table, from))} rename to ${sql.id(indexOf(table, to))}`.execute(this.db);
  }

  protected async alterColumn({ table, column, was, wanted, converted, nullsToFill }: ColumnChange): Promise<void> {
    const alter = () => this.db.schema.alterTable(table);
    if (converted !== null) {
      await sql`alter table ${sql.table(table)} alter column ${sql.ref(column)} type ${sql.raw(columnTypeOf(wanted)!)} using ${converted}`.execute(this.db);
    }
    if (was.default !== wanted.default) {
      await alter().alterColumn(column, (c) => (wanted.default === undefined ? c.dropDefault() : c.setDefault(wanted.default))).execute();
    }
    if (nullsToFill > 0) {
      await sql`update ${sql.table(table)} set ${sql.ref(column)} = ${sql.lit(wanted.default)} where ${sql.ref(column)} is null`.execute(this.db);
    }
    if (was.null !== wanted.null) await alter().alterColumn(column, (c) => (wanted.null ? c.dropNotNull() : c.setNotNull())).execute();
    if (was.to !== wanted.to) {
      // The constraint's name is whatever created it (CREATE TABLE's default, or ours below).
      const { rows } = await sql<{ name: string }>`select conname as name from pg_constraint
        where conrelid = ${table}::regclass and contype = 'f'
          and conkey = array[(select attnum from pg_attribute where attrelid = ${table}::regclass and attname = ${column})]`.execute(this.db);
      for (const { name: constraint } of rows) await alter().dropConstraint(constraint).execute();
      await alter().addForeignKeyConstraint(`${table}__${column}__fkey`, [column], wanted.to!, ['id']).execute();
    }
    await this.changeUniqueIndex(table, column, was, wanted);
  }

  protected async alterCollection(table: string, before: CollectionState, after: CollectionState): Promise<void> {
    const now = Date.now();
    const alter = () => this.db.schema.alterTable(table);
    if (after.owner !== before.owner) {
      if (after.owner) await alter().addColumn('owner_id', 'bigint', (c) => c.notNull().references('users.id')).execute();
      else await alter().dropColumn('owner_id').execute();
    }
    if (after.timestamps !== before.timestamps) {
      for (const column of ['created_at', 'updated_at']) {
        if (after.timestamps) {
          // The default stamps the existing rows; new rows get their time from the viewset.
          await alter().addColumn(column, 'bigint', (c) => c.notNull().defaultTo(now)).execute();
          await alter().alterColumn(column, (c) => c.dropDefault()).execute();
        } else {
          await alter().dropColumn(column).execute();
        }
      }
    }
  }
}
