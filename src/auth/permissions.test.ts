import { describe, expect, it } from 'vitest';
import { allowAny, and, authenticatedOrReadOnly, isAuthenticated, not, or, ownerOrReadOnly } from './permissions.js';

const alice = { id: 1, username: 'alice', passwordChangedAt: 0, roles: [] };
const bob = { id: 2, username: 'bob', passwordChangedAt: 0, roles: [] };
const alicesRecord = { ownerId: 1 };

describe('permissions', () => {
  it('authenticatedOrReadOnly: anyone reads, only a user writes', () => {
    expect(authenticatedOrReadOnly.hasPermission({ method: 'GET', user: null })).toBe(true);
    expect(authenticatedOrReadOnly.hasPermission({ method: 'HEAD', user: null })).toBe(true);
    expect(authenticatedOrReadOnly.hasPermission({ method: 'POST', user: null })).toBe(false);
    expect(authenticatedOrReadOnly.hasPermission({ method: 'POST', user: alice })).toBe(true);
  });

  it('ownerOrReadOnly: anyone reads a record, only its owner changes it', () => {
    expect(ownerOrReadOnly.hasObjectPermission({ method: 'GET', user: null }, alicesRecord)).toBe(true);
    expect(ownerOrReadOnly.hasObjectPermission({ method: 'PATCH', user: alice }, alicesRecord)).toBe(true);
    expect(ownerOrReadOnly.hasObjectPermission({ method: 'PATCH', user: bob }, alicesRecord)).toBe(false);
    expect(ownerOrReadOnly.hasObjectPermission({ method: 'DELETE', user: null }, alicesRecord)).toBe(false);
  });

  it('and needs both; or needs either, checking each side whole; not inverts', () => {
    const both = and(authenticatedOrReadOnly, ownerOrReadOnly);
    expect(both.hasPermission({ method: 'PUT', user: null })).toBe(false);
    expect(both.hasObjectPermission({ method: 'PUT', user: bob }, alicesRecord)).toBe(false);
    expect(both.hasObjectPermission({ method: 'PUT', user: alice }, alicesRecord)).toBe(true);

    // As DRF's OR: a side counts for a record only if it also grants the request.
    const either = or(isAuthenticated, ownerOrReadOnly);
    expect(either.hasPermission({ method: 'DELETE', user: null })).toBe(true);
    expect(either.hasObjectPermission({ method: 'DELETE', user: null }, alicesRecord)).toBe(false);
    expect(either.hasObjectPermission({ method: 'DELETE', user: bob }, alicesRecord)).toBe(true);

    const anonymousOnly = not(isAuthenticated);
    expect(anonymousOnly.hasPermission({ method: 'GET', user: null })).toBe(true);
    expect(anonymousOnly.hasPermission({ method: 'GET', user: alice })).toBe(false);
    expect(not(allowAny).hasPermission({ method: 'GET', user: null })).toBe(false);
    expect(both.name).toBe('and(authenticatedOrReadOnly, ownerOrReadOnly)');
  });
});
