// The code a declaration runs (LOGIC.md §1–§3: validators, `validate`, computed fields, hooks)
// is the user's: what it throws on purpose (an ApiError, as a `reject(…)`) answers the request as
// it says; anything else is a bug in that code, a 500 problem+json without a stack trace whose log
// names the collection and the hook, so the user finds which of their functions failed.

import { isDatabaseUnavailable } from '../db/outage.js';
import { ApiError, Rejected } from '../http/errors.js';

/** A declaration's own code threw: a 500 whose log (never its body) names where. */
export class UserCodeFailed extends ApiError {
  /** Logged with the error (pino shows own properties): the collection and the hook or field. */
  readonly collection: string;
  readonly hook: string;

  constructor(collection: string, hook: string, cause: unknown) {
    super(`collection "${collection}", ${hook}: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.collection = collection;
    this.hook = hook;
    this.cause = cause;
  }

  // The message names the user's code for the log; the client is told nothing of it.
  override get detail(): string {
    return 'The server could not complete the request.';
  }
}

/**
 * What user code threw, as the request should answer it: an ApiError as itself (a `reject(…)`
 * from any copy of the package too), a lost database as the outage it is, else a UserCodeFailed.
 */
export function userCodeError(collection: string, hook: string, error: unknown): unknown {
  if (error instanceof ApiError || isDatabaseUnavailable(error)) return error;
  return Rejected.from(error) ?? new UserCodeFailed(collection, hook, error);
}
