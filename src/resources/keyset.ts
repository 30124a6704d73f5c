import { sql, type SelectQueryBuilder, type SqlBool } from 'kysely';
import { linkHeader, valueDigest, withQuery, type CursorCodec, type PageRequest, type SortValue } from '../http/pagination.js';
import type { ApiResponse } from '../http/view.js';

/** A page of rows and the paths of its neighbours. */
export interface KeysetPage<Row> {
  rows: Row[];
  next: string | null;
  previous: string | null;
}

/**
 * Reads one page of a keyset walk (DRF's CursorPagination): rows after (or, for a `previous`
 * cursor, before) the cursor's position in the order (ordering column, id), one extra row to
 * learn whether another page follows. Every collection uses it (API.md §6 "Collections").
 */
export async function fetchKeysetPage<Row extends { id: number }>(
  // Kysely cannot type a query over a table chosen at run time; callers pass a typed query.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  base: SelectQueryBuilder<any, any, any>,
  page: PageRequest,
  link: { path: string; query: Readonly<Record<string, string>>; cursors: CursorCodec },
  /** For a nullable ordering column: a value below every real one that NULL sorts as. */
  nullsAs?: SortValue,
): Promise<KeysetPage<Row>> {
  const { ordering, position, limit } = page;
  // NULL compares as unknown, which would drop rows from every page: a nullable column is
  // walked as coalesce(column, a value below all others), so nulls come first ascending.
  const key = nullsAs === undefined ? ordering.column : sql`coalesce(${sql.ref(ordering.column)}, ${nullsAs})`;
  // Walking back (a `previous` cursor) reads the other way from the position, then flips.
  const reverse = position?.reverse ?? false;
  const descending = ordering.descending !== reverse;
  const direction = descending ? 'desc' : 'asc';
  const comparison = descending ? '<' : '>';
  const keyExpression = typeof key === 'string' ? sql.ref(key) : key;
  let query = base;
  if (position) {
    const { id } = position;
    let { value } = position;
    // A long value's cursor carries only its first CURSOR_VALUE_CHARS characters and a digest of
    // the whole (issue 22 item 11: a 15,000-character title made a 20 KB Link header). The whole
    // value is read back from the row the cursor stands at, the last one shown; while that row
    // keeps its value the position is exact, as for any other cursor.
    let fallback: string | null = null;
    if (position.digest !== undefined) {
      const anchor = (await base
        .clearWhere()
        .clearSelect()
        .select(sql`${keyExpression}`.as('value'))
        .where('id', '=', id)
        .executeTakeFirst()) as { value: unknown } | undefined;
      if (typeof anchor?.value === 'string' && valueDigest(anchor.value) === position.digest) value = anchor.value;
      else fallback = String(value);
    }
    if (fallback !== null) {
      // That row was deleted or changed since: the whole value is lost, its prefix p is known.
      // Every value after it is ≥ p, and every value before it is < p or starts with p (in the C
      // collation; natural-language ones order a prefix before its extensions too), so the page
      // starts at p: rows that share p may be shown again, none is skipped.
      const prefix = fallback;
      query = query.where(
        comparison === '>'
          ? sql<SqlBool>`(${keyExpression}, ${sql.ref('id')}) > (${prefix}, 0)`
          : sql<SqlBool>`((${keyExpression}, ${sql.ref('id')}) < (${prefix}, 0) or substr(${keyExpression}, 1, ${Array.from(prefix).length}) = ${prefix})`,
      );
    } else {
      // A row-value comparison, not `key > v OR (key = v AND id > i)`: SQLite cannot turn that OR
      // into an index range and scanned from the start, so the last page of 1,000,000 records cost
      // 160× the first (issue #13, bench:growth); `(key, id) > (v, i)` is a range on the (key, id)
      // index on both databases.
      query =
        ordering.column === 'id'
          ? query.where('id', comparison, id)
          : query.where(sql<SqlBool>`(${keyExpression}, ${sql.ref('id')}) ${sql.raw(comparison)} (${value}, ${id})`);
    }
  }
  query = query.orderBy(key, direction);
  if (ordering.column !== 'id') query = query.orderBy('id', direction);
  const fetched = (await query.limit(limit + 1).execute()) as Row[];
  const more = fetched.length > limit;
  const rows = fetched.slice(0, limit);
  if (reverse) rows.reverse();

  const cursorAt = (row: Row, back: boolean) =>
    link.cursors.encode(
      { value: ((row as Record<string, unknown>)[ordering.column] ?? nullsAs) as SortValue, id: row.id, reverse: back },
      { collection: page.collection, ordering: ordering.name },
    );
  const first = rows[0];
  const last = rows[rows.length - 1];
  // Forward: a next page exists if we read past the limit; a previous one if we started from a
  // cursor. Backward: the reverse.
  const hasNext = reverse ? position !== null : more;
  const hasPrevious = reverse ? more : position !== null;
  return {
    rows,
    next: hasNext && last ? withQuery(link.path, link.query, { cursor: cursorAt(last, false) }) : null,
    previous: hasPrevious && first ? withQuery(link.path, link.query, { cursor: cursorAt(first, true) }) : null,
  };
}

/** The list envelope every collection answers with (API.md §2, §6): body and `Link` header. */
export function pageResponse<Row>(page: KeysetPage<Row>, results: readonly unknown[]): ApiResponse {
  const link = linkHeader(page.next, page.previous);
  return { body: { next: page.next, previous: page.previous, results }, ...(link ? { headers: { link } } : {}) };
}
