// API keys (ACCESS.md §5): long-lived, scoped, revocable credentials for programs, sent as
// `Authorization: Bearer rwk_…`. A key is 256 random bits; the database keeps only its SHA-256
// (a fast hash is enough for a secret nobody can guess, unlike a password: GitHub's and Stripe's
// tokens are stored so). The `keys` collection that issues and revokes them is declared in
// resources/api-keys.ts; this file makes and recognises them.

import * as crypto from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { Authenticator, Identity, User } from '../http/caller.js';
import { InvalidToken } from '../http/errors.js';
import { readAuthorization } from './authenticators.js';
import type { UserStore } from './users.js';

/** What every key begins with, so a Bearer credential is known for a key without a lookup. */
export const KEY_PREFIX = 'rwk_';
/** How many of a key's first characters are kept and shown, to tell keys apart. */
export const SHOWN_PREFIX_LENGTH = 12;
/** How long a process trusts what it read about a key: a revoke reaches every process within it. */
export const KEY_CACHE_TTL_MS = 5_000;
/** `last_used_at` is kept to the minute and written at most once a minute. */
const USE_RESOLUTION_MS = 60_000;
const KEY_CACHE_SIZE = 10_000;
const KEY_SHAPE = /^rwk_[A-Za-z0-9_-]{43}$/;

/** A new key: the key (shown once), the prefix shown ever after and the hash stored. */
export interface IssuedKey {
  readonly key: string;
  readonly prefix: string;
  readonly hash: string;
}

// One-shot `crypto.hash` (Node 20.12+) costs a third of a createHash object per key, and every
// request with a key hashes it (issue 18: a key within 5 µs of a token); older Node 20s lack it.
const sha256Hex: (text: string) => string =
  typeof crypto.hash === 'function' ? (text) => crypto.hash('sha256', text, 'hex') : (text) => crypto.createHash('sha256').update(text).digest('hex');

/** The stored form of a key: SHA-256, hex. */
export function hashApiKey(key: string): string {
  return sha256Hex(key);
}

/** Makes a new random key. */
export function generateApiKey(): IssuedKey {
  const key = `${KEY_PREFIX}${crypto.randomBytes(32).toString('base64url')}`;
  return { key, prefix: key.slice(0, SHOWN_PREFIX_LENGTH), hash: hashApiKey(key) };
}

/** What a process remembers of a key for KEY_CACHE_TTL_MS. */
interface KnownKey {
  readonly id: number;
  readonly user: User;
  readonly scopes: readonly string[];
  readonly expiresAt: number | null;
  lastUsedAt: number | null;
  readonly readAt: number;
}

/** Looks keys up by their hash, with a short cache, and keeps `last_used_at`. */
export class ApiKeys {
  private readonly known = new Map<string, KnownKey>();
  /**
   * Reads under way, by hash: the requests that find a key unknown or due at once (every open
   * connection of a busy client, each time the TTL runs out) share one read (issue 18).
   */
  private readonly reading = new Map<string, Promise<KnownKey | undefined>>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly users: UserStore,
    private readonly now: () => number = Date.now,
  ) {}

  /** Who a key speaks for, within which scopes; InvalidToken (401) for an unknown, revoked or expired key. */
  async identify(key: string): Promise<Identity> {
    if (!KEY_SHAPE.test(key)) throw new InvalidToken('The API key is malformed.');
    const hash = hashApiKey(key);
    const now = this.now();
    let known = this.known.get(hash);
    if (known === undefined || now - known.readAt > KEY_CACHE_TTL_MS) {
      known = await this.lookUp(hash, now);
      if (known === undefined) throw new InvalidToken('The API key is unknown or revoked.');
    }
    if (known.expiresAt !== null && known.expiresAt <= now) throw new InvalidToken('The API key has expired.');
    await this.noteUse(known, now);
    return { user: known.user, scheme: 'key', scopes: known.scopes };
  }

  /** Drops what this process knows of a key, at once (its revoke has committed). */
  forget(hash: string): void {
    this.known.delete(hash);
    // A read under way may have seen the key before its revoke: it is not filed.
    this.reading.delete(hash);
  }

  /** Reads a key (one read at a time per key) and files what it found, unless forgotten meanwhile. */
  private lookUp(hash: string, now: number): Promise<KnownKey | undefined> {
    const under = this.reading.get(hash);
    if (under !== undefined) return under;
    const read: Promise<KnownKey | undefined> = this.read(hash, now).then(
      (known) => {
        if (this.reading.get(hash) !== read) return known;
        this.reading.delete(hash);
        if (known === undefined) {
          this.known.delete(hash);
        } else {
          if (this.known.size >= KEY_CACHE_SIZE) this.known.delete(this.known.keys().next().value!);
          this.known.set(hash, known);
        }
        return known;
      },
      (error: unknown) => {
        if (this.reading.get(hash) === read) this.reading.delete(hash);
        throw error;
      },
    );
    this.reading.set(hash, read);
    return read;
  }

  private async read(hash: string, readAt: number): Promise<KnownKey | undefined> {
    const row = await this.db
      .selectFrom('api_keys')
      .select(['id', 'owner_id', 'scopes', 'expires_at', 'last_used_at'])
      .where('key_hash', '=', hash)
      .executeTakeFirst();
    if (!row) return undefined;
    // The user as every scheme reads them (with their roles, once those are loaded there).
    const user = await this.users.findById(Number(row.owner_id));
    if (!user) return undefined;
    return {
      id: Number(row.id),
      user,
      scopes: JSON.parse(row.scopes) as string[],
      expiresAt: row.expires_at === null ? null : Number(row.expires_at),
      lastUsedAt: row.last_used_at === null ? null : Number(row.last_used_at),
      readAt,
    };
  }

  /** Writes `last_used_at` when the minute has changed since it was written, by any process. */
  private async noteUse(known: KnownKey, now: number): Promise<void> {
    const minute = now - (now % USE_RESOLUTION_MS);
    if (known.lastUsedAt !== null && known.lastUsedAt >= minute) return;
    known.lastUsedAt = minute;
    await this.db
      .updateTable('api_keys')
      .set({ last_used_at: minute })
      .where('id', '=', known.id)
      .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', minute)]))
      .execute();
  }
}

/**
 * `Authorization: Bearer rwk_…`, tried before the access-token authenticator: a Bearer
 * credential that begins `rwk_` is a key, anything else is left to the next one.
 */
export function apiKeyAuthentication(keys: ApiKeys): Authenticator {
  return {
    scheme: 'key',
    async authenticate(request) {
      const authorization = readAuthorization(request);
      if (authorization?.scheme !== 'bearer' || !authorization.credentials.startsWith(KEY_PREFIX)) return null;
      return keys.identify(authorization.credentials);
    },
  };
}
