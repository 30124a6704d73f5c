// Picks the schema editor for a connection, so the user's migrations never branch on the
// database.

import { isPostgres, type AnyDb } from '../migrations.js';
import type { SchemaEditor } from './base.js';
import { PostgresSchemaEditor } from './postgres.js';
import { SqliteSchemaEditor } from './sqlite.js';

/** The schema editor of `db`'s database: PostgreSQL's for a `pg` connection, else SQLite's. */
export function schemaEditorFor(db: AnyDb): SchemaEditor {
  return isPostgres(db) ? new PostgresSchemaEditor(db) : new SqliteSchemaEditor(db);
}
