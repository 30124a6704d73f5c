// Applies the user's migration files (RESOURCES.md §5) after restwire's own migrations: a second
// Kysely Migrator with its own tables, so its lock lets several processes start together and
// apply each file once. Each file runs in its own transaction, so a failed one leaves the
// database as it was before it (§6). A file's SQL comes from its operations and the state the
// earlier files describe, following the table mapping of `schema-state.ts`.
//
// PostgreSQL changes tables in place (ALTER TABLE). SQLite's ALTER TABLE cannot change a column,
// so any column change rebuilds the table (SQLite's documented 12-step procedure,
// https://www.sqlite.org/lang_altertable.html#otheralter): new table, rows copied, old table
// dropped, new one renamed. That needs foreign keys off — with them on, DROP TABLE deletes the
// rows first (cascading into join tables) and renaming rewrites other tables' references. They
// can only be turned off outside a transaction, so the migration's connection turns them off
// before BEGIN and back on after, and `PRAGMA foreign_key_check` runs before each commit: a
// migration that would leave a dangling reference rolls back.

import { Migrator, sql, type Expression, type Migration, type RawBuilder } from 'kysely';
import type { MigrationFile } from './migration-files.js';
import { applyOperation, type Operation } from './migration-operations.js';
import { isPostgres, primaryKeyType, type AnyDb } from './migrations.js';
import {
  columnOf,
  columnTypeOf,
  indexColumnOf,
  indexOf,
  joinTableOf,
  uniqueIndexOf,
  type CollectionState,
  type FieldState,
  type SchemaState,
} from './schema-state.js';

const MIGRATION_TABLE = 'restwire_user_migration';
const MIGRATION_LOCK_TABLE = 'restwire_user_migration_lock';

export interface ApplyOptions {
  /** Apply removals of fields and collections that hold data (`migrate --allow-data-loss`). */
  readonly allowDataLoss?: boolean;
}

/** A migration would delete stored data and `allowDataLoss` is not set; nothing was applied. */
export class DataLossError extends Error {
  override name = 'DataLossError';
  constructor(
    readonly file: string,
    readonly collection: string,
    readonly field: string | null,
    what: string,
  ) {
    super(`${file}: ${what}; run migrate with --allow-data-loss to apply it`);
  }
}

/** A migration file failed; the database is as it was before that file. */
export class UserMigrationError extends Error {
  override name = 'UserMigrationError';
  constructor(
    readonly file: string,
    readonly reason: unknown,
  ) {
    super(`${file} failed: ${reason instanceof Error ? reason.message : String(reason)}`, { cause: reason });
  }
}

/** Applies every pending file in order, each in its own transaction; returns the names applied. */
export async function applyUserMigrations(db: AnyDb, files: readonly MigrationFile[], options: ApplyOptions = {}): Promise<string[]> {
  const provider = {
    getMigrations: async () =>
      Object.fromEntries(files.map((file, index) => [file.name, migrationOf(files, index, options)])),
  };
  const applyAll = async (target: AnyDb) => {
    const migrator = new Migrator({ db: target, provider, migrationTableName: MIGRATION_TABLE, migrationLockTableName: MIGRATION_LOCK_TABLE });
    const applied: string[] = [];
    // One file per step: Kysely runs all pending migrations in one transaction, and each file
    // must commit (or roll back) on its own.
    for (;;) {
      const { error, results = [] } = await migrator.migrateUp();
      if (error) throw error instanceof Error ? error : new Error(String(error));
      const done = results.filter((result) => result.status === 'Success').map((result) => result.migrationName);
      if (done.length === 0) return applied;
      applied.push(...done);
    }
  };
  if (isPostgres(db)) return applyAll(db);
  return db.connection().execute(async (connection) => {
    await sql`pragma foreign_keys = off`.execute(connection);
    try {
      return await applyAll(connection);
    } finally {
      await sql`pragma foreign_keys = on`.execute(connection);
    }
  });
}

/** The files not applied yet, in order (for `migrate --plan`); reads only. */
export async function pendingUserMigrations(db: AnyDb, files: readonly MigrationFile[]): Promise<MigrationFile[]> {
  const tables = await db.introspection.getTables({ withInternalKyselyTables: true });
  if (!tables.some((table) => table.name === MIGRATION_TABLE)) return [...files];
  const rows = await db.selectFrom(MIGRATION_TABLE).select('name').execute();
  const applied = new Set(rows.map((row: { name: string }) => row.name));
  return files.filter((file) => !applied.has(file.name));
}

