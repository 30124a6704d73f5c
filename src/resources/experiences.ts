// The seed's one named collection (SEED.md §2; API.md §2), declared as any user's collection is.
// Served when there is no resources folder; a folder that wants it re-exports it from 'restwire'.

import { and, authenticatedOrReadOnly, ownerOrReadOnly } from '../auth/permissions.js';
import { field } from './fields/index.js';
import { defineBuiltinResource } from './resource.js';

export const experiences = defineBuiltinResource({
  name: 'experiences',
  label: 'Experience',
  description: 'Experiences people liked or disliked. Anyone reads; signed-in users create; owners change their own.',
  fields: {
    title: field.string({ label: 'Title', maxLength: 200 }),
    q_like_dislike: field.text({ label: 'Like or dislike', maxLength: 1000 }),
  },
  owner: true,
  permission: and(authenticatedOrReadOnly, ownerOrReadOnly),
  orderings: ['created_at', 'title'],
  defaultOrdering: '-id',
  filters: { owner: ['exact'], title: ['exact'] },
  search: ['title'],
  event: 'experience',
  eventId: 1,
});
