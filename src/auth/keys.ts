import { hkdfSync, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';

/**
 * Key material. SECRET_KEY, or one generated on first start and kept in the database so that
 * every process and every restart agrees on it (API.md §0). Each use gets its own derived key,
 * so no two purposes share a key.
 */
export interface Keys {
  readonly secretKey: string;
  derive(purpose: 'cursor' | 'access-token' | 'credential-cache'): Buffer;
}

const SETTING = 'secret_key';

/** Reads SECRET_KEY, or the stored generated key, generating and storing one if there is none. */
export async function loadKeys(db: Kysely<Database>, configured: string | null): Promise<Keys> {
  const secretKey = configured ?? (await storedSecretKey(db));
  return {
    secretKey,
    derive: (purpose) => Buffer.from(hkdfSync('sha256', secretKey, 'restwire', purpose, 32)),
  };
}

async function storedSecretKey(db: Kysely<Database>): Promise<string> {
  const existing = await db.selectFrom('settings').select('value').where('key', '=', SETTING).executeTakeFirst();
  if (existing) return existing.value;
  // Two processes starting at once both try; the primary key keeps the first, and both read it.
  await db
    .insertInto('settings')
    .values({ key: SETTING, value: randomBytes(32).toString('base64url') })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  const stored = await db.selectFrom('settings').select('value').where('key', '=', SETTING).executeTakeFirstOrThrow();
  return stored.value;
}
