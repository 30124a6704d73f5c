// The generic viewset (DRF's ModelViewSet): one machine turns any declaration into its two views,
// the collection and the record, with list, create, retrieve, update, partial update and destroy,
// and its extra actions (DRF's `@action`). Every action runs behind the pipeline's stages
// (`http/pipeline.ts`). This file reads as the actions do; each step lives beside it:
//   queryset.ts        which rows a request reaches (scope, filters, keyset page, record by id)
//   representation.ts  rows as records, relations read per page
//   expansion.ts       `?expand=`: related records inside a record, per page
//   sparse-fields.ts   `?fields=`: only the members asked for
//   input.ts           a body parsed through the fields; references and unique values checked
//   writes.ts          the write transaction with its change listeners; insert and join tables
//   delete-rules.ts    onDelete protect / setNull / cascade, set-based
//   metadata.ts        OPTIONS metadata

import type { Storage } from '../../db/database.js';
import type { DynamicDb, Row } from '../../db/dynamic-tables.js';
import { afterCommitOf, type WriteUnit } from '../../db/write-unit.js';
import { columnOf } from '../../db/schema-state.js';
import { assertRecordMatches } from '../../http/conditional.js';
import { ValidationError } from '../../http/errors.js';
import { CursorCodec, parsePageRequest } from '../../http/pagination.js';
import { parseId } from '../../http/paths.js';
import { EVENT_STREAM_TYPE } from '../../http/event-stream.js';
import { CSV_TYPE, HTML_TYPE, JSON_TYPE } from '../../http/renderers.js';
import { scopesAllow, type KeyAccess } from '../../http/scopes.js';
import type { Action, ApiRequest, ApiResponse, View, ViewAction } from '../../http/view.js';
import type { ParseContext } from '../fields/field.js';
import { hiddenFields, unwritableFields, withoutFields } from '../access/field-rules.js';
import { buildFilters } from '../filters.js';
import { pageResponse } from '../keyset.js';
import type { CollectionLookup } from '../relations.js';
import type { BuiltinHookContext, HookName, StoredRecord } from '../hooks.js';
import { collectionPathOf, recordRouteOf, representationFields, type ActionContext, type ActionName, type Change, type ChangeListener, type Resource } from '../resource.js';
import { collectionHandle } from './collection-handle.js';
import { declaredExtraActions } from './declared-actions.js';
import { buildDeleteRules } from './delete-rules.js';
import { expandRecords, expansionIsShared, pagesAreShared, parseExpand, type ExpandTree, type ShownRecords } from './expansion.js';
import { buildInputChecks } from './input.js';
import { describeField, metadataOf } from './metadata.js';
import { buildHookCalls, guardedAfterCommit, hookUserOf, sameValue, type HookLog } from './hook-context.js';
import { buildQueryset, TRUSTED_READER, trustedRequests, viewerOf } from './queryset.js';
import { buildRepresentation } from './representation.js';
import { parseFields, pickColumns, pickFields, type FieldSelection } from './sparse-fields.js';
import type { LiveChanges } from '../live/hub.js';
import type { RoleCache } from '../../auth/roles.js';
import { buildStreams, changePosition } from './stream.js';
import { buildWrites } from './writes.js';

export const RECORD_MEDIA_TYPES = [JSON_TYPE, HTML_TYPE, CSV_TYPE] as const;
/** A list's and a record's GET also stream their changes (STREAMS.md §1); offered last, so a wildcard Accept stays JSON. */
export const STREAMED_MEDIA_TYPES = [...RECORD_MEDIA_TYPES, EVENT_STREAM_TYPE] as const;

/** What every viewset of one server shares. */
export interface ViewSetOptions {
  readonly storage: Storage;
  readonly cursors: CursorCodec;
  /** Told of every committed change, inside its transaction (the webhook outbox). */
  readonly listeners?: readonly ChangeListener[];
  /** PUBLIC_URL and the collections served, for reading references. */
  readonly context: ParseContext;
  /** Every collection served, for relations and delete rules. */
  readonly collections: readonly Resource[];
  /** The viewsets of the other collections (a cascade deletes through theirs; hooks write through theirs). */
  readonly viewSets: ReadonlyMap<string, ViewSet>;
  /** Where a failed `afterCommit` function of a hook is reported (the server's logger). */
  readonly log?: HookLog;
  /** The process's open streams and their feed (issue 23); without it, no view offers streams. */
  readonly live?: LiveChanges;
  /** Each user's current roles (auth/roles.ts), by which open streams judge every change (STREAMS.md §2). */
  readonly roles?: Pick<RoleCache, 'current'>;
}

