// Access rules in their source language (ACCESS.md §2), read once, when the declaration is made:
// the list filter language (`FIELD[__LOOKUP]=VALUE`, read by lookups.ts as a list filter reads it)
// plus `*`, `@authenticated`, `@role=NAME`, `@me` as a value, `A&B` (both) and a list (any one),
// as PocketBase's API rules are its filter language. A rule that does not read is an error
// naming the action and the rule; compile.ts turns a read rule into a condition per caller.

import type { Condition } from '../../db/dynamic-tables.js';
import type { Field, ParseContext } from '../fields/field.js';
import { LOOKUPS, TEXT_TYPES, lookupReader, type Lookup, type LookupReader } from '../lookups.js';

/** The actions a rule governs. */
export const RULE_ACTIONS = ['read', 'create', 'update', 'delete'] as const;
export type RuleAction = (typeof RULE_ACTIONS)[number];

/** The rules a field takes (ACCESS.md §3): who may read it, who may write it. */
export const FIELD_RULE_ACTIONS = ['read', 'write'] as const;
export type FieldRuleAction = (typeof FIELD_RULE_ACTIONS)[number];

/** What a declaration writes: a term, `A&B`, or a list of them of which any one may hold. */
export type RuleSource = string | readonly string[];
export type AccessSource = Readonly<Partial<Record<RuleAction, RuleSource>>>;

/** One term of a rule, as read. */
export type Term =
  | { readonly kind: 'anyone' }
  | { readonly kind: 'authenticated' }
  | { readonly kind: 'role'; readonly role: string }
  /** `FIELD[__LOOKUP]=VALUE`: the value read at declaration time, the condition ready. */
  | { readonly kind: 'field'; readonly field: string; readonly lookup: Lookup; readonly condition: Condition }
  /** `FIELD=@me`: the caller's id, read as the field's value when the rule is compiled. */
  | { readonly kind: 'me'; readonly field: string; readonly read: LookupReader };

/** Terms that must all hold (`A&B`). */
export type Clause = readonly Term[];
/** Clauses of which any one may hold; none: admins only. */
export type Rule = readonly Clause[];
/** A collection's rules, one per action (an action the declaration leaves out: `[]`, admins only). */
export type AccessRules = Readonly<Record<RuleAction, Rule>>;
/** A field's `access` as written: `{ read?, write? }`, each `*` when left out. */
export type FieldAccessSource = Readonly<Partial<Record<FieldRuleAction, RuleSource>>>;
/** A field's rules; null where every caller passes (`*`, or left out), which costs nothing. */
export type FieldRules = Readonly<Record<FieldRuleAction, Rule | null>>;

/** What a rule may name: the collection's table, fields and whether it has an owner. */
export interface RuleTarget {
  readonly table: string;
  readonly fields: Readonly<Record<string, Field>>;
  readonly owner: boolean;
}

/** A rule that cannot be read: the action, the rule's text and what is wrong. */
export class RuleError extends Error {
  constructor(
    readonly action: RuleAction | FieldRuleAction,
    readonly rule: string,
    readonly problem: string,
  ) {
    super(`access.${action} rule "${rule}": ${problem}`);
    this.name = 'RuleError';
  }
}

/** A role name (ACCESS.md §1). */
export const ROLE_NAME = /^[a-z][a-z0-9_-]{0,49}$/;
const TERM = /^([a-z][a-z0-9_]*?)(?:__([a-z]+))?=(.*)$/s;
// Values are read as a list filter reads them: paths of the collection itself only (no PUBLIC_URL
// yet), which an id always replaces.
const DECLARATION_CONTEXT: ParseContext = { form: false, publicUrl: '', collections: new Set() };

/** Reads every action's rule of a declaration's `access`; throws RuleError. */
export function parseAccess(source: AccessSource, target: RuleTarget): AccessRules {
  if (typeof source !== 'object' || source === null || Array.isArray(source)) {
    throw new RuleError('read', String(source), 'access is an object of rules: { read, create, update, delete }');
  }
  for (const key of Object.keys(source)) {
    if (!(RULE_ACTIONS as readonly string[]).includes(key)) throw new RuleError('read', key, `unknown action "${key}" (use ${RULE_ACTIONS.join(', ')})`);
  }
  const read = (action: RuleAction): Rule => (source[action] === undefined ? [] : parseRule(action, source[action], target));
  return { read: read('read'), create: read('create'), update: read('update'), delete: read('delete') };
}

