import type { Generated, Selectable } from 'kysely';

/**
 * The tables, as Kysely sees them. Times are integers (milliseconds since the epoch) on both
 * SQLite and PostgreSQL so that comparisons and ordering need no dialect-specific SQL; they are
 * rendered as RFC 3339 at the edge. Booleans are stored as 0/1 for the same reason.
 */
export interface Database {
  users: UsersTable;
  experiences: ExperiencesTable;
  settings: SettingsTable;
  sessions: SessionsTable;
  refresh_tokens: RefreshTokensTable;
  webhooks: WebhooksTable;
  deliveries: DeliveriesTable;
  api_keys: ApiKeysTable;
  idempotency_keys: IdempotencyKeysTable;
  change_log: ChangeLogTable;
  change_positions: ChangePositionsTable;
}

/** A response stored under its caller's Idempotency-Key (REQUESTS.md §1; db/idempotency-keys.ts). */
export interface IdempotencyKeysTable {
  user_id: number;
  key: string;
  /** SHA-256 of the method, path and body: the same key with another request is a 422. */
  request_hash: string;
  status: number;
  /** JSON: the response's headers, content type and ETag. */
  headers: string;
  /** The rendered body, sealed; null for a response without one (204). */
  body: string | null;
  created_at: number;
  expires_at: number;
}

export interface UsersTable {
  id: Generated<number>;
  username: string;
  password_hash: string;
  /** Bumped on every password change; credential caches and refresh tokens key on it. */
  password_changed_at: number;
  created_at: number;
  /** The user's roles, a JSON list of names (ACCESS.md §1; auth/roles.ts). */
  roles: Generated<string>;
}

export interface ExperiencesTable {
  id: Generated<number>;
  title: string;
  q_like_dislike: string;
  owner_id: number;
  created_at: number;
  updated_at: number;
}

export interface SettingsTable {
  key: string;
  value: string;
}

export interface SessionsTable {
  /** SHA-256 of the session id: a stolen database does not yield usable cookies. */
  id_hash: string;
  user_id: number;
  csrf_token: string;
  created_at: number;
  last_seen_at: number;
}

export interface RefreshTokensTable {
  id_hash: string;
  family: string;
  user_id: number;
  expires_at: number;
  retired_at: number | null;
  created_at: number;
}

export interface WebhooksTable {
  id: Generated<number>;
  owner_id: number;
  target_url: string;
  /** JSON array of event names, `["*"]` for all. */
  events: string;
  active: number;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_expires_at: number | null;
  last_response_code: number | null;
  last_response_status: string;
  last_response_message: string | null;
  disabled_reason: string | null;
  /** When the current run of failed deliveries began; null while deliveries succeed. */
  failing_since: number | null;
  created_at: number;
  updated_at: number;
  /** `none`, or `record`: deliveries about one record go out one at a time, in commit order. */
  ordering: Generated<string>;
  /** JSON object, event name → a list filter query string; null: every event. */
  filter: string | null;
}

export interface DeliveriesTable {
  id: Generated<number>;
  guid: string;
  webhook_id: number;
  event: string;
  action: string | null;
  payload: string;
  status: string;
  attempts: number;
  next_attempt_at: number;
  lease_until: number | null;
  status_code: number | null;
  duration_ms: number | null;
  delivered_at: number | null;
  redelivery: number;
  request_headers: string | null;
  response_headers: string | null;
  response_body: string | null;
  created_at: number;
  /** `<collection>:<id>` of the record a resource event is about; null for a ping. */
  record_key: string | null;
  /** A redelivery's original, whose `payload` it sends (its own is empty); null: its own payload. */
  payload_of: number | null;
}

/** API keys (ACCESS.md §5); the key itself is never stored, only its SHA-256. */
export interface ApiKeysTable {
  id: Generated<number>;
  owner_id: number;
  name: string;
  /** JSON array of scopes, e.g. `["experiences:read"]`. */
  scopes: string;
  /** The key's first 12 characters, to tell keys apart. */
  prefix: string;
  /** SHA-256 of the key, hex. */
  key_hash: string;
  created_at: number;
  /** To the minute; written at most once a minute. */
  last_used_at: number | null;
  expires_at: number | null;
}

/** One committed change (STREAMS.md §3; db/change-log.ts); JSON text in `record` … `previous`. */
export interface ChangeLogTable {
  id: Generated<number>;
  /** Null until the transaction's last step numbers it; every committed row has one. */
  position: number | null;
  collection: string;
  record_id: number;
  action: string;
  /** The record as represented at the change (before it, for `deleted`). */
  record: string;
  /** An update's `changes` (`{ field: { from } }`), else null. */
  changes: string | null;
  /** The record's columns after the change (before it, for `deleted`). */
  row: string;
  /** An update's columns before it, else null. */
  previous: string | null;
  created_at: number;
}

/** One row (id 1): the last position taken, and the newest one pruning removed. */
export interface ChangePositionsTable {
  id: number;
  last: number;
  pruned_through: number;
}

export type ChangeLogRow = Selectable<ChangeLogTable>;
export type UserRow = Selectable<UsersTable>;
export type WebhookRow = Selectable<WebhooksTable>;
export type DeliveryRow = Selectable<DeliveriesTable>;
