// OPTIONS metadata (DRF's SimpleMetadata): what a view's writable action takes, field by field,
// from the declarations. The browsable API builds its forms from it (`http/browsable/forms.ts`).

import type { User } from '../../http/caller.js';
import { mayAttempt } from '../access/compile.js';
import { fieldVerdicts } from '../access/field-rules.js';
import type { Field } from '../fields/field.js';
import type { Resource } from '../resource.js';

const readOnly = (type: string, labelText: string) => ({ type, required: false, read_only: true, label: labelText });

/**
 * One field as OPTIONS describes it (DRF's SimpleMetadata `get_field_info`); read-only for a
 * caller whose write rule fails (ACCESS.md §3).
 */
export const describeField = (name: string, field: Field, readOnlyForCaller = false) => ({
  type: field.metadata().type,
  required: field.required && !readOnlyForCaller,
  read_only: field.readOnly || readOnlyForCaller,
  ...(field.writeOnly ? { write_only: true } : {}),
  label: field.label ?? name.charAt(0).toUpperCase() + name.slice(1).replace(/_/g, ' '),
  ...field.metadata(),
});

/**
 * A view's OPTIONS metadata. As DRF's SimpleMetadata: a view describes the write it has, the
 * collection its POST (or PUT without create), a record its PUT (a record of a collection with
 * create but no update, as signup's users, has none). Asked for a caller, only an action their
 * sign-in and roles could allow (ACCESS.md §2; field terms are judged at the write), and a field
 * whose write rule their sign-in and roles fail as read-only (ACCESS.md §3).
 */
export function metadataOf(resource: Resource, method: 'POST' | 'PUT') {
  const has = (action: Resource['operations'][number]) => resource.operations.includes(action);
  const fieldEntries = Object.entries(resource.fields);
  const shown = method === 'PUT' || !has('create') ? 'PUT' : 'POST';
  // A caller (null: anonymous) sees an action only when their sign-in and roles could allow it.
  const allowed = (caller: User | null | undefined) => caller === undefined || !resource.access || mayAttempt(resource.access, shown === 'POST' ? 'create' : 'update', caller);
  return (caller?: User | null) => {
    const unwritable = caller === undefined ? new Map() : fieldVerdicts(resource, 'write', caller);
    return {
      actions:
        (method === 'POST' ? has('create') || has('update') : has('update')) && allowed(caller)
          ? {
              [shown]: Object.fromEntries([
                ['url', readOnly('field', 'Url')],
                ['id', readOnly('integer', 'ID')],
                ...fieldEntries.map(([name, field]) => [name, describeField(name, field, unwritable.get(name) === false)]),
                ...Object.entries(resource.computed).map(([name, field]) => [name, describeField(name, field)]),
                ...(resource.owner ? [['owner', readOnly('field', 'Owner')]] : []),
                ...Object.keys(resource.related).map((name) => [name, readOnly('field', name.charAt(0).toUpperCase() + name.slice(1))]),
                ...(resource.timestamps ? [['created_at', readOnly('datetime', 'Created at')], ['updated_at', readOnly('datetime', 'Updated at')]] : []),
              ]),
            }
          : undefined,
    };
  };
}
