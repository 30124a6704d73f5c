import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, createTestDatabase, createUser, startServer, type RunningServer, type TestDatabase } from '../support/server.js';
import { launchBrowser, logIn, screenshot } from './browser.js';

// A collection a user declares gets its pages with no extra work (issue 12): the
// examples/resumes declarations, with a choice field, dates, a decimal, a boolean, JSON and a
// list of references, through the generated forms: create, list, owner link, edit, delete.

let database: TestDatabase;
let server: RunningServer;
let browser: Browser;

beforeAll(async () => {
  database = await createTestDatabase('sqlite');
  server = await startServer(database, {
    args: ['serve', '--resources', 'examples/resumes/resources', '--migrations', 'examples/resumes/migrations'],
  });
  await createUser(database, 'carol', 'carol-password-1');
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await database?.drop();
});

async function newPage(): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  context.setDefaultTimeout(10_000);
  const page = await context.newPage();
  page.on('dialog', (dialog) => void dialog.accept());
  return page;
}

describe('browsable API: a declared collection with a choice field and references', () => {
  it('creates, lists, follows the owner link, edits and deletes through generated forms', async () => {
    const page = await newPage();
    await logIn(page, server.url, ADMIN.username, ADMIN.password, '/api/v1/education/');

    // Every field type of the declaration has its control, each found by its label.
    await page.getByLabel(/^Institution/).fill('Open University');
    expect(await page.getByLabel(/^Degree/).evaluate((el) => el.tagName)).toBe('SELECT');
    await page.getByLabel(/^Degree/).selectOption('master');
    expect(await page.getByLabel(/^Started on/).getAttribute('type')).toBe('date');
    await page.getByLabel(/^Started on/).fill('2015-09-01');
    expect(await page.getByLabel(/^Grade/).getAttribute('type')).toBe('number');
    await page.getByLabel(/^Grade/).fill('3.85');
    await Promise.all([page.waitForURL(/\/api\/v1\/education\/\d+\/$/), page.getByRole('button', { name: 'Create education' }).click()]);
    const education = new URL(page.url()).pathname;
    expect(await page.locator('pre.json').innerText()).toContain('"degree": "master"');

    await page.goto(`${server.url}/api/v1/resumes/`);
    await page.getByLabel(/^Full name/).fill('Ada Lovelace');
    await page.getByLabel(/^Email/).fill('not-an-email');
    expect(await page.getByLabel(/^Years of experience/).getAttribute('max')).toBe('80');
    await page.getByLabel(/^Years of experience/).fill('12');
    await page.getByLabel(/^Open to work/).check();
    expect(await page.getByLabel(/^Available from/).getAttribute('type')).toBe('datetime-local');
    await page.getByLabel(/^Skills/).fill('["analysis", "engines"]');
    // The references list is filled from the target collection's first page.
    const reference = page.getByRole('group', { name: /^Education/ }).getByLabel(/Open University/);
    await reference.check();
    await page.getByRole('button', { name: 'Create resume' }).click();
    const emailError = page.locator('[data-error-for="email"]');
    await emailError.waitFor();
    expect(await emailError.innerText()).toBe('Enter a valid email address.');
    await screenshot(page, 'resumes-create-error');

    await page.getByLabel(/^Email/).fill('ada@example.com');
    await Promise.all([page.waitForURL(/\/api\/v1\/resumes\/\d+\/$/), page.getByRole('button', { name: 'Create resume' }).click()]);
    const resume = page.url();
    const json = await page.locator('pre.json').innerText();
    expect(json).toContain(education);
    expect(json).toContain('"open_to_work": true');

    await page.goto(`${server.url}/api/v1/resumes/`);
    expect(await page.locator('pre.json').innerText()).toContain('Ada Lovelace');
    await screenshot(page, 'resumes-list');

    await page.goto(resume);
    await Promise.all([page.waitForURL(/\/api\/v1\/users\/1\/$/), page.locator('pre.json a', { hasText: '/api/v1/users/1/' }).first().click()]);
    expect(await page.locator('pre.json').innerText()).toContain(new URL(resume).pathname);

    await page.goto(resume);
    expect(await page.getByRole('group', { name: /^Education/ }).getByLabel(/Open University/).isChecked()).toBe(true);
    await page.getByLabel(/^Years of experience/).fill('13');
    await Promise.all([page.waitForEvent('load'), page.getByRole('button', { name: 'Save changed fields (PATCH)' }).click()]);
    expect(await page.locator('pre.json').innerText()).toContain('"years_of_experience": 13');
    await screenshot(page, 'resumes-record-owner');

    await Promise.all([page.waitForURL(`${server.url}/api/v1/resumes/`), page.getByRole('button', { name: 'Delete resume' }).click()]);
    expect((await fetch(resume)).status).toBe(404);
  });

  it('shows another user the record read-only', async () => {
    const page = await newPage();
    await logIn(page, server.url, 'carol', 'carol-password-1', '/api/v1/education/');
    await page.locator('pre.json a', { hasText: /\/api\/v1\/education\/\d+\/$/ }).first().click();
    await page.waitForURL(/\/api\/v1\/education\/\d+\/$/);
    expect(await page.locator('[data-read-only]').isVisible()).toBe(true);
    expect(await page.getByRole('button', { name: /Save|Delete/ }).count()).toBe(0);
    await screenshot(page, 'resumes-other-user');
  });
});
