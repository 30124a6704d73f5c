import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { AuthenticationFailed } from '../http/errors.js';
import { MESSAGES } from '../http/messages.js';

/**
 * Refresh tokens (API.md §3): random opaque strings, stored only as SHA-256 hashes, each used
 * once. A refresh retires the token and issues a successor in the same family; presenting a
 * retired token means it was copied, so the whole family is revoked (the OAuth 2.0 Security BCP's
 * refresh token rotation, RFC 9700 §4.14.2). A password change deletes them all (users.ts).
 */
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/;

const hashToken = (token: string): string => createHash('sha256').update(token).digest('hex');

/** Who a redeemed refresh token was issued to, and its family for the successor. */
export interface RedeemedRefreshToken {
  readonly userId: number;
  readonly family: string;
}

export class RefreshTokens {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly lifetimeSeconds: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Issues a token for the user, in `family` or in a new one (a new login). */
  async issue(userId: number, family: string = randomBytes(16).toString('hex')): Promise<string> {
    const token = randomBytes(32).toString('base64url');
    const now = this.now();
    // Expired rows of this user go as new ones come, so the table does not grow without end.
    await this.db.deleteFrom('refresh_tokens').where('user_id', '=', userId).where('expires_at', '<', now).execute();
    await this.db
      .insertInto('refresh_tokens')
      .values({ id_hash: hashToken(token), family, user_id: userId, expires_at: now + this.lifetimeSeconds * 1000, retired_at: null, created_at: now })
      .execute();
    return token;
  }

  /**
   * Retires a live token and says whose it was. A retired token revokes its family; an unknown,
   * expired or malformed one (an access token, say) is refused. Every refusal is a 401.
   */
  async redeem(token: string): Promise<RedeemedRefreshToken> {
    if (!TOKEN_SHAPE.test(token)) throw new AuthenticationFailed(MESSAGES.invalidRefreshToken);
    const idHash = hashToken(token);
    const row = await this.db
      .selectFrom('refresh_tokens')
      .select(['family', 'user_id', 'expires_at', 'retired_at'])
      .where('id_hash', '=', idHash)
      .executeTakeFirst();
    const now = this.now();
    if (!row || row.expires_at <= now) throw new AuthenticationFailed('Invalid or expired refresh token.');
    // The conditional update makes "retire" atomic: of two requests racing with one token, only
    // one succeeds; the other counts as reuse.
    const retired = row.retired_at === null
      ? await this.db
          .updateTable('refresh_tokens')
          .set({ retired_at: now })
          .where('id_hash', '=', idHash)
          .where('retired_at', 'is', null)
          .executeTakeFirst()
      : null;
    if (retired === null || retired.numUpdatedRows === 0n) {
      await this.revokeFamily(row.family);
      throw new AuthenticationFailed('This refresh token was already used; every token of its family is now revoked.');
    }
    return { userId: row.user_id, family: row.family };
  }

  private async revokeFamily(family: string): Promise<void> {
    await this.db.deleteFrom('refresh_tokens').where('family', '=', family).execute();
  }
}
