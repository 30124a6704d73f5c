// Computed fields (LOGIC.md §2, DRF's SerializerMethodField): a read-only member whose value a
// function of the record gives each time the record is shown. It is described as the field type
// it is declared with (OPTIONS, OpenAPI, the event catalog, CSV) but has no column: the viewset
// never reads it from input, stores it, filters or orders by it, and migrations never see it.

import { isField, isInvalidField, type Field } from './field.js';

/** The record a computed field's function sees: the record as the API shows it, plus each reference's `<name>_id`. */
export type ComputeRecord = Readonly<Record<string, unknown>>;

/** A computed field: its type's description, read-only, and `compute`. */
export interface ComputedField extends Field {
  /** The shown value for a record (synchronous: it runs for every record shown). */
  readonly compute: (record: ComputeRecord) => unknown;
}

/** Whether a declared field is computed. */
export function isComputed(value: Field): value is ComputedField {
  return typeof (value as Partial<ComputedField>).compute === 'function';
}

// Options that speak of a stored or written value, meaningless for a value nobody writes.
const STORED_OPTIONS = ['required', 'default', 'unique', 'writeOnly', 'validators'];

/** `field.computed(field.integer(), (record) => …)`: a read-only member typed as `type`. */
export function computed(type: Field, compute: (record: ComputeRecord) => unknown): Field {
  if (!isField(type)) throw new TypeError('the first argument is the type of the value, e.g. field.integer()');
  if (isInvalidField(type)) throw new TypeError((type as unknown as { invalid: string }).invalid);
  if (isComputed(type)) throw new TypeError('the type of a computed field cannot itself be computed');
  if (type.type === 'reference' || type.type === 'references') throw new TypeError('a computed value cannot be a relation (reference, references)');
  if (typeof compute !== 'function') throw new TypeError('the second argument is a function of the record');
  for (const option of STORED_OPTIONS) {
    if (type.options[option] !== undefined) throw new TypeError(`option ${option} means nothing for a computed value (nothing stores or writes it)`);
  }
  const schema = { ...type.schema(), readOnly: true };
  const made: ComputedField = { ...type, required: false, readOnly: true, hasDefault: false, defaultValue: null, schema: () => schema, compute };
  return made;
}
