// Applies the user's migration files (RESOURCES.md §5) after restwire's own migrations: a second
// Kysely Migrator with its own tables, so its lock lets several processes start together and
// apply each file once. Each file runs in its own transaction, so a failed one leaves the
// database as it was before it (§6). A file's SQL comes from its operations and the state the
// earlier files describe: each operation is checked against the stored rows by the data-loss
// guard (`data-loss-guard.ts`), then applied by the database's schema editor (`schema-editor/`).

import { Migrator, type Migration } from 'kysely';
import { DataLossError, DataLossGuard } from './data-loss-guard.js';
import type { MigrationFile } from './migration-files.js';
import { applyOperation } from './migration-operations.js';
import type { AnyDb } from './schema-editor/base.js';
import { schemaEditorFor } from './schema-editor/factory.js';
import type { SchemaState } from './schema-state.js';

const MIGRATION_TABLE = 'restwire_user_migration';
const MIGRATION_LOCK_TABLE = 'restwire_user_migration_lock';

export interface ApplyOptions {
  /** Apply removals of fields and collections that hold data (`migrate --allow-data-loss`). */
  readonly allowDataLoss?: boolean;
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
  return schemaEditorFor(db).withoutForeignKeyEnforcement(applyAll);
}

/** The files not applied yet, in order (for `migrate --plan`); reads only. */
export async function pendingUserMigrations(db: AnyDb, files: readonly MigrationFile[]): Promise<MigrationFile[]> {
  const tables = await db.introspection.getTables({ withInternalKyselyTables: true });
  if (!tables.some((table) => table.name === MIGRATION_TABLE)) return [...files];
  const rows = await db.selectFrom(MIGRATION_TABLE).select('name').execute();
  const applied = new Set(rows.map((row: { name: string }) => row.name));
  return files.filter((file) => !applied.has(file.name));
}

/** The Kysely migration of file `index`: its operations, from the state the files before it describe. */
function migrationOf(files: readonly MigrationFile[], index: number, options: ApplyOptions): Migration {
  const file = files[index]!;
  return {
    async up(db) {
      try {
        let state = stateBefore(files, index);
        const guard = new DataLossGuard(db, file.name, options.allowDataLoss ?? false);
        const editor = schemaEditorFor(db);
        for (const op of file.operations) {
          const next = applyOperation(state, op);
          const { nullsToFill } = await guard.check(state, op);
          await editor.apply(state, next, op, nullsToFill);
          state = next;
        }
        await editor.checkForeignKeys();
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
