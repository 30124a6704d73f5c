// The Idempotency-Key stage (REQUESTS.md §1; draft-ietf-httpapi-idempotency-key-header, as
// Stripe's): a POST or PATCH with a key runs its action in a write unit whose transaction also
// stores the response under the caller and key, so the response commits with the change it
// answers, or neither does; the same request again gets the stored response back. The key is
// claimed, and a stored response looked for, inside that transaction: one statement, no look-up
// before it (issue 20).

import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Storage } from '../db/database.js';
import type { DynamicDb } from '../db/dynamic-tables.js';
import { claimKey, findStoredResponse, isStoredMeanwhile, storeResponse, type StoredAnswer } from '../db/idempotency-keys.js';
import { transactAgainOnConflict, type WriteUnit } from '../db/write-unit.js';
import { ApiError, IdempotencyKeyInUse, IdempotencyKeyReused, problemBody, ValidationError } from './errors.js';
import type { CachedRepresentation } from './representation-cache.js';

export const IDEMPOTENCY_HEADER = 'Idempotency-Key';

/** Seals stored bodies that hold a secret at rest, as webhook secrets are. */
export interface ResponseSealer {
  seal(plain: string): string;
  open(sealed: string): string;
}

export interface IdempotencyOptions {
  readonly storage: Storage;
  readonly sealer: ResponseSealer;
  /** How long a stored response is replayed (IDEMPOTENCY_TTL_HOURS). */
  readonly ttlMs: number;
}

/** What a keyed request answers: the action's response, or the stored one replayed. */
export interface IdempotentOutcome {
  readonly representation: CachedRepresentation;
  readonly replayed: boolean;
}

// 1–255 printable ASCII characters, no spaces (REQUESTS.md §1).
const VALID_KEY = /^[\x21-\x7e]{1,255}$/;
// Answers that say what was done are kept; 401, 409, 422, 429 and 5xx say nothing was, so a retry
// may succeed and is processed afresh.
const STORED_ERRORS = new Set([400, 403, 404, 412, 413]);
const isStored = (status: number) => (status >= 200 && status < 300) || STORED_ERRORS.has(status);

/** Whether a request may carry a key: POST and PATCH under /api/v1/, except the sign-in endpoints. */
export function takesIdempotencyKey(method: string, path: string): boolean {
  return (method === 'POST' || method === 'PATCH') && !path.startsWith('/api/v1/auth/');
}

/** The key a request carries, or null; a malformed one, or one from an anonymous caller, is a 400 naming the header. */
export function readIdempotencyKey(request: FastifyRequest, authenticated: boolean): string | null {
  const value = request.headers['idempotency-key'];
  if (value === undefined) return null;
  if (typeof value !== 'string' || !VALID_KEY.test(value)) {
    throw new ValidationError({ [IDEMPOTENCY_HEADER]: ['Must be 1 to 255 printable ASCII characters without spaces.'] }, 'The Idempotency-Key header is invalid.');
  }
  // A key is kept per caller: an anonymous one has no caller to keep it for.
  if (!authenticated) throw new ValidationError({ [IDEMPOTENCY_HEADER]: ['Only an authenticated request may carry an Idempotency-Key.'] }, 'The Idempotency-Key header is invalid.');
  return value;
}

/** The problem response an error becomes, as the problem handler sends it. */
function problemRepresentation(error: ApiError): CachedRepresentation {
  const { 'www-authenticate': _challenge, ...headers } = error.headers;
  return { status: error.status, headers, contentType: 'application/problem+json; charset=utf-8', text: JSON.stringify(problemBody(error)), etag: null };
}

interface StoredHeaders {
  headers: CachedRepresentation['headers'];
  contentType: string | null;
  etag: string | null;
  /** The body is stored as it was sent: it holds no secret. (Absent on a sealed body, and on every body stored before issue 20's fix.) */
  plain?: true;
}

/**
 * Whether a response holds a secret shown once (a webhook's, an API key's, or a batch's answer
 * holding one): such a response says `Cache-Control: no-store` (RFC 9111 §5.2.2.5), and only its
 * body is stored sealed. Sealing every body cost a keyed POST about a tenth of its CPU (issue 20).
 */
function holdsSecret(headers: CachedRepresentation['headers']): boolean {
  const cacheControl = headers?.['cache-control'];
  return cacheControl !== undefined && /\bno-store\b/i.test(String(cacheControl));
}

