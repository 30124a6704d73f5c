// Declarations: a collection stated as data (RESOURCES.md §1). `defineResource` checks what it can
// alone (names, options, orderings and filters naming real fields) and throws a DeclarationError
// naming the collection and the field; `registry.ts` checks what needs every collection at once
// (reference targets, duplicate names and events) and adds the file name.

import type { Kysely, Transaction } from 'kysely';
import { and, authenticatedOrReadOnly, ownerOrReadOnly } from '../auth/permissions.js';
import type { Permission } from '../http/caller.js';
import type { User } from '../http/caller.js';
import type { Database } from '../db/schema.js';
import type { KeyLimit } from '../http/scopes.js';
import type { ActionDocs, ApiRequest, ApiResponse, PageTemplate } from '../http/view.js';
import type { Condition } from '../db/dynamic-tables.js';
import type { DynamicDb, Row } from '../db/dynamic-tables.js';
import { FIELD_TYPES } from '../db/schema-state.js';
import { isField, isInvalidField, optionsOf, type Field } from './fields/field.js';
import { isComputed, type ComputedField } from './fields/computed.js';
import { validationStep, type DeclaredValidate, type ValidationStep } from './record-validation.js';
import type { RecordValues, TypedValidateContext } from './declaration-types.js';
import { LOOKUPS, TEXT_TYPES, type Lookup } from './lookups.js';
import { permissionOf } from './access/compile.js';
import { parseAccess, parseFieldAccess, RuleError, type AccessRules, type AccessSource, type FieldAccessSource, type FieldRules } from './access/rules.js';
import { checkActions, type ActionDeclaration, type DeclaredAction } from './actions.js';
import { checkHooks, type BuiltinWriteHooks, type ResourceHooks } from './hooks.js';

/** The viewset actions a resource can offer (DRF's names). */
export type ActionName = 'list' | 'create' | 'retrieve' | 'update' | 'partial_update' | 'destroy';
export const ALL_ACTIONS: readonly ActionName[] = ['list', 'create', 'retrieve', 'update', 'partial_update', 'destroy'];

export { LOOKUPS, type Lookup } from './lookups.js';

/** A reverse relation: the paths of the records of `collection` whose `field` refers to this one. */
export interface RelatedList {
  readonly collection: string;
  /** A `reference` or `references` field of `collection`, or `owner`. */
  readonly field: string;
}

/**
 * What a user writes in `defineResource({...})` (RESOURCES.md §1); `F`, the fields, types what
 * the declaration's own code sees (LOGIC.md §6).
 */
export interface ResourceOptions<F extends Record<string, Field> = Record<string, Field>> {
  /** The collection's path segment and table, `[a-z][a-z0-9_]*`. */
  name: string;
  /** One record's name (default: the name, capitalised, without a trailing `s`). */
  label?: string;
  description?: string;
  fields: F;
  /** A read-only `owner` path, set to the creating user (default false). */
  owner?: boolean;
  /** Who may do what (default: anyone reads, signed-in users write, owners change their own). */
  permission?: Permission;
  /**
   * Who may read, create, update and delete which records, as rules (ACCESS.md §2), instead of
   * `permission`; an action left out is for admins only.
   */
  access?: AccessSource;
  /** Field names the list may be ordered by, besides `id` (each also with `-`). */
  orderings?: string[];
  /** Default `-id`. */
  defaultOrdering?: string;
  /** Field → the lookups offered as query parameters. */
  filters?: Record<string, Lookup[]>;
  /** Text fields `?search=` looks in (case-insensitive substring), as DRF's SearchFilter. */
  search?: string[];
  /** The webhook event name this collection's changes raise; none if absent. */
  event?: string;
  /** Fixes `repository.id` in event bodies (otherwise assigned once and kept). */
  eventId?: number;
  /** Reverse lists: name → the collection and field that refer to this one. */
  related?: Record<string, RelatedList>;
  /** `created_at` / `updated_at` (default true). */
  timestamps?: boolean;
  /** Which of the six viewset actions the collection offers (default: all six). */
  operations?: ActionName[];
  /** Code run inside each write's transaction (LOGIC.md §3). */
  hooks?: ResourceHooks;
  /** Endpoints of the collection's own (DRF's `@action`, LOGIC.md §4), by name. */
  actions?: Record<string, ActionDeclaration>;
  /**
   * Checks of the whole record (LOGIC.md §1), once every field passed: `values` is the record as
   * it would be stored; `ctx.errors.add(field | null, message)` refuses it with a 400.
   */
  validate?(values: RecordValues<F>, ctx: TypedValidateContext<F>): void | Promise<void>;
}