/**
 * Reads a field's `access` (ACCESS.md §3) with the same language as a collection's; throws
 * RuleError. A rule every caller passes, anonymous ones too, is null: rules only grow with the
 * caller's sign-in and roles, so such a field is shown to everyone at no cost (ACCESS.md §7).
 */
export function parseFieldAccess(source: FieldAccessSource, target: RuleTarget): FieldRules {
  if (typeof source !== 'object' || source === null || Array.isArray(source)) {
    throw new RuleError('read', String(source), 'a field\'s access is an object of rules: { read, write }');
  }
  for (const key of Object.keys(source)) {
    if (!(FIELD_RULE_ACTIONS as readonly string[]).includes(key)) throw new RuleError('read', key, `unknown action "${key}" (a field's rules are read, write)`);
  }
  const read = (action: FieldRuleAction): Rule | null => {
    if (source[action] === undefined) return null;
    const rule = parseRule(action, source[action], target);
    return rule.some((clause) => clause.every((term) => term.kind === 'anyone')) ? null : rule;
  };
  return { read: read('read'), write: read('write') };
}

/** Reads one rule: a term, `A&B`, or a list of them. */
export function parseRule(action: RuleAction | FieldRuleAction, source: RuleSource, target: RuleTarget): Rule {
  const alternatives = typeof source === 'string' ? [source] : source;
  if (!Array.isArray(alternatives) || alternatives.length === 0) {
    throw new RuleError(action, String(source), 'a rule is a string or a non-empty list of strings (leave the action out for admins only)');
  }
  return alternatives.map((alternative: unknown) => {
    if (typeof alternative !== 'string') throw new RuleError(action, String(alternative), 'a rule is a string');
    return alternative.split('&').map((text) => {
      const term = readTerm(text.trim(), target);
      if (typeof term === 'string') throw new RuleError(action, alternative, term);
      return term;
    });
  });
}

/** One term, or what is wrong with it. */
function readTerm(text: string, target: RuleTarget): Term | string {
  if (text === '') return 'an empty term';
  if (text === '*') return { kind: 'anyone' };
  if (text === '@authenticated') return { kind: 'authenticated' };
  if (text.startsWith('@role=')) {
    const role = text.slice('@role='.length);
    return ROLE_NAME.test(role) ? { kind: 'role', role } : `"${role}" is not a role name ([a-z][a-z0-9_-]{0,49})`;
  }
  if (text.startsWith('@')) return `unknown term "${text.split('=')[0]}" (use *, @authenticated, @role=NAME, or FIELD=VALUE with @me as a value)`;
  const match = TERM.exec(text);
  if (!match) return `"${text}" is neither *, @authenticated, @role=NAME nor FIELD[__LOOKUP]=VALUE`;
  const [, name, lookupName = 'exact', value] = match as unknown as [string, string, string | undefined, string];
  if (!(LOOKUPS as readonly string[]).includes(lookupName)) return `unknown lookup "${lookupName}" (use ${LOOKUPS.join(', ')})`;
  const lookup = lookupName as Lookup;
  let field: Field | null;
  if (name === 'id') field = null;
  else if (name === 'owner') {
    if (!target.owner) return '"owner" names no field: the collection has no owner (owner: true)';
    field = null;
  } else if (Object.hasOwn(target.fields, name)) field = target.fields[name]!;
  else return `unknown field "${name}" (a rule names a field of the declaration, id or owner)`;
  if (field?.type === 'json') return `cannot compare "${name}": a json field`;
  if ((lookup === 'contains' || lookup === 'icontains') && !(field && TEXT_TYPES.includes(field.type))) {
    return `"${lookup}" needs a text field (${TEXT_TYPES.join(', ')})`;
  }
  const read = lookupReader({ table: target.table, name, field }, lookup, DECLARATION_CONTEXT);
  if (value.trim() === '@me') {
    const ofUsers = name === 'owner' || ((field?.type === 'reference' || field?.type === 'references') && field.to === 'users');
    if (!ofUsers) return `@me is a user: it compares with owner or a reference to users, not "${name}"`;
    if (lookup !== 'exact') return '@me compares with exact only (FIELD=@me)';
    return { kind: 'me', field: name, read };
  }
  if (value.includes('@me')) return '@me is a whole value (FIELD=@me)';
  const found = read(value);
  if ('error' in found) return `the value "${value}" of ${name}: ${found.error}`;
  return { kind: 'field', field: name, lookup, condition: found.condition };
}
