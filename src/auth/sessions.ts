import { createHash, randomBytes } from 'node:crypto';
import { parseCookie, stringifySetCookie } from 'cookie';
import type { FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { Authenticator } from '../http/caller.js';
import { checkCsrf } from './csrf.js';
import { isSafeMethod } from './permissions.js';
import { toUser } from './users.js';
import type { User } from '../http/caller.js';

/**
 * Server-side sessions for browsers (API.md §3): an HttpOnly `sessionid` cookie whose SHA-256
 * is the row's key (a copy of the table yields no usable cookie), and a readable `csrftoken`
 * cookie, new at every login (API.md §6, "Sessions").
 *
 * A session ends after `idleMs` without use or `absoluteMs` after login, whichever comes first,
 * at logout, or when the user's password changes (users.ts deletes the rows).
 */
export const SESSION_COOKIE = 'sessionid';
export const CSRF_COOKIE = 'csrftoken';

export interface SessionPolicy {
  readonly idleMs: number;
  readonly absoluteMs: number;
  /** Cookies get `Secure` when PUBLIC_URL is https. */
  readonly secureCookies: boolean;
}

/** A new session: the cookie values, shown to the client once. */
export interface NewSession {
  readonly id: string;
  readonly csrfToken: string;
}

export interface ActiveSession {
  readonly user: User;
  readonly csrfToken: string;
}

const hashId = (id: string): string => createHash('sha256').update(id).digest('hex');
const SESSION_ID_SHAPE = /^[A-Za-z0-9_-]{43}$/;

export class SessionStore {
  /** Writing `last_seen_at` on every request would make each read a write; once per interval is enough. */
  private readonly touchIntervalMs: number;

  constructor(
    private readonly db: Kysely<Database>,
    readonly policy: SessionPolicy,
    private readonly now: () => number = Date.now,
  ) {
    this.touchIntervalMs = Math.min(60_000, policy.idleMs / 4);
  }

  /** Starts a session for the user. */
  async create(userId: number): Promise<NewSession> {
    const session = { id: randomBytes(32).toString('base64url'), csrfToken: randomBytes(32).toString('base64url') };
    const now = this.now();
    // The user's ended sessions go as new ones start, so the table does not grow without end.
    await this.db
      .deleteFrom('sessions')
      .where('user_id', '=', userId)
      .where((eb) => eb.or([eb('last_seen_at', '<', now - this.policy.idleMs), eb('created_at', '<', now - this.policy.absoluteMs)]))
      .execute();
    await this.db
      .insertInto('sessions')
      .values({ id_hash: hashId(session.id), user_id: userId, csrf_token: session.csrfToken, created_at: now, last_seen_at: now })
      .execute();
    return session;
  }

  /** The live session with this id, or null (unknown, ended, or not of our making). */
  async find(id: string): Promise<ActiveSession | null> {
    if (!SESSION_ID_SHAPE.test(id)) return null;
    const idHash = hashId(id);
    const row = await this.db
      .selectFrom('sessions')
      .innerJoin('users', 'users.id', 'sessions.user_id')
      .select(['users.id', 'users.username', 'users.password_changed_at', 'users.roles', 'sessions.csrf_token', 'sessions.created_at', 'sessions.last_seen_at'])
      .where('sessions.id_hash', '=', idHash)
      .executeTakeFirst();
    if (!row) return null;
    const now = this.now();
    if (now - row.last_seen_at > this.policy.idleMs || now - row.created_at > this.policy.absoluteMs) {
      await this.db.deleteFrom('sessions').where('id_hash', '=', idHash).execute();
      return null;
    }
    if (now - row.last_seen_at > this.touchIntervalMs) {
      await this.db.updateTable('sessions').set({ last_seen_at: now }).where('id_hash', '=', idHash).execute();
    }
    return { user: toUser(row), csrfToken: row.csrf_token };
  }

  /** Ends a session (logout). */
  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('sessions').where('id_hash', '=', hashId(id)).execute();
  }

  /** `Set-Cookie` values for a new session. */
  cookiesFor(session: NewSession): string[] {
    const maxAge = Math.floor(this.policy.absoluteMs / 1000);
    return [
      this.cookie(SESSION_COOKIE, session.id, maxAge, true),
      // Readable by the page's script, which copies it into X-CSRFToken.
      this.cookie(CSRF_COOKIE, session.csrfToken, maxAge, false),
    ];
  }

  /** `Set-Cookie` values that remove both cookies (logout). */
  clearedCookies(): string[] {
    return [this.cookie(SESSION_COOKIE, '', 0, true), this.cookie(CSRF_COOKIE, '', 0, false)];
  }

  /** One `Set-Cookie` value (RFC 6265 §4.1); a cleared cookie also carries an Expires in the past. */
  private cookie(name: string, value: string, maxAge: number, httpOnly: boolean): string {
    return stringifySetCookie({
      name,
      value,
      maxAge,
      ...(maxAge === 0 ? { expires: new Date(0) } : {}),
      path: '/',
      httpOnly,
      secure: this.policy.secureCookies,
      sameSite: 'lax',
    });
  }
}

const parsedCookies = new WeakMap<FastifyRequest, Record<string, string | undefined>>();

/**
 * A request cookie, parsed on first use. Only session requests carry cookies, so parsing them
 * here rather than in a global cookie plugin's hooks keeps two hooks off every other request.
 */
export function readCookie(request: FastifyRequest, name: string): string | undefined {
  const header = request.headers.cookie;
  if (!header) return undefined;
  let cookies = parsedCookies.get(request);
  if (cookies === undefined) {
    cookies = parseCookie(header);
    parsedCookies.set(request, cookies);
  }
  return cookies[name];
}

/**
 * Session cookie authentication, tried last (API.md §3). A cookie of no live session (logged
 * out, expired, forged) makes the caller anonymous, as Django does: a read goes on as
 * anonymous, a write is refused as any anonymous write is (401). Unsafe methods on a live
 * session need the CSRF token (403 without it).
 */
export function sessionAuthentication(sessions: SessionStore, trustedOrigins: readonly string[]): Authenticator {
  return {
    scheme: 'session',
    async authenticate(request) {
      const id = readCookie(request, SESSION_COOKIE);
      if (!id) return null;
      const session = await sessions.find(id);
      if (!session) return null;
      if (!isSafeMethod(request.method)) checkCsrf(request, session.csrfToken, trustedOrigins);
      return { user: session.user, scheme: 'session' };
    },
  };
}
