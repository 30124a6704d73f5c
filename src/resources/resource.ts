import type { Kysely, Transaction } from 'kysely';
import type { Permission } from '../auth/permissions.js';
import type { User } from '../auth/user.js';
import type { Database } from '../db/schema.js';
import type { WritableField } from './fields.js';

/** The viewset actions a resource can offer (DRF's names). */
export type ActionName = 'list' | 'create' | 'retrieve' | 'update' | 'partial_update' | 'destroy';

/** A list filter: a query parameter turned into a condition, or a 400 for a bad value. */
export interface Filter {
  readonly description: string;
  readonly schema: Record<string, unknown>;
  /** Returns the condition's parts, or an error message for a bad value. */
  parse(value: string): { column: string; op: '=' | 'contains'; value: string | number } | { error: string };
}

/** A read-only column shown as-is (e.g. a user's `username`). */
export interface ReadOnlyField {
  readonly label: string;
  readonly schema: Record<string, unknown>;
}

/** A reverse relation shown as a list of paths (e.g. a user's `experiences`). */
export interface RelatedList {
  readonly table: keyof Database;
  /** The column in `table` that points at this resource's id. */
  readonly column: string;
  /** The collection the related records live in, for their paths. */
  readonly collection: string;
}

/** Who owns a record: a column holding a user id, shown as a path under `users`. */
export interface OwnerField {
  readonly field: string;
  readonly column: string;
}

/** A change committed by the viewset, handed to listeners inside the same transaction. */
export interface Change {
  readonly resource: ResourceDeclaration;
  readonly action: 'created' | 'updated' | 'deleted';
  /** The record's representation after the change (before it, for `deleted`). */
  readonly record: Record<string, unknown>;
  /** For `updated`: each changed field's previous value, as GitHub's `changes`. */
  readonly changes?: Record<string, { from: unknown }>;
  readonly actor: User;
}

/**
 * Runs inside the transaction of the change it hears about, so that what it writes (the
 * webhook outbox) commits or rolls back with the change (API.md §4, "No lost events"). It may
 * return a function to run once the transaction has committed (e.g. to wake the dispatcher).
 */
export type ChangeListener = (
  trx: Transaction<Database> | Kysely<Database>,
  change: Change,
) => Promise<void | (() => void)>;

/**
 * A resource declared as data: the generic viewset (`viewset.ts`) turns it into list, create,
 * retrieve, update, partial update and destroy. Adding a resource means adding one such file.
 */
export interface ResourceDeclaration {
  /** The collection's path segment and name, e.g. `experiences`. */
  readonly name: string;
  /** One record's name, e.g. `Experience`. */
  readonly label: string;
  readonly description: string;
  readonly table: keyof Database;
  readonly actions: readonly ActionName[];
  readonly permission: Permission;
  /** Writable fields, stored in columns of the same names. */
  readonly fields: Readonly<Record<string, WritableField>>;
  readonly readOnlyFields?: Readonly<Record<string, ReadOnlyField>>;
  readonly owner?: OwnerField;
  readonly related?: Readonly<Record<string, RelatedList>>;
  /** Adds read-only `created_at` and `updated_at` (RFC 3339 UTC). */
  readonly timestamps?: boolean;
  /** Public ordering names → columns; each is offered ascending and, with `-`, descending. */
  readonly orderings: Readonly<Record<string, string>>;
  readonly defaultOrdering: string;
  readonly filters?: Readonly<Record<string, Filter>>;
  /** The webhook event kind this resource's changes raise (e.g. `experience`); none if absent. */
  readonly event?: string;
}

/** Declares a resource (an identity function that checks the shape at compile time). */
export function defineResource(declaration: ResourceDeclaration): ResourceDeclaration {
  return declaration;
}

/** `?owner=3`: a positive integer id. */
export function integerFilter(column: string, description: string): Filter {
  return {
    description,
    schema: { type: 'integer', minimum: 1 },
    parse: (value) =>
      /^[1-9]\d{0,14}$/.test(value) ? { column, op: '=', value: Number(value) } : { error: 'Must be a positive integer id.' },
  };
}

/** `?title=…`: exact match. */
export function exactFilter(column: string, description: string): Filter {
  return { description, schema: { type: 'string' }, parse: (value) => ({ column, op: '=', value }) };
}

/** `?search=…`: case-insensitive substring. */
export function containsFilter(column: string, description: string): Filter {
  return { description, schema: { type: 'string' }, parse: (value) => ({ column, op: 'contains', value }) };
}

/** The path of a record: `/api/v1/<collection>/<id>/` (SEED.md §1 rule 7). */
export function recordPath(collection: string, id: number): string {
  return `/api/v1/${collection}/${id}/`;
}

/** The columns (and CSV header) of a resource's representation, in order. */
export function representationFields(resource: ResourceDeclaration): string[] {
  return [
    'url',
    'id',
    ...Object.keys(resource.readOnlyFields ?? {}),
    ...Object.keys(resource.fields),
    ...(resource.owner ? [resource.owner.field] : []),
    ...Object.keys(resource.related ?? {}),
    ...(resource.timestamps ? ['created_at', 'updated_at'] : []),
  ];
}
