// restwire's own migrations: the tables of users, sessions, tokens, experiences, webhooks and
// deliveries (`schema.ts` describes the result). One list serves both databases; the one column
// type that differs, the auto-incrementing primary key, comes from the database's schema editor.

import { Migrator, sql, type Migration, type MigrationProvider } from 'kysely';
import type { AnyDb } from './schema-editor/base.js';
import { schemaEditorFor } from './schema-editor/factory.js';

/**
 * One ordered list serves SQLite and PostgreSQL (API.md §0). Append new migrations; never edit
 * one that has shipped.
 */
const MIGRATIONS: Record<string, Migration> = {
  '0001_initial': {
    async up(db) {
      const editor = schemaEditorFor(db);
      await db.schema
        .createTable('settings')
        .addColumn('key', 'varchar(100)', (c) => c.primaryKey())
        .addColumn('value', 'text', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('users')
        .addColumn('id', editor.primaryKeyType())
        .addColumn('username', 'varchar(150)', (c) => c.notNull().unique())
        .addColumn('password_hash', 'text', (c) => c.notNull())
        .addColumn('password_changed_at', 'bigint', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('experiences')
        .addColumn('id', editor.primaryKeyType())
        .addColumn('title', 'text', (c) => c.notNull())
        .addColumn('q_like_dislike', 'text', (c) => c.notNull())
        .addColumn('owner_id', 'bigint', (c) => c.notNull().references('users.id'))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      // Keyset pagination walks (ordering column, id); one index per offered ordering.
      await db.schema.createIndex('experiences_owner').on('experiences').columns(['owner_id', 'id']).execute();
      await db.schema.createIndex('experiences_created').on('experiences').columns(['created_at', 'id']).execute();
      await db.schema.createIndex('experiences_title').on('experiences').columns(['title', 'id']).execute();

      await db.schema
        .createTable('sessions')
        .addColumn('id_hash', 'varchar(64)', (c) => c.primaryKey())
        .addColumn('user_id', 'bigint', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('csrf_token', 'varchar(64)', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('last_seen_at', 'bigint', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('refresh_tokens')
        .addColumn('id_hash', 'varchar(64)', (c) => c.primaryKey())
        .addColumn('family', 'varchar(64)', (c) => c.notNull())
        .addColumn('user_id', 'bigint', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addColumn('retired_at', 'bigint')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('refresh_tokens_family').on('refresh_tokens').column('family').execute();
      await db.schema.createIndex('refresh_tokens_user').on('refresh_tokens').column('user_id').execute();

      await db.schema
        .createTable('webhooks')
        .addColumn('id', editor.primaryKeyType())
        .addColumn('owner_id', 'bigint', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('target_url', 'text', (c) => c.notNull())
        .addColumn('events', 'text', (c) => c.notNull())
        .addColumn('active', 'integer', (c) => c.notNull())
        .addColumn('secret_sealed', 'text', (c) => c.notNull())
        .addColumn('previous_secret_sealed', 'text')
        .addColumn('previous_secret_expires_at', 'bigint')
        .addColumn('last_response_code', 'integer')
        .addColumn('last_response_status', 'varchar(16)', (c) => c.notNull())
        .addColumn('last_response_message', 'text')
        .addColumn('disabled_reason', 'text')
        .addColumn('failing_since', 'bigint')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('webhooks_owner').on('webhooks').columns(['owner_id', 'id']).execute();

      await db.schema
        .createTable('deliveries')
        .addColumn('id', editor.primaryKeyType())
        .addColumn('guid', 'varchar(36)', (c) => c.notNull())
        .addColumn('webhook_id', 'bigint', (c) => c.notNull().references('webhooks.id').onDelete('cascade'))
        .addColumn('event', 'varchar(64)', (c) => c.notNull())
        .addColumn('action', 'varchar(64)')
        .addColumn('payload', 'text', (c) => c.notNull())
        .addColumn('status', 'varchar(16)', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull())
        .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
        .addColumn('lease_until', 'bigint')
        .addColumn('status_code', 'integer')
        .addColumn('duration_ms', 'integer')
        .addColumn('delivered_at', 'bigint')
        .addColumn('redelivery', 'integer', (c) => c.notNull())
        .addColumn('request_headers', 'text')
        .addColumn('response_headers', 'text')
        .addColumn('response_body', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('deliveries_webhook').on('deliveries').columns(['webhook_id', 'id']).execute();
      // The dispatcher's claim query: due work in order, done work out of the way.
      await db.schema.createIndex('deliveries_due').on('deliveries').columns(['status', 'next_attempt_at']).execute();
    },
  },
  '0002_delivery_guid_index': {
    async up(db) {
      // Redeliveries share their original's guid; "redeliver every failed delivery" looks up the
      // latest entry of each guid.
      await db.schema.createIndex('deliveries_guid').on('deliveries').columns(['guid', 'id']).execute();
    },
  },
  '0003_waiting_deliveries_index': {
    async up(db) {
      // The claim query walks waiting deliveries in due order; a partial index holds only those,
      // so the walk needs no sort and delivered history does not slow it (issue #6).
      await db.schema
        .createIndex('deliveries_waiting')
        .on('deliveries')
        .columns(['next_attempt_at', 'id'])
        .where(sql.ref('status'), 'in', [sql.lit('pending'), sql.lit('retrying')])
        .execute();
      await db.schema.dropIndex('deliveries_due').execute();
    },
  },
  '0004_large_response_bodies_index': {
    async up(db) {
      // Retention caps full response bodies per webhook and per user (webhooks/retention.ts,
      // issue 11): a partial index of the long ones lets each pass rank only those. The
      // predicate is the one retention.ts spells (TRUNCATED_BODY_CHARS).
      await sql`create index deliveries_large_bodies on deliveries (webhook_id, id) where length(response_body) > 1024`.execute(db);
    },
  },
  '0005_ordered_and_filtered_webhooks': {
    async up(db) {
      // Issue 14: a webhook may ask for per-record order and filter its events; each delivery
      // names the record it is about (`<collection>:<id>`), so the claim query can hold back a
      // delivery while an earlier one about the same record still waits (db/delivery-queue.ts).
      await db.schema.alterTable('webhooks').addColumn('ordering', 'varchar(16)', (c) => c.notNull().defaultTo('none')).execute();
      await db.schema.alterTable('webhooks').addColumn('filter', 'text').execute();
      await db.schema.alterTable('deliveries').addColumn('record_key', 'varchar(200)').execute();
      // "Is an earlier delivery of this record still waiting?" is an index seek on waiting rows only.
      await db.schema
        .createIndex('deliveries_waiting_records')
        .on('deliveries')
        .columns(['webhook_id', 'record_key', 'id'])
        .where(sql.ref('status'), 'in', [sql.lit('pending'), sql.lit('retrying')])
        .execute();
    },
  },
  '0006_redeliveries_refer_to_payloads': {
    async up(db) {
      // Issue 22: a redelivery refers to its original's payload instead of copying it (its own
      // `payload` is left empty), so replays do not grow the database by the payloads they send.
      await db.schema.alterTable('deliveries').addColumn('payload_of', 'bigint').execute();
      // Retention keeps an original while a redelivery refers to it (webhooks/retention.ts).
      await db.schema.createIndex('deliveries_payload_of').on('deliveries').column('payload_of').where(sql.ref('payload_of'), 'is not', null).execute();
      // The redelivery cap counts a webhook's redeliveries of the last 24 hours (deliveries-log.ts).
      await db.schema
        .createIndex('deliveries_redeliveries')
        .on('deliveries')
        .columns(['webhook_id', 'created_at'])
        .where(sql.ref('redelivery'), '=', sql.lit(1))
        .execute();
    },
  },
  '0007_waiting_deliveries_per_webhook_index': {
    async up(db) {
      // Issue 22: with a user at their share, the claim query reads the other webhooks' waiting
      // deliveries one webhook at a time, in due order: an index seek per webhook.
      await db.schema
        .createIndex('deliveries_waiting_webhooks')
        .on('deliveries')
        .columns(['webhook_id', 'next_attempt_at', 'id'])
        .where(sql.ref('status'), 'in', [sql.lit('pending'), sql.lit('retrying')])
        .execute();
    },
  },
  '0008_user_roles': {
    async up(db) {
      // ACCESS.md §1: each user's roles, a JSON list of names. A database that predates roles
      // gives `admin` to its first user (on a new one, the first start creates it with `admin`).
      await db.schema.alterTable('users').addColumn('roles', 'text', (c) => c.notNull().defaultTo('[]')).execute();
      await sql`update users set roles = '["admin"]' where id = (select min(id) from users)`.execute(db);
    },
  },
  '0009_api_keys': {
    async up(db) {
      // ACCESS.md §5: long-lived keys for programs, stored as the SHA-256 of the key (a key is 256
      // random bits, so a fast hash is enough: nothing to guess from it, as GitHub's tokens).
      const editor = schemaEditorFor(db);
      await db.schema
        .createTable('api_keys')
        .addColumn('id', editor.primaryKeyType())
        .addColumn('owner_id', 'bigint', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('name', 'varchar(100)', (c) => c.notNull())
        .addColumn('scopes', 'text', (c) => c.notNull())
        .addColumn('prefix', 'varchar(12)', (c) => c.notNull())
        .addColumn('key_hash', 'varchar(64)', (c) => c.notNull().unique())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('last_used_at', 'bigint')
        .addColumn('expires_at', 'bigint')
        .execute();
      await db.schema.createIndex('api_keys_owner').on('api_keys').columns(['owner_id', 'id']).execute();
    },
  },
  '0010_change_log': {
    async up(db) {
      // Issue 23, STREAMS.md §3: one row per change, written in the change's transaction with
      // position null; its last step numbers the transaction's rows from `change_positions`
      // under that row's lock, held until commit, so positions follow commit order
      // (db/change-log.ts). `row` is the record's columns (before a delete), `previous` its
      // columns before an update: streams judge their filters and read rules against them.
      const editor = schemaEditorFor(db);
      await db.schema
        .createTable('change_log')
        .addColumn('id', editor.primaryKeyType())
        .addColumn('position', 'bigint')
        .addColumn('collection', 'varchar(100)', (c) => c.notNull())
        .addColumn('record_id', 'bigint', (c) => c.notNull())
        .addColumn('action', 'varchar(16)', (c) => c.notNull())
        .addColumn('record', 'text', (c) => c.notNull())
        .addColumn('changes', 'text')
        .addColumn('row', 'text', (c) => c.notNull())
        .addColumn('previous', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('change_log_position').on('change_log').column('position').unique().execute();
      // The counter positions are taken from, and the newest position pruning has removed.
      await db.schema
        .createTable('change_positions')
        .addColumn('id', 'integer', (c) => c.primaryKey())
        .addColumn('last', 'bigint', (c) => c.notNull())
        .addColumn('pruned_through', 'bigint', (c) => c.notNull())
        .execute();
      await sql`insert into change_positions (id, last, pruned_through) values (1, 0, 0)`.execute(db);
    },
  },
  '0011_idempotency_keys': {
    async up(db) {
      // REQUESTS.md §1: a write's response under its caller's Idempotency-Key, stored in the
      // write's own transaction and kept until `expires_at` (IDEMPOTENCY_TTL_HOURS; pruned with
      // the delivery log). `body` is sealed (it may hold a secret shown once).
      await db.schema
        .createTable('idempotency_keys')
        .addColumn('user_id', 'bigint', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('key', 'varchar(255)', (c) => c.notNull())
        .addColumn('request_hash', 'varchar(64)', (c) => c.notNull())
        .addColumn('status', 'integer', (c) => c.notNull())
        .addColumn('headers', 'text', (c) => c.notNull())
        .addColumn('body', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('idempotency_keys_pkey', ['user_id', 'key'])
        .execute();
      await db.schema.createIndex('idempotency_keys_expiry').on('idempotency_keys').column('expires_at').execute();
    },
  },
  '0012_unnumbered_changes_index': {
    async up(db) {
      // Every writing transaction's last step finds the changes still unnumbered (db/change-log.ts),
      // under the counter's lock. Through the position index it also visited every change numbered
      // since the last vacuum: numbering updates the row, and the null entry of its old version stays
      // in that index until vacuum, each one a heap visit (6–16 ms per numbering at 20,000 changes,
      // all writers waiting on it). A partial index holds only unnumbered rows, in id order, and an
      // index scan marks the dead entries it meets so that later scans skip them.
      await db.schema.createIndex('change_log_unnumbered').on('change_log').column('id').where(sql.ref('position'), 'is', null).execute();
    },
  },
};

const provider: MigrationProvider = { getMigrations: async () => MIGRATIONS };

/** Applies every pending migration; returns the names applied. Safe to run from several processes. */
export async function migrateToLatest(db: AnyDb): Promise<string[]> {
  const migrator = new Migrator({ db, provider });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/** restwire's own migrations not yet applied (for `restwire migrate --plan`); changes nothing. */
export async function pendingMigrations(db: AnyDb): Promise<string[]> {
  const migrations = await new Migrator({ db, provider }).getMigrations();
  return migrations.filter((migration) => migration.executedAt === undefined).map((migration) => migration.name);
}
