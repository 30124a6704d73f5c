import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, basic } from './support/server.js';

/**
 * restwire as a user installs it (issue 19): `npm pack` of a copy of this checkout (its
 * `prepack` builds dist/ from scratch), `npm install <tarball>` into an empty project, then
 * only `npx restwire …` there. It runs once, in beforeAll, for every test here.
 *
 * better-sqlite3's install script (`prebuild-install || node-gyp rebuild`) downloads a prebuilt
 * binary where it can, as on a user's networked machine. This machine reaches no network, so
 * the download is served on 127.0.0.1 from the binary `npm ci` compiled for this checkout
 * (same version, same Node): compiling it a second time here took two minutes of CI and
 * tested nothing `npm ci` had not. The installed copy is still loaded by its own install
 * script (prebuild-install requires it) and then by every `npx restwire` below.
 */
const CHECKOUT = new URL('../', import.meta.url).pathname.replace(/\/$/, '');
const TSC = join(CHECKOUT, 'node_modules/.bin/tsc');
/** What a clean clone does not have, and nothing a package needs. */
const NOT_COPIED = new Set(['node_modules', '.git', 'dist', 'data', 'coverage', 'test-output']);

interface Result {
  readonly code: number | null;
  readonly output: string;
}

/** Runs a command to its end; `env` is added to this process's environment (npm needs HOME, its cache). */
function run(command: string, args: readonly string[], cwd: string, env: Record<string, string> = {}): Promise<Result> {
  const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output }));
  });
}

async function runOk(command: string, args: readonly string[], cwd: string, env?: Record<string, string>): Promise<string> {
  const result = await run(command, args, cwd, env);
  if (result.code !== 0) throw new Error(`${command} ${args.join(' ')} exited ${result.code}:\n${result.output}`);
  return result.output;
}

const SQLITE_PACKAGE = join(CHECKOUT, 'node_modules/better-sqlite3');

/**
 * Serves this checkout's compiled better-sqlite3 as prebuild-install downloads it,
 * `<host>/v<version>/better-sqlite3-v<version>-node-v<abi>-<platform>-<arch>.tar.gz` holding
 * `build/Release/better_sqlite3.node`. Resolves with the host URL, the file's URL, the server and
 * how many times the file was sent.
 */
interface Prebuilt {
  readonly host: string;
  readonly url: string;
  readonly server: Server;
  readonly downloads: () => number;
}

