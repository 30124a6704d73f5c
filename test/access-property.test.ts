import { spawn } from 'node:child_process';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, runOk, type Project } from './support/project.js';
import { ADMIN, BACKENDS, adminAuth, basic, createTestDatabase, type RunningServer, type TestDatabase } from './support/server.js';

// Read rules against a model (ACCESS.md §2, issue 18), black-box on both databases. fast-check
// generates, from a fixed seed, K read rules from the grammar (`*`, `@authenticated`,
// `@role=NAME`, `FIELD[__LOOKUP]=VALUE` with every lookup, `@me`, `A&B`, `[R1, R2]`) and random
// records. Rules are declarations, fixed at start-up, so one project declares K collections with
// the same fields, each with one generated `read` rule, and one server serves them all. Random
// users create the records through the API; then every caller (an admin, two users with different
// roles, one without roles, anonymous) walks every list page by page, forwards by `next` and back
// by `previous`, and retrieves every record, and each answer is compared with the rule evaluated
// by the small model below, from the structured rule it was generated from (not from its text).
//
// The model's one judgement beyond ACCESS.md §2: a rule the caller's sign-in and roles alone
// rule out (each alternative holds an `@authenticated`, `@role=…` or `@me` that fails for the
// caller) refuses the whole read, as the built-in `isAuthenticated` does (ACCESS.md §2 maps it to
// `@authenticated`): 401 when anonymous, 403 when signed in, for the list and for every record,
// existing or not, so a refusal tells nothing about which records exist either.
//
// A failure names the seed; ACCESS_PROPERTY_SEED=N replays (or explores) another one.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const SEED = Number(process.env.ACCESS_PROPERTY_SEED ?? 18_2026);
/** Collections, each with one generated read rule. */
const K = 12;
/** Records per collection. */
const N = 24;

const CHOICES = ['red', 'green', 'blue'] as const;
const ROLES = ['staff', 'editor', 'ghost'] as const; // nobody has `ghost`

// The model ------------------------------------------------------------------------------------

type Caller = 'admin' | 'alice' | 'bob' | 'carol' | 'anonymous';
type Author = Exclude<Caller, 'anonymous'>;
const CALLERS: readonly Caller[] = ['admin', 'alice', 'bob', 'carol', 'anonymous'];
const AUTHORS: readonly Author[] = ['admin', 'alice', 'bob', 'carol'];
const PASSWORDS: Record<Author, string> = { admin: ADMIN.password, alice: 'alice-password-1', bob: 'bob-password-1', carol: 'carol-password-1' };
const ROLES_OF: Record<Author, readonly string[]> = { admin: ['admin'], alice: ['staff'], bob: ['editor'], carol: [] };

/** A record as the model sees it: users by id. */
interface ModelRecord {
  readonly id: number;
  readonly kind: string;
  readonly n: number | null;
  readonly s: string | null;
  readonly friend: number | null;
  readonly owner: number;
}
type Compared = 'kind' | 'n' | 's' | 'friend' | 'owner' | 'id';
type Order = 'gt' | 'gte' | 'lt' | 'lte';

type Term =
  | { readonly type: 'anyone' }
  | { readonly type: 'authenticated' }
  | { readonly type: 'role'; readonly role: string }
  /** `FIELD=@me` (or `FIELD__exact=@me` when spelled out). */
  | { readonly type: 'me'; readonly field: 'owner' | 'friend'; readonly spelled: boolean }
  /** `FIELD=VALUE` (or `FIELD__exact=VALUE` when spelled out). */
  | { readonly type: 'exact'; readonly field: Compared; readonly value: string | number; readonly spelled: boolean }
  | { readonly type: 'order'; readonly field: 'n' | 'id'; readonly lookup: Order; readonly value: number }
  | { readonly type: 'contains'; readonly field: 'kind' | 's'; readonly lookup: 'contains' | 'icontains'; readonly value: string }
  | { readonly type: 'in'; readonly field: Compared; readonly values: readonly (string | number)[] }
  | { readonly type: 'isnull'; readonly field: 'n' | 's' | 'friend'; readonly value: boolean };
/** Alternatives (any one), each a list of terms (all of them); `asList` writes one alternative as `[…]`. */
interface Rule {
  readonly alternatives: readonly (readonly Term[])[];
  readonly asList: boolean;
}

interface Who {
  readonly id: number | null;
  readonly roles: readonly string[];
}

