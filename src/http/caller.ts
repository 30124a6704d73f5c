// Who is calling and the policy interfaces that judge them (DRF's authentication and permission
// interfaces). They live in http/ because the pipeline runs them; auth/ implements them.
import type { FastifyRequest } from 'fastify';

/** The authenticated caller. Anonymous callers have no User at all (SEED.md §5 rule 3). */
export interface User {
  readonly id: number;
  readonly username: string;
  /** Changes with the password; caches and refresh tokens issued before it are void. */
  readonly passwordChangedAt: number;
  /** The caller's roles at the moment of the request (ACCESS.md §1). */
  readonly roles: readonly string[];
}

/** The built-in role that passes every access rule (ACCESS.md §1). */
export const ADMIN_ROLE = 'admin';

/** Whether the caller has the built-in `admin` role. */
export function isAdmin(user: User | null): boolean {
  return user?.roles.includes(ADMIN_ROLE) ?? false;
}

/** How the caller proved who they are (`key`: an API key, ACCESS.md §5). */
export type AuthScheme = 'basic' | 'bearer' | 'session' | 'key';

export interface Identity {
  readonly user: User;
  readonly scheme: AuthScheme;
  /**
   * An API key's scopes (ACCESS.md §5): the pipeline's permit stage refuses what they do not
   * grant (`scopes.ts`). Absent for every other scheme, which may do whatever the user may.
   */
  readonly scopes?: readonly string[];
}

/**
 * DRF's authentication interface: an authenticator returns who the caller is, null when the
 * request does not use its scheme (the next one is tried), or throws AuthenticationFailed when
 * it does use the scheme but the credentials are wrong (API.md §3: 401 even on GET).
 */
export interface Authenticator {
  readonly scheme: string;
  authenticate(request: FastifyRequest): Promise<Identity | null>;
}

/** What a permission sees of the request. */
export interface PermissionContext {
  readonly method: string;
  readonly user: User | null;
}

/** A record a permission can judge; `ownerId` is null for records nobody owns. */
export interface OwnedRecord {
  readonly ownerId: number | null;
}

/**
 * DRF's permission interface: `hasPermission` before the handler runs, `hasObjectPermission`
 * once the record is loaded. Both must allow.
 */
export interface Permission {
  readonly name: string;
  /**
   * The same policy as access rules (ACCESS.md §2), when it can be written as them: the
   * declaration then gets these rules, so one mechanism judges records. Absent: only the two checks.
   */
  readonly rules?: PermissionRules;
  hasPermission(context: PermissionContext): boolean;
  hasObjectPermission(context: PermissionContext, record: OwnedRecord): boolean;
}

/** Access rules in their source language (resources/access/rules.ts reads them), by action. */
export type PermissionRules = Readonly<Partial<Record<'read' | 'create' | 'update' | 'delete', string | readonly string[]>>>;
