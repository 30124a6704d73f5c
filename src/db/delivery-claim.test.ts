import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from './database.js';
import { claimDueDeliveries } from './delivery-queue.js';
import { BACKENDS, createTestDatabase, type TestDatabase } from './test-databases.test-support.js';

// The claim leases only what the dispatcher's lanes can take (issue 21): oldest first, no more
// than each webhook's and each user's room.

describe.each(BACKENDS)('claiming due deliveries on %s', (backend) => {
  let database: TestDatabase;
  let storage: Storage;

  beforeEach(async () => {
    database = await createTestDatabase(backend, 'delivery-claim');
    storage = await openStorage({ dataDir: database.dataDir, databaseUrl: database.url });
    // Users 1 and 2; user 1 has webhooks 1 and 2, user 2 webhook 3.
    for (const id of [1, 2]) await sql`insert into users (id, username, password_hash, password_changed_at, created_at) values (${id}, ${`u${id}`}, 'x', 0, 0)`.execute(storage.db);
    for (const [id, owner] of [[1, 1], [2, 1], [3, 2]]) {
      await sql`insert into webhooks (id, owner_id, target_url, events, active, secret_sealed, last_response_status, created_at, updated_at)
        values (${id}, ${owner}, 'http://127.0.0.1:1/', '["*"]', 1, 'x', 'unused', 0, 0)`.execute(storage.db);
    }
  });

  afterEach(async () => {
    await storage.close();
    await database.drop();
  });

  /** `count` due deliveries of `webhookId`, due at `dueAt`, `dueAt + 1`, …; returns their ids. */
  async function queue(webhookId: number, count: number, dueAt: number): Promise<number[]> {
    const ids: number[] = [];
    for (let i = 0; i < count; i++) {
      const row = await storage.db
        .insertInto('deliveries')
        .values({ guid: randomUUID(), webhook_id: webhookId, event: 'experience', action: 'created', payload: '{}', status: 'pending', attempts: 0, next_attempt_at: dueAt + i, lease_until: null, redelivery: 0, created_at: 0, record_key: null })
        .returning('id')
        .executeTakeFirstOrThrow();
      ids.push(Number(row.id));
    }
    return ids;
  }

  const claim = (room: { webhooks?: Map<number, number>; owners?: Map<number, number> }, limit = 100) =>
    claimDueDeliveries(storage, {
      now: 1_000_000,
      limit,
      leaseUntil: 2_000_000,
      excludeWebhookIds: [],
      room: { webhooks: { of: room.webhooks ?? new Map(), otherwise: 100 }, owners: { of: room.owners ?? new Map(), otherwise: 100 } },
    });
  const leased = async () => (await storage.db.selectFrom('deliveries').select('id').where('lease_until', 'is not', null).orderBy('id').execute()).map((row) => Number(row.id));

  it("leases each webhook's oldest rows up to its room, and leaves the rest unleased", async () => {
    const first = await queue(1, 5, 10);
    const second = await queue(3, 4, 5);
    const rows = await claim({ webhooks: new Map([[1, 2], [3, 3]]) });
    expect(rows.map((row) => Number(row.id)).sort((a, b) => a - b)).toEqual([...first.slice(0, 2), ...second.slice(0, 3)]);
    expect(await leased()).toEqual([...first.slice(0, 2), ...second.slice(0, 3)]);
  });

  it("leases no more of a user's webhooks together than the user's room, oldest first", async () => {
    const one = await queue(1, 3, 10);
    const two = await queue(2, 3, 20);
    const other = await queue(3, 2, 30);
    const rows = await claim({ owners: new Map([[1, 4]]) });
    expect(rows.map((row) => Number(row.id)).sort((a, b) => a - b)).toEqual([...one, two[0]!, ...other]);
  });

  it('leases a webhook it has no room for nothing, and gives the limit to the others', async () => {
    await queue(1, 3, 10);
    const other = await queue(3, 3, 20);
    const rows = await claim({ webhooks: new Map([[1, 0]]) }, 6);
    expect(rows.map((row) => Number(row.id)).sort((a, b) => a - b)).toEqual(other);
  });
});
