import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { adminAuth, createTestDatabase, type RunningServer, type TestDatabase } from './support/server.js';

// How declaration files load (RESOURCES.md §1): TypeScript compiled once into plain modules that
// Node imports itself. Loading does not touch the database, so SQLite alone is enough here.

const COUNTER = `// A helper beside the declarations, in a folder of its own (only files directly in resources/
// are declarations). Its state is shared: it is one module however many files import it.
let loaded: number = 0;
export function nextLoad(): number {
  loaded += 1;
  return loaded;
}
`;
const declaration = (name: string) => `import { defineResource, field } from 'restwire';
import type { Resource } from 'restwire';
import { nextLoad } from './lib/counter.js';

const resource: Resource = defineResource({
  name: '${name}',
  description: \`Loaded as number \${nextLoad()}.\`,
  fields: { title: field.string({ maxLength: 40 }) },
});
export default resource;
`;

describe('declaration files', () => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    project = createProject(database, { 'alpha.ts': declaration('alpha'), 'beta.mts': declaration('beta') });
    mkdirSync(join(project.resourcesDir, 'lib'));
    writeFileSync(join(project.resourcesDir, 'lib', 'counter.ts'), COUNTER);
    // No `npm install restwire` in this project: the declarations' `restwire` is the running copy.
    rmSync(join(project.dir, 'node_modules'), { recursive: true });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    server = await project.start();
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    project?.cleanup();
    await database?.drop();
  });

  it('load with a helper module they share, and no restwire installed in the project', async () => {
    const described = async (name: string) => {
      const response = await fetch(`${server.url}/api/v1/${name}/`, { method: 'OPTIONS', headers: { authorization: adminAuth, accept: 'application/json' } });
      expect(response.status).toBe(200);
      return ((await response.json()) as { description: string }).description;
    };
    // Files load in name order; the helper counted both, so both imported the same module.
    expect(await described('alpha')).toBe('Loaded as number 1.');
    expect(await described('beta')).toBe('Loaded as number 2.');
    const created = await fetch(`${server.url}/api/v1/beta/`, {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'Served' }),
    });
    expect(created.status).toBe(201);
  });

  it('leave nothing in the project’s own folders', () => {
    expect(readdirSync(project.resourcesDir).sort()).toEqual(['alpha.ts', 'beta.mts', 'lib']);
    expect(readdirSync(join(project.resourcesDir, 'lib'))).toEqual(['counter.ts']);
    expect(existsSync(join(project.dir, 'node_modules'))).toBe(false);
  });
});

describe('declarations reached through symbolic links', () => {
  let database: TestDatabase;
  let project: Project;
  let elsewhere: string;

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    project = createProject(database, {});
    // The resources folder is a link to a folder kept elsewhere, and one file in it a link too.
    elsewhere = mkdtempSync(join(tmpdir(), 'restwire-shared-declarations-'));
    writeFileSync(join(elsewhere, 'alpha.ts'), declaration('alpha').replace("import { nextLoad } from './lib/counter.js';\n", 'const nextLoad = () => 1;\n'));
    // A name starting with a dot is not a declaration: only the link `beta.ts` is.
    writeFileSync(join(elsewhere, '.beta-source.ts'), declaration('beta').replace("import { nextLoad } from './lib/counter.js';\n", 'const nextLoad = () => 2;\n'));
    symlinkSync(join(elsewhere, '.beta-source.ts'), join(elsewhere, 'beta.ts'));
    rmSync(project.resourcesDir, { recursive: true });
    symlinkSync(elsewhere, project.resourcesDir, 'dir');
  });
  afterAll(async () => {
    project?.cleanup();
    rmSync(elsewhere, { recursive: true, force: true });
    await database?.drop();
  });

  it('load as the files they point to', async () => {
    const result = await runOk(project, ['makemigrations']);
    expect(result.output).toContain('Create collection alpha');
    expect(result.output).toContain('Create collection beta');
  });
});

describe('declarations in a project whose cache cannot be written', () => {
  // Root writes through any permission: as root, the commands run as `nobody`, who is refused.
  const asUser = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : undefined;
  let database: TestDatabase;
  let project: Project;
  let unwritable: string;
  let writable: string;

  /** `restwire ...args` in the project as the user above, with TMPDIR set to `temporary`. */
  const run = (args: string[], temporary: string) => project.run(args, { TMPDIR: temporary }, 30_000, asUser);
  /** Makes a folder and everything in it read-only (not through links), or readable and writable by all. */
  const setMode = (path: string, mode: 'readOnly' | 'open'): void => {
    const stats = lstatSync(path);
    if (stats.isSymbolicLink()) return;
    if (stats.isDirectory()) {
      for (const name of readdirSync(path)) setMode(join(path, name), mode);
      chmodSync(path, mode === 'readOnly' ? 0o555 : 0o777);
    } else chmodSync(path, mode === 'readOnly' ? 0o444 : 0o666);
  };

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    project = createProject(database, { 'alpha.ts': declaration('alpha').replace("import { nextLoad } from './lib/counter.js';\n", 'const nextLoad = () => 1;\n') });
    await runOk(project, ['makemigrations']); // as the owner: the build goes into node_modules/.cache/restwire
    setMode(project.dir, 'open');
    setMode(join(project.dir, 'node_modules', '.cache'), 'readOnly');
    unwritable = mkdtempSync(join(tmpdir(), 'restwire-unwritable-'));
    chmodSync(unwritable, 0o555);
    writable = mkdtempSync(join(tmpdir(), 'restwire-writable-'));
    chmodSync(writable, 0o777);
  });
  afterAll(async () => {
    if (project) setMode(project.dir, 'open');
    project?.cleanup();
    for (const dir of [unwritable, writable]) if (dir) rmSync(dir, { recursive: true, force: true });
    await database?.drop();
  });

  it('use the build already in the cache, as it is', async () => {
    const result = await run(['makemigrations'], unwritable);
    expect(result.output).toContain('No changes detected');
    expect(result.code).toBe(0);
  });

  it('build a changed folder in the temporary folder, and stop naming both folders when neither can be written', async () => {
    project.write('alpha.ts', declaration('alpha').replace("import { nextLoad } from './lib/counter.js';\n", 'const nextLoad = () => 2;\n'));
    const refused = await run(['makemigrations'], unwritable);
    expect(refused.code).not.toBe(0);
    expect(refused.output).toContain(join(project.dir, 'node_modules', '.cache', 'restwire'));
    expect(refused.output).toContain(unwritable);
    expect(refused.output).not.toMatch(/^\s+at /m);
    // The description changed, not the fields: no migration to write, and the declarations loaded.
    const built = await run(['makemigrations'], writable);
    expect(built.output).toContain('No changes detected');
    expect(built.code).toBe(0);
    expect(readdirSync(writable).some((name) => name.startsWith('restwire-declarations-'))).toBe(true);
  });
});