/**
 * The hooks the one viewset calls (DRF's get_queryset, perform_create, perform_update,
 * to_representation): a declaration's six write hooks (LOGIC.md §3), which restwire's own
 * collections state too, seeing the row and its columns; and what only those collections need.
 * Each is optional.
 */
export interface ViewSetHooks extends BuiltinWriteHooks {
  /** get_queryset: the condition every read and write of a request adds (may throw NotFound). */
  scope?(request: ApiRequest): Promise<Condition>;
  /**
   * Checks that need I/O (a DNS lookup) or more than one field, run outside the transaction after
   * each field's own check; add to `errors`. Slow work on checked values (a password's hash) goes
   * here too: on SQLite a transaction holds up every query of the process. `stored`: the record
   * an update changes (null on a create). A declaration's `validate` is made into this step.
   */
  validate?: ValidationStep;
  /** to_representation: fills what no one column shows (nested objects, computed members), once per page. */
  represent?(rows: readonly Row[], out: Record<string, unknown>[], context: { detail: boolean; executor: DynamicDb }): Promise<void>;
  /**
   * Members only some callers see (a user's `roles`, to that user and to admins), added to each
   * response's records; never to event bodies. Such a collection's lists are never served from
   * the shared representation cache, as scoped ones are not.
   */
  representFor?(request: ApiRequest, rows: readonly Row[], out: Record<string, unknown>[]): void;
  /**
   * A constraint violation the checks could not see (a race: two signups of one username), as
   * this collection words it; null leaves it to the viewset's own wording (a field's `unique`).
   */
  constraintError?(error: unknown): Error | null;
}

/** What an extra action may ask of its viewset. */
export interface ActionContext {
  /** The record of the URL (or of `id`), through `scope` and the object permission (404 / 403). */
  loadRow(request: ApiRequest, id?: number): Promise<Row>;
  /** A write transaction (Storage.transact, or a savepoint of the request's write unit), its constraint errors turned into 400/409. */
  transact<T>(work: (trx: DynamicDb) => Promise<T>): Promise<T>;
  /** Rows as records, as `request`'s caller sees them when given: reverse lists hold what they may read, and `hooks.representFor`'s members. */
  represent(rows: readonly Row[], options?: { detail?: boolean; request?: ApiRequest }): Promise<Record<string, unknown>[]>;
  /** Runs `callback` once the action's writes have committed: at once, or after its write unit's commit. */
  afterCommit(callback: () => void): void;
}

/** DRF's @action: a route on the collection (`detail: false`) or on a record, beside the six. */
export interface ExtraAction {
  readonly name: string;
  readonly description: string;
  readonly detail: boolean;
  /** Below the collection or record path, e.g. `pings/`. */
  readonly path: string;
  /** POST (default), or GET for a read that answers with a record (JSON, HTML, CSV as the collection's). */
  readonly method?: 'GET' | 'POST';
  /** Who may call it (default: the collection's permission). */
  readonly permission?: Permission;
  /** A GET every API key may call, whatever its scopes (`users/me`, ACCESS.md §5). */
  readonly everyKey?: boolean;
  /** OPTIONS metadata: the fields its POST reads (a declared action's `input`). */
  readonly metadata?: () => Record<string, unknown>;
  /** The media types it renders, when not the collection's (a GET) or JSON alone (a POST). */
  readonly mediaTypes?: readonly string[];
  readonly docs?: ActionDocs;
  handle(request: ApiRequest, context: ActionContext): Promise<ApiResponse>;
}

