// The types that make a declaration type-check in the user's editor (LOGIC.md §6): each
// `field.<type>()` knows the type of its value as the record's JSON shows it, so `validate`'s
// values, `ctx.record`, a validator's value and a computed field's record are typed from the
// declaration's fields; a misspelt option or field type is a type error. Types only: the runtime
// (`fields/index.ts`, `resource.ts`) is the same with or without them.

import type { Field, FieldValidator } from './fields/field.js';
import type { date, datetime } from './fields/dates.js';
import type { json } from './fields/json.js';
import type { boolean, decimal, integer } from './fields/numbers.js';
import type { reference, references } from './fields/relations.js';
import type { choice, email, string, text, url } from './fields/text.js';
import type { ValidateContext } from './record-validation.js';

declare const VALUE: unique symbol;

/** How a field appears in a record: stored, a reference (also `<name>_id`), or computed (never in `values`). */
export type FieldKind = 'stored' | 'reference' | 'computed';

/** A field whose value type is known: `V` as the record's JSON shows it (a type-only mark). */
export interface TypedField<V = unknown, Kind extends FieldKind = FieldKind> extends Field {
  readonly [VALUE]?: { readonly value: V; readonly kind: Kind };
}

/** Options with no name beyond `Allowed`'s: a misspelt option is a type error. */
type Exact<O, Allowed> = O & { [K in Exclude<keyof O, keyof Allowed>]: never };

/** A type's options with validators of its shown value. */
type OptionsOf<Declared, V> = Omit<NonNullable<Declared>, 'validators'> & { validators?: readonly FieldValidator<V>[] };

/** null when the field may read back null: nullable, or optional with no (non-null) default (RESOURCES.md §7). */
type Nullish<V, O> = O extends { nullable: true } ? V | null : O extends { required: false } ? (O extends { default: {} } ? V : V | null) : V;

/** One typed constructor: `options` checked for unknown names, the value's type from them. */
type Typed<Declared, V, Kind extends FieldKind = 'stored'> = <const O extends OptionsOf<Declared, V>>(options?: Exact<O, OptionsOf<Declared, V>>) => TypedField<Nullish<V, O>, Kind>;
/** The same for a type whose options are required (a string's maxLength). */
type TypedRequired<Declared, V> = <const O extends OptionsOf<Declared, V>>(options: Exact<O, OptionsOf<Declared, V>>) => TypedField<Nullish<V, O>, 'stored'>;
type First<F extends (...args: never[]) => unknown> = Parameters<F>[0];

/** The `field` object, typed (LOGIC.md §6). */
export interface FieldConstructors {
  string: TypedRequired<First<typeof string>, string>;
  text: Typed<First<typeof text>, string>;
  email: Typed<First<typeof email>, string>;
  url: Typed<First<typeof url>, string>;
  /** One of `values`; the value's type is their union. */
  choice<const C extends readonly string[], const O extends OptionsOf<Parameters<typeof choice>[1], C[number]>>(
    values: C,
    options?: Exact<O, OptionsOf<Parameters<typeof choice>[1], C[number]>>,
  ): TypedField<Nullish<C[number], O>, 'stored'>;
  integer: Typed<First<typeof integer>, number>;
  /** Shown as a string with its decimal places (`"12.50"`). */
  decimal: TypedRequired<First<typeof decimal>, string>;
  boolean: Typed<First<typeof boolean>, boolean>;
  /** `YYYY-MM-DD`. */
  date: Typed<First<typeof date>, string>;
  /** RFC 3339, UTC. */
  datetime: Typed<First<typeof datetime>, string>;
  json: Typed<First<typeof json>, JsonValue>;
  /** The record's path; `values` and records also hold `<name>_id`. */
  reference<const O extends OptionsOf<Parameters<typeof reference>[1], string>>(
    collection: string,
    options?: Exact<O, OptionsOf<Parameters<typeof reference>[1], string>>,
  ): TypedField<Nullish<string, O>, 'reference'>;
  /** The records' paths, in id order. */
  references<const O extends OptionsOf<Parameters<typeof references>[1], string[]>>(
    collection: string,
    options?: Exact<O, OptionsOf<Parameters<typeof references>[1], string[]>>,
  ): TypedField<string[], 'stored'>;
  /**
   * A read-only member computed from the record each time it is shown (LOGIC.md §2), typed as
   * `type`. The record cannot be typed from the fields it is declared among (TypeScript infers
   * those from this very call); annotate it to have it checked: `(r: StoredRecordOf<typeof fields>) => …`.
   */
  computed<V, Stored = LooseRecord>(type: TypedField<V, 'stored'>, compute: (record: Stored) => V): TypedField<V, 'computed'>;
}

/**
 * A computed field's record when not annotated: any member may be read. `any`, not `unknown`, so
 * that `(r) => monthsBetween(r.started_on, r.finished_on)` type-checks as LOGIC.md writes it.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type LooseRecord = Readonly<Record<string, any>>;

/** A JSON value, as a `json` field holds it. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

type ValueOf<F> = F extends TypedField<infer V, FieldKind> ? V : unknown;
type KindOf<F> = F extends TypedField<unknown, infer Kind> ? Kind : 'stored';
type Flatten<T> = { [K in keyof T]: T[K] } & {};

/** The declared fields that are stored: what `validate` sees. */
export type RecordValues<F> = Flatten<
  { -readonly [K in keyof F as KindOf<F[K]> extends 'computed' ? never : K]: ValueOf<F[K]> } & {
    -readonly [K in keyof F as KindOf<F[K]> extends 'reference' ? `${K & string}_id` : never]: null extends ValueOf<F[K]> ? number | null : number;
  }
>;

/** A record as the API shows it (plus `<reference>_id`), as user code gets it: `ctx.record`, hooks' records. */
export type StoredRecordOf<F> = Flatten<
  RecordValues<F> & { -readonly [K in keyof F as KindOf<F[K]> extends 'computed' ? K : never]: ValueOf<F[K]> } & {
    url: string;
    id: number;
    /** With `owner: true`. */
    owner?: string;
    /** Unless `timestamps: false`. */
    created_at?: string;
    updated_at?: string;
  }
>;

/** `validate`'s second argument, typed from the fields. */
export type TypedValidateContext<F> = ValidateContext<StoredRecordOf<F>>;