/** Which of the collections `names` have at least one record (a missing table has none). */
export async function collectionsWithRows(db: AnyDb, names: Iterable<string>): Promise<Set<string>> {
  const tables = new Set((await db.introspection.getTables()).map((table) => table.name));
  const found = new Set<string>();
  for (const name of names) {
    if (tables.has(name) && (await hasRows(db, name))) found.add(name);
  }
  return found;
}

/** The Kysely migration of file `index`: its operations, from the state the files before it describe. */
function migrationOf(files: readonly MigrationFile[], index: number, options: ApplyOptions): Migration {
  const file = files[index]!;
  return {
    async up(db) {
      try {
        let state = stateBefore(files, index);
        const step = new MigrationStep(db, file.name, options);
        for (const op of file.operations) {
          const next = applyOperation(state, op);
          await step.checkValuesFit(state, op);
          await step.guardDataLoss(state, op);
          await step.apply(state, next, op);
          state = next;
        }
        if (!isPostgres(db)) await step.checkForeignKeys();
      } catch (error) {
        if (error instanceof DataLossError || error instanceof UserMigrationError) throw error;
        throw new UserMigrationError(file.name, error);
      }
    },
  };
}

function stateBefore(files: readonly MigrationFile[], index: number): SchemaState {
  let state: SchemaState = {};
  for (const file of files.slice(0, index)) {
    try {
      state = file.operations.reduce(applyOperation, state);
    } catch (error) {
      throw new UserMigrationError(file.name, error);
    }
  }
  return state;
}

/** The SQL of one file's operations, on one dialect, inside its transaction. */
class MigrationStep {
  readonly #postgres: boolean;

  constructor(
    readonly db: AnyDb,
    readonly file: string,
    readonly options: ApplyOptions,
  ) {
    this.#postgres = isPostgres(db);
  }

  /** Refuses an operation that would delete stored data, unless allowed (RESOURCES.md §5). */
  async guardDataLoss(state: SchemaState, op: Operation): Promise<void> {
    if (this.options.allowDataLoss) return;
    const lose = (field: string | null, what: string): never => {
      throw new DataLossError(this.file, op.collection, field, what);
    };
    const collection = state[op.collection]!;
    if (op.op === 'removeCollection' && (await hasRows(this.db, op.collection))) {
      lose(null, `removing collection ${op.collection} would delete its records`);
    }
    if (op.op === 'removeField') {
      const field = collection.fields[op.field]!;
      const column = columnOf(op.field, field);
      const holdsData =
        column === null ? await hasRows(this.db, joinTableOf(op.collection, op.field)) : await hasValues(this.db, op.collection, column);
      if (holdsData) lose(op.field, `removing field ${op.collection}.${op.field} would delete its values`);
    }
    if (op.op === 'alterCollection' && (await hasRows(this.db, op.collection))) {
      if (collection.owner && !op.owner) lose('owner', `removing the owner of ${op.collection} would delete who owns each record`);
      if (collection.timestamps && !op.timestamps) {
        lose('created_at', `removing the timestamps of ${op.collection} would delete created_at and updated_at`);
      }
    }
    if (op.op === 'alterField') {
      const before = collection.fields[op.field]!;
      const column = columnOf(op.field, before)!;
      const [from, to] = [scaleOf(before), scaleOf(op.state)];
      if (from !== null && to !== null && from > to) {
        const divisor = 10 ** (from - to);
        const { rows } = await sql<{ n: number }>`select count(*) as n from ${sql.table(op.collection)}
          where ${sql.ref(column)} % ${sql.lit(divisor)} <> 0`.execute(this.db);
        const n = Number(rows[0]!.n);
        // What #converted does: see roundedDivision.
        if (n > 0) lose(op.field, `narrowing ${op.collection}.${op.field} from ${from} to ${to} decimal places would round ${n} values half away from zero`);
      }
    }
  }

