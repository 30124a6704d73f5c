// A declaration's `validate(values, ctx)` (LOGIC.md §1, DRF's `Serializer.validate`), made into
// the viewset's one validation step (`ViewSetHooks.validate`): it runs once per create, update or
// partial update, after every field passed, outside the write's transaction as the built-in
// checks that need I/O do. `values` is the whole record as it would be stored, as the record's
// JSON shows it: a PATCH merged with the stored record, a create completed with the defaults, and
// each reference also as `<name>_id`.

import { columnOf } from '../db/schema-state.js';
import type { Row } from '../db/dynamic-tables.js';
import type { FieldErrors } from '../http/errors.js';
import type { ApiRequest } from '../http/view.js';
import type { Field } from './fields/field.js';
import { userCodeError } from './user-code.js';

/** The caller as user code sees it (LOGIC.md §1, §3), or null for an anonymous one. */
export interface Caller {
  readonly id: number;
  readonly username: string;
  readonly roles: readonly string[];
}

/** Where `validate` reports: `add(field, message)` to `errors.<field>`, `add(null, message)` to `errors.non_field_errors`. */
export interface ValidationErrors {
  add(field: string | null, message: string): void;
}

/** The second argument of a declaration's `validate`. */
export interface ValidateContext<Stored = Readonly<Record<string, unknown>>> {
  readonly errors: ValidationErrors;
  readonly user: Caller | null;
  /** The record as stored before this write (updates); null on a create. */
  readonly record: Stored | null;
}

/** A declaration's `validate`, as the runtime sees it (its typed form is `ResourceOptions.validate`). */
export type DeclaredValidate = (values: Record<string, unknown>, context: ValidateContext) => void | Promise<void>;

/** The stored record an update starts from, as the viewset read it. */
export interface StoredRecord {
  readonly row: Row;
  /** As the API shows it (what `ctx.record` is made of). */
  readonly record: Record<string, unknown>;
}

/** The viewset's validation step (`ViewSetHooks.validate`): adds to `errors`; `stored` on an update. */
export type ValidationStep = (values: Record<string, unknown>, errors: FieldErrors, request: ApiRequest, stored: StoredRecord | null) => Promise<void>;

/** DRF's key for what belongs to no one field. */
export const NON_FIELD_ERRORS = 'non_field_errors';

/** The caller as user code sees it. */
export function callerOf(request: ApiRequest): Caller | null {
  const user = request.user;
  return user ? { id: user.id, username: user.username, roles: user.roles } : null;
}

/**
 * The record as user code sees it (LOGIC.md §1, §3): what the API shows, plus each reference's id
 * as `<name>_id` (null when it refers to nothing).
 */
export function withReferenceIds(fields: Readonly<Record<string, Field>>, row: Row, shown: Record<string, unknown>): Record<string, unknown> {
  const record = { ...shown };
  for (const [name, field] of Object.entries(fields)) {
    if (field.type === 'reference') record[`${name}_id`] = row[`${name}_id`] === null || row[`${name}_id`] === undefined ? null : Number(row[`${name}_id`]);
  }
  return record;
}

/**
 * The whole record as it would be stored, as shown: each field's new value, else its stored one
 * (an update), else its default (a create); references also as `<name>_id`.
 */
function wholeRecord(fields: Readonly<Record<string, Field>>, values: Record<string, unknown>, stored: StoredRecord | null): Record<string, unknown> {
  const record: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(fields)) {
    let value: unknown;
    if (Object.hasOwn(values, name)) value = values[name];
    else if (stored && field.type === 'references') {
      record[name] = stored.record[name] ?? [];
      continue;
    } else if (stored) value = stored.row[columnOf(name, field)!];
    else value = field.hasDefault ? field.defaultValue : null;
    record[name] = field.show(value);
    if (field.type === 'reference') record[`${name}_id`] = value === null || value === undefined ? null : Number(value);
  }
  return record;
}

/**
 * The viewset's validation step with a declaration's `validate`, after a built-in collection's
 * own step (`own`) when it has one: nothing while a field has an error (as DRF calls `validate`
 * only once every field passed); what it adds goes to `errors`. A throw that is not an ApiError
 * (a `reject(…)`) is a 500 naming the collection.
 */
export function validationStep(collection: string, fields: Readonly<Record<string, Field>>, validate: DeclaredValidate, own?: ValidationStep): ValidationStep {
  return async function validateRecord(values, errors, request, stored) {
    await own?.(values, errors, request, stored);
    if (Object.keys(errors).length) return;
    const context: ValidateContext = {
      errors: {
        add(field, message) {
          const key = field ?? NON_FIELD_ERRORS;
          (errors[key] ??= []).push(String(message));
        },
      },
      user: callerOf(request),
      record: stored ? withReferenceIds(fields, stored.row, stored.record) : null,
    };
    try {
      await validate(wholeRecord(fields, values, stored), context);
    } catch (error) {
      throw userCodeError(collection, 'validate', error);
    }
  };
}
