// Which rows a request reaches (DRF's `get_queryset`, `get_object`, `check_object_permissions`):
// a page of the list, filtered and read by keyset cursor, and one record by id, both within the
// collection's `scope` hook and the caller's read rule (ACCESS.md §2: what the caller may not read
// is not there, a 404); then whether the caller may act on that record: its permission, or the
// action's rule asked of the record in the same transaction (PostgreSQL's `USING` / `WITH CHECK`).

import { sql, type CompiledQuery } from 'kysely';
import { numberPending } from '../../db/change-log.js';
import type { Storage } from '../../db/database.js';
import type { Condition, DynamicDb, Row } from '../../db/dynamic-tables.js';
import type { User } from '../../http/caller.js';
import { InvalidQuery, NotFound } from '../../http/errors.js';
import { MESSAGES } from '../../http/messages.js';
import type { CursorCodec, PageRequest } from '../../http/pagination.js';
import { parseId } from '../../http/paths.js';
import { permissionDenied } from '../../http/pipeline.js';
import type { ApiRequest } from '../../http/view.js';
import type { Field } from '../fields/field.js';
import { readFilterParams, type QueryFilter } from '../filters.js';
import { fetchKeysetPage } from '../keyset.js';
import { compileRule, readCondition } from '../access/compile.js';
import { fieldReadGuard, fieldsAreShared, selectFieldReads } from '../access/field-rules.js';
import type { RuleAction } from '../access/rules.js';
import { collectionPathOf, type Resource } from '../resource.js';

/**
 * Requests a declaration's own code makes (`ctx.collection`): hooks and actions are trusted code,
 * so access rules, scopes and object permissions do not apply to them (LOGIC.md §3).
 */
export const trustedRequests = new WeakSet<ApiRequest>();

// Who reads for trusted code: an admin passes every rule (ACCESS.md §1), so references to any
// record are accepted and reverse lists show every record.
export const TRUSTED_READER: User = { id: 0, username: 'restwire', passwordChangedAt: 0, roles: ['admin'] };

/** Whose read rules judge what `request` reads (references written, reverse lists): its caller's, or none for trusted code. */
export function viewerOf(request: ApiRequest): User | null {
  return trustedRequests.has(request) ? TRUSTED_READER : request.user;
}

/** What NULL sorts as in a nullable field's ordering: below every value the field can hold. */
function nullsAs(field: Field): string | number | undefined {
  if (!field.state().null) return undefined;
  return ['integer', 'decimal', 'boolean', 'reference'].includes(field.type) ? -Number.MAX_SAFE_INTEGER - 1 : '';
}

/** The column a list page's (and a GET of a record's) statement reads the last change position into. */
const PAGE_POSITION = '__change_position';
const POSITION_COLUMN = sql<number>`(select last from change_positions where id = 1)`.as(PAGE_POSITION);
/** The id a caller's record query is compiled with, replaced by the one asked for (ids are positive). */
const ID_PLACEHOLDER = -4_200_042_007;
/** Callers whose record query is kept compiled, per collection. */
const CALLER_QUERIES = 1_000;
/**
 * For a collection logged as rows (a webhook's deliveries): whether a change is committed but not
 * numbered yet (the dispatcher's are numbered together later, webhooks/delivery-changes.ts). A read
 * that sees one has them numbered and reads again, so its position is exact all the same.
 */
const CHANGES_WAITING = '__changes_waiting';
const WAITING_COLUMN = sql<number>`(case when exists (select 1 from change_log where position is null) then 1 else 0 end)`.as(CHANGES_WAITING);
/** Reads again after numbering waiting changes at most this often; then the position may repeat a change. */
const EXACT_READS = 3;

/** What the queries of one collection's viewset read with. */
export interface QuerysetOptions {
  readonly storage: Storage;
  readonly db: DynamicDb;
  readonly cursors: CursorCodec;
  /** The collection's list filters, by query parameter. */
  readonly filters: ReadonlyMap<string, QueryFilter>;
}

