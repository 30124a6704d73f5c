import { describe, expect, it } from 'vitest';
import { allowAny, and, authenticatedOrReadOnly, isAuthenticated, not, ownerOrReadOnly } from '../../auth/permissions.js';
import type { User } from '../../http/caller.js';
import { field } from '../fields/index.js';
import { defineResource, type ResourceOptions } from '../resource.js';
import { compileRule, mayAttempt } from './compile.js';

// The `notes` example of ACCESS.md §2.
const notes = (overrides: Partial<ResourceOptions> = {}): ResourceOptions => ({
  name: 'notes',
  fields: {
    body: field.text({ maxLength: 5000 }),
    visibility: field.choice(['private', 'team', 'public'], { default: 'private' }),
    team_lead: field.reference('users', { nullable: true, required: false }),
    reviewers: field.references('users', { required: false }),
    stars: field.integer({ required: false }),
    meta: field.json({ required: false }),
  },
  owner: true,
  access: {
    read: ['visibility=public', 'owner=@me', 'visibility=team&@role=staff'],
    create: '@authenticated',
    update: ['owner=@me', 'team_lead=@me'],
    delete: 'owner=@me',
  },
  ...overrides,
});
const user = (id: number, roles: string[] = []): User => ({ id, username: `user${id}`, passwordChangedAt: 0, roles });
const withAccess = (access: ResourceOptions['access']) => () => defineResource(notes({ access }));

describe('access rules: declaration errors (ACCESS.md §2)', () => {
  it('reads the example of ACCESS.md', () => {
    const resource = defineResource(notes());
    expect(resource.access!.read).toHaveLength(3);
    expect(resource.access!.read[2]!.map((term) => term.kind)).toEqual(['field', 'role']);
    expect(resource.access!.update[1]).toEqual([expect.objectContaining({ kind: 'me', field: 'team_lead' })]);
  });

  it('names the collection, the action and the rule of an unknown field or lookup', () => {
    expect(withAccess({ read: 'colour=red' })).toThrow('collection "notes": access.read rule "colour=red": unknown field "colour"');
    expect(withAccess({ read: 'visibility__near=public' })).toThrow(/access\.read rule "visibility__near=public": unknown lookup "near"/);
    expect(withAccess({ read: 'stars__contains=1' })).toThrow(/"contains" needs a text field/);
    expect(withAccess({ read: 'meta=1' })).toThrow(/a json field/);
    expect(withAccess({ update: 'constructor=1' })).toThrow(/access\.update rule "constructor=1": unknown field "constructor"/);
  });

  it('refuses a value the field would refuse, as a list filter does', () => {
    expect(withAccess({ read: 'visibility=secret' })).toThrow(/access\.read rule "visibility=secret": the value "secret" of visibility: "secret" is not a valid choice/);
    expect(withAccess({ read: 'stars__gte=many' })).toThrow(/the value "many" of stars/);
    expect(withAccess({ read: 'reviewers__gt=1' })).toThrow(/does not apply to a list of references/);
  });

  it('refuses a bad term: empty, unknown @ word, bad role, no operator', () => {
    expect(withAccess({ read: '' })).toThrow(/access\.read rule "": an empty term/);
    expect(withAccess({ read: 'owner=@me&' })).toThrow(/an empty term/);
    expect(withAccess({ read: '@staff' })).toThrow(/access\.read rule "@staff": unknown term "@staff"/);
    expect(withAccess({ read: '@me' })).toThrow(/unknown term "@me"/);
    expect(withAccess({ read: '@role=Staff' })).toThrow(/"Staff" is not a role name/);
    expect(withAccess({ read: '@role=' })).toThrow(/is not a role name/);
    expect(withAccess({ read: 'visibility' })).toThrow(/"visibility" is neither \*, @authenticated, @role=NAME nor FIELD\[__LOOKUP\]=VALUE/);
    expect(withAccess({ read: [] })).toThrow(/non-empty list/);
    expect(withAccess({ read: [1 as unknown as string] })).toThrow(/a rule is a string/);
    expect(withAccess({ view: '*' } as never)).toThrow(/unknown action "view"/);
  });

  it('allows @me only as the whole value of owner or a reference to users, compared exactly', () => {
    expect(withAccess({ read: 'body=@me' })).toThrow(/access\.read rule "body=@me": @me is a user: it compares with owner or a reference to users, not "body"/);
    expect(withAccess({ read: 'id=@me' })).toThrow(/@me is a user/);
    expect(withAccess({ read: 'owner__in=@me' })).toThrow(/@me compares with exact only/);
    expect(withAccess({ read: 'owner=@me,2' })).toThrow(/@me is a whole value/);
    expect(() => defineResource(notes({ access: { read: 'reviewers=@me' } }))).not.toThrow();
    const pages = { name: 'pages', fields: { parent: field.reference('pages', { nullable: true, required: false }) } };
    expect(() => defineResource({ ...pages, access: { read: 'parent=@me' } })).toThrow(/@me is a user/);
    expect(() => defineResource({ ...pages, access: { read: 'owner=@me' } })).toThrow(/access\.read rule "owner=@me": "owner" names no field: the collection has no owner/);
  });

  it('refuses access and permission together', () => {
    expect(() => defineResource(notes({ permission: allowAny }))).toThrow('collection "notes": state access or permission, not both');
  });
});

