// Picks the schema editor for a connection: the one place that asks which database it is, so
// the migrations themselves (restwire's own and the user's) never branch on it.

import { PostgresAdapter } from 'kysely';
import type { AnyDb, SchemaEditor } from './base.js';
import { PostgresSchemaEditor } from './postgres.js';
import { SqliteSchemaEditor } from './sqlite.js';

/** The schema editor of `db`'s database: PostgreSQL's for a `pg` connection, else SQLite's. */
export function schemaEditorFor(db: AnyDb): SchemaEditor {
  return db.getExecutor().adapter instanceof PostgresAdapter ? new PostgresSchemaEditor(db) : new SqliteSchemaEditor(db);
}
