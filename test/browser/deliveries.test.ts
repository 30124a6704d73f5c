import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { ADMIN, createTestDatabase, startServer, type RunningServer, type TestDatabase } from '../support/server.js';
import { launchBrowser, logIn, screenshot, watchRequests } from './browser.js';

// The webhooks pages and the deliveries dashboard in a real browser (issue 12 §4, §5): create a
// webhook for a local receiver through the form (secret shown once), see its ping delivered,
// redeliver it and see the new attempt appear without reloading; disable and re-enable it.

let database: TestDatabase;
let server: RunningServer;
let receiver: Receiver;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  database = await createTestDatabase('sqlite');
  receiver = await startReceiver();
  server = await startServer(database, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await receiver?.close();
  await database?.drop();
});

describe('browsable API: webhooks and deliveries', () => {
  it('creates a webhook, shows its ping, redelivers it and shows the new attempt', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(15_000);
    page = await context.newPage();
    const foreign = watchRequests(page, server.url);
    page.on('dialog', (dialog) => void dialog.accept());
    await logIn(page, server.url, ADMIN.username, ADMIN.password, '/api/v1/webhooks/');

    await page.getByLabel(/^Target url/).fill(receiver.url);
    await page.getByRole('group', { name: /^Events/ }).getByLabel('experience').check();
    await page.getByRole('button', { name: 'Add webhook' }).click();
    const secret = page.getByLabel('Webhook secret');
    await secret.waitFor();
    expect(await secret.inputValue()).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    await expect(page.getByRole('button', { name: 'Copy' }).isVisible()).resolves.toBe(true);
    await screenshot(page, 'webhooks-created-secret-once');

    await receiver.waitFor((received) => received.length >= 1);
    await page.getByRole('link', { name: 'Open the new webhook →' }).click();
    await page.waitForURL(/\/api\/v1\/webhooks\/\d+\/$/);
    // The ping's outcome is recorded by serve's dispatcher process a moment after the receiver
    // answered, and it changes the webhook (its ETag): the page's Disable form sends If-Match, so
    // it is loaded again once the outcome is in.
    await expect
      .poll(async () => {
        const response = await page.request.get(`${page.url()}deliveries/`, { headers: { accept: 'application/json' } });
        const { results } = (await response.json()) as { results: Array<{ status: string }> };
        return results.map((delivery) => delivery.status);
      })
      .toEqual(['delivered']);
    await page.reload();
    expect(await page.locator('dl.summary').innerText()).toContain(receiver.url);
    await screenshot(page, 'webhook-page');

    // Disable, then enable again.
    await Promise.all([page.waitForEvent('load'), page.getByRole('button', { name: 'Disable' }).click()]);
    expect(await page.locator('dl.summary').innerText()).toContain('Disabled');
    await Promise.all([page.waitForEvent('load'), page.getByRole('button', { name: 'Enable' }).click()]);
    expect(await page.locator('dl.summary').innerText()).toContain('Active');

    await page.getByRole('link', { name: 'Recent deliveries' }).click();
    await page.waitForURL(/\/deliveries\/$/);
    const rows = page.locator('#deliveries-live tbody tr');
    // The ping may still be pending when the page loads; the dashboard refreshes itself.
    await page.locator('#deliveries-live tbody tr[data-status="delivered"]').first().waitFor();
    expect(await rows.count()).toBe(1);
    expect(await rows.first().innerText()).toContain('ping');
    expect(await rows.first().innerText()).toContain('204');

    // The delivery's request and response.
    await rows.first().getByRole('link').first().click();
    await page.waitForURL(/\/deliveries\/\d+\/$/);
    expect(await page.getByRole('table', { name: 'Headers' }).first().innerText()).toContain('x-service-event');
    await screenshot(page, 'delivery-detail');

    // Redeliver: back on the dashboard the new attempt appears (pending, then delivered) by itself.
    await Promise.all([page.waitForURL(/\/deliveries\/$/), page.getByRole('button', { name: 'Redeliver' }).click()]);
    await receiver.waitFor((received) => received.length >= 2);
    await page.waitForFunction(() => document.querySelectorAll('#deliveries-live tbody tr[data-status="delivered"]').length === 2, undefined, { timeout: 15_000 });
    expect(await rows.first().innerText()).toContain('redelivery');
    expect(receiver.received[1]!.headers['x-service-delivery']).toBe(receiver.received[0]!.headers['x-service-delivery']);

    // Filter by status.
    await page.getByRole('link', { name: 'failed', exact: true }).click();
    await page.waitForURL(/status=failed/);
    expect(await page.locator('#deliveries-live').innerText()).toContain('No deliveries with status failed');
    await page.getByRole('link', { name: 'all', exact: true }).click();
    await page.waitForURL(/\/deliveries\/$/);
    await screenshot(page, 'deliveries-dashboard');
    expect(foreign).toEqual([]);
    await context.close();
  });
});
