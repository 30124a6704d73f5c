// The generic viewset (DRF's ModelViewSet): one machine turns any declaration into its two views,
// the collection and the record, with list, create, retrieve, update, partial update and destroy,
// and its extra actions (DRF's `@action`). Every action runs behind the pipeline's stages
// (`http/pipeline.ts`). This file reads as the actions do; each step lives beside it:
//   queryset.ts        which rows a request reaches (scope, filters, keyset page, record by id)
//   representation.ts  rows as records, relations read per page
//   input.ts           a body parsed through the fields; references and unique values checked
//   writes.ts          the write transaction with its change listeners; insert and join tables
//   delete-rules.ts    onDelete protect / setNull / cascade, set-based
//   metadata.ts        OPTIONS metadata

import type { Storage } from '../../db/database.js';
import type { DynamicDb, Row } from '../../db/dynamic-tables.js';
import { columnOf } from '../../db/schema-state.js';
import { assertRecordMatches } from '../../http/conditional.js';
import { ValidationError } from '../../http/errors.js';
import { CursorCodec, parsePageRequest } from '../../http/pagination.js';
import { parseId } from '../../http/paths.js';
import { CSV_TYPE, HTML_TYPE, JSON_TYPE } from '../../http/renderers.js';
import type { KeyAccess } from '../../http/scopes.js';
import type { Action, ApiRequest, View } from '../../http/view.js';
import type { ParseContext } from '../fields/field.js';
import { readsAreShared } from '../access/compile.js';
import { buildFilters } from '../filters.js';
import { pageResponse } from '../keyset.js';
import type { CollectionLookup } from '../relations.js';
import { collectionPathOf, recordRouteOf, representationFields, type ActionContext, type Change, type ChangeListener, type Resource } from '../resource.js';
import { buildDeleteRules } from './delete-rules.js';
import { buildInputChecks } from './input.js';
import { metadataOf } from './metadata.js';
import { buildQueryset } from './queryset.js';
import { buildRepresentation } from './representation.js';
import { buildWrites } from './writes.js';

export const RECORD_MEDIA_TYPES = [JSON_TYPE, HTML_TYPE, CSV_TYPE] as const;

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
  /** The viewsets of the other collections (a cascade deletes through theirs). */
  readonly viewSets: ReadonlyMap<string, ViewSet>;
}

/**
 * Who acts when a declaration's permission lets an anonymous caller write: events name them as
 * the sender `anonymous` (id 0). A collection with `owner` refuses such a permission (registry.ts).
 */
const ANONYMOUS: Change['actor'] = { id: 0, username: 'anonymous', passwordChangedAt: 0, roles: [] };

// Whether an update leaves a value as it was (lists and JSON values compared by content).
const sameValue = (a: unknown, b: unknown): boolean => a === b || JSON.stringify(a) === JSON.stringify(b);

/**
 * Turns a declaration into its two views, the collection and the record, with DRF's
 * ModelViewSet actions.
 */
