// `/api/v1/openapi.json` and `/api/v1/docs/` (API.md §5): the generated OpenAPI document, and the
// same document as a browsable page for people (`docs-page.ts`), which only answers HTML.

import { allowAny } from '../../auth/permissions.js';
import { HTML_TYPE, JSON_TYPE } from '../../http/renderers.js';
import type { View } from '../../http/view.js';
import { docsPage } from './docs-page.js';
import type { OpenApiDocument } from './types.js';

/**
 * The two views. `document` is called once, on the first request, so that it sees every view
 * registered by then, these two included.
 */
export function docsViews(document: () => OpenApiDocument): View[] {
  let built: OpenApiDocument | undefined;
  const current = () => (built ??= document());
  return [
    {
      name: 'OpenAPI Document',
      description: 'This API described in OpenAPI 3.1, generated from the resource declarations and views.',
      path: '/api/v1/openapi.json',
      mediaTypes: [JSON_TYPE],
      actions: {
        GET: {
          permission: allowAny,
          handle: async () => ({ body: current() }),
          docs: { responses: { '200': { description: 'This document.', schema: { type: 'object', required: ['openapi', 'info', 'paths'] } } } },
        },
      },
    },
    {
      name: 'API Documentation',
      description: 'The OpenAPI document as a readable page.',
      path: '/api/v1/docs/',
      mediaTypes: [HTML_TYPE],
      page: docsPage,
      actions: { GET: { permission: allowAny, handle: async () => ({ body: current() }) } },
    },
  ];
}
