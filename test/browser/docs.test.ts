import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, startServer, type RunningServer, type TestDatabase } from '../support/server.js';
import { launchBrowser, screenshot, SCREENSHOTS, watchRequests } from './browser.js';

// The docs page (`/api/v1/docs/`, API.md §5) in a real browser: a browsable page like the others,
// drawn in the shared layout with the one stylesheet, so the browsable pages' CSP must let every
// part of it load; it must not scroll sideways on a phone.

let database: TestDatabase;
let server: RunningServer;
let browser: Browser;

beforeAll(async () => {
  database = await createTestDatabase('sqlite');
  server = await startServer(database);
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await database?.drop();
});

/** Opens the docs page, collecting console errors and CSP violations as it loads. */
async function openDocs(viewport: { width: number; height: number }): Promise<{ page: Page; problems: string[]; foreign: string[] }> {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const problems: string[] = [];
  const foreign = watchRequests(page, server.url);
  page.on('console', (message) => {
    // The browser asks for /favicon.ico on its own, and restwire has none: not the page's doing.
    if (message.location().url.endsWith('/favicon.ico')) return;
    if (message.type() === 'error' || message.type() === 'warning') problems.push(`console ${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('response', (response) => {
    if (response.status() >= 400) problems.push(`${response.status()} ${response.url()}`);
  });
  await page.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (event) => console.error(`CSP violation: ${event.violatedDirective} ${event.blockedURI}`));
  });
  const response = await page.goto(`${server.url}/api/v1/docs/`);
  expect(response?.status()).toBe(200);
  await page.waitForLoadState('load');
  return { page, problems, foreign };
}

describe('browsable API: the docs page', () => {
  it('loads in the shared layout under the browsable CSP, with nothing blocked', async () => {
    const { page, problems, foreign } = await openDocs({ width: 1280, height: 900 });
    await screenshot(page, 'docs-page');
    // Viewport-sized shots too: the whole page is too tall to read as one image.
    await page.screenshot({ path: `${SCREENSHOTS}docs-page-top.png` });
    await page.locator('#schemas-Experience').scrollIntoViewIfNeeded();
    await page.screenshot({ path: `${SCREENSHOTS}docs-page-schema.png` });
    await page.locator('section[id^="path-api-v1-experiences-"]').first().scrollIntoViewIfNeeded();
    await page.screenshot({ path: `${SCREENSHOTS}docs-page-operation.png` });
    expect(problems).toEqual([]);
    expect(foreign).toEqual([]);
    // The one stylesheet applied: the layout's dark top bar, and the docs' boxed sections.
    expect(await page.locator('.topbar').evaluate((el) => getComputedStyle(el).backgroundColor)).toBe('rgb(31, 35, 40)');
    expect(await page.locator('#schemas-Problem').evaluate((el) => getComputedStyle(el).borderTopStyle)).toBe('solid');
    await expect(page.getByRole('heading', { level: 2, name: 'Authentication' }).isVisible()).resolves.toBe(true);
    // Anchors still lead to their sections.
    await page.locator('a[href="#schemas-Problem"]').first().click();
    expect(page.url()).toMatch(/#schemas-Problem$/);
    await page.context().close();
  });

  it('does not scroll sideways on a phone', async () => {
    const { page, problems } = await openDocs({ width: 390, height: 844 });
    await screenshot(page, 'docs-page-phone');
    await page.screenshot({ path: `${SCREENSHOTS}docs-page-phone-top.png` });
    expect(problems).toEqual([]);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await page.context().close();
  });
});
