// `restwire init [DIR]` (issue 19): writes a new project that `npm install && npm start` serves.
// The files come from templates/project/ (shipped in the package); only package.json is made
// here, for its name and the version of restwire to depend on. The template carries the
// migration of its example declaration, so `npm start` serves without a `makemigrations` first
// (`serve` refuses declarations no migration describes, RESOURCES.md §5).

import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { VERSION } from '../version.js';

const TEMPLATE = fileURLToPath(new URL('../../templates/project/', import.meta.url));

/** A folder `init` will not write into; the message says why. */
export class InitError extends Error {
  override name = 'InitError';
}

/**
 * Writes the project into `dir` (created when missing) and returns the paths written, relative
 * to it. Refuses a folder that holds anything, so nothing of the user's is overwritten.
 */
export function initProject(dir: string): string[] {
  const target = resolve(dir);
  if (existsSync(target)) {
    if (!statSync(target).isDirectory()) throw new InitError(`${dir} is a file, not a folder`);
    if (readdirSync(target).length > 0) {
      throw new InitError(`${dir} is not empty; give a new or empty folder (restwire init my-api)`);
    }
  }
  mkdirSync(target, { recursive: true });
  cpSync(TEMPLATE, target, { recursive: true });
  // npm leaves a package's .gitignore out of its tarball, so the template's is named gitignore.
  renameSync(join(target, 'gitignore'), join(target, '.gitignore'));
  const name = packageName(basename(target));
  const readme = join(target, 'README.md');
  writeFileSync(readme, readFileSync(readme, 'utf8').replaceAll('{{name}}', name));
  writeFileSync(join(target, 'package.json'), `${JSON.stringify(packageJson(name), null, 2)}\n`);
  return listFiles(target).map((path) => relative(target, path));
}

function packageJson(name: string) {
  return {
    name,
    version: '0.1.0',
    private: true,
    type: 'module',
    scripts: { start: 'restwire serve', makemigrations: 'restwire makemigrations', migrate: 'restwire migrate' },
    dependencies: { restwire: `^${VERSION}` },
  };
}

/** The folder's name as npm accepts it: lowercase, URL-safe, at most 214 characters. */
function packageName(folder: string): string {
  const name = folder.toLowerCase().replace(/[^a-z0-9._~-]+/g, '-').replace(/^[._-]+/, '').slice(0, 214);
  return name || 'my-api';
}

function listFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((entry) => (entry.isDirectory() ? listFiles(join(dir, entry.name)) : [join(dir, entry.name)]));
}
