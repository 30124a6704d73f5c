// `?fields=` (REQUESTS.md §3, JSON:API's sparse fieldsets): only the named members of each record,
// `url` always kept, `expand.NAME` keeping that expansion. It picks from what the representation
// already holds, so a member the caller may not see (a field rule) stays absent whatever is named.

import { InvalidQuery } from '../../http/errors.js';
import { MESSAGES } from '../../http/messages.js';
import { representationFields, type Resource } from '../resource.js';
import { relationsOf } from './expansion.js';

/** The members named, and the expansions kept (`expand.author` → `author`). */
export interface FieldSelection {
  readonly members: ReadonlySet<string>;
  readonly expansions: ReadonlySet<string>;
}

/** Every name `?fields=` accepts on a collection (OpenAPI's enum too). */
export function fieldNamesOf(resource: Resource): string[] {
  const members = [...representationFields(resource), ...resource.detailOnly, ...Object.keys(resource.callerMembers)];
  return [...new Set(members), ...[...relationsOf(resource).keys()].map((name) => `expand.${name}`)];
}

/** Reads `?fields=`: null when absent or empty; a name the collection does not show is a 400 naming `fields`. */
export function parseFields(resource: Resource, value: unknown): FieldSelection | null {
  if (value === undefined) return null;
  const names = String(value).split(',').filter((name) => name !== '');
  if (names.length === 0) return null;
  const known = new Set(fieldNamesOf(resource));
  const unknown = names.find((name) => !known.has(name));
  if (unknown !== undefined) throw new InvalidQuery({ fields: [`"${unknown}" is not a field of ${resource.name}.`] }, MESSAGES.invalidQuery);
  const members = new Set(['url', ...names.filter((name) => !name.startsWith('expand.'))]);
  const expansions = new Set(names.filter((name) => name.startsWith('expand.')).map((name) => name.slice('expand.'.length)));
  return { members, expansions };
}

/** A copy of `record` with only the selected members, in the representation's order. */
export function pickFields(record: Record<string, unknown>, selection: FieldSelection): Record<string, unknown> {
  const picked: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(record)) {
    if (selection.members.has(name)) picked[name] = value;
  }
  const expand = record.expand as Record<string, unknown> | undefined;
  if (expand && selection.expansions.size) {
    const kept = Object.entries(expand).filter(([name]) => selection.expansions.has(name));
    if (kept.length) picked.expand = Object.fromEntries(kept);
  }
  return picked;
}

/** The CSV columns of a selection: the view's, less those not named. */
export function pickColumns(columns: readonly string[], selection: FieldSelection): string[] {
  return columns.filter((column) => selection.members.has(column));
}
