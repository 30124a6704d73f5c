// An access rule for one caller (ACCESS.md §2): what the caller's sign-in and roles decide folds
// to true or false before any SQL (`*`, `@authenticated`, `@role=NAME`); what the record decides
// stays a `WHERE` condition, the same conditions list filters build, with `@me` bound to the
// caller's id. Admins pass every rule. As PostgreSQL's row-level security, a read rule is a
// condition on the query itself, so a list never holds (nor pages over) what the caller may not read.

import { sql, type SqlBool } from 'kysely';
import type { Condition } from '../../db/dynamic-tables.js';
import { isAdmin, type Permission, type User } from '../../http/caller.js';
import type { AccessRules, Rule, RuleAction, Term } from './rules.js';

/** A rule for one caller: holds for every record, for none, or for those matching a condition. */
export type Verdict = boolean | Condition;

/** One term for one caller: true, false, or the condition a record must meet. */
function termFor(term: Term, user: User | null): Verdict {
  switch (term.kind) {
    case 'anyone':
      return true;
    case 'authenticated':
      return user !== null;
    case 'role':
      return user?.roles.includes(term.role) ?? false;
    case 'field':
      return term.condition;
    case 'me': {
      // `@me` never holds for an anonymous caller (ACCESS.md §2).
      if (user === null) return false;
      const read = term.read(String(user.id));
      return 'condition' in read ? read.condition : false;
    }
  }
}

/** A rule for one caller (`user` null: anonymous). */
export function compileRule(rule: Rule, user: User | null): Verdict {
  if (isAdmin(user)) return true;
  const alternatives: Condition[][] = [];
  for (const clause of rule) {
    const conditions: Condition[] = [];
    let holds = true;
    for (const term of clause) {
      const verdict = termFor(term, user);
      if (verdict === false) {
        holds = false;
        break;
      }
      if (verdict !== true) conditions.push(verdict);
    }
    if (!holds) continue;
    // A clause the caller alone satisfies: the whole rule holds for every record.
    if (conditions.length === 0) return true;
    alternatives.push(conditions);
  }
  if (alternatives.length === 0) return false;
  return (eb) => eb.or(alternatives.map((conditions) => eb.and(conditions.map((condition) => condition(eb)))));
}

const NEVER: Condition = () => sql<SqlBool>`1 = 0`;

/** A verdict as a condition to add to a query; null when it holds for every record. */
export function conditionOf(verdict: Verdict): Condition | null {
  return verdict === true ? null : verdict === false ? NEVER : verdict;
}

/**
 * What the caller may read of a collection: null for every record (a collection without rules
 * too: its `permission` judges whole requests), else the condition on its rows.
 */
export function readCondition(rules: AccessRules | null, user: User | null): Condition | null {
  return rules === null ? null : conditionOf(compileRule(rules.read, user));
}

/** Whether every caller, anonymous included, reads every record: pages may be shared (ACCESS.md §7). */
export function readsAreShared(rules: AccessRules | null): boolean {
  return rules === null || compileRule(rules.read, null) === true;
}

/** The rule an HTTP method is judged by: reads by `read`, POST by `create`, PUT and PATCH by `update`. */
export function actionOf(method: string): RuleAction {
  if (method === 'POST') return 'create';
  if (method === 'PUT' || method === 'PATCH') return 'update';
  if (method === 'DELETE') return 'delete';
  return 'read';
}

/** Whether the caller's sign-in and roles could let them take the action at all (records decide the rest). */
export function mayAttempt(rules: AccessRules, action: RuleAction, user: User | null): boolean {
  return compileRule(rules[action], user) !== false;
}

/**
 * The pipeline's permission stage for a collection with rules (DRF's `has_permission`): refused
 * (401 / 403) when no record could let the caller act; the records themselves are judged in the
 * query of the action (viewset/queryset.ts), so there is no object check.
 */
export function permissionOf(rules: AccessRules, name: string): Permission {
  return {
    name,
    hasPermission: ({ method, user }) => mayAttempt(rules, actionOf(method), user),
    hasObjectPermission: () => true,
  };
}
