import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { createTestDatabase, type RunningServer, type TestDatabase } from './support/server.js';

// Issue 22 item 10: OpenAPI component names come from labels. A label with a space, or one that
// names a fixed component (`Problem`) or restwire's own (`User`), must still give a valid
// document with one component per schema. The document is built from declarations only, so one
// backend is enough.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const collection = (name: string, extra = '') => `import { defineResource, field } from 'restwire';
export default defineResource({ name: '${name}', fields: { title: field.string({ maxLength: 40 }) }${extra} });
`;

describe('OpenAPI components of declared collections', () => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  let doc: Json;

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    project = createProject(database, {
      'job_positions.ts': collection('job_positions'),
      'problems.ts': collection('problems'),
      'user.ts': collection('user'),
    });
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    server = await project.start({ env: { DISPATCHER_IN_SERVE: 'false' } });
    doc = (await (await fetch(`${server.url}/api/v1/openapi.json`)).json()) as Json;
  });
  afterAll(async () => {
    await server?.stop();
    project?.cleanup();
    await database?.drop();
  });

  it('is a valid document', async () => {
    const result = await new Validator().validate(doc);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
  });

  it('gives each collection components of its own, leaving the fixed ones alone', () => {
    const schemas = doc.components.schemas as Json;
    const recordRef = (path: string) => doc.paths[path].get.responses['200'].content['application/json'].schema.$ref as string;
    const refs = ['/api/v1/job_positions/{id}/', '/api/v1/problems/{id}/', '/api/v1/user/{id}/', '/api/v1/users/{id}/'].map(recordRef);
    expect(new Set(refs).size).toBe(refs.length);
    expect(refs[0]).toBe('#/components/schemas/JobPosition');
    // restwire's own keep their names: the problem body and the built-in users.
    expect(refs[3]).toBe('#/components/schemas/User');
    expect(schemas.User.properties.username).toBeDefined();
    expect(schemas.Problem.required).toEqual(['type', 'title', 'status', 'detail']);
    for (const ref of refs.slice(0, 3)) expect(Object.keys(schemas[ref.split('/').pop()!].properties)).toContain('title');
    
    expect(Object.keys(schemas).every((name) => /^[a-zA-Z0-9.\-_]+$/.test(name))).toBe(true);
  });
});
