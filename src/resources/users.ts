import { allowAny } from '../auth/permissions.js';
import { NotAuthenticated } from '../http/errors.js';
import type { View } from '../http/view.js';
import { defineResource } from './resource.js';
import { RECORD_MEDIA_TYPES, type ViewSet } from './viewset.js';

/** Users, read-only, each with the paths of their experiences (API.md §2). */
export const users = defineResource({
  name: 'users',
  label: 'User',
  description: 'The people who own records. Read-only.',
  table: 'users',
  actions: ['list', 'retrieve'],
  permission: allowAny,
  fields: {},
  readOnlyFields: { username: { label: 'Username', schema: { type: 'string' } } },
  related: { experiences: { table: 'experiences', column: 'owner_id', collection: 'experiences' } },
  orderings: { id: 'id', username: 'username' },
  defaultOrdering: 'id',
});

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
        permission: allowAny,
        async handle(request) {
          if (!request.user) throw new NotAuthenticated();
          const row = await viewSet.loadRow(viewSet.db, request.user.id, false);
          return { body: await viewSet.representOne(row) };
        },
      },
    },
  };
}