/** What only restwire's own declarations may state. */
export interface BuiltinOptions extends Omit<ResourceOptions, 'hooks'> {
  /** The table, when not the name. */
  table?: string;
  /** Served below a record of another collection: `/api/v1/<collection>/:id/<name>/:<param>/`. */
  nestedUnder?: NestedUnder;
  /** Fields only the record view shows (a delivery's request and response). */
  detailOnly?: string[];
  /** The record view's description, when not the collection's. */
  recordDescription?: string;
  /** Members only the 201 of a create shows, added by `afterCreate` (a webhook's secret, shown once). */
  createShows?: string[];
  hooks?: ViewSetHooks;
  extraActions?: ExtraAction[];
  /** The create's OpenAPI description, in place of the one made from the fields (signup's credentials). */
  createDocs?: ActionDocs;
  /** The same for PUT and PATCH (a user's, which writes `roles` only). */
  updateDocs?: ActionDocs;
  /** Members `hooks.representFor` adds for some callers, with their JSON Schemas (OpenAPI lists them as optional). */
  callerMembers?: Record<string, Record<string, unknown>>;
  /** Browsable pages that draw a GET's body, when not the generic page (the webhook dashboards). */
  pages?: ViewPages;
  /** The most an API key may do here whatever its scopes (ACCESS.md §5): `read` (users), `none` (keys). */
  keyLimit?: Exclude<KeyLimit, 'write'>;
  /**
   * Its changes are logged by writers outside the viewset, as rows only (a webhook's deliveries,
   * by the outbox and the dispatcher: webhooks/delivery-changes.ts), so its streams show every
   * change from its row, as a GET would (resources/viewset/stream.ts).
   */
  changesLoggedAsRows?: boolean;
}

/** The page templates of a collection's two views (http/view.ts `page`). */
export interface ViewPages {
  readonly collection?: PageTemplate;
  readonly record?: PageTemplate;
}

export interface NestedUnder {
  readonly collection: string;
  /** The column holding the parent's id. */
  readonly column: string;
  /** The record's own path parameter (the parent's is `id`). */
  readonly param: string;
}

const RESOURCE = Symbol.for('restwire.resource');

/** A checked declaration, as the viewset, migrations, OpenAPI and events read it. */
export interface Resource {
  readonly [RESOURCE]: true;
  readonly name: string;
  readonly label: string;
  readonly description: string;
  /** The table; restwire's own `users` keeps extra columns the declaration does not name. */
  readonly table: string;
  readonly operations: readonly ActionName[];
  /** The pipeline's permission stage: the rules' own when there are rules. */
  readonly permission: Permission;
  /**
   * The record rules (ACCESS.md §2): the declaration's `access`, or its `permission` as rules
   * where it can be written so (the built-in policies, `and`, `or`); null: `permission` alone.
   */
  readonly access: AccessRules | null;
  /** The stored fields (computed ones are in `computed`). */
  readonly fields: Readonly<Record<string, Field>>;
  /**
   * The field rules (ACCESS.md §3) of the fields that have one some caller may fail; a field
   * absent here is read and written as its declaration says (access/field-rules.ts).
   */
  readonly fieldAccess: Readonly<Record<string, FieldRules>>;
  /** Computed fields (LOGIC.md §2): shown after the stored ones, never stored. */
  readonly computed: Readonly<Record<string, ComputedField>>;
  readonly owner: boolean;
  readonly timestamps: boolean;
  /** Public ordering names (`id`, fields, timestamps) → the field they order by. */
  readonly orderings: readonly string[];
  readonly defaultOrdering: string;
  readonly filters: Readonly<Record<string, readonly Lookup[]>>;
  readonly search: readonly string[];
  readonly event: string | undefined;
  readonly eventId: number | undefined;
  readonly related: Readonly<Record<string, RelatedList>>;
  /** restwire's own collections: their tables come from restwire's migrations, not the user's. */
  readonly builtin: boolean;
  readonly nestedUnder?: NestedUnder;
  readonly detailOnly: readonly string[];
  readonly createShows: readonly string[];
  readonly recordDescription: string;
  readonly hooks: ViewSetHooks;
  readonly extraActions: readonly ExtraAction[];
  /** The declaration's own actions (LOGIC.md §4), checked; the viewset serves them as extra actions. */
  readonly declaredActions: readonly DeclaredAction[];
  readonly createDocs?: ActionDocs;
  readonly updateDocs?: ActionDocs;
  readonly callerMembers: Readonly<Record<string, Record<string, unknown>>>;
  readonly pages: ViewPages;
  /** The most an API key may do here (`write`: what its scopes grant). */
  readonly keyLimit: KeyLimit;
  /** See BuiltinOptions. */
  readonly changesLoggedAsRows: boolean;
}

