import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from './support/private-services.js';
import { ADMIN, adminAuth, basic, createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';

const BIN = new URL('../bin/restwire.js', import.meta.url).pathname;

/** Resolves once `condition` holds, checking every 50 ms for at most 10 s. */
async function until(condition: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 10_000; !condition(); ) {
    if (Date.now() > deadline) throw new Error('condition not met within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Runs the CLI as an operator would; resolves with its exit code and output. */
function cli(database: TestDatabase, args: string[], stdin = '', cwd?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH ?? '', ...database.env }, stdio: ['pipe', 'pipe', 'pipe'], ...(cwd ? { cwd } : {}) });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.stdin.end(stdin);
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('the restwire CLI', () => {
  let database: TestDatabase;
  let server: RunningServer;
  const me = (authorization: string) => fetch(`${server.url}/api/v1/users/me/`, { headers: { authorization } });
  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    server = await startServer(database);
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  it('createuser reads the password from stdin, stripping one trailing newline', async () => {
    const created = await cli(database, ['createuser', 'carol', '--password-stdin'], 'carol-password-1\n');
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/created user "carol"/);
    expect((await me(basic('carol', 'carol-password-1'))).status).toBe(200);
    const kept = await cli(database, ['createuser', 'dave', '--password-stdin'], 'dave-password-1 \n\n');
    expect(kept.code).toBe(0);
    expect((await me(basic('dave', 'dave-password-1 \n'))).status).toBe(200);
  });

  it('createuser exits 1 with a message for an existing or invalid name, or a weak password', async () => {
    for (const [name, password, message] of [
      ['carol', 'another-password-1', /already exists/],
      ['a b:c', 'good-password-1', /valid username/],
      ['erin', '1234', /too short/],
    ] as const) {
      const result = await cli(database, ['createuser', name, '--password-stdin'], `${password}\n`);
      expect(result.code, name).toBe(1);
      expect(result.stderr).toMatch(message);
    }
  });

  it('setpassword changes a password: the old one stops working', async () => {
    await cli(database, ['createuser', 'frank', '--password-stdin'], 'frank-password-1\n');
    expect((await me(basic('frank', 'frank-password-1'))).status).toBe(200);
    const changed = await cli(database, ['setpassword', 'frank', '--password-stdin'], 'frank-password-2\n');
    expect(changed.code).toBe(0);
    expect((await me(basic('frank', 'frank-password-2'))).status).toBe(200);
    // Another process cached the old credentials for up to a minute (README, "Authentication");
    // a fresh server has no cache and refuses them.
    const fresh = await startServer(database);
    try {
      const old = await fetch(`${fresh.url}/api/v1/users/me/`, { headers: { authorization: basic('frank', 'frank-password-1') } });
      expect(old.status).toBe(401);
    } finally {
      await fresh.stop();
    }
    expect((await cli(database, ['setpassword', 'nobody', '--password-stdin'], 'whatever-password-1\n')).code).toBe(1);
  });

  it('token NAME prints the access token alone', async () => {
    const result = await cli(database, ['token', 'carol']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+\n$/);
    expect((await me(`Bearer ${result.stdout.trim()}`)).status).toBe(200);
    expect((await cli(database, ['token', 'nobody'])).code).toBe(1);
  });

  it('serve --host/--port win over HOST and PORT (an address this machine does not have, a port it may not use)', async () => {
    const port = await freePort();
    const served = await startServer(database, {
      env: { HOST: '203.0.113.7', PORT: '1', DISPATCHER_IN_SERVE: 'false' },
      args: ['serve', '--host', '127.0.0.1', '--port', String(port)],
    });
    try {
      expect(served.port).toBe(port);
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    } finally {
      await served.stop();
    }
  });

  it('serve --port refuses what is not a port, before opening anything', async () => {
    const result = await cli(database, ['serve', '--port', '80a']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/--port.*expected a port from 1 to 65535/);
  });

  it('--help (and serve --help) name every environment variable and the serve options', async () => {
    for (const args of [['--help'], ['serve', '--help']]) {
      const result = await cli(database, args);
      expect(result.code, args.join(' ')).toBe(0);
      for (const variable of ['HOST, PORT', 'PUBLIC_URL', 'DATABASE_URL', 'REDIS_URL', 'SECRET_KEY', 'TRUST_PROXY', 'LOG_LEVEL', 'DISPATCHER_IN_SERVE']) {
        expect(result.stdout, `${args.join(' ')}: ${variable}`).toMatch(new RegExp(`^  ${variable}[\\s,]`, 'm'));
      }
    }
    expect((await cli(database, ['serve', '--help'])).stdout).toMatch(/--host <host>[\s\S]*--port <port>/);
  });

  it('logs one readable line per request on a terminal (JSON otherwise), never a password', async () => {
    // `script` gives serve a pseudo-terminal for stdout, as a user running it by hand has.
    const command = `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} serve`;
    const served = await startServer(database, {
      env: { DISPATCHER_IN_SERVE: 'false', TERM: 'dumb' },
      args: [],
      command: ['script', ['-qec', command, '/dev/null']],
      ready: /Server listening at (http:\/\/127\.0\.0\.1:\d+)/,
    });
    try {
      expect((await fetch(`${served.url}/api/v1/users/me/`, { headers: { authorization: adminAuth } })).status).toBe(200);
      const plain = () => served.output().replace(/\x1b\[[0-9;]*m/g, '');
      await until(() => /GET \/api\/v1\/users\/me\/ 200 [\d.]+ ms/.test(plain()));
      expect(plain()).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: GET \/api\/v1\/users\/me\/ 200 [\d.]+ ms\r?$/m);
      expect(plain()).not.toMatch(new RegExp(`"level":|incoming request|${ADMIN.password}|Basic `));
    } finally {
      await served.stop();
    }
    // Not a terminal (every other test): JSON lines, as a log collector wants.
    expect((await fetch(`${server.url}/api/v1/users/me/`, { headers: { authorization: adminAuth } })).status).toBe(200);
    await until(() => server.output().includes('request completed'));
    expect(server.output()).not.toContain(ADMIN.password);
    expect(server.output()).toMatch(/^\{"level":30,"time":\d+,.*"msg":"request completed"\}$/m);
  });

  it('refuses a bad configuration value, naming the variable', async () => {
    const result = await cli({ ...database, env: { ...database.env, RATE_LIMIT_ANON: 'lots' } }, ['migrate']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/RATE_LIMIT_ANON/);
  });
});

