// A declaration's own endpoints (LOGIC.md §4, DRF's `@action`): `actions: { close: { detail,
// method, access, description, input, handle } }`, checked when the declaration is made. The
// viewset serves each as one of its extra actions (`viewset/declared-actions.ts`), beside the
// built-in collections' own.

import { isField, isInvalidField, optionsOf, type Field } from './fields/field.js';
import type { CollectionHandle, HookUser, StoredRecord } from './hooks.js';
import { parseRule, RuleError, type AccessRules, type Rule, type RuleSource, type RuleTarget } from './access/rules.js';

/** The names of the six viewset actions: no declared action may take one. */
const VIEWSET_ACTIONS = ['list', 'create', 'retrieve', 'update', 'partial_update', 'destroy'];
const ACTION_NAME = /^[a-z][a-z0-9_]*$/;
const ACTION_OPTIONS = new Set(['detail', 'method', 'access', 'description', 'input', 'handle']);

/** What a declared action's `handle` is given. */
export interface ActionHandlerContext {
  /** A detail action's record (read through the read rule), as the API shows it with `<reference>_id` numbers; null otherwise. */
  readonly record: StoredRecord | null;
  /** The `input` fields, parsed and checked (absent optional ones left out). */
  readonly input: Record<string, unknown>;
  readonly user: HookUser | null;
  /** A collection in the action's transaction (a GET's may only read). */
  collection(name: string): CollectionHandle;
  /** Runs `fn` once the action's transaction has committed. */
  afterCommit(fn: () => unknown): void;
}

/** What `handle` returns: default 200, the body as JSON. */
export interface ActionResult {
  readonly status?: number;
  readonly body?: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

/** An action as a declaration states it (LOGIC.md §4). */
export interface ActionDeclaration {
  /** On a record (`/<collection>/{id}/<name>/`) or on the collection (`/<collection>/<name>/`). */
  detail: boolean;
  /** Default POST. */
  method?: 'GET' | 'POST';
  /** Who may call it, as an access rule (default: the update rule for a detail POST, else the read rule). */
  access?: RuleSource;
  description?: string;
  /** The body's fields, parsed and checked as a record's (400 on bad input). */
  input?: Record<string, Field>;
  handle(ctx: ActionHandlerContext): Promise<ActionResult | void> | ActionResult | void;
}

/** A checked declared action. */
export interface DeclaredAction {
  readonly name: string;
  readonly detail: boolean;
  readonly method: 'GET' | 'POST';
  /** The declared rule; null: the collection's own (its update rule for a detail POST, else read). */
  readonly access: Rule | null;
  readonly description: string;
  readonly input: Readonly<Record<string, Field>>;
  readonly handle: ActionDeclaration['handle'];
}

/** What checking a declaration's actions needs of it. */
export interface ActionTarget extends RuleTarget {
  readonly related: Readonly<Record<string, unknown>>;
  readonly access: AccessRules | null;
  readonly fail: (field: string | null, problem: string) => never;
}

/** Checks a declaration's `actions`; a mistake is a DeclarationError naming the action (`fail`). */
export function checkActions(actions: Record<string, ActionDeclaration>, target: ActionTarget): DeclaredAction[] {
  const { fail } = target;
  if (typeof actions !== 'object' || actions === null || Array.isArray(actions)) fail(null, 'actions must be an object: name → { detail, method, handle, … }');
  return Object.entries(actions).map(([name, action]) => {
    const at = `actions.${name}`;
    if (!ACTION_NAME.test(name)) fail(null, `action "${name}": a name must match [a-z][a-z0-9_]* (it is the path segment)`);
    if (VIEWSET_ACTIONS.includes(name)) fail(null, `action "${name}": the name is one of the six viewset actions (${VIEWSET_ACTIONS.join(', ')})`);
    if (Object.hasOwn(target.related, name)) fail(null, `action "${name}": the name is a reverse list's`);
    if (typeof action !== 'object' || action === null) fail(null, `${at} must be an object { detail, method, handle, … }`);
    for (const key of Object.keys(action)) if (!ACTION_OPTIONS.has(key)) fail(null, `${at}: unknown option "${key}" (use ${[...ACTION_OPTIONS].join(', ')})`);
    if (typeof action.detail !== 'boolean') fail(null, `${at}: detail must be true (on a record) or false (on the collection)`);
    const method = action.method ?? 'POST';
    if (method !== 'GET' && method !== 'POST') fail(null, `${at}: method must be "GET" or "POST"`);
    if (typeof action.handle !== 'function') fail(null, `${at}: handle must be a function, e.g. async handle(ctx) { … }`);
    if (action.description !== undefined && typeof action.description !== 'string') fail(null, `${at}: description must be a string`);
    const input: Record<string, Field> = {};
    for (const [fieldName, value] of Object.entries(action.input ?? {})) {
      if (!ACTION_NAME.test(fieldName)) fail(fieldName, `${at}: an input field name must match [a-z][a-z0-9_]*`);
      if (!isField(value)) fail(fieldName, `${at}: input fields are field.<type>() values`);
      if (isInvalidField(value)) fail(fieldName, `${at}: ${value.invalid}`);
      const allowed = optionsOf(value);
      for (const option of Object.keys(value.options)) if (!allowed.includes(option)) fail(fieldName, `${at}: unknown option "${option}" for field.${value.type}`);
      if (value.type === 'references') fail(fieldName, `${at}: an input cannot be a references list`);
      input[fieldName] = value;
    }
    if (method === 'GET' && Object.keys(input).length) fail(null, `${at}: a GET action has no body, so no input`);
    let access: Rule | null = null;
    if (action.access !== undefined) {
      try {
        access = parseRule(action.detail && method === 'POST' ? 'update' : 'read', action.access, target);
      } catch (error) {
        if (error instanceof RuleError) fail(null, `${at}: ${error.message}`);
        throw error;
      }
      // Without a record there is nothing a field term could be asked of.
      if (!action.detail && access.some((clause) => clause.some((term) => term.kind === 'field' || term.kind === 'me'))) {
        fail(null, `${at}: a collection action's access rule names the caller only (*, @authenticated, @role=NAME): there is no record`);
      }
    }
    return { name, detail: action.detail, method, access, description: action.description ?? '', input, handle: action.handle };
  });
}
