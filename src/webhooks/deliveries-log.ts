import { sql } from 'kysely';
import { isAuthenticated } from '../auth/permissions.js';
import type { DeliveryRow } from '../db/schema.js';
import { InvalidQuery, NotFound } from '../http/errors.js';
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

export const DELIVERY_COLUMNS = ['url', 'id', 'guid', 'event', 'action', 'status', 'status_code', 'duration_ms', 'attempts', 'delivered_at', 'redelivery'];

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const parseJson = (text: string | null): unknown => (text === null ? {} : (JSON.parse(text) as unknown));

/** A delivery's summary, as listed. */
export function representDelivery(row: DeliveryRow): Record<string, unknown> {
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
  };
}

/** A delivery with the request sent and the response received (the body capped at 64 KiB). */
function representDeliveryDetail(row: DeliveryRow): Record<string, unknown> {
  return {
    ...representDelivery(row),
    request: { headers: parseJson(row.request_headers), payload: JSON.parse(row.payload) as unknown },
    response: { headers: parseJson(row.response_headers), payload: row.response_body },
  };
}

export function deliveryLogViews(options: WebhookViewOptions): View[] {
  const { storage, cursors, wake } = options;
  const db = storage.db;

  async function loadDelivery(request: ApiRequest): Promise<DeliveryRow> {
    const hook = await loadOwnWebhook(storage, parseId(request.params.id), request.user!);
    const row = await db
      .selectFrom('deliveries')
      .selectAll()
      .where('id', '=', parseId(request.params.delivery_id))
      .where('webhook_id', '=', hook.id)
      .executeTakeFirst();
    if (!row) throw new NotFound();
    return row;
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
      return pageResponse(found, found.rows.map(representDelivery));
    },
  };

  const detail = {
    permission: isAuthenticated,
    async handle(request: ApiRequest) {
      return { body: representDeliveryDetail(await loadDelivery(request)) };
    },
  };

  const redeliver = {
    permission: isAuthenticated,
    async handle(request: ApiRequest) {
      const original = await loadDelivery(request);
      const created = await db.transaction().execute(async (trx) => {
        await enqueueDeliveries(storage, trx, [
          { webhookId: original.webhook_id, event: original.event, action: original.action, body: original.payload, guid: original.guid, redelivery: true },
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
          failed.map((row) => ({ webhookId: row.webhook_id, event: row.event, action: row.action, body: row.payload, guid: row.guid, redelivery: true })),
        );
        return failed.length;
      });
      if (count > 0) wake();
      return { status: 202, body: { redelivered: count } };
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
