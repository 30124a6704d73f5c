// The `users` collection (API.md §2), a declaration served by the one viewset like any other. What
// is special is in its hooks: signup (API.md §6) is its create action, offered only while
// ALLOW_SIGNUP is on (`withSignup`; else POST is a 405), with Django's username and password rules
// as `validate`, the taken-username check as `beforeCreate`; and `me/` is an extra action.

import { allowAny, isAuthenticated } from '../auth/permissions.js';
import { hashPassword } from '../auth/passwords.js';
import { passwordProblems, usernameProblems } from '../auth/users.js';
import { ValidationError, type FieldErrors } from '../http/errors.js';
import { MESSAGES } from '../http/messages.js';
import { CREDENTIALS } from './auth-views.js';
import type { Field, FieldResult } from './fields/field.js';
import { field } from './fields/index.js';
import { defineBuiltinResource, type Resource } from './resource.js';

const TAKEN = 'A user with that username already exists.';

/**
 * A credential as Django's forms read it: an empty value is a missing one (null too, see the
 * `validate` hook: the viewset answers a null before the field is asked); a username is trimmed
 * (API.md §6), a password never.
 */
function credential(trim: boolean): (value: unknown) => FieldResult {
  return (value) => {
    if (value === '') return { ok: false, errors: [MESSAGES.required] };
    if (typeof value !== 'string') return { ok: false, errors: [MESSAGES.notAString] };
    return { ok: true, value: trim ? value.trim() : value };
  };
}

// Set by restwire (createuser, signup), never changed by a request, and never null: the record
// shows it read-only. Django's rule (usernameProblems) is its whole check.
const shownUsername = field.string({ label: 'Username', maxLength: 150, readOnly: true, required: true });
const username: Field = {
  ...field.string({ label: 'Username', maxLength: 150 }),
  parse: credential(true),
  schema: shownUsername.schema,
  metadata: () => ({ type: 'string', max_length: 150 }),
};

// Written by signup, never shown; stored hashed (`password_hash`). No length limit but the body's.
const password: Field = {
  ...field.string({ label: 'Password', maxLength: Number.MAX_SAFE_INTEGER, minLength: 8, writeOnly: true }),
  parse: credential(false),
  metadata: () => ({ type: 'string', min_length: 8 }),
};

/**
 * Users, read-only but for signup (API.md §2, §6). Each shows the paths of the records it owns in
 * every collection with `owner: true` (`experiences`, `books` …): the registry adds those reverse lists.
 */
export const users = defineBuiltinResource({
  name: 'users',
  label: 'User',
  description: 'The people who own records. Read-only.',
  actions: ['list', 'retrieve'],
  permission: allowAny,
  fields: { username, password },
  timestamps: false,
  orderings: ['username'],
  defaultOrdering: 'id',
  createDocs: {
    request: CREDENTIALS,
    responses: { '201': { description: 'The new user.', schema: { $ref: '#/components/schemas/User' }, headers: ['Location'] } },
  },
  hooks: {
    /** Django's username rule and a few of its password validators, each field's problems in field order. */
    async validate(values, errors, request) {
      const data = await request.data();
      const name = typeof values.username === 'string' ? values.username : '';
      const problems: FieldErrors = {
        username: data.username === null ? [MESSAGES.required] : (errors.username ?? (typeof values.username === 'string' ? usernameProblems(name) : [])),
        password: data.password === null ? [MESSAGES.required] : (errors.password ?? (typeof values.password === 'string' ? passwordProblems(values.password, name) : [])),
      };
      for (const key of Object.keys(errors)) delete errors[key];
      for (const [key, messages] of Object.entries(problems)) if (messages.length) errors[key] = messages;
      // Hashed here, outside the transaction: scrypt is slow, and on SQLite a transaction holds up every query.
      if (Object.keys(errors).length === 0) values.password = await hashPassword(String(values.password));
    },
    async beforeCreate(trx, columns) {
      const taken = await trx.selectFrom('users').select('id').where('username', '=', columns.username).executeTakeFirst();
      if (taken) throw new ValidationError({ username: [TAKEN] });
      const now = Date.now();
      Object.assign(columns, { password_hash: columns.password, password_changed_at: now, created_at: now });
      delete columns.password;
    },
    // Two signups of one name at once: the unique index refuses the second (PostgreSQL).
    constraintError: (error) => {
      const code = (error as { code?: unknown } | null)?.code;
      return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' ? new ValidationError({ username: [TAKEN] }) : null;
    },
  },
  extraActions: [
    {
      name: 'Current User',
      description: 'The authenticated caller.',
      detail: false,
      path: 'me/',
      method: 'GET',
      // The permission, not the handler, refuses an anonymous caller (401), so that the OpenAPI
      // document, which asks the permission, does not offer this to one (issue 22 item 19).
      permission: isAuthenticated,
      docs: { responses: { '200': { description: 'The caller’s own user record.', schema: { $ref: '#/components/schemas/User' } } } },
      async handle(request, viewSet) {
        const [record] = await viewSet.represent([await viewSet.loadRow(request, request.user!.id)], false, request.user);
        return { body: record };
      },
    },
  ],
});

/** `users` with a reverse list for every collection whose records have an owner. */
export function usersOwning(collections: readonly Resource[]): Resource {
  const related = Object.fromEntries(collections.filter((c) => c.owner).map((c) => [c.name, { collection: c.name, field: 'owner' }]));
  return { ...users, related };
}

/** `users` with its create action: signup, while ALLOW_SIGNUP is on (API.md §6). */
export function withSignup(resource: Resource): Resource {
  return { ...resource, actions: [...resource.actions, 'create'] };
}
