import { createHmac, timingSafeEqual } from 'node:crypto';
import { InvalidQuery } from './errors.js';

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
  /** The ordering the cursor was issued for; a cursor does not carry over to another ordering. */
  ordering: string;
  value: SortValue;
  id: number;
  /** True for a `previous` cursor: read backwards from the position, then flip the page. */
  reverse: boolean;
}

export interface Ordering {
  /** The public name, e.g. `-created_at`. */
  name: string;
  column: string;
  descending: boolean;
}

export interface PageRequest {
  limit: number;
  ordering: Ordering;
  position: Position | null;
}

/** Signs and verifies cursors with a key derived from SECRET_KEY. */
export class CursorCodec {
  constructor(private readonly key: Buffer) {}

  encode(position: Position): string {
    const payload = Buffer.from(
      JSON.stringify([position.ordering, position.value, position.id, position.reverse ? 1 : 0]),
    ).toString('base64url');
    return `${payload}.${this.sign(payload)}`;
  }

  decode(token: string): Position {
    const [payload, signature] = token.split('.');
    if (!payload || !signature) throw invalidCursor();
    const expected = Buffer.from(this.sign(payload));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw invalidCursor();
    const [ordering, value, id, reverse] = JSON.parse(Buffer.from(payload, 'base64url').toString()) as [
      string,
      SortValue,
      number,
      number,
    ];
    return { ordering, value, id, reverse: reverse === 1 };
  }

  private sign(payload: string): string {
    return createHmac('sha256', this.key).update(payload).digest('base64url').slice(0, 22);
  }
}

function invalidCursor(): InvalidQuery {
  return new InvalidQuery({ cursor: ['Invalid cursor.'] }, 'The cursor was not issued by this server.');
}

/**
 * Reads `limit`, `ordering` and `cursor`. `orderings` maps public names (`title`) to columns;
 * each may be asked for ascending or, with `-`, descending.
 */
export function parsePageRequest(
  query: Record<string, unknown>,
  orderings: Readonly<Record<string, string>>,
  defaultOrdering: string,
  codec: CursorCodec,
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
      position = codec.decode(String(query.cursor));
      if (position.ordering !== orderingName) throw invalidCursor();
    } catch {
      errors.cursor = ['Invalid cursor.'];
    }
  }

  if (Object.keys(errors).length > 0) throw new InvalidQuery(errors, 'One or more query parameters are invalid.');
  return { limit, ordering: { name: orderingName, column: column!, descending }, position };
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
