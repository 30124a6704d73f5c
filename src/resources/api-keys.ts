// `/api/v1/keys/`: each user's API keys (ACCESS.md §5), a declaration served by the one viewset.
// What is special is in its hooks: `scope` (another user's key is a 404), `beforeCreate` (the
// per-user cap, the key made and only its hash kept), `afterCreate` (the key shown once),
// `beforeDelete` (a revoked key forgotten by this process at once; the others' caches expire
// within 5 s, auth/api-keys.ts). Keys themselves never manage keys (`keyLimit: 'none'`).

import { generateApiKey, type ApiKeys } from '../auth/api-keys.js';
import { isAuthenticated } from '../auth/permissions.js';
import type { Storage } from '../db/database.js';
import type { ApiRequest } from '../http/view.js';
import type { Field, FieldResult } from './fields/field.js';
import { field } from './fields/index.js';
import { refuseBeyondPerUserCap } from './per-user-cap.js';
import { defineBuiltinResource, type Resource } from './resource.js';

/** ACCESS.md §5. */
export const MAX_KEYS_PER_USER = 50;

const ok = (value: unknown): FieldResult => ({ ok: true, value });
const fail = (...errors: string[]): FieldResult => ({ ok: false, errors });

/**
 * The scopes a key may hold: `*:read`, `*:write`, and per collection a key may use, `NAME:read`
 * and, where keys may write, `NAME:write`. A nested collection (deliveries) is its parent's.
 */
export function keyScopes(collections: readonly Resource[]): string[] {
  const scopes = ['*:read', '*:write'];
  for (const collection of collections) {
    if (collection.nestedUnder || collection.keyLimit === 'none') continue;
    scopes.push(`${collection.name}:read`);
    if (collection.keyLimit === 'write') scopes.push(`${collection.name}:write`);
  }
  return scopes;
}

/** A time stored as milliseconds and shown as RFC 3339, as restwire's own tables keep times. */
function instant(options: { readOnly?: boolean; nullable?: boolean; required?: boolean }): Field {
  const base = field.datetime(options);
  return {
    ...base,
    parse(value, context) {
      const read = base.parse(value, context);
      return read.ok ? ok(Date.parse(String(read.value))) : read;
    },
    show: (stored) => (stored === null || stored === undefined ? null : new Date(Number(stored)).toISOString()),
    metadata: () => ({ type: 'datetime' }),
  };
}

export interface ApiKeysOptions {
  readonly storage: Storage;
  readonly apiKeys: ApiKeys;
  /** What `scopes` may hold (`keyScopes` of the other collections). */
  readonly scopes: readonly string[];
}

/** The keys declaration, with the hooks that make a key what it is. */
export function apiKeysResource({ storage, apiKeys, scopes }: ApiKeysOptions): Resource {
  /** Each create's new key, from `beforeCreate` (which stores its hash) to `afterCreate` (which shows it). */
  const issued = new WeakMap<ApiRequest, string>();

  const expiresAt = instant({ nullable: true, required: false });
  const fields: Record<string, Field> = {
    name: field.string({ maxLength: 100 }),
    scopes: {
      ...field.json(),
      parse(value, context) {
        // A form sends one string, commas separating several; JSON has lists and must use one.
        const list = context.form && typeof value === 'string' ? value.split(',').map((scope) => scope.trim()) : value;
        if (!Array.isArray(list) || list.length === 0 || !list.every((scope) => typeof scope === 'string')) {
          return fail('Expected a non-empty list of scopes, such as ["experiences:read"].');
        }
        const unknown = list.find((scope) => !scopes.includes(scope as string));
        if (unknown !== undefined) return fail(`Unknown scope ${JSON.stringify(unknown)}; choose from: ${scopes.join(', ')}.`);
        return ok(JSON.stringify([...new Set(list as string[])]));
      },
      show: (stored) => JSON.parse(String(stored)) as unknown,
      schema: () => ({ type: 'array', minItems: 1, items: { type: 'string', enum: [...scopes] }, description: 'What the key may do: `COLLECTION:read`, `COLLECTION:write`, `*:read`, `*:write`.' }),
      metadata: () => ({ type: 'list', child: { type: 'choice', choices: [...scopes] } }),
    },
    prefix: { ...field.string({ maxLength: 12, readOnly: true }), metadata: () => ({ type: 'string' }) },
    created_at: instant({ readOnly: true, required: true }),
    last_used_at: instant({ readOnly: true, nullable: true }),
    expires_at: {
      ...expiresAt,
      parse(value, context) {
        const read = expiresAt.parse(value, context);
        return read.ok && Number(read.value) <= Date.now() ? fail('Must be in the future.') : read;
      },
    },
  };

  return defineBuiltinResource({
    name: 'keys',
    label: 'Key',
    table: 'api_keys',
    description:
      "The caller's API keys, for programs: send one as `Authorization: Bearer rwk_…`. A key acts as its user within its `scopes`; " +
      'it is shown once, in the 201 of its create. DELETE revokes a key.',
    fields,
    permission: isAuthenticated,
    operations: ['list', 'create', 'retrieve', 'destroy'],
    timestamps: false,
    createShows: ['key'],
    // A key never manages keys (ACCESS.md §5).
    keyLimit: 'none',
    hooks: {
      scope: async (request) => (eb) => eb('owner_id', '=', request.user!.id),
      async beforeCreate({ trx, columns, request }) {
        const user = request.user!;
        await refuseBeyondPerUserCap(storage, trx, { table: 'api_keys', userId: user.id, max: MAX_KEYS_PER_USER, message: `A user may have at most ${MAX_KEYS_PER_USER} API keys.` });
        const { key, prefix, hash } = generateApiKey();
        issued.set(request, key);
        Object.assign(columns, { owner_id: user.id, prefix, key_hash: hash, created_at: Date.now(), last_used_at: null });
      },
      async afterCreate({ request, response }) {
        // Shown here, once: only its hash is kept (ACCESS.md §5).
        Object.assign(response, { body: { key: issued.get(request)! }, headers: { 'cache-control': 'no-store' } });
      },
      async beforeDelete({ row, afterCommit }) {
        afterCommit(() => apiKeys.forget(String(row!.key_hash)));
      },
    },
  });
}
