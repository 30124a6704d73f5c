// The delete rules (RESOURCES.md §2): deleting a record applies the `onDelete` rule of every
// reference to it, in the delete's transaction. `protect` refuses with 409, `setNull` clears the
// references (an `updated` event each), `cascade` deletes the referring records through their own
// collection's viewset (a `deleted` event each). Set-based since issue 22: one query per rule and
// chunk of ids, each collection's reached records deleted in batches, children before parents.

import { sql } from 'kysely';
import type { Storage } from '../../db/database.js';
import type { DynamicDb, Row } from '../../db/dynamic-tables.js';
import { Conflict } from '../../http/errors.js';
import { recordPath } from '../../http/paths.js';
import { referrersOf } from '../relations.js';
import type { Change, Resource } from '../resource.js';
import type { Notify } from './writes.js';

/** A delete in progress with its cascade: every record it has reached, by `table:id`. */
export interface Cascade {
  readonly notify: Notify;
  readonly actor: Change['actor'];
  readonly scheduled: Map<string, CascadeEntry>;
}

/** Records of one collection a cascade deletes in one statement. */
export interface CascadeBatch {
  readonly resource: Resource;
  readonly entries: CascadeEntry[];
}

/** One record a cascade reached, with where it stands. */
export interface CascadeEntry {
  readonly row: Row;
  /** Its representation before the delete (its `deleted` event's record). */
  before: Record<string, unknown>;
  /** The batch that deletes it (another batch may take it over, see deleteBatch). */
  batch: CascadeBatch;
  /** The record whose delete reached it (`table:id`), null for the one deleted. */
  parent: string | null;
  announced: boolean;
  deleted: boolean;
}

/** Ids per `in (…)` list and records per cascade batch: well below both databases' bound parameters. */
const CASCADE_CHUNK = 500;

function chunksOf<T>(items: readonly T[]): T[][] {
  const chunks: T[][] = [];
  for (let start = 0; start < items.length; start += CASCADE_CHUNK) chunks.push(items.slice(start, start + CASCADE_CHUNK));
  return chunks;
}

function schedule(cascade: Cascade, batch: CascadeBatch, row: Row, before: Record<string, unknown>, parent: string | null): CascadeEntry {
  const entry: CascadeEntry = { row, before, batch, parent, announced: false, deleted: false };
  cascade.scheduled.set(`${batch.resource.table}:${row.id}`, entry);
  return entry;
}

/** Whether `key` is `from` or a record whose delete (transitively) reached `from`: a cycle. */
function isAncestor(cascade: Cascade, key: string, from: string): boolean {
  for (let at: string | null = from; at !== null; at = cascade.scheduled.get(at)?.parent ?? null) {
    if (at === key) return true;
  }
  return false;
}

/** What a cascade asks of another collection's viewset (a ViewSet is one). */
export interface CascadeTarget {
  represent(rows: readonly Row[], executor?: DynamicDb): Promise<Record<string, unknown>[]>;
  deleteBatch(trx: DynamicDb, batch: CascadeBatch, cascade: Cascade): Promise<void>;
  clearReferences(trx: DynamicDb, fieldName: string, rows: readonly Row[], cascade: Cascade): Promise<void>;
}

/** What the delete rules of one collection's viewset need. */
export interface DeleteRulesOptions {
  readonly storage: Storage;
  /** Every collection served: the ones whose references point here have rules. */
  readonly collections: readonly Resource[];
  /** The viewsets of the collections, by name (a cascade deletes through theirs). */
  readonly viewSets: ReadonlyMap<string, CascadeTarget>;
  /** This collection's representation, for the events' records. */
  readonly represent: (rows: readonly Row[], executor?: DynamicDb) => Promise<Record<string, unknown>[]>;
}

