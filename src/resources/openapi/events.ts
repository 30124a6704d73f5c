// The events a webhook may subscribe to and the JSON Schema of each body, generated from the
// declarations (issue 14): `describeEvents` is the one source of both the event catalog
// (`GET /api/v1/events/`, webhooks/catalog.ts) and the document's OpenAPI 3.1 `webhooks`
// section (`eventWebhooks`: the request each receiver gets, with its headers).

import { JSON_TYPE } from '../../http/renderers.js';
import { readsAreShared } from '../access/compile.js';
import type { Resource } from '../resource.js';
import { recordSchema } from './schemas.js';
import type { ParameterObject, PathItemObject, SchemaObject } from './types.js';

/** A user as an event names it: the `sender`, and the `owner` of its `repository`. */
const ACTOR: SchemaObject = {
  type: 'object',
  required: ['login', 'id'],
  properties: { login: { type: 'string' }, id: { type: 'integer', minimum: 0, description: 'The user; 0 for an anonymous caller a collection lets write.' } },
};

/** One event a webhook may subscribe to, as the catalog (`GET /api/v1/events/`) lists it. */
export interface EventDescription {
  readonly name: string;
  readonly collection: string;
  readonly actions: readonly string[];
  readonly description: string;
  /** JSON Schema 2020-12 of the body: the `webhooks` section's, from the same function. */
  readonly schema: SchemaObject;
}

/**
 * Every resource event and the JSON Schema of its body, generated from the declarations: the one
 * source of both the event catalog and the OpenAPI `webhooks` section (issue 14).
 */
export function describeEvents(resources: readonly Resource[]): EventDescription[] {
  const events: EventDescription[] = [];
  for (const resource of resources) {
    if (!resource.event) continue;
    const record = recordSchema(resource);
    const subject: SchemaObject = {
      ...record,
      description: `The ${resource.label.toLowerCase()} (after the change; before it for \`deleted\`). \`url\` is absolute; \`number\` is its id.`,
      required: [...(record.required as string[]), 'number'],
      properties: {
        ...(record.properties as Record<string, SchemaObject>),
        url: { type: 'string', format: 'uri', description: 'The record’s absolute URL under PUBLIC_URL.' },
        number: { type: 'integer', minimum: 1 },
      },
    };
    const changes: SchemaObject = {
      type: 'object',
      description: 'For `updated`: each changed field’s previous value.',
      properties: Object.fromEntries(
        Object.entries(resource.fields)
          .filter(([, field]) => !field.writeOnly)
          .map(([name]) => [name, { type: 'object', required: ['from'], properties: { from: (record.properties as Record<string, SchemaObject>)[name]! } }]),
      ),
      additionalProperties: false,
    };
    const body: SchemaObject = {
      type: 'object',
      title: `${resource.event} event`,
      required: ['action', resource.event, 'repository', 'sender'],
      properties: {
        action: { type: 'string', enum: [...EVENT_ACTIONS] },
        // ACCESS.md §4: an update that takes the record out of the owner's sight names it only.
        [resource.event]: readsAreShared(resource.access) ? subject : { anyOf: [subject, LEFT_SIGHT] },
        changes,
        repository: {
          type: 'object',
          required: ['id', 'full_name', 'owner'],
          properties: {
            id: { type: 'integer', minimum: 1, description: 'Stable per collection.' },
            full_name: { type: 'string', description: `\`<owner login>/${resource.name}\`.` },
            owner: ACTOR,
          },
        },
        sender: ACTOR,
        filter: FILTER_VERDICT,
        ...(readsAreShared(resource.access) ? {} : { access: ACCESS_CHANGE }),
      },
    };
    events.push({
      name: resource.event,
      collection: resource.name,
      actions: EVENT_ACTIONS,
      description: `${capitalize(withArticle(resource.label.toLowerCase()))} of \`${resource.name}\` was created, updated or deleted.${readsAreShared(resource.access) ? '' : ' Heard only by webhooks whose owner may read the record; `access` tells of an update that brought it into or took it out of their sight.'}`,
      schema: body,
    });
  }
  events.push(PING);
  return events;
}

/** `experience` → `an experience`, `user` → `a user` (by the first letter: "an hour" is rare in labels). */
function withArticle(noun: string): string {
  return `${/^[aeiou]/i.test(noun) ? 'an' : 'a'} ${noun}`;
}

const capitalize = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

/**
 * `ping` (API.md §4), sent to every receiver whatever its `events`: when a webhook is created
 * and on `POST /api/v1/webhooks/{id}/pings/` (webhooks/events.ts `pingPayload`).
 */
