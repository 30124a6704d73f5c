// A declaration's own actions (LOGIC.md §4) as the viewset's extra actions: the same routes, the
// same pipeline (negotiation, rate limits, problem+json, OPTIONS, Idempotency-Key) as the
// built-in collections' `pings/` or `me/`. Each runs: the action's rule (its own, or the
// collection's update rule for a detail POST, read otherwise) → the record through the read rule
// (404) → the input through its fields (400) → `handle` in one transaction (a GET's only reads).

import type { DynamicDb, Row } from '../../db/dynamic-tables.js';
import { afterCommitOf } from '../../db/write-unit.js';
import type { Permission, User } from '../../http/caller.js';
import { ValidationError, type FieldErrors } from '../../http/errors.js';
import { MESSAGES } from '../../http/messages.js';
import { isFormData } from '../../http/parsers.js';
import { parseId } from '../../http/paths.js';
import { HTML_TYPE, JSON_TYPE } from '../../http/renderers.js';
import { permissionDenied } from '../../http/pipeline.js';
import type { ActionDocs, ApiRequest, ApiResponse } from '../../http/view.js';
import { compileRule } from '../access/compile.js';
import type { Rule } from '../access/rules.js';
import type { ActionHandlerContext, ActionResult, DeclaredAction } from '../actions.js';
import { parseField, type ParseContext } from '../fields/field.js';
import type { ExtraAction, Resource } from '../resource.js';
import { collectionHandle, storedRecord, type HandleTarget } from './collection-handle.js';
import { userCodeError } from '../user-code.js';
import { guardedAfterCommit, hookUserOf, type HookLog } from './hook-context.js';
import { describeField } from './metadata.js';
import { viewerOf } from './queryset.js';

/** What a declared action asks of its viewset. */
export interface DeclaredActionsOptions {
  readonly db: DynamicDb;
  readonly context: ParseContext;
  readonly log: HookLog;
  readonly targets: ReadonlyMap<string, HandleTarget>;
  /** A record through `scope` and the caller's read rule (404), and without rules, the object permission. */
  loadRow(executor: DynamicDb, id: number, lock: boolean, request: ApiRequest): Promise<Row>;
  checkObjectPermission(request: ApiRequest, row: Row): void;
  represent(rows: readonly Row[], executor: DynamicDb, detail: boolean, viewer: User | null): Promise<Record<string, unknown>[]>;
  /** Runs `work` in the write's transaction; what it puts in `later` runs once that has committed. */
  writeTransaction<T>(work: (trx: DynamicDb, later: Array<() => void>) => Promise<T>, unit?: ApiRequest['unit']): Promise<T>;
}

/** The pipeline's permission for a rule: refused (401 / 403) when no record could let the caller act. */
function rulePermission(rule: Rule): Permission {
  return { name: 'access', hasPermission: ({ user }) => compileRule(rule, user) !== false, hasObjectPermission: () => true };
}

/** How OpenAPI describes a declared action: its input as the request body. */
function actionDocs(action: DeclaredAction): ActionDocs {
  const inputs = Object.entries(action.input);
  return {
    ...(inputs.length
      ? {
          request: {
            required: inputs.some(([, field]) => field.required),
            schema: {
              type: 'object',
              properties: Object.fromEntries(inputs.map(([name, field]) => [name, field.schema()])),
              required: inputs.filter(([, field]) => field.required).map(([name]) => name),
            },
          },
        }
      : {}),
    responses: { '200': { description: action.description || 'What the action answers.', schema: {} } },
  };
}

