// One education record: where someone studied, what, and when. Resumes list them by path.
import { defineResource, field } from 'restwire';

export default defineResource({
  name: 'education',
  label: 'Education',
  description: 'Degrees and courses. Anyone reads; signed-in users add their own; owners change theirs.',
  fields: {
    institution: field.string({ maxLength: 200 }),
    degree: field.choice(['certificate', 'associate', 'bachelor', 'master', 'doctorate'], { default: 'bachelor' }),
    field_of_study: field.string({ maxLength: 200, required: false }),
    started_on: field.date({ min: '1900-01-01' }),
    finished_on: field.date({ required: false, nullable: true }),
    grade: field.decimal({ maxDigits: 4, decimalPlaces: 2, required: false, nullable: true, helpText: 'e.g. 3.85' }),
  },
  owner: true,
  orderings: ['started_on', 'institution'],
  defaultOrdering: '-started_on',
  filters: { degree: ['exact', 'in'], started_on: ['gte', 'lte'], institution: ['exact', 'contains'] },
  related: { resumes: { collection: 'resumes', field: 'education' } },
  event: 'education',
});
