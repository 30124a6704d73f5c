// `POST /api/v1/batch/` (REQUESTS.md §4, as PocketBase's batch): up to 100 writes run in order in
// one transaction, each through the same view, permit stage, rules, validation and events as on
// its own. The batch is the write unit's owner (db/write-unit.ts), or joins the one of its
// Idempotency-Key; its requests' events are delivered after the one commit.

import type { FastifyRequest } from 'fastify';
import { allowAny } from '../auth/permissions.js';
import { holdChanges, releaseChanges, stopHoldingChanges } from '../db/change-log.js';
import type { Storage } from '../db/database.js';
import type { DynamicDb } from '../db/dynamic-tables.js';
import { transactAgainOnConflict, type WriteUnit } from '../db/write-unit.js';
import { ApiError, BatchRequestFailed, ClientClosedRequest, ValidationError } from '../http/errors.js';
import type { RequestData } from '../http/parsers.js';
import { permittedAction } from '../http/pipeline.js';
import { JSON_TYPE } from '../http/renderers.js';
import type { ApiRequest, Method, View } from '../http/view.js';

export const BATCH_PATH = '/api/v1/batch/';
export const MAX_BATCH = 100;
const BATCH_METHODS: readonly string[] = ['POST', 'PUT', 'PATCH', 'DELETE'];
// `"$N.url"` as a whole value; a path may go on after it (`$0.url` + `pings/`).
const REFERENCE = /^\$(\d+)\.url$/;
const PATH_REFERENCE = /^\$(\d+)\.url(.*)$/;

/** One request of a batch, as read from its body. */
interface BatchItem {
  readonly method: Method;
  readonly path: string;
  readonly body: RequestData | undefined;
  readonly headers: Record<string, string>;
}

/** One answer of a batch. */
interface BatchAnswer {
  readonly status: number;
  readonly body?: unknown;
  readonly headers: Record<string, string>;
}

export interface BatchOptions {
  readonly storage: Storage;
  /** The collection and record views that may be batched, the server's own. */
  readonly views: () => readonly View[];
  /** Counts the batch's requests against its caller's rate limit (the pipeline's `charge`). */
  readonly charge: (request: ApiRequest, points: number) => Promise<number>;
}

/** A 400 for a malformed batch: no `failed_index`, nothing done. */
const malformed = (message: string) => new ValidationError({ requests: [message] }, 'The batch is malformed; nothing was done.');

/** Reads and checks the batch body's shape (REQUESTS.md §4); a malformed one is a 400 without `failed_index`. */
function readBatch(data: RequestData): BatchItem[] {
  const requests = data.requests;
  if (!Array.isArray(requests)) throw malformed('Must be a list of requests.');
  if (requests.length === 0 || requests.length > MAX_BATCH) throw malformed(`Must hold 1 to ${MAX_BATCH} requests.`);
  return requests.map((item: unknown, index) => {
    if (item === null || typeof item !== 'object' || Array.isArray(item)) throw malformed(`Request ${index} must be an object.`);
    const { method, path, body, headers = {} } = item as Record<string, unknown>;
    if (typeof method !== 'string' || !BATCH_METHODS.includes(method)) throw malformed(`Request ${index}: method must be one of ${BATCH_METHODS.join(', ')}.`);
    if (typeof path !== 'string' || !(path.startsWith('/') || PATH_REFERENCE.test(path))) throw malformed(`Request ${index}: path must be a path such as /api/v1/books/ or "$N.url".`);
    if (body !== undefined && (body === null || typeof body !== 'object' || Array.isArray(body))) throw malformed(`Request ${index}: body must be a JSON object.`);
    if (headers === null || typeof headers !== 'object' || Array.isArray(headers) || !Object.values(headers).every((value) => typeof value === 'string')) {
      throw malformed(`Request ${index}: headers must be an object of strings.`);
    }
    const named = Object.fromEntries(Object.entries(headers as Record<string, string>).map(([name, value]) => [name.toLowerCase(), value]));
    // The key belongs to the batch as a whole (REQUESTS.md §4).
    if ('idempotency-key' in named) throw malformed(`Request ${index}: Idempotency-Key belongs on the batch, not on a request in it.`);
    return { method: method as Method, path, body: body as RequestData | undefined, headers: named };
  });
}