const CONSOLE_LOG: HookLog = { error: (details, message) => console.error(message, details) };

/**
 * Who acts when a declaration's permission lets an anonymous caller write: events name them as
 * the sender `anonymous` (id 0). A collection with `owner` refuses such a permission (registry.ts).
 */
const ANONYMOUS: Change['actor'] = { id: 0, username: 'anonymous', passwordChangedAt: 0, roles: [] };


/**
 * Turns a declaration into its two views, the collection and the record, with DRF's
 * ModelViewSet actions.
 */
export function buildViewSet(resource: Resource, options: ViewSetOptions) {
  const { storage, cursors, listeners = [], context, collections, viewSets, log = CONSOLE_LOG, live, roles } = options;
  const db = storage.db as unknown as DynamicDb;
  const table = resource.table;
  const collectionPath = collectionPathOf(resource);
  const { hooks, nestedUnder } = resource;
  const recordParam = nestedUnder?.param ?? 'id';
  const columns = representationFields(resource);
  const lookup: CollectionLookup = (name) => collections.find((collection) => collection.name === name);
  const has = (action: ActionName) => resource.operations.includes(action);
  const fieldEntries = Object.entries(resource.fields);
  const orderings: Record<string, string> = Object.assign(
    Object.create(null) as Record<string, string>,
    Object.fromEntries(resource.orderings.map((name) => [name, resource.fields[name] ? columnOf(name, resource.fields[name])! : name])),
  );
  const filters = new Map(buildFilters(resource, context).map((filter) => [filter.param, filter]));

  const { represent, representOne } = buildRepresentation(resource, db, lookup);
  const { listPath, listPage, filterConditions, loadRow, loadRowAt, readableRows, checkObjectPermission, checkRule } = buildQueryset(resource, { storage, db, cursors, filters });
  const { readInput, hasStoredChecks, checkAgainstStored, uniqueMessage } = buildInputChecks(resource, context, lookup);
  const { compiledInsert, columnValues, writeReferenceLists, writeTransaction } = buildWrites(resource, { storage, listeners, uniqueMessage });
  const { deleteRecord, deleteBatch, clearReferences } = buildDeleteRules(resource, { storage, collections, viewSets, represent });

  /** What a request reads through: its write unit's transaction when it has one (db/write-unit.ts), else `db`. */
  const readerOf = (request: ApiRequest): DynamicDb => request.unit?.trx ?? db;

  const hookCalls = buildHookCalls(resource, context);
  /** What a hook of a write by `request` is given (LOGIC.md §3), in the write's transaction; `later` runs after its commit. */
  function hookContext(
    request: ApiRequest,
    trx: DynamicDb,
    later: Array<() => void>,
    parts: { record: StoredRecord | null; row: Row | null; columns?: Record<string, unknown> },
  ): BuiltinHookContext {
    return {
      values: {},
      columns: {},
      ...parts,
      response: {},
      user: hookUserOf(request.user),
      trx,
      request,
      collection: (name) => collectionHandle(viewSets, name, { trx, user: request.user, identity: request.identity, later, readOnly: false }),
      afterCommit: (fn) => later.push(guardedAfterCommit(log, resource.name, fn)),
    };
  }

  /** Runs a hook given the record (and its row), if the collection has it; its context, for what it answers. */
  async function runHook(name: HookName, request: ApiRequest, trx: DynamicDb, later: Array<() => void>, record: Record<string, unknown>, row: Row) {
    if (!hookCalls.has(name)) return null;
    const ctx = hookContext(request, trx, later, { record: hookCalls.record(record), row });
    await hookCalls.call(name, ctx);
    return ctx;
  }

  /**
   * Runs `beforeCreate` or `beforeUpdate` with the values about to be written as the record's
   * JSON shows them; what the hook changed is read back through the fields into `values` and the
   * columns, and its references checked (trusted: any record may be named).
   */
  async function beforeWrite(name: 'beforeCreate' | 'beforeUpdate', context: () => BuiltinHookContext, values: Record<string, unknown>, id: number | null): Promise<void> {
    if (!hookCalls.has(name)) return;
    const ctx = context();
    const shown = hookCalls.shownValues(values);
    const snapshot = structuredClone(shown);
    await hookCalls.call(name, { ...ctx, values: shown });
    const changed = hookCalls.readBack(shown, snapshot, values, name);
    if (changed.length === 0) return;
    const written = Object.fromEntries(changed.map((field) => [field, values[field]]));
    await checkAgainstStored(ctx.trx, {}, written, {}, id, TRUSTED_READER);
    Object.assign(ctx.columns, columnValues(written));
  }

  /**
   * Records as the request's caller sees them: without the fields their read rules hide from
   * them (ACCESS.md §3, judged as `executor` sees the rows), with what `hooks.representFor` adds.
   */
  async function shownTo(request: ApiRequest, rows: readonly Row[], records: Record<string, unknown>[], executor: DynamicDb = readerOf(request)): Promise<Record<string, unknown>[]> {
    const hidden = await hiddenFields(resource, request.user, executor, rows);
    const shown = hidden.size ? records.map((record, index) => withoutFields(record, hidden.get(Number(rows[index]!.id)))) : records;
    if (!hooks.representFor) return shown;
    const copies = shown.map((record) => ({ ...record }));
    hooks.representFor(request, rows, copies);
    return copies;
  }

  /** Drops from `values` (and their `errors`) the fields the caller may not write: read-only for them (ACCESS.md §3). */
  function ignoreUnwritable(values: Record<string, unknown>, errors: Record<string, unknown>, unwritable: ReadonlySet<string>): void {
    for (const name of unwritable) {
      delete values[name];
      delete errors[name];
    }
  }

  /** `?expand=` and `?fields=` of a GET (REQUESTS.md §2, §3), read before any query: a bad one is a 400. */
  function readShape(request: ApiRequest): Shape {
    return { expand: parseExpand(resource, lookup, request.query.expand), fields: parseFields(resource, request.query.fields) };
  }

  /** Records expanded (not in CSV, REQUESTS.md §2) and cut to the fields asked for; the CSV's columns too. */
  async function shaped(
    request: ApiRequest,
    shape: Shape,
    records: Record<string, unknown>[],
    view: View,
    response: (records: Record<string, unknown>[]) => ApiResponse,
  ): Promise<ApiResponse> {
    if (shape.expand && request.mediaType !== CSV_TYPE) await expandRecords(resource, records, shape.expand, request, shownRecordsOf);
    const { fields } = shape;
    if (!fields) return response(records);
    return { ...response(records.map((record) => pickFields(record, fields))), columns: pickColumns(view.columns ?? [], fields) };
  }

  /**
   * Records of this collection by id as a GET of them would show them to the request's caller
   * (another collection's `?expand=`): through the caller's API key scopes, the permission, the
   * scope and read rule, and the hooks; expanded in turn by `tree`.
   */
  async function recordsShownTo(request: ApiRequest, ids: readonly number[], tree: ExpandTree): Promise<Map<number, Record<string, unknown>>> {
    const shown = new Map<number, Record<string, unknown>>();
    if (!has('list') && !has('retrieve')) return shown; // no GET shows them
    const scopes = request.identity?.scopes;
    if (scopes !== undefined && !scopesAllow(scopes, keyAccess, 'GET')) return shown;
    if (!resource.permission.hasPermission({ method: 'GET', user: request.user })) return shown;
    const rows = await readableRows(request, ids);
    const records = await shownTo(request, rows, await represent(rows, readerOf(request), false, request.user));
    if (tree.size) await expandRecords(resource, records, tree, request, shownRecordsOf);
    rows.forEach((row, index) => shown.set(Number(row.id), records[index]!));
    return shown;
  }
  const shownRecordsOf: ShownRecords = (name, ids, tree, request) => viewSets.get(name)!.recordsShownTo(request, ids, tree);

  const streams = live ? buildStreams(resource, { db, live, represent: (rows, executor, detail, viewer) => represent(rows, executor, detail, viewer), shownTo, roles }) : null;

  // A page is reused while no data changes. It is the same for everyone who may read it, and
  // shared, unless it is scoped (each caller's own webhooks), has members only some callers see (a
  // user's roles), records or reverse lists a read rule filters per caller (ACCESS.md §6) or
  // fields a read rule hides from some callers (ACCESS.md §3), here or in a collection an
  // `?expand=` reaches: then it is reused for the same caller only (their user, roles and key
  // scopes, `perCaller`), so a page served to one caller is never served to another.
  const sharedPages = pagesAreShared(resource, lookup);
  function expansionShared(request: ApiRequest): boolean {
    try {
      const tree = request.mediaType === CSV_TYPE ? null : parseExpand(resource, lookup, request.query.expand);
      return tree === null || expansionIsShared(resource, lookup, tree);
    } catch {
      return false; // a bad `expand` is the action's 400
    }
  }

  const list: Action = {
    permission: resource.permission,
    version: () => storage.dataVersion(),
    perCaller: (request) => !sharedPages || !expansionShared(request),
    async handle(request) {
      const page = parsePageRequest(request.query, orderings, resource.defaultOrdering, cursors, listPath(request));
      const shape = readShape(request);
      // A stream's page parameters are checked as the list's, then have no effect (STREAMS.md §1).
      if (streams && request.mediaType === EVENT_STREAM_TYPE) return streams.openStream(request, null, filterConditions(request));
      const reader = readerOf(request);
      // A page's own statement reads the position (one snapshot: exact). An empty page has no row
      // to carry it: the position is then read and the page read again after it, so a stream
      // opened there may repeat a change, never miss one (STREAMS.md §3). Only an empty page pays
      // for the second statement (issue 18).
      let found = await listPage(request, page);
      let before = 0;
      if (found.position === null) {
        before = await changePosition(reader);
        found = await listPage(request, page);
      }
      const records = await shownTo(request, found.rows, await represent(found.rows, reader, false, request.user));
      const response = await shaped(request, shape, records, collection, (results) => pageResponse(found, results));
      return { ...response, headers: { ...response.headers, 'x-change-position': String(found.position ?? before) } };
    },
  };

  const create: Action = {
    permission: resource.permission,
    // Described by the declaration's own words when it has them (signup), else from the fields.
    ...(resource.createDocs ? { docs: resource.createDocs } : {}),
    async handle(request) {
      const data = await request.data();
      const trusted = trustedRequests.has(request);
      const { values: input, errors } = readInput(data, false, trusted);
      // Hooks' writes are trusted code: field rules do not apply to them (LOGIC.md §3).
      if (!trusted) ignoreUnwritable(input, errors, await unwritableFields(resource, request.user));
      await hooks.validate?.(input, errors, request, null);
      if (Object.keys(errors).length && !hasStoredChecks(data)) throw new ValidationError(errors);
      // Left out: the declared default, else null (an empty list for references).
      for (const [name, field] of fieldEntries) {
        if (!(name in input)) input[name] = field.hasDefault ? field.defaultValue : field.type === 'references' ? [] : null;
      }
      const user = request.user ?? ANONYMOUS;
      const now = Date.now();
      const { record, row, extras } = await writeTransaction(async (trx, notify, later) => {
        // A run that lost a deadlock kept nothing: the next starts from the input again, not from
        // what beforeCreate changed in place.
        const values = { ...input };
        await notify.prepare(trx, resource);
        const checks = checkAgainstStored(trx, data, values, errors, null, viewerOf(request));
        // The insert goes out right behind the checks' queries (on PostgreSQL in their round trip,
        // issue 20) unless a hook runs in between or the input is refused anyway: the verdict is
        // awaited after it, and a refused create rolls back with its write. A missing reference
        // fails the insert itself (its foreign key): the checks' 400 is the answer then.
        if (hookCalls.has('beforeCreate') || Object.keys(errors).length) await checks;
        else checks.catch(() => {});
        const insert = {
          ...columnValues(values),
          ...(resource.owner ? { owner_id: user.id } : {}),
          ...(resource.timestamps ? { created_at: now, updated_at: now } : {}),
        };
        await beforeWrite('beforeCreate', () => hookContext(request, trx, later, { record: null, row: null, columns: insert }), values, null);
        let inserted: Row[];
        try {
          ({ rows: inserted } = await trx.executeQuery<Row>(compiledInsert(trx, insert)));
        } catch (error) {
          await checks;
          throw error;
        }
        await checks;
        let row = inserted[0]!;
        await writeReferenceLists(trx, row.id, values, false);
        // A write rule the record as stored fails: the value given is ignored, the default stays (ACCESS.md §3).
        const refused = [...(await unwritableFields(resource, request.user, trx, row.id))].filter((name) => name in data);
        if (refused.length) {
          const reset = Object.fromEntries(refused.map((name) => [name, resource.fields[name]!.hasDefault ? resource.fields[name]!.defaultValue : resource.fields[name]!.type === 'references' ? [] : null]));
          const set = columnValues(reset);
          if (Object.keys(set).length) row = (await trx.updateTable(table).set(set).where('id', '=', row.id).returningAll().executeTakeFirstOrThrow()) as Row;
          await writeReferenceLists(trx, row.id, reset, true);
        }
        // The create rule judges the record as stored (defaults, owner); refused, it rolls back.
        await checkRule(trx, 'create', request, row.id);
        const representation = await representOne(row, trx, false, request.user);
        await notify(trx, { resource, action: 'created', record: representation, actor: user, row });
        const after = await runHook('afterCreate', request, trx, later, representation, row);
        return { record: representation, row, extras: after?.response ?? {} };
      }, request.unit);
      const [shown] = await shownTo(request, [row], [record]);
      return { status: 201, body: extras.body ? { ...shown, ...extras.body } : shown, headers: { location: String(record.url), ...extras.headers } };
    },
  };

  const retrieve: Action = {
    permission: resource.permission,
    readsOnly: true,
    // Reused while no data changes, as a page is, but only for the same caller: the object
    // permission is code that may judge each caller differently (issue 21: the read, the
    // representation and its ETag were most of a GET one's cost).
    version: () => storage.dataVersion(),
    perCaller: () => true,
    async handle(request) {
      const shape = readShape(request);
      const reader = readerOf(request);
      const { row, position } = await loadRowAt(reader, parseId(request.params[recordParam]), request);
      checkObjectPermission(request, row);
      if (streams && request.mediaType === EVENT_STREAM_TYPE) return streams.openStream(request, row.id, []);
      const response = await shaped(request, shape, await shownTo(request, [row], [await representOne(row, reader, true, request.user)]), detail, ([record]) => ({ body: record }));
      return { ...response, headers: { ...response.headers, 'x-change-position': String(position) } };
    },
  };

  function updateAction(partial: boolean): Action {
    return {
      permission: resource.permission,
      ...(resource.updateDocs ? { docs: resource.updateDocs } : {}),
      async handle(request) {
        const id = parseId(request.params[recordParam]);
        const data = await request.data();
        const user = request.user ?? ANONYMOUS;
        const trusted = trustedRequests.has(request);
        // Checks with I/O run outside the transaction, once the record is known to be the caller's.
        let validated: ReturnType<typeof readInput> | null = null;
        if (hooks.validate) {
          const stored = await loadRow(readerOf(request), id, false, request);
          checkObjectPermission(request, stored);
          validated = readInput(data, partial, trusted);
          if (!trusted) ignoreUnwritable(validated.values, validated.errors, await unwritableFields(resource, request.user));
          await hooks.validate(validated.values, validated.errors, request, { row: stored, record: () => representOne(stored, readerOf(request), false, request.user) });
          if (Object.keys(validated.errors).length && !hasStoredChecks(data)) throw new ValidationError(validated.errors);
        }
        const { record, row: shownRow } = await writeTransaction(async (trx, notify, later) => {
          await notify.prepare(trx, resource);
          const row = await loadRow(trx, id, true, request);
          checkObjectPermission(request, row);
          await checkRule(trx, 'update', request, id);
          const before = await representOne(row, trx, false, request.user);
          // The ETag the caller holds is of the record as they were shown it.
          assertRecordMatches(request.raw.headers['if-match'], (await shownTo(request, [row], [before], trx))[0]!);
          // From the input each run, as a create: a run again after a deadlock keeps nothing of
          // the run before, not the fields its write rules left out.
          const input = validated ?? readInput(data, partial, trusted);
          const values = { ...input.values };
          const errors = Object.fromEntries(Object.entries(input.errors).map(([name, messages]) => [name, [...messages]]));
          // Write rules judge the record before the change, as the update rule's USING does.
          if (!trusted) ignoreUnwritable(values, errors, await unwritableFields(resource, request.user, trx, id));
          await checkAgainstStored(trx, data, values, errors, id, viewerOf(request));
          const changed = Object.entries(values).filter(([name, value]) => {
            const field = resource.fields[name]!;
            return field.type === 'references' ? !sameValue(before[name], field.show(value)) : !sameValue(row[columnOf(name, field)!], value);
          });
          if (changed.length === 0) return { record: before, row };
          await notify.before(trx, resource, id);
          const changedValues = Object.fromEntries(changed);
          const set = { ...columnValues(changedValues), ...(resource.timestamps ? { updated_at: Math.max(Date.now(), Number(row.updated_at)) } : {}) };
          await beforeWrite('beforeUpdate', () => hookContext(request, trx, later, { record: hookCalls.record(before), row, columns: set }), changedValues, id);
          const updated = Object.keys(set).length
            ? ((await trx.updateTable(table).set(set).where('id', '=', id).returningAll().executeTakeFirstOrThrow()) as Row)
            : row;
          await writeReferenceLists(trx, id, changedValues, true);
          // The rule holds after the change too (WITH CHECK), or the change rolls back.
          await checkRule(trx, 'update', request, id);
          const representation = await representOne(updated, trx, false, request.user);
          const changes: Record<string, { from: unknown }> = {};
          for (const name of Object.keys(changedValues)) if (!resource.fields[name]!.writeOnly) changes[name] = { from: before[name] };
          await notify(trx, { resource, action: 'updated', record: representation, changes, actor: user, row: updated, previous: row });
          await runHook('afterUpdate', request, trx, later, representation, updated);
          return { record: representation, row: updated };
        }, request.unit);
        return { body: (await shownTo(request, [shownRow], [record]))[0] };
      },
    };
  }

  const destroy: Action = {
    permission: resource.permission,
    async handle(request) {
      const id = parseId(request.params[recordParam]);
      const user = request.user ?? ANONYMOUS;
      await writeTransaction(async (trx, notify, later) => {
        await notify.prepare(trx, resource);
        const row = await loadRow(trx, id, true, request);
        checkObjectPermission(request, row);
        // The records a cascade or setNull reaches are not judged: this delete decides (ACCESS.md §2).
        await checkRule(trx, 'delete', request, id);
        const before = await representOne(row, trx, false, request.user);
        assertRecordMatches(request.raw.headers['if-match'], (await shownTo(request, [row], [before], trx))[0]!);
        await runHook('beforeDelete', request, trx, later, before, row);
        // Records a cascade or setNull reaches raise their events but run no hooks (set-based).
        await deleteRecord(trx, row, before, notify, user);
        await runHook('afterDelete', request, trx, later, before, row);
      }, request.unit);
      return { status: 204 };
    },
  };

  // An API key's scopes name the collection; a nested one's (deliveries) are its parent's (ACCESS.md §5).
  const keyAccess: KeyAccess = { collection: nestedUnder?.collection ?? resource.name, most: resource.keyLimit };
  // A declaration's own actions, offered on the page of its collection or of each record.
  const pageActions = (onRecord: boolean): ViewAction[] =>
    resource.declaredActions
      .filter((action) => action.detail === onRecord)
      .map((action) => ({
        label: action.name.charAt(0).toUpperCase() + action.name.slice(1).replace(/_/g, ' '),
        path: `${action.name}/`,
        method: action.method,
        fields: Object.fromEntries(Object.entries(action.input).map(([name, field]) => [name, describeField(name, field)])),
      }));
  const collection: View = {
    name: `${resource.label} List`,
    description: resource.description,
    extraActions: pageActions(false),
    keyAccess,
    path: collectionPath,
    actions: { ...(has('list') ? { GET: list } : {}), ...(has('create') ? { POST: create } : {}) },
    mediaTypes: live && has('list') ? STREAMED_MEDIA_TYPES : RECORD_MEDIA_TYPES,
    // The 201 of a create may show more (a webhook's secret); CSV shows it there too.
    columns: [...columns, ...resource.createShows],
    metadata: metadataOf(resource, 'POST'),
    ...(resource.pages.collection ? { page: resource.pages.collection } : {}),
    listControls: {
      orderings: resource.orderings.flatMap((name) => [name, `-${name}`]),
      defaultOrdering: resource.defaultOrdering,
      filters: [...filters.values()].map(({ param, description }) => ({ param, description })),
    },
  };

  const detail: View = {
    name: `${resource.label} Instance`,
    description: resource.recordDescription,
    extraActions: pageActions(true),
    keyAccess,
    path: recordRouteOf(resource),
    actions: {
      ...(has('retrieve') ? { GET: retrieve } : {}),
      ...(has('update') ? { PUT: updateAction(false) } : {}),
      ...(has('partial_update') ? { PATCH: updateAction(true) } : {}),
      ...(has('destroy') ? { DELETE: destroy } : {}),
    },
    mediaTypes: live && has('retrieve') ? STREAMED_MEDIA_TYPES : RECORD_MEDIA_TYPES,
    columns: [...columns, ...resource.detailOnly],
    metadata: metadataOf(resource, 'PUT'),
    ...(resource.pages.record ? { page: resource.pages.record } : {}),
  };

  // DRF's @action routes: each runs behind its own permission or the collection's, with the scoped
  // record; a request with a write unit gets a context that reads and writes through it.
  function actionContextOf(unit?: WriteUnit): ActionContext {
    const reader = unit?.trx ?? db;
    return {
      async loadRow(request, id) {
        const row = await loadRow(reader, id ?? parseId(request.params[recordParam]), false, request);
        checkObjectPermission(request, row);
        return row;
      },
      transact: (work) => writeTransaction((trx) => work(trx), unit),
      async represent(rows, { detail = false, request } = {}) {
        const records = await represent(rows, reader, detail, request?.user ?? null);
        return request ? await shownTo(request, rows, records, reader) : records;
      },
      afterCommit: (callback) => afterCommitOf(unit, [callback]),
    };
  }
  const actionContext = actionContextOf();
  const declared = declaredExtraActions(resource, {
    db,
    context,
    log,
    targets: viewSets,
    loadRow,
    checkObjectPermission,
    represent,
    writeTransaction: (work, unit) => writeTransaction((trx, _notify, later) => work(trx, later), unit),
  });
  const extraViews: View[] = [...resource.extraActions, ...declared].map((extra) => ({
    name: extra.name,
    description: extra.description,
    ...(extra.everyKey ? {} : { keyAccess }),
    path: `${extra.detail ? detail.path : collectionPath}${extra.path}`,
    // A GET answers with a record, rendered as the collection's are (`users/me/`).
    ...(extra.mediaTypes
      ? { mediaTypes: extra.mediaTypes }
      : extra.method === 'GET'
        ? { mediaTypes: RECORD_MEDIA_TYPES, columns: collection.columns }
        : { mediaTypes: [JSON_TYPE] }),
    ...(extra.metadata ? { metadata: extra.metadata } : {}),
    actions: {
      [extra.method ?? 'POST']: {
        permission: extra.permission ?? resource.permission,
        ...(extra.docs ? { docs: extra.docs } : {}),
        handle: (request: ApiRequest) => extra.handle(request, request.unit ? actionContextOf(request.unit) : actionContext),
      },
    },
  }));

  const self = {
    resource,
    db,
    collection,
    detail,
    views: [collection, detail, ...extraViews],
    filters: [...filters.values()],
    represent,
    representOne,
    recordsShownTo,
    loadRow,
    deleteRecord,
    deleteBatch,
    clearReferences,
    // What `ctx.collection` writes through, whichever of them the collection offers over HTTP.
    writes: { create, update: updateAction(true), destroy },
  };
  return self;
}

export type ViewSet = ReturnType<typeof buildViewSet>;

/** What a GET asks of its records' shape: the relations to expand and the fields to keep. */
interface Shape {
  readonly expand: ExpandTree | null;
  readonly fields: FieldSelection | null;
}
