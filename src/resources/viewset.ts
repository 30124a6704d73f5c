import { sql, type CompiledQuery } from 'kysely';
import type { Storage } from '../db/database.js';
import { columnOf, joinTableOf, uniqueIndexOf } from '../db/schema-state.js';
import { assertRecordMatches } from '../http/conditional.js';
import { Conflict, InvalidQuery, NotFound, ValidationError, type FieldErrors } from '../http/errors.js';
import { CursorCodec, parsePageRequest, type PageRequest } from '../http/pagination.js';
import { isFormData, type RequestData } from '../http/parsers.js';
import { parseId, recordPath } from '../http/paths.js';
import { permissionDenied } from '../http/pipeline.js';
import type { Condition, DynamicDb, Row } from '../db/dynamic-tables.js';
import { CSV_TYPE, HTML_TYPE, JSON_TYPE } from '../http/renderers.js';
import type { Action, ApiRequest, View } from '../http/view.js';
import { parseField, readReference, type Field, type ParseContext } from './fields.js';
import { buildFilters, readFilterParams } from './filters.js';
import { fetchKeysetPage, pageResponse } from './keyset.js';
import {
  loadReferenceLists,
  loadRelatedLists,
  missingReferences,
  referrersOf,
  type CollectionLookup,
} from './relations.js';
import { collectionPathOf, recordRouteOf, representationFields, type ActionContext, type Change, type ChangeListener, type Resource } from './resource.js';

// The generic viewset (DRF's ModelViewSet): one machine turns any declaration into its two views,
// the collection and the record, with list, create, retrieve, update, partial update and destroy.
// Every action runs behind the pipeline's stages (`http/pipeline.ts`).

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

/** Tells the listeners of a change (`before`: of a record about to change, see ChangeListener). */
type Notify = ((trx: DynamicDb, change: Change) => Promise<void>) & {
  before(trx: DynamicDb, resource: Resource, id: number): Promise<void>;
  /** Several changes at once, in order (a cascade's batch): listeners may write them together. */
  all(trx: DynamicDb, changes: readonly Change[]): Promise<void>;
};

/** A delete in progress with its cascade: every record it has reached, by `table:id`. */
interface Cascade {
  readonly notify: Notify;
  readonly actor: Change['actor'];
  readonly scheduled: Map<string, CascadeEntry>;
}

/** Records of one collection a cascade deletes in one statement. */
interface CascadeBatch {
  readonly resource: Resource;
  readonly entries: CascadeEntry[];
}

interface CascadeEntry {
  readonly row: Row;
  /** Its representation before the delete (its `deleted` event's record). */
  before: Record<string, unknown>;
  /** The batch that deletes it (another batch may take it over, see deleteBatch). */
  batch: CascadeBatch;
  /** The record whose delete reached it (`table:id`), null for the one deleted. */
  parent: string | null;
  announced: boolean;
  deleted: boolean;
}

/** Ids per `in (…)` list and records per cascade batch: well below both databases' bound parameters. */
const CASCADE_CHUNK = 500;

function chunksOf<T>(items: readonly T[]): T[][] {
  const chunks: T[][] = [];
  for (let start = 0; start < items.length; start += CASCADE_CHUNK) chunks.push(items.slice(start, start + CASCADE_CHUNK));
  return chunks;
}

function schedule(cascade: Cascade, batch: CascadeBatch, row: Row, before: Record<string, unknown>, parent: string | null): CascadeEntry {
  const entry: CascadeEntry = { row, before, batch, parent, announced: false, deleted: false };
  cascade.scheduled.set(`${batch.resource.table}:${row.id}`, entry);
  return entry;
}

