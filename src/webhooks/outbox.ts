import { randomUUID } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import { announceDeliveries } from '../db/delivery-queue.js';
import type { Storage } from '../db/database.js';
import type { Database } from '../db/schema.js';
import type { Change, ChangeListener } from '../resources/resource.js';
import { eventPayload, type Actor } from './events.js';

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
}

export interface NewEvent {
  readonly webhookId: number;
  readonly event: string;
  readonly action: string | null;
  readonly body: string;
  readonly redelivery?: boolean;
  /** Reuse a delivery's guid (a redelivery keeps it, API.md §4). */
  readonly guid?: string;
}

/** Writes deliveries within the caller's transaction and announces them on commit. */
export async function enqueueDeliveries(storage: Storage, trx: Executor, events: readonly NewEvent[]): Promise<void> {
  if (events.length === 0) return;
  const now = Date.now();
  await trx
    .insertInto('deliveries')
    .values(
      events.map((event) => ({
        guid: event.guid ?? randomUUID(),
        webhook_id: event.webhookId,
        event: event.event,
        action: event.action,
        payload: event.body,
        status: 'pending',
        attempts: 0,
        next_attempt_at: now,
        lease_until: null,
        redelivery: event.redelivery ? 1 : 0,
        created_at: now,
      })),
    )
    .execute();
  await announceDeliveries(storage, trx);
}

/** Whether a webhook's `events` list (JSON text) asks for this event. */
export function subscribes(events: string, event: string): boolean {
  const list = JSON.parse(events) as string[];
  return list.includes('*') || list.includes(event);
}

async function ownerOf(trx: Executor, change: Change): Promise<Actor> {
  const path = change.record.owner;
  const ownerId = typeof path === 'string' ? Number(/\/(\d+)\/$/.exec(path)?.[1]) : change.actor.id;
  if (ownerId === change.actor.id) return { login: change.actor.username, id: change.actor.id };
  const row = await trx.selectFrom('users').select(['id', 'username']).where('id', '=', ownerId).executeTakeFirst();
  return row ? { login: row.username, id: row.id } : { login: change.actor.username, id: change.actor.id };
}

/** The change listener resources with an `event` notify: their changes become deliveries. */
export function outboxListener({ storage, publicUrl, wake, repositoryIds }: OutboxOptions): ChangeListener {
  // Asked for every change, so compiled once, and once per transaction: on SQLite the
  // transaction holds the write lock, so no webhook can change under it, and a group commit
  // (db/group-commit.ts) runs many changes in one (issue #6 profile).
  const activeHooks = storage.db.selectFrom('webhooks').select(['id', 'events']).where('active', '=', 1).compile();
  const hooksOf = new WeakMap<Executor, Promise<Array<{ id: number; events: string }>>>();
  return async function writeEventDeliveries(trx, change) {
    const event = change.resource.event;
    if (!event) return;
    let lookup = hooksOf.get(trx);
    if (lookup === undefined) {
      lookup = trx.executeQuery(activeHooks).then(({ rows }) => rows);
      hooksOf.set(trx, lookup);
    }
    const hooks = await lookup;
    const matching = hooks.filter((hook) => subscribes(hook.events, event));
    if (matching.length === 0) return;
    const body = JSON.stringify(eventPayload(event, change, { publicUrl, owner: await ownerOf(trx, change), repositoryId: repositoryIds.get(change.resource.name) ?? 0 }));
    await enqueueDeliveries(
      storage,
      trx,
      matching.map((hook) => ({ webhookId: hook.id, event, action: change.action, body })),
    );
    return wake;
  };
}
