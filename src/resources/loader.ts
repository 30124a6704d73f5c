// Loads the user's declarations (RESOURCES.md §1): every `*.ts`, `*.mts`, `*.js` or `*.mjs` file
// directly in the resources folder default-exports one `defineResource(...)`.
//
// TypeScript is loaded with tsx (esbuild): Node 20 cannot strip types itself, and tsx keeps
// Node's own ESM resolution, so `import { defineResource } from 'restwire'` and a project's
// `"type": "module"` resolve exactly as Node would; jiti would resolve with its own rules and
// CommonJS interop. It is loaded only when a folder has declarations.

import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { isResource } from './resource.js';
import { RegistryError, type LoadedDeclaration } from './registry.js';

const DECLARATION_FILE = /\.(ts|mts|js|mjs)$/;

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
 * `experiences` is served then). A file that does not load or export a declaration stops here
 * with its name and the loader's message.
 */
export async function loadDeclarations(dir: string | null): Promise<LoadedDeclaration[] | null> {
  if (dir === null || !existsSync(dir)) return null;
  const { tsImport } = await import('tsx/esm/api');
  const loaded: LoadedDeclaration[] = [];
  for (const path of declarationFiles(dir)) {
    const file = relative(process.cwd(), path) || path;
    let module: { default?: unknown };
    try {
      module = (await tsImport(pathToFileURL(resolve(path)).href, import.meta.url)) as { default?: unknown };
    } catch (error) {
      // The file's `restwire` may be another instance of this module (tsx loads it in its own
      // namespace), so a DeclarationError is known by its name, not by instanceof.
      if (error instanceof Error && error.name === 'DeclarationError') throw new RegistryError(file, error.message);
      throw new RegistryError(file, `could not be loaded: ${error instanceof Error ? error.message : String(error)}`);
    }
    // tsx may wrap a CommonJS-style default once more.
    let declaration = module.default;
    if (!isResource(declaration) && isResource((declaration as { default?: unknown } | undefined)?.default)) {
      declaration = (declaration as { default: unknown }).default;
    }
    if (!isResource(declaration)) {
      throw new RegistryError(file, 'must `export default defineResource({...})` (imported from "restwire")');
    }
    loaded.push({ resource: declaration, file });
  }
  return loaded;
}