/** Whether `key` is `from` or a record whose delete (transitively) reached `from`: a cycle. */
function isAncestor(cascade: Cascade, key: string, from: string): boolean {
  for (let at: string | null = from; at !== null; at = cascade.scheduled.get(at)?.parent ?? null) {
    if (at === key) return true;
  }
  return false;
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

/** What NULL sorts as in a nullable field's ordering: below every value the field can hold. */
function nullsAs(field: Field): string | number | undefined {
  if (!field.state().null) return undefined;
  return ['integer', 'decimal', 'boolean', 'reference'].includes(field.type) ? -Number.MAX_SAFE_INTEGER - 1 : '';
}

/**
 * Who acts when a declaration's permission lets an anonymous caller write: events name them as
 * the sender `anonymous` (id 0). A collection with `owner` refuses such a permission (registry.ts).
 */
const ANONYMOUS: Change['actor'] = { id: 0, username: 'anonymous', passwordChangedAt: 0 };

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
  /** A record's own path (a nested one names its parent's id). */
  const urlOf = (row: Row): string =>
    nestedUnder ? `/api/v1/${nestedUnder.collection}/${Number(row[nestedUnder.column])}/${resource.name}/${row.id}/` : recordPath(resource.name, row.id);
  /** The collection's path as requested (a nested one with its parent's id). */
  const listPath = (request: ApiRequest): string => (nestedUnder ? collectionPath.replace(':id', String(parseId(request.params.id))) : collectionPath);
  const columns = representationFields(resource);
  const lookup: CollectionLookup = (name) => collections.find((collection) => collection.name === name);
  const has = (action: Resource['actions'][number]) => resource.actions.includes(action);
  const fieldEntries = Object.entries(resource.fields);
  const shown = fieldEntries.filter(([, field]) => !field.writeOnly);
  const shownInList = shown.filter(([name]) => !resource.detailOnly.includes(name));
  const writable = fieldEntries.filter(([, field]) => !field.readOnly);
  const manyFields = fieldEntries.filter(([, field]) => field.type === 'references');
  const hasRelations = manyFields.length > 0 || Object.keys(resource.related).length > 0;
  const orderings: Record<string, string> = Object.assign(
    Object.create(null) as Record<string, string>,
    Object.fromEntries(resource.orderings.map((name) => [name, resource.fields[name] ? columnOf(name, resource.fields[name])! : name])),
  );
  const filters = new Map(buildFilters(resource, context).map((filter) => [filter.param, filter]));
  const label = resource.label.toLowerCase();

  /** Representations of rows, with relations loaded in one query per relation for the whole page. */
  async function represent(rows: readonly Row[], executor: DynamicDb = db, detail = false): Promise<Record<string, unknown>[]> {
    const ids = hasRelations ? rows.map((row) => row.id) : [];
    const lists = manyFields.length ? await loadReferenceLists(executor, resource, ids) : null;
    const related = Object.keys(resource.related).length ? await loadRelatedLists(executor, resource, ids, lookup) : null;
    const outs = rows.map((row) => {
      const out: Record<string, unknown> = { url: urlOf(row), id: row.id };
      for (const [name, field] of detail ? shown : shownInList) {
        if (field.type === 'references') out[name] = field.show(lists!.get(name)!.get(row.id) ?? []);
        else out[name] = field.show(row[columnOf(name, field)!]);
      }
      if (resource.owner) out.owner = recordPath('users', Number(row.owner_id));
      if (related) for (const [name, byRecord] of related) out[name] = byRecord.get(row.id) ?? [];
      if (resource.timestamps) {
        out.created_at = toIso(row.created_at);
        out.updated_at = toIso(row.updated_at);
      }
      return out;
    });
    if (hooks.represent) await hooks.represent(rows, outs, { detail, executor });
    return outs;
  }

  async function representOne(row: Row, executor: DynamicDb = db, detail = false): Promise<Record<string, unknown>> {
    return (await represent([row], executor, detail))[0]!;
  }

  function filterConditions(request: ApiRequest): Condition[] {
    const params = Object.entries(request.query).flatMap(([param, value]) => (value === undefined ? [] : [[param, String(value)] as const]));
    const { conditions, errors } = readFilterParams(filters, params);
    if (Object.keys(errors).length) throw new InvalidQuery(errors, 'One or more query parameters are invalid.');
    return conditions;
  }

  async function listPage(request: ApiRequest, page: PageRequest) {
    let query = db.selectFrom(table).selectAll();
    if (hooks.scope) query = query.where(await hooks.scope(request));
    for (const condition of filterConditions(request)) query = query.where(condition);
    const field = resource.fields[page.ordering.name.replace(/^-/, '')];
    return fetchKeysetPage<Row>(query, page, { path: listPath(request), query: request.query, cursors }, field ? nullsAs(field) : undefined);
  }

  // The hottest query, compiled once: building and compiling it with Kysely on every request
  // cost more than running it (issue #6 profile). Only the parameter changes.
  const selectById = db.selectFrom(table).selectAll().where('id', '=', 0).compile();

  // Building an insert with Kysely cost more than running it (issue #6 profile). A create writes
  // the same columns every time, so its SQL is compiled once per column set; only the values
  // change, in the order the columns were first compiled in.
  const inserts = new Map<string, { compiled: CompiledQuery<Row>; columns: string[] }>();
  function compiledInsert(executor: DynamicDb, values: Record<string, unknown>): CompiledQuery<Row> {
    const keys = Object.keys(values);
    const key = keys.join(',');
    const known = inserts.get(key);
    if (known) return { ...known.compiled, parameters: known.columns.map((column) => values[column]) };
    const compiled = executor.insertInto(table).values(values).returningAll().compile() as CompiledQuery<Row>;
    // Remembered only if Kysely bound exactly the values, in column order (it always has), and
    // none was undefined or null (Kysely leaves an undefined column out; a reused statement would bind NULL).
    const bound = keys.map((column) => values[column]);
    const exact = compiled.parameters.length === bound.length && compiled.parameters.every((value, index) => value === bound[index]);
    if (exact && !bound.includes(undefined)) inserts.set(key, { compiled, columns: keys });
    return compiled;
  }

  /** A record by id; with a request, only within its `scope` (another user's webhook is a 404). */
  async function loadRow(executor: DynamicDb, id: number, lock: boolean, request?: ApiRequest): Promise<Row> {
    const scope = request && hooks.scope ? await hooks.scope(request) : null;
    if (executor === db && !lock && !scope) {
      const { rows } = await db.executeQuery<Row>({ ...selectById, parameters: [id] });
      if (!rows[0]) throw new NotFound();
      return rows[0];
    }
    let query = executor.selectFrom(table).selectAll().where('id', '=', id);
    if (scope) query = query.where(scope);
    const row = (await (lock ? storage.lockForUpdate(query) : query).executeTakeFirst()) as Row | undefined;
    if (!row) throw new NotFound();
    return row;
  }

  function checkObjectPermission(request: ApiRequest, row: Row): void {
    const ownerId = resource.owner ? Number(row.owner_id) : null;
    if (!resource.permission.hasObjectPermission({ method: request.method, user: request.user }, { ownerId })) {
      throw permissionDenied(request.identity);
    }
  }

  /** Checks a body's fields by their declarations; every failing field is reported at once. */
  function readInput(data: RequestData, partial: boolean): { values: Record<string, unknown>; errors: FieldErrors } {
    const values: Record<string, unknown> = {};
    const errors: FieldErrors = {};
    const parseContext = isFormData(data) ? { ...context, form: true } : context;
    for (const [name, field] of writable) {
      if (!Object.prototype.hasOwnProperty.call(data, name)) {
        if (!partial && field.required) errors[name] = ['This field is required.'];
        continue;
      }
      const result = parseField(field, data[name], parseContext);
      if (result.ok) values[name] = result.value;
      else errors[name] = result.errors;
    }
    return { values, errors };
  }

  /** DRF's UniqueValidator: "book with this isbn already exists." (the database decides races). */
  async function duplicateValues(executor: DynamicDb, values: Record<string, unknown>, exceptId: number | null): Promise<FieldErrors> {
    const errors: FieldErrors = {};
    for (const [name, value] of Object.entries(values)) {
      const field = resource.fields[name]!;
      if (!field.unique || value === null) continue;
      let query = executor.selectFrom(table).select('id').where(columnOf(name, field)!, '=', value);
      if (exceptId !== null) query = query.where('id', '!=', exceptId);
      if (await query.executeTakeFirst()) errors[name] = [uniqueMessage(name)];
    }
    return errors;
  }

  const uniqueMessage = (name: string) => `${label} with this ${name.replace(/_/g, ' ')} already exists.`;

  /** Relations and uniqueness, checked in the write's transaction; all problems in one 400. */
  async function checkAgainstStored(
    executor: DynamicDb,
    data: RequestData,
    values: Record<string, unknown>,
    errors: FieldErrors,
    exceptId: number | null,
  ) {
    const checked = { ...values };
    for (const name of Object.keys(errors)) delete checked[name];
    // A list with bad items still has every missing record reported (one message per item);
    // not a list refused for its length, whose ids would not fit in one query (issue 22 item 8).
    for (const [name, field] of manyFields) {
      const items = data[name];
      if (!errors[name] || !Array.isArray(items) || items.length > field.maxItems!) continue;
      const readable = (items as unknown[]).map((item) => readReference(item, field.to!, context)).filter((item) => 'id' in item);
      const missing = await missingReferences(executor, resource, { [name]: readable.map((item) => (item as { id: number }).id) }, lookup);
      errors[name]!.push(...(missing[name] ?? []));
    }
    Object.assign(errors, await missingReferences(executor, resource, checked, lookup), await duplicateValues(executor, checked, exceptId));
    if (Object.keys(errors).length) throw new ValidationError(errors);
  }

  /** Field values → columns (references go to join tables). */
  function columnValues(values: Record<string, unknown>): Record<string, unknown> {
    const row: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(values)) {
      const field = resource.fields[name]!;
      if (field.type !== 'references') row[columnOf(name, field)!] = value;
    }
    return row;
  }

  async function writeReferenceLists(executor: DynamicDb, id: number, values: Record<string, unknown>, replace: boolean): Promise<void> {
    for (const [name] of manyFields) {
      const ids = values[name] as number[] | undefined;
      if (ids === undefined) continue;
      const join = joinTableOf(table, name);
      if (replace) await executor.deleteFrom(join).where('from_id', '=', id).execute();
      if (ids.length) await executor.insertInto(join).values(ids.map((to) => ({ from_id: id, to_id: to }))).execute();
    }
  }

  /**
   * Runs a write in one transaction with the listeners it notifies, then, once committed, the
   * callbacks they returned (so a dispatcher is woken only for work that exists). A unique or
   * foreign-key violation the checks could not see (a race) is a 400 or 409, never a 500.
   */
  async function writeTransaction<T>(work: (trx: DynamicDb, notify: Notify) => Promise<T>): Promise<T> {
    const afterCommit: Array<() => void> = [];
    const notify: Notify = Object.assign(
      async (trx: DynamicDb, change: Change) => {
        for (const listener of listeners) {
          const callback = await listener(trx as never, change);
          if (callback) afterCommit.push(callback);
        }
      },
      {
        async before(trx: DynamicDb, changing: Resource, id: number) {
          for (const listener of listeners) await listener.beforeChange?.(trx as never, { resource: changing, id });
        },
        async all(trx: DynamicDb, changes: readonly Change[]) {
          if (changes.length === 0) return;
          for (const listener of listeners) {
            if (listener.changes) {
              const callback = await listener.changes(trx as never, changes);
              if (callback) afterCommit.push(callback);
              continue;
            }
            for (const change of changes) {
              const callback = await listener(trx as never, change);
              if (callback) afterCommit.push(callback);
            }
          }
        },
      },
    );
    let result: T;
    try {
      result = await storage.transact((trx) => work(trx as unknown as DynamicDb, notify));
    } catch (error) {
      throw hooks.constraintError?.(error) ?? constraintError(error) ?? error;
    }
    for (const callback of afterCommit) callback();
    return result;
  }

  function constraintError(error: unknown): Error | null {
    const { code, constraint, message } = (error ?? {}) as { code?: string; constraint?: string; message?: string };
    if (code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE') {
      for (const [name, field] of fieldEntries) {
        const column = columnOf(name, field);
        // PostgreSQL names the index; SQLite says "UNIQUE constraint failed: books.isbn".
        if (column && (constraint === uniqueIndexOf(table, column) || new RegExp(`: ${table}\\.${column}$`).test(message ?? ''))) {
          return new ValidationError({ [name]: [uniqueMessage(name)] });
        }
      }
    }
    if (code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY') {
      return new Conflict('A record this change refers to was changed at the same time; nothing was changed. Try again.');
    }
    return null;
  }

  /**
   * Deletes a record and applies every delete rule that points at it (RESOURCES.md §2): protect
   * refuses with 409, cascade deletes the referring records (each with its `deleted` event),
   * setNull clears the references (each record with an `updated` event). All in `trx`.
   */
  async function deleteRecord(trx: DynamicDb, row: Row, before: Record<string, unknown>, notify: Notify, actor: Change['actor']): Promise<void> {
    const cascade: Cascade = { notify, actor, scheduled: new Map() };
    const batch: CascadeBatch = { resource, entries: [] };
    batch.entries.push(schedule(cascade, batch, row, before, null));
    await deleteBatch(trx, batch, cascade);
  }

  /**
   * Deletes a batch of this collection's records a cascade reached, set-based (issue 22): one
   * query per delete rule and chunk of ids, children deleted first, batch by batch, then the
   * batch in one statement and its events written together. Each record still raises its own
   * event, after those of the records that referred to it.
   */
  async function deleteBatch(trx: DynamicDb, batch: CascadeBatch, cascade: Cascade): Promise<void> {
    const { notify, actor } = cascade;
    const mine = () => batch.entries.filter((entry) => entry.batch === batch);
    // Before the delete rules change what refers to them (a filter may read their references).
    for (const entry of mine()) {
      if (entry.announced) continue;
      entry.announced = true;
      await notify.before(trx, resource, entry.row.id);
    }
    const referrers = referrersOf(resource.name, collections);
    for (const referrer of referrers.filter((r) => r.onDelete === 'protect')) {
      const column = `${referrer.field}_id`;
      for (const ids of chunksOf(mine().map((entry) => entry.row.id))) {
        let query = trx
          .selectFrom(referrer.resource.table)
          .select([column, (eb) => eb.fn.countAll().as('n')])
          .where(column, 'in', ids)
          .groupBy(column)
          .orderBy(column);
        // A record that refers to itself does not protect itself.
        if (referrer.resource.name === resource.name) query = query.whereRef('id', '!=', column);
        const counted = (await query.executeTakeFirst()) as { n: number | string } | undefined;
        const protectedBy = Number(counted?.n ?? 0);
        if (protectedBy > 0) {
          throw new Conflict(
            `Cannot delete this ${label}: ${protectedBy} ${protectedBy === 1 ? 'record refers' : 'records refer'} to it. Delete or change ${protectedBy === 1 ? 'it' : 'them'} first.`,
          );
        }
      }
    }
    for (const referrer of referrers.filter((r) => r.onDelete !== 'protect')) {
      const other = viewSets.get(referrer.resource.name)!;
      const column = `${referrer.field}_id`;
      const referring: Row[] = [];
      for (const ids of chunksOf(mine().map((entry) => entry.row.id))) {
        let query = trx.selectFrom(referrer.resource.table).selectAll().where(column, 'in', ids);
        // A record that refers to itself goes with itself.
        if (referrer.resource.name === resource.name) query = query.whereRef('id', '!=', column);
        referring.push(...((await storage.lockForUpdate(query).orderBy('id').execute()) as Row[]));
      }
      if (referrer.onDelete === 'setNull') {
        await other.clearReferences(trx, referrer.field, referring, cascade);
        continue;
      }
      const children: CascadeBatch = { resource: referrer.resource, entries: [] };
      const fresh: Row[] = [];
      for (const child of referring) {
        const key = `${referrer.resource.table}:${child.id}`;
        const known = cascade.scheduled.get(key);
        const parentKey = `${table}:${Number(child[column])}`;
        if (known === undefined) {
          fresh.push(child);
        } else if (isAncestor(cascade, key, parentKey)) {
          // Records that cascade to each other cannot go in any order the foreign keys allow.
          throw new Conflict(
            `Cannot delete this ${label}: it and ${recordPath(referrer.resource.name, child.id)} refer to each other with onDelete 'cascade'. Clear one of the references first.`,
          );
        } else if (known.batch !== batch) {
          // Reached again, through a record deleted before the batch that first reached it (a
          // reply is a comment of the post and a reply to a comment): it goes first, with this batch.
          known.batch = children;
          known.parent = parentKey;
          children.entries.push(known);
        }
        // Else it is in this very batch, deleted by the same statement.
      }
      for (const rows of chunksOf(fresh)) {
        const befores = await other.represent(rows, trx);
        rows.forEach((child, index) => children.entries.push(schedule(cascade, children, child, befores[index]!, `${table}:${Number(child[column])}`)));
      }
      // Children in id order, deleted a chunk at a time.
      children.entries.sort((a, b) => a.row.id - b.row.id);
      const chunks = chunksOf(children.entries).map((entries): CascadeBatch => ({ resource: referrer.resource, entries }));
      for (const chunk of chunks) for (const entry of chunk.entries) if (entry.batch === children) entry.batch = chunk;
      for (const chunk of chunks) await other.deleteBatch(trx, chunk, cascade);
    }
    const deleting = mine();
    if (deleting.length === 0) return;
    await trx.deleteFrom(table).where('id', 'in', deleting.map((entry) => entry.row.id)).execute();
    for (const entry of deleting) entry.deleted = true;
    await notify.all(trx, deleting.map((entry) => ({ resource, action: 'deleted' as const, record: entry.before, actor })));
  }

  /** A delete rule's setNull: clears `field` of `rows` (locked) in one statement per chunk; an `updated` event each. */
  async function clearReferences(trx: DynamicDb, fieldName: string, rows: readonly Row[], cascade: Cascade): Promise<void> {
    const column = `${fieldName}_id`;
    for (const chunk of chunksOf(rows)) {
      const befores = await represent(chunk, trx);
      for (const child of chunk) await cascade.notify.before(trx, resource, child.id);
      const now = Date.now();
      // Each record's updated_at moves forward, never back (as an update's does).
      const set: Record<string, unknown> = { [column]: null };
      if (resource.timestamps) set.updated_at = sql`case when updated_at > ${now} then updated_at else ${now} end`;
      const updated = (await trx
        .updateTable(table)
        .set(set)
        .where('id', 'in', chunk.map((child) => child.id))
        .returningAll()
        .execute()) as Row[];
      updated.sort((a, b) => a.id - b.id);
      const records = await represent(updated, trx);
      const changes: Change[] = records.map((record, index) => {
        const entry = cascade.scheduled.get(`${table}:${updated[index]!.id}`);
        // A record this cascade deletes later is shown, then, as it is now.
        if (entry && !entry.deleted) entry.before = record;
        return { resource, action: 'updated', record, changes: { [fieldName]: { from: befores[index]![fieldName] } }, actor: cascade.actor };
      });
      await cascade.notify.all(trx, changes);
    }
  }

  const list: Action = {
    permission: resource.permission,
    // A page is the same for everyone who may read it, so it is reused while no data changes;
    // not a scoped one (each caller's own webhooks), nor one the dispatcher changes.
    ...(hooks.scope ? {} : { version: () => storage.dataVersion() }),
    async handle(request) {
      const page = parsePageRequest(request.query, orderings, resource.defaultOrdering, cursors, listPath(request));
      const found = await listPage(request, page);
      return pageResponse(found, await represent(found.rows));
    },
  };

  const create: Action = {
    permission: resource.permission,
    // Described by the declaration's own words when it has them (signup), else from the fields.
    ...(resource.createDocs ? { docs: resource.createDocs } : {}),
    async handle(request) {
      const data = await request.data();
      const { values, errors } = readInput(data, false);
      await hooks.validate?.(values, errors, request);
      if (Object.keys(errors).length && !hasStoredChecks(data)) throw new ValidationError(errors);
      // Left out: the declared default, else null (an empty list for references).
      for (const [name, field] of fieldEntries) {
        if (!(name in values)) values[name] = field.hasDefault ? field.defaultValue : field.type === 'references' ? [] : null;
      }
      const user = request.user ?? ANONYMOUS;
      const now = Date.now();
      const { record, extras } = await writeTransaction(async (trx, notify) => {
        await checkAgainstStored(trx, data, values, errors, null);
        const insert = {
          ...columnValues(values),
          ...(resource.owner ? { owner_id: user.id } : {}),
          ...(resource.timestamps ? { created_at: now, updated_at: now } : {}),
        };
        await hooks.beforeCreate?.(trx, insert, request);
        const { rows } = await trx.executeQuery<Row>(compiledInsert(trx, insert));
        const row = rows[0]!;
        await writeReferenceLists(trx, row.id, values, false);
        const representation = await representOne(row, trx);
        await notify(trx, { resource, action: 'created', record: representation, actor: user });
        return { record: representation, extras: (await hooks.afterCreate?.(trx, row, representation, request)) ?? {} };
      });
      extras.afterCommit?.();
      return { status: 201, body: extras.body ? { ...record, ...extras.body } : record, headers: { location: String(record.url), ...extras.headers } };
    },
  };

  /** Whether a body needs the database to be judged (references, unique fields). */
  function hasStoredChecks(data: RequestData): boolean {
    return fieldEntries.some(([name, field]) => (field.to !== undefined || field.unique) && name in data);
  }

  const retrieve: Action = {
    permission: resource.permission,
    async handle(request) {
      const row = await loadRow(db, parseId(request.params[recordParam]), false, request);
      checkObjectPermission(request, row);
      return { body: await representOne(row, db, true) };
    },
  };

  function updateAction(partial: boolean): Action {
    return {
      permission: resource.permission,
      async handle(request) {
        const id = parseId(request.params[recordParam]);
        const data = await request.data();
        const user = request.user ?? ANONYMOUS;
        // Checks with I/O run outside the transaction, once the record is known to be the caller's.
        let validated: ReturnType<typeof readInput> | null = null;
        if (hooks.validate) {
          checkObjectPermission(request, await loadRow(db, id, false, request));
          validated = readInput(data, partial);
          await hooks.validate(validated.values, validated.errors, request);
          if (Object.keys(validated.errors).length && !hasStoredChecks(data)) throw new ValidationError(validated.errors);
        }
        const afterCommit: Array<() => void> = [];
        const record = await writeTransaction(async (trx, notify) => {
          const row = await loadRow(trx, id, true, request);
          checkObjectPermission(request, row);
          const before = await representOne(row, trx);
          assertRecordMatches(request.raw.headers['if-match'], before);
          const { values, errors } = validated ?? readInput(data, partial);
          await checkAgainstStored(trx, data, values, errors, id);
          const changed = Object.entries(values).filter(([name, value]) => {
            const field = resource.fields[name]!;
            return field.type === 'references' ? !sameValue(before[name], field.show(value)) : !sameValue(row[columnOf(name, field)!], value);
          });
          if (changed.length === 0) return before;
          await notify.before(trx, resource, id);
          const changedValues = Object.fromEntries(changed);
          const set = { ...columnValues(changedValues), ...(resource.timestamps ? { updated_at: Math.max(Date.now(), Number(row.updated_at)) } : {}) };
          const then = await hooks.beforeUpdate?.(trx, row, set, request);
          if (then) afterCommit.push(then);
          const updated = Object.keys(set).length
            ? ((await trx.updateTable(table).set(set).where('id', '=', id).returningAll().executeTakeFirstOrThrow()) as Row)
            : row;
          await writeReferenceLists(trx, id, changedValues, true);
          const representation = await representOne(updated, trx);
          const changes: Record<string, { from: unknown }> = {};
          for (const [name] of changed) if (!resource.fields[name]!.writeOnly) changes[name] = { from: before[name] };
          await notify(trx, { resource, action: 'updated', record: representation, changes, actor: user });
          return representation;
        });
        for (const then of afterCommit) then();
        return { body: record };
      },
    };
  }

  const destroy: Action = {
    permission: resource.permission,
    async handle(request) {
      const id = parseId(request.params[recordParam]);
      const user = request.user ?? ANONYMOUS;
      await writeTransaction(async (trx, notify) => {
        const row = await loadRow(trx, id, true, request);
        checkObjectPermission(request, row);
        const before = await representOne(row, trx);
        assertRecordMatches(request.raw.headers['if-match'], before);
        await deleteRecord(trx, row, before, notify, user);
      });
      return { status: 204 };
    },
  };

  const readOnly = (type: string, labelText: string) => ({ type, required: false, read_only: true, label: labelText });
  const describeField = (name: string, field: Field) => ({
    type: field.metadata().type,
    required: field.required,
    read_only: field.readOnly,
    ...(field.writeOnly ? { write_only: true } : {}),
    label: field.label ?? name.charAt(0).toUpperCase() + name.slice(1).replace(/_/g, ' '),
    ...field.metadata(),
  });
  // As DRF's SimpleMetadata: a view describes the write it has, the collection its POST, a record
  // its PUT (a record of a collection with create but no update, as signup's users, has none).
  const metadata = (method: 'POST' | 'PUT') => () => ({
    actions:
      (method === 'POST' ? has('create') || has('update') : has('update'))
        ? {
            [method === 'PUT' || !has('create') ? 'PUT' : 'POST']: Object.fromEntries([
              ['url', readOnly('field', 'Url')],
              ['id', readOnly('integer', 'ID')],
              ...fieldEntries.map(([name, field]) => [name, describeField(name, field)]),
              ...(resource.owner ? [['owner', readOnly('field', 'Owner')]] : []),
              ...Object.keys(resource.related).map((name) => [name, readOnly('field', name.charAt(0).toUpperCase() + name.slice(1))]),
              ...(resource.timestamps ? [['created_at', readOnly('datetime', 'Created at')], ['updated_at', readOnly('datetime', 'Updated at')]] : []),
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
    // The 201 of a create may show more (a webhook's secret); CSV shows it there too.
    columns: [...columns, ...resource.createShows],
    metadata: metadata('POST'),
    listControls: {
      orderings: resource.orderings.flatMap((name) => [name, `-${name}`]),
      defaultOrdering: resource.defaultOrdering,
      filters: [...filters.values()].map(({ param, description }) => ({ param, description })),
    },
  };

  const detail: View = {
    name: `${resource.label} Instance`,
    description: resource.recordDescription,
    path: recordRouteOf(resource),
    actions: {
      ...(has('retrieve') ? { GET: retrieve } : {}),
      ...(has('update') ? { PUT: updateAction(false) } : {}),
      ...(has('partial_update') ? { PATCH: updateAction(true) } : {}),
      ...(has('destroy') ? { DELETE: destroy } : {}),
    },
    mediaTypes: RECORD_MEDIA_TYPES,
    columns: [...columns, ...resource.detailOnly],
    metadata: metadata('PUT'),
  };

  // DRF's @action routes: each runs behind its own permission or the collection's, with the scoped record.
  const actionContext: ActionContext = {
    async loadRow(request, id) {
      const row = await loadRow(db, id ?? parseId(request.params[recordParam]), false, request);
      checkObjectPermission(request, row);
      return row;
    },
    transact: (work) => writeTransaction((trx) => work(trx)),
    represent: (rows, detailed = false) => represent(rows, db, detailed),
  };
  const extraViews: View[] = resource.extraActions.map((extra) => ({
    name: extra.name,
    description: extra.description,
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
