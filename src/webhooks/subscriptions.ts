import { isAuthenticated } from '../auth/permissions.js';
import type { User } from '../auth/user.js';
import type { Storage } from '../db/database.js';
import type { Kysely } from 'kysely';
import type { Database, WebhookRow } from '../db/schema.js';
import { assertRecordMatches } from '../http/conditional.js';
import { NotFound, ValidationError, type FieldErrors } from '../http/errors.js';
import { parsePageRequest, type CursorCodec } from '../http/pagination.js';
import { isFormBody } from '../http/parsers.js';
import { JSON_TYPE } from '../http/renderers.js';
import type { ApiRequest, View } from '../http/view.js';
import { readFilterParams, type QueryFilter } from '../resources/filters.js';
import { fetchKeysetPage, pageResponse } from '../resources/keyset.js';
import { RECORD_MEDIA_TYPES, parseId } from '../resources/viewset.js';
import { TargetRefusedError, checkTargetUrl } from './address-guard.js';
import { pingPayload } from './events.js';
import { enqueueDeliveries } from './outbox.js';
import { InvalidSecretError, generateSecret, parseSecret, type SecretBox } from './secrets.js';

/**
 * `/api/v1/webhooks/`: each user's own subscriptions (API.md §4). Another user's webhook is a
 * 404, as on GitHub: its existence is not theirs to know.
 */
export const MAX_WEBHOOKS_PER_USER = 20;
/** A rotated-out secret keeps signing for this long (API.md §4 "Secret rotation"). */
export const SECRET_OVERLAP_MS = 24 * 3_600_000;

export const WEBHOOK_COLUMNS = ['url', 'id', 'target_url', 'events', 'ordering', 'filter', 'active', 'created_at', 'last_response', 'disabled_reason'];

/** A webhook's `ordering` (issue 14): `record` delivers each record's events one at a time, in commit order. */
export const ORDERINGS = ['none', 'record'] as const;

export interface WebhookViewOptions {
  readonly storage: Storage;
  readonly secrets: SecretBox;
  readonly cursors: CursorCodec;
  readonly allowPrivate: boolean;
  /** Event kinds a webhook may subscribe to, besides `*`. */
  readonly eventNames: readonly string[];
  /** Per event, the list filters of its collection: what a webhook's `filter` may use. */
  readonly eventFilters: ReadonlyMap<string, readonly QueryFilter[]>;
  /** Wakes this process's dispatcher after a commit that enqueued work. */
  readonly wake: () => void;
}

/** A webhook as clients see it: never its secret. */
export function representWebhook(row: WebhookRow): Record<string, unknown> {
  return {
    url: `/api/v1/webhooks/${row.id}/`,
    id: row.id,
    target_url: row.target_url,
    events: JSON.parse(row.events) as string[],
    ordering: row.ordering,
    filter: row.filter === null ? null : (JSON.parse(row.filter) as Record<string, string>),
    active: row.active === 1,
    created_at: new Date(row.created_at).toISOString(),
    last_response: {
      code: row.last_response_code,
      status: row.last_response_status,
      message: row.last_response_message,
    },
    disabled_reason: row.disabled_reason,
  };
}

/** Loads the caller's webhook or answers 404; `lock` holds its row for an update. */
export async function loadOwnWebhook(
  storage: Storage,
  id: number,
  user: User,
  { executor = storage.db, lock = false }: { executor?: Kysely<Database>; lock?: boolean } = {},
): Promise<WebhookRow> {
  const query = executor.selectFrom('webhooks').selectAll().where('id', '=', id).where('owner_id', '=', user.id);
  const row = await (lock ? storage.lockForUpdate(query) : query).executeTakeFirst();
  if (!row) throw new NotFound();
  return row;
}

interface WebhookInput {
  target_url?: string;
  events?: string[];
  ordering?: (typeof ORDERINGS)[number];
  /** JSON text, or null to clear. */
  filter?: string | null;
  active?: boolean;
  secret?: string;
}