/** The extra actions of a declaration's `actions`. */
export function declaredExtraActions(resource: Resource, options: DeclaredActionsOptions): ExtraAction[] {
  const { db, context, log, targets } = options;
  return resource.declaredActions.map((action): ExtraAction => {
    const where = `actions.${action.name}`;
    // Without a rule of its own, the collection's: its update rule for a detail POST, else read;
    // a collection without rules keeps its permission (and object permission on the record).
    const rule = action.access ?? (resource.access ? resource.access[action.detail && action.method === 'POST' ? 'update' : 'read'] : null);
    const readOnly = action.method === 'GET';

    /** The input through its fields; every problem in one 400. */
    async function readInput(request: ApiRequest): Promise<Record<string, unknown>> {
      if (readOnly || Object.keys(action.input).length === 0) return {};
      const data = await request.data();
      const parseContext = isFormData(data) ? { ...context, form: true } : context;
      const input: Record<string, unknown> = {};
      const errors: FieldErrors = {};
      for (const [name, field] of Object.entries(action.input)) {
        if (!Object.hasOwn(data, name)) {
          if (field.hasDefault) input[name] = field.show(field.defaultValue);
          else if (field.required) errors[name] = [MESSAGES.required];
          continue;
        }
        const parsed = parseField(field, data[name], parseContext);
        // As the record would show it: a date as text, a boolean as true or false.
        if (parsed.ok) input[name] = field.show(parsed.value);
        else errors[name] = parsed.errors;
      }
      if (Object.keys(errors).length) throw new ValidationError(errors);
      return input;
    }

    /** The record of a detail action, read through the read rule (404), then judged by the action's rule. */
    async function loadRecord(executor: DynamicDb, request: ApiRequest): Promise<Row> {
      const row = await options.loadRow(executor, parseId(request.params.id), !readOnly, request);
      if (rule === null) {
        options.checkObjectPermission(request, row);
        return row;
      }
      const verdict = compileRule(rule, request.user);
      const holds = verdict === true || (verdict !== false && (await executor.selectFrom(resource.table).select('id').where('id', '=', row.id).where(verdict).executeTakeFirst()) !== undefined);
      if (!holds) throw permissionDenied(request.identity);
      return row;
    }

    async function run(executor: DynamicDb, request: ApiRequest, later: Array<() => void>): Promise<ActionResult | void> {
      let record = null;
      if (action.detail) {
        const row = await loadRecord(executor, request);
        record = storedRecord(resource, (await options.represent([row], executor, false, viewerOf(request)))[0]!);
      }
      const input = await readInput(request);
      const ctx: ActionHandlerContext = {
        record,
        input,
        user: hookUserOf(request.user),
        collection: (name) => collectionHandle(targets, name, { trx: executor, user: request.user, identity: request.identity, later, readOnly }),
        afterCommit: (fn) => later.push(guardedAfterCommit(log, resource.name, fn)),
      };
      try {
        return await action.handle(ctx);
      } catch (error) {
        throw userCodeError(resource.name, where, error);
      }
    }

    /** A read-only action: no transaction of its own; its afterCommit functions run now, or after its unit's commit. */
    async function runReading(request: ApiRequest): Promise<ActionResult | void> {
      const later: Array<() => void> = [];
      const result = await run(request.unit?.trx ?? db, request, later);
      afterCommitOf(request.unit, later);
      return result;
    }

    return {
      name: `${resource.label} ${action.name.charAt(0).toUpperCase()}${action.name.slice(1).replace(/_/g, ' ')}`,
      description: action.description,
      detail: action.detail,
      path: `${action.name}/`,
      method: action.method,
      ...(rule ? { permission: rulePermission(rule) } : {}),
      docs: actionDocs(action),
      ...(Object.keys(action.input).length
        ? { metadata: () => ({ actions: { POST: Object.fromEntries(Object.entries(action.input).map(([name, field]) => [name, describeField(name, field)])) } }) }
        : {}),
      // Its body is the declaration's own JSON: no CSV columns to render it by.
      mediaTypes: [JSON_TYPE, HTML_TYPE],
      async handle(request): Promise<ApiResponse> {
        const result = readOnly ? await runReading(request) : await options.writeTransaction((trx, later) => run(trx, request, later), request.unit);
        const answer = result ?? {};
        if (typeof answer !== 'object') throw userCodeError(resource.name, where, new TypeError('handle must return { status?, body?, headers? } or nothing'));
        const status = answer.status ?? (answer.body === undefined ? 204 : 200);
        return { status, ...(answer.body === undefined ? {} : { body: answer.body }), ...(answer.headers ? { headers: answer.headers } : {}) };
      },
    };
  });
}