const PING: EventDescription = {
  name: 'ping',
  collection: 'webhooks',
  actions: [],
  description: 'Sent to a webhook when it is created and on `POST /api/v1/webhooks/{id}/pings/`, whatever its `events`.',
  schema: {
    type: 'object',
    title: 'ping event',
    required: ['zen', 'hook_id', 'hook', 'sender'],
    properties: {
      zen: { type: 'string', description: 'A line of zen.' },
      hook_id: { type: 'integer', minimum: 1 },
      hook: {
        type: 'object',
        description: 'The webhook as its GET shows it (never its secret), with `type`.',
        required: ['type', 'id'],
        properties: { type: { type: 'string', enum: ['Repository'] }, id: { type: 'integer', minimum: 1 } },
      },
      sender: ACTOR,
    },
  },
};

const EVENT_ACTIONS = ['created', 'updated', 'deleted'] as const;

/** Only in deliveries to a webhook with a `filter` for the event (issue 14). */
const FILTER_VERDICT: SchemaObject = {
  type: 'object',
  description: 'Sent to a webhook with a `filter` for this event: whether the record matched it before and after the change.',
  required: ['matched_before', 'matched_after'],
  properties: { matched_before: { type: 'boolean' }, matched_after: { type: 'boolean' } },
  additionalProperties: false,
};

/** The subject of an `updated` body whose record left the owner's sight (ACCESS.md §4). */
const LEFT_SIGHT: SchemaObject = {
  type: 'object',
  description: 'When `access.readable_after` is false: which record left the webhook owner’s sight, nothing else of it (and no `changes`).',
  required: ['url', 'number', 'id'],
  properties: { url: { type: 'string', format: 'uri' }, number: { type: 'integer', minimum: 1 }, id: { type: 'integer', minimum: 1 } },
  additionalProperties: false,
};

/** Only in `updated` bodies of a collection with a read rule, when the record entered or left the owner's sight (ACCESS.md §4). */
const ACCESS_CHANGE: SchemaObject = {
  type: 'object',
  description:
    'Sent when an update brought the record into the webhook owner’s sight (`readable_before` false: a full body) or took it out (`readable_after` false: the subject names the record only, so a receiver keeping a copy can drop it). Absent otherwise.',
  required: ['readable_before', 'readable_after'],
  properties: { readable_before: { type: 'boolean' }, readable_after: { type: 'boolean' } },
  additionalProperties: false,
};

/**
 * The headers of every delivery besides Content-Type and Content-Length (API.md §4 "A delivery"),
 * as the dispatcher (`webhooks/dispatcher.ts`), `signDelivery` (`webhooks/signing.ts`) and
 * `sendAttempt` (`webhooks/send-attempt.ts`) set them; `test/openapi.test.ts` checks a received
 * ping against this list.
 */
const DELIVERY_HEADERS: Readonly<Record<string, string>> = {
  'X-Service-Delivery': 'The delivery id (a UUID); every attempt and redelivery keeps it.',
  'X-Service-Event': 'The event name.',
  'X-Service-Hook-ID': 'The webhook’s id.',
  'X-Hub-Signature': '`sha1=` and the hex HMAC-SHA1 of the raw body, keyed with the secret string.',
  'X-Hub-Signature-256': '`sha256=` and the hex HMAC-SHA256 of the raw body, keyed with the secret string.',
  'webhook-id': 'Standard Webhooks: the delivery id.',
  'webhook-timestamp': 'Standard Webhooks: unix seconds of this attempt (each attempt is signed afresh).',
  'webhook-signature': 'Standard Webhooks: `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`; one per secret during a rotation, space-separated.',
  'User-Agent': '`restwire-hookshot/<version>`.',
};

/**
 * The OpenAPI 3.1 `webhooks` section (RESOURCES.md §4): for every event, the request a receiver
 * gets, its headers and a JSON Schema of its body generated from the declaration.
 */
export function eventWebhooks(resources: readonly Resource[]): Record<string, PathItemObject> {
  const webhooks: Record<string, PathItemObject> = {};
  const headers = Object.entries(DELIVERY_HEADERS).map(
    ([name, description]): ParameterObject => ({ name, in: 'header', required: true, description, schema: { type: 'string' } }),
  );
  for (const event of describeEvents(resources)) {
    const resource = resources.find((candidate) => candidate.name === event.collection && candidate.event === event.name);
    webhooks[event.name] = {
      post: {
        operationId: `event_${event.name}`,
        summary: resource ? `${event.name}: ${withArticle(resource.label.toLowerCase())} was created, updated or deleted` : `${event.name}: a webhook is greeted`,
        description: resource
          ? `Sent to webhooks subscribed to \`${event.name}\` or \`*\` when a record of \`${resource.name}\` changes, in the transaction of the change${readsAreShared(resource.access) ? '' : ', to those whose owner may read the record (after the change for `created`, before it for `deleted`, either for `updated`)'}.`
          : event.description,
        tags: [event.collection],
        parameters: headers,
        requestBody: { required: true, content: { [JSON_TYPE]: { schema: event.schema } } },
        responses: { '2XX': { description: 'Received. Anything else is retried on the schedule.' } },
      },
    };
  }
  return webhooks;
}