describe('restwire init', () => {
  const noDatabase = { env: {} } as TestDatabase;
  let parent: string;
  beforeAll(() => {
    parent = mkdtempSync(join(tmpdir(), 'restwire-init-'));
  });
  afterAll(() => rmSync(parent, { recursive: true, force: true }));

  it('writes a project into a new folder, named after it, and prints the files and the next commands', async () => {
    const result = await cli(noDatabase, ['init', 'My Notes'], '', parent);
    expect(result.code).toBe(0);
    const dir = join(parent, 'My Notes');
    const files = ['.gitignore', 'migrations/0001_initial.json', 'package.json', 'README.md', 'resources/notes.ts', 'tsconfig.json'];
    for (const file of files) expect(result.stdout).toContain(`  ${file}\n`);
    expect(result.stdout).toMatch(/cd 'My Notes'\n {2}npm install\n {2}npm start/);
    expect(readdirSync(dir).sort()).toEqual(['.gitignore', 'README.md', 'migrations', 'package.json', 'resources', 'tsconfig.json']);
    const written = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name: string; type: string; scripts: Record<string, string> };
    expect(written).toMatchObject({ name: 'my-notes', type: 'module', scripts: { start: 'restwire serve' } });
    expect(readFileSync(join(dir, 'README.md'), 'utf8')).toMatch(/^# my-notes\n/);
    expect(readFileSync(join(dir, 'resources/notes.ts'), 'utf8')).toMatch(/export default defineResource\(/);
  });

  it('writes into the current folder when given none', async () => {
    const dir = join(parent, 'here');
    mkdirSync(dir);
    const result = await cli(noDatabase, ['init'], '', dir);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/in this folder:/);
    expect(result.stdout).not.toMatch(/cd /);
    expect(JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))).toMatchObject({ name: 'here' });
  });

  it('refuses a folder that is not empty: exit 1, a message, nothing written', async () => {
    const dir = join(parent, 'taken');
    mkdirSync(dir);
    writeFileSync(join(dir, 'notes.txt'), 'mine');
    const result = await cli(noDatabase, ['init', 'taken'], '', parent);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^restwire: taken is not empty/);
    expect(readdirSync(dir)).toEqual(['notes.txt']);
  });
});