/** A declaration that cannot be served; the message names the collection and the field. */
export class DeclarationError extends Error {
  constructor(
    readonly collection: string,
    readonly field: string | null,
    problem: string,
  ) {
    super(`collection "${collection}"${field ? `, field "${field}"` : ''}: ${problem}`);
    this.name = 'DeclarationError';
  }
}

export const NAME = /^[a-z][a-z0-9_]*$/;
/** Names restwire's own routes use (RESOURCES.md §1). */
export const RESERVED = new Set(['users', 'webhooks', 'keys', 'auth', 'docs', 'openapi.json', 'events']);
const OPTION_NAMES = new Set([
  'name', 'label', 'description', 'fields', 'owner', 'permission', 'access', 'orderings', 'defaultOrdering', 'filters',
  'search', 'event', 'eventId', 'related', 'timestamps', 'operations', 'hooks', 'actions', 'validate',
]);
/** Members every record may have besides its fields (`expand` with `?expand=`, REQUESTS.md §2); no field may take their names. */
const IMPLICIT = new Set(['url', 'id', 'owner', 'created_at', 'updated_at', 'expand']);

/** Whether a value is a declaration made by `defineResource` (across copies of the package). */
export function isResource(value: unknown): value is Resource {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[RESOURCE] === true;
}

function defaultLabel(name: string): string {
  const singular = name.endsWith('ies') ? `${name.slice(0, -3)}y` : name.endsWith('s') ? name.slice(0, -1) : name;
  return singular.split('_').map((word) => word.charAt(0).toUpperCase() + word.slice(1)).join(' ');
}

/**
 * Declares a collection (RESOURCES.md §1); export it as the default of a file in the resources
 * folder. Checked here, at start-up: a mistake is an error naming the collection and the field.
 *
 * @example
 * import { defineResource, field } from 'restwire';
 * export default defineResource({
 *   name: 'books',
 *   fields: { title: field.string({ maxLength: 200 }), year: field.integer({ required: false }) },
 *   owner: true,
 *   orderings: ['title', 'year'],
 *   filters: { year: ['exact', 'gte', 'lte'] },
 *   event: 'book',
 * });
 */
export function defineResource<F extends Record<string, Field>>(options: ResourceOptions<F>): Resource {
  // The types are the user's editor's (LOGIC.md §6); the declaration is checked as plain data,
  // its hooks as the viewset's, each given the context its name says.
  return checkDeclaration(options as unknown as BuiltinOptions, { builtin: false });
}

/** `defineResource` for restwire's own collections, which may reuse reserved names. */
export function defineBuiltinResource(options: BuiltinOptions): Resource {
  return checkDeclaration(options, { builtin: true });
}

const BUILTIN_OPTIONS = new Set(['table', 'nestedUnder', 'detailOnly', 'recordDescription', 'createShows', 'extraActions', 'createDocs', 'updateDocs', 'callerMembers', 'pages', 'keyLimit', 'changesLoggedAsRows']);

