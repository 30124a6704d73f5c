import { afterAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from '../test/support/project.js';
import { createTestDatabase, type RunningServer, type TestDatabase } from '../test/support/server.js';
import { jsonRequest, report, sampleRss, tearDown } from './support.js';

/**
 * Drill 8 (issue 22, item 5): the browsable pages stay bounded whatever a record holds. A user's
 * collection with a `json` and a `text` field gets 20 records whose `json` is nested 2,600 deep
 * and 100 whose `text` is 100,000 characters. Their HTML list pages are fetched one at a time
 * (size, time, the server's peak RSS), then the long page 20 times at once, anonymously. Each page answers 200, is
 * under 2 MB and says it was cut; the JSON list keeps every byte.
 */
const HEAVY = `import { defineResource, field } from 'restwire';

export default defineResource({
  name: 'heavy',
  fields: {
    kind: field.choice(['deep', 'long']),
    data: field.json({ maxBytes: 200_000, required: false }),
    body: field.text({ maxLength: 100_000, required: false }),
  },
  filters: { kind: ['exact'] },
});
`;
const DEEP = 2_600;
const LONG = 100_000;
const PAGE_BOUND = 2 * 1024 * 1024;

/** `{"a":{"a":…{"a":1}…}}`, `levels` objects deep. */
export function nested(levels: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
}

describe('bounded browsable pages', () => {
  let database: TestDatabase | undefined;
  let project: Project | undefined;
  let server: RunningServer | undefined;
  afterAll(async () => {
    await tearDown({ server, database });
    project?.cleanup();
  });

  it('renders 20 records nested 2,600 deep and 100 records of 100,000 characters as pages under 2 MB', async () => {
    database = await createTestDatabase('sqlite');
    project = createProject(database, { 'heavy.ts': HEAVY });
    await runOk(project, ['makemigrations']);
    server = await project.start({ env: { DISPATCHER_IN_SERVE: 'false', LOG_LEVEL: 'warn' }, ready: /listening at (http:\/\/127\.0\.0\.1:\d+)/ });
    const running = server;
    const pid = running.process.pid!;
    const post = async (body: unknown) => expect((await fetch(`${running.url}/api/v1/heavy/`, jsonRequest('POST', body))).status).toBe(201);
    const deep = nested(DEEP);
    for (let i = 0; i < 20; i++) await post({ kind: 'deep', data: deep });
    const text = 'x'.repeat(LONG - 6) + '<&">\'!';
    for (let i = 0; i < 100; i++) await post({ kind: 'long', body: text });

    const page = async (path: string) => {
      const started = performance.now();
      const response = await fetch(`${running.url}${path}`, { headers: { accept: 'text/html' } });
      const body = await response.text();
      return { status: response.status, bytes: Buffer.byteLength(body), ms: Math.round(performance.now() - started), body };
    };
    const measure = async (path: string) => {
      const rss = sampleRss(pid, 20);
      const result = await page(path);
      return { ...result, rss: rss.stop() };
    };

    const deepPage = await measure('/api/v1/heavy/?kind=deep&limit=20');
    const longPage = await measure('/api/v1/heavy/?kind=long&limit=100');
    const recordPage = await measure('/api/v1/heavy/1/');

    const rss = sampleRss(pid, 20);
    const started = performance.now();
    const concurrent = await Promise.all(Array.from({ length: 20 }, () => page('/api/v1/heavy/?kind=long&limit=100')));
    const concurrentMs = Math.round(performance.now() - started);
    const concurrentRss = rss.stop();

    // The JSON representation is untouched: every level, every character.
    const list = async (kind: string) =>
      ((await (await fetch(`${running.url}/api/v1/heavy/?kind=${kind}&limit=100`)).json()) as { results: Array<{ body: string | null; data: unknown }> }).results;
    const longRecords = await list('long');
    const deepRecords = await list('deep');

    report('page-size', {
      deepListBytes: deepPage.bytes,
      deepListMs: deepPage.ms,
      deepListPeakRssMiB: deepPage.rss.maxMiB,
      longListBytes: longPage.bytes,
      longListMs: longPage.ms,
      longListPeakRssMiB: longPage.rss.maxMiB,
      deepRecordBytes: recordPage.bytes,
      deepRecordMs: recordPage.ms,
      concurrent: concurrent.length,
      concurrentStatuses: [...new Set(concurrent.map((c) => c.status))].join(','),
      concurrentMaxBytes: Math.max(...concurrent.map((c) => c.bytes)),
      concurrentMs,
      concurrentStartRssMiB: concurrentRss.startMiB,
      concurrentPeakRssMiB: concurrentRss.maxMiB,
    });

    for (const result of [deepPage, longPage, recordPage, ...concurrent]) {
      expect(result.status).toBe(200);
      expect(result.bytes).toBeLessThan(PAGE_BOUND);
      expect(result.body).toContain('data-cut');
    }
    expect(deepPage.ms).toBeLessThan(3_000);
    expect(concurrentRss.maxMiB).toBeLessThan(1_024);
    expect(longRecords).toHaveLength(100);
    expect(longRecords.every((r) => r.body === text)).toBe(true);
    expect(deepRecords).toHaveLength(20);
    expect(JSON.stringify(deepRecords[0]?.data)).toBe(JSON.stringify(deep));
  });
});