async function servePrebuiltSqlite(root: string): Promise<Prebuilt> {
  const { version } = JSON.parse(readFileSync(join(SQLITE_PACKAGE, 'package.json'), 'utf8')) as { version: string };
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  const tarball = join(root, name);
  await runOk('tar', ['-czf', tarball, '-C', SQLITE_PACKAGE, 'build/Release/better_sqlite3.node'], root);
  const body = readFileSync(tarball);
  let downloads = 0;
  const server = createServer((request, response) => {
    if (request.url !== `/v${version}/${name}`) return void response.writeHead(404).end();
    downloads++;
    response.writeHead(200, { 'content-type': 'application/gzip', 'content-length': body.length }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const host = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return { host, url: `${host}/v${version}/${name}`, server, downloads: () => downloads };
}

/** Where prebuild-install caches a download (its util.cachedPrebuild), removed afterwards. */
function prebuildCacheFile(url: string): string {
  const cache = process.env.npm_config_cache ?? join(homedir(), '.npm');
  const digest = createHash('sha512').update(url).digest('hex').slice(0, 6);
  return join(cache, '_prebuilds', `${digest}-${url.split('/').pop()!.replace(/[^a-zA-Z0-9.]+/g, '-')}`);
}

const SERVER_ENV = { HOST: '127.0.0.1', PORT: '0', ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password, LOG_LEVEL: 'info' };

describe('the npm package', () => {
  let root: string;
  let tarballFiles: string[];
  let app: string;
  let prebuilt: Prebuilt | undefined;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'restwire-package-'));
    const source = join(root, 'source');
    cpSync(CHECKOUT, source, { recursive: true, filter: (path) => !NOT_COPIED.has(path.slice(CHECKOUT.length + 1)) });
    symlinkSync(join(CHECKOUT, 'node_modules'), join(source, 'node_modules'), 'dir');
    const packed = JSON.parse(await runOk('npm', ['pack', '--json', '--silent', '--pack-destination', root], source)) as {
      filename: string;
      files: { path: string }[];
    }[];
    tarballFiles = packed[0]!.files.map((file) => file.path).sort();
    const tarball = join(root, packed[0]!.filename);

    // An empty project, then the tarball installed as `npm install restwire` would.
    const empty = join(root, 'empty');
    mkdirSync(empty);
    writeFileSync(join(empty, 'package.json'), JSON.stringify({ name: 'empty', private: true }));
    prebuilt = await servePrebuiltSqlite(root);
    const started = performance.now();
    await runOk('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], empty, {
      npm_config_nodedir: process.env.npm_config_nodedir ?? '/usr',
      npm_config_better_sqlite3_binary_host: prebuilt.host,
      // Should the download fail, better-sqlite3 compiles from source: node-gyp's make on every core.
      JOBS: 'max',
    });
    // A silent fallback to compiling (node-gyp's Makefile) would make this two minutes slower unnoticed.
    expect(prebuilt.downloads()).toBe(1);
    expect(existsSync(join(empty, 'node_modules/better-sqlite3/build/Makefile'))).toBe(false);
    // Not asserted (CI machines are noisy); printed so a slow install is seen.
    console.log(`npm install <tarball>: ${((performance.now() - started) / 1000).toFixed(0)} s`);

    // `npx restwire init` writes the new project; its `npm install` is the one above, moved in
    // (the new package.json asks for restwire from the registry, which this test must not use).
    app = join(root, 'my-api');
    await runOk('npx', ['restwire', 'init', app], empty);
    renameSync(join(empty, 'node_modules'), join(app, 'node_modules'));
  }, 6 * 60_000);

  afterAll(async () => {
    if (prebuilt) {
      await new Promise((resolve) => prebuilt!.server.close(resolve));
      rmSync(prebuildCacheFile(prebuilt.url), { force: true });
    }
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('holds the compiled code and its types, the CLI, the assets, the init templates, README and LICENSE, and nothing else', () => {
    for (const path of ['dist/index.js', 'dist/index.d.ts', 'dist/cli/main.js', 'bin/restwire.js', 'assets/browsable.css', 'LICENSE', 'README.md', 'package.json']) {
      expect(tarballFiles).toContain(path);
    }
    const unexpected = tarballFiles.filter(
      (path) => !/^(dist\/.+\.(js|d\.ts)|bin\/restwire\.js|assets\/[^/]+|templates\/project\/.+|README\.md|LICENSE|package\.json)$/.test(path) || /\.test\./.test(path),
    );
    expect(unexpected).toEqual([]);
  });

  it('init wrote a project that depends on this version of restwire', () => {
    const written = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as Record<string, unknown>;
    const version = (JSON.parse(readFileSync(join(CHECKOUT, 'package.json'), 'utf8')) as { version: string }).version;
    expect(written).toMatchObject({
      name: 'my-api',
      type: 'module',
      scripts: { start: 'restwire serve', makemigrations: 'restwire makemigrations', migrate: 'restwire migrate' },
      dependencies: { restwire: `^${version}` },
    });
    expect(readdirSync(join(app, 'resources'))).toEqual(['notes.ts']);
    expect(readFileSync(join(app, '.gitignore'), 'utf8')).toMatch(/node_modules.*\n.*data/s);
  });

  it('type-checks declarations against the installed types: a misspelt field type fails, the right one passes', async () => {
    const tsc = () => run(TSC, ['--strict', '--noEmit', '-p', '.'], app);
    expect((await tsc()).output).toBe('');
    // Every installed .d.ts checked too: restwire's public types need nothing the user did not get
    // with it (they refer to Node's types, a dependency of restwire, not of the user's project).
    expect((await run(TSC, ['--strict', '--noEmit', '--skipLibCheck', 'false', '-p', '.'], app)).output).toBe('');
    expect(readdirSync(join(app, 'node_modules/@types'))).toContain('node');
    writeFileSync(
      join(app, 'resources/tags.ts'),
      "import { defineResource, field } from 'restwire';\nexport default defineResource({ name: 'tags', fields: { label: field.strnig({ maxLength: 50 }) } });\n",
    );
    try {
      const misspelt = await tsc();
      expect(misspelt.code).not.toBe(0);
      expect(misspelt.output).toMatch(/resources\/tags\.ts.*'strnig' does not exist/);
    } finally {
      rmSync(join(app, 'resources/tags.ts'));
    }
  });

  it('makemigrations, migrate and serve through npx; one create and one list', async () => {
    const npx = (...args: string[]) => runOk('npx', ['restwire', ...args], app, SERVER_ENV);
    expect(await npx('makemigrations')).toMatch(/No changes detected/); // init's migration describes its example
    writeFileSync(
      join(app, 'resources/tags.ts'),
      "import { defineResource, field } from 'restwire';\nexport default defineResource({ name: 'tags', fields: { label: field.string({ maxLength: 50 }) } });\n",
    );
    expect(await npx('makemigrations')).toMatch(/Wrote migrations\/0002_\w+\.json/);
    expect(await npx('migrate')).toMatch(/Applied: .*0001_initial\.json.*0002_/);

    // Its own process group, so that stopping it stops npx, its shell and the server, and nothing else.
    const server = spawn('npx', ['restwire', 'serve'], { cwd: app, env: { ...process.env, ...SERVER_ENV }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const exited = new Promise((resolve) => server.once('exit', resolve));
    let output = '';
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`npx restwire serve did not listen within 30 s:\n${output}`)), 30_000);
        const onData = (chunk: Buffer) => {
          output += chunk.toString();
          const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
          if (match) {
            clearTimeout(timer);
            resolve(match[1]!);
          }
        };
        server.stdout.on('data', onData);
        server.stderr.on('data', onData);
        void exited.then(() => reject(new Error(`npx restwire serve exited:\n${output}`)));
      });
      const created = await fetch(`${url}/api/v1/notes/`, {
        method: 'POST',
        headers: { authorization: basic(ADMIN.username, ADMIN.password), 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'Installed from the tarball' }),
      });
      expect(created.status).toBe(201);
      const list = await fetch(`${url}/api/v1/notes/`);
      expect(list.status).toBe(200);
      const page = (await list.json()) as { results: { title: string; pinned: boolean }[] };
      expect(page.results).toEqual([expect.objectContaining({ title: 'Installed from the tarball', pinned: false })]);
      expect((await fetch(`${url}/api/v1/tags/`)).status).toBe(200);
    } finally {
      if (server.exitCode === null && server.signalCode === null) process.kill(-server.pid!, 'SIGTERM');
      await exited;
    }
  });
});
