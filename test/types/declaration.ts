// Compiled by test/types.test.ts (`tsc --noEmit -p test/types`), never run: a declaration as
// LOGIC.md writes one type-checks, its own code sees values typed from the fields (LOGIC.md §6),
// and each `@ts-expect-error` line is a mistake the user's editor must flag.

import { defineResource, field, type StoredRecordOf } from '../../src/index.js';

const monthsBetween = (from: string, to: string): number => Number(to.slice(0, 4)) - Number(from.slice(0, 4));

export const positions = defineResource({
  name: 'positions',
  fields: {
    title: field.string({ maxLength: 100, validators: [(v) => (v === v.toUpperCase() ? 'Not all capitals, please.' : null)] }),
    started_on: field.date(),
    finished_on: field.date({ required: false, nullable: true }),
    resume: field.reference('resumes', { onDelete: 'cascade' }),
    level: field.choice(['junior', 'senior'], { default: 'junior' }),
    hours: field.integer({ min: 0, validators: [(v) => (v > 60 ? ['Too many.', 'Rest.'] : null)] }),
    remote: field.boolean({ default: false }),
    months: field.computed(field.integer({ nullable: true }), (r) => (r.finished_on === null ? null : monthsBetween(r.started_on, r.finished_on))),
  },
  owner: true,
  validate(values, { errors, user, record }) {
    const title: string = values.title;
    const started: string = values.started_on;
    const finished: string | null = values.finished_on;
    const resume: string = values.resume;
    const resumeId: number = values.resume_id;
    const level: 'junior' | 'senior' = values.level;
    const hours: number = values.hours;
    const remote: boolean = values.remote;
    if (finished !== null && finished < started) errors.add('finished_on', 'Must be on or after started_on.');
    if (user === null || !user.roles.includes('admin')) errors.add(null, `${title} ${resume} ${resumeId} ${level} ${hours} ${remote}`);
    if (record !== null) {
      const id: number = record.id;
      const months: number | null = record.months;
      errors.add(null, `${id} ${months}`);
    }
    // @ts-expect-error a computed field is not among the values: it is not stored
    void values.months;
    // @ts-expect-error finished_on may be null
    const notNull: string = values.finished_on;
    // @ts-expect-error no such field
    void values.titel;
    void notNull;
    // The values are typed, not `any`: a number is no string, a path no number, a choice no other word.
    // @ts-expect-error hours is a number
    const hoursText: string = values.hours;
    // @ts-expect-error resume is its path
    const resumeNumber: number = values.resume;
    // @ts-expect-error level is junior or senior
    const otherLevel: 'lead' = values.level;
    // @ts-expect-error a record's months may be null
    const months: number = record!.months;
    void [hoursText, resumeNumber, otherLevel, months];
  },
});

const fields = { name: field.string({ maxLength: 50 }), born: field.date() };
export const people = defineResource({
  name: 'people',
  fields: {
    ...fields,
    // An annotated record is checked against the fields.
    initial: field.computed(field.string({ maxLength: 1 }), (r: StoredRecordOf<typeof fields>) => r.name.slice(0, 1)),
    // @ts-expect-error the record has no `nme`
    wrong: field.computed(field.string({ maxLength: 1 }), (r: StoredRecordOf<typeof fields>) => r.nme),
  },
});

export const mistakes = defineResource({
  name: 'mistakes',
  fields: {
    // @ts-expect-error a misspelt field type
    a: field.strnig({ maxLength: 10 }),
    // @ts-expect-error a misspelt option
    b: field.integer({ mni: 1 }),
    // @ts-expect-error a misspelt option beside a right one
    c: field.string({ maxLength: 10, nulable: true }),
    // @ts-expect-error a validator of an integer gets a number
    d: field.integer({ validators: [(v: string) => v] }),
    // @ts-expect-error a computed integer returns a number
    e: field.computed(field.integer(), () => 'many'),
  },
  // @ts-expect-error a misspelt option of the declaration
  ordering: ['a'],
});
