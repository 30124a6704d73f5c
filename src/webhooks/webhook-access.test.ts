import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CompiledQuery } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from '../db/database.js';
import type { DynamicDb } from '../db/dynamic-tables.js';
import { field } from '../resources/fields/index.js';
import { defineResource } from '../resources/resource.js';
import { WebhookAccess } from './webhook-access.js';

// ACCESS.md §4 and §7, what a change costs: nothing for a collection read by `*`; otherwise one
// read of the owners' roles and one query for every owner whose rule is a condition on the
// record, however many owners. (The black-box test, test/webhooks-access.test.ts, shows what
// receivers get on both databases.)

const NOTES = defineResource({
  name: 'notes',
  fields: { body: field.text({ maxLength: 100 }), visibility: field.choice(['private', 'team', 'public'], { default: 'private' }) },
  owner: true,
  access: { read: ['visibility=public', 'owner=@me', 'visibility=team&@role=staff'], create: '@authenticated' },
});
const BULLETINS = defineResource({ name: 'bulletins', fields: { text: field.text({ maxLength: 100 }) }, access: { read: '*' } });

describe('webhook owners under a read rule (SQLite)', () => {
  let dir: string;
  let storage: Storage;
  const users: Record<string, number> = {};

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'restwire-webhook-access-'));
    storage = await openStorage({ dataDir: dir, databaseUrl: null });
    const now = Date.now();
    for (const [name, roles] of [['alice', []], ['bob', []], ['root', ['admin']], ['carol', ['staff']]] as const) {
      const row = await storage.db
        .insertInto('users')
        .values({ username: name, password_hash: 'x', password_changed_at: now, created_at: now, roles: JSON.stringify(roles) })
        .returning('id')
        .executeTakeFirstOrThrow();
      users[name] = row.id;
    }
    const db = storage.db as unknown as DynamicDb;
    await db.schema.createTable('notes').addColumn('id', 'integer', (c) => c.primaryKey()).addColumn('body', 'text').addColumn('visibility', 'text').addColumn('owner_id', 'integer').execute();
    await db.insertInto('notes').values([
      { id: 1, body: 'private', visibility: 'private', owner_id: users.alice },
      { id: 2, body: 'team', visibility: 'team', owner_id: users.alice },
      { id: 3, body: 'public', visibility: 'public', owner_id: users.bob },
    ]).execute();
  });
  afterEach(async () => {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('asks nothing for a collection read by `*`', async () => {
    const untouchable = new Proxy({}, { get: () => { throw new Error('queried'); } });
    expect(await new WebhookAccess(storage.db as unknown as DynamicDb).owners(untouchable as never, BULLETINS, [users.alice!])).toBeNull();
  });

  it('judges every owner of a record with one query, with roles as stored now', async () => {
    const access = new WebhookAccess(storage.db as unknown as DynamicDb);
    const all = Object.values(users);
    const names = (ids: Set<number>) => Object.keys(users).filter((name) => ids.has(users[name]!)).sort();
    const queries: string[] = [];
    const counting = { executeQuery: (query: CompiledQuery) => (queries.push(query.sql), storage.db.executeQuery(query)) };
    const owners = (await access.owners(storage.db, NOTES, all))!;
    expect(names(await access.readers(counting as never, NOTES, 1, owners))).toEqual(['alice', 'root']);
    expect(names(await access.readers(counting as never, NOTES, 2, owners))).toEqual(['alice', 'carol', 'root']);
    expect(names(await access.readers(counting as never, NOTES, 3, owners))).toEqual(['alice', 'bob', 'carol', 'root']);
    // Nobody reads a record that is not there.
    expect(names(await access.readers(counting as never, NOTES, 99, owners))).toEqual(['root']);
    expect(queries).toHaveLength(4);
    // A role given since is read at the next change, not remembered.
    await storage.db.updateTable('users').set({ roles: '["staff"]' }).where('id', '=', users.bob!).execute();
    expect(names(await access.readers(storage.db, NOTES, 2, (await access.owners(storage.db, NOTES, all))!))).toEqual(['alice', 'bob', 'carol', 'root']);
  });
});