function checkDeclaration(options: BuiltinOptions, { builtin }: { builtin: boolean }): Resource {
  if (typeof options !== 'object' || options === null) throw new DeclarationError('?', null, 'defineResource needs an object');
  const name = options.name;
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new DeclarationError(String(name), null, 'the name must match [a-z][a-z0-9_]* (it is the path segment and the table)');
  }
  const fail = (field: string | null, problem: string): never => {
    throw new DeclarationError(name, field, problem);
  };
  if (!builtin && (RESERVED.has(name) || name.startsWith('restwire_'))) fail(null, `the name "${name}" is reserved by restwire`);
  for (const key of Object.keys(options)) {
    if (!OPTION_NAMES.has(key) && !(builtin && BUILTIN_OPTIONS.has(key))) fail(null, `unknown option "${key}"`);
  }
  if (typeof options.fields !== 'object' || options.fields === null) fail(null, 'fields must be an object of field.<type>() values');

  const fields: Record<string, Field> = {};
  const computed: Record<string, ComputedField> = {};
  for (const [fieldName, value] of Object.entries(options.fields)) {
    if (!NAME.test(fieldName)) fail(fieldName, 'a field name must match [a-z][a-z0-9_]*');
    // restwire's own collections may show a timestamp among their fields (a webhook's `created_at`).
    if (IMPLICIT.has(fieldName) && !(builtin && !(options.timestamps ?? true) && fieldName === 'created_at')) fail(fieldName, `"${fieldName}" is set by restwire on every record; choose another name`);
    if (!isField(value)) fail(fieldName, `unknown field type: use one of field.${FIELD_TYPES.join(', field.')}`);
    if (isInvalidField(value)) fail(fieldName, value.invalid);
    const allowed = optionsOf(value);
    for (const option of Object.keys(value.options)) {
      if (!allowed.includes(option)) fail(fieldName, `unknown option "${option}" for field.${value.type} (it takes ${allowed.join(', ')})`);
    }
    if (isComputed(value)) {
      computed[fieldName] = value;
      continue;
    }
    if (value.readOnly && value.writeOnly) fail(fieldName, 'a field cannot be both readOnly and writeOnly');
    if (value.hasDefault && value.defaultValue === null && !value.nullable) fail(fieldName, 'default: null needs nullable: true');
    if (!builtin && value.readOnly && value.options.required === true && !value.hasDefault) {
      fail(fieldName, 'a readOnly field nobody writes needs a default to be required');
    }
    if (value.type === 'references' && value.unique) fail(fieldName, 'a references field cannot be unique');
    fields[fieldName] = value;
  }

  // Own names only: `orderings: ['constructor']` found Object.prototype's, passed, and failed
  // later in `migrate` with "no such column" (issue 22 item 13).
  const declaredField = (name: string): Field | undefined => (Object.hasOwn(fields, name) ? fields[name] : undefined);
  // A computed value has no column to compare or sort (LOGIC.md §2).
  const notComputed = (name: string, use: string): void => {
    if (Object.hasOwn(computed, name)) fail(name, `cannot ${use} "${name}": a computed field is not stored`);
  };
  const owner = options.owner === true;
  const timestamps = options.timestamps ?? true;

  // Field rules (ACCESS.md §3) see every field of the record, as the collection's rules do.
  const fieldAccess: Record<string, FieldRules> = {};
  for (const [fieldName, declared] of Object.entries(fields)) {
    if (declared.options.access === undefined) continue;
    let rules: FieldRules | null = null;
    try {
      rules = parseFieldAccess(declared.options.access as FieldAccessSource, { table: options.table ?? name, fields, owner });
    } catch (error) {
      if (error instanceof RuleError) fail(fieldName, error.message);
      throw error;
    }
    if (rules.write && declared.required) {
      fail(fieldName, 'a field with a write rule needs a default or required: false (a caller who may not write it leaves it out)');
    }
    if (rules.read || rules.write) fieldAccess[fieldName] = rules;
  }

  const orderable = (field: string): boolean => {
    if (field === 'id') return true;
    if (field === 'created_at' || field === 'updated_at') return timestamps;
    const declared = declaredField(field);
    return declared !== undefined && declared.type !== 'references' && declared.type !== 'json' && !declared.writeOnly;
  };
  const orderings = ['id', ...(options.orderings ?? []).filter((ordering) => ordering !== 'id')];
  for (const ordering of orderings) {
    notComputed(ordering, 'order by');
    if (!orderable(ordering)) fail(ordering, `cannot order by "${ordering}": no such field, or one that cannot be ordered (references, json)`);
    // A page's order and its cursors would tell a caller what they may not read (ACCESS.md §3).
    if (fieldAccess[ordering]?.read) fail(ordering, `cannot order by "${ordering}": it has a read rule`);
  }
  const defaultOrdering = options.defaultOrdering ?? '-id';
  if (!orderings.includes(defaultOrdering.replace(/^-/, ''))) fail(defaultOrdering, `defaultOrdering "${defaultOrdering}" is not one of the orderings`);

  const filters: Record<string, Lookup[]> = {};
  for (const [field, lookups] of Object.entries(options.filters ?? {})) {
    notComputed(field, 'filter on');
    const declared = declaredField(field);
    if (!(field === 'owner' && owner) && (declared === undefined || declared.type === 'json' || declared.writeOnly)) {
      fail(field, `cannot filter on "${field}": no such field, or one that cannot be filtered (json, write-only)`);
    }
    if (!Array.isArray(lookups) || lookups.length === 0) fail(field, 'a filter needs a list of lookups, e.g. ["exact"]');
    for (const lookup of lookups) {
      if (!(LOOKUPS as readonly string[]).includes(lookup)) fail(field, `unknown lookup "${lookup}" (use ${LOOKUPS.join(', ')})`);
      // contains compares text: lower() of a number column is an error on PostgreSQL.
      if ((lookup === 'contains' || lookup === 'icontains') && !(declared && TEXT_TYPES.includes(declared.type))) {
        fail(field, `"${lookup}" needs a text field (${TEXT_TYPES.join(', ')})`);
      }
    }
    filters[field] = [...new Set(lookups)];
  }
  const search = options.search ?? [];
  for (const field of search) {
    notComputed(field, 'search');
    const declared = declaredField(field);
    if (!declared || !TEXT_TYPES.includes(declared.type)) fail(field, `search needs text fields; "${field}" is not one`);
  }
  if (options.event !== undefined && (typeof options.event !== 'string' || !NAME.test(options.event) || options.event === 'ping')) {
    fail(null, 'event must match [a-z][a-z0-9_]* and not be "ping"');
  }
  if (options.eventId !== undefined && (!Number.isSafeInteger(options.eventId) || options.eventId < 1)) fail(null, 'eventId must be a positive whole number');
  if (options.eventId !== undefined && options.event === undefined) fail(null, 'eventId names the repository.id of events: it needs an event');
  const operations = options.operations ?? ALL_ACTIONS;
  for (const action of operations) if (!ALL_ACTIONS.includes(action)) fail(null, `unknown operation "${action}" (use ${ALL_ACTIONS.join(', ')})`);
  const hooks = checkHooks(options.hooks ?? {}, { builtin, fail });
  for (const [relatedName, relation] of Object.entries(options.related ?? {})) {
    if (!NAME.test(relatedName) || declaredField(relatedName) || Object.hasOwn(computed, relatedName) || IMPLICIT.has(relatedName)) fail(relatedName, 'a related list needs a name of its own');
    if (typeof relation?.collection !== 'string' || typeof relation.field !== 'string') {
      fail(relatedName, 'a related list is { collection, field }');
    }
  }

  if (options.validate !== undefined && typeof options.validate !== 'function') fail(null, 'validate must be a function (values, ctx)');
  if (options.access !== undefined && options.permission !== undefined) fail(null, 'state access or permission, not both');
  const target = { table: options.table ?? name, fields, owner };
  let access: AccessRules | null = null;
  let permission = options.permission ?? (owner ? and(authenticatedOrReadOnly, ownerOrReadOnly) : authenticatedOrReadOnly);
  if (options.access !== undefined) {
    try {
      access = parseAccess(options.access, target);
    } catch (error) {
      if (error instanceof RuleError) fail(null, error.message);
      throw error;
    }
    permission = permissionOf(access, 'access');
  } else if (permission.rules) {
    // A policy that names what this collection lacks (ownerOrReadOnly without an owner) keeps its two checks.
    try {
      access = parseAccess(permission.rules, target);
      permission = permissionOf(access, permission.name);
    } catch (error) {
      if (!(error instanceof RuleError)) throw error;
    }
  }

  return {
    [RESOURCE]: true,
    name,
    label: options.label ?? defaultLabel(name),
    description: options.description ?? '',
    table: options.table ?? name,
    operations,
    permission,
    access,
    fields,
    fieldAccess,
    computed,
    owner,
    timestamps,
    orderings,
    defaultOrdering,
    filters,
    search,
    event: options.event,
    eventId: options.eventId,
    related: { ...options.related },
    builtin,
    ...(options.nestedUnder ? { nestedUnder: options.nestedUnder } : {}),
    detailOnly: options.detailOnly ?? [],
    createShows: options.createShows ?? [],
    recordDescription: options.recordDescription ?? options.description ?? '',
    // A declared `validate` is the one validation step, after a built-in's own (LOGIC.md §1).
    hooks: options.validate ? { ...hooks, validate: validationStep(name, fields, options.validate as DeclaredValidate, hooks.validate) } : hooks,
    extraActions: options.extraActions ?? [],
    declaredActions: checkActions(options.actions ?? {}, { ...target, related: options.related ?? {}, access, fail }),
    ...(options.createDocs ? { createDocs: options.createDocs } : {}),
    ...(options.updateDocs ? { updateDocs: options.updateDocs } : {}),
    callerMembers: options.callerMembers ?? {},
    pages: options.pages ?? {},
    keyLimit: options.keyLimit ?? 'write',
    changesLoggedAsRows: options.changesLoggedAsRows ?? false,
  };
}

