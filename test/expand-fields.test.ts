import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { BACKENDS, adminAuth, basic, createTestDatabase, createUser, type RunningServer, type TestDatabase } from './support/server.js';

// `?expand=` and `?fields=` (REQUESTS.md §2, §3), black-box: books → authors → publishers, books'
// `tags` (references), authors' reverse list of books, and `owner`. Authors have a read rule
// (ACCESS.md §2): a hidden author is read by their owner only, so another caller sees null in
// its place, and the page is never shared between callers.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const PUBLISHERS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'publishers',
  fields: { name: field.string({ maxLength: 100 }) },
});
`;
const AUTHORS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'authors',
  fields: {
    name: field.string({ maxLength: 100 }),
    publisher: field.reference('publishers', { nullable: true, required: false }),
    visibility: field.choice(['public', 'hidden'], { default: 'public' }),
  },
  owner: true,
  related: { books: { collection: 'books', field: 'author' } },
  access: { read: ['visibility=public', 'owner=@me'], create: '@authenticated', update: 'owner=@me', delete: 'owner=@me' },
});
`;
const TAGS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'tags',
  fields: { label: field.string({ maxLength: 50 }), slug: field.string({ maxLength: 50, default: 'none' }), note: field.string({ maxLength: 50, default: 'none' }) },
  filters: {
    label: ['exact', 'contains', 'icontains', 'gt', 'gte', 'lt', 'lte', 'in', 'isnull'],
    slug: ['exact', 'contains', 'icontains', 'gt', 'gte', 'lt', 'lte', 'in', 'isnull'],
    note: ['exact', 'isnull'],
  },
  search: ['note'],
});
`;
const BOOKS = `import { defineResource, field } from 'restwire';
export default defineResource({
  name: 'books',
  fields: {
    title: field.string({ maxLength: 200 }),
    author: field.reference('authors', { nullable: true, required: false }),
    tags: field.references('tags'),
  },
  owner: true,
  orderings: ['title'],
  defaultOrdering: 'title',
});
`;

const alice = basic('alice', 'alice-password-1');
const bob = basic('bob', 'bob-password-1');

describe.each(BACKENDS)('expand and fields on %s', (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  const send = async (method: string, path: string, auth: string | null, body?: unknown, accept = 'application/json') => {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: { accept, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(auth ? { authorization: auth } : {}) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, text, body: text && response.headers.get('content-type')?.includes('json') ? (JSON.parse(text) as Json) : null };
  };
  const get = (path: string, auth: string | null = bob, accept?: string) => send('GET', path, auth, undefined, accept);
  const create = async (path: string, auth: string, body: Json) => {
    const created = await send('POST', path, auth, body);
    expect(created.status, created.text).toBe(201);
    return created.body!;
  };
  let penguin: Json, faber: Json, ursula: Json, hidden: Json, scifi: Json, classic: Json;
  let dispossessed: Json, secret: Json, lonely: Json, alicePath: string;

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, { 'publishers.ts': PUBLISHERS, 'authors.ts': AUTHORS, 'tags.ts': TAGS, 'books.ts': BOOKS });
    await runOk(project, ['makemigrations']);
    server = await project.start({ env: { LOG_LEVEL: 'warn' }, ready: /listening at (http:\/\/127\.0\.0\.1:\d+)/ });
    await createUser(database, 'alice', 'alice-password-1');
    await createUser(database, 'bob', 'bob-password-1');
    alicePath = (await get('/api/v1/users/me/', alice)).body!.url;
    penguin = await create('/api/v1/publishers/', adminAuth, { name: 'Penguin' });
    faber = await create('/api/v1/publishers/', adminAuth, { name: 'Faber' });
    ursula = await create('/api/v1/authors/', alice, { name: 'Ursula', publisher: penguin.url });
    hidden = await create('/api/v1/authors/', alice, { name: 'Pseudonym', publisher: faber.url, visibility: 'hidden' });
    scifi = await create('/api/v1/tags/', adminAuth, { label: 'sf' });
    classic = await create('/api/v1/tags/', adminAuth, { label: 'classic' });
    dispossessed = await create('/api/v1/books/', alice, { title: 'A Dispossessed', author: ursula.url, tags: [scifi.url, classic.url] });
    await create('/api/v1/books/', alice, { title: 'B Earthsea', author: ursula.url, tags: [classic.url] });
    secret = await create('/api/v1/books/', alice, { title: 'C Secret', author: hidden.url, tags: [] });
    lonely = await create('/api/v1/books/', bob, { title: 'D Lonely', tags: [scifi.url] });
  });
  afterAll(async () => {
    await server?.stop();
    project?.cleanup();
    await database?.drop();
  });

  it('expands a reference, a references list and the owner on a list, leaving the members as paths', async () => {
    const page = await get('/api/v1/books/?expand=author,tags,owner');
    expect(page.status, page.text).toBe(200);
    const [first, , third, fourth] = page.body!.results as Json[];
    expect(first.author).toBe(ursula.url);
    expect(first.tags).toEqual([scifi.url, classic.url]);
    expect(first.expand.author).toMatchObject({ url: ursula.url, name: 'Ursula', publisher: penguin.url });
    expect(first.expand.tags.map((tag: Json) => tag.label)).toEqual(['sf', 'classic']);
    expect(first.expand.owner).toMatchObject({ url: alicePath, username: 'alice' });
    // A user's roles are shown to that user and to admins only: bob does not see alice's.
    expect(first.expand.owner.roles).toBeUndefined();
    // Bob may not read the hidden author: null in its place; a book without an author: null too.
    expect(third.author).toBe(hidden.url);
    expect(third.expand.author).toBeNull();
    expect(fourth.expand).toEqual({ author: null, tags: [expect.objectContaining({ label: 'sf' })], owner: expect.objectContaining({ username: 'bob' }) });
  });

  it('shows a related record to the caller who may read it, with their own members', async () => {
    const record = await get(`${secret.url}?expand=author,owner`, alice);
    expect(record.status, record.text).toBe(200);
    expect(record.body!.expand.author).toMatchObject({ url: hidden.url, name: 'Pseudonym', visibility: 'hidden' });
    expect(record.body!.expand.owner.roles).toEqual([]);
  });

  it('nests up to three levels, and a reverse list holds only what the caller may read', async () => {
    const nested = await get(`${dispossessed.url}?expand=author.publisher,author.books.tags`);
    expect(nested.status, nested.text).toBe(200);
    const author = nested.body!.expand.author as Json;
    expect(author.expand.publisher).toMatchObject({ url: penguin.url, name: 'Penguin' });
    expect(author.books).toHaveLength(2);
    expect(author.expand.books.map((book: Json) => book.title)).toEqual(['A Dispossessed', 'B Earthsea']);
    expect(author.expand.books[0].expand.tags.map((tag: Json) => tag.label)).toEqual(['sf', 'classic']);

    const authors = await get('/api/v1/authors/?expand=books,publisher', bob);
    expect(authors.body!.results.map((one: Json) => one.name)).toEqual(['Ursula']);
    const mine = await get('/api/v1/authors/?expand=books,publisher', alice);
    const pseudonym = (mine.body!.results as Json[]).find((one) => one.name === 'Pseudonym')!;
    expect(pseudonym.expand).toEqual({ publisher: expect.objectContaining({ name: 'Faber' }), books: [expect.objectContaining({ url: secret.url })] });
  });

  it('keeps only the fields asked for, url always, with and without expand', async () => {
    const page = await get('/api/v1/books/?fields=title');
    expect(page.status, page.text).toBe(200);
    expect(page.body!.results[0]).toEqual({ url: dispossessed.url, title: 'A Dispossessed' });
    expect(page.body!.next).toBeNull();

    const record = await get(`${dispossessed.url}?fields=id,title,author,expand.author&expand=author,tags`);
    expect(record.body).toEqual({
      url: dispossessed.url,
      id: dispossessed.id,
      title: 'A Dispossessed',
      author: ursula.url,
      expand: { author: expect.objectContaining({ name: 'Ursula' }) },
    });
    const noExpansion = await get(`${dispossessed.url}?fields=title&expand=author`);
    expect(noExpansion.body).toEqual({ url: dispossessed.url, title: 'A Dispossessed' });
  });

  it('CSV keeps the fields asked for and ignores expand', async () => {
    const csv = await get('/api/v1/books/?fields=title,author&expand=author', bob, 'text/csv');
    expect(csv.status, csv.text).toBe(200);
    expect(csv.text.split('\r\n')).toEqual(['url,title,author', `${dispossessed.url},A Dispossessed,${ursula.url}`, expect.any(String), expect.any(String), `${lonely.url},D Lonely,`, '']);
    const one = await get(`${lonely.url}?fields=id`, bob, 'text/csv');
    expect(one.text).toBe(`url,id\r\n${lonely.url},${lonely.id}\r\n`);
  });

  it('HTML shows the expansion', async () => {
    const page = await get(`${dispossessed.url}?expand=author`, bob, 'text/html');
    expect(page.status).toBe(200);
    expect(page.text).toContain('Ursula');
  });

  it('gives each fields/expand representation its own ETag, and a 304 for its own', async () => {
    const plain = await get(dispossessed.url);
    const expanded = await get(`${dispossessed.url}?expand=author`);
    const cut = await get(`${dispossessed.url}?fields=title`);
    const tags = [plain, expanded, cut].map((response) => response.headers.get('etag'));
    expect(new Set(tags).size).toBe(3);
    const again = await fetch(`${server.url}${dispossessed.url}?expand=author`, { headers: { authorization: bob, 'if-none-match': tags[1]! } });
    expect(again.status).toBe(304);
    const lists = await Promise.all(['', '?expand=tags', '?fields=title'].map((query) => get(`/api/v1/books/${query}`)));
    expect(new Set(lists.map((response) => response.headers.get('etag'))).size).toBe(3);
  });

  it('never serves one caller the expanded page of another (a read rule on authors)', async () => {
    const forAlice = await get('/api/v1/books/?expand=author', alice);
    const forBob = await get('/api/v1/books/?expand=author', bob);
    const forAnonymous = await get('/api/v1/books/?expand=author', null);
    const third = (response: { body: Json | null }) => (response.body!.results as Json[])[2]!.expand.author;
    expect(third(forAlice)).toMatchObject({ name: 'Pseudonym' });
    expect(third(forBob)).toBeNull();
    expect(third(forAnonymous)).toBeNull();
    expect(third(await get('/api/v1/books/?expand=author', alice))).toMatchObject({ name: 'Pseudonym' });
    // Tags have no rule: the same page for everyone, and it follows a change at once.
    await send('PATCH', scifi.url, adminAuth, { label: 'science fiction' });
    const tagged = await get('/api/v1/books/?expand=tags', null);
    expect(tagged.body!.results[0].expand.tags[0].label).toBe('science fiction');
  });

  it('refuses an unknown, too deep or too many expand, and an unknown field, naming the parameter and the name', async () => {
    const cases: Array<[string, string, RegExp]> = [
      ['/api/v1/books/?expand=publisher', 'expand', /"publisher" is not a relation of books/],
      [`${dispossessed.url}?expand=author.nope`, 'expand', /"nope" is not a relation of authors/],
      ['/api/v1/books/?expand=author.books.author.publisher', 'expand', /deeper than 3/],
      [`/api/v1/books/?expand=${Array(11).fill('tags').join(',')}`, 'expand', /At most 10/],
      ['/api/v1/books/?fields=title,isbn', 'fields', /"isbn" is not a field of books/],
      [`${dispossessed.url}?fields=expand.publisher`, 'fields', /"expand.publisher" is not a field of books/],
      ['/api/v1/books/?expand=constructor', 'expand', /"constructor"/],
    ];
    for (const [path, param, message] of cases) {
      const response = await get(path);
      expect(response.status, path).toBe(400);
      expect(response.headers.get('content-type')).toContain('application/problem+json');
      expect(response.body!.errors[param][0], path).toMatch(message);
    }
  });

  it('does not count expand and fields among the filters, and documents both in OpenAPI', async () => {
    // Twenty filter terms is the most a list takes (issue 22); expand and fields are not filters.
    const lookups = ['', '__contains', '__icontains', '__gt', '__gte', '__lt', '__lte', '__in'];
    const terms = [...lookups.flatMap((lookup) => [`label${lookup}=x`, `slug${lookup}=x`]), 'label__isnull=false', 'slug__isnull=false', 'note=x', 'note__isnull=false'];
    expect(terms).toHaveLength(20);
    const response = await get(`/api/v1/tags/?${terms.join('&')}&fields=label&expand=`);
    expect(response.status, response.text).toBe(200);
    const tooMany = await get(`/api/v1/tags/?${terms.join('&')}&search=x`);
    expect(tooMany.status).toBe(400);
    const document = (await get('/api/v1/openapi.json', null)).body!;
    const list = document.paths['/api/v1/books/'].get.parameters as Json[];
    const expand = list.find((parameter) => parameter.name === 'expand')!;
    expect(expand.schema.items.enum).toEqual(expect.arrayContaining(['author', 'tags', 'owner', 'author.publisher', 'author.books.tags']));
    const fields = (document.paths['/api/v1/books/{id}/'].get.parameters as Json[]).find((parameter) => parameter.name === 'fields')!;
    expect(fields.schema.items.enum).toEqual(expect.arrayContaining(['url', 'title', 'author', 'tags', 'owner', 'expand.author']));
    // Tags have no relations: nothing to expand.
    expect((document.paths['/api/v1/tags/'].get.parameters as Json[]).some((parameter) => parameter.name === 'expand')).toBe(false);
  });
});