  /**
   * Refuses, with or without allowDataLoss, a change to a decimal field that would leave a value
   * its field rejects: more digits before the point than maxDigits − decimalPlaces (an integer
   * becoming decimal(15, 2), fewer maxDigits, or a value rounded up past the maximum).
   */
  async checkValuesFit(state: SchemaState, op: Operation): Promise<void> {
    if (op.op !== 'alterField' || op.state.type !== 'decimal') return;
    const before = state[op.collection]!.fields[op.field]!;
    const from = scaleOf(before);
    if (from === null || (before.maxDigits === op.state.maxDigits && before.decimalPlaces === op.state.decimalPlaces)) return;
    const largest = largestFitting(from, op.state);
    if (largest === null) return;
    const { rows } = await sql<{ n: number }>`select count(*) as n from ${sql.table(op.collection)}
      where abs(${sql.ref(columnOf(op.field, before)!)}) > ${sql.lit(largest)}`.execute(this.db);
    const n = Number(rows[0]!.n);
    if (n > 0) {
      const { maxDigits, decimalPlaces = 0 } = op.state;
      throw new Error(
        `${op.collection}.${op.field}: ${n} values would not fit maxDigits ${maxDigits} with decimalPlaces ${decimalPlaces}, ` +
          `no more than ${maxDigits! - decimalPlaces} digits before the decimal point; change them before applying this migration`,
      );
    }
  }

  async apply(state: SchemaState, next: SchemaState, op: Operation): Promise<void> {
    const table = op.collection;
    switch (op.op) {
      case 'createCollection':
        return this.#createCollection(table, next[table]!);
      case 'removeCollection':
        for (const [name, field] of Object.entries(state[table]!.fields)) {
          if (field.type === 'references') await this.db.schema.dropTable(joinTableOf(table, name)).execute();
        }
        return this.db.schema.dropTable(table).execute();
      case 'addIndex':
        return this.#createIndex(table, next[table]!, op.field);
      case 'removeIndex':
        return this.db.schema.dropIndex(indexOf(table, op.field)).execute();
      case 'addField':
        if (op.state.type === 'references') return this.#createJoinTable(table, op.field, op.state.to!);
        return this.#addField(table, state[table]!, next[table]!, op.field, op.state);
      case 'removeField': {
        const field = state[table]!.fields[op.field]!;
        if (field.type === 'references') return this.db.schema.dropTable(joinTableOf(table, op.field)).execute();
        if (this.#postgres) return this.db.schema.alterTable(table).dropColumn(columnOf(op.field, field)!).execute();
        return this.#rebuild(table, next[table]!, keptColumns(state[table]!));
      }
      case 'renameField':
        return this.#renameField(table, state[table]!, next[table]!, op.from, op.to);
      case 'alterField':
        return this.#alterField(table, state[table]!, next[table]!, op.field, state[table]!.fields[op.field]!, op.state);
      case 'alterCollection':
        return this.#alterCollection(table, state[table]!, next[table]!);
    }
  }

  /** Fails the migration (rolling it back) when a rebuild left a reference to a missing row. */
  async checkForeignKeys(): Promise<void> {
    const { rows } = await sql<{ table: string; parent: string }>`pragma foreign_key_check`.execute(this.db);
    if (rows.length > 0) {
      const first = rows[0]!;
      throw new Error(`${rows.length} rows would refer to missing records (first: a row of ${first.table} refers to ${first.parent})`);
    }
  }

  async #createCollection(table: string, collection: CollectionState) {
    await this.#createTable(table, collection);
    for (const [name, field] of Object.entries(collection.fields)) {
      if (field.type === 'references') await this.#createJoinTable(table, name, field.to!);
    }
    await this.#createIndexes(table, collection);
  }

