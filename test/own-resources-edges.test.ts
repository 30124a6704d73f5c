import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { BACKENDS, adminAuth, createTestDatabase, type RunningServer, type TestDatabase } from './support/server.js';

// Declarations the review found could hang or fail the server (issue 10): a cascade that comes
// back to where it started, an anonymous write with events, an ordering named like an Object
// method. Each must answer a clear status and change nothing it should not.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const PARTS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'parts',
  fields: {
    label: field.string({ maxLength: 40 }),
    parent: field.reference('parts', { nullable: true, required: false, onDelete: 'cascade' }),
  },
  orderings: ['label'],
});
`;
const GUESTBOOK = `import { defineResource, field, permission } from 'restwire';
export default defineResource({
  name: 'entries',
  fields: { message: field.text({ maxLength: 200 }) },
  permission: permission.allowAny,
  event: 'entry',
});
`;

describe.each(BACKENDS)('edge cases of declared collections on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  const api = (path: string, init: RequestInit = {}) => fetch(`${server.url}${path}`, init);
  const send = async (method: string, path: string, body?: unknown, auth: string | null = adminAuth) => {
    const response = await api(path, {
      method,
      headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: response.status === 204 ? null : ((await response.json()) as Json) };
  };

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'parts.ts': PARTS, 'entries.ts': GUESTBOOK });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    // Deliveries go nowhere but a closed loopback port; the dispatcher stays off.
    server = await project.start({ env: { WEBHOOK_ALLOW_PRIVATE: 'true', DISPATCHER_IN_SERVE: 'false' } });
  });
  afterAll(async () => {
    await server?.stop();
    project?.cleanup();
    await database?.drop();
  });

  it('refuses a delete whose cascade comes back to the record (a cycle), changing nothing', async () => {
    const one = (await send('POST', '/api/v1/parts/', { label: 'one' })).body!;
    const two = (await send('POST', '/api/v1/parts/', { label: 'two', parent: one.url })).body!;
    expect((await send('PATCH', one.url, { parent: two.url })).status).toBe(200);
    const refused = await send('DELETE', one.url);
    expect(refused.status).toBe(409);
    expect(refused.body!.detail).toMatch(/refer to each other/);
    expect((await send('GET', one.url)).status).toBe(200);
    expect((await send('GET', two.url)).status).toBe(200);
    // A tree (no cycle) cascades: clearing the loop lets the root take its child with it.
    expect((await send('PATCH', one.url, { parent: null })).status).toBe(200);
    expect((await send('DELETE', one.url)).status).toBe(204);
    expect((await send('GET', two.url)).status).toBe(404);
  });

  it('lets an anonymous caller write where the declaration allows it, and raises its event', async () => {
    const hook = await send('POST', '/api/v1/webhooks/', { target_url: 'http://127.0.0.1:9/hook', events: ['entry'] });
    expect(hook.status).toBe(201);
    const created = await send('POST', '/api/v1/entries/', { message: 'hello' }, null);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ message: 'hello' });
    const deliveries = (await send('GET', `/api/v1/webhooks/${hook.body!.id}/deliveries/`)).body!.results as Json[];
    const event = deliveries.find((delivery) => delivery.event === 'entry')!;
    const detail = (await send('GET', event.url)).body!;
    expect(detail.request.payload).toMatchObject({ action: 'created', sender: { login: 'anonymous', id: 0 } });
  });

  it('answers an ordering named like an Object method with a 400', async () => {
    for (const ordering of ['constructor', 'toString', '__proto__']) {
      expect((await send('GET', `/api/v1/parts/?ordering=${ordering}`)).status, ordering).toBe(400);
    }
  });
});
