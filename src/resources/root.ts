import { allowAny } from '../auth/permissions.js';
import { HTML_TYPE, JSON_TYPE } from '../http/renderers.js';
import type { View } from '../http/view.js';

/** `/api/v1/`: links to every collection (API.md §2), as DRF's DefaultRouter root. */
export function rootView(collections: readonly string[]): View {
  const body = Object.fromEntries(collections.map((name) => [name, `/api/v1/${name}/`]));
  return {
    name: 'Api Root',
    description: 'The collections this server offers.',
    path: '/api/v1/',
    mediaTypes: [JSON_TYPE, HTML_TYPE],
    actions: {
      GET: {
        permission: allowAny,
        handle: async () => ({ body }),
        docs: {
          responses: {
            '200': {
              description: 'The path of every collection.',
              schema: {
                type: 'object',
                required: [...collections],
                properties: Object.fromEntries(collections.map((name) => [name, { type: 'string', const: `/api/v1/${name}/` }])),
              },
            },
          },
        },
      },
    },
  };
}
