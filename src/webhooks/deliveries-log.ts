import { sql, type Expression, type ExpressionBuilder, type Kysely, type SqlBool } from 'kysely';
import { isAuthenticated } from '../auth/permissions.js';
import type { Storage } from '../db/database.js';
import { WAITING, announceDeliveries, resolvePayloads } from '../db/delivery-queue.js';
import type { Database, DeliveryRow } from '../db/schema.js';
import { Throttled, ValidationError, type FieldErrors } from '../http/errors.js';
import { MESSAGES } from '../http/messages.js';
import type { Field, FieldResult } from '../resources/fields/field.js';
import { field } from '../resources/fields/index.js';
import type { DynamicDb, Row } from '../db/dynamic-tables.js';
import { defineBuiltinResource, type Resource } from '../resources/resource.js';
import { LOGGED_COLUMNS, logDeliveriesCreated } from './delivery-changes.js';
import { loadOwnWebhook } from './subscriptions.js';
import { deliveryListPage, deliveryPage } from './pages/delivery-pages.js';

/**
 * The deliveries log of a webhook (API.md §4), as GitHub's "Recent deliveries": a read-only
 * declaration nested under `/api/v1/webhooks/:id/`, served by the one viewset. Its hooks: `scope`
 * (the caller's webhook of the URL, else 404), `represent` (`record`, `waiting_behind`, and the
 * request and response of one delivery); its actions redeliver one, the failed, or a time range.
 */
const STATUSES = ['pending', 'delivered', 'failed', 'retrying'] as const;

/** The most deliveries one replay queues again (issue 14); the rest are reported, for another call. */
export const MAX_REPLAY = 10_000;
/**
 * The most redeliveries one webhook may have in 24 hours, whichever action queued them (issue
 * 22): a call that reaches it queues what fits; one beyond it is refused with 429.
 */
export const MAX_REDELIVERIES_PER_DAY = 10_000;
const DAY_MS = 86_400_000;
/** What a replay re-sends by default, and what it may. */
const REPLAY_STATUSES = ['failed', 'delivered'] as const;

const parseJson = (text: unknown): unknown => (text === null || text === undefined ? {} : (JSON.parse(String(text)) as unknown));
const shown = (schema: Record<string, unknown>) => ({ schema: () => ({ ...schema, readOnly: true }) });

/**
 * For an ordered webhook's waiting deliveries: the oldest waiting delivery of the same record,
 * where that is an earlier one (the claim query holds this one back until it is done,
 * db/delivery-queue.ts). One query for a whole page.
 */
async function waitingBehind(db: DynamicDb, rows: readonly Row[]): Promise<Map<number, number>> {
  const behind = new Map<number, number>();
  const waiting = (row: Row) => row.record_key !== null && WAITING.includes(row.status as never);
  // Nothing waiting, nothing to ask (a stream shows each delivered or failed one from its row).
  const keys = [...new Set(rows.filter(waiting).map((row) => String(row.record_key)))];
  if (keys.length === 0) return behind;
  const webhookId = Number(rows[0]!.webhook_id);
  const webhook = (await db.selectFrom('webhooks').select('ordering').where('id', '=', webhookId).executeTakeFirst()) as { ordering: string } | undefined;
  if (webhook?.ordering !== 'record') return behind;
  const heads = (await db
    .selectFrom('deliveries')
    .select(['record_key', (eb) => eb.fn.min('id').as('head')])
    .where('webhook_id', '=', webhookId)
    .where('record_key', 'in', keys)
    .where('status', 'in', WAITING)
    .groupBy('record_key')
    .execute()) as Array<{ record_key: string; head: number | string }>;
  const headOf = new Map(heads.map((head) => [head.record_key, Number(head.head)]));
  for (const row of rows) {
    const head = row.record_key === null ? undefined : headOf.get(String(row.record_key));
    if (head !== undefined && head < row.id && waiting(row)) behind.set(row.id, head);
  }
  return behind;
}

/**
 * The request and response of the latest attempt, for rows that lack them: a stream's rows are
 * logged without them (delivery-changes.ts: they were most of what the log wrote per attempt), so
 * a delivery's own stream shows them as the delivery holds them when the message is built.
 */
async function latestAttempts(db: DynamicDb, rows: readonly Row[]): Promise<Map<number, Row>> {
  const ids = rows.filter((row) => !('request_headers' in row)).map((row) => row.id);
  if (ids.length === 0) return new Map();
  const stored = (await db.selectFrom('deliveries').select(['id', 'request_headers', 'response_headers', 'response_body']).where('id', 'in', ids).execute()) as Row[];
  return new Map(stored.map((row) => [Number(row.id), row]));
}

