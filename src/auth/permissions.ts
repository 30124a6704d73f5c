import type { Permission, PermissionRules } from '../http/caller.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** GET, HEAD and OPTIONS change nothing (SEED.md §1 rule 5). */
export function isSafeMethod(method: string): boolean {
  return SAFE_METHODS.has(method);
}

export const allowAny: Permission = {
  name: 'allowAny',
  rules: { read: '*', create: '*', update: '*', delete: '*' },
  hasPermission: () => true,
  hasObjectPermission: () => true,
};

export const isAuthenticated: Permission = {
  name: 'isAuthenticated',
  rules: { read: '@authenticated', create: '@authenticated', update: '@authenticated', delete: '@authenticated' },
  hasPermission: ({ user }) => user !== null,
  hasObjectPermission: () => true,
};

/** Anyone reads; only authenticated callers write (SEED.md §5 rule 4). */
export const authenticatedOrReadOnly: Permission = {
  name: 'authenticatedOrReadOnly',
  rules: { read: '*', create: '@authenticated', update: '@authenticated', delete: '@authenticated' },
  hasPermission: ({ method, user }) => isSafeMethod(method) || user !== null,
  hasObjectPermission: () => true,
};

/** Anyone reads a record; only its owner changes it (SEED.md §5 rule 4). */
export const ownerOrReadOnly: Permission = {
  name: 'ownerOrReadOnly',
  rules: { read: '*', create: '*', update: 'owner=@me', delete: 'owner=@me' },
  hasPermission: () => true,
  hasObjectPermission: ({ method, user }, record) =>
    isSafeMethod(method) || (user !== null && record.ownerId === user.id),
};

const RULE_ACTIONS = ['read', 'create', 'update', 'delete'] as const;
type Alternatives = readonly string[];
const alternatives = (rule: string | readonly string[] | undefined): Alternatives => (rule === undefined ? [] : typeof rule === 'string' ? [rule] : rule);

/** Two policies' rules combined action by action (`combine` of each action's alternatives); absent if either has none. */
function combineRules(a: Permission, b: Permission, combine: (x: Alternatives, y: Alternatives) => Alternatives): PermissionRules | undefined {
  if (!a.rules || !b.rules) return undefined;
  return Object.fromEntries(RULE_ACTIONS.map((action) => [action, combine(alternatives(a.rules![action]), alternatives(b.rules![action]))]));
}

/** Both must allow. */
export function and(a: Permission, b: Permission): Permission {
  // (A1 or A2) and (B1 or B2): every pair, joined with `&`.
  const rules = combineRules(a, b, (x, y) => x.flatMap((left) => y.map((right) => `${left}&${right}`)));
  return {
    name: `and(${a.name}, ${b.name})`,
    ...(rules ? { rules } : {}),
    hasPermission: (context) => a.hasPermission(context) && b.hasPermission(context),
    hasObjectPermission: (context, record) => a.hasObjectPermission(context, record) && b.hasObjectPermission(context, record),
  };
}

/** Either may allow. */
export function or(a: Permission, b: Permission): Permission {
  const rules = combineRules(a, b, (x, y) => [...x, ...y]);
  return {
    name: `or(${a.name}, ${b.name})`,
    ...(rules ? { rules } : {}),
    hasPermission: (context) => a.hasPermission(context) || b.hasPermission(context),
    hasObjectPermission: (context, record) =>
      (a.hasPermission(context) && a.hasObjectPermission(context, record)) ||
      (b.hasPermission(context) && b.hasObjectPermission(context, record)),
  };
}

/** Allows what `a` refuses (the rule language has no negation: a declaration using it keeps the two checks alone). */
export function not(a: Permission): Permission {
  return {
    name: `not(${a.name})`,
    hasPermission: (context) => !a.hasPermission(context),
    hasObjectPermission: (context, record) => !a.hasObjectPermission(context, record),
  };
}
