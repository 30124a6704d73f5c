// The permit stage's policy for API keys (ACCESS.md §5): which requests a key's scopes grant.
// A scope is `COLLECTION:read` (GET, HEAD, OPTIONS) or `COLLECTION:write` (every method), with `*`
// for every collection; a view says which collection it belongs to and the most any key may do
// there (`View.keyAccess`), so the rules of `keys` and `users` stay in their declarations.

/** What a key may do at most on a view: nothing (`keys`), read (`users`), or what its scopes say. */
export type KeyLimit = 'none' | 'read' | 'write';

/** The collection whose scopes a key needs to use a view, and the most any key may do there. */
export interface KeyAccess {
  readonly collection: string;
  readonly most: KeyLimit;
}

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Whether a key with `scopes` may send `method` to a view. A view of no collection (the root, the
 * docs, `users/me`) answers every key's reads and none of its writes (signing in, out, …).
 */
export function scopesAllow(scopes: readonly string[], access: KeyAccess | undefined, method: string): boolean {
  const needs = READS.has(method) ? 'read' : 'write';
  if (access === undefined) return needs === 'read';
  // A view of every collection (the batch, REQUESTS.md §4) lets each of its requests be judged on its own.
  if (access.collection === '*') return access.most === 'write' || needs === 'read';
  if (access.most === 'none' || (access.most === 'read' && needs === 'write')) return false;
  return scopes.some((scope) => {
    const colon = scope.lastIndexOf(':');
    const collection = scope.slice(0, colon);
    const level = scope.slice(colon + 1);
    return (collection === access.collection || collection === '*') && (level === 'write' || level === needs);
  });
}
