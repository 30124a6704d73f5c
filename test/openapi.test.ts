import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import openapiTS from 'openapi-typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from './support/receiver.js';
import { adminAuth, createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/** The parts of the document these tests read. */
interface Doc {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, any>>; // eslint-disable-line @typescript-eslint/no-explicit-any -- walked by key in assertions
  components: {
    schemas: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    responses: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    headers: Record<string, unknown>;
    parameters: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    securitySchemes: Record<string, Record<string, unknown>>;
  };
  security: Array<Record<string, string[]>>;
  webhooks: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

// 422: an Idempotency-Key used with another request (REQUESTS.md §1).
const ERROR_STATUSES = ['400', '401', '403', '404', '405', '406', '409', '412', '413', '415', '422', '429'];
const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

// OpenAPI's storage is sqlite-or-postgres agnostic: the document comes from declarations and views.
describe('OpenAPI document and docs page', () => {
  let database: TestDatabase;
  let server: RunningServer;
  let doc: Doc;
  let etag: string;
  const api = (path: string, init: RequestInit = {}) => fetch(`${server.url}${path}`, { redirect: 'manual', ...init });

  /** A JSON Schema validator for one component schema, resolving `#/components/...` refs in the document. */
  let conforms: (schema: string) => ValidateFunction;

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    server = await startServer(database, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const response = await api('/api/v1/openapi.json');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    etag = response.headers.get('etag')!;
    doc = (await response.json()) as Doc;

    const ajv = new Ajv2020({
      strict: false,
      allErrors: true,
      formats: { 'date-time': (text: string) => RFC3339.test(text) && !Number.isNaN(Date.parse(text)), 'uri-reference': true },
    });
    ajv.addSchema({ $id: 'https://restwire.test/openapi.json', components: { schemas: doc.components.schemas } });
    conforms = (schema) => ajv.compile({ $ref: `https://restwire.test/openapi.json#/components/schemas/${schema}` });
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  const expectConforms = (schema: string, value: unknown) => {
    const validate = conforms(schema);
    expect(validate(value), JSON.stringify(validate.errors)).toBe(true);
  };

  describe('/api/v1/openapi.json', () => {
    it('is a valid OpenAPI 3.1 document', async () => {
      const validator = new Validator();
      const result = await validator.validate(doc as unknown as Record<string, unknown>);
      expect(result.errors).toBeUndefined();
      expect(result.valid).toBe(true);
      expect(validator.version).toBe('3.1');
      expect(doc.openapi).toBe('3.1.0');
      expect(doc.info).toMatchObject({ title: 'restwire', version: expect.stringMatching(/^\d+\.\d+\.\d+/) });
    });

    it('answers If-None-Match with 304, offers JSON only, and carries rate-limit headers', async () => {
      expect(etag).toMatch(/^"[^"]+"$/);
      const again = await api('/api/v1/openapi.json', { headers: { 'if-none-match': etag } });
      expect(again.status).toBe(304);
      expect(again.headers.get('x-rate-limit-remaining')).toMatch(/^\d+$/);
      const csv = await api('/api/v1/openapi.json', { headers: { accept: 'text/csv' } });
      expect(csv.status).toBe(406);
      expect(csv.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    });

    it('lists the experiences paths with the methods their views have', () => {
      const collection = doc.paths['/api/v1/experiences/']!;
      const record = doc.paths['/api/v1/experiences/{id}/']!;
      // HEAD and OPTIONS are documented too (issue 10): every path has them, as the server does.
      expect(Object.keys(collection).sort()).toEqual(['get', 'head', 'options', 'post']);
      expect(Object.keys(record).filter((key) => key !== 'parameters').sort()).toEqual(['delete', 'get', 'head', 'options', 'patch', 'put']);
      expect(Object.keys(collection.options.responses['200'].content)).toEqual(['application/json']);
      expect(collection.head.responses['200'].content).toBeUndefined();
      expect(record.parameters).toEqual([{ name: 'id', in: 'path', required: true, schema: { type: 'integer', minimum: 1 } }]);
      // Read-only users: no write operations are documented because none exist.
      expect(Object.keys(doc.paths['/api/v1/users/']!)).toEqual(['get', 'head', 'options']);
      for (const path of ['/api/v1/', '/api/v1/users/{id}/', '/api/v1/users/me/', '/api/v1/openapi.json', '/api/v1/docs/']) {
        expect(doc.paths[path]?.get, path).toBeDefined();
      }
      const ids = Object.values(doc.paths).flatMap((item) =>
        Object.entries(item).filter(([key]) => key !== 'parameters').map(([, operation]) => operation.operationId as string),
      );
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids).toEqual(expect.arrayContaining(['experiences_list', 'experiences_create', 'experiences_partial_update']));
    });

    it('documents every path it lists as a real endpoint', async () => {
      for (const [path, item] of Object.entries(doc.paths)) {
        if (!item.get) continue;
        const response = await api(path.replace(/\{[^}]+\}/g, '1'), { headers: { authorization: adminAuth } });
        expect(response.status, path).not.toBe(405);
        if (!path.includes('{')) expect(response.status, path).not.toBe(404);
      }
    });

    it('builds the Experience schema from the declaration', () => {
      const { Experience, ExperienceRequest, PatchedExperienceRequest } = doc.components.schemas;
      expect(Experience.properties.title).toMatchObject({ type: 'string', minLength: 1, maxLength: 200 });
      expect(Experience.properties.q_like_dislike).toMatchObject({ type: 'string', minLength: 1, maxLength: 1000 });
      expect(Experience.required).toEqual(expect.arrayContaining(['title', 'q_like_dislike']));
      for (const field of ['url', 'id', 'owner', 'created_at', 'updated_at']) expect(Experience.properties[field].readOnly, field).toBe(true);
      for (const field of ['title', 'q_like_dislike']) expect(Experience.properties[field].readOnly, field).toBeUndefined();
      expect(Experience.properties.created_at.format).toBe('date-time');
      expect(Object.keys(Experience.properties)).toEqual(['url', 'id', 'title', 'q_like_dislike', 'owner', 'created_at', 'updated_at', 'expand']);
      expect(ExperienceRequest.required).toEqual(['title', 'q_like_dislike']);
      expect(Object.keys(ExperienceRequest.properties)).toEqual(['title', 'q_like_dislike']);
      expect(PatchedExperienceRequest.required).toBeUndefined();
      expect(doc.components.schemas.User.properties).toMatchObject({
        username: { type: 'string', readOnly: true },
        experiences: { type: 'array', readOnly: true },
      });
      expect(doc.components.schemas.PaginatedExperienceList).toMatchObject({
        required: ['next', 'previous', 'results'],
        properties: { results: { type: 'array', items: { $ref: '#/components/schemas/Experience' } } },
      });
    });

    it('documents list parameters: limit, cursor, ordering with its - variants, filters', () => {
      const list = doc.paths['/api/v1/experiences/']!.get;
      const parameters = (list.parameters as Array<{ $ref?: string; name?: string }>).map((p) =>
        p.$ref ? doc.components.parameters[p.$ref.split('/').pop()!] : p,
      );
      const byName = Object.fromEntries(parameters.map((p) => [p.name, p]));
      expect(byName.limit.schema).toMatchObject({ type: 'integer', minimum: 1, maximum: 100, default: 20 });
      expect(byName.cursor.schema.type).toBe('string');
      expect(byName.ordering.schema.enum).toEqual(['id', '-id', 'created_at', '-created_at', 'title', '-title']);
      expect(byName.ordering.schema.default).toBe('-id');
      expect(byName.owner).toMatchObject({ in: 'query', schema: { type: 'integer' } });
      expect(byName.title).toMatchObject({ in: 'query', schema: { type: 'string' } });
      expect(byName.search).toMatchObject({ in: 'query', schema: { type: 'string' } });
      expect(Object.keys(list.responses)).toEqual(expect.arrayContaining(['200', '304', '400', '429']));
    });

    it('documents bodies, success codes and problem responses', () => {
      const create = doc.paths['/api/v1/experiences/']!.post;
      expect(create.requestBody.required).toBe(true);
      expect(Object.keys(create.requestBody.content)).toEqual(['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data']);
      expect(create.requestBody.content['multipart/form-data'].schema).toEqual({ $ref: '#/components/schemas/ExperienceRequest' });
      expect(create.responses['201'].headers.Location).toEqual({ $ref: '#/components/headers/Location' });
      expect(create.responses['201'].headers['X-Rate-Limit-Remaining']).toEqual({ $ref: '#/components/headers/X-Rate-Limit-Remaining' });
      const record = doc.paths['/api/v1/experiences/{id}/']!;
      expect(record.patch.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/PatchedExperienceRequest' });
      expect(Object.keys(record.delete.responses)).toEqual(expect.arrayContaining(['204', '412', '404', '403', '401']));
      expect(Object.keys(record.put.responses)).toEqual(expect.arrayContaining(['200', '400', '412', '413', '415']));
      expect(record.get.responses['304']).toEqual({ $ref: '#/components/responses/NotModified' });

      const statuses = new Set<string>();
      for (const response of Object.values(doc.components.responses)) {
        if (!response.content) continue;
        expect(response.content['application/problem+json'].schema).toEqual({ $ref: '#/components/schemas/Problem' });
        expect(Object.keys(response.headers)).toEqual(expect.arrayContaining(['X-Rate-Limit-Limit', 'X-Rate-Limit-Remaining', 'X-Rate-Limit-Reset']));
      }
      for (const item of Object.values(doc.paths)) {
        for (const [key, operation] of Object.entries(item)) {
          if (key === 'parameters') continue;
          for (const [status, response] of Object.entries(operation.responses as Record<string, { $ref?: string }>)) {
            if (response.$ref?.startsWith('#/components/responses/') && status !== '304') statuses.add(status);
          }
        }
      }
      expect([...statuses].sort()).toEqual(ERROR_STATUSES.filter((s) => s !== '405'));
      // 405 is a property of a path, not of any operation it has: documented once, as a shared response.
      expect(doc.components.responses.MethodNotAllowed.headers.Allow).toEqual({ $ref: '#/components/headers/Allow' });
      expect(Object.keys(doc.components.responses)).toHaveLength(ERROR_STATUSES.length + 1);
      expect(doc.components.schemas.Problem.properties).toMatchObject({
        type: { type: 'string' },
        title: { type: 'string' },
        status: { type: 'integer' },
        detail: { type: 'string' },
        errors: { type: 'object' },
      });
      expect(Object.keys(doc.components.headers)).toEqual(expect.arrayContaining(['X-Rate-Limit-Limit', 'X-Rate-Limit-Remaining', 'X-Rate-Limit-Reset']));
    });

    it('documents Idempotency-Key on every POST and PATCH but signing in, and the batch endpoint (REQUESTS.md §1, §4)', () => {
      const key = { $ref: '#/components/parameters/Idempotency-Key' };
      for (const [path, item] of Object.entries(doc.paths)) {
        for (const method of ['post', 'patch', 'put', 'delete']) {
          const operation = (item as Record<string, { parameters?: unknown[] }>)[method];
          if (!operation) continue;
          const takesKey = (method === 'post' || method === 'patch') && !path.startsWith('/api/v1/auth/');
          const hasKey = (operation.parameters ?? []).some((parameter) => JSON.stringify(parameter) === JSON.stringify(key));
          expect(hasKey, `${method} ${path}`).toBe(takesKey);
        }
      }
      expect(doc.components.parameters['Idempotency-Key']).toMatchObject({ in: 'header', schema: { maxLength: 255 } });
      const batch = doc.paths['/api/v1/batch/'].post;
      expect(batch.requestBody.content['application/json'].schema.properties.requests).toMatchObject({ minItems: 1, maxItems: 100 });
      expect(Object.keys(batch.responses)).toEqual(expect.arrayContaining(['200', '400', '409', '422', '429']));
    });

    it('declares Basic, Bearer (JWT) and session-cookie security', () => {
      const schemes = Object.values(doc.components.securitySchemes);
      expect(schemes).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ type: 'http', scheme: 'basic' }),
          expect.objectContaining({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' }),
          expect.objectContaining({ type: 'apiKey', in: 'cookie', name: 'sessionid' }),
        ]),
      );
      // Any one scheme, or none (anonymous reads).
      expect(doc.security).toContainEqual({});
      expect(doc.security).toHaveLength(schemes.length + 1);
      // Per operation: anonymous only where the action's permission lets an anonymous caller in.
      const security = (path: string, method: string) =>
        (doc.paths[path] as unknown as Record<string, { security: Array<Record<string, string[]>> }>)[method]!.security;
      expect(security('/api/v1/experiences/', 'get')).toContainEqual({});
      expect(security('/api/v1/experiences/', 'post')).not.toContainEqual({});
      expect(security('/api/v1/experiences/', 'post')).toHaveLength(schemes.length);
      expect(security('/api/v1/webhooks/', 'get')).not.toContainEqual({});
      expect(security('/api/v1/auth/token/', 'post')).toContainEqual({});
    });

    it('types success bodies as JSON (HTML and CSV are chosen by Accept, described once), with the event stream beside a GET', () => {
      const paths = doc.paths as unknown as Record<string, Record<string, { responses: Record<string, { content?: object }> }>>;
      expect(Object.keys(paths['/api/v1/experiences/']!.get!.responses['200']!.content!)).toEqual(['application/json', 'text/event-stream']);
      expect(Object.keys(paths['/api/v1/experiences/{id}/']!.get!.responses['200']!.content!)).toEqual(['application/json', 'text/event-stream']);
      expect(Object.keys(paths['/api/v1/experiences/']!.post!.responses['201']!.content!)).toEqual(['application/json']);
    });
  });

  // Issue 22 items 18 and 19: what the document says against what the server does.
  describe('documents what is served', () => {
    let receiver: Receiver;
    beforeAll(async () => {
      receiver = await startReceiver();
    });
    afterAll(async () => {
      await receiver?.close();
    });

    it('lists ping in the event catalog and in webhooks, and documents the headers a delivery carries', async () => {
      const hook = await api('/api/v1/webhooks/', {
        method: 'POST',
        headers: { authorization: adminAuth, 'content-type': 'application/json' },
        body: JSON.stringify({ target_url: receiver.url, events: ['experience'] }),
      });
      expect(hook.status).toBe(201);
      const catalog = (await (await api('/api/v1/events/')).json()) as { results: Array<{ name: string; schema: object; description: string }> };
      const ping = catalog.results.find((entry) => entry.name === 'ping');
      expect(ping).toBeDefined();
      expect(doc.webhooks.ping.post.requestBody.content['application/json'].schema).toEqual(ping!.schema);

      for (let tries = 0; tries < 200 && receiver.received.length === 0; tries++) await new Promise((resolve) => setTimeout(resolve, 25));
      const received = receiver.received[0]!;
      expect(received.headers['x-service-event']).toBe('ping');
      const validate = new Ajv2020({ strict: false, validateFormats: false }).compile(ping!.schema);
      expect(validate(JSON.parse(received.body)), JSON.stringify(validate.errors)).toBe(true);
      // Every header restwire sets (not the transport's own) is documented, and nothing else.
      const transport = new Set(['host', 'connection', 'content-type', 'content-length']);
      const sent = Object.keys(received.headers).filter((name) => !transport.has(name)).sort();
      for (const event of ['ping', 'experience']) {
        const documented = (doc.webhooks[event].post.parameters as Array<{ name: string; in: string }>).map((p) => p.name.toLowerCase()).sort();
        expect(documented, event).toEqual(sent);
      }
    });

    it('describes an event with the right article', async () => {
      const catalog = (await (await api('/api/v1/events/')).json()) as { results: Array<{ name: string; description: string }> };
      expect(catalog.results.find((entry) => entry.name === 'experience')!.description).toMatch(/^An experience /);
      expect(doc.webhooks.experience.post.summary).toContain('an experience was');
    });

    it('documents OPTIONS of the docs page as it answers: JSON', async () => {
      expect(Object.keys(doc.paths['/api/v1/docs/']!.options.responses['200'].content)).toEqual(['application/json']);
      for (const accept of ['application/json', '*/*']) {
        const response = await api('/api/v1/docs/', { method: 'OPTIONS', headers: { accept } });
        expect(response.status, accept).toBe(200);
        expect(response.headers.get('content-type'), accept).toMatch(/^application\/json/);
        expect(await response.json()).toMatchObject({ name: 'API Documentation', renders: ['text/html'] });
      }
    });

    it('documents users/me as closed to anonymous callers, as it answers 401', async () => {
      expect((await api('/api/v1/users/me/')).status).toBe(401);
      expect(doc.paths['/api/v1/users/me/']!.get.security).not.toContainEqual({});
    });

    it('does not make a request property with a default required, even in a client that reads defaults as present', async () => {
      const requestSchemas = Object.entries(doc.components.schemas).filter(([name]) => name.endsWith('Request'));
      const inline = Object.values(doc.paths).flatMap((item) =>
        Object.values(item).flatMap((operation) => (operation?.requestBody ? [['inline', operation.requestBody.content['application/json'].schema]] : [])),
      );
      for (const [name, schema] of [...requestSchemas, ...inline]) {
        for (const [property, value] of Object.entries((schema.properties ?? {}) as Record<string, { default?: unknown }>)) {
          if (!(schema.required ?? []).includes(property)) expect(value.default, `${String(name)}.${property}`).toBeUndefined();
        }
      }
      // openapi-typescript 7 reads `default` so by default (`defaultNonNullable`).
      const types = await openapiTS(doc as unknown as Parameters<typeof openapiTS>[0], { defaultNonNullable: true });
      const webhookRequest = types.slice(types.indexOf('WebhookRequest: {'), types.indexOf('};', types.indexOf('WebhookRequest: {')));
      expect(webhookRequest).toMatch(/\bordering\?:/);
      expect(webhookRequest).toMatch(/\bevents\?:/);
      expect(webhookRequest).toMatch(/\bactive\?:/);
      expect(doc.components.schemas.WebhookRequest.properties.ordering.description).toContain('Default: `"none"`');
    });

    it('documents the login page, /healthz, /readyz and /metrics', async () => {
      expect(Object.keys(doc.paths['/api/v1/auth/login/']!.get.responses['200'].content)).toEqual(['text/html']);
      expect(doc.paths['/healthz']!.get.responses['200'].content['application/json'].schema).toMatchObject({ required: ['status'] });
      expect(doc.paths['/readyz']!.get.responses['200'].content['application/json']).toBeDefined();
      expect(doc.paths['/readyz']!.get.responses['503'].content['application/problem+json']).toBeDefined();
      expect(doc.paths['/metrics']!.get.responses['200'].content['text/plain']).toBeDefined();
      const healthz = await api('/healthz');
      expect(healthz.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await healthz.json()).toEqual({ status: 'ok' });
      expect(await (await api('/readyz')).json()).toEqual({ status: 'ready', database: 'ok' });
      expect((await api('/metrics')).headers.get('content-type')).toMatch(/^text\/plain/);
      expect((await api('/api/v1/auth/login/')).headers.get('content-type')).toMatch(/^text\/html/);
    });
  });

  describe('real responses conform to the documented schemas', () => {
    it('POST create, GET list and GET record', async () => {
      const created = await api('/api/v1/experiences/', {
        method: 'POST',
        headers: { authorization: adminAuth, 'content-type': 'application/json' },
        body: JSON.stringify({ title: '  Night swim 🌊  ', q_like_dislike: 'like\nvery much' }),
      });
      expect(created.status).toBe(201);
      const record = await created.json();
      expectConforms('Experience', record);
      expectConforms('ExperienceRequest', { title: 'x', q_like_dislike: 'y' });

      const list = await api('/api/v1/experiences/?limit=1');
      expect(list.status).toBe(200);
      const page = await list.json();
      expect(page.results).toHaveLength(1);
      expectConforms('PaginatedExperienceList', page);
      expectConforms('Experience', await (await api(record.url)).json());
      expectConforms('PaginatedUserList', await (await api('/api/v1/users/')).json());
    });

    it('problem bodies conform to Problem', async () => {
      const invalid = await api('/api/v1/experiences/', {
        method: 'POST',
        headers: { authorization: adminAuth, 'content-type': 'application/json' },
        body: JSON.stringify({ title: '' }),
      });
      expect(invalid.status).toBe(400);
      expectConforms('Problem', await invalid.json());
      expectConforms('Problem', await (await api('/api/v1/experiences/?limit=0')).json());
      expectConforms('Problem', await (await api('/api/v1/experiences/999999/')).json());
    });

    it('the schemas reject what the server would refuse', () => {
      const valid = { url: '/api/v1/experiences/1/', id: 1, title: 'a', q_like_dislike: 'b', owner: '/api/v1/users/1/', created_at: '2024-01-01T00:00:00.000Z', updated_at: '2024-01-01T00:00:00.000Z' };
      expectConforms('Experience', valid);
      expect(conforms('Experience')({ ...valid, title: 'x'.repeat(201) })).toBe(false);
      expect(conforms('Experience')({ ...valid, owner: 3 })).toBe(false);
      expect(conforms('ExperienceRequest')({ title: 'only a title' })).toBe(false);
      expect(conforms('PatchedExperienceRequest')({ title: 'only a title' })).toBe(true);
      expect(conforms('PaginatedExperienceList')({ next: null, results: [] })).toBe(false);
    });
  });

  describe('/api/v1/docs/', () => {
    it('is a browsable page describing every path, under the browsable pages\' CSP', async () => {
      const response = await api('/api/v1/docs/', { headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/html/);
      const csp = response.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("style-src 'self'");
      expect(csp).not.toContain('unsafe-inline');
      const page = await response.text();
      expect(page).toMatch(/^<!doctype html>/);
      for (const path of Object.keys(doc.paths)) expect(page, path).toContain(`<code>${path}</code>`);
      for (const schema of ['Experience', 'PaginatedExperienceList', 'User', 'Problem']) expect(page).toContain(`id="schemas-${schema}"`);
      expect(page).toContain('sessionid');
      // No CDN: nothing is loaded from another host, and the page needs no script to be read: the
      // one script is the shared layout's own (log out, messages), as on every browsable page.
      expect(page).not.toMatch(/(?:src|href)\s*=\s*["']?\s*(?:https?:)?\/\//i);
      expect(page).not.toMatch(/url\(\s*["']?\s*(?:https?:)?\/\//i);
      expect(page.match(/<script\b[^>]*>/gi)).toEqual(['<script src="/static/restwire/browsable.js" defer>']);
    });

    it('is served with an ETag and 304, and only as HTML', async () => {
      const first = await api('/api/v1/docs/');
      expect(first.headers.get('content-type')).toMatch(/^text\/html/);
      const tag = first.headers.get('etag')!;
      expect(tag).toBeTruthy();
      expect((await api('/api/v1/docs/', { headers: { 'if-none-match': tag } })).status).toBe(304);
      const json = await api('/api/v1/docs/', { headers: { accept: 'application/json' } });
      expect(json.status).toBe(406);
    });
  });
});

describe('OpenAPI document with signup on', () => {
  let database: TestDatabase;
  let server: RunningServer;
  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    server = await startServer(database, { env: { ALLOW_SIGNUP: 'true' } });
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  // Signup adds a POST the users declaration does not have: it is documented by its own docs.
  it('documents the extra method and stays valid', async () => {
    const doc = (await (await fetch(`${server.url}/api/v1/openapi.json`)).json()) as Doc;
    expect(Object.keys(doc.paths['/api/v1/users/']!).sort()).toEqual(['get', 'head', 'options', 'post']);
    expect(doc.paths['/api/v1/users/']!.post.requestBody.content['application/json'].schema).toMatchObject({
      type: 'object',
      required: ['username', 'password'],
    });
    expect(Object.keys(doc.paths['/api/v1/users/']!.post.responses)).toContain('201');
    expect(doc.components.schemas.UserRequest).toBeUndefined();
    const result = await new Validator().validate(doc as unknown as Record<string, unknown>);
    expect(result.valid).toBe(true);
  });
});
