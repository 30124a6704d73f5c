import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { BACKENDS, adminAuth, createTestDatabase, type RunningServer, type TestDatabase } from './support/server.js';

// Issue 22 item 5: a browsable page is bounded whatever its records hold. A `json` value nested
// 2,600 deep and texts of 100,000 characters once made pages of hundreds of megabytes; now the
// page is cut, says so and where to get it whole, and the JSON representation is unchanged.

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
const PAGE_BOUND = 2 * 1024 * 1024;
const decodeEntities = (text: string) => text.replace(/&#(\d+);/g, (_m, code: string) => String.fromCharCode(Number(code))).replace(/&amp;/g, '&');

const nested = (levels: number): unknown => {
  let value: unknown = 'bottom';
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
};

describe.each(BACKENDS)('bounded browsable pages on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  const deep = nested(2_600);
  const text = `${'<"&'.repeat(33_333)}!`;
  const html = async (path: string, auth?: string) => {
    const response = await fetch(`${server.url}${path}`, { headers: { accept: 'text/html', ...(auth ? { authorization: auth } : {}) } });
    return { status: response.status, page: await response.text() };
  };
  const json = async (path: string) => (await (await fetch(`${server.url}${path}`)).json()) as { results: Array<Record<string, unknown>> };

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'heavy.ts': HEAVY });
    await runOk(project, ['makemigrations']);
    server = await project.start({ env: { DISPATCHER_IN_SERVE: 'false' } });
    const post = async (body: unknown) => {
      const response = await fetch(`${server.url}/api/v1/heavy/`, { method: 'POST', headers: { authorization: adminAuth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect(response.status, await response.clone().text()).toBe(201);
    };
    for (let i = 0; i < 20; i++) await post({ kind: 'deep', data: deep });
    for (let i = 0; i < 100; i++) await post({ kind: 'long', body: text });
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
    project?.cleanup();
  });

  it.each([
    ['20 records nested 2,600 deep', '/api/v1/heavy/?kind=deep&limit=20', 'nested deeper than'],
    ['100 records of 100,000 characters', '/api/v1/heavy/?kind=long&limit=100', 'strings longer than'],
  ])('cuts the list page of %s, says so, and links the whole JSON', async (_name, path, reason) => {
    const { status, page } = await html(path);
    expect(status).toBe(200);
    expect(page.length).toBeLessThan(PAGE_BOUND);
    expect(page).toContain('Shown in part.');
    expect(page).toContain(reason);
    const link = /<a class="btn" href="([^"]+)" data-json-download>Download the full JSON<\/a>/.exec(page);
    expect(decodeEntities(link?.[1] ?? '')).toBe(path);
    expect(page).toContain('<code>Accept: application/json</code>');
  });

  it('cuts a deep record page and offers its long value read-only in the edit form, PATCH only', async () => {
    const deepPage = await html('/api/v1/heavy/1/', adminAuth);
    expect(deepPage.status).toBe(200);
    expect(deepPage.page.length).toBeLessThan(PAGE_BOUND);
    expect(deepPage.page).toContain('nested deeper than');

    const longId = (await json('/api/v1/heavy/?kind=long&limit=1')).results[0]!.id as number;
    const longPage = await html(`/api/v1/heavy/${longId}/`, adminAuth);
    expect(longPage.status).toBe(200);
    expect(longPage.page.length).toBeLessThan(PAGE_BOUND);
    expect(longPage.page).toContain('strings longer than');
    expect(longPage.page).toMatch(/data-field="body" data-type="string" data-too-long>/);
    expect(longPage.page).toContain('This value is 100,000 characters, too long to edit here');
    expect(longPage.page).not.toContain('value="PUT"');
    expect(longPage.page).toContain('value="PATCH"');
  });

  it('leaves the JSON representation whole', async () => {
    const deepRecords = (await json('/api/v1/heavy/?kind=deep&limit=20')).results;
    expect(deepRecords).toHaveLength(20);
    // Compared as text: a deep-equality walk 2,600 levels down overflows vitest's stack.
    for (const record of deepRecords) expect(JSON.stringify(record.data)).toBe(JSON.stringify(deep));
    const longRecords = (await json('/api/v1/heavy/?kind=long&limit=100')).results;
    expect(longRecords).toHaveLength(100);
    for (const record of longRecords) expect(record.body).toBe(text);
  });

  it('shows a small record whole, with no note and both save buttons', async () => {
    const response = await fetch(`${server.url}/api/v1/heavy/`, { method: 'POST', headers: { authorization: adminAuth, 'content-type': 'application/json' }, body: JSON.stringify({ kind: 'long', body: 'short', data: { a: [1] } }) });
    const { url } = (await response.json()) as { url: string };
    const { page } = await html(url, adminAuth);
    expect(page).not.toContain('data-cut');
    expect(page).toContain('&quot;body&quot;: &quot;short&quot;');
    expect(page).toContain('value="PUT"');
  });
});
