import { describe, expect, it } from 'vitest';
import { field } from './fields/index.js';
import { Rejected } from '../http/errors.js';
import { reject } from './hooks.js';
import { defineResource, type ResourceOptions } from './resource.js';

// A declaration's hooks and actions are checked when it is made (LOGIC.md §3, §4): each mistake
// names the collection and the hook or action.

const positions = (overrides: Partial<ResourceOptions>): ResourceOptions => ({
  name: 'positions',
  fields: { title: field.string({ maxLength: 100 }), locked: field.boolean({ default: false }) },
  owner: true,
  related: { reviews: { collection: 'reviews', field: 'position' } },
  ...overrides,
});
const handle = async () => ({ body: {} });

describe('hooks and actions of a declaration', () => {
  it('refuses an unknown hook, or one that is not a function', () => {
    expect(() => defineResource(positions({ hooks: { beforeSave: handle } as never }))).toThrow('collection "positions": unknown hook "beforeSave"');
    expect(() => defineResource(positions({ hooks: { afterCreate: 'log it' } as never }))).toThrow('collection "positions": hook "afterCreate" must be a function');
    // What only restwire's own collections state is not a declaration's to use.
    expect(() => defineResource(positions({ hooks: { scope: handle } as never }))).toThrow('unknown hook "scope"');
  });

  it('refuses action names that are not path segments, the six viewset actions and reverse lists', () => {
    for (const name of ['Close', 'close-now', '1st', 'list', 'partial_update', 'destroy', 'reviews']) {
      expect(() => defineResource(positions({ actions: { [name]: { detail: true, handle } } }))).toThrow(`collection "positions": action "${name}"`);
    }
  });

  it('refuses a bad detail, method, handle, option, input or access of an action', () => {
    const bad = (action: Record<string, unknown>) => () => defineResource(positions({ actions: { close: { detail: true, handle, ...action } as never } }));
    expect(bad({ detail: 'yes' })).toThrow('actions.close: detail must be true');
    expect(bad({ method: 'PUT' })).toThrow('actions.close: method must be "GET" or "POST"');
    expect(bad({ handle: undefined })).toThrow('actions.close: handle must be a function');
    expect(bad({ body: {} })).toThrow('actions.close: unknown option "body"');
    expect(bad({ input: { days: 'integer' } })).toThrow('field "days": actions.close: input fields are field.<type>() values');
    expect(bad({ method: 'GET', input: { days: field.integer() } })).toThrow('a GET action has no body');
    expect(bad({ access: 'colour=red' })).toThrow(/actions.close: access.update rule "colour=red": unknown field "colour"/);
    expect(() => defineResource(positions({ actions: { summary: { detail: false, access: 'owner=@me', handle } } }))).toThrow(
      'actions.summary: a collection action\'s access rule names the caller only',
    );
  });

  it('keeps a checked action: POST by default, its input and rule read', () => {
    const resource = defineResource(positions({ actions: { close: { detail: true, access: 'owner=@me', input: { days: field.integer({ min: 1 }) }, handle } } }));
    expect(resource.declaredActions).toHaveLength(1);
    expect(resource.declaredActions[0]).toMatchObject({ name: 'close', detail: true, method: 'POST', description: '' });
    expect(Object.keys(resource.declaredActions[0]!.input)).toEqual(['days']);
    expect(resource.declaredActions[0]!.access).not.toBeNull();
  });

  it('names the six viewset actions a collection offers `operations`', () => {
    expect(defineResource(positions({ operations: ['list', 'retrieve'] })).operations).toEqual(['list', 'retrieve']);
    expect(() => defineResource(positions({ operations: ['close' as 'list'] }))).toThrow('unknown operation "close"');
  });

  it('reject() throws the problem of one of its statuses, and nothing else', () => {
    expect(() => reject(409, 'Locked.')).toThrow(Rejected);
    try {
      reject(400, 'Bad.', { title: ['No.'] });
    } catch (error) {
      expect(error).toMatchObject({ status: 400, detail: 'Bad.', extensions: { errors: { title: ['No.'] } } });
    }
    expect(() => reject(500 as 400, 'Oops.')).toThrow(TypeError);
  });
});
