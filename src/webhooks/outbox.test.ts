import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from '../db/database.js';
import { enqueueDeliveries, type NewEvent } from './outbox.js';

// A change writes one delivery per subscribed webhook in one call: thousands of webhooks must
// not make one INSERT that binds more values than SQLite allows (32,766; issue 22).
describe('enqueueDeliveries on SQLite', () => {
  let dir: string;
  let storage: Storage;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'restwire-outbox-'));
    storage = await openStorage({ dataDir: dir, databaseUrl: null });
  });
  afterEach(async () => {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes 3,001 deliveries of one change in one transaction', async () => {
    const now = Date.now();
    const user = await storage.db.insertInto('users').values({ username: 'u', password_hash: 'x', password_changed_at: now, created_at: now }).returning('id').executeTakeFirstOrThrow();
    const webhook = await storage.db
      .insertInto('webhooks')
      .values({ owner_id: user.id, target_url: 'http://127.0.0.1:9/', events: '["*"]', active: 1, secret_sealed: 's', last_response_status: 'unused', created_at: now, updated_at: now, filter: null })
      .returning('id')
      .executeTakeFirstOrThrow();
    const events: NewEvent[] = Array.from({ length: 3001 }, (_, i) => ({ webhookId: webhook.id, event: 'experience', action: 'created', body: `{"n":${i}}`, recordKey: `experiences:${i}` }));
    await storage.transact((trx) => enqueueDeliveries(storage, trx, events));
    const { n } = await storage.db.selectFrom('deliveries').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
    expect(Number(n)).toBe(3001);
  });
});