/** The latest entry of each guid that failed: older failures already redelivered are skipped. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- over the aliased table `d`, which Kysely's types cannot name here
const latestOfItsGuid = ({ not, exists, selectFrom }: any) =>
  not(exists(selectFrom('deliveries as later').select(sql`1`.as('one')).whereRef('later.guid', '=', 'd.guid').whereRef('later.id', '>', 'd.id')));

/** Which deliveries an action redelivers, over `deliveries as d`. */
type Selection = (eb: ExpressionBuilder<Database & { d: Database['deliveries'] }, 'd'>) => Expression<SqlBool>;

/**
 * Queues again, oldest first, up to `limit` of the deliveries `selection` picks from one webhook,
 * within what its daily cap leaves; returns how many it queued and how many it left. Each is a
 * new log entry with the same guid that refers to its original's payload (`payload_of`) rather
 * than copying it, so redeliveries do not grow the database by the payloads they send (issue 22).
 * Copied in the database (INSERT … SELECT): no payload passes through here, and the statement
 * binds a handful of values however many rows it writes.
 */
async function redeliver(
  storage: Storage,
  trx: DynamicDb,
  { webhookId, selection, limit }: { webhookId: number; selection: Selection; limit: number },
): Promise<{ queued: number; remaining: number }> {
  const db = trx as unknown as Kysely<Database>;
  // Concurrent calls for one webhook take turns (PostgreSQL), so together they keep to the cap;
  // SQLite's writer already runs them one at a time.
  await storage.lockForUpdate(db.selectFrom('webhooks').select('id').where('id', '=', webhookId)).execute();
  const matching = db.selectFrom('deliveries as d').where('d.webhook_id', '=', webhookId).where(selection);
  const { n } = await matching.select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
  const total = Number(n);
  if (total === 0) return { queued: 0, remaining: 0 };
  const now = Date.now();
  const room = MAX_REDELIVERIES_PER_DAY - (await redeliveriesSince(db, webhookId, now - DAY_MS));
  if (room <= 0) throw await capReached(db, webhookId, now);
  const copies = matching
    .select([
      'd.guid',
      'd.webhook_id',
      'd.event',
      'd.action',
      sql<string>`''`.as('payload'),
      sql<number>`coalesce(d.payload_of, d.id)`.as('payload_of'),
      sql<string>`'pending'`.as('status'),
      sql<number>`0`.as('attempts'),
      sql<number>`${now}`.as('next_attempt_at'),
      sql<number>`1`.as('redelivery'),
      sql<number>`${now}`.as('created_at'),
      'd.record_key',
    ])
    .orderBy('d.id')
    .limit(Math.min(limit, room));
  const inserted = await db
    .insertInto('deliveries')
    .columns(['guid', 'webhook_id', 'event', 'action', 'payload', 'payload_of', 'status', 'attempts', 'next_attempt_at', 'redelivery', 'created_at', 'record_key'])
    .expression(copies)
    .returning(LOGGED_COLUMNS)
    .execute();
  await logDeliveriesCreated(db, inserted);
  await announceDeliveries(storage, db);
  return { queued: inserted.length, remaining: total - inserted.length };
}

async function redeliveriesSince(db: Kysely<Database>, webhookId: number, since: number): Promise<number> {
  const { n } = await db
    .selectFrom('deliveries')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('webhook_id', '=', webhookId)
    .where('redelivery', '=', 1)
    .where('created_at', '>', since)
    .executeTakeFirstOrThrow();
  return Number(n);
}

/** The 429 of a webhook at its cap: Retry-After says when one of its 24 hours' redeliveries leaves the window. */
async function capReached(db: Kysely<Database>, webhookId: number, now: number): Promise<Throttled> {
  const used = await redeliveriesSince(db, webhookId, now - DAY_MS);
  const oldest = await db
    .selectFrom('deliveries')
    .select('created_at')
    .where('webhook_id', '=', webhookId)
    .where('redelivery', '=', 1)
    .where('created_at', '>', now - DAY_MS)
    .orderBy('created_at')
    .offset(Math.max(0, used - MAX_REDELIVERIES_PER_DAY))
    .limit(1)
    .executeTakeFirst();
  const seconds = Math.max(1, Math.ceil((Number(oldest?.created_at ?? now) + DAY_MS - now) / 1000));
  return new Throttled(
    seconds,
    `This webhook has had ${MAX_REDELIVERIES_PER_DAY.toLocaleString('en')} redeliveries in the last 24 hours; the next can be queued in ${seconds} seconds.`,
  );
}

