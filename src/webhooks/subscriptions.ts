import { isAuthenticated } from '../auth/permissions.js';
import type { Storage } from '../db/database.js';
import { NotFound } from '../http/errors.js';
import { MESSAGES } from '../http/messages.js';
import { parseId } from '../http/paths.js';
import type { ApiRequest } from '../http/view.js';
import type { Field, FieldResult } from '../resources/fields/field.js';
import { field } from '../resources/fields/index.js';
import type { DynamicDb, Row } from '../db/dynamic-tables.js';
import { MAX_FILTER_TERMS, readFilterParams, type QueryFilter } from '../resources/filters.js';
import { refuseBeyondPerUserCap } from '../resources/per-user-cap.js';
import { defineBuiltinResource, type Resource } from '../resources/resource.js';
import { TargetRefusedError, checkTargetUrl } from './address-guard.js';
import { pingPayload } from './events.js';
import { enqueueDeliveries } from './outbox.js';
import { InvalidSecretError, generateSecret, parseSecret, type SecretBox } from './secrets.js';
import { webhookListPage, webhookPage } from './pages/webhook-pages.js';

/**
 * `/api/v1/webhooks/`: each user's own subscriptions (API.md §4), a declaration served by the one
 * viewset. What is special is in its hooks: `scope` (another user's webhook is a 404, as on
 * GitHub: its existence is not theirs to know), `validate` (the target's address), `beforeCreate`
 * (the per-user cap, the sealed secret), `afterCreate` (the ping, the secret shown once),
 * `beforeUpdate` (secret rotation), `represent` (`last_response`), and the `pings/` action.
 */
export const MAX_WEBHOOKS_PER_USER = 20;
/** A rotated-out secret keeps signing for this long (API.md §4 "Secret rotation"). */
export const SECRET_OVERLAP_MS = 24 * 3_600_000;

/** A webhook's `ordering` (issue 14): `record` delivers each record's events one at a time, in commit order. */
export const ORDERINGS = ['none', 'record'] as const;

export interface WebhookOptions {
  readonly storage: Storage;
  readonly secrets: SecretBox;
  readonly allowPrivate: boolean;
  /** Event kinds a webhook may subscribe to, besides `*`. */
  readonly eventNames: readonly string[];
  /** Per event, the list filters of its collection: what a webhook's `filter` may use. */
  readonly eventFilters: ReadonlyMap<string, readonly QueryFilter[]>;
  /** Wakes this process's dispatcher after a commit that enqueued work. */
  readonly wake: () => void;
}

const ok = (value: unknown): FieldResult => ({ ok: true, value });
const fail = (...errors: string[]): FieldResult => ({ ok: false, errors });

/** The caller's webhook of the URL's `:id`, or a 404. */
export async function loadOwnWebhook(executor: DynamicDb, request: ApiRequest): Promise<Row> {
  const row = (await executor
    .selectFrom('webhooks')
    .selectAll()
    .where('id', '=', parseId(request.params.id))
    .where('owner_id', '=', request.user!.id)
    .executeTakeFirst()) as Row | undefined;
  if (!row) throw new NotFound();
  return row;
}

const parseJsonOr = (text: string): unknown => {
  if (text.trim() === '') return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
};

/**
 * Checks a webhook's `filter` (issue 14): per event, a query string in the list endpoint's filter
 * language, each parameter read by the same filters as `GET /api/v1/<collection>/?…`, so a bad
 * value has the list's message. Unlike the list, a parameter no filter knows is refused: ignored,
 * it would make the webhook hear of every record. Returns the JSON text to store (null: none).
 */
export function parseWebhookFilter(
  value: unknown,
  eventFilters: ReadonlyMap<string, readonly QueryFilter[]>,
): { filter: string | null } | { errors: string[] } {
  if (value === null) return { filter: null };
  if (typeof value !== 'object' || Array.isArray(value)) {
    return { errors: ['Expected an object: per event name, a query string such as "genre=poetry&year__gte=2000".'] };
  }
  const errors: string[] = [];
  const stored: Record<string, string> = {};
  for (const [event, query] of Object.entries(value as Record<string, unknown>)) {
    const filters = eventFilters.get(event);
    if (filters === undefined) {
      errors.push(`${event}: unknown event; choose from: ${[...eventFilters.keys()].join(', ')}.`);
      continue;
    }
    if (typeof query !== 'string') {
      errors.push(`${event}: expected a query string such as "genre=poetry&year__gte=2000".`);
      continue;
    }
    const text = query.replace(/^\?/, '');
    const params = [...new URLSearchParams(text)];
    // Counted before anything is read: the filter runs inside other users' writes (issue 22).
    if (params.length > MAX_FILTER_TERMS) {
      errors.push(`${event}: A filter may have at most ${MAX_FILTER_TERMS} parameters; this one has ${params.length}.`);
      continue;
    }
    const known = new Map(filters.map((filter) => [filter.param, filter]));
    for (const [param] of params) {
      if (!known.has(param)) errors.push(`${event}: ${param}: not a filter of this collection; choose from: ${[...known.keys()].join(', ') || '(none)'}.`);
    }
    for (const [param, messages] of Object.entries(readFilterParams(known, params).errors)) errors.push(`${event}: ${param}: ${messages.join(' ')}`);
    stored[event] = text;
  }
  if (errors.length) return { errors };
  return { filter: Object.keys(stored).length ? JSON.stringify(stored) : null };
}


