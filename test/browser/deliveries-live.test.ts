import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { ADMIN, adminAuth, BACKENDS, createTestDatabase, startServer, type RunningServer, type TestDatabase } from '../support/server.js';
import { launchBrowser, logIn, screenshot, watchRequests } from './browser.js';

// The deliveries dashboard follows its own event stream (STREAMS.md §5, issue 23): a delivery
// created and attempted while the page is open appears, then changes status, without a reload and
// without polling: the page's one EventSource is what tells it.

const send = async (base: string, method: string, path: string, body?: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: adminAuth, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  expect(response.status, text).toBeLessThan(300);
  return JSON.parse(text) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
};

describe.each(BACKENDS)('the deliveries dashboard follows its stream on %s', (backend) => {
  let database: TestDatabase;
  let server: RunningServer;
  let receiver: Receiver;
  let browser: Browser;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    receiver = await startReceiver();
    server = await startServer(database, { env: { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: '1,1' } });
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await receiver?.close();
    await database?.drop();
  });

  it('shows a new delivery and each of its attempts without a reload, through its EventSource', async () => {
    const hook = await send(server.url, 'POST', '/api/v1/webhooks/', { target_url: receiver.url, events: ['experience'] });
    const path = `/api/v1/webhooks/${hook.id}/deliveries/`;
    await receiver.waitFor((received) => received.length >= 1);

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(15_000);
    const page = await context.newPage();
    const foreign = watchRequests(page, server.url);
    const streamed: string[] = [];
    const redraws: string[] = [];
    page.on('request', (request) => {
      const accept = request.headers().accept ?? '';
      if (accept === 'text/event-stream') streamed.push(request.url());
      else if (request.url() === `${server.url}${path}` && request.resourceType() === 'fetch') redraws.push(accept);
    });
    await logIn(page, server.url, ADMIN.username, ADMIN.password, path);
    const region = page.locator('#deliveries-live');
    // The stream starts after the position the page was read at: nothing in between is missed.
    const stream = await region.getAttribute('data-stream');
    expect(stream).toMatch(new RegExp(`^${path}\\?since=\\d+$`));
    expect(await region.getAttribute('data-refresh')).toBeNull();
    await expect.poll(() => streamed).toEqual([`${server.url}${stream}`]);
    // The ping, delivered (it may have been pending when the page was drawn: the stream tells).
    await page.locator('#deliveries-live tbody tr[data-status="delivered"]').first().waitFor();
    await page.evaluate(() => Object.assign(window, { notReloaded: true }));

    // A failed attempt, then (a second later) a successful one: the page shows each.
    receiver.respond([500]);
    await send(server.url, 'POST', '/api/v1/experiences/', { title: 'Dawn swim', q_like_dislike: 'Cold.' });
    await page.locator('#deliveries-live tbody tr[data-status="retrying"]').waitFor();
    await screenshot(page, 'deliveries-dashboard-retrying');
    await page.waitForFunction(() => document.querySelectorAll('#deliveries-live tbody tr[data-status="delivered"]').length === 2);
    const rows = page.locator('#deliveries-live tbody tr');
    expect(await rows.count()).toBe(2);
    expect(await rows.first().innerText()).toContain('experience.created');
    expect(await rows.first().innerText()).toContain('204');
    await screenshot(page, 'deliveries-dashboard-live');

    expect(await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded)).toBe(true);
    // One stream for the page's whole life; every redraw asks for the page's HTML, no JSON polls.
    expect(streamed).toEqual([`${server.url}${stream}`]);
    expect(redraws.length).toBeGreaterThan(0);
    expect(redraws.every((accept) => accept === 'text/html')).toBe(true);
    expect(foreign).toEqual([]);
    await context.close();
  });
});
