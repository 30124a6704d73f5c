import { sql, type CompiledQuery, type Expression, type ExpressionBuilder, type Kysely, type SqlBool } from 'kysely';
import { permissionDenied } from '../http/pipeline.js';
import type { Storage } from '../db/database.js';
import { assertRecordMatches } from '../http/conditional.js';
import { InvalidQuery, NotFound, ValidationError } from '../http/errors.js';
import { CursorCodec, parsePageRequest, type PageRequest } from '../http/pagination.js';
import { CSV_TYPE, HTML_TYPE, JSON_TYPE } from '../http/renderers.js';
import type { Action, ApiRequest, View } from '../http/view.js';
import { validateInput } from './fields.js';
import { fetchKeysetPage, pageResponse } from './keyset.js';
import {
  recordPath,
  representationFields,
  type Change,
  type ChangeListener,
  type ResourceDeclaration,
} from './resource.js';

// The generic viewset works on a table chosen at run time, which Kysely's static table types
// cannot express; each resource declaration is checked against the typed schema instead.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type DynamicDb = Kysely<any>;
type Row = Record<string, unknown> & { id: number };

export const RECORD_MEDIA_TYPES = [JSON_TYPE, HTML_TYPE, CSV_TYPE] as const;

export interface ViewSetOptions {
  readonly storage: Storage;
  readonly cursors: CursorCodec;
  /** Told of every committed change, inside its transaction (the webhook outbox). */
  readonly listeners?: readonly ChangeListener[];
}

/** Parses a path id; anything but a positive integer in range is a 404, as an unknown id is. */
export function parseId(text: string | undefined): number {
  if (text === undefined || !/^[1-9]\d{0,15}$/.test(text)) throw new NotFound();
  const id = Number(text);
  if (!Number.isSafeInteger(id)) throw new NotFound();
  return id;
}

// Formatting dates was a tenth of a page's time (issue #6 profile); the same records are read
// again and again, so their timestamps' text is remembered (a bounded map, reset when full:
// every create adds a timestamp never read again, and a bigger map only grew the heap).
const isoText = new Map<number, string>();
function toIso(ms: unknown): string {
  const value = Number(ms);
  let text = isoText.get(value);
  if (text === undefined) {
    if (isoText.size >= 4096) isoText.clear();
    text = new Date(value).toISOString();
    isoText.set(value, text);
  }
  return text;
}

/**
 * Turns a resource declaration into its two views, the collection and the record, with DRF's
 * ModelViewSet actions. Every action runs behind the pipeline's stages (`http/pipeline.ts`).
 */
