// The package's public surface (`import … from 'restwire'`): declare your own collections
// (RESOURCES.md §1), and verify restwire's deliveries in your own receiver.

import { allowAny, and, authenticatedOrReadOnly, isAuthenticated, not, or, ownerOrReadOnly } from './auth/permissions.js';

/**
 * Declare a collection: the default export of each file in your resources folder.
 *
 * @example
 * import { defineResource, field, permission } from 'restwire';
 * export default defineResource({
 *   name: 'books',
 *   fields: { title: field.string({ maxLength: 200 }), author: field.reference('authors') },
 *   owner: true,
 *   permission: permission.and(permission.authenticatedOrReadOnly, permission.ownerOrReadOnly),
 *   event: 'book',
 * });
 */
export { defineResource, LOOKUPS, type ActionName, type Lookup, type RelatedList, type Resource, type ResourceOptions } from './resources/resource.js';
/** Your own logic around writes: the hooks' types, and `reject` to refuse a request. */
export { reject, type CollectionHandle, type CreateHookContext, type HookContext, type HookUser, type ResourceHooks, type StoredRecord, type WriteHookContext } from './resources/hooks.js';
/** Endpoints of your own: a declaration's `actions`. */
export type { ActionDeclaration, ActionHandlerContext, ActionResult } from './resources/actions.js';
export type { FieldType, OnDelete } from './db/schema-state.js';
export type { CommonOptions, Field } from './resources/fields/field.js';
export { field } from './resources/fields/index.js';
/** The types a declaration's own code is checked with (LOGIC.md §6): values and records typed from the fields. */
export type { FieldConstructors, FieldKind, JsonValue, LooseRecord, RecordValues, StoredRecordOf, TypedField, TypedValidateContext } from './resources/declaration-types.js';
export type { FieldValidator } from './resources/fields/field.js';
export type { Caller, ValidateContext, ValidationErrors } from './resources/record-validation.js';
/** The seed's `experiences`, for a resources folder that wants to keep serving it: `export { experiences as default } from 'restwire'`. */
export { experiences } from './resources/experiences.js';
export type { Permission, PermissionContext, OwnedRecord } from './http/caller.js';

/** Permission policies (DRF's), and `and` / `or` / `not` to combine them. */
export const permission = { allowAny, isAuthenticated, authenticatedOrReadOnly, ownerOrReadOnly, and, or, not } as const;

/**
 * Verify a restwire delivery in your own server.
 *
 * @example
 * import { verifyDelivery } from 'restwire';
 * if (!verifyDelivery(process.env.WEBHOOK_SECRET!, request.headers, rawBody)) return reply.code(401).send();
 */
export { verifyDelivery, type IncomingHeaders, type VerifyOptions } from './webhooks/verify.js';
