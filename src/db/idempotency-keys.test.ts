import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from './database.js';
import type { DynamicDb } from './dynamic-tables.js';
import { claimKey, findStoredResponse, isStoredMeanwhile, storeResponse, type StoredResponse } from './idempotency-keys.js';

// SQLite always; PostgreSQL too when TEST_DATABASE_URL is set (as .ci/run does). A test file under
// src/ cannot import test/support (tsconfig's rootDir), so this is its small equivalent.
const BACKENDS: Array<'sqlite' | 'postgres'> = process.env.TEST_DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite'];
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
  let dir: string;
  let url: string | null = null;
  let storage: Storage;
  const admin = async (statement: string) => {
    const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    await client.connect();
    await client.query(statement);
    await client.end();
  };

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'restwire-idempotency-keys-'));
    if (backend === 'postgres') {
      const name = `restwire_test_${randomBytes(6).toString('hex')}`;
      await admin(`create database ${name}`);
      const address = new URL(process.env.TEST_DATABASE_URL!);
      address.pathname = `/${name}`;
      url = address.toString();
    }
    storage = await openStorage({ dataDir: dir, databaseUrl: url });
    await sql`insert into users (id, username, password_hash, password_changed_at, created_at) values (1, 'u', 'x', 0, 0)`.execute(storage.db);
  });

  afterEach(async () => {
    await storage.close();
    if (url) await admin(`drop database if exists ${new URL(url).pathname.slice(1)} with (force)`);
    url = null;
    rmSync(dir, { recursive: true, force: true });
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
      const other = new pg.Client({ connectionString: url! });
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
