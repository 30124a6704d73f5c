// Types for queries over tables chosen at run time: a declared collection's table is named by its
// declaration, which Kysely's static types cannot name. Everything that reads or writes declared
// collections (the viewset, filters, relations, the webhook outbox) shares these.

import type { Expression, ExpressionBuilder, Kysely, SqlBool } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the table is known only at run time
export type DynamicDb = Kysely<any>;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the table is known only at run time
export type AnyBuilder = ExpressionBuilder<any, any>;

/** A row of a declared collection's table. */
export type Row = Record<string, unknown> & { id: number };

/** A `WHERE` condition over a declared collection's table (a list filter, a scope). */
export type Condition = (eb: AnyBuilder) => Expression<SqlBool>;
