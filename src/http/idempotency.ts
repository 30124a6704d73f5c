// The Idempotency-Key stage (REQUESTS.md §1; draft-ietf-httpapi-idempotency-key-header, as
// Stripe's): a POST or PATCH with a key runs its action in a write unit whose transaction also
// stores the response under the caller and key, so the response commits with the change it
// answers, or neither does; the same request again gets the stored response back.

import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Storage } from '../db/database.js';
import type { DynamicDb } from '../db/dynamic-tables.js';
import { findStoredResponse, holdKey, storeResponse, type StoredResponse } from '../db/idempotency-keys.js';
import { inSavepoint, type WriteUnit } from '../db/write-unit.js';
import { ApiError, IdempotencyKeyInUse, IdempotencyKeyReused, problemBody, ValidationError } from './errors.js';
import type { CachedRepresentation } from './representation-cache.js';

export const IDEMPOTENCY_HEADER = 'Idempotency-Key';

/** Seals stored bodies at rest, as webhook secrets are (a body may hold a secret shown once). */
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
}

/** Runs keyed requests: replays, refusals (409, 422), and first requests in a write unit. */
export function createIdempotency({ storage, sealer, ttlMs }: IdempotencyOptions) {
  // Keys being processed by this process. Another process's are held by the database (holdKey).
  const processing = new Set<string>();

  function replay(stored: StoredResponse, hash: string): IdempotentOutcome {
    if (stored.request_hash !== hash) throw new IdempotencyKeyReused();
    const { headers, contentType, etag } = JSON.parse(stored.headers) as StoredHeaders;
    const text = stored.body === null ? null : sealer.open(stored.body);
    return { representation: { status: stored.status, headers, contentType, text, etag }, replayed: true };
  }

  /**
   * Answers a keyed request of `userId`: its stored response, or `respond` run once in a write
   * unit whose transaction stores what it answered (an error worth storing is stored after its
   * writes roll back to the savepoint, and thrown once committed).
   */
  return async function idempotent(
    request: FastifyRequest,
    userId: number,
    key: string,
    respond: (unit: WriteUnit) => Promise<CachedRepresentation>,
  ): Promise<IdempotentOutcome> {
    const body = request.body instanceof Buffer ? request.body : Buffer.alloc(0);
    const hash = createHash('sha256').update(`${request.method}\n${request.url}\n`).update(body).digest('hex');
    const id = `${userId}\n${key}`;
    if (processing.has(id)) throw new IdempotencyKeyInUse();
    processing.add(id);
    try {
      const known = await findStoredResponse(storage.db as unknown as DynamicDb, userId, key, Date.now());
      if (known) return replay(known, hash);
      const outcome = await storage.transact(async (transaction) => {
        const trx = transaction as unknown as DynamicDb;
        if (!(await holdKey(storage.dialect, trx, userId, key))) throw new IdempotencyKeyInUse();
        // Another process may have finished it since the look-up above.
        const stored = await findStoredResponse(trx, userId, key, Date.now());
        if (stored) return { stored, representation: null };
        const unit: WriteUnit = { trx, afterCommit: [] };
        let representation: CachedRepresentation;
        let failure: ApiError | null = null;
        try {
          representation = await inSavepoint(trx, () => respond(unit));
        } catch (error) {
          if (!(error instanceof ApiError) || !isStored(error.status)) throw error;
          // Rolled back to the savepoint: nothing the callbacks were for was kept.
          unit.afterCommit.length = 0;
          failure = error;
          representation = problemRepresentation(error);
        }
        if (isStored(representation.status)) {
          const now = Date.now();
          const { contentType, etag } = representation;
          // The rate-limit headers are the replay's own (a batch sets X-Rate-Limit-Remaining).
          const headers = Object.fromEntries(Object.entries(representation.headers ?? {}).filter(([name]) => !name.startsWith('x-rate-limit-')));
          await storeResponse(trx, {
            user_id: userId,
            key,
            request_hash: hash,
            status: representation.status,
            headers: JSON.stringify({ headers, contentType, etag } satisfies StoredHeaders),
            body: representation.text === null ? null : sealer.seal(representation.text),
            created_at: now,
            expires_at: now + ttlMs,
          });
        }
        return { representation, failure, afterCommit: unit.afterCommit };
      });
      if (outcome.representation === null) return replay(outcome.stored, hash);
      for (const callback of outcome.afterCommit) callback();
      if (outcome.failure) throw outcome.failure;
      return { representation: outcome.representation, replayed: false };
    } finally {
      processing.delete(id);
    }
  };
}

export type Idempotency = ReturnType<typeof createIdempotency>;