/** A collection's delete with its rules, and the steps another collection's cascade calls. */
export function buildDeleteRules(resource: Resource, options: DeleteRulesOptions) {
  const { storage, collections, viewSets, represent } = options;
  const table = resource.table;
  const label = resource.label.toLowerCase();

  /**
   * Deletes a record and applies every delete rule that points at it (RESOURCES.md §2): protect
   * refuses with 409, cascade deletes the referring records (each with its `deleted` event),
   * setNull clears the references (each record with an `updated` event). All in `trx`.
   */
  async function deleteRecord(trx: DynamicDb, row: Row, before: Record<string, unknown>, notify: Notify, actor: Change['actor']): Promise<void> {
    const cascade: Cascade = { notify, actor, scheduled: new Map() };
    const batch: CascadeBatch = { resource, entries: [] };
    batch.entries.push(schedule(cascade, batch, row, before, null));
    await deleteBatch(trx, batch, cascade);
  }

  /**
   * Deletes a batch of this collection's records a cascade reached, set-based (issue 22): one
   * query per delete rule and chunk of ids, children deleted first, batch by batch, then the
   * batch in one statement and its events written together. Each record still raises its own
   * event, after those of the records that referred to it.
   */
  async function deleteBatch(trx: DynamicDb, batch: CascadeBatch, cascade: Cascade): Promise<void> {
    const { notify, actor } = cascade;
    const mine = () => batch.entries.filter((entry) => entry.batch === batch);
    // Before the delete rules change what refers to them (a filter may read their references).
    for (const entry of mine()) {
      if (entry.announced) continue;
      entry.announced = true;
      await notify.before(trx, resource, entry.row.id);
    }
    const referrers = referrersOf(resource.name, collections);
    for (const referrer of referrers.filter((r) => r.onDelete === 'protect')) {
      const column = `${referrer.field}_id`;
      for (const ids of chunksOf(mine().map((entry) => entry.row.id))) {
        let query = trx
          .selectFrom(referrer.resource.table)
          .select([column, (eb) => eb.fn.countAll().as('n')])
          .where(column, 'in', ids)
          .groupBy(column)
          .orderBy(column);
        // A record that refers to itself does not protect itself.
        if (referrer.resource.name === resource.name) query = query.whereRef('id', '!=', column);
        const counted = (await query.executeTakeFirst()) as { n: number | string } | undefined;
        const protectedBy = Number(counted?.n ?? 0);
        if (protectedBy > 0) {
          throw new Conflict(
            `Cannot delete this ${label}: ${protectedBy} ${protectedBy === 1 ? 'record refers' : 'records refer'} to it. Delete or change ${protectedBy === 1 ? 'it' : 'them'} first.`,
          );
        }
      }
    }
    for (const referrer of referrers.filter((r) => r.onDelete !== 'protect')) {
      const other = viewSets.get(referrer.resource.name)!;
      const column = `${referrer.field}_id`;
      const referring: Row[] = [];
      for (const ids of chunksOf(mine().map((entry) => entry.row.id))) {
        let query = trx.selectFrom(referrer.resource.table).selectAll().where(column, 'in', ids);
        // A record that refers to itself goes with itself.
        if (referrer.resource.name === resource.name) query = query.whereRef('id', '!=', column);
        referring.push(...((await storage.lockForUpdate(query).orderBy('id').execute()) as Row[]));
      }
      if (referrer.onDelete === 'setNull') {
        await other.clearReferences(trx, referrer.field, referring, cascade);
        continue;
      }
      const children: CascadeBatch = { resource: referrer.resource, entries: [] };
      const fresh: Row[] = [];
      for (const child of referring) {
        const key = `${referrer.resource.table}:${child.id}`;
        const known = cascade.scheduled.get(key);
        const parentKey = `${table}:${Number(child[column])}`;
        if (known === undefined) {
          fresh.push(child);
        } else if (isAncestor(cascade, key, parentKey)) {
          // Records that cascade to each other cannot go in any order the foreign keys allow.
          throw new Conflict(
            `Cannot delete this ${label}: it and ${recordPath(referrer.resource.name, child.id)} refer to each other with onDelete 'cascade'. Clear one of the references first.`,
          );
        } else if (known.batch !== batch) {
          // Reached again, through a record deleted before the batch that first reached it (a
          // reply is a comment of the post and a reply to a comment): it goes first, with this batch.
          known.batch = children;
          known.parent = parentKey;
          children.entries.push(known);
        }
        // Else it is in this very batch, deleted by the same statement.
      }
      for (const rows of chunksOf(fresh)) {
        const befores = await other.represent(rows, trx);
        rows.forEach((child, index) => children.entries.push(schedule(cascade, children, child, befores[index]!, `${table}:${Number(child[column])}`)));
      }
      // Children in id order, deleted a chunk at a time.
      children.entries.sort((a, b) => a.row.id - b.row.id);
      const chunks = chunksOf(children.entries).map((entries): CascadeBatch => ({ resource: referrer.resource, entries }));
      for (const chunk of chunks) for (const entry of chunk.entries) if (entry.batch === children) entry.batch = chunk;
      for (const chunk of chunks) await other.deleteBatch(trx, chunk, cascade);
    }
    const deleting = mine();
    if (deleting.length === 0) return;
    await trx.deleteFrom(table).where('id', 'in', deleting.map((entry) => entry.row.id)).execute();
    for (const entry of deleting) entry.deleted = true;
    await notify.all(trx, deleting.map((entry) => ({ resource, action: 'deleted' as const, record: entry.before, actor, row: entry.row })));
  }

  /** A delete rule's setNull: clears `field` of `rows` (locked) in one statement per chunk; an `updated` event each. */
  async function clearReferences(trx: DynamicDb, fieldName: string, rows: readonly Row[], cascade: Cascade): Promise<void> {
    const column = `${fieldName}_id`;
    for (const chunk of chunksOf(rows)) {
      const befores = await represent(chunk, trx);
      for (const child of chunk) await cascade.notify.before(trx, resource, child.id);
      const now = Date.now();
      // Each record's updated_at moves forward, never back (as an update's does).
      const set: Record<string, unknown> = { [column]: null };
      if (resource.timestamps) set.updated_at = sql`case when updated_at > ${now} then updated_at else ${now} end`;
      const updated = (await trx
        .updateTable(table)
        .set(set)
        .where('id', 'in', chunk.map((child) => child.id))
        .returningAll()
        .execute()) as Row[];
      updated.sort((a, b) => a.id - b.id);
      const records = await represent(updated, trx);
      const changes: Change[] = records.map((record, index) => {
        const entry = cascade.scheduled.get(`${table}:${updated[index]!.id}`);
        // A record this cascade deletes later is shown, then, as it is now.
        if (entry && !entry.deleted) entry.before = record;
        const previous = chunk.find((child) => child.id === updated[index]!.id);
        return { resource, action: 'updated', record, changes: { [fieldName]: { from: befores[index]![fieldName] } }, actor: cascade.actor, row: updated[index]!, ...(previous ? { previous } : {}) };
      });
      await cascade.notify.all(trx, changes);
    }
  }

  return { deleteRecord, deleteBatch, clearReferences };
}
