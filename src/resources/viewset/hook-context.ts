// How the viewset runs a declaration's hooks (LOGIC.md §3): the record and values as a hook sees
// them (the API's JSON, with `<reference>_id` numbers), the values read back after a hook changed
// them in place (through the fields, as a request's are), and a hook's throw as the request's
// answer: `reject(…)` and any other ApiError as they are, anything else a 500 naming the
// collection and the hook in the log, never in the body.

import type { User } from '../../http/caller.js';
import { ValidationError, type FieldErrors } from '../../http/errors.js';
import { UserCodeFailed, userCodeError } from '../user-code.js';
import { parseField, type ParseContext } from '../fields/field.js';
import type { HookName, HookUser } from '../hooks.js';
import type { Resource, ViewSetHooks } from '../resource.js';
import { storedRecord, withPaths } from './collection-handle.js';

/** Where a failed `afterCommit` function is reported (the server's logger). */
export interface HookLog {
  error(details: Record<string, unknown>, message: string): void;
}

/** The caller as hooks see them. */
export function hookUserOf(user: User | null): HookUser | null {
  return user === null ? null : { id: user.id, username: user.username, roles: [...user.roles] };
}

/** Runs `fn` after a commit: its failure is logged and changes nothing already answered (LOGIC.md §3). */
export function guardedAfterCommit(log: HookLog, collection: string, fn: () => unknown): () => void {
  const report = (error: unknown) => log.error({ err: error, collection }, `${collection}: an afterCommit function failed`);
  return () => {
    try {
      const result = fn();
      if (result instanceof Promise) result.catch(report);
    } catch (error) {
      report(error);
    }
  };
}

/** The hooks of one collection, with what calling them needs. */
export function buildHookCalls(resource: Resource, context: ParseContext) {
  const hooks = resource.hooks;
  /** Parsed values as the record's JSON shows them (references as paths). */
  function shownValues(values: Record<string, unknown>): Record<string, unknown> {
    const shown: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(values)) shown[name] = resource.fields[name]!.show(value);
    return shown;
  }

  /**
   * Reads back what a hook changed in `shown` (a snapshot of which is `before`): each changed
   * value parsed by its field into `values` (a reference given as an id or a path); the names of
   * the changed fields. A value its field refuses is a 400 naming the field.
   */
  function readBack(shown: Record<string, unknown>, before: Record<string, unknown>, values: Record<string, unknown>, hook: HookName): string[] {
    const changed: string[] = [];
    const errors: FieldErrors = {};
    for (const [name, value] of Object.entries(shown)) {
      if (Object.hasOwn(before, name) && sameValue(before[name], value)) continue;
      const field = Object.hasOwn(resource.fields, name) ? resource.fields[name]! : undefined;
      if (!field) throw new UserCodeFailed(resource.name, hook, new Error(`ctx.values.${name} names no field of ${resource.name}`));
      const parsed = parseField(field, withPaths(resource, { [name]: value })[name], context);
      if (parsed.ok) values[name] = parsed.value;
      else errors[name] = parsed.errors;
      changed.push(name);
    }
    if (Object.keys(errors).length) throw new ValidationError(errors);
    return changed;
  }

  /** Calls one hook, its throw turned into the request's answer. */
  async function call<C>(name: HookName, ctx: C): Promise<void> {
    const hook = hooks[name] as ((this: ViewSetHooks, ctx: C) => Promise<void> | void) | undefined;
    if (!hook) return;
    try {
      await hook.call(hooks, ctx);
    } catch (error) {
      throw userCodeError(resource.name, name, error);
    }
  }

  return { has: (name: HookName) => typeof hooks[name] === 'function', record: (shown: Record<string, unknown>) => storedRecord(resource, shown), shownValues, readBack, call };
}

/** Whether two values are the same (lists and JSON values compared by content). */
export const sameValue = (a: unknown, b: unknown): boolean => a === b || JSON.stringify(a) === JSON.stringify(b);
