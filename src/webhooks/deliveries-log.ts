import { sql, type Kysely } from 'kysely';
import { isAuthenticated } from '../auth/permissions.js';
import { WAITING, announceDeliveries } from '../db/delivery-queue.js';
import type { Database, DeliveryRow, WebhookRow } from '../db/schema.js';
import { InvalidQuery, NotFound, ValidationError, type FieldErrors } from '../http/errors.js';
import { parsePageRequest } from '../http/pagination.js';
import { JSON_TYPE } from '../http/renderers.js';
import type { ApiRequest, View } from '../http/view.js';
import { fetchKeysetPage, pageResponse } from '../resources/keyset.js';
import { RECORD_MEDIA_TYPES, parseId } from '../resources/viewset.js';
import { enqueueDeliveries } from './outbox.js';
import { loadOwnWebhook, type WebhookViewOptions } from './subscriptions.js';

/**
 * The deliveries log of a webhook (API.md §4), as GitHub's "Recent deliveries": a paginated
 * list, each delivery's request and response, and redelivery with the same guid.
 */
const STATUSES = ['pending', 'delivered', 'failed', 'retrying'] as const;

export const DELIVERY_COLUMNS = [
  'url', 'id', 'guid', 'event', 'action', 'status', 'status_code', 'duration_ms', 'attempts', 'delivered_at', 'redelivery', 'record', 'waiting_behind',
];

/** The most deliveries one replay queues again (issue 14); the rest are reported, for another call. */
export const MAX_REPLAY = 10_000;
/** What a replay re-sends by default, and what it may. */
const REPLAY_STATUSES = ['failed', 'delivered'] as const;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const parseJson = (text: string | null): unknown => (text === null ? {} : (JSON.parse(text) as unknown));

/**
 * A delivery's summary, as listed. `waitingBehind`: for a webhook with `ordering: "record"`, the
 * id of the earlier delivery about the same record this one waits for (see `waitingBehind`).
 */
export function representDelivery(row: DeliveryRow, waitingBehind: number | null = null): Record<string, unknown> {
  return {
    url: `/api/v1/webhooks/${row.webhook_id}/deliveries/${row.id}/`,
    id: row.id,
    guid: row.guid,
    event: row.event,
    action: row.action,
    status: row.status,
    status_code: row.status_code,
    duration_ms: row.duration_ms,
    attempts: row.attempts,
    delivered_at: iso(row.delivered_at),
    redelivery: row.redelivery === 1,
    record: row.record_key,
    waiting_behind: waitingBehind === null ? null : `/api/v1/webhooks/${row.webhook_id}/deliveries/${waitingBehind}/`,
  };
}

/**
 * For an ordered webhook's waiting deliveries: the oldest waiting delivery of the same record,
 * where that is an earlier one (the claim query holds this one back until it is done,
 * db/delivery-queue.ts). One query for a whole page.
 */
async function waitingBehind(db: Kysely<Database>, hook: WebhookRow, rows: readonly DeliveryRow[]): Promise<Map<number, number>> {
  const behind = new Map<number, number>();
  if (hook.ordering !== 'record') return behind;
  const keys = [...new Set(rows.filter((row) => row.record_key !== null && WAITING.includes(row.status as never)).map((row) => row.record_key!))];
  if (keys.length === 0) return behind;
  const heads = await db
    .selectFrom('deliveries')
    .select(['record_key', (eb) => eb.fn.min('id').as('head')])
    .where('webhook_id', '=', hook.id)
    .where('record_key', 'in', keys)
    .where('status', 'in', WAITING)
    .groupBy('record_key')
    .execute();
  const headOf = new Map(heads.map((head) => [head.record_key, Number(head.head)]));
  for (const row of rows) {
    const head = row.record_key === null ? undefined : headOf.get(row.record_key);
    if (head !== undefined && head < row.id && WAITING.includes(row.status as never)) behind.set(row.id, head);
  }
  return behind;
}

/** A delivery with the request sent and the response received (the body capped at 64 KiB). */
function representDeliveryDetail(row: DeliveryRow, waitingBehind: number | null): Record<string, unknown> {
  return {
    ...representDelivery(row, waitingBehind),
    request: { headers: parseJson(row.request_headers), payload: JSON.parse(row.payload) as unknown },
    response: { headers: parseJson(row.response_headers), payload: row.response_body },
  };
}

