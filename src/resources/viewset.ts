import type { CompiledQuery } from 'kysely';
import type { Storage } from '../db/database.js';
import { columnOf, joinTableOf, uniqueIndexOf } from '../db/schema-state.js';
import { assertRecordMatches } from '../http/conditional.js';
import { Conflict, InvalidQuery, NotFound, ValidationError, type FieldErrors } from '../http/errors.js';
import { MESSAGES } from '../http/messages.js';
import { CursorCodec, parsePageRequest, type PageRequest } from '../http/pagination.js';
import { isFormData, type RequestData } from '../http/parsers.js';
import { parseId, recordPath } from '../http/paths.js';
import { permissionDenied } from '../http/pipeline.js';
import type { Condition, DynamicDb, Row } from '../db/dynamic-tables.js';
import { CSV_TYPE, HTML_TYPE, JSON_TYPE } from '../http/renderers.js';
import type { Action, ApiRequest, View } from '../http/view.js';
import { parseField, type Field, type ParseContext } from './fields/field.js';
import { readReference } from './fields/relations.js';
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
};

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
    if (Object.keys(errors).length) throw new InvalidQuery(errors, MESSAGES.invalidQuery);
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
        if (!partial && field.required) errors[name] = [MESSAGES.required];
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
      },
    );
    let result: T;
    try {
      result = await storage.transact((trx) => work(trx as unknown as DynamicDb, notify));
    } catch (error) {
      throw constraintError(error) ?? error;
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
  async function deleteRecord(
    trx: DynamicDb,
    row: Row,
    before: Record<string, unknown>,
    notify: Notify,
    actor: Change['actor'],
    /** Records this delete is already deleting (`table:id`): a cascade that comes back to one is a cycle. */
    deleting: Set<string> = new Set(),
  ): Promise<void> {
    deleting.add(`${table}:${row.id}`);
    // Before its delete rules change what refers to it (a filter may read its references).
    await notify.before(trx, resource, row.id);
    const referrers = referrersOf(resource.name, collections);
    let protectedBy = 0;
    for (const referrer of referrers.filter((r) => r.onDelete === 'protect')) {
      const { n } = (await trx
        .selectFrom(referrer.resource.table)
        .select((eb) => eb.fn.countAll().as('n'))
        .where(`${referrer.field}_id`, '=', row.id)
        .where('id', '!=', referrer.resource.name === resource.name ? row.id : 0)
        .executeTakeFirstOrThrow()) as { n: number | string };
      protectedBy += Number(n);
    }
    if (protectedBy > 0) {
      throw new Conflict(
        `Cannot delete this ${label}: ${protectedBy} ${protectedBy === 1 ? 'record refers' : 'records refer'} to it. Delete or change ${protectedBy === 1 ? 'it' : 'them'} first.`,
      );
    }
    for (const referrer of referrers.filter((r) => r.onDelete !== 'protect')) {
      const other = viewSets.get(referrer.resource.name)!;
      const referring = (await storage
        .lockForUpdate(trx.selectFrom(referrer.resource.table).selectAll().where(`${referrer.field}_id`, '=', row.id).where('id', '!=', other === self ? row.id : 0))
        .orderBy('id')
        .execute()) as Row[];
      for (const child of referring) {
        if (deleting.has(`${referrer.resource.table}:${child.id}`)) {
          // Records that cascade to each other cannot go in any order the foreign keys allow.
          throw new Conflict(
            `Cannot delete this ${label}: it and ${recordPath(referrer.resource.name, child.id)} refer to each other with onDelete 'cascade'. Clear one of the references first.`,
          );
        }
        const childBefore = await other.representOne(child, trx);
        if (referrer.onDelete === 'cascade') {
          await other.deleteRecord(trx, child, childBefore, notify, actor, deleting);
        } else {
          await notify.before(trx, referrer.resource, child.id);
          const updated = (await trx
            .updateTable(referrer.resource.table)
            .set({ [`${referrer.field}_id`]: null, ...(referrer.resource.timestamps ? { updated_at: Math.max(Date.now(), Number(child.updated_at)) } : {}) })
            .where('id', '=', child.id)
            .returningAll()
            .executeTakeFirstOrThrow()) as Row;
          const record = await other.representOne(updated, trx);
          await notify(trx, { resource: referrer.resource, action: 'updated', record, changes: { [referrer.field]: { from: childBefore[referrer.field] } }, actor });
        }
      }
    }
    await trx.deleteFrom(table).where('id', '=', row.id).execute();
    await notify(trx, { resource, action: 'deleted', record: before, actor });
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
  // As DRF's metadata: the collection describes its POST, a record its PUT.
  const metadata = (preferred: 'POST' | 'PUT') => () => ({
    actions:
      has('create') || has('update')
        ? {
            [(preferred === 'PUT' ? has('update') : !has('create')) ? 'PUT' : 'POST']: Object.fromEntries([
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

  // DRF's @action routes: each runs behind the collection's permission, with the scoped record.
  const actionContext: ActionContext = {
    async loadRow(request) {
      const row = await loadRow(db, parseId(request.params[recordParam]), false, request);
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
    mediaTypes: [JSON_TYPE],
    actions: { POST: { permission: resource.permission, ...(extra.docs ? { docs: extra.docs } : {}), handle: (request) => extra.handle(request, actionContext) } },
  }));

  const self = { resource, db, collection, detail, views: [collection, detail, ...extraViews], filters: [...filters.values()], represent, representOne, loadRow, deleteRecord };
  return self;
}

export type ViewSet = ReturnType<typeof buildViewSet>;
