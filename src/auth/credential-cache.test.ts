import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CredentialCache } from './credential-cache.js';
import { PasswordChangeLog } from './password-changes.js';
import type { User } from '../http/caller.js';

const T0 = 1_800_000_000_000;
const alice: User = { id: 1, username: 'alice', passwordChangedAt: T0 - 1000, roles: [] };
const bob: User = { id: 2, username: 'bob', passwordChangedAt: T0 - 1000, roles: [] };

function setup(options: { maxEntries?: number; ttlMs?: number } = {}) {
  const clock = { now: T0 };
  const changes = new PasswordChangeLog(900_000, () => clock.now);
  const cache = new CredentialCache(randomBytes(32), changes, { ...options, now: () => clock.now });
  return { clock, changes, cache };
}

describe('CredentialCache', () => {
  it('remembers verified credentials, and only those exact credentials', () => {
    const { cache } = setup();
    expect(cache.get('alice', 'pw-alice-1')).toBeNull();
    cache.set('alice', 'pw-alice-1', alice);
    expect(cache.get('alice', 'pw-alice-1')).toEqual(alice);
    expect(cache.get('alice', 'pw-alice-2')).toBeNull();
    expect(cache.get('Alice', 'pw-alice-1')).toBeNull();
  });

  it('does not confuse where the username ends and the password begins', () => {
    const { cache } = setup();
    cache.set('a', 'b\0c', alice);
    expect(cache.get('a\0b', 'c')).toBeNull();
    expect(cache.get('a', 'b\0c')).toEqual(alice);
  });

  it('never holds the password or the username in its keys', () => {
    const { cache } = setup();
    cache.set('alice', 'pw-alice-1', alice);
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a look inside, to check what is kept
    const keys = [...(cache as any).entries.keys()] as string[];
    expect(keys).toHaveLength(1);
    expect(keys[0]).not.toContain('pw-alice-1');
    expect(keys[0]).not.toContain('alice');
  });

  it('forgets entries after the TTL', () => {
    const { cache, clock } = setup({ ttlMs: 60_000 });
    cache.set('alice', 'pw-alice-1', alice);
    clock.now += 59_999;
    expect(cache.get('alice', 'pw-alice-1')).toEqual(alice);
    clock.now += 1;
    expect(cache.get('alice', 'pw-alice-1')).toBeNull();
    expect(cache.size).toBe(0);
  });

  it('is bounded, evicting the least recently used entry', () => {
    const { cache } = setup({ maxEntries: 2 });
    cache.set('alice', 'pw-alice-1', alice);
    cache.set('bob', 'pw-bob-1', bob);
    expect(cache.get('alice', 'pw-alice-1')).toEqual(alice); // alice is now the most recent
    cache.set('carol', 'pw-carol-1', { id: 3, username: 'carol', passwordChangedAt: T0, roles: [] });
    expect(cache.size).toBe(2);
    expect(cache.get('bob', 'pw-bob-1')).toBeNull();
    expect(cache.get('alice', 'pw-alice-1')).toEqual(alice);
  });

  it('voids a user\'s entries at once when their password changes', () => {
    const { cache, changes, clock } = setup();
    cache.set('alice', 'pw-alice-1', alice);
    cache.set('bob', 'pw-bob-1', bob);
    changes.note(alice.id, clock.now);
    expect(cache.get('alice', 'pw-alice-1')).toBeNull();
    expect(cache.get('bob', 'pw-bob-1')).toEqual(bob);
  });

  it('voids older entries once a fresh check shows a newer password', () => {
    const { cache, clock } = setup();
    cache.set('alice', 'old-password', alice);
    clock.now += 1000;
    // Another process changed the password; this one learns it from the next full check.
    cache.set('alice', 'new-password', { ...alice, passwordChangedAt: clock.now - 10 });
    expect(cache.get('alice', 'old-password')).toBeNull();
    expect(cache.get('alice', 'new-password')).not.toBeNull();
  });

  it('rejects nonsensical options at start-up', () => {
    const changes = new PasswordChangeLog(1000);
    expect(() => new CredentialCache(randomBytes(32), changes, { maxEntries: 0 })).toThrow(RangeError);
    expect(() => new CredentialCache(randomBytes(32), changes, { ttlMs: 0 })).toThrow(RangeError);
  });
});

describe('PasswordChangeLog', () => {
  it('keeps only changes recent enough to matter', () => {
    const clock = { now: T0 };
    const log = new PasswordChangeLog(60_000, () => clock.now);
    log.note(1, T0 - 120_000);
    expect(log.isSuperseded(1, 0)).toBe(false);
    log.note(1, T0);
    expect(log.isSuperseded(1, T0 - 1)).toBe(true);
    expect(log.isSuperseded(1, T0)).toBe(false);
    log.note(1, T0 - 5);
    expect(log.isSuperseded(1, T0 - 1)).toBe(true);
  });
});
