import { createHash } from 'node:crypto';
import { errors as joseErrors, jwtVerify, SignJWT, type CryptoKey, type JWTVerifyGetKey } from 'jose';
import { InvalidToken } from '../http/errors.js';
import type { Authenticator } from '../http/caller.js';
import { readAuthorization } from './authenticators.js';
import type { PasswordChangeLog } from './password-changes.js';
import type { User } from '../http/caller.js';

/**
 * Access tokens (API.md §3): HS256 JWTs verified without a database read. The algorithm is
 * pinned, so `alg: none` and algorithm-confusion tokens fail before any key is looked at.
 *
 * Claims: `sub` (user id), `name` (username), `pwd` (the password time the token was issued
 * under, see password-changes.ts), `iat`, `exp`, and `typ: "access"` so that no other JWT this
 * server might sign later passes for an access token.
 */
const ALGORITHM = 'HS256';
const TOKEN_TYPE = 'access';
/** How many verified tokens are remembered (about 150 bytes each). */
const VERIFIED_CACHE_SIZE = 10_000;

/** One signing key and its id. */
export interface TokenKey {
  readonly kid: string;
  readonly key: CryptoKey;
}

/**
 * The keys tokens are checked against: `current` signs, every key verifies. Rotation: put the
 * new key first and keep the old one until the longest-lived token it signed has expired.
 */
export interface Keyring {
  readonly current: TokenKey;
  readonly byKid: ReadonlyMap<string, TokenKey>;
}

/** A key id that names a key without revealing it: 12 hex digits of its SHA-256. */
export function keyId(secret: Uint8Array): string {
  return createHash('sha256').update(secret).digest('hex').slice(0, 12);
}

/** Builds a keyring from raw secrets (e.g. `keys.derive('access-token')`), the signing one first. */
export async function createKeyring(current: Uint8Array, ...previous: Uint8Array[]): Promise<Keyring> {
  const entries: TokenKey[] = [];
  for (const secret of [current, ...previous]) {
    // Imported once: jose would otherwise import a raw secret again on every verification.
    const key = await crypto.subtle.importKey('raw', secret, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
    entries.push({ kid: keyId(secret), key });
  }
  return { current: entries[0]!, byKid: new Map(entries.map((entry) => [entry.kid, entry])) };
}

/** What a client receives from the token endpoints (minus the refresh token, added by the view). */
export interface IssuedAccessToken {
  readonly accessToken: string;
  readonly expiresIn: number;
}

const USER_ID = /^[1-9]\d{0,15}$/;

/** Issues and verifies access tokens. */
export class AccessTokens {
  constructor(
    private readonly keyring: Keyring,
    private readonly lifetimeSeconds: number,
    private readonly passwordChanges: PasswordChangeLog,
    private readonly now: () => number = Date.now,
  ) {}

  /** Signs a token for the user, valid for the configured lifetime (ACCESS_TOKEN_SECONDS). */
  async issue(user: User): Promise<IssuedAccessToken> {
    const iat = Math.floor(this.now() / 1000);
    const { kid, key } = this.keyring.current;
    const accessToken = await new SignJWT({ name: user.username, pwd: user.passwordChangedAt, typ: TOKEN_TYPE })
      .setProtectedHeader({ alg: ALGORITHM, kid, typ: 'JWT' })
      .setSubject(String(user.id))
      .setIssuedAt(iat)
      .setExpirationTime(iat + this.lifetimeSeconds)
      .sign(key);
    return { accessToken, expiresIn: this.lifetimeSeconds };
  }

  /**
   * Tokens verified lately, by digest, with their expiry. jose verifies through WebCrypto, whose
   * asynchronous HMAC costs more than the rest of a small request (issue #6 profile); a client
   * sends the same token for its whole lifetime, so each token is verified in full once.
   */
  private readonly verified = new Map<string, { user: User; expiresAt: number }>();

  /** The user a token speaks for; InvalidToken (401) for anything but a valid, current token. */
  async verify(token: string): Promise<User> {
    const digest = createHash('sha256').update(token).digest('base64url');
    const known = this.verified.get(digest);
    if (known !== undefined && known.expiresAt > this.now()) return this.current(known.user);
    const user = await this.verifyInFull(token);
    if (this.verified.size >= VERIFIED_CACHE_SIZE) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(digest, { user: user.user, expiresAt: user.expiresAt });
    return user.user;
  }

  private current(user: User): User {
    if (this.passwordChanges.isSuperseded(user.id, user.passwordChangedAt)) {
      throw new InvalidToken('The password has changed since the token was issued.');
    }
    return user;
  }

  private async verifyInFull(token: string): Promise<{ user: User; expiresAt: number }> {
    const resolveKey: JWTVerifyGetKey<CryptoKey> = (header) => {
      const entry = header.kid === undefined ? undefined : this.keyring.byKid.get(header.kid);
      if (!entry) throw new InvalidToken('The token was signed with an unknown key.');
      return entry.key;
    };
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(token, resolveKey, {
        algorithms: [ALGORITHM],
        requiredClaims: ['sub', 'iat', 'exp'],
        currentDate: new Date(this.now()),
      }));
    } catch (error) {
      if (error instanceof InvalidToken) throw error;
      if (error instanceof joseErrors.JWTExpired) throw new InvalidToken('The token has expired.');
      throw new InvalidToken('The token is malformed or its signature does not match.');
    }
    const { sub, name, pwd, typ } = payload;
    if (typ !== TOKEN_TYPE || typeof sub !== 'string' || !USER_ID.test(sub) || typeof name !== 'string' || !Number.isSafeInteger(pwd)) {
      throw new InvalidToken('The token is not an access token.');
    }
    const user: User = { id: Number(sub), username: name, passwordChangedAt: pwd as number, roles: [] };
    return { user: this.current(user), expiresAt: Number(payload.exp) * 1000 };
  }
}

/**
 * `Authorization: Bearer <access_token>` (RFC 6750). Other schemes are not ours (null); a
 * Bearer header with a bad token is a 401 on any method (API.md §6).
 */
export function bearerAuthentication(tokens: AccessTokens): Authenticator {
  return {
    scheme: 'bearer',
    async authenticate(request) {
      const authorization = readAuthorization(request);
      if (authorization?.scheme !== 'bearer') return null;
      if (authorization.credentials === '') throw new InvalidToken('The Bearer header carries no token.');
      return { user: await tokens.verify(authorization.credentials), scheme: 'bearer' };
    },
  };
}