/** Runs keyed requests: replays, refusals (409, 422), and first requests in a write unit. */
export function createIdempotency({ storage, sealer, ttlMs }: IdempotencyOptions) {
  const { dialect } = storage;
  // Keys being processed by this process. Another process's are held by the database (claimKey).
  const processing = new Set<string>();

  function replay(stored: StoredAnswer, hash: string): IdempotentOutcome {
    if (stored.request_hash !== hash) throw new IdempotencyKeyReused();
    const { headers, contentType, etag, plain } = JSON.parse(stored.headers) as StoredHeaders;
    const text = stored.body === null || plain ? stored.body : sealer.open(stored.body);
    return { representation: { status: Number(stored.status), headers, contentType, text, etag }, replayed: true };
  }

  /** The row that stores `representation` under the caller's key. */
  function rowOf(userId: number, key: string, hash: string, representation: CachedRepresentation) {
    const now = Date.now();
    const { contentType, etag, text } = representation;
    // The rate-limit headers are the replay's own (a batch sets X-Rate-Limit-Remaining).
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(representation.headers ?? {})) if (!name.startsWith('x-rate-limit-')) headers[name] = value;
    const sealed = holdsSecret(headers);
    return {
      user_id: userId,
      key,
      request_hash: hash,
      status: representation.status,
      headers: JSON.stringify((sealed ? { headers, contentType, etag } : { headers, contentType, etag, plain: true }) satisfies StoredHeaders),
      body: text === null || !sealed ? text : sealer.seal(text),
      created_at: now,
      expires_at: now + ttlMs,
    };
  }

  /**
   * Stores the answer of a request that failed with `error` and changed nothing (its transaction
   * rolled back whole), in a transaction of its own; unless another request with the key holds
   * it or has stored an answer meanwhile, which then stands.
   */
  async function storeFailure(userId: number, key: string, hash: string, error: ApiError): Promise<void> {
    try {
      await storage.transact(async (transaction) => {
        const trx = transaction as unknown as DynamicDb;
        const claim = await claimKey(dialect, trx, userId, key, Date.now());
        if (claim.held && claim.stored === null) await storeResponse(dialect, trx, rowOf(userId, key, hash, problemRepresentation(error)));
      });
    } catch (storeError) {
      if (!isStoredMeanwhile(storeError)) throw storeError;
    }
  }

  /**
   * Answers a keyed request of `userId`: its stored response, or `respond` run once in a write
   * unit whose transaction stores what it answered. An error worth storing rolls the transaction
   * back whole, is stored in one of its own, and is thrown.
   */
  return async function idempotent(
    request: FastifyRequest,
    userId: number,
    key: string,
    respond: (unit: WriteUnit) => Promise<CachedRepresentation>,
  ): Promise<IdempotentOutcome> {
    // The raw body bytes, as sent: no re-serialised JSON.
    const body = request.body instanceof Buffer ? request.body : Buffer.alloc(0);
    const hash = createHash('sha256').update(`${request.method}\n${request.url}\n`).update(body).digest('hex');
    const id = `${userId}\n${key}`;
    if (processing.has(id)) throw new IdempotencyKeyInUse();
    processing.add(id);
    try {
      let outcome;
      try {
        outcome = await transactAgainOnConflict(storage, async (transaction) => {
          const trx = transaction as unknown as DynamicDb;
          const claim = await claimKey(dialect, trx, userId, key, Date.now());
          if (!claim.held) throw new IdempotencyKeyInUse();
          if (claim.stored) return { stored: claim.stored, representation: null, afterCommit: [] };
          // Every write of the request joins this transaction without a savepoint of its own: a
          // failure rolls it back whole (and is stored afterwards, if worth storing).
          const unit: WriteUnit = { trx, afterCommit: [], rollsBackWhole: true };
          const representation = await respond(unit);
          if (isStored(representation.status)) await storeResponse(dialect, trx, rowOf(userId, key, hash, representation));
          return { stored: null, representation, afterCommit: unit.afterCommit };
        });
      } catch (error) {
        if (isStoredMeanwhile(error)) {
          const stored = await findStoredResponse(dialect, storage.db as unknown as DynamicDb, userId, key, Date.now());
          if (stored) return replay(stored, hash);
          throw new IdempotencyKeyInUse();
        }
        if (error instanceof ApiError && isStored(error.status)) await storeFailure(userId, key, hash, error);
        throw error;
      }
      if (outcome.representation === null) return replay(outcome.stored!, hash);
      for (const callback of outcome.afterCommit) callback();
      return { representation: outcome.representation, replayed: false };
    } finally {
      processing.delete(id);
    }
  };
}

export type Idempotency = ReturnType<typeof createIdempotency>;
