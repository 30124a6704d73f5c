import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { InvalidQuery } from './errors.js';
import { MESSAGES } from './messages.js';

/**
 * Keyset (cursor) pagination, as DRF's CursorPagination: pages are positions in a total order
 * (the ordering column, then id), so walking all pages never repeats or skips a record while
 * records are added (API.md §2). Cursors are opaque and signed: one the server did not issue
 * is a 400, not a silent first page.
 */
export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;

export type SortValue = string | number;

/** Where a page starts: after (or, walking back, before) the row with these keys. */
export interface Position {
  /**
   * The row's ordering value; for a long one (over CURSOR_VALUE_CHARS characters) only its first
   * CURSOR_VALUE_CHARS, with `digest` set.
   */
  value: SortValue;
  /** For a long value: a digest of the whole value, to recognise it on the row `id` (keyset.ts). */
  digest?: string;
  id: number;
  /** True for a `previous` cursor: read backwards from the position, then flip the page. */
  reverse: boolean;
}

/** The list a cursor was issued for: another collection's list, or another ordering, refuses it. */
export interface CursorScope {
  /** The list's path (a nested list's names its parent). */
  collection: string;
  /** The ordering's public name, e.g. `-title`. */
  ordering: string;
}

/**
 * The most characters of an ordering value a cursor carries. A cursor over a 15,000-character
 * title made a 20 KB `Link` header whose URL the next request could not send (issue 22 item 11);
 * at 256 characters (at most 1 KB of UTF-8) a cursor stays under 2 KB.
 */
export const CURSOR_VALUE_CHARS = 256;

/** A digest of an ordering value, as a long value's cursor carries it. */
export function valueDigest(value: string): string {
  return createHash('sha256').update(value).digest('base64url').slice(0, 22);
}

export interface Ordering {
  /** The public name, e.g. `-created_at`. */
  name: string;
  column: string;
  descending: boolean;
}

export interface PageRequest {
  /** The list's path: the scope of the cursors it issues. */
  collection: string;
  limit: number;
  ordering: Ordering;
  position: Position | null;
}

/**
 * Signs and verifies cursors with a key derived from SECRET_KEY. A cursor names the list it was
 * made for by a tag, a plain hash of the list's path and ordering: the signature already covers
 * the tag, so the tag needs no key of its own. A cursor used on another list (whose column may
 * hold another type: a 500 on PostgreSQL, an empty page on SQLite) is an "Invalid cursor."
 */
export class CursorCodec {
  constructor(private readonly key: Buffer) {}

  encode(position: Position, scope: CursorScope): string {
    let { value, digest } = position;
    if (typeof value === 'string' && digest === undefined) {
      const characters = Array.from(value);
      if (characters.length > CURSOR_VALUE_CHARS) {
        digest = valueDigest(value);
        value = characters.slice(0, CURSOR_VALUE_CHARS).join('');
      }
    }
    const fields: unknown[] = [scopeTag(scope), value, position.id, position.reverse ? 1 : 0];
    if (digest !== undefined) fields.push(digest);
    const payload = Buffer.from(JSON.stringify(fields)).toString('base64url');
    return `${payload}.${this.sign(payload)}`;
  }

  /** The position of a cursor this server issued for `scope`; anything else throws "Invalid cursor." */
  decode(token: string, scope: CursorScope): Position {
    const [payload, signature] = token.split('.');
    if (!payload || !signature) throw invalidCursor();
    const expected = Buffer.from(this.sign(payload));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw invalidCursor();
    const [tag, value, id, reverse, digest] = JSON.parse(Buffer.from(payload, 'base64url').toString()) as [
      string,
      SortValue,
      number,
      number,
      string | undefined,
    ];
    if (tag !== scopeTag(scope)) throw invalidCursor();
    return { value, id, reverse: reverse === 1, ...(digest === undefined ? {} : { digest }) };
  }

  private sign(payload: string): string {
    return createHmac('sha256', this.key).update(payload).digest('base64url').slice(0, 22);
  }
}

function scopeTag(scope: CursorScope): string {
  return createHash('sha256').update(`${scope.collection}\n${scope.ordering}`).digest('base64url').slice(0, 11);
}

function invalidCursor(): InvalidQuery {
  return new InvalidQuery({ cursor: ['Invalid cursor.'] }, 'The cursor was not issued by this server.');
}

/**
 * Reads `limit`, `ordering` and `cursor`. `orderings` maps public names (`title`) to columns;
 * each may be asked for ascending or, with `-`, descending. `collection` is the list's path, which
 * a cursor must have been issued for.
 */
export function parsePageRequest(
  query: Record<string, unknown>,
  orderings: Readonly<Record<string, string>>,
  defaultOrdering: string,
  codec: CursorCodec,
  collection: string,
): PageRequest {
  const errors: Record<string, string[]> = {};

  let limit = DEFAULT_LIMIT;
  if (query.limit !== undefined) {
    const text = String(query.limit);
    limit = /^\d{1,4}$/.test(text) ? Number(text) : Number.NaN;
    if (!(limit >= 1 && limit <= MAX_LIMIT)) errors.limit = [`Must be a whole number from 1 to ${MAX_LIMIT}.`];
  }

  const orderingName = query.ordering === undefined ? defaultOrdering : String(query.ordering);
  const descending = orderingName.startsWith('-');
  const orderingField = descending ? orderingName.slice(1) : orderingName;
  // Own names only: `?ordering=constructor` must not find Object.prototype's.
  const column = Object.hasOwn(orderings, orderingField) ? orderings[orderingField] : undefined;
  if (column === undefined) {
    const names = Object.keys(orderings).flatMap((name) => [name, `-${name}`]);
    errors.ordering = [`Must be one of: ${names.join(', ')}.`];
  }

  let position: Position | null = null;
  if (query.cursor !== undefined) {
    try {
      position = codec.decode(String(query.cursor), { collection, ordering: orderingName });
    } catch {
      errors.cursor = ['Invalid cursor.'];
    }
  }

  if (Object.keys(errors).length > 0) throw new InvalidQuery(errors, MESSAGES.invalidQuery);
  return { collection, limit, ordering: { name: orderingName, column: column!, descending }, position };
}

/** Replaces (or removes, with null) query parameters in a path, keeping the others. */
export function withQuery(path: string, query: Record<string, unknown>, changes: Record<string, string | null>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && !(key in changes)) params.set(key, String(value));
  }
  for (const [key, value] of Object.entries(changes)) if (value !== null) params.set(key, value);
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

/** RFC 8288 Link header for the page's neighbours. */
export function linkHeader(next: string | null, previous: string | null): string | null {
  const links: string[] = [];
  if (next) links.push(`<${next}>; rel="next"`);
  if (previous) links.push(`<${previous}>; rel="prev"`);
  return links.length ? links.join(', ') : null;
}
