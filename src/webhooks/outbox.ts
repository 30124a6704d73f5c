import { randomUUID } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import { announceDeliveries } from '../db/delivery-queue.js';
import { sendAhead } from '../db/pipelining.js';
import type { Storage } from '../db/database.js';
import type { Database } from '../db/schema.js';
import type { DynamicDb } from '../db/dynamic-tables.js';
import type { User } from '../http/caller.js';
import { fieldsAreShared, hiddenFieldsOf } from '../resources/access/field-rules.js';
import type { QueryFilter } from '../resources/filters.js';
import type { Change, ChangeListener, PendingChange } from '../resources/resource.js';
import { LOGGED_COLUMNS, logDeliveriesCreated } from './delivery-changes.js';
import { ChangeBodies, eventPayload, type Actor, type FilterVerdict, type Sight } from './events.js';
import { WebhookAccess, type Owners } from './webhook-access.js';
import { WebhookFilters } from './webhook-filters.js';

/**
 * The first stage of the webhook pipeline (STYLE.md 7): a change and its deliveries are written
 * in one transaction (API.md §4 "No lost events"), one delivery per matching active webhook,
 * each with its own guid. The dispatcher picks them up from the table: the outbox.
 */
type Executor = Transaction<Database> | Kysely<Database>;

export interface OutboxOptions {
  readonly storage: Storage;
  readonly publicUrl: string;
  /** Called after commit to wake this process's dispatcher, if it runs one. */
  readonly wake: () => void;
  /** `repository.id` per collection (`events.ts` assignRepositoryIds). */
  readonly repositoryIds: ReadonlyMap<string, number>;
  /** The list filters of a collection (its viewset's), to read webhook filters with. */
  readonly filtersOf: (collection: string) => readonly QueryFilter[];
}

export interface NewEvent {
  readonly webhookId: number;
  readonly event: string;
  readonly action: string | null;
  readonly body: string;
  /** `<collection>:<id>` of the record the event is about (per-record ordering, issue 14). */
  readonly recordKey?: string | null;
}

/**
 * Rows one INSERT writes: 12 values a row stay far below SQLite's 32,766 bound variables and
 * PostgreSQL's 65,535 bind parameters, however many webhooks a change has (issue 22).
 */
export const INSERT_BATCH = 1_000;

/** Writes deliveries within the caller's transaction, logs them for their streams, and announces them on commit. */
export async function enqueueDeliveries(storage: Storage, trx: Executor, events: readonly NewEvent[]): Promise<void> {
  if (events.length === 0) return;
  const now = Date.now();
  for (let start = 0; start < events.length; start += INSERT_BATCH) await insertDeliveries(trx, events.slice(start, start + INSERT_BATCH), now);
  await announceDeliveries(storage, trx);
}

async function insertDeliveries(trx: Executor, events: readonly NewEvent[], now: number): Promise<void> {
  const rows = await trx
    .insertInto('deliveries')
    .values(
      events.map((event) => ({
        guid: randomUUID(),
        webhook_id: event.webhookId,
        event: event.event,
        action: event.action,
        payload: event.body,
        status: 'pending',
        attempts: 0,
        next_attempt_at: now,
        lease_until: null,
        redelivery: 0,
        created_at: now,
        record_key: event.recordKey ?? null,
      })),
    )
    .returning(LOGGED_COLUMNS)
    .execute();
  await logDeliveriesCreated(trx, rows);
}

/** Whether a webhook's `events` list (JSON text) asks for this event. */
export function subscribes(events: string, event: string): boolean {
  const list = JSON.parse(events) as string[];
  return list.includes('*') || list.includes(event);
}

/** The owner of a change's record, looked up once per batch (`owners`). */
async function ownerOf(trx: Executor, change: Change, owners: Map<number, Promise<Actor>>): Promise<Actor> {
  const path = change.record.owner;
  const ownerId = typeof path === 'string' ? Number(/\/(\d+)\/$/.exec(path)?.[1]) : change.actor.id;
  if (ownerId === change.actor.id) return { login: change.actor.username, id: change.actor.id };
  let owner = owners.get(ownerId);
  if (owner === undefined) owners.set(ownerId, (owner = lookUpOwner(trx, ownerId, change)));
  return owner;
}

async function lookUpOwner(trx: Executor, ownerId: number, change: Change): Promise<Actor> {
  const row = await trx.selectFrom('users').select(['id', 'username']).where('id', '=', ownerId).executeTakeFirst();
  return row ? { login: row.username, id: row.id } : { login: change.actor.username, id: change.actor.id };
}

interface ActiveWebhook {
  id: number;
  owner_id: number;
  events: string;
  filter: string | null;
}

/** A collection read by `*`: every owner sees every record, before and after. */
const IN_SIGHT: Sight = { before: true, after: true };
/** An owner who is no user (any more) reads nothing. */
const OUT_OF_SIGHT: Sight = { before: false, after: false };

/** A webhook owner, with roles as read in the change's transaction, and what they may read of the record. */
interface OwnerSight extends Sight {
  readonly user: User;
}