/** Whether the caller alone decides that a term fails, whatever the record. */
function failsForCaller(term: Term, who: Who): boolean {
  if (term.type === 'authenticated') return who.id === null;
  if (term.type === 'role') return !who.roles.includes(term.role);
  if (term.type === 'me') return who.id === null;
  return false;
}

function holds(term: Term, record: ModelRecord, who: Who): boolean {
  switch (term.type) {
    case 'anyone':
      return true;
    case 'authenticated':
      return who.id !== null;
    case 'role':
      return who.roles.includes(term.role);
    case 'me':
      return who.id !== null && record[term.field] === who.id;
    case 'exact':
      return record[term.field] === term.value;
    case 'order': {
      const actual = record[term.field];
      if (actual === null) return false;
      if (term.lookup === 'gt') return actual > term.value;
      if (term.lookup === 'gte') return actual >= term.value;
      if (term.lookup === 'lt') return actual < term.value;
      return actual <= term.value;
    }
    case 'contains': {
      // `contains` and `icontains` both ignore case (README, "Filter lookups").
      const actual = record[term.field];
      return actual !== null && actual.toLowerCase().includes(term.value.toLowerCase());
    }
    case 'in': {
      const actual = record[term.field];
      return actual !== null && term.values.includes(actual);
    }
    case 'isnull':
      return (record[term.field] === null) === term.value;
  }
}

/** The model's answer for one caller: refused outright, or which records are readable. */
function judge(rule: Rule, who: Who, records: readonly ModelRecord[]): { refused: boolean; readable: Set<number> } {
  if (who.roles.includes('admin')) return { refused: false, readable: new Set(records.map((record) => record.id)) };
  const refused = rule.alternatives.every((terms) => terms.some((term) => failsForCaller(term, who)));
  const readable = records.filter((record) => rule.alternatives.some((terms) => terms.every((term) => holds(term, record, who))));
  return { refused, readable: new Set(readable.map((record) => record.id)) };
}

/** The rule as a declaration writes it. */
function ruleSource(rule: Rule): string | string[] {
  const texts = rule.alternatives.map((terms) => terms.map(termSource).join('&'));
  return texts.length === 1 && !rule.asList ? texts[0]! : texts;
}

function termSource(term: Term): string {
  switch (term.type) {
    case 'anyone':
      return '*';
    case 'authenticated':
      return '@authenticated';
    case 'role':
      return `@role=${term.role}`;
    case 'me':
      return `${term.field}${term.spelled ? '__exact' : ''}=@me`;
    case 'exact':
      return `${term.field}${term.spelled ? '__exact' : ''}=${term.value}`;
    case 'order':
      return `${term.field}__${term.lookup}=${term.value}`;
    case 'contains':
      return `${term.field}__${term.lookup}=${term.value}`;
    case 'in':
      return `${term.field}__in=${term.values.join(',')}`;
    case 'isnull':
      return `${term.field}__isnull=${term.value}`;
  }
}

// The generators -------------------------------------------------------------------------------

/** Short strings whose case matters: `exact` tells `aB` from `ab`, `contains` does not. */
const text = fc.array(fc.constantFrom('a', 'A', 'b', 'B'), { minLength: 1, maxLength: 3 }).map((chars) => chars.join(''));
/** Ids of users (admin 1, then the users this file creates) and of records, some of nobody. */
const userId = fc.integer({ min: 1, max: 6 });
const recordId = fc.oneof({ weight: 5, arbitrary: fc.integer({ min: 1, max: N }) }, { weight: 1, arbitrary: fc.constantFrom(N + 1, 1_000) });
/** Values of `n` (records hold -3 to 3 or null): mostly ones records hold, so bounds matter. */
const number = fc.oneof({ weight: 5, arbitrary: fc.integer({ min: -3, max: 3 }) }, { weight: 1, arbitrary: fc.constantFrom(-4, 4) });
const order = fc.constantFrom<Order>('gt', 'gte', 'lt', 'lte');
const some = <T,>(items: fc.Arbitrary<T>) => fc.uniqueArray(items, { minLength: 1, maxLength: 3 });

