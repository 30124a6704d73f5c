import { allowAny } from '../auth/permissions.js';
import { JSON_TYPE } from '../http/renderers.js';
import type { View } from '../http/view.js';
import { describeEvents } from '../resources/openapi/events.js';
import type { Resource } from '../resources/resource.js';

// `GET /api/v1/events/` (issue 14): every event a webhook may subscribe to, with its actions,
// a description and the JSON Schema of its body, the same schemas as the OpenAPI `webhooks`
// section (both come from `describeEvents`). `restwire listen --validate` checks deliveries
// against it.

/** The event catalog view; open to anyone, as the OpenAPI document is. */
export function eventCatalogView(resources: readonly Resource[]): View {
  const results = describeEvents(resources);
  const body = { count: results.length, next: null, previous: null, results };
  return {
    name: 'Event Catalog',
    description: 'Every webhook event: its actions, a description and the JSON Schema of its body.',
    path: '/api/v1/events/',
    mediaTypes: [JSON_TYPE],
    actions: {
      GET: {
        permission: allowAny,
        handle: async () => ({ body }),
        docs: {
          responses: {
            '200': {
              description: 'Every event, one page.',
              schema: {
                type: 'object',
                required: ['count', 'next', 'previous', 'results'],
                properties: {
                  count: { type: 'integer', minimum: 0 },
                  next: { type: 'null' },
                  previous: { type: 'null' },
                  results: {
                    type: 'array',
                    items: {
                      type: 'object',
                      required: ['name', 'collection', 'actions', 'description', 'schema'],
                      properties: {
                        name: { type: 'string', description: 'The event name, for a webhook’s `events`.' },
                        collection: { type: 'string' },
                        actions: { type: 'array', items: { type: 'string' } },
                        description: { type: 'string' },
                        schema: { type: 'object', description: 'The JSON Schema of the delivery body.' },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
  };
}
