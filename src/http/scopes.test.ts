import { describe, expect, it } from 'vitest';
import { scopesAllow, type KeyAccess } from './scopes.js';

const experiences: KeyAccess = { collection: 'experiences', most: 'write' };
const users: KeyAccess = { collection: 'users', most: 'read' };
const keys: KeyAccess = { collection: 'keys', most: 'none' };

describe('scopesAllow', () => {
  it('lets COLLECTION:read read and COLLECTION:write also write', () => {
    for (const method of ['GET', 'HEAD', 'OPTIONS']) expect(scopesAllow(['experiences:read'], experiences, method)).toBe(true);
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      expect(scopesAllow(['experiences:read'], experiences, method)).toBe(false);
      expect(scopesAllow(['experiences:write'], experiences, method)).toBe(true);
    }
    expect(scopesAllow(['experiences:write'], experiences, 'GET')).toBe(true);
  });

  it('reads * as every collection, and another collection’s scope as nothing here', () => {
    expect(scopesAllow(['*:read'], experiences, 'GET')).toBe(true);
    expect(scopesAllow(['*:read'], experiences, 'POST')).toBe(false);
    expect(scopesAllow(['*:write'], experiences, 'POST')).toBe(true);
    expect(scopesAllow(['webhooks:write'], experiences, 'GET')).toBe(false);
    expect(scopesAllow([], experiences, 'GET')).toBe(false);
  });

  it('holds a view to the most any key may do there', () => {
    expect(scopesAllow(['*:write'], users, 'GET')).toBe(true);
    expect(scopesAllow(['*:write', 'users:write'], users, 'PATCH')).toBe(false);
    expect(scopesAllow(['*:write', 'keys:write'], keys, 'GET')).toBe(false);
  });

  it('lets every key read a view of no collection and write to none', () => {
    expect(scopesAllow([], undefined, 'GET')).toBe(true);
    expect(scopesAllow(['*:write'], undefined, 'POST')).toBe(false);
  });
});