/** A replay's body: ISO 8601 `since` (required) and `until` (default: now), and `status`. */
function readReplay(data: Record<string, unknown>): { since: number; until: number; status: (typeof REPLAY_STATUSES)[number] } {
  const errors: FieldErrors = {};
  const time = (name: string, value: unknown): number | undefined => {
    const ms = typeof value === 'string' && /^\d{4}-\d{2}-\d{2}/.test(value) ? Date.parse(value) : Number.NaN;
    if (Number.isNaN(ms)) errors[name] = [MESSAGES.invalidDatetime];
    return ms;
  };
  const since = data.since === undefined ? ((errors.since = [MESSAGES.required]), undefined) : time('since', data.since);
  const until = data.until === undefined || data.until === null ? Date.now() + 1 : time('until', data.until);
  const status = data.status ?? 'failed';
  if (!(REPLAY_STATUSES as readonly unknown[]).includes(status)) errors.status = [MESSAGES.notAChoiceOf(status, REPLAY_STATUSES)];
  if (since !== undefined && until !== undefined && !errors.since && !errors.until && until <= since) errors.until = ['Must be later than since.'];
  if (Object.keys(errors).length) throw new ValidationError(errors);
  return { since: since!, until: until!, status: status as (typeof REPLAY_STATUSES)[number] };
}