const fieldTerm: fc.Arbitrary<Term> = fc.oneof(
  fc.record({ type: fc.constant('exact' as const), field: fc.constant('kind' as const), value: fc.constantFrom<string>(...CHOICES), spelled: fc.boolean() }),
  fc.record({ type: fc.constant('in' as const), field: fc.constant('kind' as const), values: some(fc.constantFrom(...CHOICES)) }),
  fc.record({ type: fc.constant('contains' as const), field: fc.constant('kind' as const), lookup: fc.constantFrom('contains' as const, 'icontains' as const), value: fc.constantFrom('r', 'e', 'RE', 'gre', 'Lu', 'x') }),
  fc.record({ type: fc.constant('exact' as const), field: fc.constant('n' as const), value: number, spelled: fc.boolean() }),
  fc.record({ type: fc.constant('order' as const), field: fc.constant('n' as const), lookup: order, value: number }),
  fc.record({ type: fc.constant('in' as const), field: fc.constant('n' as const), values: some(number) }),
  fc.record({ type: fc.constant('exact' as const), field: fc.constant('s' as const), value: text, spelled: fc.boolean() }),
  fc.record({ type: fc.constant('contains' as const), field: fc.constant('s' as const), lookup: fc.constantFrom('contains' as const, 'icontains' as const), value: text }),
  fc.record({ type: fc.constant('in' as const), field: fc.constant('s' as const), values: some(text) }),
  fc.record({ type: fc.constant('isnull' as const), field: fc.constantFrom('n' as const, 's' as const, 'friend' as const), value: fc.boolean() }),
  fc.record({ type: fc.constant('exact' as const), field: fc.constantFrom('friend' as const, 'owner' as const), value: userId, spelled: fc.boolean() }),
  fc.record({ type: fc.constant('in' as const), field: fc.constantFrom('friend' as const, 'owner' as const), values: some(userId) }),
  fc.record({ type: fc.constant('exact' as const), field: fc.constant('id' as const), value: recordId, spelled: fc.boolean() }),
  fc.record({ type: fc.constant('order' as const), field: fc.constant('id' as const), lookup: order, value: recordId }),
  fc.record({ type: fc.constant('in' as const), field: fc.constant('id' as const), values: some(recordId) }),
);

const term: fc.Arbitrary<Term> = fc.oneof(
  { weight: 1, arbitrary: fc.constant({ type: 'anyone' as const }) },
  { weight: 2, arbitrary: fc.constant({ type: 'authenticated' as const }) },
  { weight: 2, arbitrary: fc.record({ type: fc.constant('role' as const), role: fc.constantFrom(...ROLES) }) },
  { weight: 4, arbitrary: fc.record({ type: fc.constant('me' as const), field: fc.constantFrom('owner' as const, 'friend' as const), spelled: fc.boolean() }) },
  { weight: 12, arbitrary: fieldTerm },
);

const ruleArbitrary: fc.Arbitrary<Rule> = fc.record({
  alternatives: fc.array(fc.array(term, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 3 }),
  asList: fc.boolean(),
});

/** A record to create: who creates it, and its fields (`friend` a user, or none). */
interface Draft {
  readonly author: Author;
  readonly kind: string;
  readonly n: number | null;
  readonly s: string | null;
  readonly friend: Author | null;
}
const draftArbitrary: fc.Arbitrary<Draft> = fc.record({
  author: fc.constantFrom(...AUTHORS),
  kind: fc.constantFrom(...CHOICES),
  n: fc.option(fc.integer({ min: -3, max: 3 }), { freq: 4 }),
  s: fc.option(text, { freq: 4 }),
  friend: fc.option(fc.constantFrom(...AUTHORS), { freq: 2 }),
});

const RULES = fc.sample(ruleArbitrary, { seed: SEED, numRuns: K });
const DRAFTS = fc.sample(draftArbitrary, { seed: SEED + 1, numRuns: K * N });
/**
 * How every caller walks a collection's list: its page size and ordering, the same URLs for
 * every caller, so a page cached for one and served to another would show.
 */
const LIMITS = [2, 3, 4, 5];
const ORDERINGS = ['', 'id', '-id', 'n', '-n', 's', '-s'];

const collectionName = (index: number) => `rule${index}`;
const declaration = (index: number) => `import { defineResource, field } from 'restwire';
export default defineResource({
  name: '${collectionName(index)}',
  fields: {
    kind: field.choice(${JSON.stringify(CHOICES)}, { default: 'red' }),
    n: field.integer({ nullable: true, required: false }),
    s: field.string({ maxLength: 20, nullable: true, required: false }),
    friend: field.reference('users', { nullable: true, required: false }),
  },
  owner: true,
  orderings: ['n', 's'],
  access: { read: ${JSON.stringify(ruleSource(RULES[index]!))}, create: '@authenticated' },
});
`;

const BIN = new URL('../bin/restwire.js', import.meta.url).pathname;

