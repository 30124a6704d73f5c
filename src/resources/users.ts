import { allowAny, isAuthenticated } from '../auth/permissions.js';
import type { View } from '../http/view.js';
import { field } from './fields/index.js';
import { defineBuiltinResource, type Resource } from './resource.js';
import { RECORD_MEDIA_TYPES, type ViewSet } from './viewset/index.js';

/**
 * Users, read-only (API.md §2). Each shows the paths of the records it owns in every collection
 * with `owner: true` (`experiences`, `books` …): the registry adds those reverse lists.
 */
export const users = defineBuiltinResource({
  name: 'users',
  label: 'User',
  description: 'The people who own records. Read-only.',
  actions: ['list', 'retrieve'],
  permission: allowAny,
  // Set by restwire (createuser, signup), never by a request: read-only, and never null.
  fields: { username: field.string({ label: 'Username', maxLength: 150, readOnly: true, required: true }) },
  timestamps: false,
  orderings: ['username'],
  defaultOrdering: 'id',
});

/** `users` with a reverse list for every collection whose records have an owner. */
export function usersOwning(collections: readonly Resource[]): Resource {
  const related = Object.fromEntries(collections.filter((c) => c.owner).map((c) => [c.name, { collection: c.name, field: 'owner' }]));
  return { ...users, related };
}

/** `/api/v1/users/me/`: the caller's own record, or 401 for an anonymous caller. */
export function meView(viewSet: ViewSet): View {
  return {
    name: 'Current User',
    description: 'The authenticated caller.',
    path: '/api/v1/users/me/',
    mediaTypes: RECORD_MEDIA_TYPES,
    columns: viewSet.collection.columns,
    actions: {
      GET: {
        // The permission, not the handler, refuses an anonymous caller (401), so that the OpenAPI
        // document, which asks the permission, does not offer this to one (issue 22 item 19).
        permission: isAuthenticated,
        docs: { responses: { '200': { description: 'The caller’s own user record.', schema: { $ref: '#/components/schemas/User' } } } },
        async handle(request) {
          const row = await viewSet.loadRow(viewSet.db, request.user!.id, false);
          return { body: await viewSet.representOne(row) };
        },
      },
    },
  };
}