describe('access rules for one caller (ACCESS.md §2, §7)', () => {
  const { access } = defineResource(notes());
  const rules = access!;

  it('folds terms on the caller before any SQL', () => {
    expect(typeof compileRule(rules.read, null)).toBe('function');
    expect(compileRule(rules.create, null)).toBe(false);
    expect(compileRule(rules.create, user(1))).toBe(true);
    // @me never holds for an anonymous caller: nothing left to compare.
    expect(compileRule(rules.delete, null)).toBe(false);
    expect(typeof compileRule(rules.delete, user(1))).toBe('function');
  });

  it('lets admins pass every rule, and an action left out is for admins only', () => {
    const admin = user(9, ['admin']);
    const adminsOnly = defineResource(notes({ access: { read: '*' } })).access!;
    for (const action of ['create', 'update', 'delete'] as const) {
      expect(compileRule(adminsOnly[action], user(1, ['staff']))).toBe(false);
      expect(compileRule(adminsOnly[action], admin)).toBe(true);
    }
    expect(compileRule(rules.read, admin)).toBe(true);
    expect(compileRule(defineResource(notes({ access: { read: '@role=staff' } })).access!.read, admin)).toBe(true);
  });

  it('decides a role term by the caller’s roles', () => {
    const staffOnly = defineResource(notes({ access: { read: '@role=staff', create: ['@role=editor', '@role=staff&@authenticated'] } })).access!;
    expect(compileRule(staffOnly.read, user(1))).toBe(false);
    expect(compileRule(staffOnly.read, user(1, ['staff']))).toBe(true);
    expect(mayAttempt(staffOnly, 'create', user(1, ['staff']))).toBe(true);
    expect(mayAttempt(staffOnly, 'create', user(1, ['viewer']))).toBe(false);
    expect(mayAttempt(staffOnly, 'update', user(1, ['staff']))).toBe(false);
  });
});

describe('built-in permissions as rules (ACCESS.md §2)', () => {
  const plain = (permission: ResourceOptions['permission'], owner = true) =>
    defineResource({ name: 'things', fields: { title: field.string({ maxLength: 9 }) }, owner, ...(permission ? { permission } : {}) });

  it('maps allowAny, isAuthenticated, authenticatedOrReadOnly and ownerOrReadOnly, and the default', () => {
    expect(compileRule(plain(allowAny, false).access!.delete, null)).toBe(true);
    expect(compileRule(plain(isAuthenticated).access!.read, null)).toBe(false);
    expect(compileRule(plain(isAuthenticated).access!.read, user(1))).toBe(true);
    expect(compileRule(plain(authenticatedOrReadOnly).access!.read, null)).toBe(true);
    expect(compileRule(plain(authenticatedOrReadOnly).access!.update, null)).toBe(false);
    expect(typeof compileRule(plain(ownerOrReadOnly).access!.update, user(1))).toBe('function');
    const byDefault = plain(undefined).access!;
    expect(compileRule(byDefault.read, null)).toBe(true);
    expect(compileRule(byDefault.create, null)).toBe(false);
    expect(compileRule(byDefault.create, user(1))).toBe(true);
    expect(typeof compileRule(byDefault.update, user(1))).toBe('function');
    expect(compileRule(byDefault.update, null)).toBe(false);
  });

  it('keeps a permission the rules cannot state as it is', () => {
    expect(plain(not(isAuthenticated)).access).toBeNull();
    // ownerOrReadOnly names the owner: on a collection without one it keeps its two checks.
    expect(plain(and(authenticatedOrReadOnly, ownerOrReadOnly), false).access).toBeNull();
  });
});
