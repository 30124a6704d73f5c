// A user's project as the commands see it (RESOURCES.md §1, §5): the declarations of the resources
// folder, the migration files of the migrations folder, and whether the two agree. `serve` and
// `worker` refuse to start when they do not; `serve` applies pending files as it applies
// restwire's own migrations, but never writes one (`makemigrations` does).

import { existsSync } from 'node:fs';
import { relative } from 'node:path';
import type { Config } from '../config.js';
import { openStorage, type Storage } from '../db/database.js';
import { readMigrationFiles, type MigrationFile } from '../db/migration-files.js';
import { describeOperation, diffStates, replay, type Operation } from '../db/migration-operations.js';
import { applyUserMigrations } from '../db/user-migrations.js';
import { loadDeclarations } from '../resources/loader.js';
import { buildRegistry, declaredState, type Registry } from '../resources/registry.js';

/** A problem with the project that stops a command; the message says what to do. */
export class ProjectError extends Error {
  override name = 'ProjectError';
}

export interface Project {
  readonly registry: Registry;
  readonly files: readonly MigrationFile[];
  /** What the declarations ask that the files do not describe yet (empty when they agree). */
  readonly unmigrated: readonly Operation[];
}

const shown = (path: string) => relative(process.cwd(), path) || '.';

/** Loads and checks the declarations and reads the migration files; touches no database. */
export async function loadProject(config: Config): Promise<Project> {
  if (config.resourcesDirGiven && !existsSync(config.resourcesDir)) {
    throw new ProjectError(`the resources folder ${shown(config.resourcesDir)} does not exist`);
  }
  const registry = buildRegistry(await loadDeclarations(config.resourcesDir));
  const files = existsSync(config.migrationsDir) ? readMigrationFiles(config.migrationsDir) : [];
  const described = replay(files.flatMap((file) => file.operations));
  const unmigrated = diffStates(described, declaredState(registry), { renames: [] });
  return { registry, files, unmigrated };
}

/**
 * Opens the project for `serve` and `worker`: refuses declarations the migrations do not describe,
 * then opens the database with restwire's own migrations and the folder's pending files applied.
 */
export async function openProject(config: Config, { migrate = true }: { migrate?: boolean } = {}): Promise<{ project: Project; storage: Storage }> {
  const project = await loadProject(config);
  if (project.unmigrated.length > 0) {
    throw new ProjectError(
      [
        `the declarations in ${shown(config.resourcesDir)} differ from the migrations in ${shown(config.migrationsDir)}:`,
        ...project.unmigrated.map((operation) => `  - ${describeOperation(operation)}`),
        'Run `restwire makemigrations` to write a migration for them, review it, then start again.',
      ].join('\n'),
    );
  }
  const storage = await openStorage(config, { migrate });
  if (migrate && project.files.length > 0) {
    try {
      await applyUserMigrations(storage.db, project.files, { allowDataLoss: false });
    } catch (error) {
      await storage.close();
      throw error;
    }
  }
  return { project, storage };
}