/** The collection's route: `/api/v1/books/`, or below its parent's record. */
export function collectionPathOf(resource: Resource): string {
  const nested = resource.nestedUnder;
  return nested ? `/api/v1/${nested.collection}/:id/${resource.name}/` : `/api/v1/${resource.name}/`;
}

/** The record's route: `/api/v1/books/:id/`. */
export function recordRouteOf(resource: Resource): string {
  return `${collectionPathOf(resource)}:${resource.nestedUnder?.param ?? 'id'}/`;
}

/** The fields a record shows, in order: the CSV header row. */
export function representationFields(resource: Resource): string[] {
  return [
    'url',
    'id',
    ...Object.entries(resource.fields).filter(([name, field]) => !field.writeOnly && !resource.detailOnly.includes(name)).map(([name]) => name),
    ...Object.keys(resource.computed),
    ...(resource.owner ? ['owner'] : []),
    ...Object.keys(resource.related),
    ...(resource.timestamps ? ['created_at', 'updated_at'] : []),
  ];
}

/** A change committed by the viewset, handed to listeners inside the same transaction. */
export interface Change {
  readonly resource: Resource;
  readonly action: 'created' | 'updated' | 'deleted';
  /** The record's representation after the change (before it, for `deleted`). */
  readonly record: Record<string, unknown>;
  /** For `updated`: each changed field's previous value, as GitHub's `changes`. */
  readonly changes?: Record<string, { from: unknown }>;
  readonly actor: User;
  /** The record's columns after the change (before it, for `deleted`), when the writer has them. */
  readonly row?: Row;
  /** For `updated`: the record's columns before the change, when the writer has them. */
  readonly previous?: Row;
}