/** The webhooks declaration, with the hooks that make a subscription what it is. */
export function webhooksResource(options: WebhookOptions): Resource {
  const { storage, secrets, allowPrivate, eventNames, eventFilters, wake } = options;
  const allowed = ['*', ...eventNames];

  async function enqueuePing(trx: DynamicDb, webhook: Record<string, unknown>, request: ApiRequest): Promise<void> {
    const user = request.user!;
    const body = JSON.stringify(pingPayload(webhook, { login: user.username, id: user.id }));
    await enqueueDeliveries(storage, trx as never, [{ webhookId: Number(webhook.id), event: 'ping', action: null, body }]);
  }

  // Fields a `field.<type>()` cannot state exactly: their own checks, messages and descriptions.
  const fields: Record<string, Field> = {
    target_url: {
      ...field.url({ maxLength: 2000 }),
      // The address is resolved and checked by the declaration's `validate`, outside the transaction.
      parse: (value) =>
        typeof value !== 'string' || value.trim() === ''
          ? fail(MESSAGES.invalidUrl)
          : value.length > 2000
            ? fail(MESSAGES.maxLength(2000))
            : ok(value.trim()),
      metadata: () => ({ type: 'url', max_length: 2000 }),
    },
    events: {
      ...field.json({ default: ['*'] }),
      parse(value, context) {
        // A form sends one string, commas separating several; JSON has lists and must use one.
        const events = context.form && typeof value === 'string' ? value.split(',').map((e) => e.trim()) : value;
        if (!Array.isArray(events) || events.length === 0 || !events.every((e) => typeof e === 'string')) {
          return fail('Expected a non-empty list of event names.');
        }
        const unknown = events.filter((e) => !allowed.includes(e as string));
        if (unknown.length) return fail(`Unknown event ${JSON.stringify(unknown[0])}; choose from: ${allowed.join(', ')}.`);
        return ok(JSON.stringify([...new Set(events as string[])]));
      },
      schema: () => ({ type: 'array', minItems: 1, items: { type: 'string', enum: allowed }, default: ['*'], description: 'Event names; `*` for every event.' }),
      metadata: () => ({ type: 'list', child: { type: 'choice', choices: allowed } }),
    },
    ordering: {
      ...field.choice([...ORDERINGS], { default: 'none' }),
      parse: (value) =>
        (ORDERINGS as readonly unknown[]).includes(value) ? ok(value) : fail(MESSAGES.notAChoiceOf(value, ORDERINGS)),
      metadata: () => ({ type: 'choice', choices: [...ORDERINGS] }),
    },
    filter: {
      ...field.json({ nullable: true, required: false }),
      parse(value, context) {
        const read = parseWebhookFilter(context.form && typeof value === 'string' ? parseJsonOr(value) : value, eventFilters);
        return 'errors' in read ? fail(...read.errors) : ok(read.filter);
      },
      show: (stored) => (stored === null || stored === undefined ? null : (JSON.parse(String(stored)) as unknown)),
      schema: () => ({
        type: ['object', 'null'],
        additionalProperties: { type: 'string' },
        description: 'Per event name, a query string in that collection’s list filter language; null: every record.',
      }),
      metadata: () => ({ type: 'nested object' }),
    },
    active: field.boolean({ default: true }),
    secret: {
      ...field.string({ maxLength: 200, required: false, writeOnly: true }),
      parse(value) {
        try {
          return ok(parseSecret(value));
        } catch (error) {
          return fail(error instanceof InvalidSecretError ? error.message : 'Invalid secret.');
        }
      },
      schema: () => ({ type: 'string', writeOnly: true, description: 'Generated when left out; shown once, in the 201 of the create.' }),
      metadata: () => ({ type: 'string' }),
    },
    created_at: {
      ...field.datetime({ readOnly: true, required: true }),
      show: (stored) => new Date(Number(stored)).toISOString(),
      metadata: () => ({ type: 'datetime' }),
    },
    last_response: {
      ...field.json({ readOnly: true }),
      show: () => null, // filled from three columns by `represent`
      schema: () => ({
        type: 'object',
        readOnly: true,
        required: ['code', 'status', 'message'],
        properties: { code: { type: ['integer', 'null'] }, status: { type: 'string' }, message: { type: ['string', 'null'] } },
      }),
      metadata: () => ({ type: 'nested object' }),
    },
    disabled_reason: { ...field.string({ maxLength: 2000, readOnly: true }), metadata: () => ({ type: 'string' }) },
  };

  return defineBuiltinResource({
    name: 'webhooks',
    label: 'Webhook',
    description:
      "The caller's webhook subscriptions. `ordering`: `none` (default) or `record`, each record's events delivered one at a time in commit order. " +
      '`filter`: per event, a query string in that collection\'s list filter language (`{"experience": "search=tea"}`); `updated` is sent when the record matches after the change or matched before it, and the body\'s `filter` says which.',
    recordDescription: 'One webhook subscription. PATCH a new `secret` to rotate it with a 24-hour overlap.',
    // Their browsable pages are dashboards (API.md §4).
    pages: { collection: webhookListPage, record: webhookPage },
    fields,
    permission: isAuthenticated,
    timestamps: false,
    createShows: ['secret'],
    // The target's address is resolved once every field passed, outside the transaction; only a
    // new one, so a webhook whose host is gone can still be switched off (LOGIC.md §1).
    async validate(values, { errors, record }) {
      if (record !== null && values.target_url === record.target_url) return;
      try {
        await checkTargetUrl(String(values.target_url), { allowPrivate });
      } catch (error) {
        errors.add('target_url', error instanceof TargetRefusedError ? error.message : MESSAGES.invalidUrl);
      }
    },
    hooks: {
      scope: async (request) => (eb) => eb('owner_id', '=', request.user!.id),
      async beforeCreate({ trx, columns, request }) {
        const user = request.user!;
        await refuseBeyondPerUserCap(storage, trx, { table: 'webhooks', userId: user.id, max: MAX_WEBHOOKS_PER_USER, message: `A user may have at most ${MAX_WEBHOOKS_PER_USER} webhooks.` });
        const now = Date.now();
        const secret = typeof columns.secret === 'string' ? columns.secret : generateSecret();
        delete columns.secret;
        delete columns.last_response;
        Object.assign(columns, {
          owner_id: user.id,
          secret_sealed: secrets.seal(secret),
          last_response_status: 'unused',
          created_at: now,
          updated_at: now,
        });
      },
      async afterCreate({ trx, row, record, request, response, afterCommit }) {
        // A new webhook is greeted with a ping (API.md §4); one created inactive is not, yet.
        if (Number(row!.active) === 1) await enqueuePing(trx, record!, request);
        // The secret is shown once, here, and never again (API.md §4).
        Object.assign(response, { body: { secret: secrets.open(String(row!.secret_sealed)) }, headers: { 'cache-control': 'no-store' } });
        afterCommit(wake);
      },
      async beforeUpdate({ row, columns, afterCommit }) {
        const now = Date.now();
        columns.updated_at = now;
        // Re-enabling clears why it was disabled (API.md §6 "Webhook records").
        if (columns.active === 1) Object.assign(columns, { disabled_reason: null, failing_since: null });
        // Only the latest rotation overlaps: the secret before the previous one stops at once.
        if (typeof columns.secret === 'string') {
          Object.assign(columns, {
            secret_sealed: secrets.seal(columns.secret),
            previous_secret_sealed: row!.secret_sealed,
            previous_secret_expires_at: now + SECRET_OVERLAP_MS,
          });
          delete columns.secret;
        }
        if (columns.active === 1) afterCommit(wake);
      },
      async represent(rows, out) {
        rows.forEach((row, index) => {
          out[index]!.last_response = { code: row.last_response_code, status: row.last_response_status, message: row.last_response_message };
        });
      },
    },
    extraActions: [
      {
        name: 'Webhook Pings',
        description: 'POST to send the webhook a ping.',
        detail: true,
        path: 'pings/',
        docs: { responses: { '204': { description: 'A ping is queued.' } } },
        async handle(request, viewSet) {
          const [webhook] = await viewSet.represent([await viewSet.loadRow(request)]);
          await viewSet.transact((trx) => enqueuePing(trx, webhook!, request));
          viewSet.afterCommit(wake);
          return { status: 204 };
        },
      },
    ],
  });
}
