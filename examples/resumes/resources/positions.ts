// Jobs held, each belonging to one resume: deleting the resume deletes its positions (cascade),
// each with its own `position.deleted` event. Their own logic: a position ends on or after it
// starts (`validate`), hooks keep the resume's
// `current_position` (the latest position not yet finished) in the same transaction as the
// change, and `POST /api/v1/positions/{id}/close/` ends a position.
import { defineResource, field } from 'restwire';
import type { CollectionHandle } from 'restwire';

const today = () => new Date().toISOString().slice(0, 10);

/** Sets the resume's `current_position` from its positions, as they are in this transaction. */
async function refreshCurrent(collection: (name: string) => CollectionHandle, resumeId: number) {
  const current = (await collection('positions').list(`resume=${resumeId}`))
    .filter((position) => position.finished_on === null)
    .sort((a, b) => String(b.started_on).localeCompare(String(a.started_on)))[0];
  await collection('resumes').update(resumeId, { current_position: current ? `${current.title} at ${current.employer}` : null });
}

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
  // Dates are ISO text, so they compare as strings.
  validate(values, { errors }) {
    if (values.finished_on !== null && String(values.finished_on) < String(values.started_on)) {
      errors.add('finished_on', 'Must be on or after started_on.');
    }
  },
  hooks: {
    async afterCreate({ record, collection }) {
      await refreshCurrent(collection, Number(record.resume_id));
    },
    async afterUpdate({ record, collection }) {
      await refreshCurrent(collection, Number(record.resume_id));
    },
    async afterDelete({ record, collection }) {
      // A cascade from the resume runs no hooks: the resume is gone with it.
      await refreshCurrent(collection, Number(record.resume_id));
    },
  },
  actions: {
    close: {
      detail: true,
      method: 'POST',
      access: 'owner=@me',
      description: 'Ends the position: on `on` (a date), or today.',
      input: { on: field.date({ required: false }) },
      async handle({ record, input, collection }) {
        return { body: await collection('positions').update(record.id, { finished_on: input.on ?? today() }) };
      },
    },
  },
});