/** A view pattern (`/api/v1/books/:id/`) as a matcher of paths, with its number of fixed segments. */
function patternOf(view: View): { view: View; regex: RegExp; names: string[]; fixed: number } {
  const names: string[] = [];
  const segments = view.path.split('/');
  const source = segments.map((segment) => (segment.startsWith(':') ? (names.push(segment.slice(1)), '([^/]+)') : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/');
  return { view, regex: new RegExp(`^${source}$`), names, fixed: segments.filter((segment) => !segment.startsWith(':')).length };
}

/** The `POST /api/v1/batch/` view. */
export function batchView({ storage, views, charge }: BatchOptions): View {
  let patterns: ReturnType<typeof patternOf>[] | undefined;
  /** The view a path names and its parameters; fixed segments first, as the router (`users/me/` before `users/:id/`). */
  function route(path: string): { view: View; params: Record<string, string> } | null {
    patterns ??= views().map(patternOf).sort((a, b) => b.fixed - a.fixed);
    for (const { view, regex, names } of patterns) {
      const match = regex.exec(path);
      if (!match) continue;
      try {
        return { view, params: Object.fromEntries(names.map((name, index) => [name, decodeURIComponent(match[index + 1]!)])) };
      } catch {
        return null;
      }
    }
    return null;
  }

  /** What request `index` may refer to as `$N.url`: the url of an earlier create or update's record. */
  function urlOf(reference: string, index: number, items: readonly BatchItem[], answers: readonly BatchAnswer[], where: string): string {
    const n = Number(REFERENCE.exec(reference)?.[1] ?? PATH_REFERENCE.exec(reference)![1]);
    const url = n < index && items[n]!.method !== 'DELETE' ? (answers[n]?.body as { url?: unknown } | undefined)?.url : undefined;
    if (typeof url !== 'string') throw new ValidationError({ [where]: [`"$${n}.url" must refer to an earlier request of this batch that created or updated a record.`] });
    return url;
  }

  /** A body with its `$N.url` values, as whole member values or list items, replaced. */
  function resolveBody(body: RequestData, index: number, items: readonly BatchItem[], answers: readonly BatchAnswer[]): RequestData {
    const resolve = (value: unknown, where: string) => (typeof value === 'string' && REFERENCE.test(value) ? urlOf(value, index, items, answers, where) : value);
    const resolved: RequestData = {};
    for (const [name, value] of Object.entries(body)) {
      resolved[name] = Array.isArray(value) ? value.map((item) => resolve(item, name)) : resolve(value, name);
    }
    return resolved;
  }

  /**
   * The batch request's own request object, with each request's own headers (If-Match) in place
   * of the batch's; made once per batch, and once more only for a request with headers of its own.
   */
  function rawsOf(parent: FastifyRequest): (headers: Record<string, string>) => FastifyRequest {
    const { 'if-match': _match, 'if-none-match': _none, 'idempotency-key': _key, ...kept } = parent.headers;
    const plain = Object.create(parent, { headers: { value: kept } }) as FastifyRequest;
    return (headers) => (Object.keys(headers).length === 0 ? plain : (Object.create(parent, { headers: { value: { ...kept, ...headers } } }) as FastifyRequest));
  }

  async function runAll(request: ApiRequest, items: readonly BatchItem[], unit: WriteUnit): Promise<BatchAnswer[]> {
    // The batch's changes are logged in one statement at its end (issue 20), or not at all; with
    // those of the group commit it joined, if that holds them (db/group-commit.ts).
    const holding = holdChanges(unit.trx);
    try {
      const answers = await runEach(request, items, unit);
      if (holding) await releaseChanges(unit.trx);
      return answers;
    } finally {
      if (holding) stopHoldingChanges(unit.trx);
    }
  }

  async function runEach(request: ApiRequest, items: readonly BatchItem[], unit: WriteUnit): Promise<BatchAnswer[]> {
    const answers: BatchAnswer[] = [];
    const rawOf = rawsOf(request.raw);
    for (const [index, item] of items.entries()) {
      // A caller that has gone (e.g. timed out while the batch waited for a connection) reads no
      // answer: its batch rolls back instead of holding a pool connection for up to 100 writes,
      // which under load kept the pool busy with abandoned batches while new requests timed out.
      if (request.raw.socket.destroyed) throw new ClientClosedRequest();
      try {
        const target = PATH_REFERENCE.test(item.path) ? urlOf(item.path, index, items, answers, 'path') + PATH_REFERENCE.exec(item.path)![2] : item.path;
        const [path, search = ''] = target.split('?', 2) as [string, string?];
        const found = route(path);
        if (found === null) throw new ValidationError({ path: ['Must be the path of a collection or of a record.'] });
        const action = permittedAction(found.view, item.method, request.identity);
        const body = item.body === undefined ? {} : resolveBody(item.body, index, items, answers);
        const response = await action.handle({
          raw: rawOf(item.headers),
          method: item.method,
          path,
          params: found.params,
          query: Object.fromEntries(new URLSearchParams(search)),
          user: request.user,
          identity: request.identity,
          mediaType: JSON_TYPE,
          data: async () => body,
          unit,
        });
        const headers = Object.fromEntries(Object.entries(response.headers ?? {}).map(([name, value]) => [titleCase(name), Array.isArray(value) ? value.join(', ') : value]));
        answers.push({ status: response.status ?? 200, ...(response.body === undefined ? {} : { body: response.body }), headers });
      } catch (error) {
        // The batch's transaction rolls back whole: nothing stored, no event (REQUESTS.md §4).
        if (error instanceof ApiError) throw new BatchRequestFailed(error, index, answers);
        throw error;
      }
    }
    return answers;
  }

  return {
    name: 'Batch',
    description: `POST up to ${MAX_BATCH} writes (POST, PUT, PATCH, DELETE on collection or record paths) to run in order in one transaction: all succeed, or nothing is stored.`,
    // Any key may send a batch; each request in it passes the key's scopes on its own.
    keyAccess: { collection: '*', most: 'write' },
    path: BATCH_PATH,
    mediaTypes: [JSON_TYPE],
    actions: {
      POST: {
        permission: allowAny,
        docs: BATCH_DOCS,
        async handle(request) {
          const items = readBatch(await request.data());
          // The batch counted as one request; each request in it counts one more (REQUESTS.md §4).
          const remaining = await charge(request, items.length);
          let answers: BatchAnswer[];
          if (request.unit) {
            answers = await runAll(request, items, request.unit);
          } else {
            const afterCommit: (() => void)[] = [];
            // A failing request rolls the whole batch back: its writes need no savepoints of their own.
            answers = await transactAgainOnConflict(storage, (trx) => {
              afterCommit.length = 0;
              return runAll(request, items, { trx: trx as unknown as DynamicDb, afterCommit, rollsBackWhole: true });
            });
            for (const callback of afterCommit) callback();
          }
          // An answer holding a secret shown once (a webhook's, a key's) makes the batch's no-store too.
          const secret = answers.some((answer) => /\bno-store\b/i.test(answer.headers['Cache-Control'] ?? ''));
          return { body: { responses: answers }, headers: { 'x-rate-limit-remaining': String(remaining), ...(secret ? { 'cache-control': 'no-store' } : {}) } };
        },
      },
    },
  };
}

const titleCase = (name: string) => name.replace(/(^|-)([a-z])/g, (_, dash: string, letter: string) => dash + letter.toUpperCase());

const ANSWER = {
  type: 'object',
  required: ['status', 'headers'],
  properties: { status: { type: 'integer' }, body: { description: 'The body of the answer, as the request would have had it on its own (none for a 204).' }, headers: { type: 'object', additionalProperties: { type: 'string' } } },
};

const BATCH_DOCS = {
  request: {
    required: true,
    schema: {
      type: 'object',
      required: ['requests'],
      properties: {
        requests: {
          type: 'array',
          minItems: 1,
          maxItems: MAX_BATCH,
          items: {
            type: 'object',
            required: ['method', 'path'],
            properties: {
              method: { type: 'string', enum: [...BATCH_METHODS] },
              path: { type: 'string', description: 'A collection or record path, or `"$N.url"` (the record of request N, earlier in the batch).' },
              body: { type: 'object', description: 'The request body; a member or list item `"$N.url"` is the url of the record of request N.' },
              headers: { type: 'object', additionalProperties: { type: 'string' }, description: 'e.g. If-Match; not Idempotency-Key (it belongs on the batch).' },
            },
          },
        },
      },
    },
  },
  responses: {
    '200': {
      description: 'Every request succeeded and was committed in one transaction; their events are delivered after it. A failing request instead answers with its own status (400, 403, 404, 409, 412) and a problem whose `failed_index` is its position, `errors` its own and `responses` the answers before it; nothing is stored.',
      schema: { type: 'object', required: ['responses'], properties: { responses: { type: 'array', items: ANSWER } } },
    },
  },
};
