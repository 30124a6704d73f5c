import type { Config } from '../config.js';
import type { Storage } from '../db/database.js';
import type { Authenticator } from '../http/caller.js';
import type { LimiterFactory } from '../http/throttling/request-throttle.js';
import { ApiKeys, apiKeyAuthentication } from './api-keys.js';
import { basicAuthentication, storeVerifier, type CredentialVerifier } from './authenticators.js';
import { CredentialCache } from './credential-cache.js';
import { trustedOrigins } from './csrf.js';
import type { Keys } from './keys.js';
import { LoginThrottle, throttledVerifier } from './login-throttle.js';
import { PasswordChangeLog } from './password-changes.js';
import { RefreshTokens } from './refresh-tokens.js';
import { RoleCache, withCurrentRoles } from './roles.js';
import { SessionStore, sessionAuthentication } from './sessions.js';
import { AccessTokens, bearerAuthentication, createKeyring } from './tokens.js';
import type { UserStore } from './users.js';

/** How long a verified Basic credential is trusted without the slow hash (issue #3). */
export const CREDENTIAL_CACHE_TTL_MS = 60_000;

/** Everything sign-in needs, built once per process. */
export interface Authentication {
  /** Tried in this order (API.md §3): Basic, Bearer (an API key, then an access token), session. */
  readonly authenticators: readonly Authenticator[];
  /** Password check for every scheme: login throttle → credential cache → user store. */
  readonly verify: CredentialVerifier;
  readonly accessTokens: AccessTokens;
  readonly refreshTokens: RefreshTokens;
  readonly sessions: SessionStore;
  /** API keys (ACCESS.md §5): the `keys` collection issues them and tells this of revokes. */
  readonly apiKeys: ApiKeys;
  /** Each caller's current roles; told of a role change made here, it forgets the old ones at once. */
  readonly roles: RoleCache;
  /** Origins a browser may send session requests from, besides the request's own (csrf.ts). */
  readonly trustedOrigins: readonly string[];
}

export interface AuthenticationOptions {
  readonly config: Config;
  readonly storage: Storage;
  readonly keys: Keys;
  readonly users: UserStore;
  /** The same store as the request throttle (memory, or Redis when REDIS_URL is set). */
  readonly limiterFactory?: LimiterFactory;
}

/** Builds the authenticators and the stores behind them. */
export async function createAuthentication({ config, storage, keys, users, limiterFactory }: AuthenticationOptions): Promise<Authentication> {
  // A stale credential lives at most as long as the longer of an access token and a cache entry.
  const passwordChanges = new PasswordChangeLog(Math.max(config.accessTokenSeconds * 1000, CREDENTIAL_CACHE_TTL_MS));
  users.onPasswordChange((userId, changedAt) => passwordChanges.note(userId, changedAt));

  const cache = new CredentialCache(keys.derive('credential-cache'), passwordChanges, { ttlMs: CREDENTIAL_CACHE_TTL_MS });
  const verify = throttledVerifier(storeVerifier(users), new LoginThrottle(limiterFactory), cache);
  const accessTokens = new AccessTokens(await createKeyring(keys.derive('access-token')), config.accessTokenSeconds, passwordChanges);
  const refreshTokens = new RefreshTokens(storage.db, config.refreshTokenSeconds);
  const sessions = new SessionStore(storage.db, {
    idleMs: config.sessionIdleSeconds * 1000,
    absoluteMs: config.sessionAbsoluteSeconds * 1000,
    secureCookies: new URL(config.publicUrl).protocol === 'https:',
  });
  const trusted = trustedOrigins(config);
  const apiKeys = new ApiKeys(storage.db, users);
  // Every scheme's caller gets their current roles the same way (ACCESS.md §1): tokens and cached
  // credentials carry none, and a change must reach them too.
  const roles = new RoleCache((userId) => users.rolesOf(userId));
  users.onRolesChange((userId) => roles.forget(userId));

  return {
    authenticators: [
      basicAuthentication(verify),
      apiKeyAuthentication(apiKeys),
      bearerAuthentication(accessTokens),
      sessionAuthentication(sessions, trusted),
    ].map((authenticator) => withCurrentRoles(authenticator, roles)),
    verify,
    accessTokens,
    refreshTokens,
    sessions,
    apiKeys,
    roles,
    trustedOrigins: trusted,
  };
}