  async #createTable(table: string, collection: CollectionState) {
    let builder = this.db.schema.createTable(table).addColumn('id', primaryKeyType(this.db));
    for (const column of columnsOf(collection)) {
      builder = builder.addColumn(column.name, column.type, (c) => {
        if (column.notNull) c = c.notNull();
        if (column.default !== undefined) c = c.defaultTo(column.default);
        return column.references ? c.references(`${column.references}.id`) : c;
      });
    }
    await builder.execute();
  }

  async #createJoinTable(collection: string, field: string, target: string) {
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

  async #createIndexes(table: string, collection: CollectionState) {
    for (const [name, field] of Object.entries(collection.fields)) {
      if (field.unique && field.type !== 'references') await this.#createUniqueIndex(table, columnOf(name, field)!);
    }
    for (const entry of collection.indexes) await this.#createIndex(table, collection, entry);
  }

  #createUniqueIndex(table: string, column: string) {
    return this.db.schema.createIndex(uniqueIndexOf(table, column)).on(table).column(column).unique().execute();
  }

  #createIndex(table: string, collection: CollectionState, entry: string) {
    return this.db.schema.createIndex(indexOf(table, entry)).on(table).columns([indexColumnOf(collection, entry)!, 'id']).execute();
  }

  async #addField(table: string, before: CollectionState, after: CollectionState, name: string, field: FieldState) {
    const column = columnOf(name, field)!;
    if (!field.null && field.default == null && (await hasRows(this.db, table))) {
      throw new Error(`${table} has records and the new required field ${table}.${name} has no default to give them`);
    }
    if (!this.#postgres) return this.#rebuild(table, after, keptColumns(before));
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
    if (field.unique) await this.#createUniqueIndex(table, column);
  }

  async #renameField(table: string, before: CollectionState, after: CollectionState, from: string, to: string) {
    const field = before.fields[from]!;
    if (field.type === 'references') {
      // A new join table and the rows moved, rather than renames: its constraint and index names
      // follow the table's, and SQLite cannot rename an index.
      await this.#createJoinTable(table, to, field.to!);
      await sql`insert into ${sql.table(joinTableOf(table, to))} (from_id, to_id)
        select from_id, to_id from ${sql.table(joinTableOf(table, from))}`.execute(this.db);
      return this.db.schema.dropTable(joinTableOf(table, from)).execute();
    }
    const [oldColumn, newColumn] = [columnOf(from, field)!, columnOf(to, field)!];
    if (!this.#postgres) {
      return this.#rebuild(table, after, { ...keptColumns(before), [newColumn]: sql.ref(oldColumn) });
    }
    await this.db.schema.alterTable(table).renameColumn(oldColumn, newColumn).execute();
    if (field.unique) await sql`alter index ${sql.id(uniqueIndexOf(table, oldColumn))} rename to ${sql.id(uniqueIndexOf(table, newColumn))}`.execute(this.db);
    if (before.indexes.includes(from)) await sql`alter index ${sql.id(indexOf(table, from))} rename to ${sql.id(indexOf(table, to))}`.execute(this.db);
  }

  async #alterField(table: string, before: CollectionState, after: CollectionState, name: string, was: FieldState, wanted: FieldState) {
    const column = columnOf(name, was)!;
    const nullsToFill = was.null && !wanted.null ? await countNulls(this.db, table, column) : 0;
    if (nullsToFill > 0 && wanted.default == null) {
      throw new Error(`${table}.${name} becomes required but ${nullsToFill} records have no value and it has no default to give them`);
    }
    const converted = this.#converted(column, was, wanted);
    const storageChanged = converted !== null || was.to !== wanted.to || was.null !== wanted.null || was.default !== wanted.default;

    if (!this.#postgres) {
      if (storageChanged) {
        let value: Expression<unknown> = converted ?? sql.ref(column);
        if (nullsToFill > 0) value = sql`coalesce(${value}, ${sql.lit(wanted.default)})`;
        await this.#checkConvertible(table, name, column, was, wanted);
        return this.#rebuild(table, after, { ...keptColumns(before), [column]: value });
      }
    } else {
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
        const { rows } = await sql<{ name: string }>`select conname as name from pg_constraint
          where conrelid = ${table}::regclass and contype = 'f'
            and conkey = array[(select attnum from pg_attribute where attrelid = ${table}::regclass and attname = ${column})]`.execute(this.db);
        for (const { name: constraint } of rows) await alter().dropConstraint(constraint).execute();
        await alter().addForeignKeyConstraint(`${table}__${column}__fkey`, [column], wanted.to!, ['id']).execute();
      }
    }
    if (was.unique && !wanted.unique) await this.db.schema.dropIndex(uniqueIndexOf(table, column)).execute();
    if (!was.unique && wanted.unique) await this.#createUniqueIndex(table, column);
  }

  async #alterCollection(table: string, before: CollectionState, after: CollectionState) {
    if (!before.owner && after.owner && (await hasRows(this.db, table))) {
      throw new Error(`${table} has records and no owner to give them; owner can only be added to an empty collection`);
    }
    // Records that predate their timestamps are stamped with the time of the migration.
    const now = Date.now();
    if (!this.#postgres) {
      const sources: Record<string, Expression<unknown>> = keptColumns(before);
      if (after.timestamps && !before.timestamps) Object.assign(sources, { created_at: sql.lit(now), updated_at: sql.lit(now) });
      return this.#rebuild(table, after, sources);
    }
    const alter = () => this.db.schema.alterTable(table);
    if (after.owner !== before.owner) {
      if (after.owner) await alter().addColumn('owner_id', 'bigint', (c) => c.notNull().references('users.id')).execute();
      else await alter().dropColumn('owner_id').execute();
    }
    if (after.timestamps !== before.timestamps) {
      for (const column of ['created_at', 'updated_at']) {
        if (after.timestamps) {
          await alter().addColumn(column, 'bigint', (c) => c.notNull().defaultTo(now)).execute();
          await alter().alterColumn(column, (c) => c.dropDefault()).execute();
        } else {
          await alter().dropColumn(column).execute();
        }
      }
    }
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
    return this.#postgres ? sql`${ref}::${sql.raw(type)}` : sql`cast(${ref} as ${sql.raw(type)})`;
  }

  /** SQLite keeps a value that a cast cannot convert as it is; refuse rather than keep text in a number column. */
  async #checkConvertible(table: string, name: string, column: string, was: FieldState, wanted: FieldState) {
    if (columnTypeOf(was) !== 'text' || columnTypeOf(wanted) === 'text') return;
    const { rows } = await sql<{ n: number }>`select count(*) as n from ${sql.table(table)}
      where ${sql.ref(column)} is not null and cast(cast(${sql.ref(column)} as integer) as text) <> ${sql.ref(column)}`.execute(this.db);
    if (Number(rows[0]!.n) > 0) throw new Error(`${table}.${name}: ${rows[0]!.n} values are not whole numbers and cannot become ${wanted.type}`);
  }

  /**
   * SQLite: replaces `table` by one shaped as `after`, every row kept with its id. `sources` gives
   * each new column's value from the old row; a column it does not name gets its default.
   */
  async #rebuild(table: string, after: CollectionState, sources: Record<string, Expression<unknown>>) {
    const temporary = `${table}__rebuild`;
    await this.#createTable(temporary, after);
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
    await this.#createIndexes(table, after);
  }
}

