import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIBRARY } from './support/library.js';
import { createProject, type Project } from './support/project.js';
import { startReceiver, type Received, type Receiver } from './support/receiver.js';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, type RunningServer, type TestDatabase } from './support/server.js';

// RESOURCES.md: a user's own collections, declared in TypeScript in a project outside the
// checkout, migrated, served, and raising events.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const PUBLIC_URL = 'https://api.example.test';
const DATETIME_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const FORM = 'application/x-www-form-urlencoded';

describe.each(BACKENDS)('own resources on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  let receiver: Receiver;
  const bob = basic('bob', 'bob-password-1');
  const api = (path: string, init: RequestInit = {}) => fetch(`${server.url}${path}`, { redirect: 'manual', ...init });
  const send = (method: string, path: string, body: unknown, auth = adminAuth) =>
    api(path, { method, headers: { authorization: auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const create = async (collection: string, body: Json, auth = adminAuth): Promise<Json> => {
    const response = await send('POST', `/api/v1/${collection}/`, body, auth);
    expect(response.status, await response.clone().text()).toBe(201);
    return (await response.json()) as Json;
  };
  const get = async (path: string): Promise<Json> => (await (await api(path)).json()) as Json;
  const all = async (path: string): Promise<Json[]> => {
    const records: Json[] = [];
    let next: string | null = `${path}${path.includes('?') ? '&' : '?'}limit=100`;
    while (next) {
      const page = await get(next);
      records.push(...(page.results as Json[]));
      next = page.next as string | null;
    }
    return records;
  };
  const ofEvent = (event: string) => (list: Received[]) => list.filter((r) => r.headers['x-service-event'] === event).map((r) => JSON.parse(r.body) as Json);

  /** Errors of an event body against its schema in openapi.json's `webhooks` (set in "webhooks"). */
  let validate: (event: string, body: Json) => string[];
  let author: Json;
  let tagA: Json;
  let tagB: Json;
  let tagC: Json;
  const newBook = (fields: Json = {}) => create('books', { title: 'Untitled', price: '1.00', author: author.url, ...fields });

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, LIBRARY);
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
    await server?.stop();
    await database?.drop();
    project?.cleanup();
  });

  describe('migrations, then serve', () => {
    it('makemigrations writes exactly one file; a second run detects no changes', async () => {
      const first = await project.run(['makemigrations']);
      expect(first.code, first.output).toBe(0);
      expect(project.migrationFiles()).toHaveLength(1);
      const [file] = project.migrationFiles();
      for (const name of ['authors', 'tags', 'books', 'reviews', 'shelves', 'isbn', 'price']) expect(project.readMigration(file!)).toContain(name);
      const second = await project.run(['makemigrations']);
      expect(second.code, second.output).toBe(0);
      expect(second.stdout).toContain('No changes detected');
      expect(project.migrationFiles()).toEqual([file]);
    });

    it('migrate applies the file; migrate --plan then has nothing pending, twice alike', async () => {
      const before = await project.run(['migrate', '--plan']);
      expect(before.code, before.output).toBe(0);
      expect(before.stdout).toContain(project.migrationFiles()[0]!.replace(/\.json$/, ''));
      const migrate = await project.run(['migrate']);
      expect(migrate.code, migrate.output).toBe(0);
      const plan = await project.run(['migrate', '--plan']);
      expect(plan.code, plan.output).toBe(0);
      expect(plan.stdout).not.toContain(project.migrationFiles()[0]!.replace(/\.json$/, ''));
      expect((await project.run(['migrate', '--plan'])).stdout).toBe(plan.stdout);
    });

    it('serves the declared collections, and the root links them', async () => {
      server = await project.start({ env: { PUBLIC_URL, WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: '0,0' } });
      await createUser(database, 'bob', 'bob-password-1');
      const root = await get('/api/v1/');
      for (const name of ['authors', 'tags', 'books', 'reviews', 'shelves', 'users', 'webhooks']) expect(root[name]).toBe(`/api/v1/${name}/`);
      expect(root).not.toHaveProperty('experiences');
      author = await create('authors', { name: 'Frank Herbert', email: 'frank@example.com', website: 'https://dune.example', born: '1920-10-08', active: true });
      [tagA, tagB, tagC] = [await create('tags', { name: 'sf' }), await create('tags', { name: 'classic' }), await create('tags', { name: 'desert' })];
    });
  });

  describe('field types', () => {
    it('round-trips a valid value of every type', async () => {
      const book = await create('books', {
        title: '  Dune  ', year: 1965, isbn: '978-0-441-17271-9', price: 12.5, published_at: '2024-03-01T12:30:45.123+02:00',
        extra: { editions: [1, 2, { first: null }], ok: true }, notes: 'line one\nline two\tindented',
        author: author.url, tags: [tagC!.url, tagA!.url],
      });
      expect(book).toMatchObject({
        url: `/api/v1/books/${book.id}/`, title: 'Dune', year: 1965, isbn: '978-0-441-17271-9', genre: 'fiction', price: '12.50',
        published_at: '2024-03-01T10:30:45.123Z', extra: { editions: [1, 2, { first: null }], ok: true },
        notes: 'line one\nline two\tindented', author: author.url, tags: [tagA!.url, tagC!.url], owner: '/api/v1/users/1/',
      });
      expect(book.created_at).toMatch(DATETIME_UTC);
      expect(await get(book.url)).toEqual(book);
      expect(await get(author.url)).toMatchObject({ name: 'Frank Herbert', email: 'frank@example.com', website: 'https://dune.example', born: '1920-10-08', active: true, books: [book.url] });
    });

    it('reads decimals from strings and numbers, and an optional field left out as null', async () => {
      const book = await newBook({ price: '0.1' });
      expect(book).toMatchObject({ price: '0.10', year: null, isbn: null, published_at: null, extra: null, notes: null, tags: [] });
      expect((await newBook({ price: '1234.56' })).price).toBe('1234.56');
    });

    it('reads booleans, integers and references from a form', async () => {
      for (const [value, expected] of [['on', true], ['1', true], ['0', false], ['false', false]] as const) {
        const response = await api('/api/v1/authors/', {
          method: 'POST', headers: { authorization: adminAuth, 'content-type': FORM },
          body: new URLSearchParams({ name: `Form ${value}`, active: value, born: '1950-01-02' }).toString(),
        });
        expect(response.status).toBe(201);
        expect(await response.json()).toMatchObject({ active: expected, born: '1950-01-02' });
      }
      const response = await api('/api/v1/books/', {
        method: 'POST', headers: { authorization: adminAuth, 'content-type': FORM },
        body: new URLSearchParams({ title: 'Form book', year: '1999', price: '3.5', author: author.url }).toString(),
      });
      expect(response.status).toBe(201);
      expect(await response.json()).toMatchObject({ year: 1999, price: '3.50', author: author.url });
    });

    it("refuses wrong values with DRF's messages, every failing field at once, storing nothing", async () => {
      const before = (await all('/api/v1/books/')).length;
      const response = await send('POST', '/api/v1/books/', {
        title: 'x'.repeat(201), year: 3001, genre: 'x', price: '12345.6', published_at: 'yesterday', notes: '   ', author: 5, tags: 'nope',
      });
      expect(response.status).toBe(400);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect((await response.json()).errors).toEqual({
        title: ['Ensure this field has no more than 200 characters.'],
        year: ['Ensure this value is less than or equal to 3000.'],
        genre: ['"x" is not a valid choice.'],
        price: ['Ensure that there are no more than 4 digits before the decimal point.'],
        published_at: ['Datetime has wrong format. Use one of these formats instead: YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z].'],
        notes: ['This field may not be blank.'],
        author: ['Incorrect type. Expected URL string, received int.'],
        tags: ['Expected a list of items but got type "str".'],
      });
      expect((await all('/api/v1/books/')).length).toBe(before);
    });

    it('refuses wrong JSON types and bounds', async () => {
      const cases: Array<[string, Json, string, string]> = [
        ['books', { title: true }, 'title', 'Not a valid string.'],
        ['books', { title: null }, 'title', 'This field may not be null.'],
        ['books', { title: 'bell\u0007' }, 'title', 'Control characters are not allowed.'],
        ['books', { year: 'abc' }, 'year', 'A valid integer is required.'],
        ['books', { year: 19.5 }, 'year', 'A valid integer is required.'],
        ['books', { year: -1 }, 'year', 'Ensure this value is greater than or equal to 0.'],
        ['books', { price: 'abc' }, 'price', 'A valid number is required.'],
        ['books', { price: 1.234 }, 'price', 'Ensure that there are no more than 2 decimal places.'],
        ['books', { price: [] }, 'price', 'A valid number is required.'],
        ['books', { isbn: 'x'.repeat(18) }, 'isbn', 'Ensure this field has no more than 17 characters.'],
        ['authors', { email: 'not-an-email' }, 'email', 'Enter a valid email address.'],
        ['authors', { website: 'ftp://example.com/' }, 'website', 'Enter a valid URL.'],
        ['authors', { born: '2020-02-30' }, 'born', 'Date has wrong format. Use one of these formats instead: YYYY-MM-DD.'],
        ['authors', { active: 'maybe' }, 'active', 'Must be a valid boolean.'],
        ['authors', { active: 2 }, 'active', 'Must be a valid boolean.'],
      ];
      for (const [index, [collection, fields, name, message]] of cases.entries()) {
        const base = collection === 'books' ? { title: 'T', price: '1.00', author: author.url } : { name: `Wrong ${index}` };
        const response = await send('POST', `/api/v1/${collection}/`, { ...base, ...fields });
        expect(response.status, JSON.stringify(fields)).toBe(400);
        expect((await response.json()).errors, JSON.stringify(fields)).toEqual({ [name]: [message] });
      }
      const missing = await send('POST', '/api/v1/books/', {});
      expect((await missing.json()).errors).toEqual({ title: ['This field is required.'], price: ['This field is required.'], author: ['This field is required.'] });
    });

    it('a CSV list defuses a JSON string starting with TAB or CR as a formula (OWASP CSV injection)', async () => {
      await newBook({ title: 'CSV formula', extra: '\t=1+2' });
      await newBook({ title: 'CSV formula', extra: '\r=1+2' });
      const response = await api('/api/v1/books/?title=CSV%20formula', { headers: { accept: 'text/csv' } });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/csv/);
      const text = await response.text();
      expect(text).toContain(",'\t=1+2,");
      expect(text).toContain(`,"'\r=1+2",`);
    });
  });

  describe('references', () => {
    it('accepts a path and an absolute URL under PUBLIC_URL', async () => {
      const book = await newBook({ author: `${PUBLIC_URL}${author.url}`, tags: [`${PUBLIC_URL}${tagB!.url}`, tagA!.url] });
      expect(book.author).toBe(author.url);
      expect(book.tags).toEqual([tagA!.url, tagB!.url]);
    });

    it("answers DRF's hyperlink messages, one per failing list item", async () => {
      const messages: Array<[unknown, string]> = [
        [5, 'Incorrect type. Expected URL string, received int.'],
        [tagA!.url, 'Invalid hyperlink - Incorrect URL match.'],
        ['/api/v1/authors/999999/', 'Invalid hyperlink - Object does not exist.'],
        ['garbage', 'Invalid hyperlink - No URL match.'],
        [`https://elsewhere.example${author.url}`, 'Invalid hyperlink - No URL match.'],
      ];
      for (const [value, message] of messages) {
        const response = await send('POST', '/api/v1/books/', { title: 'Ref', price: '1.00', author: value });
        expect(response.status).toBe(400);
        expect((await response.json()).errors, String(value)).toEqual({ author: [message] });
      }
      const list = await send('POST', '/api/v1/books/', { title: 'Refs', price: '1.00', author: author.url, tags: [tagA!.url, 5, author.url, 'garbage'] });
      expect(list.status).toBe(400);
      expect([...((await list.json()).errors.tags as string[])].sort()).toEqual([
        'Incorrect type. Expected URL string, received int.', 'Invalid hyperlink - Incorrect URL match.', 'Invalid hyperlink - No URL match.',
      ]);
      const missing = await send('POST', '/api/v1/books/', { title: 'Refs', price: '1.00', author: author.url, tags: [tagA!.url, '/api/v1/tags/999999/'] });
      expect(missing.status).toBe(400);
      expect((await missing.json()).errors).toEqual({ tags: ['Invalid hyperlink - Object does not exist.'] });
      const together = await send('POST', '/api/v1/books/', { title: '', price: '1.00', author: '/api/v1/authors/999999/' });
      expect((await together.json()).errors).toEqual({ title: ['This field may not be blank.'], author: ['Invalid hyperlink - Object does not exist.'] });
    });

    it('shows reverse lists: the author its books, users their owned records', async () => {
      const bobs = await create('books', { title: 'Bob’s', price: '2.00', author: author.url }, bob);
      const me = await (await api('/api/v1/users/me/', { headers: { authorization: bob } })).json();
      expect(me.books).toEqual([bobs.url]);
      expect(me.reviews).toEqual([]);
      expect(me).not.toHaveProperty('shelves');
      expect((await get(author.url)).books).toContain(bobs.url);
    });
  });

  describe('lists', () => {
    let years: Json[];
    let other: Json;
    beforeAll(async () => {
      other = await create('authors', { name: 'Octavia Butler' });
      years = [];
      for (const [title, year] of [['Kindred', 1979], ['Dawn', 1987], ['Parable', 1993], ['Fledgling', null], ['Wild Seed', 1980]] as const) {
        years.push(await create('books', { title, ...(year === null ? {} : { year }), price: '5.00', author: other.url, genre: 'fiction' }));
      }
    });

    it('filters by exact, gte/lte, contains and search', async () => {
      const titles = async (query: string) => (await all(`/api/v1/books/?${query}`)).map((b) => b.title).sort();
      expect(await titles('year=1979')).toEqual(['Kindred']);
      expect(await titles('year__gte=1980&year__lte=1990')).toEqual(['Dawn', 'Wild Seed']);
      expect(await titles('title__contains=edgl')).toEqual(['Fledgling']);
      expect(await titles('search=PARABLE')).toEqual(['Parable']);
      expect((await api('/api/v1/books/?year__gte=abc')).status).toBe(400);
    });

    it('filters by a reference given as an id or a path; a path of another collection is a 400', async () => {
      const ids = years.map((b) => b.id).sort((a, b) => a - b);
      const byId = (await all(`/api/v1/books/?author=${other.id}`)).map((b) => b.id).sort((a, b) => a - b);
      const byPath = (await all(`/api/v1/books/?author=${encodeURIComponent(other.url)}`)).map((b) => b.id).sort((a, b) => a - b);
      expect(byId).toEqual(ids);
      expect(byPath).toEqual(ids);
      const wrong = await api(`/api/v1/books/?author=${encodeURIComponent(tagA!.url)}`);
      expect(wrong.status).toBe(400);
      expect(wrong.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    });

    it('orders by a nullable field and walks cursor pages without gaps or repeats', async () => {
      for (const ordering of ['year', '-year']) {
        const seen: Json[] = [];
        let next: string | null = `/api/v1/books/?author=${other.id}&ordering=${ordering}&limit=2`;
        while (next) {
          const page = await get(next);
          expect(page.results.length).toBeLessThanOrEqual(2);
          seen.push(...page.results);
          next = page.next;
        }
        expect(seen.map((b) => b.id).sort((a, b) => a - b)).toEqual(years.map((b) => b.id).sort((a, b) => a - b));
        const known = seen.map((b) => b.year).filter((y) => y !== null);
        expect(known).toEqual([...known].sort((a, b) => (ordering === 'year' ? a - b : b - a)));
      }
      expect((await api('/api/v1/books/?ordering=notes')).status).toBe(400);
    });
  });

  describe('uniqueness', () => {
    it('answers a duplicate with 400 and the model-style message', async () => {
      await newBook({ isbn: '111-1' });
      const response = await send('POST', '/api/v1/books/', { title: 'Dup', price: '1.00', author: author.url, isbn: '111-1' });
      expect(response.status).toBe(400);
      expect((await response.json()).errors).toEqual({ isbn: ['book with this isbn already exists.'] });
    });

    it('lets exactly one of ten concurrent creates win, the rest 400, never 500', async () => {
      const responses = await Promise.all(
        Array.from({ length: 10 }, (_, i) => send('POST', '/api/v1/books/', { title: `Race ${i}`, price: '1.00', author: author.url, isbn: '222-2' })),
      );
      const statuses = responses.map((r) => r.status).sort();
      expect(statuses).toEqual([201, 400, 400, 400, 400, 400, 400, 400, 400, 400]);
      for (const response of responses.filter((r) => r.status === 400)) {
        expect((await response.json()).errors).toEqual({ isbn: ['book with this isbn already exists.'] });
      }
      expect(await all('/api/v1/books/?title__contains=Race')).toHaveLength(1);
    });
  });

  describe('metadata and OpenAPI', () => {
    it('OPTIONS lists every field with its type and constraints', async () => {
      // ACCESS.md §2: the POST is described to a caller who may create (an anonymous one may not).
      const response = await api('/api/v1/books/', { method: 'OPTIONS', headers: { authorization: adminAuth } });
      expect(response.status).toBe(200);
      const fields = (await response.json()).actions.POST as Json;
      expect(Object.keys(fields)).toEqual(expect.arrayContaining(['url', 'id', 'title', 'year', 'isbn', 'genre', 'price', 'published_at', 'extra', 'notes', 'author', 'tags', 'owner', 'created_at', 'updated_at']));
      for (const [name, description] of Object.entries(fields)) expect(description.type, name).toEqual(expect.any(String));
      expect(fields.title).toMatchObject({ type: 'string', required: true, read_only: false, max_length: 200 });
      expect(fields.year).toMatchObject({ type: 'integer', required: false, min_value: 0, max_value: 3000 });
      expect(fields.isbn).toMatchObject({ required: false, max_length: 17 });
      expect(fields.genre).toMatchObject({ type: 'choice', required: false, choices: [{ value: 'fiction', display_name: 'fiction' }, { value: 'nonfiction', display_name: 'nonfiction' }, { value: 'poetry', display_name: 'poetry' }] });
      expect(fields.price).toMatchObject({ type: 'decimal', required: true, max_digits: 6, decimal_places: 2 });
      expect(fields.owner).toMatchObject({ read_only: true });
      expect(fields.id).toMatchObject({ read_only: true });
    });

    it('OpenAPI has a valid document with each collection and a webhooks entry per event', async () => {
      const document = await get('/api/v1/openapi.json');
      const result = await new Validator().validate(document);
      expect(result.errors ?? [], JSON.stringify(result.errors)).toEqual([]);
      expect(result.valid).toBe(true);
      for (const name of ['authors', 'tags', 'books', 'reviews', 'shelves']) {
        expect(document.paths[`/api/v1/${name}/`], name).toBeDefined();
        expect(document.paths[`/api/v1/${name}/{id}/`], name).toBeDefined();
      }
      // Each collection's event, and `ping`, which every receiver gets (issue 22 item 18).
      expect(Object.keys(document.webhooks).sort()).toEqual(['book', 'ping', 'review', 'shelf']);
      expect(JSON.stringify(document.components)).toContain('"maxLength":200');
      expect(JSON.stringify(document.components)).toContain('"maximum":3000');
    });
  });

  describe('webhooks', () => {
    beforeAll(async () => {
      const document = await get('/api/v1/openapi.json');
      const ajv = new Ajv2020({ strict: false, allErrors: true });
      (addFormats as unknown as (a: unknown) => void)(ajv);
      ajv.addFormat('decimal', /^-?\d+(\.\d+)?$/);
      ajv.addSchema(document, 'openapi.json');
      validate = (event, body) => {
        const check = ajv.getSchema(`openapi.json#/webhooks/${event}/post/requestBody/content/application~1json/schema`)!;
        return check(body) ? [] : (check.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
      };
    });
    const subscribe = (events: string[]) => send('POST', '/api/v1/webhooks/', { target_url: receiver.url, events });

    it('refuses an unknown event, a collection without an event and a collection name', async () => {
      for (const events of [['nope'], ['authors'], ['books']]) {
        const response = await subscribe(events);
        expect(response.status, events[0]).toBe(400);
        expect((await response.json()).errors).toHaveProperty('events');
      }
    });

    it('delivers book events with the GitHub shape; the bodies match the documented schema', async () => {
      expect((await subscribe(['book'])).status).toBe(201);
      expect((await subscribe(['*'])).status).toBe(201);
      await receiver.waitFor((list) => list.filter((r) => r.headers['x-service-event'] === 'ping').length === 2);
      receiver.received.length = 0;
      // Every optional field set: the documented schema must hold for these bodies.
      const book = await newBook({ title: 'Evented', tags: [tagB!.url], year: 2001, isbn: '333-3', published_at: '2001-01-01T00:00:00Z', extra: [1], notes: 'n' });
      await send('PATCH', book.url, { title: 'Evented again' });
      const mine = (list: Received[]) => ofEvent('book')(list).filter((e) => e.book.id === book.id);
      const events = mine(await receiver.waitFor((list) => mine(list).length >= 4));
      expect(events.map((e) => e.action).sort()).toEqual(['created', 'created', 'updated', 'updated']);
      const created = events.find((e) => e.action === 'created')!;
      expect(created.book).toMatchObject({ url: `${PUBLIC_URL}${book.url}`, number: book.id, id: book.id, title: 'Evented', price: '1.00', author: author.url, tags: [tagB!.url], owner: '/api/v1/users/1/' });
      expect(created.repository).toMatchObject({ id: expect.any(Number), full_name: 'admin/books', owner: { login: 'admin', id: 1 } });
      expect(created.sender).toEqual({ login: 'admin', id: 1 });
      const updated = events.find((e) => e.action === 'updated')!;
      expect(updated.changes).toEqual({ title: { from: 'Evented' } });
      for (const event of events) expect(validate('book', event)).toEqual([]);
    });

    it('protect: 409 stating the count, nothing deleted', async () => {
      const writer = await create('authors', { name: 'Protected' });
      const books = [await newBook({ author: writer.url }), await newBook({ author: writer.url })];
      const response = await api(writer.url, { method: 'DELETE', headers: { authorization: adminAuth } });
      expect(response.status).toBe(409);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect((await response.json()).detail).toMatch(/\b2\b/);
      expect((await api(writer.url)).status).toBe(200);
      for (const book of books) expect((await api(book.url)).status).toBe(200);
    });

    it('cascade deletes reviews with a deleted event each; setNull clears a shelf with an updated event', async () => {
      const book = await newBook({ title: 'Doomed' });
      const reviews = [await create('reviews', { book: book.url, rating: 4, body: 'good' }), await create('reviews', { book: book.url, rating: 2, body: 'meh' })];
      const shelf = await create('shelves', { name: 'Favourites', favourite: book.url });
      const response = await api(book.url, { method: 'DELETE', headers: { authorization: adminAuth } });
      expect(response.status).toBe(204);
      for (const review of reviews) expect((await api(review.url)).status).toBe(404);
      expect((await get(shelf.url)).favourite).toBeNull();
      const deletedReviews = (list: Received[]) => ofEvent('review')(list).filter((e) => e.action === 'deleted');
      const shelfUpdates = (list: Received[]) => ofEvent('shelf')(list).filter((e) => e.action === 'updated' && e.shelf.id === shelf.id);
      const received = await receiver.waitFor((list) => deletedReviews(list).length >= 2 && shelfUpdates(list).length >= 1);
      const deleted = deletedReviews(received);
      expect(deleted).toHaveLength(2);
      expect(deleted.map((e) => e.review.id).sort()).toEqual(reviews.map((r) => r.id).sort());
      expect(deleted[0]!.repository.id).toBe(77);
      const shelfEvent = shelfUpdates(received)[0]!;
      expect(shelfEvent.changes.favourite.from).toBe(book.url);
      expect(shelfEvent.shelf.favourite).toBeNull();
      for (const event of ofEvent('review')(received)) expect(validate('review', event)).toEqual([]);
      expect(validate('shelf', shelfEvent)).toEqual([]);
    });

    it('keeps repository.id across a restart', async () => {
      receiver.received.length = 0;
      await newBook({ title: 'Before restart' });
      const titled = (title: string) => (list: Received[]) => ofEvent('book')(list).filter((e) => e.book.title === title);
      const [before] = titled('Before restart')(await receiver.waitFor((list) => titled('Before restart')(list).length >= 2));
      await server.stop();
      server = await project.start({ env: { PUBLIC_URL, WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: '0,0' } });
      receiver.received.length = 0;
      await newBook({ title: 'After restart' });
      const [after] = titled('After restart')(await receiver.waitFor((list) => titled('After restart')(list).length >= 2));
      expect(after!.repository.id).toBe(before!.repository.id);
    });
  });

  // Known gaps: here the product differs from RESOURCES.md. These assertions fail until the
  // product is fixed; they are kept apart so the rest of the suite reads green.
  describe('edge cases', () => {
    it('creates a record whose references list is empty or left out', async () => {
      for (const tags of [undefined, []]) {
        const response = await send('POST', '/api/v1/books/', { title: 'No tags', price: '1.00', author: author.url, ...(tags ? { tags } : {}) });
        expect(response.status, JSON.stringify(tags)).toBe(201);
      }
    });

    it('event bodies with optional fields left out (null) match the documented schema (§4, §7 "Strings")', async () => {
      const book = await newBook({ title: 'Sparse' });
      const review = await create('reviews', { book: book.url, rating: 3 });
      const received = await receiver.waitFor(
        (list) => ofEvent('book')(list).some((e) => e.book.id === book.id) && ofEvent('review')(list).some((e) => e.review.id === review.id),
      );
      expect(validate('book', ofEvent('book')(received).find((e) => e.book.id === book.id)!)).toEqual([]);
      expect(validate('review', ofEvent('review')(received).find((e) => e.review.id === review.id)!)).toEqual([]);
    });

    it('a list of references reports a missing record beside items of the wrong shape (§7 "References")', async () => {
      const response = await send('POST', '/api/v1/books/', { title: 'Refs', price: '1.00', author: author.url, tags: [tagA!.url, 5, '/api/v1/tags/999999/'] });
      expect(response.status).toBe(400);
      expect([...((await response.json()).errors.tags as string[])].sort()).toEqual([
        'Incorrect type. Expected URL string, received int.', 'Invalid hyperlink - Object does not exist.',
      ]);
    });
  });
});
