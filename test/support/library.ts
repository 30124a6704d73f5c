/**
 * A user's library project: declaration files as a user writes them (real TypeScript, type
 * annotations included), covering every field type and the three delete rules.
 * `authors` has no event (a subscription to it is refused); `reviews` fixes its `eventId`.
 */
export const AUTHORS = `import { defineResource, field } from 'restwire';

const nameLength: number = 100;
interface Named { name: string }
const example: Named = { name: 'Ursula K. Le Guin' };

export default defineResource({
  name: 'authors',
  description: \`Writers, e.g. \${example.name}.\`,
  fields: {
    name: field.string({ maxLength: nameLength, unique: true }),
    email: field.email({ required: false }),
    website: field.url({ required: false }),
    born: field.date({ required: false }),
    active: field.boolean({ default: true }),
  },
  orderings: ['name'],
  filters: { name: ['exact', 'contains'] },
  related: { books: { collection: 'books', field: 'author' } },
});
`;

export const TAGS = `import { defineResource, field } from 'restwire';
import type { Resource } from 'restwire';

const tags: Resource = defineResource({
  name: 'tags',
  fields: { name: field.string({ maxLength: 50, unique: true }) },
  orderings: ['name'],
});
export default tags;
`;

export const BOOKS = `import { defineResource, field, permission } from 'restwire';

type Genre = 'fiction' | 'nonfiction' | 'poetry';
const genres: Genre[] = ['fiction', 'nonfiction', 'poetry'];
const max: number = 200;

export default defineResource({
  name: 'books',
  label: 'Book',
  description: 'Books on the shelf.',
  fields: {
    title: field.string({ maxLength: max }),
    year: field.integer({ min: 0, max: 3000, required: false }),
    isbn: field.string({ maxLength: 17, unique: true, required: false }),
    genre: field.choice(genres, { default: 'fiction' }),
    price: field.decimal({ maxDigits: 6, decimalPlaces: 2 }),
    published_at: field.datetime({ required: false }),
    extra: field.json({ required: false }),
    notes: field.text({ maxLength: 2000, required: false }),
    author: field.reference('authors', { onDelete: 'protect' }),
    tags: field.references('tags'),
  },
  owner: true,
  permission: permission.and(permission.authenticatedOrReadOnly, permission.ownerOrReadOnly),
  orderings: ['title', 'year', 'price'],
  defaultOrdering: '-id',
  filters: { title: ['exact', 'contains'], year: ['exact', 'gte', 'lte'], author: ['exact'], genre: ['exact'] },
  search: ['title', 'notes'],
  event: 'book',
});
`;

export const REVIEWS = `import { defineResource, field } from 'restwire';

export default defineResource({
  name: 'reviews',
  fields: {
    book: field.reference('books', { onDelete: 'cascade' }),
    rating: field.integer({ min: 1, max: 5 }),
    body: field.text({ maxLength: 2000, required: false }),
  },
  owner: true,
  filters: { book: ['exact'] },
  event: 'review',
  eventId: 77,
});
`;

export const SHELVES = `import { defineResource, field } from 'restwire';

export default defineResource({
  name: 'shelves',
  fields: {
    name: field.string({ maxLength: 80 }),
    favourite: field.reference('books', { nullable: true, required: false, onDelete: 'setNull' }),
  },
  event: 'shelf',
});
`;

export const LIBRARY: Record<string, string> = {
  'authors.ts': AUTHORS,
  'tags.ts': TAGS,
  'books.ts': BOOKS,
  'reviews.ts': REVIEWS,
  'shelves.ts': SHELVES,
};

/** A small one-collection project for migration steps: `notes` with the given fields source. */
export const notesResource = (fields: string, extra = ''): string => `import { defineResource, field } from 'restwire';

export default defineResource({
  name: 'notes',
  fields: {
${fields}
  },
${extra}});
`;