/** A collection's list page and record lookups, within its scope. */
export function buildQueryset(resource: Resource, options: QuerysetOptions) {
  const { storage, db, cursors, filters } = options;
  const table = resource.table;
  const collectionPath = collectionPathOf(resource);
  const { hooks, nestedUnder } = resource;
  /** The collection's path as requested (a nested one with its parent's id). */
  const listPath = (request: ApiRequest): string => (nestedUnder ? collectionPath.replace(':id', String(parseId(request.params.id))) : collectionPath);

  function filterConditions(request: ApiRequest): Condition[] {
    const params = Object.entries(request.query).flatMap(([param, value]) => (value === undefined ? [] : [[param, String(value)] as const]));
    const { conditions, errors } = readFilterParams(filters, params, fieldReadGuard(resource, request.user));
    if (Object.keys(errors).length) throw new InvalidQuery(errors, MESSAGES.invalidQuery);
    return conditions;
  }

  const waitingAware = resource.changesLoggedAsRows;
  /** Numbers the changes committed unnumbered (db/change-log.ts numberPending). */
  const numberWaiting = () => storage.transact(async (trx) => numberPending(trx));
  /**
   * Reads until no change waits to be numbered (`WAITING_COLUMN`), numbering them between reads;
   * a read within a write unit cannot (its transaction holds the writer) and keeps the first.
   */
  async function exactRead<T extends { waiting: boolean }>(read: () => Promise<T>, unit: boolean): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const found = await read();
      if (!found.waiting || unit || attempt === EXACT_READS) return found;
      await numberWaiting();
    }
  }
  /** Whether a row read with WAITING_COLUMN saw a change waiting; takes the column off. */
  function sawWaiting(row: Row | undefined): boolean {
    if (!row || !waitingAware) return false;
    const waiting = Number(row[CHANGES_WAITING]) === 1;
    delete row[CHANGES_WAITING];
    return waiting;
  }

  /** One page of the list: scoped, filtered, in the requested ordering. */
  function listPage(request: ApiRequest, page: PageRequest) {
    return exactRead(() => readPage(request, page), Boolean(request.unit));
  }

  async function readPage(request: ApiRequest, page: PageRequest) {
    // The last change position, read by the page's own statement (one snapshot), so a stream
    // opened after it starts exactly where the page ends (STREAMS.md §3); taken off the rows below.
    // Each row also says which of its restricted fields the caller may read (ACCESS.md §3).
    let query = selectFieldReads((request.unit?.trx ?? db).selectFrom(table).selectAll().select(POSITION_COLUMN), resource, request.user);
    if (waitingAware) query = query.select(WAITING_COLUMN);
    if (hooks.scope) query = query.where(await hooks.scope(request));
    const readable = readCondition(resource.access, request.user);
    if (readable) query = query.where(readable);
    for (const condition of filterConditions(request)) query = query.where(condition);
    const field = resource.fields[page.ordering.name.replace(/^-/, '')];
    const found = await fetchKeysetPage<Row>(query, page, { path: listPath(request), query: request.query, cursors }, field ? nullsAs(field) : undefined);
    const position = found.rows.length ? Number(found.rows[0]![PAGE_POSITION]) : null;
    const waiting = found.rows.map(sawWaiting)[0] ?? false;
    for (const row of found.rows) delete row[PAGE_POSITION];
    return { ...found, position, waiting };
  }

  // The hottest query, compiled once: building and compiling it with Kysely on every request
  // cost more than running it (issue #6 profile). Only the parameter changes. A GET of a record
  // reads the last change position in the same statement (one snapshot, as a page does:
  // STREAMS.md §3); a separate statement for it was a tenth of a GET's CPU (issue 18).
  const selectById = db.selectFrom(table).selectAll().where('id', '=', 0).compile();
  const selectByIdAt = (waitingAware ? db.selectFrom(table).selectAll().select(POSITION_COLUMN).select(WAITING_COLUMN) : db.selectFrom(table).selectAll().select(POSITION_COLUMN))
    .where('id', '=', 0)
    .compile();
  const fieldsShared = fieldsAreShared(resource);
  // The same SELECT for a caller whose read rule or field rules shape it, compiled once per caller
  // (user and roles: what the rules are judged by) and reused with another id: building it with
  // Kysely on every GET made an `owner=@me` record cost a fifth more than a `*` one (issue 18).
  // Not with a `scope`, which may read more of the request than its caller.
  const byCaller = new Map<string, { compiled: CompiledQuery; idAt: number }>();

  async function readRow(executor: DynamicDb, id: number, lock: boolean, from: ApiRequest | undefined, withPosition: boolean): Promise<Row> {
    const request = from && !trustedRequests.has(from) ? from : undefined;
    const scope = request && hooks.scope ? await hooks.scope(request) : null;
    const readable = request ? readCondition(resource.access, request.user) : null;
    let compiled: CompiledQuery | null = null;
    if (executor === db && !lock && !scope && !readable && (fieldsShared || !request)) {
      compiled = { ...(withPosition ? selectByIdAt : selectById), parameters: [id] };
    } else if (executor === db && !lock && !scope && request) {
      compiled = callerQuery(request.user, readable, withPosition, id);
    }
    if (compiled !== null) {
      const { rows } = await db.executeQuery<Row>(compiled);
      if (!rows[0]) throw new NotFound();
      return rows[0];
    }
    let query = executor.selectFrom(table).selectAll().where('id', '=', id);
    if (withPosition) query = waitingAware ? query.select(POSITION_COLUMN).select(WAITING_COLUMN) : query.select(POSITION_COLUMN);
    if (request) query = selectFieldReads(query, resource, request.user);
    if (scope) query = query.where(scope);
    if (readable) query = query.where(readable);
    const row = (await (lock ? storage.lockForUpdate(query) : query).executeTakeFirst()) as Row | undefined;
    if (!row) throw new NotFound();
    return row;
  }

  /** The record query for `user`'s rules, from `byCaller` (compiled on first use), with `id`; null when it cannot be reused. */
  function callerQuery(user: User | null, readable: Condition | null, withPosition: boolean, id: number): CompiledQuery | null {
    const key = `${withPosition ? 'at' : 'row'} ${user?.id ?? '-'} ${JSON.stringify(user?.roles ?? [])}`;
    let known = byCaller.get(key);
    if (known === undefined) {
      let query = db.selectFrom(table).selectAll().where('id', '=', ID_PLACEHOLDER);
      if (withPosition) query = query.select(POSITION_COLUMN);
      query = selectFieldReads(query, resource, user);
      if (readable) query = query.where(readable);
      const compiled = query.compile();
      const idAt = compiled.parameters.indexOf(ID_PLACEHOLDER);
      // Only when the placeholder is the one parameter of its value (no rule used that number).
      if (idAt < 0 || compiled.parameters.lastIndexOf(ID_PLACEHOLDER) !== idAt) return null;
      if (byCaller.size >= CALLER_QUERIES) byCaller.delete(byCaller.keys().next().value!);
      byCaller.set(key, (known = { compiled, idAt }));
    }
    const parameters = [...known.compiled.parameters];
    parameters[known.idAt] = id;
    return { ...known.compiled, parameters };
  }

  /**
   * A record by id; with a request, only within its `scope` (another user's webhook is a 404) and
   * the caller's read rule (a record they may not read is a 404), with the verdicts of its
   * field read rules for that caller.
   */
  function loadRow(executor: DynamicDb, id: number, lock: boolean, from?: ApiRequest): Promise<Row> {
    return readRow(executor, id, lock, from, false);
  }

  /** `loadRow` for a GET: the record and the last change position, read by one statement. */
  async function loadRowAt(executor: DynamicDb, id: number, from: ApiRequest): Promise<{ row: Row; position: number }> {
    const { row, position } = await exactRead(async () => {
      const row = await readRow(executor, id, false, from, true);
      const position = Number(row[PAGE_POSITION]);
      delete row[PAGE_POSITION];
      return { row, position, waiting: sawWaiting(row) };
    }, Boolean(from.unit));
    return { row, position };
  }

  /**
   * The rows of `ids` the request's caller may read, within the `scope`: what another collection's
   * `?expand=` shows of this one (REQUESTS.md §2), one query for a whole page. In slices, each
   * within SQLite's 32,766 parameters.
   */
  async function readableRows(request: ApiRequest, ids: readonly number[]): Promise<Row[]> {
    const scope = hooks.scope ? await hooks.scope(request) : null;
    const readable = readCondition(resource.access, request.user);
    const rows: Row[] = [];
    for (let start = 0; start < ids.length; start += 10_000) {
      let query = selectFieldReads((request.unit?.trx ?? db).selectFrom(table).selectAll(), resource, request.user).where('id', 'in', ids.slice(start, start + 10_000));
      if (scope) query = query.where(scope);
      if (readable) query = query.where(readable);
      rows.push(...((await query.orderBy('id').execute()) as Row[]));
    }
    return rows;
  }

  /**
   * Refuses a record the permission keeps from the caller: 403, or 401 to an anonymous one. With
   * rules there is no object permission: `checkRule` judges the record.
   */
  function checkObjectPermission(request: ApiRequest, row: Row): void {
    if (resource.access || trustedRequests.has(request)) return;
    const ownerId = resource.owner ? Number(row.owner_id) : null;
    if (!resource.permission.hasObjectPermission({ method: request.method, user: request.user }, { ownerId })) {
      throw permissionDenied(request.identity);
    }
  }

  /**
   * Refuses (403, or 401 to an anonymous caller) unless the action's rule holds for the record
   * `id` as `executor` (the write's transaction) sees it now; a 403 never names the rule.
   */
  async function checkRule(executor: DynamicDb, action: RuleAction, request: ApiRequest, id: number): Promise<void> {
    if (!resource.access || trustedRequests.has(request)) return;
    const verdict = compileRule(resource.access[action], request.user);
    if (verdict === true) return;
    const holds = verdict !== false && (await executor.selectFrom(table).select('id').where('id', '=', id).where(verdict).executeTakeFirst()) !== undefined;
    if (!holds) throw permissionDenied(request.identity);
  }

  return { listPath, listPage, filterConditions, loadRow, loadRowAt, readableRows, checkObjectPermission, checkRule };
}
