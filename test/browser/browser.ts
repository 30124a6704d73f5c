import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

/**
 * Debian's Chromium driven by playwright-core (issue 12). `npx playwright install` cannot run
 * here, so the system browser is used; `.ci/run` installs it. A missing browser fails the
 * suite: it never skips.
 */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`Chromium is required for the browser tests and is missing at ${CHROMIUM} (apt-get install -y chromium)`);
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS });
}

export const SCREENSHOTS = new URL('../../test-output/browser/', import.meta.url).pathname;

/** Saves a full-page screenshot as test-output/browser/<name>.png and returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const path = join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** Every request a page makes, so a test can assert that none leaves restwire's origin. */
export function watchRequests(page: Page, origin: string): string[] {
  const foreign: string[] = [];
  page.on('request', (request) => {
    const url = request.url();
    if (!url.startsWith(origin) && !url.startsWith('data:')) foreign.push(url);
  });
  return foreign;
}

/** Logs in through the login page. */
export async function logIn(page: Page, base: string, username: string, password: string, next = '/api/v1/'): Promise<void> {
  await page.goto(`${base}/api/v1/auth/login/?next=${encodeURIComponent(next)}`);
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await Promise.all([page.waitForURL(`${base}${next}`), page.getByRole('button', { name: 'Log in' }).click()]);
}
