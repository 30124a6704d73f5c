import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, adminAuth, createTestDatabase, createUser, startServer, type RunningServer, type TestDatabase } from '../support/server.js';
import { launchBrowser, logIn, screenshot, watchRequests } from './browser.js';

// The browsable API in a real browser (issue 12, "Tests that must exist"), on the seed's
// experiences: log in, create through the form, list, owner link, edit, delete; another user's
// record is read-only; a stale edit says reload; script in a title is text; phones do not scroll
// sideways; a failed login says so.

let database: TestDatabase;
let server: RunningServer;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let foreign: string[];

beforeAll(async () => {
  database = await createTestDatabase('sqlite');
  server = await startServer(database);
  await createUser(database, 'bob', 'bob-password-1');
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await database?.drop();
});

async function freshPage(viewport = { width: 1280, height: 900 }): Promise<Page> {
  await context?.close();
  context = await browser.newContext({ viewport });
  context.setDefaultTimeout(8000);
  page = await context.newPage();
  foreign = watchRequests(page, server.url);
  page.on('dialog', (dialog) => {
    if (dialog.type() === 'confirm') void dialog.accept();
    else throw new Error(`unexpected ${dialog.type()}: ${dialog.message()}`);
  });
  return page;
}

async function createExperience(title: string, body = 'liked it'): Promise<string> {
  const response = await fetch(`${server.url}/api/v1/experiences/`, {
    method: 'POST',
    headers: { authorization: adminAuth, 'content-type': 'application/json' },
    body: JSON.stringify({ title, q_like_dislike: body }),
  });
  expect(response.status).toBe(201);
  return ((await response.json()) as { url: string }).url;
}

