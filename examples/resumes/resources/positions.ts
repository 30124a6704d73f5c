// Jobs held, each belonging to one resume: deleting the resume deletes its positions (cascade),
// each with its own `position.deleted` event.
import { defineResource, field } from 'restwire';

export default defineResource({
  name: 'positions',
  label: 'Position',
  description: 'Positions held, each on one resume.',
  fields: {
    resume: field.reference('resumes', { onDelete: 'cascade' }),
    title: field.string({ maxLength: 200 }),
    employer: field.string({ maxLength: 200 }),
    started_on: field.date(),
    finished_on: field.date({ required: false, nullable: true }),
  },
  owner: true,
  orderings: ['started_on'],
  defaultOrdering: '-started_on',
  filters: { resume: ['exact'], employer: ['exact', 'contains'] },
  event: 'position',
});
