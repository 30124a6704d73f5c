import type { Kysely } from 'kysely';
import type { Database, UserRow } from '../db/schema.js';
import { decoyHash, hashPassword, verifyPassword } from './passwords.js';
import type { User } from '../http/caller.js';
import { MESSAGES } from '../http/messages.js';

/** Username rules, as Django's: 1–150 characters of letters, digits and @ . + - _ */
export const USERNAME_PATTERN = /^[\p{L}\p{N}@.+\-_]{1,150}$/u;

/** What is wrong with a (trimmed) username, by Django's rule; empty when nothing is. */
export function usernameProblems(username: string): string[] {
  if ([...username].length > 150) return [MESSAGES.maxLength(150)];
  if (!USERNAME_PATTERN.test(username)) {
    return ['Enter a valid username. This value may contain only letters, numbers, and @/./+/-/_ characters.'];
  }
  return [];
}

/** What is wrong with a new password, by a few of Django's validators; empty when nothing is. */
export function passwordProblems(password: string, username: string): string[] {
  const problems: string[] = [];
  if ([...password].length < 8) problems.push('This password is too short. It must contain at least 8 characters.');
  if (/^\d+$/.test(password)) problems.push('This password is entirely numeric.');
  if (username !== '' && password.toLowerCase() === username.toLowerCase()) problems.push('The password is too similar to the username.');
  return problems;
}

export class UsernameTaken extends Error {
  constructor(username: string) {
    super(`A user named "${username}" already exists.`);
    this.name = 'UsernameTaken';
  }
}

export function toUser(row: Pick<UserRow, 'id' | 'username' | 'password_changed_at'>): User {
  return { id: row.id, username: row.username, passwordChangedAt: row.password_changed_at, roles: [] };
}

/** User accounts: lookup, creation and password checks. */
export class UserStore {
  private readonly passwordListeners: Array<(userId: number, passwordChangedAt: number) => void> = [];

  constructor(private readonly db: Kysely<Database>) {}

  findById(id: number): Promise<User | null> {
    return this.findBy('id', id);
  }

  findByUsername(username: string): Promise<User | null> {
    return this.findBy('username', username);
  }

  private async findBy(column: 'id' | 'username', value: number | string): Promise<User | null> {
    const row = await this.db
      .selectFrom('users')
      .select(['id', 'username', 'password_changed_at'])
      .where(column, '=', value)
      .executeTakeFirst();
    return row ? toUser(row) : null;
  }

  async count(): Promise<number> {
    const row = await this.db.selectFrom('users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Creates a user; throws UsernameTaken when the name exists (checked by the unique index). */
  async create(username: string, password: string): Promise<User> {
    const hash = await hashPassword(password);
    const now = Date.now();
    try {
      const row = await this.db
        .insertInto('users')
        .values({ username, password_hash: hash, password_changed_at: now, created_at: now })
        .returning(['id', 'username', 'password_changed_at'])
        .executeTakeFirstOrThrow();
      return toUser(row);
    } catch (error) {
      if (/unique|duplicate/i.test((error as Error).message)) throw new UsernameTaken(username);
      throw error;
    }
  }

  /**
   * Sets a new password and ends everything issued under the old one: refresh tokens and
   * sessions at once (rows), access tokens and cached Basic credentials through the listeners
   * (see password-changes.ts for the bound across processes).
   */
  async setPassword(userId: number, password: string): Promise<void> {
    const hash = await hashPassword(password);
    const changedAt = Date.now();
    await this.db.transaction().execute(async (trx) => {
      await trx.updateTable('users').set({ password_hash: hash, password_changed_at: changedAt }).where('id', '=', userId).execute();
      await trx.deleteFrom('refresh_tokens').where('user_id', '=', userId).execute();
      await trx.deleteFrom('sessions').where('user_id', '=', userId).execute();
    });
    for (const listener of this.passwordListeners) listener(userId, changedAt);
  }

  /** Calls `listener` after every password change made through this store. */
  onPasswordChange(listener: (userId: number, passwordChangedAt: number) => void): void {
    this.passwordListeners.push(listener);
  }

  /**
   * The user whose password this is, or null. An unknown user costs a full hash check too, so
   * timing does not tell whether a username exists.
   */
  async verifyCredentials(username: string, password: string): Promise<User | null> {
    const row = await this.db
      .selectFrom('users')
      .select(['id', 'username', 'password_hash', 'password_changed_at'])
      .where('username', '=', username)
      .executeTakeFirst();
    const ok = await verifyPassword(password, row?.password_hash ?? (await decoyHash()));
    return ok && row ? toUser(row) : null;
  }
}
