// `ctx.collection(name)` (LOGIC.md §3): any collection, read and written by a hook or an action in
// its own transaction. Writes go through the target viewset's own create, update and destroy, on
// a request of the caller's that carries the transaction as its write unit (db/write-unit.ts) and
// is trusted (access rules do not apply: hooks are the declaration's own code), so they get the
// same validation, hooks and events as an API write, and their after-commit work waits for the
// outer commit.

import type { FastifyRequest } from 'fastify';
import type { DynamicDb, Row } from '../../db/dynamic-tables.js';
import type { Identity, User } from '../../http/caller.js';
import { NotFound } from '../../http/errors.js';
import { recordPath } from '../../http/paths.js';
import { JSON_TYPE } from '../../http/renderers.js';
import type { Action, ApiRequest, Method } from '../../http/view.js';
import { readFilterParams, type QueryFilter } from '../filters.js';
import type { CollectionHandle, StoredRecord } from '../hooks.js';
import type { Resource } from '../resource.js';
import { trustedRequests } from './queryset.js';

/** The most records `list` returns (LOGIC.md §3): a hook that needs more should page. */
export const MAX_LISTED = 10_000;

/** What a handle asks of a collection's viewset (a ViewSet is one). */
export interface HandleTarget {
  readonly resource: Resource;
  readonly filters: readonly QueryFilter[];
  loadRow(executor: DynamicDb, id: number, lock: boolean): Promise<Row>;
  represent(rows: readonly Row[], executor?: DynamicDb): Promise<Record<string, unknown>[]>;
  /** The viewset's writes, whichever of them the collection offers over HTTP. */
  readonly writes: { readonly create: Action; readonly update: Action; readonly destroy: Action };
}

/** The transaction a handle works in, and whose request it is. */
export interface HandleScope {
  readonly trx: DynamicDb;
  readonly user: User | null;
  readonly identity: Identity | null;
  /** Run after the outer write's commit (the inner writes' wake-ups, their afterCommit functions). */
  readonly later: (() => void)[];
  /** A GET action's: reads only. */
  readonly readOnly: boolean;
}

/** A record as a hook sees it: the API's JSON plus `<reference>_id` numbers (LOGIC.md §3). */
export function storedRecord(resource: Resource, record: Record<string, unknown>): StoredRecord {
  const out: Record<string, unknown> = { ...record };
  for (const [name, field] of Object.entries(resource.fields)) {
    if (field.type !== 'reference') continue;
    const path = record[name];
    out[`${name}_id`] = typeof path === 'string' ? Number(path.split('/').at(-2)) : null;
  }
  return out as StoredRecord;
}

/** `ctx.collection(name)` for one scope. */
export function collectionHandle(targets: ReadonlyMap<string, HandleTarget>, name: string, scope: HandleScope): CollectionHandle {
  const target = targets.get(name);
  if (!target) throw new Error(`ctx.collection("${name}"): no such collection (use one of ${[...targets.keys()].join(', ')})`);
  const { resource } = target;
  // A nested collection's records are reached through its parent's (a webhook's deliveries).
  if (resource.nestedUnder) throw new Error(`ctx.collection("${name}"): its records are served below ${resource.nestedUnder.collection}`);
  const filters = new Map(target.filters.map((filter) => [filter.param, filter]));
  const shown = async (rows: readonly Row[]) => (await target.represent(rows, scope.trx)).map((record) => storedRecord(resource, record));

  /** A request of the caller's for one write, carrying the transaction, trusted. */
  function request(method: Method, id: number | null, data: Record<string, unknown> = {}): ApiRequest {
    const path = id === null ? `/api/v1/${name}/` : recordPath(name, id);
    const made: ApiRequest = {
      // No headers: the outer request's If-Match is about its own record.
      raw: { headers: {} } as FastifyRequest,
      method,
      path,
      params: id === null ? {} : { id: String(id) },
      query: {},
      user: scope.user,
      identity: scope.identity,
      mediaType: JSON_TYPE,
      data: async () => withPaths(resource, data),
      unit: { trx: scope.trx, afterCommit: scope.later },
    };
    trustedRequests.add(made);
    return made;
  }
  function writable(what: string): void {
    if (scope.readOnly) throw new Error(`ctx.collection("${name}").${what}: a GET action only reads`);
  }
  const checkedId = (id: unknown): number => {
    if (!Number.isSafeInteger(id) || (id as number) < 1) throw new TypeError(`ctx.collection("${name}"): an id is a positive whole number, not ${JSON.stringify(id)}`);
    return id as number;
  };

  return {
    async get(id) {
      try {
        return (await shown([await target.loadRow(scope.trx, checkedId(id), false)]))[0]!;
      } catch (error) {
        if (error instanceof NotFound) return null;
        throw error;
      }
    },
    async list(filter = '') {
      const params = [...new URLSearchParams(filter.replace(/^\?/, ''))];
      const unknown = params.filter(([param]) => !filters.has(param)).map(([param]) => param);
      if (unknown.length) throw new Error(`ctx.collection("${name}").list: ${unknown.join(', ')} is not a filter of ${name} (it has ${[...filters.keys()].join(', ') || 'none'})`);
      const { conditions, errors } = readFilterParams(filters, params);
      if (Object.keys(errors).length) throw new Error(`ctx.collection("${name}").list: ${JSON.stringify(errors)}`);
      let query = scope.trx.selectFrom(resource.table).selectAll();
      for (const condition of conditions) query = query.where(condition);
      const rows = (await query.orderBy('id').limit(MAX_LISTED + 1).execute()) as Row[];
      if (rows.length > MAX_LISTED) throw new Error(`ctx.collection("${name}").list: more than ${MAX_LISTED.toLocaleString('en')} records match; narrow the filter`);
      return shown(rows);
    },
    async create(values) {
      writable('create');
      const { body } = await target.writes.create.handle(request('POST', null, values));
      return storedRecord(resource, body as Record<string, unknown>);
    },
    async update(id, values) {
      writable('update');
      const { body } = await target.writes.update.handle(request('PATCH', checkedId(id), values));
      return storedRecord(resource, body as Record<string, unknown>);
    },
    async delete(id) {
      writable('delete');
      await target.writes.destroy.handle(request('DELETE', checkedId(id)));
    },
  };
}

/** Values as a request gives them: a reference given as an id becomes its path. */
export function withPaths(resource: Resource, values: Record<string, unknown>): Record<string, unknown> {
  if (typeof values !== 'object' || values === null) throw new TypeError('ctx.collection: values are an object of field values');
  const out: Record<string, unknown> = { ...values };
  for (const [name, field] of Object.entries(resource.fields)) {
    if (field.to === undefined || !Object.hasOwn(out, name)) continue;
    const asPath = (value: unknown) => (typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? recordPath(field.to!, value) : value);
    out[name] = Array.isArray(out[name]) ? (out[name] as unknown[]).map(asPath) : asPath(out[name]);
  }
  return out;
}
