import { randomUUID } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import { announceDeliveries } from '../db/delivery-queue.js';
import type { Storage } from '../db/database.js';
import type { Database } from '../db/schema.js';
import type { DynamicDb } from '../db/dynamic-tables.js';
import type { QueryFilter } from '../resources/filters.js';
import type { Change, ChangeListener, PendingChange } from '../resources/resource.js';
import { eventPayload, type Actor } from './events.js';
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

/** Writes deliveries within the caller's transaction and announces them on commit. */
export async function enqueueDeliveries(storage: Storage, trx: Executor, events: readonly NewEvent[]): Promise<void> {
  if (events.length === 0) return;
  const now = Date.now();
  for (let start = 0; start < events.length; start += INSERT_BATCH) await insertDeliveries(trx, events.slice(start, start + INSERT_BATCH), now);
  await announceDeliveries(storage, trx);
}

async function insertDeliveries(trx: Executor, events: readonly NewEvent[], now: number): Promise<void> {
  await trx
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
    .execute();
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
  events: string;
  filter: string | null;
}

/** A filtered webhook's verdict on one change (the body's `filter`, issue 14). */
interface FilterVerdict {
  matched_before: boolean;
  matched_after: boolean;
}

/**
 * The change listener resources with an `event` notify: their changes become deliveries, one per
 * subscribed webhook whose filter (if any) the record matches before or after the change.
 */
export function outboxListener({ storage, publicUrl, wake, repositoryIds, filtersOf }: OutboxOptions): ChangeListener {
  // Asked for every change, so compiled once, and once per transaction: on SQLite the
  // transaction holds the write lock, so no webhook can change under it, and a group commit
  // (db/group-commit.ts) runs many changes in one (issue #6 profile).
  const activeWebhooksQuery = storage.db.selectFrom('webhooks').select(['id', 'events', 'filter']).where('active', '=', 1).compile();
  const webhooksOf = new WeakMap<Executor, Promise<ActiveWebhook[]>>();
  const webhooks = (trx: Executor): Promise<ActiveWebhook[]> => {
    let lookup = webhooksOf.get(trx);
    if (lookup === undefined) {
      lookup = trx.executeQuery(activeWebhooksQuery).then(({ rows }) => rows);
      webhooksOf.set(trx, lookup);
    }
    return lookup;
  };
  const filters = new WebhookFilters(storage.db as unknown as DynamicDb, filtersOf);
  // What filtered webhooks made of each record before it changed, per transaction.
  const matchedBefore = new WeakMap<Executor, Map<string, Map<number, boolean>>>();

  async function rememberBefore(trx: Executor, { resource, id }: PendingChange): Promise<void> {
    const event = resource.event;
    if (!event) return;
    const filtered = (await webhooks(trx)).filter((webhook) => webhook.filter !== null && subscribes(webhook.events, event));
    if (filtered.length === 0) return;
    const verdicts = await filters.verdicts(trx, resource, event, id, filtered);
    let byRecord = matchedBefore.get(trx);
    if (!byRecord) matchedBefore.set(trx, (byRecord = new Map()));
    byRecord.set(recordKey(resource.name, id), verdicts);
  }

  /** The deliveries of one change, one per matching webhook. */
  async function eventsOf(trx: Executor, change: Change, owners: Map<number, Promise<Actor>>): Promise<NewEvent[]> {
    const event = change.resource.event;
    if (!event) return [];
    const matching = (await webhooks(trx)).filter((webhook) => subscribes(webhook.events, event));
    if (matching.length === 0) return [];
    const id = Number(change.record.id);
    const key = recordKey(change.resource.name, id);
    const before = matchedBefore.get(trx)?.get(key);
    matchedBefore.get(trx)?.delete(key);
    const payload = eventPayload(event, change, { publicUrl, owner: await ownerOf(trx, change, owners), repositoryId: repositoryIds.get(change.resource.name) ?? 0 });
    const after = change.action === 'deleted' ? new Map<number, boolean>() : await filters.verdicts(trx, change.resource, event, id, matching);
    let plain: string | undefined;
    const events: NewEvent[] = [];
    for (const webhook of matching) {
      const filtered = webhook.filter !== null && filters.conditions(webhook, event, change.resource) !== null;
      let body: string;
      if (!filtered) {
        body = plain ??= JSON.stringify(payload);
      } else {
        const verdict: FilterVerdict = {
          matched_before: change.action !== 'created' && (before?.get(webhook.id) ?? false),
          matched_after: change.action !== 'deleted' && (after.get(webhook.id) ?? false),
        };
        // `updated` is sent when the record matches after the change or matched before it, so a
        // receiver hears of a record leaving the filter too; the body says which.
        if (!verdict.matched_before && !verdict.matched_after) continue;
        body = JSON.stringify({ ...payload, filter: verdict });
      }
      events.push({ webhookId: webhook.id, event, action: change.action, body, recordKey: key });
    }
    return events;
  }

  async function writeEventDeliveries(trx: Executor, change: Change) {
    const events = await eventsOf(trx, change, new Map());
    await enqueueDeliveries(storage, trx, events);
    return events.length ? wake : undefined;
  }

  /** A cascade's batch of changes (issue 22): their deliveries written a few statements in all, in order. */
  async function writeBatchDeliveries(trx: Executor, changes: readonly Change[]) {
    const owners = new Map<number, Promise<Actor>>();
    const events: NewEvent[] = [];
    for (const change of changes) events.push(...(await eventsOf(trx, change, owners)));
    await enqueueDeliveries(storage, trx, events);
    return events.length ? wake : undefined;
  }
  return Object.assign(writeEventDeliveries, { beforeChange: rememberBefore, changes: writeBatchDeliveries });
}

/** The record key of a delivery: which record it is about, for per-record ordering. */
export function recordKey(collection: string, id: number): string {
  return `${collection}:${id}`;
}
