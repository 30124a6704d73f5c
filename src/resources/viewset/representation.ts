// How the viewset shows rows (DRF's `to_representation`): a record's url and id, its shown fields,
// owner, reverse lists and timestamps. A page's relations are read in one query per relation, not
// one per row; a built-in collection adds what it shows beyond its fields with `hooks.represent`.

import { columnOf } from '../../db/schema-state.js';
import type { DynamicDb, Row } from '../../db/dynamic-tables.js';
import type { User } from '../../http/caller.js';
import { recordPath } from '../../http/paths.js';
import { loadReferenceLists, loadRelatedLists, type CollectionLookup } from '../relations.js';
import type { Resource } from '../resource.js';
import { withReferenceIds } from '../record-validation.js';
import { userCodeError } from '../user-code.js';

// Formatting dates was a tenth of a page's time (issue #6 profile); the same records are read
// again and again, so their timestamps' text is remembered (a bounded map, reset when full:
// every create adds a timestamp never read again, and a bigger map only grew the heap).
const isoText = new Map<number, string>();
function toIso(ms: unknown): string {
  const value = Number(ms);
  let text = isoText.get(value);
  if (text === undefined) {
    if (isoText.size >= 4096) isoText.clear();
    text = new Date(value).toISOString();
    isoText.set(value, text);
  }
  return text;
}

/** A collection's `represent` and `representOne`, reading through `db` unless given another executor. */
export function buildRepresentation(resource: Resource, db: DynamicDb, lookup: CollectionLookup) {
  const { hooks, nestedUnder } = resource;
  /** A record's own path (a nested one names its parent's id). */
  const urlOf = (row: Row): string =>
    nestedUnder ? `/api/v1/${nestedUnder.collection}/${Number(row[nestedUnder.column])}/${resource.name}/${row.id}/` : recordPath(resource.name, row.id);
  const fieldEntries = Object.entries(resource.fields);
  const shown = fieldEntries.filter(([, field]) => !field.writeOnly);
  const shownInList = shown.filter(([name]) => !resource.detailOnly.includes(name));
  const manyFields = fieldEntries.filter(([, field]) => field.type === 'references');
  const hasRelations = manyFields.length > 0 || Object.keys(resource.related).length > 0;
  const computed = Object.entries(resource.computed);
  const hasReferences = fieldEntries.some(([, field]) => field.type === 'reference');

  /** Sets each computed field of `out` from the record as shown (LOGIC.md §2), references' ids included. */
  function compute(row: Row, out: Record<string, unknown>): void {
    const record = hasReferences ? withReferenceIds(resource.fields, row, out) : out;
    for (const [name, field] of computed) {
      try {
        out[name] = field.compute(record);
      } catch (error) {
        throw userCodeError(resource.name, `computed field "${name}"`, error);
      }
      if (record !== out) record[name] = out[name];
    }
  }

  /**
   * Representations of rows, with relations loaded in one query per relation for the whole page.
   * Reverse lists hold what the `viewer` may read (a caller; null when anonymous); without one,
   * every record (events).
   */
  async function represent(rows: readonly Row[], executor: DynamicDb = db, detail = false, viewer?: User | null): Promise<Record<string, unknown>[]> {
    const ids = hasRelations ? rows.map((row) => row.id) : [];
    const lists = manyFields.length ? await loadReferenceLists(executor, resource, ids) : null;
    const related = Object.keys(resource.related).length ? await loadRelatedLists(executor, resource, ids, lookup, viewer) : null;
    const outs = rows.map((row) => {
      const out: Record<string, unknown> = { url: urlOf(row), id: row.id };
      for (const [name, field] of detail ? shown : shownInList) {
        if (field.type === 'references') out[name] = field.show(lists!.get(name)!.get(row.id) ?? []);
        else out[name] = field.show(row[columnOf(name, field)!]);
      }
      // In place after the fields (as CSV's columns), computed once the record is complete.
      for (const [name] of computed) out[name] = null;
      if (resource.owner) out.owner = recordPath('users', Number(row.owner_id));
      if (related) for (const [name, byRecord] of related) out[name] = byRecord.get(row.id) ?? [];
      if (resource.timestamps) {
        out.created_at = toIso(row.created_at);
        out.updated_at = toIso(row.updated_at);
      }
      if (computed.length) compute(row, out);
      return out;
    });
    if (hooks.represent) await hooks.represent(rows, outs, { detail, executor });
    return outs;
  }

  /** One row's representation (`detail`: with the fields only a record's page shows). */
  async function representOne(row: Row, executor: DynamicDb = db, detail = false, viewer?: User | null): Promise<Record<string, unknown>> {
    return (await represent([row], executor, detail, viewer))[0]!;
  }

  return { represent, representOne };
}
