import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, BACKENDS, adminAuth, basic, createTestDatabase, createUser, startServer, type RunningServer, type TestDatabase } from './support/server.js';

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
const FORM = 'application/x-www-form-urlencoded';

describe.each(BACKENDS)('experiences API on %s', (backend) => {
  let database: TestDatabase;
  let server: RunningServer;
  const bob = basic('bob', 'bob-password-1');
  const api = (path: string, init: RequestInit = {}) => fetch(`${server.url}${path}`, { redirect: 'manual', ...init });
  const create = async (fields: Record<string, string>, auth = adminAuth) => {
    const response = await api('/api/v1/experiences/', { method: 'POST', headers: { authorization: auth, 'content-type': FORM }, body: form(fields) });
    expect(response.status).toBe(201);
    return (await response.json()) as Record<string, unknown> & { id: number; url: string };
  };
  const count = async () => {
    let total = 0;
    let next: string | null = '/api/v1/experiences/?limit=100';
    while (next) {
      const page = (await (await api(next)).json()) as { next: string | null; results: unknown[] };
      total += page.results.length;
      next = page.next;
    }
    return total;
  };

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    server = await startServer(database);
    await createUser(database, 'bob', 'bob-password-1');
  });
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
  });

  describe('the seed sample', () => {
    it('creates a record from form fields with Basic credentials', async () => {
      const response = await api('/api/v1/experiences/', {
        method: 'POST',
        headers: { authorization: adminAuth, 'content-type': FORM },
        body: form({ title: 'Sunrise hike', q_like_dislike: 'like' }),
      });
      expect(response.status).toBe(201);
      const body = (await response.json()) as Record<string, unknown>;
      expect(response.headers.get('location')).toBe(body.url);
      expect(body).toMatchObject({ title: 'Sunrise hike', q_like_dislike: 'like', owner: '/api/v1/users/1/' });
      expect(body.url).toBe(`/api/v1/experiences/${body.id}/`);
      expect(Object.keys(body)).toEqual(['url', 'id', 'title', 'q_like_dislike', 'owner', 'created_at', 'updated_at']);
      expect(body.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    });

    it('accepts the same fields as JSON and as multipart', async () => {
      const json = await api('/api/v1/experiences/', {
        method: 'POST',
        headers: { authorization: adminAuth, 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'JSON', q_like_dislike: 'dislike' }),
      });
      expect(json.status).toBe(201);
      const multipart = new FormData();
      multipart.set('title', 'Multipart');
      multipart.set('q_like_dislike', 'like');
      const response = await api('/api/v1/experiences/', { method: 'POST', headers: { authorization: adminAuth }, body: multipart });
      expect(response.status).toBe(201);
      expect(await response.json()).toMatchObject({ title: 'Multipart' });
    });

    it('lists records with the newest first', async () => {
      const response = await api('/api/v1/experiences/');
      expect(response.status).toBe(200);
      const body = (await response.json()) as { next: null; previous: null; results: Array<{ title: string }> };
      expect(body.next).toBeNull();
      expect(body.previous).toBeNull();
      expect(body.results.map((r) => r.title).slice(0, 3)).toEqual(['Multipart', 'JSON', 'Sunrise hike']);
    });
  });

  describe('authentication and permissions', () => {
    it('refuses an anonymous write with 401 and a Basic challenge, creating nothing', async () => {
      const before = await count();
      const response = await api('/api/v1/experiences/', { method: 'POST', headers: { 'content-type': FORM }, body: form({ title: 'x', q_like_dislike: 'y' }) });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Basic realm="api"');
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await response.json()).toMatchObject({ status: 401, title: expect.any(String), detail: expect.any(String) });
      expect(await count()).toBe(before);
    });

    it('answers 401 to a wrong password even on GET', async () => {
      const response = await api('/api/v1/experiences/', { headers: { authorization: basic(ADMIN.username, 'wrong') } });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Basic realm="api"');
    });

    it('answers 401 to a garbage Authorization header', async () => {
      const response = await api('/api/v1/experiences/', { headers: { authorization: 'Basic %%%not-base64' } });
      expect(response.status).toBe(401);
    });

    it("lets only the owner change a record: another user's write is 403", async () => {
      const record = await create({ title: 'Mine', q_like_dislike: 'like' });
      for (const [method, body] of [['PUT', { title: 'Theirs', q_like_dislike: 'x' }], ['PATCH', { title: 'Theirs' }], ['DELETE', undefined]] as const) {
        const response = await api(record.url, {
          method,
          headers: { authorization: bob, 'content-type': 'application/json' },
          ...(body ? { body: JSON.stringify(body) } : {}),
        });
        expect(response.status, method).toBe(403);
      }
      const anonymous = await api(record.url, { method: 'DELETE' });
      expect(anonymous.status).toBe(401);
      expect(await (await api(record.url)).json()).toMatchObject({ title: 'Mine' });
    });
  });

  describe('update and delete', () => {
    it('PUT needs every writable field; PATCH changes some', async () => {
      const record = await create({ title: 'Before', q_like_dislike: 'like' });
      const put = await api(record.url, { method: 'PUT', headers: { authorization: adminAuth, 'content-type': 'application/json' }, body: JSON.stringify({ title: 'Only title' }) });
      expect(put.status).toBe(400);
      expect(await put.json()).toMatchObject({ errors: { q_like_dislike: ['This field is required.'] } });

      const full = await api(record.url, { method: 'PUT', headers: { authorization: adminAuth, 'content-type': 'application/json' }, body: JSON.stringify({ title: 'After', q_like_dislike: 'dislike', id: 999, owner: '/api/v1/users/2/' }) });
      expect(full.status).toBe(200);
      expect(await full.json()).toMatchObject({ id: record.id, title: 'After', q_like_dislike: 'dislike', owner: '/api/v1/users/1/' });

      const patch = await api(record.url, { method: 'PATCH', headers: { authorization: adminAuth, 'content-type': FORM }, body: form({ q_like_dislike: 'like again' }) });
      expect(patch.status).toBe(200);
      expect(await patch.json()).toMatchObject({ title: 'After', q_like_dislike: 'like again' });
    });

    it('DELETE answers 204, then the record is gone', async () => {
      const record = await create({ title: 'Doomed', q_like_dislike: 'dislike' });
      const response = await api(record.url, { method: 'DELETE', headers: { authorization: adminAuth } });
      expect(response.status).toBe(204);
      expect(await response.text()).toBe('');
      expect((await api(record.url)).status).toBe(404);
    });
  });

  describe('bad input changes nothing', () => {
    const post = (body: string, contentType: string, auth = adminAuth) =>
      api('/api/v1/experiences/', { method: 'POST', headers: { authorization: auth, 'content-type': contentType }, body });

    it('lists every failing field', async () => {
      const before = await count();
      const response = await post(JSON.stringify({ title: '   ', q_like_dislike: 'x'.repeat(1001) }), 'application/json');
      expect(response.status).toBe(400);
      const problem = (await response.json()) as { errors: Record<string, string[]> };
      expect(Object.keys(problem.errors).sort()).toEqual(['q_like_dislike', 'title']);
      expect((await post('{}', 'application/json')).status).toBe(400);
      expect(await count()).toBe(before);
    });

    it.each([
      ['a number for a string', { title: 5, q_like_dislike: 'x' }, 'title'],
      ['a boolean for a string', { title: 'ok', q_like_dislike: true }, 'q_like_dislike'],
      ['null', { title: null, q_like_dislike: 'x' }, 'title'],
      ['201 characters', { title: 'é'.repeat(201), q_like_dislike: 'x' }, 'title'],
      ['a control character in the title', { title: 'a\u0007b', q_like_dislike: 'x' }, 'title'],
      ['a newline in the title', { title: 'a\nb', q_like_dislike: 'x' }, 'title'],
      ['a C1 control character', { title: 'ok', q_like_dislike: 'a\u0085b' }, 'q_like_dislike'],
    ])('refuses %s', async (_name, body, field) => {
      const response = await post(JSON.stringify(body), 'application/json');
      expect(response.status).toBe(400);
      expect(((await response.json()) as { errors: Record<string, unknown> }).errors).toHaveProperty(field);
    });

    it('allows newline and tab in q_like_dislike and counts code points', async () => {
      const record = await create({ title: '😀'.repeat(200), q_like_dislike: 'line one\nline\ttwo' });
      expect(record.title).toBe('😀'.repeat(200));
      expect(record.q_like_dislike).toBe('line one\nline\ttwo');
    });

    it('trims and stores the trimmed value', async () => {
      const record = await create({ title: '  padded  ', q_like_dislike: ' x ' });
      expect(record.title).toBe('padded');
    });

    it.each([
      ['malformed JSON', '{"title": ', 'application/json', 400],
      ['a JSON array', '[1,2]', 'application/json', 400],
      ['an unsupported media type', 'title=x', 'text/plain', 415],
      ['XML', '<a/>', 'application/xml', 415],
      ['a +json media type', '{"title":"x","q_like_dislike":"y"}', 'application/ld+json', 415],
    ])('answers %s with problem+json', async (_name, body, type, status) => {
      const before = await count();
      const response = await post(body, type);
      expect(response.status).toBe(status);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await response.json()).toMatchObject({ status, type: expect.any(String), title: expect.any(String), detail: expect.any(String) });
      expect(await count()).toBe(before);
    });

    it('refuses invalid UTF-8 in JSON and in forms', async () => {
      for (const [bytes, type] of [
        [Buffer.concat([Buffer.from('{"title":"'), Buffer.from([0xff, 0xfe]), Buffer.from('","q_like_dislike":"x"}')]), 'application/json'],
        [Buffer.from('title=%FF%FE&q_like_dislike=x'), FORM],
      ] as const) {
        const response = await api('/api/v1/experiences/', { method: 'POST', headers: { authorization: adminAuth, 'content-type': type }, body: bytes });
        expect(response.status).toBe(400);
      }
    });

    it('answers 413 to a body over 1 MiB', async () => {
      const response = await post(JSON.stringify({ title: 'big', q_like_dislike: 'x'.repeat(1024 * 1024) }), 'application/json');
      expect(response.status).toBe(413);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    });

    it('stores SQL-looking text verbatim and round-trips right-to-left text', async () => {
      const title = "Robert'); DROP TABLE experiences;--";
      const record = await create({ title, q_like_dislike: 'مرحبا بالعالم' });
      const fetched = (await (await api(record.url)).json()) as Record<string, unknown>;
      expect(fetched).toMatchObject({ title, q_like_dislike: 'مرحبا بالعالم' });
    });

    it.each(['abc', '0', '-1', '1.5', '99999999999999999999', '1e3'])('answers 404 for the id %s', async (id) => {
      const response = await api(`/api/v1/experiences/${id}/`);
      expect(response.status).toBe(404);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    });
  });

  describe('HTTP conventions', () => {
    it('404s /api/ and other versions, 308s a missing slash', async () => {
      for (const path of ['/api/', '/api/v2/experiences/', '/api/v1/nothing/']) {
        const response = await api(path);
        expect(response.status, path).toBe(404);
        expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      }
      const malformed = await api('/api/v1/experiences/%zz/');
      expect(malformed.status).toBe(400);
      expect(malformed.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      const redirect = await api('/api/v1/experiences?limit=5');
      expect(redirect.status).toBe(308);
      expect(redirect.headers.get('location')).toBe('/api/v1/experiences/?limit=5');
    });

    it('answers 405 with Allow for a method the path lacks, before authentication', async () => {
      const response = await api('/api/v1/users/', { method: 'DELETE', headers: { authorization: basic('admin', 'wrong') } });
      expect(response.status).toBe(405);
      expect(response.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
      const collection = await api('/api/v1/experiences/', { method: 'PUT', headers: { authorization: adminAuth } });
      expect(collection.status).toBe(405);
      expect(collection.headers.get('allow')).toBe('GET, HEAD, OPTIONS, POST');
    });

    it('describes a resource on OPTIONS', async () => {
      // ACCESS.md §2: the POST is described to a caller who may create (an anonymous one may not).
      const response = await api('/api/v1/experiences/', { method: 'OPTIONS', headers: { authorization: adminAuth } });
      expect(response.status).toBe(200);
      expect(response.headers.get('allow')).toBe('GET, HEAD, OPTIONS, POST');
      const body = (await response.json()) as { name: string; actions: { POST: Record<string, { required: boolean; read_only: boolean; max_length?: number }> } };
      expect(body.name).toBe('Experience List');
      expect(body.actions.POST.title).toMatchObject({ required: true, read_only: false, max_length: 200 });
      expect(body.actions.POST.owner).toMatchObject({ read_only: true });
    });

    it('answers HEAD like GET without a body', async () => {
      const get = await api('/api/v1/experiences/');
      const head = await api('/api/v1/experiences/', { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(head.headers.get('etag')).toBe(get.headers.get('etag'));
      expect(head.headers.get('content-length')).toBe(String(Buffer.byteLength(await get.text())));
      expect(await head.text()).toBe('');
    });

    it('negotiates by Accept only: CSV, HTML, 406, and ignores ?format', async () => {
      await create({ title: '=cmd|calc', q_like_dislike: 'has, comma and "quote"' });
      const csv = await api('/api/v1/experiences/?limit=1', { headers: { accept: 'text/csv' } });
      expect(csv.status).toBe(200);
      expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
      expect(csv.headers.get('vary')).toMatch(/Accept/);
      const lines = (await csv.text()).split('\r\n');
      expect(lines[0]).toBe('url,id,title,q_like_dislike,owner,created_at,updated_at');
      expect(lines[1]).toContain(`'=cmd|calc,"has, comma and ""quote"""`);

      const html = await api('/api/v1/experiences/?limit=1', { headers: { accept: 'text/html' } });
      expect(html.headers.get('content-type')).toMatch(/^text\/html/);
      const page = await html.text();
      expect(page).toContain('has, comma and \\&quot;quote\\&quot;');

      const refused = await api('/api/v1/experiences/', { headers: { accept: 'application/xml' } });
      expect(refused.status).toBe(406);
      expect(await refused.json()).toMatchObject({ available: ['application/json', 'text/html', 'text/csv'] });

      const format = await api('/api/v1/experiences/?format=csv');
      expect(format.headers.get('content-type')).toMatch(/^application\/json/);
      const weighted = await api('/api/v1/experiences/?limit=1', { headers: { accept: 'application/json;q=0.5, text/csv' } });
      expect(weighted.headers.get('content-type')).toMatch(/^text\/csv/);
    });

    it('escapes user content in the browsable API', async () => {
      const record = await create({ title: '<script>alert(1)</script>', q_like_dislike: '<img src=x onerror=alert(1)>' });
      const page = await (await api(record.url, { headers: { accept: 'text/html' } })).text();
      expect(page).not.toContain('<script>alert');
      expect(page).not.toContain('<img src=x');
      expect(page).toContain('&lt;script&gt;');
    });

    it('sends a strong ETag, 304 on If-None-Match, 412 on a stale If-Match', async () => {
      const record = await create({ title: 'Tagged', q_like_dislike: 'like' });
      const first = await api(record.url);
      const etag = first.headers.get('etag')!;
      expect(etag).toMatch(/^"[^"]+"$/);
      const cached = await api(record.url, { headers: { 'if-none-match': etag } });
      expect(cached.status).toBe(304);
      // RFC 9110 §15.4.5: no body, so no Content-Type (issue #10).
      expect(cached.headers.get('content-type')).toBeNull();

      const stale = await api(record.url, { method: 'PATCH', headers: { authorization: adminAuth, 'content-type': 'application/json', 'if-match': '"stale"' }, body: JSON.stringify({ title: 'Nope' }) });
      expect(stale.status).toBe(412);
      const fresh = await api(record.url, { method: 'PATCH', headers: { authorization: adminAuth, 'content-type': 'application/json', 'if-match': etag }, body: JSON.stringify({ title: 'Yes' }) });
      expect(fresh.status).toBe(200);
      const after = await api(record.url, { headers: { 'if-none-match': etag } });
      expect(after.status).toBe(200);
      const deleteStale = await api(record.url, { method: 'DELETE', headers: { authorization: adminAuth, 'if-match': etag } });
      expect(deleteStale.status).toBe(412);
      expect((await api(record.url)).status).toBe(200);
    });
  });

  describe('lists', () => {
    it('pages with a cursor, next/previous links and a Link header, never repeating or skipping', async () => {
      for (let i = 0; i < 7; i++) await create({ title: `Paged ${i}`, q_like_dislike: 'like' }, bob);
      const me = (await (await api('/api/v1/users/me/', { headers: { authorization: bob } })).json()) as { id: number };
      const seen: number[] = [];
      let next: string | null = `/api/v1/experiences/?owner=${me.id}&limit=3`;
      let pages = 0;
      while (next) {
        const response = await api(next);
        expect(response.status).toBe(200);
        const page = (await response.json()) as { next: string | null; previous: string | null; results: Array<{ id: number }> };
        if (page.next) expect(response.headers.get('link')).toContain(`<${page.next}>; rel="next"`);
        seen.push(...page.results.map((r) => r.id));
        // A record added while walking must not shift the pages.
        if (pages === 0) await create({ title: 'Added while paging', q_like_dislike: 'x' }, bob);
        next = page.next;
        pages++;
      }
      expect(seen).toHaveLength(7);
      expect(new Set(seen).size).toBe(7);
      expect(seen).toEqual([...seen].sort((a, b) => b - a));

      const second = (await (await api(`/api/v1/experiences/?owner=${me.id}&limit=3&ordering=id`)).json()) as { next: string };
      const page2 = (await (await api(second.next)).json()) as { previous: string; results: Array<{ id: number }> };
      const back = (await (await api(page2.previous)).json()) as { results: Array<{ id: number }> };
      expect(back.results).toHaveLength(3);
      expect(back.results[2]!.id).toBeLessThan(page2.results[0]!.id);
    });

    it('walks every ordering page by page, forward and back, each record once (titles repeat)', async () => {
      for (const title of ['Kayak', 'Kayak', 'Apple', 'Mango', 'Kayak']) await create({ title, q_like_dislike: 'x' });
      for (const ordering of ['title', '-title', 'created_at', '-created_at']) {
        const all = (await (await api(`/api/v1/experiences/?ordering=${ordering}&limit=100`)).json()) as { results: Array<{ id: number }> };
        const walked: number[] = [];
        let next: string | null = `/api/v1/experiences/?ordering=${ordering}&limit=2`;
        let last: { previous: string | null } = { previous: null };
        while (next) {
          const page = (await (await api(next)).json()) as { next: string | null; previous: string | null; results: Array<{ id: number }> };
          walked.push(...page.results.map((r) => r.id));
          next = page.next;
          last = page;
        }
        expect(walked, ordering).toEqual(all.results.map((r) => r.id));
        const back = (await (await api(last.previous!)).json()) as { results: Array<{ id: number }> };
        const end = walked.length - (walked.length % 2 || 2);
        expect(back.results.map((r) => r.id), ordering).toEqual(walked.slice(end - 2, end));
      }
    });

    it('orders and filters', async () => {
      await create({ title: 'Zebra crossing', q_like_dislike: 'like' });
      await create({ title: 'ÄRGER im Büro', q_like_dislike: 'dislike' });
      const byTitle = (await (await api('/api/v1/experiences/?ordering=title&limit=100')).json()) as { results: Array<{ title: string }> };
      const titles = byTitle.results.map((r) => r.title);
      expect(titles).toEqual([...titles].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      const search = (await (await api(`/api/v1/experiences/?search=${encodeURIComponent('ärger')}`)).json()) as { results: Array<{ title: string }> };
      expect(search.results.map((r) => r.title)).toEqual(['ÄRGER im Büro']);
      const exact = (await (await api(`/api/v1/experiences/?title=${encodeURIComponent('Zebra crossing')}`)).json()) as { results: unknown[] };
      expect(exact.results).toHaveLength(1);
      const wildcard = (await (await api('/api/v1/experiences/?search=%25')).json()) as { results: unknown[] };
      expect(wildcard.results).toHaveLength(0);
    });

    it.each(['limit=0', 'limit=101', 'limit=abc', 'ordering=bogus', 'ordering=constructor', 'ordering=__proto__', 'ordering=-owner', 'cursor=forged', 'owner=abc'])(
      'answers 400 to %s',
      async (query) => {
        const response = await api(`/api/v1/experiences/?${query}`);
        expect(response.status).toBe(400);
        expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      },
    );

    it('shows every change in a page read again, whether made by this process or another', async () => {
      const path = '/api/v1/experiences/?limit=5';
      const page = async () => {
        const response = await api(path);
        expect(response.status).toBe(200);
        const body = (await response.json()) as { results: Array<{ id: number; title: string }> };
        return { etag: response.headers.get('etag'), results: body.results };
      };
      const record = await create({ title: 'Read twice', q_like_dislike: 'like' });
      const first = await page();
      expect(await page()).toEqual(first);
      expect(first.results[0]).toMatchObject({ id: record.id, title: 'Read twice' });

      const patched = await api(record.url, {
        method: 'PATCH',
        headers: { authorization: adminAuth, 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'Read twice, changed' }),
      });
      expect(patched.status).toBe(200);
      const afterPatch = await page();
      expect(afterPatch.results[0]).toMatchObject({ id: record.id, title: 'Read twice, changed' });
      expect(afterPatch.etag).not.toBe(first.etag);

      // A second process on the same database (a `serve --workers` sibling, or another host on
      // PostgreSQL) writes; this one's next page must show it.
      const other = await startServer(database, { env: { DISPATCHER_IN_SERVE: 'false' } });
      try {
        const made = await fetch(`${other.url}/api/v1/experiences/`, {
          method: 'POST',
          headers: { authorization: adminAuth, 'content-type': FORM },
          body: form({ title: 'Written elsewhere', q_like_dislike: 'like' }),
        });
        expect(made.status).toBe(201);
        const { id } = (await made.json()) as { id: number };
        expect((await page()).results[0]).toMatchObject({ id, title: 'Written elsewhere' });
        const removed = await fetch(`${other.url}/api/v1/experiences/${id}/`, { method: 'DELETE', headers: { authorization: adminAuth } });
        expect(removed.status).toBe(204);
        expect((await page()).results.map((r) => r.id)).not.toContain(id);
      } finally {
        await other.stop();
      }
    });

    it('lists all of 50 concurrent creates', async () => {
      const before = await count();
      const responses = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          api('/api/v1/experiences/', { method: 'POST', headers: { authorization: adminAuth, 'content-type': FORM }, body: form({ title: `Burst ${i}`, q_like_dislike: 'like' }) }),
        ),
      );
      expect(responses.map((r) => r.status)).toEqual(Array(50).fill(201));
      const ids = await Promise.all(responses.map(async (r) => ((await r.json()) as { id: number }).id));
      expect(new Set(ids).size).toBe(50);
      expect(await count()).toBe(before + 50);
    });
  });

  describe('users', () => {
    it('shows users with their experiences as paths, and me', async () => {
      const record = await create({ title: 'Bob was here', q_like_dislike: 'like' }, bob);
      const me = await api('/api/v1/users/me/', { headers: { authorization: bob } });
      expect(me.status).toBe(200);
      const body = (await me.json()) as { url: string; id: number; username: string; experiences: string[] };
      expect(body.username).toBe('bob');
      expect(body.experiences).toContain(record.url);
      // ACCESS.md §1: a user sees their own roles.
      expect(Object.keys(body)).toEqual(['url', 'id', 'username', 'experiences', 'roles']);
      const detail = (await (await api(body.url)).json()) as { username: string };
      expect(detail.username).toBe('bob');
      const list = (await (await api('/api/v1/users/')).json()) as { results: Array<{ username: string }> };
      expect(list.results.map((u) => u.username)).toEqual(['admin', 'bob']);
      expect(JSON.stringify(list)).not.toMatch(/password/);
      expect((await api('/api/v1/users/me/')).status).toBe(401);
    });

    it('refuses writes to users with 405', async () => {
      const response = await api('/api/v1/users/', { method: 'POST', headers: { authorization: adminAuth, 'content-type': 'application/json' }, body: '{}' });
      expect(response.status).toBe(405);
      expect(response.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
    });
  });

  describe('operations', () => {
    it('answers /healthz, /readyz and /metrics', async () => {
      expect((await api('/healthz')).status).toBe(200);
      expect(await (await api('/readyz')).json()).toMatchObject({ status: 'ready' });
      const metrics = await (await api('/metrics')).text();
      expect(metrics).toMatch(/restwire_http_requests_total\{method="POST",route="\/api\/v1\/experiences\/",status="201"\} \d+/);
      expect(metrics).toContain('restwire_http_request_duration_seconds_bucket');
    });

    it('never logs credentials', () => {
      expect(server.output()).not.toContain(ADMIN.password);
      expect(server.output()).not.toContain(Buffer.from(`${ADMIN.username}:${ADMIN.password}`).toString('base64'));
    });
  });
});

// Logging does not depend on the database; SQLite lets the test break one under the server.
describe('request logs', () => {
  it('logs a failed request with its id, also below LOG_LEVEL=info', async () => {
    const broken = await createTestDatabase('sqlite');
    const quiet = await startServer(broken, { env: { LOG_LEVEL: 'warn' }, ready: /restwire: listening at (http:\/\/127\.0\.0\.1:\d+)/ });
    try {
      // Another process drops the table under the running server: the next create is a 500.
      const file = new SQLite(join(broken.env.DATA_DIR!, 'restwire.sqlite3'));
      file.exec('drop table experiences');
      file.close();
      const response = await fetch(`${quiet.url}/api/v1/experiences/`, {
        method: 'POST',
        headers: { authorization: adminAuth, 'content-type': FORM },
        body: form({ title: 'Lost', q_like_dislike: 'x' }),
      });
      expect(response.status).toBe(500);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      await expect.poll(() => quiet.output()).toMatch(/"reqId":"[0-9a-f-]{36}".*"msg":"request failed"/);
    } finally {
      await quiet.stop();
      await broken.drop();
    }
  });
});