/** Validates a webhook body; `target_url` is resolved and checked against private ranges. */
async function validateWebhook(
  data: Record<string, unknown>,
  {
    partial,
    allowPrivate,
    eventNames,
    eventFilters,
    form,
  }: { partial: boolean; allowPrivate: boolean; eventNames: readonly string[]; eventFilters: ReadonlyMap<string, readonly QueryFilter[]>; form: boolean },
): Promise<WebhookInput> {
  const errors: FieldErrors = {};
  const values: WebhookInput = {};

  if (data.target_url === undefined) {
    if (!partial) errors.target_url = ['This field is required.'];
  } else if (typeof data.target_url !== 'string' || data.target_url.trim() === '') {
    errors.target_url = ['Enter a valid URL.'];
  } else if (data.target_url.length > 2000) {
    errors.target_url = ['Ensure this field has no more than 2000 characters.'];
  } else {
    try {
      await checkTargetUrl(data.target_url.trim(), { allowPrivate });
      values.target_url = data.target_url.trim();
    } catch (error) {
      errors.target_url = [error instanceof TargetRefusedError ? error.message : 'Enter a valid URL.'];
    }
  }

  if (data.events !== undefined) {
    // A form sends one string, commas separating several; JSON has lists and must use one.
    const events = form && typeof data.events === 'string' ? data.events.split(',').map((e) => e.trim()) : data.events;
    const allowed = ['*', ...eventNames];
    if (!Array.isArray(events) || events.length === 0 || !events.every((e) => typeof e === 'string')) {
      errors.events = ['Expected a non-empty list of event names.'];
    } else {
      const unknown = events.filter((e) => !allowed.includes(e as string));
      if (unknown.length) errors.events = [`Unknown event ${JSON.stringify(unknown[0])}; choose from: ${allowed.join(', ')}.`];
      else values.events = [...new Set(events as string[])];
    }
  }

  if (data.ordering !== undefined) {
    if ((ORDERINGS as readonly unknown[]).includes(data.ordering)) values.ordering = data.ordering as WebhookInput['ordering'];
    else errors.ordering = [`"${String(data.ordering)}" is not a valid choice; choose from: ${ORDERINGS.join(', ')}.`];
  }

  if (data.filter !== undefined) {
    const read = parseWebhookFilter(form && typeof data.filter === 'string' ? parseJsonOr(data.filter) : data.filter, eventFilters);
    if ('errors' in read) errors.filter = read.errors;
    else values.filter = read.filter;
  }

  if (data.active !== undefined) {
    if (typeof data.active === 'boolean') values.active = data.active;
    else if (data.active === 'true' || data.active === 'false') values.active = data.active === 'true';
    else errors.active = ['Must be a valid boolean.'];
  }

  if (data.secret !== undefined) {
    try {
      values.secret = parseSecret(data.secret);
    } catch (error) {
      errors.secret = [error instanceof InvalidSecretError ? error.message : 'Invalid secret.'];
    }
  }

  if (Object.keys(errors).length) throw new ValidationError(errors);
  return values;
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

/** The collection and record views for webhooks, and the ping action. */
export function webhookViews(options: WebhookViewOptions): View[] {
  const { storage, secrets, cursors, allowPrivate, eventNames, eventFilters, wake } = options;
  const db = storage.db;
  const sender = (user: User) => ({ login: user.username, id: user.id });

  async function enqueuePing(trx: Parameters<typeof enqueueDeliveries>[1], row: WebhookRow, user: User): Promise<void> {
    const hook = representWebhook(row);
    const body = JSON.stringify(pingPayload(hook, sender(user)));
    await enqueueDeliveries(storage, trx, [{ webhookId: row.id, event: 'ping', action: null, body }]);
  }

  const list = {
    permission: isAuthenticated,
    async handle(request: ApiRequest) {
      const page = parsePageRequest(request.query, { id: 'id' }, '-id', cursors);
      const base = db.selectFrom('webhooks').selectAll().where('owner_id', '=', request.user!.id);
      const found = await fetchKeysetPage<WebhookRow>(base, page, { path: '/api/v1/webhooks/', query: request.query, cursors });
      return pageResponse(found, found.rows.map(representWebhook));
    },
  };

  const create = {
    permission: isAuthenticated,
    async handle(request: ApiRequest) {
      const user = request.user!;
      const form = isFormBody(request.raw.headers['content-type']);
      const input = await validateWebhook(await request.data(), { partial: false, allowPrivate, eventNames, eventFilters, form });
      const secret = input.secret ?? generateSecret();
      const now = Date.now();
      const row = await db.transaction().execute(async (trx) => {
        // One user's creations take turns, so the cap holds under concurrency.
        await storage.lockForUpdate(trx.selectFrom('users').select('id').where('id', '=', user.id)).execute();
        const { n } = await trx
          .selectFrom('webhooks')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('owner_id', '=', user.id)
          .executeTakeFirstOrThrow();
        if (Number(n) >= MAX_WEBHOOKS_PER_USER) {
          throw new ValidationError({ non_field_errors: [`A user may have at most ${MAX_WEBHOOKS_PER_USER} webhooks.`] });
        }
        const inserted = await trx
          .insertInto('webhooks')
          .values({
            owner_id: user.id,
            target_url: input.target_url!,
            events: JSON.stringify(input.events ?? ['*']),
            ordering: input.ordering ?? 'none',
            filter: input.filter ?? null,
            active: input.active === false ? 0 : 1,
            secret_sealed: secrets.seal(secret),
            previous_secret_sealed: null,
            previous_secret_expires_at: null,
            last_response_code: null,
            last_response_status: 'unused',
            last_response_message: null,
            disabled_reason: null,
            failing_since: null,
            created_at: now,
            updated_at: now,
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        // A new webhook is greeted with a ping (API.md §4); one created inactive is not, yet.
        if (inserted.active === 1) await enqueuePing(trx, inserted, user);
        return inserted;
      });
      wake();
      // The secret is shown once, here, and never again (API.md §4).
      const body = { ...representWebhook(row), secret };
      return { status: 201, body, headers: { location: `/api/v1/webhooks/${row.id}/`, 'cache-control': 'no-store' } };
    },
  };

  const retrieve = {
    permission: isAuthenticated,
    async handle(request: ApiRequest) {
      return { body: representWebhook(await loadOwnWebhook(storage, parseId(request.params.id), request.user!)) };
    },
  };

  function update(partial: boolean) {
    return {
      permission: isAuthenticated,
      async handle(request: ApiRequest) {
        const user = request.user!;
        const id = parseId(request.params.id);
        await loadOwnWebhook(storage, id, user); // 404 before judging the body
        // Validated outside the transaction: checking target_url resolves DNS.
        const form = isFormBody(request.raw.headers['content-type']);
        const input = await validateWebhook(await request.data(), { partial, allowPrivate, eventNames, eventFilters, form });
        // Read and write in one transaction, the row locked: two rotations at once must not lose a secret.
        const row = await db.transaction().execute(async (trx) => {
          const current = await loadOwnWebhook(storage, id, user, { executor: trx, lock: true });
          assertRecordMatches(request.raw.headers['if-match'], representWebhook(current));
          const now = Date.now();
          const changes = {
            ...(input.target_url !== undefined ? { target_url: input.target_url } : {}),
            ...(input.events !== undefined ? { events: JSON.stringify(input.events) } : {}),
            ...(input.ordering !== undefined ? { ordering: input.ordering } : {}),
            ...(input.filter !== undefined ? { filter: input.filter } : {}),
            // Re-enabling clears why it was disabled (API.md §6 "Webhook records").
            ...(input.active !== undefined
              ? { active: input.active ? 1 : 0, ...(input.active ? { disabled_reason: null, failing_since: null } : {}) }
              : {}),
            // Only the latest rotation overlaps: the secret before the previous one stops at once.
            ...(input.secret !== undefined
              ? {
                  secret_sealed: secrets.seal(input.secret),
                  previous_secret_sealed: current.secret_sealed,
                  previous_secret_expires_at: now + SECRET_OVERLAP_MS,
                }
              : {}),
            updated_at: now,
          };
          return trx.updateTable('webhooks').set(changes).where('id', '=', current.id).returningAll().executeTakeFirstOrThrow();
        });
        if (input.active) wake();
        return { body: representWebhook(row) };
      },
    };
  }

  const destroy = {
    permission: isAuthenticated,
    async handle(request: ApiRequest) {
      const current = await loadOwnWebhook(storage, parseId(request.params.id), request.user!);
      assertRecordMatches(request.raw.headers['if-match'], representWebhook(current));
      await db.deleteFrom('webhooks').where('id', '=', current.id).execute();
      return { status: 204 };
    },
  };

  const ping = {
    permission: isAuthenticated,
    async handle(request: ApiRequest) {
      const user = request.user!;
      const row = await loadOwnWebhook(storage, parseId(request.params.id), user);
      await db.transaction().execute((trx) => enqueuePing(trx, row, user));
      wake();
      return { status: 204 };
    },
  };

  // DRF-style OPTIONS metadata (API.md §1): the writable fields and what they accept.
  const fields = (required: boolean) => ({
    url: { type: 'field', required: false, read_only: true, label: 'Url' },
    id: { type: 'integer', required: false, read_only: true, label: 'ID' },
    target_url: { type: 'url', required, read_only: false, label: 'Target url', max_length: 2000 },
    events: { type: 'list', required: false, read_only: false, label: 'Events', child: { type: 'choice', choices: ['*', ...eventNames] } },
    ordering: { type: 'choice', required: false, read_only: false, label: 'Ordering', choices: [...ORDERINGS] },
    filter: { type: 'nested object', required: false, read_only: false, label: 'Filter' },
    active: { type: 'boolean', required: false, read_only: false, label: 'Active' },
    secret: { type: 'string', required: false, read_only: false, write_only: true, label: 'Secret' },
    created_at: { type: 'datetime', required: false, read_only: true, label: 'Created at' },
    last_response: { type: 'nested object', required: false, read_only: true, label: 'Last response' },
    disabled_reason: { type: 'string', required: false, read_only: true, label: 'Disabled reason' },
  });

  return [
    {
      name: 'Webhook List',
      description:
        "The caller's webhook subscriptions. `ordering`: `none` (default) or `record`, each record's events delivered one at a time in commit order. " +
        '`filter`: per event, a query string in that collection\'s list filter language (`{"experience": "search=tea"}`); `updated` is sent when the record matches after the change or matched before it, and the body\'s `filter` says which.',
      path: '/api/v1/webhooks/',
      mediaTypes: RECORD_MEDIA_TYPES,
      // The 201 of a create is the one response with the secret; CSV shows it there too.
      columns: [...WEBHOOK_COLUMNS, 'secret'],
      actions: { GET: list, POST: create },
      metadata: () => ({ actions: { POST: fields(true) } }),
    },
    {
      name: 'Webhook Instance',
      description: 'One webhook subscription. PATCH a new `secret` to rotate it with a 24-hour overlap.',
      path: '/api/v1/webhooks/:id/',
      mediaTypes: RECORD_MEDIA_TYPES,
      columns: WEBHOOK_COLUMNS,
      actions: { GET: retrieve, PUT: update(false), PATCH: update(true), DELETE: destroy },
      metadata: () => ({ actions: { PUT: fields(true) } }),
    },
    {
      name: 'Webhook Pings',
      description: 'POST to send the webhook a ping.',
      path: '/api/v1/webhooks/:id/pings/',
      mediaTypes: [JSON_TYPE],
      actions: { POST: ping },
    },
  ];
}
