// Roles (ACCESS.md §1): what a role name may be, how a user's roles are stored (a JSON list in
// `users.roles`), the rule that the last admin keeps `admin`, and the per-process cache through
// which every scheme (Basic, Bearer, sessions, keys) reads the caller's roles at each request.

import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { ADMIN_ROLE, type Authenticator } from '../http/caller.js';

/** A role name: a lowercase letter, then up to 49 lowercase letters, digits, `_` or `-`. */
export const ROLE_NAME = /^[a-z][a-z0-9_-]{0,49}$/;
/** The most roles one user has. */
export const MAX_ROLES = 20;

/**
 * A role change made by another process is seen within this long (ACCESS.md §1: within 60 s);
 * one made through this process at once (`RoleCache.forget`).
 */
export const ROLE_CACHE_TTL_MS = 30_000;

export const ROLE_MESSAGES = {
  notAList: 'Expected a list of role names.',
  badName: (name: unknown) =>
    `${JSON.stringify(name)} is not a valid role name: a lowercase letter, then at most 49 lowercase letters, digits, "_" or "-".`,
  tooMany: `Ensure this field has no more than ${MAX_ROLES} roles.`,
  lastAdmin: `The last user with the "${ADMIN_ROLE}" role cannot lose it.`,
};

/** What is wrong with a list of roles as given (API body or CLI); empty when nothing is. */
export function roleProblems(roles: unknown): string[] {
  if (!Array.isArray(roles)) return [ROLE_MESSAGES.notAList];
  const bad = roles.find((name) => typeof name !== 'string' || !ROLE_NAME.test(name));
  if (bad !== undefined) return [ROLE_MESSAGES.badName(bad)];
  if (new Set(roles).size > MAX_ROLES) return [ROLE_MESSAGES.tooMany];
  return [];
}

/** A valid list as stored: each name once, sorted, as JSON text. */
export function rolesText(roles: readonly string[]): string {
  return JSON.stringify([...new Set(roles)].sort());
}

/** The stored JSON list, read back; anything else reads as no roles. */
export function storedRoles(text: unknown): string[] {
  try {
    const roles = JSON.parse(String(text)) as unknown;
    return Array.isArray(roles) ? roles.filter((name): name is string => typeof name === 'string') : [];
  } catch {
    return [];
  }
}

/** Taking `admin` from the last user who has it (ACCESS.md §1). */
export class LastAdmin extends Error {
  constructor() {
    super(ROLE_MESSAGES.lastAdmin);
    this.name = 'LastAdmin';
  }
}

// The row every change that takes `admin` away locks, so two admins removing each other's
// `admin` at once are judged one after the other (PostgreSQL's READ COMMITTED would let both
// see the other still an admin). An upsert locks the row on both databases.
const ROLE_LOCK = 'roles_lock';

/**
 * Throws LastAdmin when changing `before` to `after` would leave no admin. Run in the change's
 * transaction, after the user's own row is locked (the viewset's update does; `UserStore.setRoles` too).
 */
export async function checkAdminRemains(trx: Kysely<Database>, userId: number, before: readonly string[], after: readonly string[]): Promise<void> {
  if (!before.includes(ADMIN_ROLE) || after.includes(ADMIN_ROLE)) return;
  await trx
    .insertInto('settings')
    .values({ key: ROLE_LOCK, value: '' })
    .onConflict((oc) => oc.column('key').doUpdateSet({ value: '' }))
    .execute();
  // Names are JSON strings of [a-z0-9_-], so `"admin"` occurs only as that element.
  const other = await trx
    .selectFrom('users')
    .select('id')
    .where('id', '<>', userId)
    .where('roles', 'like', `%"${ADMIN_ROLE}"%`)
    .limit(1)
    .executeTakeFirst();
  if (!other) throw new LastAdmin();
}

export interface RoleCacheOptions {
  readonly ttlMs?: number;
  readonly maxEntries?: number;
  readonly now?: () => number;
}

/**
 * Each user's roles, read at most once per `ttlMs` per process, so that a Bearer token or a
 * cached Basic credential (which carry no roles) costs no database read per request, and a
 * change is still seen everywhere within the TTL. The entry holds the read's promise from its
 * start, so a read under way when `forget` is called is never filed afterwards.
 */
export class RoleCache {
  private readonly entries = new Map<number, { roles: Promise<readonly string[]>; expiresAt: number }>();
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;

  constructor(
    private readonly load: (userId: number) => Promise<readonly string[]>,
    { ttlMs = ROLE_CACHE_TTL_MS, maxEntries = 10_000, now = Date.now }: RoleCacheOptions = {},
  ) {
    this.ttlMs = ttlMs;
    this.maxEntries = maxEntries;
    this.now = now;
  }

  /** The user's roles as of at most `ttlMs` ago (or since the last `forget` here). */
  current(userId: number): Promise<readonly string[]> {
    const entry = this.entries.get(userId);
    if (entry !== undefined && entry.expiresAt > this.now()) return entry.roles;
    const roles = this.load(userId);
    // A failed read is not remembered: the next request tries again.
    roles.catch(() => {
      if (this.entries.get(userId)?.roles === roles) this.entries.delete(userId);
    });
    this.entries.delete(userId);
    this.entries.set(userId, { roles, expiresAt: this.now() + this.ttlMs });
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    return roles;
  }

  /** Drops what is known of a user's roles (after a change committed through this process). */
  forget(userId: number): void {
    this.entries.delete(userId);
  }
}

/** The authenticator with the caller's current roles on the user it returns, whatever the scheme. */
export function withCurrentRoles(authenticator: Authenticator, roles: RoleCache): Authenticator {
  return {
    scheme: authenticator.scheme,
    async authenticate(request) {
      const identity = await authenticator.authenticate(request);
      if (identity === null) return null;
      return { ...identity, user: { ...identity.user, roles: await roles.current(identity.user.id) } };
    },
  };
}
