// The `field` object users declare fields with (`field.string({ maxLength: 100 })`, RESOURCES.md §2),
// exported by the package. It gathers the constructors of every field type (one file per family
// beside this one) and turns a bad declaration into an InvalidField, reported later with the
// collection and field names. This is the folder's entry point, not a re-export: import the
// types and helpers from `field.ts`.

import { FIELD_TYPES } from '../../db/schema-state.js';
import type { FieldConstructors } from '../declaration-types.js';
import { FIELD, type Field } from './field.js';
import { computed } from './computed.js';
import { date, datetime } from './dates.js';
import { json } from './json.js';
import { boolean, decimal, integer } from './numbers.js';
import { reference, references } from './relations.js';
import { choice, email, string, text, url } from './text.js';

/** Every field type's constructor, by the name users call it with. */
const constructors = { string, text, integer, decimal, boolean, date, datetime, email, url, choice, json, reference, references, computed } as const;

/** Wraps a constructor so that a bad option makes an InvalidField instead of throwing. */
function guarded<Args extends unknown[]>(type: string, make: (...args: Args) => Field): (...args: Args) => Field {
  return (...args) => {
    try {
      return make(...args);
    } catch (error) {
      // Every throw here is a bad option (a TypeError, or a SyntaxError from a bad pattern).
      return { [FIELD]: true, invalid: `field.${type}: ${error instanceof Error ? error.message : String(error)}` } as unknown as Field;
    }
  };
}

/** The field constructors users declare with (RESOURCES.md §2), typed by their values (LOGIC.md §6). */
export const field: FieldConstructors = new Proxy(
  Object.fromEntries(Object.entries(constructors).map(([type, make]) => [type, guarded(type, make as (...args: unknown[]) => Field)])) as typeof constructors,
  {
    // `field.strnig(...)` in a TypeScript file is not type-checked by the loader: name it.
    get: (target, type) =>
      typeof type === 'string' && !(type in target)
        ? () => ({ [FIELD]: true, invalid: `unknown field type "field.${type}" (use ${FIELD_TYPES.map((t) => `field.${t}`).join(', ')})` })
        : target[type as keyof typeof constructors],
  },
) as unknown as FieldConstructors;

