import { createHmac } from 'node:crypto';
import type { PasswordChangeLog } from './password-changes.js';
import type { User } from '../http/caller.js';

/**
 * Basic sends the password with every request, and a slow hash on every request would make
 * Basic clients many times slower than Bearer ones (issue #3). This cache remembers credentials
 * that passed the full check, for a short while, keyed by an HMAC of username and password under
 * a key of its own, so the process never holds a password or a fast hash anyone could test
 * guesses against.
 *
 * - Only successes are cached: a wrong password is always checked in full.
 * - An entry is void once its user's password changed (PasswordChangeLog): at once for a change
 *   made through this process; within `ttlMs` for one made by another process.
 * - Bounded: the least recently used entry goes first (Map keeps insertion order, and a hit
 *   re-inserts its entry).
 */
export interface CredentialCacheOptions {
  readonly maxEntries?: number;
  readonly ttlMs?: number;
  readonly now?: () => number;
}

interface Entry {
  readonly user: User;
  readonly expiresAt: number;
}

export class CredentialCache {
  private readonly entries = new Map<string, Entry>();
  /** Checks under way, so that a burst of requests with new credentials costs one hash, not one each. */
  private readonly checking = new Map<string, Promise<User | null>>();
  private readonly maxEntries: number;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(
    private readonly key: Uint8Array,
    private readonly passwordChanges: PasswordChangeLog,
    { maxEntries = 10_000, ttlMs = 60_000, now = Date.now }: CredentialCacheOptions = {},
  ) {
    if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) throw new RangeError('maxEntries must be a positive integer');
    if (!(ttlMs > 0)) throw new RangeError('ttlMs must be positive');
    this.maxEntries = maxEntries;
    this.ttlMs = ttlMs;
    this.now = now;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The user these credentials were verified as, if that is recent and still current. */
  get(username: string, password: string): User | null {
    const id = this.entryId(username, password);
    const entry = this.entries.get(id);
    if (!entry) return null;
    this.entries.delete(id);
    if (entry.expiresAt <= this.now() || this.passwordChanges.isSuperseded(entry.user.id, entry.user.passwordChangedAt)) {
      return null;
    }
    this.entries.set(id, entry);
    return entry.user;
  }

  /** Remembers credentials that just passed the full check. */
  set(username: string, password: string, user: User): void {
    this.passwordChanges.note(user.id, user.passwordChangedAt);
    const id = this.entryId(username, password);
    this.entries.delete(id);
    this.entries.set(id, { user, expiresAt: this.now() + this.ttlMs });
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }

  /**
   * Runs `check` for these credentials unless the same check for the same `scope` (the client's
   * address) is already under way, in which case its result is shared; credentials that pass are
   * remembered. The login throttle counts the check, so a burst of one client's requests with
   * the same credentials is one attempt, not one each (issue 22, item 2), and a client cannot
   * share another address's check.
   */
  checkOnce(username: string, password: string, scope: string, check: () => Promise<User | null>): Promise<User | null> {
    const id = `${scope}\0${this.entryId(username, password)}`;
    let running = this.checking.get(id);
    if (running === undefined) {
      running = check()
        .then((user) => {
          if (user) this.set(username, password, user);
          return user;
        })
        .finally(() => this.checking.delete(id));
      this.checking.set(id, running);
    }
    return running;
  }

  /**
   * The username's byte length comes first, so that no two (username, password) pairs give the
   * same input however either is split.
   */
  private entryId(username: string, password: string): string {
    return createHmac('sha256', this.key)
      .update(`${Buffer.byteLength(username)}\0${username}\0`)
      .update(password)
      .digest('base64');
  }
}