export function buildViewSet(resource: Resource, options: ViewSetOptions) {
  const { storage, cursors, listeners = [], context, collections, viewSets } = options;
  const db = storage.db as unknown as DynamicDb;
  const table = resource.table;
  const collectionPath = collectionPathOf(resource);
  const { hooks, nestedUnder } = resource;
  const recordParam = nestedUnder?.param ?? 'id';
  const columns = representationFields(resource);
  const lookup: CollectionLookup = (name) => collections.find((collection) => collection.name === name);
  const has = (action: Resource['actions'][number]) => resource.actions.includes(action);
  const fieldEntries = Object.entries(resource.fields);
  const orderings: Record<string, string> = Object.assign(
    Object.create(null) as Record<string, string>,
    Object.fromEntries(resource.orderings.map((name) => [name, resource.fields[name] ? columnOf(name, resource.fields[name])! : name])),
  );
  const filters = new Map(buildFilters(resource, context).map((filter) => [filter.param, filter]));

  const { represent, representOne } = buildRepresentation(resource, db, lookup);
  const { listPath, listPage, loadRow, checkObjectPermission, checkRule } = buildQueryset(resource, { storage, db, cursors, filters });
  const { readInput, hasStoredChecks, checkAgainstStored, uniqueMessage } = buildInputChecks(resource, context, lookup);
  const { compiledInsert, columnValues, writeReferenceLists, writeTransaction } = buildWrites(resource, { storage, listeners, uniqueMessage });
  const { deleteRecord, deleteBatch, clearReferences } = buildDeleteRules(resource, { storage, collections, viewSets, represent });

  /** Records as the request's caller sees them: copies with what `hooks.representFor` adds for them. */
  function shownTo(request: ApiRequest, rows: readonly Row[], records: Record<string, unknown>[]): Record<string, unknown>[] {
    if (!hooks.representFor) return records;
    const copies = records.map((record) => ({ ...record }));
    hooks.representFor(request, rows, copies);
    return copies;
  }

  // A page is the same for everyone who may read it, so it is reused while no data changes; not
  // a scoped one (each caller's own webhooks), nor one with members only some callers see (a
  // user's roles), nor one whose records or reverse lists a read rule filters per caller
  // (ACCESS.md §6): a page served to one caller is never served to another.
  const sharedPages =
    !hooks.scope &&
    !hooks.representFor &&
    [resource, ...Object.values(resource.related).map((relation) => lookup(relation.collection))].every((shown) => readsAreShared(shown?.access ?? null));

  const list: Action = {
    permission: resource.permission,
    ...(sharedPages ? { version: () => storage.dataVersion() } : {}),
    async handle(request) {
      const page = parsePageRequest(request.query, orderings, resource.defaultOrdering, cursors, listPath(request));
      const found = await listPage(request, page);
      return pageResponse(found, shownTo(request, found.rows, await represent(found.rows, db, false, request.user)));
    },
  };

  const create: Action = {
    permission: resource.permission,
    // Described by the declaration's own words when it has them (signup), else from the fields.
    ...(resource.createDocs ? { docs: resource.createDocs } : {}),
    async handle(request) {
      const data = await request.data();
      const { values, errors } = readInput(data, false);
      await hooks.validate?.(values, errors, request, null);
      if (Object.keys(errors).length && !hasStoredChecks(data)) throw new ValidationError(errors);
      // Left out: the declared default, else null (an empty list for references).
      for (const [name, field] of fieldEntries) {
        if (!(name in values)) values[name] = field.hasDefault ? field.defaultValue : field.type === 'references' ? [] : null;
      }
      const user = request.user ?? ANONYMOUS;
      const now = Date.now();
      const { record, row, extras } = await writeTransaction(async (trx, notify) => {
        await checkAgainstStored(trx, data, values, errors, null, request.user);
        const insert = {
          ...columnValues(values),
          ...(resource.owner ? { owner_id: user.id } : {}),
          ...(resource.timestamps ? { created_at: now, updated_at: now } : {}),
        };
        await hooks.beforeCreate?.(trx, insert, request);
        const { rows } = await trx.executeQuery<Row>(compiledInsert(trx, insert));
        const row = rows[0]!;
        await writeReferenceLists(trx, row.id, values, false);
        // The create rule judges the record as stored (defaults, owner); refused, it rolls back.
        await checkRule(trx, 'create', request, row.id);
        const representation = await representOne(row, trx, false, request.user);
        await notify(trx, { resource, action: 'created', record: representation, actor: user });
        return { record: representation, row, extras: (await hooks.afterCreate?.(trx, row, representation, request)) ?? {} };
      });
      extras.afterCommit?.();
      const [shown] = shownTo(request, [row], [record]);
      return { status: 201, body: extras.body ? { ...shown, ...extras.body } : shown, headers: { location: String(record.url), ...extras.headers } };
    },
  };

  const retrieve: Action = {
    permission: resource.permission,
    async handle(request) {
      const row = await loadRow(db, parseId(request.params[recordParam]), false, request);
      checkObjectPermission(request, row);
      return { body: shownTo(request, [row], [await representOne(row, db, true, request.user)])[0] };
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
        // Checks with I/O run outside the transaction, once the record is known to be the caller's.
        let validated: ReturnType<typeof readInput> | null = null;
        if (hooks.validate) {
          const stored = await loadRow(db, id, false, request);
          checkObjectPermission(request, stored);
          validated = readInput(data, partial);
          await hooks.validate(validated.values, validated.errors, request, { row: stored, record: () => representOne(stored, db, false, request.user) });
          if (Object.keys(validated.errors).length && !hasStoredChecks(data)) throw new ValidationError(validated.errors);
        }
        const afterCommit: Array<() => void> = [];
        const { record, row: shownRow } = await writeTransaction(async (trx, notify) => {
          const row = await loadRow(trx, id, true, request);
          checkObjectPermission(request, row);
          await checkRule(trx, 'update', request, id);
          const before = await representOne(row, trx, false, request.user);
          // The ETag the caller holds is of the record as they were shown it.
          assertRecordMatches(request.raw.headers['if-match'], shownTo(request, [row], [before])[0]!);
          const { values, errors } = validated ?? readInput(data, partial);
          await checkAgainstStored(trx, data, values, errors, id, request.user);
          const changed = Object.entries(values).filter(([name, value]) => {
            const field = resource.fields[name]!;
            return field.type === 'references' ? !sameValue(before[name], field.show(value)) : !sameValue(row[columnOf(name, field)!], value);
          });
          if (changed.length === 0) return { record: before, row };
          await notify.before(trx, resource, id);
          const changedValues = Object.fromEntries(changed);
          const set = { ...columnValues(changedValues), ...(resource.timestamps ? { updated_at: Math.max(Date.now(), Number(row.updated_at)) } : {}) };
          const then = await hooks.beforeUpdate?.(trx, row, set, request);
          if (then) afterCommit.push(then);
          const updated = Object.keys(set).length
            ? ((await trx.updateTable(table).set(set).where('id', '=', id).returningAll().executeTakeFirstOrThrow()) as Row)
            : row;
          await writeReferenceLists(trx, id, changedValues, true);
          // The rule holds after the change too (WITH CHECK), or the change rolls back.
          await checkRule(trx, 'update', request, id);
          const representation = await representOne(updated, trx, false, request.user);
          const changes: Record<string, { from: unknown }> = {};
          for (const [name] of changed) if (!resource.fields[name]!.writeOnly) changes[name] = { from: before[name] };
          await notify(trx, { resource, action: 'updated', record: representation, changes, actor: user });
          return { record: representation, row: updated };
        });
        for (const then of afterCommit) then();
        return { body: shownTo(request, [shownRow], [record])[0] };
      },
    };
  }

  const destroy: Action = {
    permission: resource.permission,
    async handle(request) {
      const id = parseId(request.params[recordParam]);
      const user = request.user ?? ANONYMOUS;
      const afterCommit: Array<() => void> = [];
      await writeTransaction(async (trx, notify) => {
        const row = await loadRow(trx, id, true, request);
        checkObjectPermission(request, row);
        // The records a cascade or setNull reaches are not judged: this delete decides (ACCESS.md §2).
        await checkRule(trx, 'delete', request, id);
        const before = await representOne(row, trx, false, request.user);
        assertRecordMatches(request.raw.headers['if-match'], before);
        const then = await hooks.beforeDelete?.(trx, row, request);
        if (then) afterCommit.push(then);
        await deleteRecord(trx, row, before, notify, user);
      });
      for (const then of afterCommit) then();
      return { status: 204 };
    },
  };

  // An API key's scopes name the collection; a nested one's (deliveries) are its parent's (ACCESS.md §5).
  const keyAccess: KeyAccess = { collection: nestedUnder?.collection ?? resource.name, most: resource.keyLimit };
  const collection: View = {
    name: `${resource.label} List`,
    description: resource.description,
    keyAccess,
    path: collectionPath,
    actions: { ...(has('list') ? { GET: list } : {}), ...(has('create') ? { POST: create } : {}) },
    mediaTypes: RECORD_MEDIA_TYPES,
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
    keyAccess,
    path: recordRouteOf(resource),
    actions: {
      ...(has('retrieve') ? { GET: retrieve } : {}),
      ...(has('update') ? { PUT: updateAction(false) } : {}),
      ...(has('partial_update') ? { PATCH: updateAction(true) } : {}),
      ...(has('destroy') ? { DELETE: destroy } : {}),
    },
    mediaTypes: RECORD_MEDIA_TYPES,
    columns: [...columns, ...resource.detailOnly],
    metadata: metadataOf(resource, 'PUT'),
    ...(resource.pages.record ? { page: resource.pages.record } : {}),
  };

  // DRF's @action routes: each runs behind its own permission or the collection's, with the scoped record.
  const actionContext: ActionContext = {
    async loadRow(request, id) {
      const row = await loadRow(db, id ?? parseId(request.params[recordParam]), false, request);
      checkObjectPermission(request, row);
      return row;
    },
    transact: (work) => writeTransaction((trx) => work(trx)),
    async represent(rows, { detail = false, request } = {}) {
      const records = await represent(rows, db, detail, request?.user ?? null);
      return request ? shownTo(request, rows, records) : records;
    },
  };
  const extraViews: View[] = resource.extraActions.map((extra) => ({
    name: extra.name,
    description: extra.description,
    ...(extra.everyKey ? {} : { keyAccess }),
    path: `${extra.detail ? detail.path : collectionPath}${extra.path}`,
    // A GET answers with a record, rendered as the collection's are (`users/me/`).
    ...(extra.method === 'GET' ? { mediaTypes: RECORD_MEDIA_TYPES, columns: collection.columns } : { mediaTypes: [JSON_TYPE] }),
    actions: {
      [extra.method ?? 'POST']: {
        permission: extra.permission ?? resource.permission,
        ...(extra.docs ? { docs: extra.docs } : {}),
        handle: (request: ApiRequest) => extra.handle(request, actionContext),
      },
    },
  }));

  const self = { resource, db, collection, detail, views: [collection, detail, ...extraViews], filters: [...filters.values()], represent, representOne, loadRow, deleteRecord, deleteBatch, clearReferences };
  return self;
}

export type ViewSet = ReturnType<typeof buildViewSet>;