export function deliveriesResource({ storage, wake }: { storage: Storage; wake: () => void }): Resource {
  const text = (options: { required?: boolean } = {}) => ({ ...field.string({ maxLength: 2000, readOnly: true, ...options }), metadata: () => ({ type: 'string' }) });
  const count = () => field.integer({ readOnly: true });
  const fields: Record<string, Field> = {
    guid: text({ required: true }),
    event: text({ required: true }),
    action: text(),
    status: {
      ...field.choice([...STATUSES], { readOnly: true, required: true }),
      // Read by the list's `status` filter.
      parse: (value): FieldResult =>
        (STATUSES as readonly unknown[]).includes(value) ? { ok: true, value } : { ok: false, errors: [`Must be one of: ${STATUSES.join(', ')}.`] },
    },
    status_code: count(),
    duration_ms: count(),
    attempts: field.integer({ readOnly: true, required: true }),
    delivered_at: { ...field.datetime({ readOnly: true }), show: (stored) => (stored === null || stored === undefined ? null : new Date(Number(stored)).toISOString()) },
    redelivery: field.boolean({ readOnly: true, required: true }),
    record: { ...text(), ...shown({ type: ['string', 'null'], description: '`<collection>:<id>` of the record the event is about; null for a ping.' }) },
    waiting_behind: {
      ...text(),
      ...shown({ type: ['string', 'null'], format: 'uri-reference', description: 'For a webhook with `ordering: "record"`: the earlier delivery about the same record this one waits for.' }),
    },
    request: {
      ...field.json({ readOnly: true }),
      ...shown({ type: 'object', required: ['headers', 'payload'], properties: { headers: { type: 'object' }, payload: {} } }),
    },
    response: {
      ...field.json({ readOnly: true }),
      ...shown({ type: 'object', required: ['headers', 'payload'], properties: { headers: { type: 'object' }, payload: { type: ['string', 'null'] } } }),
    },
  };
  const db = storage.db as unknown as DynamicDb;

  return defineBuiltinResource({
    name: 'deliveries',
    label: 'Delivery',
    description: "A webhook's deliveries, newest first; filter with `status`.",
    recordDescription: 'One delivery with its request and response.',
    pages: { collection: deliveryListPage, record: deliveryPage },
    table: 'deliveries',
    nestedUnder: { collection: 'webhooks', column: 'webhook_id', param: 'delivery_id' },
    operations: ['list', 'retrieve'],
    permission: isAuthenticated,
    timestamps: false,
    fields,
    filters: { status: ['exact'] },
    detailOnly: ['request', 'response'],
    // Written by the outbox, the redelivery actions and the dispatcher, and logged there (delivery-changes.ts).
    changesLoggedAsRows: true,
    hooks: {
      async scope(request) {
        const webhook = await loadOwnWebhook(request.unit?.trx ?? db, request);
        return (eb) => eb('webhook_id', '=', webhook.id);
      },
      async represent(rows, out, { detail, executor }) {
        const behind = await waitingBehind(executor, rows);
        // A redelivery shows the payload it sends: its original's.
        const payloads = detail ? await resolvePayloads(executor as never, rows as unknown as DeliveryRow[]) : [];
        const attempts = detail ? await latestAttempts(executor, rows) : new Map<number, Row>();
        rows.forEach((row, index) => {
          const delivery = out[index]!;
          const head = behind.get(row.id);
          delivery.record = row.record_key;
          delivery.waiting_behind = head === undefined ? null : `/api/v1/webhooks/${Number(row.webhook_id)}/deliveries/${head}/`;
          if (detail) {
            const attempt = attempts.get(row.id) ?? row;
            delivery.request = { headers: parseJson(attempt.request_headers), payload: JSON.parse(payloads[index]!.payload) as unknown };
            delivery.response = { headers: parseJson(attempt.response_headers), payload: attempt.response_body ?? null };
          }
        });
      },
    },
    extraActions: [
      {
        name: 'Failed Deliveries Redelivery',
        description: 'POST to redeliver every delivery of this webhook whose latest attempt failed.',
        detail: false,
        path: 'failed/attempts/',
        docs: {
          responses: {
            '202': {
              description: `The failed deliveries are queued again (same guids), up to the webhook's cap of ${MAX_REDELIVERIES_PER_DAY.toLocaleString('en')} redeliveries in 24 hours; \`remaining\`, when the cap left some, says how many.`,
              schema: {
                type: 'object',
                required: ['redelivered'],
                properties: { redelivered: { type: 'integer', minimum: 0 }, remaining: { type: 'integer', minimum: 1 } },
              },
            },
          },
        },
        async handle(request, viewSet) {
          const webhook = await loadOwnWebhook(request.unit?.trx ?? db, request);
          const { queued, remaining } = await viewSet.transact((trx) =>
            redeliver(storage, trx, {
              webhookId: webhook.id,
              selection: (eb) => eb.and([eb('d.status', '=', 'failed'), latestOfItsGuid(eb)]),
              limit: MAX_REDELIVERIES_PER_DAY,
            }),
          );
          if (queued > 0) viewSet.afterCommit(wake);
          return { status: 202, body: remaining > 0 ? { redelivered: queued, remaining } : { redelivered: queued } };
        },
      },
      {
        name: 'Delivery Replays',
        description:
          'POST `{"since", "until"?, "status"?}` to redeliver (same guids) every delivery of this webhook created in that time range whose latest attempt has that status (`failed` by default; or `delivered`), ' +
          `at most ${MAX_REPLAY.toLocaleString('en')} per call and ${MAX_REDELIVERIES_PER_DAY.toLocaleString('en')} redeliveries of the webhook in 24 hours (then 429 with Retry-After); ` +
          '`remaining` says how many are left for another call.',
        detail: false,
        path: 'replays/',
        docs: {
          request: {
            required: true,
            schema: {
              type: 'object',
              required: ['since'],
              properties: {
                since: { type: 'string', format: 'date-time' },
                until: { type: ['string', 'null'], format: 'date-time', description: 'Default: now.' },
                status: { type: 'string', enum: [...REPLAY_STATUSES], default: 'failed' },
              },
            },
          },
          responses: {
            '202': {
              description: 'The matching deliveries are queued again (same guids).',
              schema: {
                type: 'object',
                required: ['redelivered', 'remaining'],
                properties: { redelivered: { type: 'integer', minimum: 0 }, remaining: { type: 'integer', minimum: 0 } },
              },
            },
          },
        },
        async handle(request, viewSet) {
          const webhook = await loadOwnWebhook(request.unit?.trx ?? db, request);
          const { since, until, status } = readReplay(await request.data());
          const { queued, remaining } = await viewSet.transact((trx) =>
            redeliver(storage, trx, {
              webhookId: webhook.id,
              // The latest entry of each guid created in the range with that status: a delivery
              // already redelivered (by hand or by an earlier replay) is not sent twice.
              selection: (eb) => eb.and([eb('d.status', '=', status), eb('d.created_at', '>=', since), eb('d.created_at', '<', until), latestOfItsGuid(eb)]),
              limit: MAX_REPLAY,
            }),
          );
          if (queued > 0) viewSet.afterCommit(wake);
          return { status: 202, body: { redelivered: queued, remaining } };
        },
      },
      {
        name: 'Delivery Attempts',
        description: 'POST to redeliver this delivery (same guid).',
        detail: true,
        path: 'attempts/',
        docs: { responses: { '202': { description: 'The redelivery, queued (same guid).', schema: { $ref: '#/components/schemas/Delivery' } } } },
        async handle(request, viewSet) {
          const original = await viewSet.loadRow(request);
          const created = await viewSet.transact(async (trx) => {
            await redeliver(storage, trx, { webhookId: Number(original.webhook_id), selection: (eb) => eb('d.id', '=', original.id), limit: 1 });
            return (await trx.selectFrom('deliveries').selectAll().where('guid', '=', original.guid).orderBy('id', 'desc').limit(1).executeTakeFirstOrThrow()) as Row;
          });
          viewSet.afterCommit(wake);
          return { status: 202, body: (await viewSet.represent([created]))[0] };
        },
      },
    ],
  });
}