/** A replay's body: ISO 8601 `since` (required) and `until` (default: now), and `status`. */
function readReplay(data: Record<string, unknown>): { since: number; until: number; status: (typeof REPLAY_STATUSES)[number] } {
  const errors: FieldErrors = {};
  const time = (name: string, value: unknown): number | undefined => {
    const ms = typeof value === 'string' && /^\d{4}-\d{2}-\d{2}/.test(value) ? Date.parse(value) : Number.NaN;
    if (Number.isNaN(ms)) errors[name] = ['Datetime has wrong format. Use one of these formats instead: YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z].'];
    return ms;
  };
  const since = data.since === undefined ? ((errors.since = ['This field is required.']), undefined) : time('since', data.since);
  const until = data.until === undefined || data.until === null ? Date.now() + 1 : time('until', data.until);
  const status = data.status ?? 'failed';
  if (!(REPLAY_STATUSES as readonly unknown[]).includes(status)) errors.status = [`"${String(status)}" is not a valid choice; choose from: ${REPLAY_STATUSES.join(', ')}.`];
  if (since !== undefined && until !== undefined && !errors.since && !errors.until && until <= since) errors.until = ['Must be later than since.'];
  if (Object.keys(errors).length) throw new ValidationError(errors);
  return { since: since!, until: until!, status: status as (typeof REPLAY_STATUSES)[number] };
}

