// Roles (ACCESS.md §1), as an operator and a client see them: the first user is an admin, the CLI
// gives and takes roles, an admin's PATCH sets them, only the user and admins see them, and a
// change reaches every scheme, Bearer tokens issued before it included.

import { spawn } from 'node:child_process';
import { Validator } from '@seriousme/openapi-schema-validator';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStorage } from '../src/db/database.js';
import { ADMIN, BACKENDS, adminAuth, basic, createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';

const BIN = new URL('../bin/restwire.js', import.meta.url).pathname;

/** Runs the CLI as an operator would; resolves with its exit code and output. */
function cli(database: TestDatabase, args: string[], stdin = ''): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH ?? '', ...database.env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.stdin.end(stdin);
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

interface UserRecord {
  id: number;
  url: string;
  username: string;
  roles?: string[];
}

describe.each(BACKENDS)('roles (%s)', (backend) => {
  let database: TestDatabase;
  let server: RunningServer;
  const ids: Record<string, number> = {};
  const refreshIds = async () => {
    const list = (await (await api('/api/v1/users/?limit=100')).json()) as { results: UserRecord[] };
    for (const user of list.results) ids[user.username] = user.id;
  };
  const auth = (name: string) => basic(name, `${name}-password-1`);
  const api = (path: string, init: RequestInit = {}) => fetch(`${server.url}${path}`, init);
  const patchRoles = (id: number, body: unknown, authorization?: string) =>
    api(`/api/v1/users/${id}/`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
      body: JSON.stringify(body),
    });
  const rolesOf = async (name: string): Promise<string[] | undefined> =>
    ((await (await api(`/api/v1/users/${ids[name]}/`, { headers: { authorization: adminAuth } })).json()) as UserRecord).roles;
  const me = async (authorization: string): Promise<UserRecord> => (await (await api('/api/v1/users/me/', { headers: { authorization } })).json()) as UserRecord;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    server = await startServer(database);
    for (const name of ['alice', 'bob']) expect((await cli(database, ['createuser', name, '--password-stdin'], `${name}-password-1\n`)).code).toBe(0);
    await refreshIds();
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  it('gives the first user the admin role', async () => {
    expect((await me(adminAuth)).roles).toEqual(['admin']);
    const listed = await cli(database, ['roles', ADMIN.username]);
    expect(listed).toMatchObject({ code: 0, stdout: 'admin\n' });
    expect((await me(auth('alice'))).roles).toEqual([]);
  });

  it('createuser --role, and roles lists, adds and removes them', { timeout: 120_000 }, async () => {
    const created = await cli(database, ['createuser', 'carol', '--password-stdin', '--role', 'staff', '--role', 'editors'], 'carol-password-1\n');
    expect(created.code).toBe(0);
    expect(await cli(database, ['roles', 'carol'])).toMatchObject({ code: 0, stdout: 'editors\nstaff\n' });
    expect(await cli(database, ['roles', 'carol', '--add', 'ops', '--remove', 'staff'])).toMatchObject({ code: 0, stdout: 'editors\nops\n' });
    expect(await cli(database, ['roles', 'carol'])).toMatchObject({ code: 0, stdout: 'editors\nops\n' });
    expect((await me(auth('carol'))).roles).toEqual(['editors', 'ops']);
    await refreshIds();
  });

  it('the CLI exits 1 for an unknown user, a bad name or the last admin, changing nothing', async () => {
    const refused = [
      ['roles', 'nobody'],
      ['roles', 'nobody', '--add', 'staff'],
      ['roles', 'carol', '--add', 'Staff'],
      ['roles', 'carol', '--add', 'ok', '--add', '9lives'],
      ['roles', 'carol', '--remove', ''],
      ['roles', 'carol', ...Array.from({ length: 19 }, (_, i) => ['--add', `r${i}`]).flat()],
      ['roles', ADMIN.username, '--remove', 'admin'],
    ];
    // None changes anything, so they may run at once.
    const results = await Promise.all([
      ...refused.map((args) => cli(database, args)),
      cli(database, ['createuser', 'dave', '--password-stdin', '--role', 'Bad'], 'dave-password-1\n'),
    ]);
    for (const [index, result] of results.entries()) {
      const args = (refused[index] ?? ['createuser', 'dave']).join(' ');
      expect(result.code, args).toBe(1);
      expect(result.stderr, args).toMatch(/restwire|error/);
    }
    expect((await cli(database, ['roles', 'carol'])).stdout).toBe('editors\nops\n');
    expect((await cli(database, ['roles', ADMIN.username])).stdout).toBe('admin\n');
    expect((await cli(database, ['roles', 'dave'])).code).toBe(1);
  }, 120_000);

  it('an admin sets roles with PATCH; every other member is read-only', async () => {
    const response = await patchRoles(ids.alice!, { roles: ['staff', 'editors', 'staff'], username: 'mallory', password: 'other-password-1' }, adminAuth);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ id: ids.alice, username: 'alice', roles: ['editors', 'staff'] });
    expect(await rolesOf('alice')).toEqual(['editors', 'staff']);
    expect((await me(auth('alice'))).username).toBe('alice');
    // Only the username changing: nothing to do, still a 200.
    const nothing = await patchRoles(ids.alice!, { username: 'mallory' }, adminAuth);
    expect(nothing.status).toBe(200);
    expect(await nothing.json()).toMatchObject({ username: 'alice', roles: ['editors', 'staff'] });
  });

  it('refuses PATCH by anyone else (403) and anonymously (401), changing nothing', async () => {
    const other = await patchRoles(ids.bob!, { roles: ['admin'] }, auth('alice'));
    expect(other.status).toBe(403);
    expect(other.headers.get('content-type')).toMatch(/problem\+json/);
    const self = await patchRoles(ids.bob!, { roles: ['admin'] }, auth('bob'));
    expect(self.status).toBe(403);
    const anonymous = await patchRoles(ids.bob!, { roles: ['admin'] });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Basic/);
    expect(await rolesOf('bob')).toEqual([]);
    for (const method of ['PUT', 'DELETE']) {
      expect((await api(`/api/v1/users/${ids.bob}/`, { method, headers: { authorization: adminAuth } })).status, method).toBe(405);
    }
  });

  it('answers a bad name or more than 20 roles with a 400 naming roles', async () => {
    for (const roles of [['Admin'], ['ok', '1st'], ['a'.repeat(51)], 'admin', [7], Array.from({ length: 21 }, (_, i) => `r${i}`), null]) {
      const response = await patchRoles(ids.alice!, { roles }, adminAuth);
      expect(response.status, JSON.stringify(roles)).toBe(400);
      const body = (await response.json()) as Record<string, unknown>;
      expect(JSON.stringify(body), JSON.stringify(roles)).toMatch(/"roles"/);
    }
    expect((await patchRoles(ids.alice!, { roles: Array.from({ length: 20 }, (_, i) => `r${i}`) }, adminAuth)).status).toBe(200);
    expect(await rolesOf('alice')).toHaveLength(20);
    expect((await patchRoles(ids.alice!, { roles: ['editors', 'staff'] }, adminAuth)).status).toBe(200);
  });

  it('never takes admin from the last admin', async () => {
    const refused = await patchRoles(ids.admin!, { roles: ['staff'] }, adminAuth);
    expect(refused.status).toBe(400);
    expect(JSON.stringify(await refused.json())).toMatch(/"roles"/);
    expect(await rolesOf('admin')).toEqual(['admin']);
    // With a second admin, the first may step down; then the second is the last.
    expect((await patchRoles(ids.carol!, { roles: ['admin', 'editors'] }, adminAuth)).status).toBe(200);
    expect((await patchRoles(ids.admin!, { roles: [] }, adminAuth)).status).toBe(200);
    expect((await patchRoles(ids.carol!, { roles: [] }, auth('carol'))).status).toBe(400);
    expect((await patchRoles(ids.admin!, { roles: ['admin'] }, auth('carol'))).status).toBe(200);
    expect((await patchRoles(ids.carol!, { roles: ['editors', 'ops'] }, adminAuth)).status).toBe(200);
    expect(await rolesOf('carol')).toEqual(['editors', 'ops']);
  });

  it('shows roles to the user and to admins only', async () => {
    const get = async (path: string, authorization?: string) =>
      (await (await api(path, authorization ? { headers: { authorization } } : {})).json()) as UserRecord & { results: UserRecord[] };
    expect((await get(`/api/v1/users/${ids.alice}/`, auth('alice'))).roles).toEqual(['editors', 'staff']);
    expect(await get(`/api/v1/users/${ids.alice}/`, auth('bob'))).not.toHaveProperty('roles');
    expect(await get(`/api/v1/users/${ids.alice}/`)).not.toHaveProperty('roles');
    expect((await get(`/api/v1/users/${ids.bob}/`, adminAuth)).roles).toEqual([]);
    expect((await get('/api/v1/users/me/', auth('alice'))).roles).toEqual(['editors', 'staff']);

    // The same list URL, asked by alice then bob: bob's page is never alice's.
    const path = '/api/v1/users/?limit=100';
    const shownRoles = (page: { results: UserRecord[] }) => Object.fromEntries(page.results.filter((u) => 'roles' in u).map((u) => [u.username, u.roles]));
    expect(shownRoles(await get(path, auth('alice')))).toEqual({ alice: ['editors', 'staff'] });
    expect(shownRoles(await get(path, auth('bob')))).toEqual({ bob: [] });
    expect(shownRoles(await get(path))).toEqual({});
    expect(shownRoles(await get(path, adminAuth))).toMatchObject({ admin: ['admin'], alice: ['editors', 'staff'], bob: [] });
    expect(shownRoles(await get(path, auth('alice')))).toEqual({ alice: ['editors', 'staff'] });
    const csv = await (await api(path, { headers: { authorization: auth('bob'), accept: 'text/csv' } })).text();
    expect(csv).not.toMatch(/editors/);
  });

  it('documents roles: optional in User, the only member of the PATCH body', async () => {
    const doc = (await (await api('/api/v1/openapi.json')).json()) as {
      components: { schemas: Record<string, { properties: Record<string, unknown>; required?: string[] }> };
      paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: { properties: Record<string, unknown> } }> } }>>;
    };
    const user = doc.components.schemas.User!;
    expect(user.properties.roles).toMatchObject({ type: 'array', maxItems: 20 });
    expect(user.required).not.toContain('roles');
    const patch = doc.paths['/api/v1/users/{id}/']!.patch!;
    expect(Object.keys(patch.requestBody!.content['application/json']!.schema.properties)).toEqual(['roles']);
    expect(doc.components.schemas.PatchedUserRequest).toBeUndefined();
    const result = await new Validator().validate(doc as unknown as Record<string, unknown>);
    expect(result.valid).toBe(true);
  });

  it('a role change reaches a Bearer token issued before it, and cached Basic credentials, at once', async () => {
    const issued = await api('/api/v1/auth/token/', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'bob', password: 'bob-password-1' }),
    });
    const { access_token: token } = (await issued.json()) as { access_token: string };
    const bearer = `Bearer ${token}`;
    expect((await me(bearer)).roles).toEqual([]);
    expect((await me(auth('bob'))).roles).toEqual([]);
    expect((await patchRoles(ids.alice!, { roles: ['staff'] }, bearer)).status).toBe(403);

    expect((await patchRoles(ids.bob!, { roles: ['admin'] }, adminAuth)).status).toBe(200);
    expect((await me(bearer)).roles).toEqual(['admin']);
    expect((await me(auth('bob'))).roles).toEqual(['admin']);
    expect((await patchRoles(ids.alice!, { roles: ['editors', 'staff'] }, bearer)).status).toBe(200);

    expect((await patchRoles(ids.bob!, { roles: [] }, adminAuth)).status).toBe(200);
    expect((await me(bearer)).roles).toEqual([]);
    expect((await patchRoles(ids.alice!, { roles: ['staff'] }, bearer)).status).toBe(403);
  });

  it('a change made by another process (the CLI) reaches the server within 60 seconds', async () => {
    const issued = await api('/api/v1/auth/token/', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'alice', password: 'alice-password-1' }),
    });
    const bearer = `Bearer ${((await issued.json()) as { access_token: string }).access_token}`;
    // An admin-only write tells whether the server takes alice for an admin.
    const asAdmin = async (authorization: string) => (await patchRoles(ids.bob!, { roles: [] }, authorization)).status;
    expect(await asAdmin(bearer)).toBe(403);
    expect(await asAdmin(auth('alice'))).toBe(403);
    const started = Date.now();
    expect((await cli(database, ['roles', 'alice', '--add', 'admin'])).code).toBe(0);
    let status = 403;
    while (status !== 200 && Date.now() - started < 60_000) {
      status = await asAdmin(bearer);
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(status).toBe(200);
    expect(await asAdmin(auth('alice'))).toBe(200);
    expect((await me(bearer)).roles).toEqual(['admin', 'editors', 'staff']);
  }, 70_000);
});

