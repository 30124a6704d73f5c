import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * Where the login page sends the browser after logging in (issue 22, item 9): its form's
 * `data-next`, which the page's script passes to `location.assign`. Only paths on the server's
 * own origin may get there. No storage is involved, so SQLite alone.
 */
describe('the login page after logging in', () => {
  let database: TestDatabase;
  let server: RunningServer;
  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    server = await startServer(database, { env: { DISPATCHER_IN_SERVE: 'false' } });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  /** The page's next location, as the browser resolves it. */
  async function destination(rawQuery: string): Promise<URL> {
    const response = await fetch(`${server.url}/api/v1/auth/login/?${rawQuery}`, { headers: { accept: 'text/html' } });
    expect(response.status).toBe(200);
    const next = /data-next="([^"]*)"/.exec(await response.text())?.[1];
    expect(next).toBeDefined();
    // The attribute as the browser reads it: ghtml writes `&`, `=` and others as character references.
    const value = next!.replace(/&#(\d+);/g, (_, code: string) => String.fromCharCode(Number(code))).replaceAll('&amp;', '&');
    return new URL(value, server.url);
  }

  it.each([
    ['a tab', 'next=/%09/evil.example/'],
    ['a newline', 'next=/%0A/evil.example/'],
    ['a carriage return and a newline', 'next=/%0D%0A/evil.example/'],
    ['a backslash', 'next=/%5Cevil.example/'],
    ['a scheme-relative URL', 'next=//evil.example/'],
    ['another origin', 'next=https://evil.example/'],
  ])('stays on the site when next hides another host behind %s', async (_name, query) => {
    const url = await destination(query);
    expect(url.origin).toBe(new URL(server.url).origin);
    expect(url.pathname).toBe('/api/v1/');
  });

  it('goes to a path on the site', async () => {
    const url = await destination(`next=${encodeURIComponent('/api/v1/experiences/?ordering=-id')}`);
    expect(url.href).toBe(`${server.url}/api/v1/experiences/?ordering=-id`);
  });
});
