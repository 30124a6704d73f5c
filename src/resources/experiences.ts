import { and, authenticatedOrReadOnly, ownerOrReadOnly } from '../auth/permissions.js';
import { text } from './fields.js';
import { containsFilter, defineResource, exactFilter, integerFilter } from './resource.js';

/** The seed's one named collection (SEED.md §2; API.md §2). */
export const experiences = defineResource({
  name: 'experiences',
  label: 'Experience',
  description: 'Experiences people liked or disliked. Anyone reads; signed-in users create; owners change their own.',
  table: 'experiences',
  actions: ['list', 'create', 'retrieve', 'update', 'partial_update', 'destroy'],
  permission: and(authenticatedOrReadOnly, ownerOrReadOnly),
  fields: {
    title: text({ label: 'Title', maxLength: 200 }),
    q_like_dislike: text({ label: 'Like or dislike', maxLength: 1000, multiline: true }),
  },
  owner: { field: 'owner', column: 'owner_id' },
  timestamps: true,
  orderings: { id: 'id', created_at: 'created_at', title: 'title' },
  defaultOrdering: '-id',
  filters: {
    owner: integerFilter('owner_id', 'Only records owned by this user id.'),
    title: exactFilter('title', 'Only records with exactly this title.'),
    search: containsFilter('title', 'Only records whose title contains this text, ignoring case.'),
  },
  event: 'experience',
});
