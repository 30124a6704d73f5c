/**
 * What the database holds for the user's declared collections, as plain data: the state a set of
 * migration files describes (replayed in order) and the state the declarations ask for. The
 * migration autodetector compares two of these (RESOURCES.md §5); the schema editors
 * (`schema-editor/`) turn the operations between them into SQL on SQLite and PostgreSQL.
 *
 * How a collection maps to tables (the one place these rules are written down):
 * - table `<collection>`: `id` (auto-increment, never reused), then a column per field,
 *   `owner_id` when `owner`, `created_at`/`updated_at` (bigint milliseconds) when `timestamps`;
 * - a `reference` field `author` is the column `author_id` (bigint, foreign key to the target's
 *   `id`, no database action on delete: the viewset applies `onDelete` itself so that each
 *   affected record raises its event);
 * - a `references` field `tags` is the join table `<collection>_<field>` (`from_id`, `to_id`,
 *   primary key of both, each a foreign key with ON DELETE CASCADE) and no column;
 * - column types: integer, decimal (scaled by 10^decimalPlaces, exact) and the id/owner/reference
 *   columns are bigint; boolean is integer 0/1; everything else (string, text, email, url, choice,
 *   date, datetime as RFC 3339 text, json as its text) is text. The same on both dialects, so
 *   queries need no dialect branches (as for restwire's own tables, `schema.ts`).
 * - a `unique` field has a unique index `<table>__<column>__unique`; each entry of `indexes`
 *   an index `<table>__<field>__idx` on (column, id), for keyset pages and filters.
 */

/** The field types of RESOURCES.md §2. */
export const FIELD_TYPES = [
  'string',
  'text',
  'integer',
  'decimal',
  'boolean',
  'date',
  'datetime',
  'email',
  'url',
  'choice',
  'json',
  'reference',
  'references',
] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

export type OnDelete = 'protect' | 'cascade' | 'setNull';

/** One field as stored: what a migration must know to create or change its column. */
export interface FieldState {
  readonly type: FieldType;
  /** The column accepts NULL (a nullable field, or an optional one without a default). */
  readonly null: boolean;
  readonly unique: boolean;
  /** The default as stored in the column (decimal scaled, boolean 0/1, json as text); absent: none. */
  readonly default?: string | number | null;
  readonly maxLength?: number;
  readonly maxDigits?: number;
  readonly decimalPlaces?: number;
  /** `reference` / `references`: the target collection. */
  readonly to?: string;
  readonly onDelete?: OnDelete;
}

export interface CollectionState {
  /** An `owner_id` column pointing at `users`. */
  readonly owner: boolean;
  readonly timestamps: boolean;
  /** In declaration order (columns are created in this order). */
  readonly fields: Readonly<Record<string, FieldState>>;
  /**
   * Fields (or `owner`, `created_at`, `updated_at`) that get an index on (column, id): one per
   * ordering and filter. Sorted, without duplicates, `id` never listed.
   */
  readonly indexes: readonly string[];
}

/** Collection name (= table name) → its state. */
export type SchemaState = Readonly<Record<string, CollectionState>>;

/** The column that stores a field, or null for a `references` field (a join table). */
export function columnOf(name: string, field: Pick<FieldState, 'type'>): string | null {
  if (field.type === 'references') return null;
  return field.type === 'reference' ? `${name}_id` : name;
}

/** The join table of a `references` field. */
export function joinTableOf(collection: string, field: string): string {
  return `${collection}_${field}`;
}

/** The unique index of a field's column. */
export function uniqueIndexOf(table: string, column: string): string {
  return `${table}__${column}__unique`;
}

/** The ordering/filter index of a field. */
export function indexOf(table: string, field: string): string {
  return `${table}__${field}__idx`;
}

/** The column type that stores a field (the rules above); null for a `references` field. */
export function columnTypeOf(field: Pick<FieldState, 'type'>): 'bigint' | 'integer' | 'text' | null {
  switch (field.type) {
    case 'references':
      return null;
    case 'integer':
    case 'decimal':
    case 'reference':
      return 'bigint';
    case 'boolean':
      return 'integer';
    default:
      return 'text';
  }
}

/** Digits after the point as stored: integer 0, decimal its decimalPlaces; null for other types. */
export function scaleOf(field: FieldState): number | null {
  if (field.type === 'integer') return 0;
  if (field.type === 'decimal') return field.decimalPlaces ?? 0;
  return null;
}

/**
 * The column an entry of `indexes` names: a declared field's column, else `owner` → `owner_id`
 * (when `owner`), `created_at`/`updated_at` (when `timestamps`); null when it names none of
 * these or a `references` field (a join table has no column to index).
 */
export function indexColumnOf(collection: CollectionState, entry: string): string | null {
  const field = collection.fields[entry];
  if (field) return columnOf(entry, field);
  if (entry === 'owner' && collection.owner) return 'owner_id';
  if ((entry === 'created_at' || entry === 'updated_at') && collection.timestamps) return entry;
  return null;
}