interface ColumnSpec {
  readonly name: string;
  readonly type: 'bigint' | 'integer' | 'text';
  readonly notNull: boolean;
  readonly default?: string | number | null;
  /** The table whose `id` it refers to. */
  readonly references?: string;
}

/** A collection's columns after `id`, in table order (schema-state.ts). */
function columnsOf(collection: CollectionState): ColumnSpec[] {
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

/** Each column of `collection` copied as it is (a rebuild's starting point). */
function keptColumns(collection: CollectionState): Record<string, Expression<unknown>> {
  return Object.fromEntries(columnsOf(collection).map((column) => [column.name, sql.ref(column.name)]));
}

/**
 * A stored decimal with `places` fewer digits after the point, rounded half away from zero (what
 * PostgreSQL's numeric does; 0.125 → 0.13, −0.125 → −0.13). Integer division truncates toward
 * zero on both databases, so half the divisor is added to the magnitude first.
 */
function roundedDivision(ref: RawBuilder<unknown>, places: number): RawBuilder<unknown> {
  const [divisor, half] = [sql.lit(10 ** places), sql.lit(10 ** places / 2)];
  return sql`case when ${ref} < 0 then -((-${ref} + ${half}) / ${divisor}) else (${ref} + ${half}) / ${divisor} end`;
}

/**
 * The largest magnitude a value stored with `from` decimal places may have to fit `wanted` once
 * converted (scaled up, or rounded by roundedDivision); null when every safe integer fits.
 */
function largestFitting(from: number, wanted: FieldState): number | null {
  const to = wanted.decimalPlaces ?? 0;
  const most = 10n ** BigInt(wanted.maxDigits ?? 15) - 1n;
  const factor = 10n ** BigInt(Math.abs(to - from));
  const largest = to >= from ? most / factor : (most + 1n) * factor - factor / 2n - 1n;
  return largest < BigInt(Number.MAX_SAFE_INTEGER) ? Number(largest) : null;
}

/** Digits after the point as stored: integer 0, decimal its decimalPlaces; null for other types. */
function scaleOf(field: FieldState): number | null {
  if (field.type === 'integer') return 0;
  if (field.type === 'decimal') return field.decimalPlaces ?? 0;
  return null;
}

async function hasRows(db: AnyDb, table: string): Promise<boolean> {
  const { rows } = await sql`select 1 from ${sql.table(table)} limit 1`.execute(db);
  return rows.length > 0;
}

async function hasValues(db: AnyDb, table: string, column: string): Promise<boolean> {
  const { rows } = await sql`select 1 from ${sql.table(table)} where ${sql.ref(column)} is not null limit 1`.execute(db);
  return rows.length > 0;
}

async function countNulls(db: AnyDb, table: string, column: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*) as n from ${sql.table(table)} where ${sql.ref(column)} is null`.execute(db);
  return Number(rows[0]!.n);
}
