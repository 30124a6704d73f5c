// Loads the user's declarations (RESOURCES.md §1): every `*.ts`, `*.mts`, `*.js` or `*.mjs` file
// directly in the resources folder default-exports one `defineResource(...)`.
//
// Node 20 cannot strip types, so the files are compiled once with esbuild (one build, shared
// helpers in shared chunks) into plain ES modules that Node imports itself. tsx did this through
// Node's module hooks (`module.register`), whose hooks thread, esbuild inside, cost serve 27–48
// MiB for the life of the process (bench/RESULTS.md, "eighth session").
//
// The compiled files go under the nearest `node_modules/.cache/restwire/`, so their bare imports
// resolve from the project's node_modules as the originals' would (else under the temporary
// folder); `restwire` itself is pointed at the running copy, so a declaration's `defineResource`
// is always the server's own. The build is stored under a name from its content: an unchanged
// folder reuses its directory (read-only too), and concurrent processes write the same content
// to the same place.

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BuildFailure, Message, OutputFile } from 'esbuild';
import { isResource } from './resource.js';
import { RegistryError, type LoadedDeclaration } from './registry.js';

const DECLARATION_FILE = /\.(ts|mts|js|mjs)$/;
/** The running copy's public module, which every declaration's `restwire` import becomes. */
const RESTWIRE = new URL('../index.js', import.meta.url).href;
/** Compiled folders nobody has loaded for this long are removed when another is written. */
const STALE_AFTER_MS = 7 * 24 * 3600 * 1000;

/** The folder's declaration files, sorted by name. */
export function declarationFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => DECLARATION_FILE.test(name) && !name.endsWith('.d.ts') && !name.startsWith('.') && !/\.test\.[cm]?[jt]s$/.test(name))
    .filter((name) => statSync(join(dir, name)).isFile())
    .sort()
    .map((name) => join(dir, name));
}

/**
 * Imports every declaration of `dir`; null when the folder does not exist (the seed's
 * `experiences` is served then). A file that does not compile, load or export a declaration
 * stops here with its name and the compiler's or loader's message.
 */
export async function loadDeclarations(dir: string | null): Promise<LoadedDeclaration[] | null> {
  if (dir === null || !existsSync(dir)) return null;
  const paths = declarationFiles(dir);
  if (paths.length === 0) return [];
  // No project around the folder, or a read-only one without this build: only `restwire` and
  // Node's own modules resolve from the temporary folder, all a declaration without packages needs.
  const roots = [projectCache(dir), join(tmpdir(), `restwire-declarations-${process.getuid?.() ?? 'user'}`)].filter((root) => root !== null);
  let compiled: Map<string, string> | null = null;
  for (const root of roots) if ((compiled = await compile(paths, root))) break;
  if (compiled === null) throw new RegistryError(shown(dir), `could not be compiled: none of ${roots.join(', ')} can be written; make one writable`);
  const loaded: LoadedDeclaration[] = [];
  for (const path of paths) {
    const file = shown(path);
    let module: { default?: unknown };
    try {
      module = (await import(compiled.get(path)!)) as { default?: unknown };
    } catch (error) {
      if (error instanceof Error && error.name === 'DeclarationError') throw new RegistryError(file, error.message);
      throw new RegistryError(file, `could not be loaded: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (!isResource(module.default)) {
      throw new RegistryError(file, 'must `export default defineResource({...})` (imported from "restwire")');
    }
    loaded.push({ resource: module.default, file });
  }
  return loaded;
}

/**
 * Compiles the declarations into one directory of ES modules under `root`; each path's module
 * URL, or null when `root` cannot be written and does not hold this build yet.
 */
async function compile(paths: string[], root: string): Promise<Map<string, string> | null> {
  const esbuild = await import('esbuild');
  // Built as if into a sibling of the final directory: the inline source maps' relative paths
  // hold for any directory beside it.
  const outdir = join(root, 'build');
  let outputs: OutputFile[];
  try {
    const result = await esbuild.build({
      // Each declaration becomes `<its file name>.mjs` (files of one folder have distinct names).
      entryPoints: paths.map((path) => ({ in: path, out: basename(path) })),
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      packages: 'external',
      outdir,
      chunkNames: 'shared-[hash]',
      outExtension: { '.js': '.mjs' },
      sourcemap: 'inline',
      write: false,
      logLevel: 'silent',
      plugins: [{ name: 'restwire', setup: (build) => build.onResolve({ filter: /^restwire$/ }, () => ({ path: RESTWIRE, external: true })) }],
    });
    outputs = result.outputFiles;
  } catch (error) {
    const first = (error as Partial<BuildFailure>).errors?.[0];
    if (first === undefined) throw error;
    throw new RegistryError(first.location ? shown(resolve(first.location.file)) : shown(paths[0]!), `could not be compiled: ${described(first)}`);
  } finally {
    await esbuild.stop();
  }

  const target = written(root, outdir, outputs);
  if (target === null) return null;
  const urls = new Map<string, string>();
  for (const path of paths) urls.set(path, pathToFileURL(join(target, `${basename(path)}.mjs`)).href);
  return urls;
}

/**
 * Writes the build once under a name from its content: the directory it is in, or null when
 * `root` cannot be written and does not hold it.
 */
function written(root: string, outdir: string, outputs: OutputFile[]): string | null {
  const digest = createHash('sha256');
  for (const output of outputs) digest.update(relative(outdir, output.path)).update(output.contents);
  const target = join(root, digest.digest('hex').slice(0, 16));
  if (existsSync(target)) {
    try {
      const now = new Date();
      utimesSync(target, now, now); // in use: not stale
    } catch {
      // A read-only cache, written when the image was built.
    }
    return target;
  }
  let staging: string;
  try {
    mkdirSync(root, { recursive: true });
    staging = mkdtempSync(join(root, '.staging-'));
  } catch (error) {
    if (isUnwritable(error)) return null;
    throw error;
  }
  for (const output of outputs) {
    const path = join(staging, relative(outdir, output.path));
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, output.contents);
  }
  try {
    renameSync(staging, target);
  } catch (error) {
    // Another process wrote the same build first: its copy is this one.
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(target)) throw error;
  }
  removeStale(root, target);
  return target;
}

function isUnwritable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'EACCES' || code === 'EROFS' || code === 'EPERM';
}

function removeStale(root: string, keep: string): void {
  for (const name of readdirSync(root)) {
    const path = join(root, name);
    try {
      if (path !== keep && Date.now() - statSync(path).mtimeMs > STALE_AFTER_MS) rmSync(path, { recursive: true, force: true });
    } catch {
      // Removed by another process meanwhile.
    }
  }
}

/** `node_modules/.cache/restwire` of the nearest folder up from `dir` that has node_modules. */
function projectCache(dir: string): string | null {
  for (let at = resolve(dir); ; at = dirname(at)) {
    if (existsSync(join(at, 'node_modules'))) return join(at, 'node_modules', '.cache', 'restwire');
    if (dirname(at) === at) return null;
  }
}

function shown(path: string): string {
  return relative(process.cwd(), path) || path;
}

function described(message: Message): string {
  const at = message.location;
  return at ? `${message.text} (line ${at.line}, column ${at.column + 1})` : message.text;
}