describe('browsable API: experiences', () => {
  it('logs in, creates through the form, lists, follows the owner link, edits and deletes', async () => {
    await freshPage();
    await logIn(page, server.url, ADMIN.username, ADMIN.password, '/api/v1/experiences/');
    expect(await page.locator('.whoami').innerText()).toContain(ADMIN.username);

    // A validation error appears beside its field.
    await page.getByLabel(/^Title/).fill('   ');
    await page.getByLabel(/^Like or dislike/).fill('x');
    await page.getByRole('button', { name: 'Create experience' }).click();
    const titleError = page.locator('[data-error-for="title"]');
    await titleError.waitFor();
    expect(await titleError.innerText()).toBe('This field is required.');
    await screenshot(page, 'experiences-validation-error');

    await page.getByLabel(/^Title/).fill('Hiking the ridge');
    await page.getByLabel(/^Like or dislike/).fill('Loved the view.');
    await Promise.all([page.waitForURL(/\/api\/v1\/experiences\/\d+\/$/), page.getByRole('button', { name: 'Create experience' }).click()]);
    const recordUrl = page.url();
    expect(await page.locator('pre.json').innerText()).toContain('Hiking the ridge');

    // In the list, with the rate-limit headers shown.
    await page.goto(`${server.url}/api/v1/experiences/`);
    expect(await page.locator('pre.json').innerText()).toContain('Hiking the ridge');
    expect(await page.locator('pre.response-head').innerText()).toMatch(/X-Rate-Limit-Remaining: \d+/);
    expect(await page.getByRole('list', { name: 'Allowed methods' }).innerText()).toContain('POST');
    await screenshot(page, 'experiences-list');

    // The owner link leads to the user.
    await page.goto(recordUrl);
    await Promise.all([page.waitForURL(/\/api\/v1\/users\/1\/$/), page.locator('pre.json a', { hasText: '/api/v1/users/1/' }).first().click()]);
    expect(await page.locator('pre.json').innerText()).toContain(`"username": "${ADMIN.username}"`);

    // Edit (PUT) and see the change.
    await page.goto(recordUrl);
    await page.getByLabel(/^Title/).fill('Hiking the north ridge');
    await Promise.all([page.waitForEvent('load'), page.getByRole('button', { name: 'Save (PUT)' }).click()]);
    expect(await page.locator('pre.json').innerText()).toContain('Hiking the north ridge');
    // PATCH sends only what changed.
    await page.getByLabel(/^Like or dislike/).fill('Loved it, again.');
    await Promise.all([page.waitForEvent('load'), page.getByRole('button', { name: 'Save changed fields (PATCH)' }).click()]);
    expect(await page.locator('pre.json').innerText()).toContain('Loved it, again.');
    await screenshot(page, 'experiences-record-owner');

    // Delete, back to the list.
    await Promise.all([page.waitForURL(`${server.url}/api/v1/experiences/`), page.getByRole('button', { name: 'Delete experience' }).click()]);
    expect((await fetch(`${server.url}${new URL(recordUrl).pathname}`)).status).toBe(404);
    expect(foreign).toEqual([]);
  });

  it('shows another user no edit or delete button', async () => {
    const path = await createExperience('Admin only');
    await freshPage();
    await logIn(page, server.url, 'bob', 'bob-password-1', path);
    expect(await page.locator('[data-read-only]').innerText()).toContain('Only its owner can edit or delete it');
    expect(await page.getByRole('button', { name: /Save|Delete/ }).count()).toBe(0);
    await screenshot(page, 'experiences-record-other-user');
  });

  it('tells the user to reload when the record changed meanwhile (412)', async () => {
    const path = await createExperience('Original');
    await freshPage();
    await logIn(page, server.url, ADMIN.username, ADMIN.password, path);
    const changed = await fetch(`${server.url}${path}`, {
      method: 'PATCH',
      headers: { authorization: adminAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'Changed elsewhere' }),
    });
    expect(changed.status).toBe(200);
    await page.getByLabel(/^Title/).fill('My stale edit');
    await page.getByRole('button', { name: 'Save (PUT)' }).click();
    const error = page.locator('#edit [data-form-error]');
    await error.waitFor();
    expect(await error.innerText()).toContain('Reload the page');
    await screenshot(page, 'experiences-412');
  });

  it('renders a script in a title as text', async () => {
    const path = await createExperience('<script>alert(1)</script>', '<img src=x onerror=alert(2)>');
    await freshPage();
    await page.goto(`${server.url}${path}`);
    const body = await page.locator('pre.json').innerText();
    expect(body).toContain('<script>alert(1)</script>');
    expect(await page.locator('main script, main img').count()).toBe(0);
    const response = await page.goto(`${server.url}${path}`);
    expect(response!.headers()['content-security-policy']).toContain("script-src 'self'");
    await screenshot(page, 'experiences-xss-as-text');
  });

  it('says a login failed without saying which part', async () => {
    await freshPage();
    await page.goto(`${server.url}/api/v1/auth/login/`);
    await page.getByLabel('Username').fill('nobody');
    await page.getByLabel('Password').fill('wrong-password');
    await page.getByRole('button', { name: 'Log in' }).click();
    const error = page.locator('[data-form-error]');
    await error.waitFor();
    expect(await error.innerText()).toBe('Invalid username or password.');
    await screenshot(page, 'login-failed');
  });

  it('shows the login throttle as a message', async () => {
    // API.md §6: more than 10 failures for one username in 15 minutes answer 429.
    for (let i = 0; i < 11; i++) {
      await fetch(`${server.url}/api/v1/auth/session/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'bob', password: `wrong-${i}` }),
      });
    }
    await freshPage();
    await page.goto(`${server.url}/api/v1/auth/login/`);
    await page.getByLabel('Username').fill('bob');
    await page.getByLabel('Password').fill('bob-password-1');
    await page.getByRole('button', { name: 'Log in' }).click();
    const error = page.locator('[data-form-error]');
    await error.waitFor();
    expect(await error.innerText()).toMatch(/^Too many failed logins\. Try again in \d+ seconds\.$/);
    await screenshot(page, 'login-throttled');
  });

  it('has no horizontal scroll at phone width', async () => {
    await createExperience('A rather long title that should wrap nicely on a small phone screen without scrolling');
    await freshPage({ width: 375, height: 740 });
    await logIn(page, server.url, ADMIN.username, ADMIN.password, '/api/v1/experiences/');
    for (const path of ['/api/v1/experiences/', '/api/v1/', '/api/v1/webhooks/', '/api/v1/auth/login/']) {
      await page.goto(`${server.url}${path}`);
      const [scrollWidth, clientWidth] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
      expect(scrollWidth, path).toBeLessThanOrEqual(clientWidth);
    }
    await page.goto(`${server.url}/api/v1/experiences/`);
    await screenshot(page, 'experiences-phone');
  });
});
