// A declaration's own logic around a write (LOGIC.md §3): the six hooks, what each is given, and
// `reject`. The viewset calls them inside the write's transaction (`viewset/hook-context.ts`);
// restwire's own collections use the same hooks, with a few storage-level members only they see
// (`BuiltinHookContext`: the transaction, the row and its columns).

import type { DynamicDb, Row } from '../db/dynamic-tables.js';
import { REJECT_STATUSES, Rejected, type FieldErrors, type RejectStatus } from '../http/errors.js';
import type { ApiRequest } from '../http/view.js';

/** The six hooks a declaration may state, in the order of a record's life. */
export const HOOK_NAMES = ['beforeCreate', 'afterCreate', 'beforeUpdate', 'afterUpdate', 'beforeDelete', 'afterDelete'] as const;
export type HookName = (typeof HOOK_NAMES)[number];

/** A record as the API shows it, plus `<reference>_id` numbers (LOGIC.md §3). */
export type StoredRecord = Record<string, unknown> & { readonly id: number; readonly url: string };

/** Who made the request: `null` for an anonymous caller. */
export interface HookUser {
  readonly id: number;
  readonly username: string;
  readonly roles: readonly string[];
}

/**
 * Another collection (or this one) in the same transaction, as a hook or action sees it: the same
 * validation, hooks and events as an API write, without access rules (LOGIC.md §3).
 */
export interface CollectionHandle {
  /** The record, or `null`. */
  get(id: number): Promise<StoredRecord | null>;
  /** Every record matching a list filter query string (`year__gte=2000&genre=poetry`), in id order; more than 10,000 is an error. */
  list(filter?: string): Promise<StoredRecord[]>;
  /** Values as the API's JSON gives them; a reference may also be an id. */
  create(values: Record<string, unknown>): Promise<StoredRecord>;
  /** A partial update (PATCH). */
  update(id: number, values: Record<string, unknown>): Promise<StoredRecord>;
  delete(id: number): Promise<void>;
}

/** What every hook but `beforeCreate` is given. */
export interface HookContext {
  /**
   * The stored record as the API shows it (with `<reference>_id` numbers): before the change in
   * `beforeUpdate` and `beforeDelete`, after it in `after*` (`afterDelete`: as it was).
   */
  readonly record: StoredRecord;
  readonly user: HookUser | null;
  /** A collection in this write's transaction. */
  collection(name: string): CollectionHandle;
  /** Runs `fn` once the transaction has committed, never when it rolled back; a failure is logged. */
  afterCommit(fn: () => unknown): void;
}

/** What `beforeUpdate` is given: the record, and the values about to be written. */
export interface WriteHookContext extends HookContext {
  /**
   * The values about to be written, as the record's JSON shows them (references as paths); change
   * them in place. A reference may be set to a path or an id. An update's hold the changed fields.
   */
  readonly values: Record<string, unknown>;
}

/** What `beforeCreate` is given: the values about to be written; there is no record yet. */
export interface CreateHookContext extends Omit<WriteHookContext, 'record'> {
  readonly record: null;
}

/** A declaration's hooks (LOGIC.md §3): async, inside the write's transaction; a throw rolls it all back. */
export interface ResourceHooks {
  beforeCreate?(ctx: CreateHookContext): Promise<void> | void;
  afterCreate?(ctx: HookContext): Promise<void> | void;
  beforeUpdate?(ctx: WriteHookContext): Promise<void> | void;
  afterUpdate?(ctx: HookContext): Promise<void> | void;
  beforeDelete?(ctx: HookContext): Promise<void> | void;
  afterDelete?(ctx: HookContext): Promise<void> | void;
}

/** What restwire's own collections' hooks see besides: storage, below the record's JSON. */
export interface BuiltinHookContext extends Omit<WriteHookContext, 'record'> {
  /** The record (as a declaration's hooks see it); null in `beforeCreate`. */
  readonly record: StoredRecord | null;
  readonly trx: DynamicDb;
  readonly request: ApiRequest;
  /** The stored row: before the change in `before*`, after it in `after*`; null in `beforeCreate`. */
  readonly row: Row | null;
  /** `beforeCreate` / `beforeUpdate`: the columns about to be written, changeable (a hashed password). */
  readonly columns: Record<string, unknown>;
  /** `afterCreate`: members and headers only this 201 shows (a secret shown once). */
  readonly response: { body?: Record<string, unknown>; headers?: Record<string, string> };
}

/** The six hooks as restwire's own collections state them (the same hooks, seeing more). */
export interface BuiltinWriteHooks {
  beforeCreate?(ctx: BuiltinHookContext): Promise<void> | void;
  afterCreate?(ctx: BuiltinHookContext): Promise<void> | void;
  beforeUpdate?(ctx: BuiltinHookContext): Promise<void> | void;
  afterUpdate?(ctx: BuiltinHookContext): Promise<void> | void;
  beforeDelete?(ctx: BuiltinHookContext): Promise<void> | void;
  afterDelete?(ctx: BuiltinHookContext): Promise<void> | void;
}

/**
 * Stops the request with a problem+json of that status (400, 403, 404, 409 or 422) and `detail`,
 * and `errors` (per field, as a 400's) when given; the whole transaction rolls back and no event
 * is raised (LOGIC.md §3).
 *
 * @example
 * hooks: { async beforeDelete({ record }) { if (record.locked) reject(409, 'This position is locked.'); } }
 */
export function reject(status: RejectStatus, detail: string, errors?: FieldErrors): never {
  if (!(REJECT_STATUSES as readonly number[]).includes(status)) {
    throw new TypeError(`reject: status ${String(status)} is not one of ${REJECT_STATUSES.join(', ')}`);
  }
  throw new Rejected(status, String(detail), errors);
}

// What only restwire's own collections may state besides the six (ViewSetHooks in resource.ts).
const BUILTIN_HOOKS = ['scope', 'validate', 'represent', 'representFor', 'constraintError'];

/** Checks a declaration's `hooks`: known names, each a function; `fail` throws the DeclarationError. */
export function checkHooks<H extends object>(hooks: H, { builtin, fail }: { builtin: boolean; fail: (field: string | null, problem: string) => never }): H {
  if (typeof hooks !== 'object' || hooks === null || Array.isArray(hooks)) fail(null, `hooks must be an object of functions (${HOOK_NAMES.join(', ')})`);
  for (const [name, hook] of Object.entries(hooks)) {
    const known = (HOOK_NAMES as readonly string[]).includes(name) || (builtin && BUILTIN_HOOKS.includes(name));
    if (!known) fail(null, `unknown hook "${name}" (use ${HOOK_NAMES.join(', ')})`);
    if (typeof hook !== 'function') fail(null, `hook "${name}" must be a function, e.g. async ${name}(ctx) { … }`);
  }
  return hooks;
}
