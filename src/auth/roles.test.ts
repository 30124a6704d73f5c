import { describe, expect, it } from 'vitest';
import { MAX_ROLES, ROLE_MESSAGES, RoleCache, roleProblems, rolesText, storedRoles } from './roles.js';

describe('role names (ACCESS.md §1)', () => {
  it('accepts a lowercase letter then up to 49 of [a-z0-9_-]', () => {
    for (const name of ['a', 'admin', 'staff', 'team-lead', 'ops_2', `a${'b'.repeat(49)}`]) expect(roleProblems([name]), name).toEqual([]);
  });

  it('refuses anything else, naming the bad one', () => {
    for (const name of ['', 'Admin', '1st', '-x', '_x', 'a b', 'é', `a${'b'.repeat(50)}`, 'admin\n', 7, null]) {
      expect(roleProblems(['ok', name]), JSON.stringify(name)).toEqual([ROLE_MESSAGES.badName(name)]);
    }
  });

  it('needs a list of at most 20 distinct names', () => {
    expect(roleProblems('admin')).toEqual([ROLE_MESSAGES.notAList]);
    expect(roleProblems(null)).toEqual([ROLE_MESSAGES.notAList]);
    const names = Array.from({ length: MAX_ROLES }, (_, i) => `r${i}`);
    expect(roleProblems(names)).toEqual([]);
    expect(roleProblems([...names, 'r0'])).toEqual([]);
    expect(roleProblems([...names, 'one-more'])).toEqual([ROLE_MESSAGES.tooMany]);
    expect(roleProblems([])).toEqual([]);
  });

  it('stores each name once, sorted, and reads back only lists', () => {
    expect(rolesText(['staff', 'admin', 'staff'])).toBe('["admin","staff"]');
    expect(storedRoles('["admin","staff"]')).toEqual(['admin', 'staff']);
    expect(storedRoles('not json')).toEqual([]);
    expect(storedRoles('{"a":1}')).toEqual([]);
  });
});

describe('RoleCache', () => {
  function cacheWith(roles: Map<number, string[]>, ttlMs = 1000) {
    const clock = { now: 0 };
    let reads = 0;
    const cache = new RoleCache(
      async (id) => {
        reads++;
        return roles.get(id) ?? [];
      },
      { ttlMs, now: () => clock.now },
    );
    return { cache, clock, reads: () => reads };
  }

  it('reads a user once per TTL, and again after it', async () => {
    const roles = new Map([[1, ['admin']]]);
    const { cache, clock, reads } = cacheWith(roles);
    expect(await cache.current(1)).toEqual(['admin']);
    roles.set(1, []);
    clock.now = 999;
    expect(await cache.current(1)).toEqual(['admin']);
    expect(reads()).toBe(1);
    clock.now = 1000;
    expect(await cache.current(1)).toEqual([]);
    expect(reads()).toBe(2);
  });

  it('forgets a user at once', async () => {
    const roles = new Map([[1, ['admin']]]);
    const { cache } = cacheWith(roles);
    await cache.current(1);
    roles.set(1, ['staff']);
    cache.forget(1);
    expect(await cache.current(1)).toEqual(['staff']);
  });

  it('does not file a read that was under way when the user was forgotten', async () => {
    let release!: (roles: string[]) => void;
    let calls = 0;
    const cache = new RoleCache(() => {
      calls++;
      return calls === 1 ? new Promise((resolve) => (release = resolve)) : Promise.resolve(['staff']);
    });
    const first = cache.current(1);
    cache.forget(1);
    release(['admin']);
    expect(await first).toEqual(['admin']);
    expect(await cache.current(1)).toEqual(['staff']);
  });

  it('does not remember a failed read', async () => {
    let fail = true;
    const cache = new RoleCache(async () => {
      if (fail) throw new Error('outage');
      return ['admin'];
    });
    await expect(cache.current(1)).rejects.toThrow('outage');
    fail = false;
    expect(await cache.current(1)).toEqual(['admin']);
  });
});
