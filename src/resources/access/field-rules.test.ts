import { describe, expect, it } from 'vitest';
import type { User } from '../../http/caller.js';
import { field } from '../fields/index.js';
import { defineResource, type Change, type ResourceOptions } from '../resource.js';
import { changeWithout, fieldsAreShared, fieldVerdicts, withoutFields } from './field-rules.js';

// Field rules (ACCESS.md §3): read when the declaration is made, folded per caller.
const resumes = (fields: ResourceOptions['fields'] = {}, overrides: Partial<ResourceOptions> = {}): ResourceOptions => ({
  name: 'resumes',
  fields: {
    title: field.string({ maxLength: 100 }),
    email: field.string({ maxLength: 100, required: false, access: { read: 'owner=@me' } }),
    status: field.choice(['new', 'reviewed'], { default: 'new', access: { write: '@role=editor' } }),
    ...fields,
  },
  owner: true,
  ...overrides,
});
const user = (id: number, roles: string[] = []): User => ({ id, username: `user${id}`, passwordChangedAt: 0, roles });

describe('field rules: declarations (ACCESS.md §3)', () => {
  it('keeps the rules of restricted fields only; `*` is no rule', () => {
    const resource = defineResource(resumes({ public: field.string({ maxLength: 5, required: false, access: { read: '*', write: ['@role=x', '*'] } }) }));
    expect(Object.keys(resource.fieldAccess)).toEqual(['email', 'status']);
    expect(resource.fieldAccess.email!.write).toBeNull();
    expect(resource.fieldAccess.status!.read).toBeNull();
    expect(fieldsAreShared(resource)).toBe(false);
    expect(fieldsAreShared(defineResource(resumes({}, { fields: { title: field.string({ maxLength: 5 }) } })))).toBe(true);
  });

  it('names the collection, the field and the rule of a rule that does not read', () => {
    const declare = (access: unknown) => () => defineResource(resumes({ note: field.string({ maxLength: 5, required: false, access: access as never }) }));
    expect(declare({ read: 'colour=red' })).toThrow('collection "resumes", field "note": access.read rule "colour=red": unknown field "colour"');
    expect(declare({ write: '@role=Bad' })).toThrow('field "note": access.write rule "@role=Bad"');
    expect(declare({ read: 'title=@me' })).toThrow('field "note": access.read rule "title=@me": @me is a user');
    expect(declare({ update: '*' })).toThrow('field "note": access.read rule "update": unknown action "update"');
    expect(declare('owner=@me')).toThrow('field "note"');
    expect(() => defineResource(resumes({}, { owner: false }))).toThrow('field "email": access.read rule "owner=@me": "owner" names no field');
  });

  it('refuses ordering by a field with a read rule, and a required field with a write rule', () => {
    expect(() => defineResource(resumes({}, { orderings: ['email'] }))).toThrow('field "email": cannot order by "email": it has a read rule');
    expect(() => defineResource(resumes({}, { orderings: ['status'] }))).not.toThrow();
    expect(() => defineResource(resumes({ level: field.integer({ access: { write: '@role=editor' } }) }))).toThrow('field "level": a field with a write rule needs a default');
  });
});

describe('field rules for one caller', () => {
  const resource = defineResource(resumes());

  it('folds what the caller alone decides; admins pass; the record decides the rest', () => {
    expect([...fieldVerdicts(resource, 'write', user(2)).entries()]).toEqual([['status', false]]);
    expect(fieldVerdicts(resource, 'write', user(2, ['editor'])).size).toBe(0);
    expect(fieldVerdicts(resource, 'read', user(1, ['admin'])).size).toBe(0);
    expect(fieldVerdicts(resource, 'read', null).get('email')).toBe(false);
    expect(typeof fieldVerdicts(resource, 'read', user(2)).get('email')).toBe('function');
  });

  it('removes hidden fields from a record and from a change', () => {
    const record = { url: '/api/v1/resumes/1/', id: 1, title: 'CV', email: 'a@b.test' };
    expect(withoutFields(record, new Set(['email']))).toEqual({ url: '/api/v1/resumes/1/', id: 1, title: 'CV' });
    expect(withoutFields(record, undefined)).toBe(record);
    const change: Change = { resource, action: 'updated', record, changes: { email: { from: 'old@b.test' }, title: { from: 'Old' } }, actor: user(2) };
    const seen = changeWithout(change, new Set(['email']));
    expect(seen.record).not.toHaveProperty('email');
    expect(seen.changes).toEqual({ title: { from: 'Old' } });
    expect(change.record.email).toBe('a@b.test');
  });
});
