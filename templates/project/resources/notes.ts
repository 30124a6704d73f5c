// An example collection, served at /api/v1/notes/. Every file in this folder default-exports one
// declaration; add a file to add a collection. After a change, run `npm run makemigrations`
// (it writes a file to migrations/: review and commit it), then `npm start` (it applies it).
import { defineResource, field, permission } from 'restwire';

export default defineResource({
  name: 'notes', // the path (/api/v1/notes/) and the table
  fields: {
    // Field types: string, text, integer, decimal, boolean, date, datetime, email, url,
    // choice([...]), json, reference('collection') and references('collection'). Each takes
    // required, default, nullable, unique, readOnly, writeOnly, label and helpText.
    title: field.string({ maxLength: 200 }),
    body: field.text({ maxLength: 10_000, required: false }),
    pinned: field.boolean({ default: false }),
  },
  owner: true, // a read-only `owner`: the user who created the note
  // Anyone reads; signed-in users create; only a note's owner changes or deletes it.
  permission: permission.and(permission.authenticatedOrReadOnly, permission.ownerOrReadOnly),
  orderings: ['title'], // ?ordering=title or ?ordering=-title (and id)
  filters: { pinned: ['exact'] }, // ?pinned=true
  search: ['title', 'body'], // ?search=…
  event: 'note', // webhook events note.created, note.updated, note.deleted; omit for none
});
