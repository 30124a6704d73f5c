import { allowAny } from '../auth/permissions.js';
import { JSON_TYPE } from '../http/renderers.js';
import type { View } from '../http/view.js';
import { describeEvents } from '../resources/openapi.js';
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
    actions: { GET: { permission: allowAny, handle: async () => ({ body }) } },
  };
}
