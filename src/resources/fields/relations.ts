// The relation field types: `reference` (one record, a column `<name>_id`) and `references` (a
// list, a join table), written and shown as record paths (DRF's HyperlinkedRelatedField). Here a
// path is only read; whether its record exists is asked for the whole request in
// `../relations.ts`.

import type { OnDelete } from '../../db/schema-state.js';
import { MESSAGES } from '../../http/messages.js';
import { recordPath } from '../../http/paths.js';
import { ANY_CONTEXT, checkLength, fail, makeField, ok, type CommonOptions, type Field, type ParseContext } from './field.js';

/**
 * What only these types say (DRF's HyperlinkedRelatedField and ListField messages); shared ones
 * are MESSAGES. Exported for `doesNotExist`, which `../relations.ts` says once it has looked.
 */
export const messages = {
  incorrectType: (received: string) => `Incorrect type. Expected URL string, received ${received}.`,
  noMatch: 'Invalid hyperlink - No URL match.',
  incorrectMatch: 'Invalid hyperlink - Incorrect URL match.',
  doesNotExist: 'Invalid hyperlink - Object does not exist.',
  notAList: (received: string) => `Expected a list of items but got type "${received}".`,
  maxItems: (limit: number) => `Ensure this field has no more than ${limit} elements.`,
  duplicate: (path: string) => `Duplicate reference ${path}.`,
};

/** Python's type names, as DRF's "received int" messages use them. */
function pythonType(value: unknown): string {
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'float';
  if (typeof value === 'boolean') return 'bool';
  if (typeof value === 'string') return 'str';
  if (Array.isArray(value)) return 'list';
  if (value === null) return 'NoneType';
  return 'dict';
}

const PATH = /^\/api\/v1\/([a-z][a-z0-9_]*)\/([1-9]\d{0,15})\/$/;

/**
 * Reads a record reference (DRF's HyperlinkedRelatedField): a path, or an absolute URL under
 * PUBLIC_URL. Returns the id, or DRF's message. Whether the record exists is asked later, for
 * every reference of the request in one query per collection (`../relations.ts`).
 */
export function readReference(value: unknown, target: string, context: ParseContext): { id: number } | { error: string } {
  if (typeof value !== 'string') return { error: messages.incorrectType(pythonType(value)) };
  let path = value.trim();
  if (/^[a-z][a-z0-9+.-]*:/i.test(path)) {
    if (!context.publicUrl || !path.startsWith(`${context.publicUrl}/`)) return { error: messages.noMatch };
    path = path.slice(context.publicUrl.length);
  }
  const match = PATH.exec(path);
  if (!match || !Number.isSafeInteger(Number(match[2]))) return { error: messages.noMatch };
  if (match[1] !== target) {
    return { error: context.collections.has(match[1]!) ? messages.incorrectMatch : messages.noMatch };
  }
  return { id: Number(match[2]) };
}

const ON_DELETE: readonly OnDelete[] = ['protect', 'cascade', 'setNull'];

function targetName(collection: unknown): string {
  if (typeof collection !== 'string' || !/^[a-z][a-z0-9_]*$/.test(collection)) {
    throw new TypeError('the target must be a collection name ([a-z][a-z0-9_]*)');
  }
  return collection;
}

/** A reference to one record of `collection`, written and shown as its path. */
export function reference(collection: string, options: CommonOptions<string> & { onDelete?: OnDelete } = {}): Field {
  const to = targetName(collection);
  const onDelete = options.onDelete ?? 'protect';
  if (!ON_DELETE.includes(onDelete)) throw new TypeError(`option onDelete must be one of ${ON_DELETE.join(', ')}`);
  if (onDelete === 'setNull' && options.nullable !== true) throw new TypeError("onDelete 'setNull' needs nullable: true");
  return makeField(options as Record<string, unknown>, {
    type: 'reference',
    own: ['onDelete'],
    parse(value, context) {
      // A default path is checked for its shape only: collections are known once all are loaded.
      const found = readReference(value, to, context === ANY_CONTEXT ? { ...context, collections: new Set([to]), publicUrl: '' } : context);
      return 'error' in found ? fail(found.error) : ok(found.id);
    },
    show: (stored) => recordPath(to, Number(stored)),
    schema: { type: 'string', format: 'uri-reference', pattern: `^/api/v1/${to}/[1-9][0-9]*/$`, description: `The path of a record in ${to}.` },
    metadataType: 'field',
    metadata: { related_collection: to, on_delete: onDelete },
    state: { to, onDelete },
    to,
    onDelete,
  });
}

/**
 * The most references one list may hold: the default `maxItems`, and the most a declaration may
 * ask for. A list's ids are bound as SQL parameters (the existence check, the join-table insert:
 * two per item), and SQLite takes at most 32,766 of them in one statement, PostgreSQL 65,535; a
 * longer list was a 500 (issue 22 item 8). A thousand paths are also what a page of records can
 * show without each record weighing tens of kilobytes.
 */
export const MAX_REFERENCES = 1000;
const MAX_DECLARED_REFERENCES = 10_000;

/** References to records of `collection` (a join table): a list of paths, no duplicates, in id order. */
export function references(collection: string, options: Omit<CommonOptions<string[]>, 'nullable' | 'unique'> & { maxItems?: number } = {}): Field {
  const to = targetName(collection);
  checkLength('maxItems', options.maxItems, false);
  if (options.maxItems !== undefined && options.maxItems > MAX_DECLARED_REFERENCES) {
    throw new TypeError(`option maxItems must be at most ${MAX_DECLARED_REFERENCES}`);
  }
  const maxItems = options.maxItems ?? MAX_REFERENCES;
  return makeField({ required: false, ...options } as Record<string, unknown>, {
    type: 'references',
    own: ['maxItems'],
    parse(value, context) {
      let items = value;
      // A form sends one string: a JSON list, or paths separated by commas or spaces.
      if (context.form && typeof value === 'string') {
        const trimmed = value.trim();
        try {
          items = trimmed.startsWith('[') ? (JSON.parse(trimmed) as unknown) : trimmed === '' ? [] : trimmed.split(/[\s,]+/);
        } catch {
          return fail(MESSAGES.invalidJson);
        }
      }
      if (!Array.isArray(items)) return fail(messages.notAList(pythonType(items)));
      // The length first: a list of 40,000 items is refused without reading one (issue 22 item 8).
      if (items.length > maxItems) return fail(messages.maxItems(maxItems));
      const errors: string[] = [];
      const ids = new Set<number>();
      for (const item of items) {
        const found = readReference(item, to, context);
        if ('error' in found) errors.push(found.error);
        else if (ids.has(found.id)) errors.push(messages.duplicate(recordPath(to, found.id)));
        else ids.add(found.id);
      }
      return errors.length ? { ok: false, errors } : ok([...ids].sort((a, b) => a - b));
    },
    show: (stored) => (stored as number[]).map((id) => recordPath(to, id)),
    schema: {
      type: 'array',
      uniqueItems: true,
      maxItems,
      items: { type: 'string', format: 'uri-reference', pattern: `^/api/v1/${to}/[1-9][0-9]*/$` },
      description: `Paths of records in ${to}, in id order.`,
    },
    metadataType: 'field',
    metadata: { many: true, related_collection: to, max_items: maxItems },
    state: { to, null: true, unique: false },
    to,
    maxItems,
  });
}