/** `restwire createuser NAME --password-stdin --role …`, as an operator would. */
async function createUserWithRoles(database: TestDatabase, name: Author): Promise<void> {
  const args = ['createuser', name, '--password-stdin', ...ROLES_OF[name].flatMap((role) => ['--role', role])];
  const child = spawn(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH ?? '', ...database.env }, stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  child.stdin.end(`${PASSWORDS[name]}\n`);
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`createuser ${name} failed (${code}): ${output}`);
}

describe.each(BACKENDS)(`read rules against a model (seed ${SEED}) on %s`, (backend) => {
  let database: TestDatabase;
  let project: Project;
  let server: RunningServer;
  const auth: Record<Caller, string | null> = {
    admin: adminAuth,
    alice: basic('alice', PASSWORDS.alice),
    bob: basic('bob', PASSWORDS.bob),
    carol: basic('carol', PASSWORDS.carol),
    anonymous: null,
  };
  const who: Partial<Record<Caller, Who>> = { anonymous: { id: null, roles: [] } };
  const pathOf: Partial<Record<Author, string>> = {};
  /** Each collection's records as created, in the model's terms. */
  const records: ModelRecord[][] = [];

  const get = async (path: string, authorization: string | null) => {
    const response = await fetch(new URL(path, server.url), { headers: authorization ? { authorization } : {} });
    const body = await response.text();
    return { status: response.status, text: body, json: response.headers.get('content-type')?.includes('json') && body ? (JSON.parse(body) as Json) : null };
  };

  /** What a record looks like to a caller who may read it. */
  const shown = (record: ModelRecord, users: Map<number, string>) => ({
    id: record.id,
    kind: record.kind,
    n: record.n,
    s: record.s,
    friend: record.friend === null ? null : users.get(record.friend),
    owner: users.get(record.owner),
  });
  const picked = (item: Json) => ({ id: item.id, kind: item.kind, n: item.n, s: item.s, friend: item.friend, owner: item.owner });

  beforeAll(async () => {
    database = await createTestDatabase(backend);
    project = createProject(database, Object.fromEntries(RULES.map((_, index) => [`${collectionName(index)}.ts`, declaration(index)])));
    await runOk(project, ['makemigrations']);
    await runOk(project, ['migrate']);
    server = await project.start();
    for (const name of AUTHORS) {
      if (name !== 'admin') await createUserWithRoles(database, name);
      const me = await get('/api/v1/users/me/', auth[name]!);
      expect(me.status, me.text).toBe(200);
      expect(me.json!.roles, name).toEqual(ROLES_OF[name]);
      who[name] = { id: me.json!.id as number, roles: ROLES_OF[name] };
      pathOf[name] = new URL(me.json!.url as string, server.url).pathname;
    }
    for (let index = 0; index < K; index++) {
      const created: ModelRecord[] = [];
      for (const draft of DRAFTS.slice(index * N, (index + 1) * N)) {
        const response = await fetch(new URL(`/api/v1/${collectionName(index)}/`, server.url), {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: auth[draft.author]! },
          body: JSON.stringify({ kind: draft.kind, n: draft.n, s: draft.s, friend: draft.friend === null ? null : pathOf[draft.friend] }),
        });
        const body = await response.text();
        expect(response.status, body).toBe(201);
        const id = (JSON.parse(body) as Json).id as number;
        created.push({ id, kind: draft.kind, n: draft.n, s: draft.s, friend: draft.friend === null ? null : who[draft.friend]!.id!, owner: who[draft.author]!.id! });
      }
      records.push(created);
    }
  }, 180_000);

  afterAll(async () => {
    await server?.stop();
    project?.cleanup();
    await database?.drop();
  });

  for (const [index, rule] of RULES.entries()) {
    const name = collectionName(index);
    it(`${name} read ${JSON.stringify(ruleSource(rule))}: every page and every retrieve, for every caller, as the model says`, { timeout: 120_000 }, async () => {
      const users = new Map(AUTHORS.map((author) => [who[author]!.id!, pathOf[author]!]));
      const byId = new Map(records[index]!.map((record) => [record.id, record]));
      const context = (caller: Caller, what: string) => `seed ${SEED}, ${name} read ${JSON.stringify(ruleSource(rule))}, ${caller}: ${what}`;

      for (const caller of CALLERS) {
        const expected = judge(rule, who[caller]!, records[index]!);
        const limit = LIMITS[index % LIMITS.length]!;
        const ordering = ORDERINGS[index % ORDERINGS.length]!;
        const first = `/api/v1/${name}/?limit=${limit}${ordering ? `&ordering=${ordering}` : ''}`;
        const refusal = caller === 'anonymous' ? 401 : 403;

        // A missing record: the answer every unreadable record must give, byte for byte.
        const missing = await get(`/api/v1/${name}/999999/`, auth[caller]);
        expect(missing.status, context(caller, 'a missing record')).toBe(expected.refused ? refusal : 404);

        // The list, forwards by `next`: full pages, no record twice, exactly the readable ones.
        const pages: Json[][] = [];
        let previous: string | null = null;
        for (let next: string | null = first; next !== null; ) {
          const page = await get(next, auth[caller]);
          if (expected.refused) {
            expect(page.status, context(caller, `list ${next}`)).toBe(refusal);
            break;
          }
          expect(page.status, context(caller, `list ${next}: ${page.text}`)).toBe(200);
          pages.push(page.json!.results as Json[]);
          previous = page.json!.previous as string | null;
          next = page.json!.next as string | null;
          expect(pages.length, context(caller, 'pages')).toBeLessThanOrEqual(N + 1);
        }
        if (!expected.refused) {
          const ids = pages.flat().map((item) => item.id as number);
          expect(new Set(ids).size, context(caller, `a record twice in ${JSON.stringify(pages.map((p) => p.map((item) => item.id)))}`)).toBe(ids.length);
          expect([...ids].sort((a, b) => a - b), context(caller, `the list walked by ${first}`)).toEqual([...expected.readable].sort((a, b) => a - b));
          const sizes = pages.map((p) => p.length);
          const full = sizes.slice(0, -1).every((size) => size === limit) && (pages.length === 1 || sizes.at(-1)! > 0);
          expect(full, context(caller, `page sizes ${JSON.stringify(sizes)} at limit ${limit}`)).toBe(true);
          for (const item of pages.flat()) expect(picked(item), context(caller, `list item ${item.id}`)).toEqual(shown(byId.get(item.id as number)!, users));

          // Back by `previous` from the last page: the same records again, and no other.
          const back = new Set(pages.at(-1)!.map((item) => item.id as number));
          let steps = 0;
          for (let at: string | null = previous; at !== null; ) {
            const page = await get(at, auth[caller]);
            expect(page.status, context(caller, `list ${at}`)).toBe(200);
            for (const item of page.json!.results as Json[]) back.add(item.id as number);
            at = page.json!.previous as string | null;
            expect(++steps, context(caller, 'pages back')).toBeLessThanOrEqual(N + 1);
          }
          expect([...back].sort((a, b) => a - b), context(caller, 'the list walked back by previous')).toEqual([...expected.readable].sort((a, b) => a - b));
        }

        // Every record: 200 when the model says readable, else exactly the missing record's answer.
        for (const record of records[index]!) {
          const answer = await get(`/api/v1/${name}/${record.id}/`, auth[caller]);
          if (expected.readable.has(record.id) && !expected.refused) {
            expect(answer.status, context(caller, `record ${record.id}: ${answer.text}`)).toBe(200);
            expect(picked(answer.json!), context(caller, `record ${record.id}`)).toEqual(shown(record, users));
          } else {
            expect({ status: answer.status, body: answer.text }, context(caller, `record ${record.id}, unreadable`)).toEqual({ status: missing.status, body: missing.text });
          }
        }
      }
    });
  }

  // A seed whose rules let every caller read all or nothing would test little: some collection
  // must show a signed-in non-admin part of its records, and some refuse or hide records from anonymous.
  it('tells callers apart: the rules of this seed give partial, empty and refused answers', () => {
    const answers = RULES.flatMap((rule, index) => CALLERS.map((caller) => ({ caller, size: records[index]!.length, ...judge(rule, who[caller]!, records[index]!) })));
    expect(answers.some(({ caller, refused, readable, size }) => caller !== 'admin' && caller !== 'anonymous' && !refused && readable.size > 0 && readable.size < size), `seed ${SEED}`).toBe(true);
    expect(answers.some(({ caller, refused, readable, size }) => caller === 'anonymous' && !refused && readable.size > 0 && readable.size < size), `seed ${SEED}`).toBe(true);
    expect(answers.some(({ refused }) => refused), `seed ${SEED}`).toBe(true);
    expect(answers.some(({ refused, readable }) => !refused && readable.size === 0), `seed ${SEED}`).toBe(true);
  });
});
