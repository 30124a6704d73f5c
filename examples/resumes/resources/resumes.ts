// Resumes listing the education records of each (see education.ts), written and shown as
// paths: a `references` field, stored in a join table.
import { defineResource, field, permission } from 'restwire';

export default defineResource({
  name: 'resumes',
  label: 'Resume',
  description: 'Resumes, each listing education records by path.',
  fields: {
    full_name: field.string({ maxLength: 150 }),
    // Shown to the resume's owner and to admins only (ACCESS.md §3); everyone else gets no `email` member.
    email: field.email({ unique: true, access: { read: 'owner=@me' } }),
    headline: field.text({ maxLength: 2000, required: false }),
    website: field.url({ required: false, nullable: true }),
    years_of_experience: field.integer({ min: 0, max: 80, default: 0 }),
    open_to_work: field.boolean({ default: false }),
    available_from: field.datetime({ required: false, nullable: true }),
    skills: field.json({ default: [], maxBytes: 4096, helpText: 'A list of skills, e.g. ["sql", "typescript"].' }),
    education: field.references('education', { maxItems: 20 }),
    // Kept by the positions' hooks (positions.ts): the latest position not yet finished.
    current_position: field.string({ maxLength: 420, readOnly: true, nullable: true, required: false }),
  },
  owner: true,
  permission: permission.and(permission.authenticatedOrReadOnly, permission.ownerOrReadOnly),
  orderings: ['full_name', 'years_of_experience'],
  filters: { open_to_work: ['exact'], years_of_experience: ['gte', 'lte'], education: ['exact'] },
  search: ['full_name', 'headline'],
  related: { positions: { collection: 'positions', field: 'resume' } },
  event: 'resume',
});
