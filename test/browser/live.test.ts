import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, adminAuth, BACKENDS, createTestDatabase, startServer, type RunningServer, type TestDatabase } from '../support/server.js';
import { launchBrowser, logIn, screenshot, watchRequests } from './browser.js';

// Live changes in a real browser (STREAMS.md §5, README "Live changes"): the browsable list follows
// its own stream, so a record created in another page appears without a reload; and the README's
// EventSource example, served from another origin, works as printed.

const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

/** The README's browser example, as printed (the first html block of its "Live changes" section). */
function readmeExample(): string {
  const section = README.slice(README.indexOf('## Live changes'));
  const block = /```html\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error('README.md has no html example under "Live changes"');
  return block;
}

const send = async (base: string, method: string, path: string, body?: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: adminAuth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  expect(response.status, await response.clone().text()).toBeLessThan(300);
  return { headers: response.headers, body: response.status === 204 ? null : ((await response.json()) as Record<string, unknown>) };
};

describe.each(BACKENDS)('live changes in a browser on %s', (backend) => {
  let database: TestDatabase;
  let server: RunningServer;
  let browser: Browser;
  let other: Server | null = null;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    // The README's example runs from a page on another origin (README: CORS_ORIGINS='*').
    server = await startServer(database, { env: { CORS_ORIGINS: '*' } });
    browser = await launchBrowser();
  });

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => (other ? other.close(resolve) : resolve(null)));
    await server?.stop();
    await database?.drop();
  });

  it('shows a record created in another page in the browsable list, without a reload, through its EventSource', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(10_000);
    const watching: Page = await context.newPage();
    const foreign = watchRequests(watching, server.url);
    const streamed: string[] = [];
    watching.on('request', (request) => {
      if (request.headers().accept === 'text/event-stream') streamed.push(request.url());
    });
    await logIn(watching, server.url, ADMIN.username, ADMIN.password, '/api/v1/experiences/');
    const region = watching.locator('#resource-live');
    // The stream starts after the position the page was read at: nothing in between is missed.
    const stream = await region.getAttribute('data-stream');
    expect(stream).toMatch(/^\/api\/v1\/experiences\/\?since=\d+$/);
    await expect.poll(() => streamed).toEqual([`${server.url}${stream}`]);
    expect(await region.innerText()).not.toContain('Sunrise on the ridge');
    // Gone if the page were loaded again.
    await watching.evaluate(() => Object.assign(window, { notReloaded: true }));

    // Created through the form of a second page of the same browser.
    const writing = await context.newPage();
    await writing.goto(`${server.url}/api/v1/experiences/`);
    await writing.getByLabel(/^Title/).fill('Sunrise on the ridge');
    await writing.getByLabel(/^Like or dislike/).fill('Cold, then glorious.');
    await Promise.all([writing.waitForURL(/\/api\/v1\/experiences\/\d+\/$/), writing.getByRole('button', { name: 'Create experience' }).click()]);

    await watching.waitForFunction(() => document.getElementById('resource-live')?.textContent?.includes('Sunrise on the ridge'));
    // And one created by an API call.
    await send(server.url, 'POST', '/api/v1/experiences/', { title: 'Tea by the lake', q_like_dislike: 'Quiet.' });
    await watching.waitForFunction(() => document.getElementById('resource-live')?.textContent?.includes('Tea by the lake'));
    expect(await watching.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded)).toBe(true);
    expect(streamed).toHaveLength(1);
    expect(foreign).toEqual([]);
    await screenshot(watching, `live-list-${backend}`);
    await context.close();
  });

  it("runs the README's EventSource example as printed, from a page on another origin", async () => {
    const example = readmeExample();
    // The printed URL is the default address; the test's server listens elsewhere on 127.0.0.1.
    expect(example).toContain("new EventSource('http://127.0.0.1:8000/api/v1/experiences/')");
    const html = example.replace('http://127.0.0.1:8000', server.url);
    other = createServer((_request, response) => response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html));
    await new Promise<void>((resolve) => other!.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;

    const context = await browser.newContext({ viewport: { width: 800, height: 400 } });
    context.setDefaultTimeout(10_000);
    const page = await context.newPage();
    const opened = new Promise<void>((resolve) => page.on('response', (response) => response.url().startsWith(server.url) && resolve()));
    await page.goto(`${origin}/live.html`);
    await opened;

    const created = await send(server.url, 'POST', '/api/v1/experiences/', { title: 'Night hike', q_like_dislike: 'Stars.' });
    const url = String(created.body!.url);
    await send(server.url, 'PATCH', url, { title: 'Night hike, again' });
    await send(server.url, 'DELETE', url);
    const items = page.locator('#log li');
    await expect.poll(() => items.count()).toBe(3);
    const lines = await items.allInnerTexts();
    expect(lines.map((line) => line.replace(/^\d+ /, ''))).toEqual(['created: Night hike', 'updated: Night hike, again', 'deleted: Night hike, again']);
    // Each line starts with the change's position, in commit order.
    const positions = lines.map((line) => Number(/^(\d+) /.exec(line)?.[1]));
    expect(positions.every((position, index) => position > 0 && (index === 0 || position === positions[index - 1]! + 1))).toBe(true);
    await screenshot(page, `live-readme-example-${backend}`);
    await context.close();
  });
});
