// The `users` collection (API.md §2), a declaration served by the one viewset like any other. What
// is special is in its hooks: signup (API.md §6) is its create action, offered only while
// ALLOW_SIGNUP is on (`withSignup`; else POST is a 405), with Django's username and password rules
// as `validate`, the taken-username check as `beforeCreate`; `me/` is an extra action. A user's
// `roles` (ACCESS.md §1) are shown to that user and to admins only (`representFor`), and PATCH by
// an admin is the one change a request may make: it writes `roles`, nothing else.

import type { Kysely } from 'kysely';
import { isAuthenticated, isSafeMethod } from '../auth/permissions.js';
import { hashPassword } from '../auth/passwords.js';
import { LastAdmin, MAX_ROLES, ROLE_NAME, checkAdminRemains, roleProblems, rolesText, storedRoles } from '../auth/roles.js';
import { passwordProblems, usernameProblems } from '../auth/users.js';
import type { Database } from '../db/schema.js';
import { isAdmin, type Permission } from '../http/caller.js';
import { ValidationError, type FieldErrors } from '../http/errors.js';
import { MESSAGES } from '../http/messages.js';
import { CREDENTIALS } from './auth-views.js';
import { fail, ok, type Field, type FieldResult } from './fields/field.js';
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

const ROLES_SCHEMA = {
  type: 'array',
  maxItems: MAX_ROLES,
  items: { type: 'string', pattern: ROLE_NAME.source },
  description: 'Role names (`admin` passes every access rule). Shown to the user and to admins only.',
};

// Written by an admin's PATCH only (signup ignores it); shown by `representFor`, not to everyone,
// so `writeOnly` keeps it out of the shared representation. Stored as rolesText's JSON list.
const roles: Field = {
  ...field.json({ label: 'Roles', default: [], writeOnly: true }),
  parse(value) {
    const problems = roleProblems(value);
    return problems.length ? fail(...problems) : ok(rolesText(value as string[]));
  },
  schema: () => ROLES_SCHEMA,
  // OPTIONS describes signup's POST, which never writes roles.
  metadata: () => ({ type: 'list', child: { type: 'string' }, read_only: true }),
};

/**
 * Anyone reads, and signs up while signup is offered; only admins change a user (ACCESS.md §1):
 * an anonymous PATCH is a 401, anyone else's a 403.
 */
const readOrSignupOrAdmin: Permission = {
  name: 'readOrSignupOrAdmin',
  hasPermission: ({ method, user }) => isSafeMethod(method) || method === 'POST' || isAdmin(user),
  hasObjectPermission: () => true,
};

/**
 * Users, read-only but for signup and an admin's change of roles (API.md §2, §6). Each shows the paths of the records it owns in
 * every collection with `owner: true` (`experiences`, `books` …): the registry adds those reverse lists.
 */
export const users = defineBuiltinResource({
  name: 'users',
  label: 'User',
  description: 'The people who own records. Read-only.',
  operations: ['list', 'retrieve', 'partial_update'],
  permission: readOrSignupOrAdmin,
  fields: { username, password, roles },
  timestamps: false,
  // A key reads users (`users:read`) and never changes one (ACCESS.md §5).
  keyLimit: 'read',
  orderings: ['username'],
  defaultOrdering: 'id',
  createDocs: {
    request: CREDENTIALS,
    responses: { '201': { description: 'The new user.', schema: { $ref: '#/components/schemas/User' }, headers: ['Location'] } },
  },
  callerMembers: { roles: ROLES_SCHEMA },
  updateDocs: {
    request: { schema: { type: 'object', description: 'Every other member is read-only.', properties: { roles: ROLES_SCHEMA } }, required: true },
    responses: { '200': { description: 'The user, with their roles as set.', schema: { $ref: '#/components/schemas/User' } } },
  },
  hooks: {
    /**
     * A PATCH (by an admin) writes `roles` only; signup writes everything else, checked by
     * Django's username rule and a few of its password validators, each field's problems in field order.
     */
    async validate(values, errors, request) {
      if (request.method !== 'POST') {
        for (const key of Object.keys(values)) if (key !== 'roles') delete values[key];
        for (const key of Object.keys(errors)) if (key !== 'roles') delete errors[key];
        return;
      }
      delete values.roles;
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
    async beforeCreate({ trx, columns }) {
      const taken = await trx.selectFrom('users').select('id').where('username', '=', columns.username).executeTakeFirst();
      if (taken) throw new ValidationError({ username: [TAKEN] });
      const now = Date.now();
      Object.assign(columns, { password_hash: columns.password, password_changed_at: now, created_at: now });
      delete columns.password;
    },
    async beforeUpdate({ trx, row, columns }) {
      if (columns.roles === undefined) return;
      try {
        await checkAdminRemains(trx as Kysely<Database>, Number(row!.id), storedRoles(row!.roles), storedRoles(columns.roles));
      } catch (error) {
        if (error instanceof LastAdmin) throw new ValidationError({ roles: [error.message] });
        throw error;
      }
    },
    representFor(request, rows, out) {
      const caller = request.user;
      if (caller === null) return;
      const admin = isAdmin(caller);
      rows.forEach((row, index) => {
        if (admin || Number(row.id) === caller.id) out[index]!.roles = storedRoles(row.roles);
      });
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
      // Every API key may ask whose it is (ACCESS.md §5).
      everyKey: true,
      docs: { responses: { '200': { description: 'The caller’s own user record.', schema: { $ref: '#/components/schemas/User' } } } },
      async handle(request, viewSet) {
        const [record] = await viewSet.represent([await viewSet.loadRow(request, request.user!.id)], { request });
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

/**
 * `users` telling `listener` of each committed change of roles, so that this process's role
 * cache forgets the old ones at once (ACCESS.md §1: other processes within its TTL).
 */
export function withRoleChanges(resource: Resource, listener: (userId: number) => void): Resource {
  const { beforeUpdate } = resource.hooks;
  return {
    ...resource,
    hooks: {
      ...resource.hooks,
      async beforeUpdate(ctx) {
        await beforeUpdate?.call(resource.hooks, ctx);
        if (ctx.columns.roles !== undefined) ctx.afterCommit(() => listener(Number(ctx.row!.id)));
      },
    },
  };
}

/** `users` with its create action: signup, while ALLOW_SIGNUP is on (API.md §6). */
export function withSignup(resource: Resource): Resource {
  return { ...resource, operations: [...resource.operations, 'create'] };
}
