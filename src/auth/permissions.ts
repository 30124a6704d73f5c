import type { Permission } from '../http/caller.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** GET, HEAD and OPTIONS change nothing (SEED.md §1 rule 5). */
export function isSafeMethod(method: string): boolean {
  return SAFE_METHODS.has(method);
}

export const allowAny: Permission = {
  name: 'allowAny',
  hasPermission: () => true,
  hasObjectPermission: () => true,
};

export const isAuthenticated: Permission = {
  name: 'isAuthenticated',
  hasPermission: ({ user }) => user !== null,
  hasObjectPermission: () => true,
};

/** Anyone reads; only authenticated callers write (SEED.md §5 rule 4). */
export const authenticatedOrReadOnly: Permission = {
  name: 'authenticatedOrReadOnly',
  hasPermission: ({ method, user }) => isSafeMethod(method) || user !== null,
  hasObjectPermission: () => true,
};

/** Anyone reads a record; only its owner changes it (SEED.md §5 rule 4). */
export const ownerOrReadOnly: Permission = {
  name: 'ownerOrReadOnly',
  hasPermission: () => true,
  hasObjectPermission: ({ method, user }, record) =>
    isSafeMethod(method) || (user !== null && record.ownerId === user.id),
};

/** Both must allow. */
export function and(a: Permission, b: Permission): Permission {
  return {
    name: `and(${a.name}, ${b.name})`,
    hasPermission: (context) => a.hasPermission(context) && b.hasPermission(context),
    hasObjectPermission: (context, record) => a.hasObjectPermission(context, record) && b.hasObjectPermission(context, record),
  };
}

/** Either may allow. */
export function or(a: Permission, b: Permission): Permission {
  return {
    name: `or(${a.name}, ${b.name})`,
    hasPermission: (context) => a.hasPermission(context) || b.hasPermission(context),
    hasObjectPermission: (context, record) =>
      (a.hasPermission(context) && a.hasObjectPermission(context, record)) ||
      (b.hasPermission(context) && b.hasObjectPermission(context, record)),
  };
}

/** Allows what `a` refuses. */
export function not(a: Permission): Permission {
  return {
    name: `not(${a.name})`,
    hasPermission: (context) => !a.hasPermission(context),
    hasObjectPermission: (context, record) => !a.hasObjectPermission(context, record),
  };
}
