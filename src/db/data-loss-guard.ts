// What a migration must not do to stored rows (RESOURCES.md §5), checked before the schema editor
// touches a table, the same on both databases. Three kinds of refusal, in the order they are
// checked:
// - values that would not fit: a decimal change that would leave a value with more digits before
//   the point than its field holds (refused even with --allow-data-loss: the field would reject
//   its own records);
// - data loss: removing a collection, a field, the owner or the timestamps while they hold data,
//   or narrowing decimalPlaces so that values are rounded (a DataLossError, unless
//   `migrate --allow-data-loss`);
// - rows left without a required value: a required field added without a default, a field made
//   required while rows hold NULL and it has no default, an owner added to a collection with
//   records.
// The rows a field made required fills with its default are counted here once and handed to the
// editor, which fills them.

import { sql } from 'kysely';
import type { Operation } from './migration-operations.js';
import type { AnyDb } from './schema-editor/base.js';
import { columnOf, joinTableOf, scaleOf, type FieldState, type SchemaState } from './schema-state.js';

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

/** What the guard learnt of the rows that the schema editor needs. */
export interface CheckedRows {
  /** Rows whose NULL gets the field's default as an alterField makes it required; 0 otherwise. */
  readonly nullsToFill: number;
}

/** Checks each operation of one migration file against the rows it would change. */
export class DataLossGuard {
  constructor(
    readonly db: AnyDb,
    readonly file: string,
    readonly allowDataLoss: boolean,
  ) {}

  /** Refuses `op` on `state` when the stored rows cannot take it (see above). */
  async check(state: SchemaState, op: Operation): Promise<CheckedRows> {
    await this.#checkValuesFit(state, op);
    await this.#guardDataLoss(state, op);
    return { nullsToFill: await this.#checkRequiredValues(state, op) };
  }

  /**
   * Refuses, with or without allowDataLoss, a change to a decimal field that would leave a value
   * its field rejects: more digits before the point than maxDigits − decimalPlaces (an integer
   * becoming decimal(15, 2), fewer maxDigits, or a value rounded up past the maximum).
   */
  async #checkValuesFit(state: SchemaState, op: Operation): Promise<void> {
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

  /** Refuses an operation that would delete stored data, unless allowed (RESOURCES.md §5). */
  async #guardDataLoss(state: SchemaState, op: Operation): Promise<void> {
    if (this.allowDataLoss) return;
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
        // What the schema editor's conversion does: see roundedDivision in schema-editor/base.ts.
        if (n > 0) lose(op.field, `narrowing ${op.collection}.${op.field} from ${from} to ${to} decimal places would round ${n} values half away from zero`);
      }
    }
  }

  /** Refuses to leave a record without a value for a required field or owner; returns the NULLs a default fills. */
  async #checkRequiredValues(state: SchemaState, op: Operation): Promise<number> {
    const table = op.collection;
    if (op.op === 'addField' && op.state.type !== 'references') {
      if (!op.state.null && op.state.default == null && (await hasRows(this.db, table))) {
        throw new Error(`${table} has records and the new required field ${table}.${op.field} has no default to give them`);
      }
    }
    if (op.op === 'alterField') {
      const [was, wanted] = [state[table]!.fields[op.field]!, op.state];
      const nullsToFill = was.null && !wanted.null ? await countNulls(this.db, table, columnOf(op.field, was)!) : 0;
      if (nullsToFill > 0 && wanted.default == null) {
        throw new Error(`${table}.${op.field} becomes required but ${nullsToFill} records have no value and it has no default to give them`);
      }
      return nullsToFill;
    }
    if (op.op === 'alterCollection' && !state[table]!.owner && op.owner && (await hasRows(this.db, table))) {
      throw new Error(`${table} has records and no owner to give them; owner can only be added to an empty collection`);
    }
    return 0;
  }
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

/**
 * The largest magnitude a value stored with `from` decimal places may have to fit `wanted` once
 * converted (scaled up, or rounded half away from zero); null when every safe integer fits.
 */
function largestFitting(from: number, wanted: FieldState): number | null {
  const to = wanted.decimalPlaces ?? 0;
  const most = 10n ** BigInt(wanted.maxDigits ?? 15) - 1n;
  const factor = 10n ** BigInt(Math.abs(to - from));
  const largest = to >= from ? most / factor : (most + 1n) * factor - factor / 2n - 1n;
  return largest < BigInt(Number.MAX_SAFE_INTEGER) ? Number(largest) : null;
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
