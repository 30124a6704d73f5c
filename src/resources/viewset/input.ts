// A write's input, checked (DRF's serializer `is_valid`): each field parses its value from the
// request data, then, in the write's transaction, what only the database can judge: that every
// referenced record exists and that unique fields are unique. Every problem is reported at once.

import type { QueryResult } from 'kysely';
import { sendAhead } from '../../db/pipelining.js';
import { columnOf } from '../../db/schema-state.js';
import type { DynamicDb } from '../../db/dynamic-tables.js';
import type { User } from '../../http/caller.js';
import { ValidationError, type FieldErrors } from '../../http/errors.js';
import { MESSAGES } from '../../http/messages.js';
import { isFormData, type RequestData } from '../../http/parsers.js';
import { parseField, ValidatorFailed, type FieldResult, type ParseContext } from '../fields/field.js';
import { readReference } from '../fields/relations.js';
import { missingReferences, type CollectionLookup } from '../relations.js';
import type { Resource } from '../resource.js';
import { UserCodeFailed } from '../user-code.js';

/** A collection's input checks; `context` is PUBLIC_URL and the collections, for reading references. */
export function buildInputChecks(resource: Resource, context: ParseContext, lookup: CollectionLookup) {
  const table = resource.table;
  const fieldEntries = Object.entries(resource.fields);
  const writable = fieldEntries.filter(([, field]) => !field.readOnly);
  const manyFields = fieldEntries.filter(([, field]) => field.type === 'references');
  const label = resource.label.toLowerCase();

  /**
   * Checks a body's fields by their declarations; every failing field is reported at once. The
   * declaration's own code (`trusted`) may write read-only fields too (LOGIC.md §3).
   */
  function readInput(data: RequestData, partial: boolean, trusted = false): { values: Record<string, unknown>; errors: FieldErrors } {
    const values: Record<string, unknown> = {};
    const errors: FieldErrors = {};
    const parseContext = isFormData(data) ? { ...context, form: true } : context;
    for (const [name, field] of trusted ? fieldEntries : writable) {
      if (trusted && field.readOnly && !Object.hasOwn(data, name)) continue;
      if (!Object.prototype.hasOwnProperty.call(data, name)) {
        if (!partial && field.required) errors[name] = [MESSAGES.required];
        continue;
      }
      let result: FieldResult;
      try {
        result = parseField(field, data[name], parseContext);
      } catch (error) {
        // A declared validator threw (LOGIC.md §1): a 500 whose log names the collection and field.
        throw error instanceof ValidatorFailed ? new UserCodeFailed(resource.name, `validators of field "${name}"`, error.cause) : error;
      }
      if (result.ok) values[name] = result.value;
      else errors[name] = result.errors;
    }
    return { values, errors };
  }

  /** Whether a body needs the database to be judged (references, unique fields). */
  function hasStoredChecks(data: RequestData): boolean {
    return fieldEntries.some(([name, field]) => (field.to !== undefined || field.unique) && name in data);
  }

  /** DRF's UniqueValidator: "book with this isbn already exists." (the database decides races). Sent as missingReferences is. */
  function duplicateValues(executor: DynamicDb, values: Record<string, unknown>, exceptId: number | null): Promise<FieldErrors> {
    const asked: Array<{ name: string; answer: Promise<QueryResult<unknown>> }> = [];
    for (const [name, value] of Object.entries(values)) {
      const field = resource.fields[name]!;
      if (!field.unique || value === null) continue;
      let query = executor.selectFrom(table).select('id').where(columnOf(name, field)!, '=', value);
      if (exceptId !== null) query = query.where('id', '!=', exceptId);
      asked.push({ name, answer: sendAhead(executor, query.limit(1).compile()) });
    }
    return Promise.all(asked.map(({ answer }) => answer)).then((answers) => {
      const errors: FieldErrors = {};
      answers.forEach(({ rows }, index) => {
        const { name } = asked[index]!;
        if (rows.length) errors[name] = [uniqueMessage(name)];
      });
      return errors;
    });
  }

  /** The message of a value already taken, for the check and for the race the database catches. */
  const uniqueMessage = (name: string) => `${label} with this ${name.replace(/_/g, ' ')} already exists.`;

  /**
   * Relations (records the `writer` may read) and uniqueness, checked in the write's
   * transaction; all problems in one 400. Every query is sent before this returns its promise
   * (missingReferences), so a write's own statement sent next runs after them and, on
   * PostgreSQL, shares their round trip; the write may await the verdict after it (issue 20).
   */
  function checkAgainstStored(
    executor: DynamicDb,
    data: RequestData,
    values: Record<string, unknown>,
    errors: FieldErrors,
    exceptId: number | null,
    writer: User | null,
  ): Promise<void> {
    const checked = { ...values };
    for (const name of Object.keys(errors)) delete checked[name];
    // A list with bad items still has every missing record reported (one message per item);
    // not a list refused for its length, whose ids would not fit in one query (issue 22 item 8).
    const lists: Array<{ name: string; missing: Promise<Record<string, string[]>> }> = [];
    for (const [name, field] of manyFields) {
      const items = data[name];
      if (!errors[name] || !Array.isArray(items) || items.length > field.maxItems!) continue;
      const readable = (items as unknown[]).map((item) => readReference(item, field.to!, context)).filter((item) => 'id' in item);
      lists.push({ name, missing: missingReferences(executor, resource, { [name]: readable.map((item) => (item as { id: number }).id) }, lookup, writer) });
    }
    const stored = [missingReferences(executor, resource, checked, lookup, writer), duplicateValues(executor, checked, exceptId)];
    return Promise.all([Promise.all(lists.map(({ missing }) => missing)), Promise.all(stored)]).then(([listErrors, found]) => {
      listErrors.forEach((missing, index) => {
        const { name } = lists[index]!;
        errors[name]!.push(...(missing[name] ?? []));
      });
      Object.assign(errors, ...found);
      if (Object.keys(errors).length) throw new ValidationError(errors);
    });
  }

  return { readInput, hasStoredChecks, checkAgainstStored, uniqueMessage };
}