export function buildViewSet(resource: ResourceDeclaration, options: ViewSetOptions) {
  const { storage, cursors, listeners = [] } = options;
  const db = storage.db as unknown as DynamicDb;
  const collectionPath = `/api/v1/${resource.name}/`;
  const columns = representationFields(resource);
  const writable = Object.keys(resource.fields);
  const has = (action: ResourceDeclaration['actions'][number]) => resource.actions.includes(action);

  /** Representations of rows, with reverse relations loaded in one query per relation. */
  async function represent(rows: readonly Row[], executor: DynamicDb = db): Promise<Record<string, unknown>[]> {
    const relatedPaths = new Map<string, Map<number, string[]>>();
    for (const [field, relation] of Object.entries(resource.related ?? {})) {
      const byOwner = new Map<number, string[]>();
      if (rows.length > 0) {
        const related = await executor
          .selectFrom(relation.table)
          .select(['id', relation.column])
          .where(relation.column, 'in', rows.map((row) => row.id))
          .orderBy('id')
          .execute();
        for (const item of related as Row[]) {
          const ownerId = Number(item[relation.column]);
          const list = byOwner.get(ownerId) ?? [];
          list.push(recordPath(relation.collection, item.id));
          byOwner.set(ownerId, list);
        }
      }
      relatedPaths.set(field, byOwner);
    }
    return rows.map((row) => {
      const out: Record<string, unknown> = { url: recordPath(resource.name, row.id), id: row.id };
      for (const name of Object.keys(resource.readOnlyFields ?? {})) out[name] = row[name];
      for (const name of writable) out[name] = row[name];
      if (resource.owner) out[resource.owner.field] = recordPath('users', Number(row[resource.owner.column]));
      for (const [field, byOwner] of relatedPaths) out[field] = byOwner.get(row.id) ?? [];
      if (resource.timestamps) {
        out.created_at = toIso(row.created_at);
        out.updated_at = toIso(row.updated_at);
      }
      return out;
    });
  }

  async function representOne(row: Row, executor: DynamicDb = db): Promise<Record<string, unknown>> {
    return (await represent([row], executor))[0]!;
  }

  function filterConditions(request: ApiRequest) {
    const errors: Record<string, string[]> = {};
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- see DynamicDb
    const conditions: Array<(eb: ExpressionBuilder<any, any>) => Expression<SqlBool>> = [];
    for (const [name, filter] of Object.entries(resource.filters ?? {})) {
      const value = request.query[name];
      if (value === undefined) continue;
      const parsed = filter.parse(String(value));
      if ('error' in parsed) {
        errors[name] = [parsed.error];
        continue;
      }
      if (parsed.op === '=') {
        conditions.push((eb) => eb(parsed.column, '=', parsed.value));
      } else {
        // Escape LIKE's wildcards so `search=50%` finds "50%" literally. `lower()` folds every
        // script on both dialects (db/database.ts overrides SQLite's ASCII-only one).
        const pattern = `%${String(parsed.value).toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
        conditions.push(() => sql<SqlBool>`lower(${sql.ref(parsed.column)}) like ${pattern} escape '\\'`);
      }
    }
    if (Object.keys(errors).length) throw new InvalidQuery(errors, 'One or more query parameters are invalid.');
    return conditions;
  }

  async function listPage(request: ApiRequest, page: PageRequest) {
    let query = db.selectFrom(resource.table).selectAll();
    for (const condition of filterConditions(request)) query = query.where(condition);
    return fetchKeysetPage<Row>(query, page, { path: collectionPath, query: request.query, cursors });
  }

  // The hottest query, compiled once: building and compiling it with Kysely on every request
  // cost more than running it (issue #6 profile). Only the parameter changes.
  const selectById = db.selectFrom(resource.table).selectAll().where('id', '=', 0).compile();

  // Building an insert with Kysely cost more than running it (issue #6 profile). A create writes
  // the same columns every time, so its SQL is compiled once per column set; only the values
  // change, in the order the columns were first compiled in.
  const inserts = new Map<string, { compiled: CompiledQuery<Row>; columns: string[] }>();
  function compiledInsert(executor: DynamicDb, values: Record<string, unknown>): CompiledQuery<Row> {
    const columns = Object.keys(values);
    const key = columns.join(',');
    const known = inserts.get(key);
    if (known) return { ...known.compiled, parameters: known.columns.map((column) => values[column]) };
    const compiled = executor.insertInto(resource.table).values(values).returningAll().compile() as CompiledQuery<Row>;
    // Remembered only if Kysely bound exactly the values, in column order (it always has), and
    // none was undefined (Kysely leaves such a column out; a reused statement would bind NULL).
    const bound = columns.map((column) => values[column]);
    const exact = compiled.parameters.length === bound.length && compiled.parameters.every((value, index) => value === bound[index]);
    if (exact && !bound.includes(undefined)) {
      inserts.set(key, { compiled, columns });
    }
    return compiled;
  }

  async function loadRow(executor: DynamicDb, id: number, lock: boolean): Promise<Row> {
    if (executor === db && !lock) {
      const { rows } = await db.executeQuery<Row>({ ...selectById, parameters: [id] });
      if (!rows[0]) throw new NotFound();
      return rows[0];
    }
    const query = executor.selectFrom(resource.table).selectAll().where('id', '=', id);
    const row = (await (lock ? storage.lockForUpdate(query) : query).executeTakeFirst()) as Row | undefined;
    if (!row) throw new NotFound();
    return row;
  }

  function checkObjectPermission(request: ApiRequest, row: Row): void {
    const ownerId = resource.owner ? Number(row[resource.owner.column]) : null;
    if (!resource.permission.hasObjectPermission({ method: request.method, user: request.user }, { ownerId })) {
      throw permissionDenied(request.identity);
    }
  }

  type Notify = (trx: DynamicDb, change: Omit<Change, 'resource'>) => Promise<void>;

  /**
   * Runs a write in one transaction with the listeners it notifies, then, once committed, the
   * callbacks they returned (so a dispatcher is woken only for work that exists).
   */
  async function writeTransaction<T>(work: (trx: DynamicDb, notify: Notify) => Promise<T>): Promise<T> {
    const afterCommit: Array<() => void> = [];
    const notify: Notify = async (trx, change) => {
      for (const listener of listeners) {
        const callback = await listener(trx, { resource, ...change });
        if (callback) afterCommit.push(callback);
      }
    };
    const result = await storage.transact((trx) => work(trx as unknown as DynamicDb, notify));
    for (const callback of afterCommit) callback();
    return result;
  }

  const list: Action = {
    permission: resource.permission,
    // A page is the same for everyone who may read it, so it is reused while no data changes.
    version: () => storage.dataVersion(),
    async handle(request) {
      const page = parsePageRequest(request.query, resource.orderings, resource.defaultOrdering, cursors);
      const found = await listPage(request, page);
      return pageResponse(found, await represent(found.rows));
    },
  };

  const create: Action = {
    permission: resource.permission,
    async handle(request) {
      const { values, errors } = validateInput(resource.fields, await request.data(), { partial: false });
      if (Object.keys(errors).length) throw new ValidationError(errors);
      const user = request.user!;
      const now = Date.now();
      const record = await writeTransaction(async (trx, notify) => {
        const { rows } = await trx.executeQuery<Row>(
          compiledInsert(trx, {
            ...values,
            ...(resource.owner ? { [resource.owner.column]: user.id } : {}),
            ...(resource.timestamps ? { created_at: now, updated_at: now } : {}),
          }),
        );
        const row = rows[0]!;
        const representation = await representOne(row, trx);
        await notify(trx, { action: 'created', record: representation, actor: user });
        return representation;
      });
      return { status: 201, body: record, headers: { location: String(record.url) } };
    },
  };

  const retrieve: Action = {
    permission: resource.permission,
    async handle(request) {
      const row = await loadRow(db, parseId(request.params.id), false);
      checkObjectPermission(request, row);
      return { body: await representOne(row) };
    },
  };

  function updateAction(partial: boolean): Action {
    return {
      permission: resource.permission,
      async handle(request) {
        const id = parseId(request.params.id);
        const data = await request.data();
        const user = request.user!;
        const record = await writeTransaction(async (trx, notify) => {
          const row = await loadRow(trx, id, true);
          checkObjectPermission(request, row);
          const before = await representOne(row, trx);
          assertRecordMatches(request.raw.headers['if-match'], before);
          const { values, errors } = validateInput(resource.fields, data, { partial });
          if (Object.keys(errors).length) throw new ValidationError(errors);
          const changes: Record<string, { from: unknown }> = {};
          for (const [name, value] of Object.entries(values)) if (row[name] !== value) changes[name] = { from: row[name] };
          if (Object.keys(changes).length === 0) return before;
          const updated = (await trx
            .updateTable(resource.table)
            .set({ ...values, ...(resource.timestamps ? { updated_at: Math.max(Date.now(), Number(row.updated_at)) } : {}) })
            .where('id', '=', id)
            .returningAll()
            .executeTakeFirstOrThrow()) as Row;
          const representation = await representOne(updated, trx);
          await notify(trx, { action: 'updated', record: representation, changes, actor: user });
          return representation;
        });
        return { body: record };
      },
    };
  }

  const destroy: Action = {
    permission: resource.permission,
    async handle(request) {
      const id = parseId(request.params.id);
      const user = request.user!;
      await writeTransaction(async (trx, notify) => {
        const row = await loadRow(trx, id, true);
        checkObjectPermission(request, row);
        const before = await representOne(row, trx);
        assertRecordMatches(request.raw.headers['if-match'], before);
        await trx.deleteFrom(resource.table).where('id', '=', id).execute();
        await notify(trx, { action: 'deleted', record: before, actor: user });
      });
      return { status: 204 };
    },
  };

  const metadata = () => ({
    actions: has('create') || has('update')
      ? {
          [has('create') ? 'POST' : 'PUT']: Object.fromEntries([
            ['url', { type: 'field', required: false, read_only: true, label: 'Url' }],
            ['id', { type: 'integer', required: false, read_only: true, label: 'ID' }],
            ...Object.entries(resource.fields).map(([name, field]) => [name, field.metadata()]),
            ...(resource.owner ? [[resource.owner.field, { type: 'field', required: false, read_only: true, label: 'Owner' }]] : []),
            ...(resource.timestamps
              ? [
                  ['created_at', { type: 'datetime', required: false, read_only: true, label: 'Created at' }],
                  ['updated_at', { type: 'datetime', required: false, read_only: true, label: 'Updated at' }],
                ]
              : []),
          ]),
        }
      : undefined,
  });

  const collection: View = {
    name: `${resource.label} List`,
    description: resource.description,
    path: collectionPath,
    actions: { ...(has('list') ? { GET: list } : {}), ...(has('create') ? { POST: create } : {}) },
    mediaTypes: RECORD_MEDIA_TYPES,
    columns,
    metadata,
  };

  const detail: View = {
    name: `${resource.label} Instance`,
    description: resource.description,
    path: `${collectionPath}:id/`,
    actions: {
      ...(has('retrieve') ? { GET: retrieve } : {}),
      ...(has('update') ? { PUT: updateAction(false) } : {}),
      ...(has('partial_update') ? { PATCH: updateAction(true) } : {}),
      ...(has('destroy') ? { DELETE: destroy } : {}),
    },
    mediaTypes: RECORD_MEDIA_TYPES,
    columns,
    metadata,
  };

  return { resource, db, collection, detail, views: [collection, detail], represent, representOne, loadRow };
}

export type ViewSet = ReturnType<typeof buildViewSet>;
