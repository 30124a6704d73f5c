import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from '../support/project.js';
import { adminAuth, createTestDatabase, type RunningServer, type TestDatabase } from '../support/server.js';
import { launchBrowser, screenshot, watchRequests } from './browser.js';

// Issue 22 item 5 in a browser: a list of long records is shown in part, the page says so, and
// "Download the full JSON" saves the whole JSON representation.

const NOTES = `import { defineResource, field } from 'restwire';

export default defineResource({
  name: 'notes',
  fields: { body: field.text({ maxLength: 100_000 }), data: field.json({ required: false }) },
});
`;

let database: TestDatabase;
let project: Project;
let server: RunningServer;
let browser: Browser;
const text = 'lorem ipsum '.repeat(8_000);

beforeAll(async () => {
  database = await createTestDatabase('sqlite');
  project = createProject(database, { 'notes.ts': NOTES });
  await runOk(project, ['makemigrations']);
  server = await project.start({ env: { DISPATCHER_IN_SERVE: 'false' } });
  let deep: unknown = 'bottom';
  for (let i = 0; i < 100; i++) deep = { level: deep };
  for (let i = 0; i < 3; i++) {
    const response = await fetch(`${server.url}/api/v1/notes/`, {
      method: 'POST',
      headers: { authorization: adminAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ body: text, data: deep }),
    });
    expect(response.status).toBe(201);
  }
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await database?.drop();
  project?.cleanup();
});

describe('browsable API: a page too large to show whole', () => {
  it('says it is shown in part and downloads the whole JSON', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    const page = await context.newPage();
    const foreign = watchRequests(page, server.url);
    await page.goto(`${server.url}/api/v1/notes/`);
    const note = page.getByRole('note');
    await expect(note.innerText()).resolves.toContain('Shown in part.');
    await expect(note.innerText()).resolves.toContain('strings longer than 2,000 characters are cut');
    await expect(note.innerText()).resolves.toContain('values nested deeper than 20 levels are folded');
    await screenshot(page, 'page-size-cut-list');

    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download the full JSON' }).click()]);
    const saved = JSON.parse(await (await download.createReadStream()).toArray().then((chunks) => Buffer.concat(chunks).toString('utf8'))) as {
      results: Array<{ body: string }>;
    };
    expect(saved.results).toHaveLength(3);
    expect(saved.results.every((record) => record.body === text.trim())).toBe(true);
    expect(foreign).toEqual([]);
    await context.close();
  });
});