/**
 * Runs inside the transaction of the change it hears about, so that what it writes (the
 * webhook outbox) commits or rolls back with the change (API.md §4, "No lost events"). It may
 * return a function to run once the transaction has committed (e.g. to wake the dispatcher).
 */
export type ChangeListener = ((trx: Transaction<Database> | Kysely<Database>, change: Change) => Promise<void | (() => void)>) & {
  /**
   * Called in the same transaction just before a record is updated or deleted (its row locked),
   * so a listener can read the row as it was: a filtered webhook's "matched before" (issue 14).
   */
  readonly beforeChange?: (trx: Transaction<Database> | Kysely<Database>, pending: PendingChange) => Promise<void>;
  /**
   * Several changes of one transaction at once, in order (a cascade's batch, issue 22), so a
   * listener can write them together; without it, the listener is called once per change.
   */
  readonly changes?: (trx: Transaction<Database> | Kysely<Database>, changes: readonly Change[]) => Promise<void | (() => void)>;
  /**
   * Called at the start of a write's transaction, before its first statement: a listener may send
   * the reads it will need without waiting for them, so they share that statement's round trip
   * on PostgreSQL (db/pipelining.ts `sendAhead`).
   */
  readonly prepare?: (trx: Transaction<Database> | Kysely<Database>, resource: Resource) => Promise<void>;
};

/** The record about to change, told to `ChangeListener.beforeChange`. */
export interface PendingChange {
  readonly resource: Resource;
  readonly id: number;
}

