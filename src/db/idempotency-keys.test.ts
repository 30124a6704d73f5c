import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from './database.js';
import type { DynamicDb } from './dynamic-tables.js';
import { claimKey, findStoredResponse, isStoredMeanwhile, storeResponse, type StoredResponse } from './idempotency-keys.js';
import { BACKENDS, createTestDatabase, type TestDatabase } from './test-databases.test-support.js';

const HOUR = 3_600_000;

/** A stored response of user 1 under `key`, made at `now`. */
const answer = (key: string, now: number, status = 201): StoredResponse => ({
  user_id: 1,
  key,
  request_hash: 'a'.repeat(64),
  status,
  headers: '{}',
  body: `{"status":${status}}`,
  created_at: now,
  expires_at: now + HOUR,
});

describe.each(BACKENDS)('stored Idempotency-Key responses on %s', (backend) => {
  let database: TestDatabase;
  let storage: Storage;

  beforeEach(async () => {
    database = await createTestDatabase(backend, 'idempotency-keys');
    storage = await openStorage({ dataDir: database.dataDir, databaseUrl: database.url });
    await sql`insert into users (id, username, password_hash, password_changed_at, created_at) values (1, 'u', 'x', 0, 0)`.execute(storage.db);
  });

  afterEach(async () => {
    await storage.close();
    await database.drop();
  });

  const store = (row: StoredResponse) =>
    storage.transact(async (transaction) => {
      const trx = transaction as unknown as DynamicDb;
      const claim = await claimKey(storage.dialect, trx, row.user_id, row.key, row.created_at);
      expect(claim).toEqual({ held: true, stored: null });
      await storeResponse(storage.dialect, trx, row);
    });
  const found = (key: string, now: number) => findStoredResponse(storage.dialect, storage.db as unknown as DynamicDb, 1, key, now);

  it('claims a new key, stores its response, and finds it until it expires', async () => {
    const now = Date.now();
    await store(answer('k', now));
    expect(await found('k', now + HOUR - 1)).toMatchObject({ status: 201, body: '{"status":201}' });
    expect(await found('k', now + HOUR)).toBeNull();
  });

  it('replaces a response that has expired and was not pruned yet', async () => {
    const now = Date.now();
    await store(answer('k', now - 2 * HOUR));
    await store(answer('k', now, 400));
    expect(await found('k', now)).toMatchObject({ status: 400 });
  });

  it.runIf(backend === 'postgres')('a response another process stored after the claim fails the commit, recognisably, storing nothing', async () => {
    const now = Date.now();
    const outcome = storage.transact(async (transaction) => {
      const trx = transaction as unknown as DynamicDb;
      expect(await claimKey(storage.dialect, trx, 1, 'k', now)).toEqual({ held: true, stored: null });
      // Another process commits a response under the key after this claim's snapshot.
      const other = new pg.Client({ connectionString: database.url! });
      await other.connect();
      await other.query(`insert into idempotency_keys (user_id, key, request_hash, status, headers, body, created_at, expires_at) values (1, 'k', 'b', 200, '{}', 'theirs', $1, $2)`, [now, now + HOUR]);
      await other.end();
      await storeResponse(storage.dialect, trx, answer('k', now));
    });
    const error = await outcome.then(() => null, (failure: unknown) => failure);
    expect(isStoredMeanwhile(error)).toBe(true);
    expect(await found('k', now)).toMatchObject({ status: 200, body: 'theirs' });
  });

  it.runIf(backend === 'postgres')('a key held by another transaction is not held by this one', async () => {
    const now = Date.now();
    let release!: () => void;
    const holding = new Promise<void>((resolve) => (release = resolve));
    let claimed!: () => void;
    const held = new Promise<void>((resolve) => (claimed = resolve));
    // Alone: in a transaction (and on a connection) of its own, not shared with the claim below.
    const first = storage.transact(async (transaction) => {
      await claimKey(storage.dialect, transaction as unknown as DynamicDb, 1, 'k', now);
      claimed();
      await holding;
    }, { alone: true });
    await held;
    const second = await storage.transact((transaction) => claimKey(storage.dialect, transaction as unknown as DynamicDb, 1, 'k', now), { alone: true });
    release();
    await first;
    expect(second.held).toBe(false);
  });
});