describe.each(BACKENDS)('a database that predates roles (%s)', (backend) => {
  let database: TestDatabase;
  afterAll(async () => {
    await database?.drop();
  });

  it('gives admin to its user with the lowest id when migrated', async () => {
    database = await createTestDatabase(backend);
    // Made as an older restwire left it: users, and no roles column or 0008 migration (nor any
    // migration after it: Kysely applies them in order).
    const storage = await openStorage({ databaseUrl: database.url, dataDir: database.env.DATA_DIR! });
    try {
      const db = storage.db;
      const now = Date.now();
      for (const username of ['first', 'second']) {
        await db.insertInto('users').values({ username, password_hash: 'x', password_changed_at: now, created_at: now }).execute();
      }
      await db.schema.alterTable('users').dropColumn('roles').execute();
      for (const table of ['api_keys', 'change_log', 'change_positions', 'idempotency_keys']) await db.schema.dropTable(table).execute();
      await sql`delete from kysely_migration where name in ('0008_user_roles', '0009_api_keys', '0010_change_log', '0011_idempotency_keys', '0012_unnumbered_changes_index')`.execute(db);
    } finally {
      await storage.close();
    }
    const migrated = await cli(database, ['migrate']);
    expect(migrated.stdout).toMatch(/0008_user_roles/);
    expect(await cli(database, ['roles', 'first'])).toMatchObject({ code: 0, stdout: 'admin\n' });
    expect(await cli(database, ['roles', 'second'])).toMatchObject({ code: 0, stdout: '' });
  });
});