export function deliveryLogViews(options: WebhookViewOptions): View[] {
  const { storage, cursors, wake } = options;
  const db = storage.db;

  async function loadDelivery(request: ApiRequest): Promise<{ hook: WebhookRow; row: DeliveryRow }> {
    const hook = await loadOwnWebhook(storage, parseId(request.params.id), request.user!);
    const row = await db
      .selectFrom('deliveries')
      .selectAll()
      .where('id', '=', parseId(request.params.delivery_id))
      .where('webhook_id', '=', hook.id)
      .executeTakeFirst();
    if (!row) throw new NotFound();
    return { hook, row };
  }

  const list = {
    permission: isAuthenticated,
    async handle(request: ApiRequest) {
      const hook = await loadOwnWebhook(storage, parseId(request.params.id), request.user!);
      const page = parsePageRequest(request.query, { id: 'id' }, '-id', cursors);
      let base = db.selectFrom('deliveries').selectAll().where('webhook_id', '=', hook.id);
      const status = request.query.status;
      if (status !== undefined) {
        if (!(STATUSES as readonly string[]).includes(status)) {
          throw new InvalidQuery({ status: [`Must be one of: ${STATUSES.join(', ')}.`] });
        }
        base = base.where('status', '=', status);
      }
      const path = `/api/v1/webhooks/${hook.id}/deliveries/`;
      const found = await fetchKeysetPage<DeliveryRow>(base, page, { path, query: request.query, cursors });
      const behind = await waitingBehind(db, hook, found.rows);
      return pageResponse(found, found.rows.map((row) => representDelivery(row, behind.get(row.id) ?? null)));
    },
  };

  const detail = {
    permission: isAuthenticated,
    async handle(request: ApiRequest) {
      const { hook, row } = await loadDelivery(request);
      const behind = await waitingBehind(db, hook, [row]);
      return { body: representDeliveryDetail(row, behind.get(row.id) ?? null) };
    },
  };

  const redeliver = {
    permission: isAuthenticated,
    async handle(request: ApiRequest) {
      const { row: original } = await loadDelivery(request);
      const created = await db.transaction().execute(async (trx) => {
        await enqueueDeliveries(storage, trx, [
          {
            webhookId: original.webhook_id,
            event: original.event,
            action: original.action,
            body: original.payload,
            guid: original.guid,
            redelivery: true,
            recordKey: original.record_key,
          },
        ]);
        return trx.selectFrom('deliveries').selectAll().where('guid', '=', original.guid).orderBy('id', 'desc').limit(1).executeTakeFirstOrThrow();
      });
      wake();
      return { status: 202, body: representDelivery(created) };
    },
  };

  const redeliverFailed = {
    permission: isAuthenticated,
    async handle(request: ApiRequest) {
      const hook = await loadOwnWebhook(storage, parseId(request.params.id), request.user!);
      const count = await db.transaction().execute(async (trx) => {
        // The latest entry of each guid that failed: older failures already redelivered are skipped.
        const failed = await trx
          .selectFrom('deliveries as d')
          .selectAll('d')
          .where('d.webhook_id', '=', hook.id)
          .where('d.status', '=', 'failed')
          .where(({ not, exists, selectFrom }) =>
            not(exists(selectFrom('deliveries as later').select(sql`1`.as('one')).whereRef('later.guid', '=', 'd.guid').whereRef('later.id', '>', 'd.id'))),
          )
          .orderBy('d.id')
          .execute();
        await enqueueDeliveries(
          storage,
          trx,
          failed.map((row) => ({
            webhookId: row.webhook_id,
            event: row.event,
            action: row.action,
            body: row.payload,
            guid: row.guid,
            redelivery: true,
            recordKey: row.record_key,
          })),
        );
        return failed.length;
      });
      if (count > 0) wake();
      return { status: 202, body: { redelivered: count } };
    },
  };

  const replay = {
    permission: isAuthenticated,
    async handle(request: ApiRequest) {
      const hook = await loadOwnWebhook(storage, parseId(request.params.id), request.user!);
      const { since, until, status } = readReplay(await request.data());
      const { queued, remaining } = await db.transaction().execute(async (trx) => {
        // The latest entry of each guid created in the range with that status: a delivery
        // already redelivered (by hand or by an earlier replay) is not sent twice.
        const matching = trx
          .selectFrom('deliveries as d')
          .where('d.webhook_id', '=', hook.id)
          .where('d.status', '=', status)
          .where('d.created_at', '>=', since)
          .where('d.created_at', '<', until)
          .where(({ not, exists, selectFrom }) =>
            not(exists(selectFrom('deliveries as later').select(sql`1`.as('one')).whereRef('later.guid', '=', 'd.guid').whereRef('later.id', '>', 'd.id'))),
          );
        const { n } = await matching.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
        const total = Number(n);
        if (total === 0) return { queued: 0, remaining: 0 };
        // Copied in the database (INSERT … SELECT): 10,000 payloads need not pass through here.
        const now = Date.now();
        const copies = matching
          .select([
            'd.guid',
            'd.webhook_id',
            'd.event',
            'd.action',
            'd.payload',
            sql<string>`'pending'`.as('status'),
            sql<number>`0`.as('attempts'),
            sql<number>`${now}`.as('next_attempt_at'),
            sql<number>`1`.as('redelivery'),
            sql<number>`${now}`.as('created_at'),
            'd.record_key',
          ])
          .orderBy('d.id')
          .limit(MAX_REPLAY);
        const inserted = await trx
          .insertInto('deliveries')
          .columns(['guid', 'webhook_id', 'event', 'action', 'payload', 'status', 'attempts', 'next_attempt_at', 'redelivery', 'created_at', 'record_key'])
          .expression(copies)
          .returning('id')
          .execute();
        const count = inserted.length;
        await announceDeliveries(storage, trx);
        return { queued: count, remaining: total - count };
      });
      if (queued > 0) wake();
      return { status: 202, body: { redelivered: queued, remaining } };
    },
  };

  return [
    {
      name: 'Delivery List',
      description: "A webhook's deliveries, newest first; filter with `status`.",
      path: '/api/v1/webhooks/:id/deliveries/',
      mediaTypes: RECORD_MEDIA_TYPES,
      columns: DELIVERY_COLUMNS,
      actions: { GET: list },
    },
    {
      name: 'Failed Deliveries Redelivery',
      description: 'POST to redeliver every delivery of this webhook whose latest attempt failed.',
      path: '/api/v1/webhooks/:id/deliveries/failed/attempts/',
      mediaTypes: [JSON_TYPE],
      actions: { POST: redeliverFailed },
    },
    {
      name: 'Delivery Replays',
      description:
        'POST `{"since", "until"?, "status"?}` to redeliver (same guids) every delivery of this webhook created in that time range whose latest attempt has that status (`failed` by default; or `delivered`), ' +
        `at most ${MAX_REPLAY.toLocaleString('en')} per call; \`remaining\` says how many are left for another call.`,
      path: '/api/v1/webhooks/:id/deliveries/replays/',
      mediaTypes: [JSON_TYPE],
      actions: { POST: replay },
    },
    {
      name: 'Delivery Instance',
      description: 'One delivery with its request and response.',
      path: '/api/v1/webhooks/:id/deliveries/:delivery_id/',
      mediaTypes: RECORD_MEDIA_TYPES,
      columns: [...DELIVERY_COLUMNS, 'request', 'response'],
      actions: { GET: detail },
    },
    {
      name: 'Delivery Attempts',
      description: 'POST to redeliver this delivery (same guid).',
      path: '/api/v1/webhooks/:id/deliveries/:delivery_id/attempts/',
      mediaTypes: [JSON_TYPE],
      actions: { POST: redeliver },
    },
  ];
}