/** What the outbox learns of a record before it changes (the viewset's `beforeChange` call). */
interface Before {
  /** Each filtered webhook's filter verdict, by webhook id. */
  readonly filters: ReadonlyMap<number, boolean>;
  /** The subscribed webhooks' owners with their roles at that moment; null when the read rule is `*`. */
  readonly owners: Owners | null;
  /** Those of `owners` who may read the record. */
  readonly readers: ReadonlySet<number>;
  /** The fields the record hides from each owner before the change (a delete's bodies are judged so); null without field read rules. */
  readonly hidden: ReadonlyMap<number, ReadonlySet<string>> | null;
}

/**
 * The change listener resources with an `event` notify: their changes become deliveries, one per
 * subscribed webhook whose owner may read the record (ACCESS.md §4) and whose filter (if any) the
 * record matches, before or after the change.
 */
export function outboxListener({ storage, publicUrl, wake, repositoryIds, filtersOf }: OutboxOptions): ChangeListener {
  // Asked for every change, so compiled once, and once per transaction: on SQLite the
  // transaction holds the write lock, so no webhook can change under it, and a group commit
  // (db/group-commit.ts) runs many changes in one (issue #6 profile).
  const activeWebhooksQuery = storage.db.selectFrom('webhooks').select(['id', 'owner_id', 'events', 'filter']).where('active', '=', 1).compile();
  const webhooksOf = new WeakMap<Executor, Promise<ActiveWebhook[]>>();
  // Transactions in which the list changed: a webhook written (a batch's, a group commit's other
  // request's) or a user deleted with theirs. The list is read afresh for every change after it,
  // so a later change is sent to a webhook created before it and never to one deleted, and a
  // write rolled back to its savepoint leaves nothing of its webhooks behind in a cached list.
  const listChangedIn = new WeakSet<Executor>();
  const webhooks = (trx: Executor): Promise<ActiveWebhook[]> => {
    let lookup = webhooksOf.get(trx);
    if (lookup === undefined) {
      // Sent ahead (db/pipelining.ts): asked for before a create's insert (`prepare`), it shares its round trip.
      lookup = sendAhead(trx, activeWebhooksQuery).then(({ rows }) => rows);
      // Awaited when a change is told; a write that fails before then must not leave it unhandled.
      lookup.catch(() => {});
      if (!listChangedIn.has(trx)) webhooksOf.set(trx, lookup);
    }
    return lookup;
  };
  const noteListChange = (trx: Executor, change: Change): void => {
    if (!changesWebhookList(change)) return;
    listChangedIn.add(trx);
    webhooksOf.delete(trx);
  };
  const filters = new WebhookFilters(storage.db as unknown as DynamicDb, filtersOf);
  const access = new WebhookAccess(storage.db as unknown as DynamicDb);
  // What the outbox made of each record before it changed, per transaction.
  const beforeOf = new WeakMap<Executor, Map<string, Before>>();

  async function rememberBefore(trx: Executor, { resource, id }: PendingChange): Promise<void> {
    const event = resource.event;
    if (!event) return;
    const subscribed = (await webhooks(trx)).filter((webhook) => subscribes(webhook.events, event));
    if (subscribed.length === 0) return;
    const owners = await access.owners(trx, resource, subscribed.map((webhook) => webhook.owner_id));
    const filtered = subscribed.filter((webhook) => webhook.filter !== null).map((webhook) => withOwner(webhook, owners));
    const verdicts = filtered.length ? await filters.verdicts(trx, resource, event, id, filtered) : new Map<number, boolean>();
    const readers = owners ? await access.readers(trx, resource, id, owners) : new Set<number>();
    // Judged before an update too: which action comes is not known here, and a delete's bodies need it.
    const hidden = owners && !fieldsAreShared(resource) ? await hiddenFieldsOf(resource, [...owners.values()], trx as unknown as DynamicDb, id) : null;
    let byRecord = beforeOf.get(trx);
    if (!byRecord) beforeOf.set(trx, (byRecord = new Map()));
    byRecord.set(recordKey(resource.name, id), { filters: verdicts, owners, readers, hidden });
  }

  /**
   * Whether each owner may read the record before and after the change, in the change's
   * transaction; null for a collection read by `*` (ACCESS.md §7: it costs nothing). An update
   * judges after the change with the roles read before it, in the same transaction.
   */
  async function sightOf(trx: Executor, change: Change, id: number, before: Before | undefined, owners: Owners | null): Promise<Map<number, OwnerSight> | null> {
    if (owners === null) return null;
    // Without a before (never for the viewset's updates and deletes): not readable before, the safe side.
    const readersBefore = before?.readers ?? new Set<number>();
    const readersAfter = change.action === 'deleted' ? new Set<number>() : await access.readers(trx, change.resource, id, owners);
    return new Map([...owners.values()].map((user) => [user.id, { user, before: readersBefore.has(user.id), after: readersAfter.has(user.id) }]));
  }

  /** The deliveries of one change, one per matching webhook. */
  async function eventsOf(trx: Executor, change: Change, owners: Map<number, Promise<Actor>>): Promise<NewEvent[]> {
    const event = change.resource.event;
    if (!event) return [];
    const matching = (await webhooks(trx)).filter((webhook) => subscribes(webhook.events, event));
    if (matching.length === 0) return [];
    const id = Number(change.record.id);
    const key = recordKey(change.resource.name, id);
    const before = beforeOf.get(trx)?.get(key);
    beforeOf.get(trx)?.delete(key);
    const readers =
      before?.owners !== undefined && change.action !== 'created' ? before.owners : await access.owners(trx, change.resource, matching.map((webhook) => webhook.owner_id));
    const sights = await sightOf(trx, change, id, before, readers);
    const payload = eventPayload(event, change, { publicUrl, owner: await ownerOf(trx, change, owners), repositoryId: repositoryIds.get(change.resource.name) ?? 0 });
    const after =
      change.action === 'deleted' ? new Map<number, boolean>() : await filters.verdicts(trx, change.resource, event, id, matching.map((webhook) => withOwner(webhook, readers)));
    // Field rules judge each owner's body (ACCESS.md §3, §4): a delete before it, others after it.
    const hidden =
      readers === null || fieldsAreShared(change.resource)
        ? null
        : change.action === 'deleted' && before?.hidden
          ? before.hidden
          : // (a delete without a before: the record is gone, so it hides every restricted field)
            await hiddenFieldsOf(change.resource, [...readers.values()], trx as unknown as DynamicDb, id);
    const bodies = new ChangeBodies(event, change, payload, hidden);
    const events: NewEvent[] = [];
    for (const webhook of matching) {
      const owner = sights?.get(webhook.owner_id);
      const sight = sights === null ? IN_SIGHT : (owner ?? OUT_OF_SIGHT);
      if (!hears(change.action, sight)) continue;
      let verdict: FilterVerdict | null = null;
      if (webhook.filter !== null && filters.conditions(withOwner(webhook, readers), event, change.resource) !== null) {
        // What the owner may not read matches nothing: a filter never tells of a record out of sight.
        verdict = {
          matched_before: change.action !== 'created' && sight.before && (before?.filters.get(webhook.id) ?? false),
          matched_after: change.action !== 'deleted' && sight.after && (after.get(webhook.id) ?? false),
        };
        // `updated` is sent when the record matches after the change or matched before it, so a
        // receiver hears of a record leaving the filter too; the body says which.
        if (!verdict.matched_before && !verdict.matched_after) continue;
      }
      const body = bodies.for(owner?.user ?? null, sights === null ? null : sight, verdict);
      events.push({ webhookId: webhook.id, event, action: change.action, body, recordKey: key });
    }
    return events;
  }

  async function writeEventDeliveries(trx: Executor, change: Change) {
    noteListChange(trx, change);
    const events = await eventsOf(trx, change, new Map());
    await enqueueDeliveries(storage, trx, events);
    return events.length ? wake : undefined;
  }

  /** A cascade's batch of changes (issue 22): their deliveries written a few statements in all, in order. */
  async function writeBatchDeliveries(trx: Executor, changes: readonly Change[]) {
    const owners = new Map<number, Promise<Actor>>();
    const events: NewEvent[] = [];
    for (const change of changes) {
      noteListChange(trx, change);
      events.push(...(await eventsOf(trx, change, owners)));
    }
    await enqueueDeliveries(storage, trx, events);
    return events.length ? wake : undefined;
  }
  /** A write of `resource` is about to run in `trx`: the webhooks it may need are asked for now, without waiting. */
  async function prepare(trx: Executor, resource: { readonly event?: string | null }): Promise<void> {
    if (resource.event) void webhooks(trx);
  }
  return Object.assign(writeEventDeliveries, { beforeChange: rememberBefore, changes: writeBatchDeliveries, prepare });
}

/**
 * Whether a change alters the active webhooks: a webhook's own, or a user's deletion, which
 * takes their webhooks with it (a foreign key's cascade, never told as changes of its own).
 */
function changesWebhookList(change: Change): boolean {
  const collection = change.resource.name;
  return collection === 'webhooks' || (collection === 'users' && change.action === 'deleted');
}

/** A webhook with its owner as the rules see them, for its filter (null when nobody's reads are judged). */
function withOwner(webhook: ActiveWebhook, owners: Owners | null): ActiveWebhook & { owner: User | null } {
  return { ...webhook, owner: owners?.get(webhook.owner_id) ?? null };
}

/** Whether a webhook whose owner sees the record so hears of the change (ACCESS.md §4). */
function hears(action: Change['action'], sight: Sight): boolean {
  if (action === 'created') return sight.after;
  if (action === 'deleted') return sight.before;
  return sight.before || sight.after;
}

/** The record key of a delivery: which record it is about, for per-record ordering. */
export function recordKey(collection: string, id: number): string {
  return `${collection}:${id}`;
}
