// OPTIONS metadata (DRF's SimpleMetadata): what a view's writable action takes, field by field,
// from the declarations. The browsable API builds its forms from it (`http/browsable/forms.ts`).

import type { Field } from '../fields/field.js';
import type { Resource } from '../resource.js';

const readOnly = (type: string, labelText: string) => ({ type, required: false, read_only: true, label: labelText });

const describeField = (name: string, field: Field) => ({
  type: field.metadata().type,
  required: field.required,
  read_only: field.readOnly,
  ...(field.writeOnly ? { write_only: true } : {}),
  label: field.label ?? name.charAt(0).toUpperCase() + name.slice(1).replace(/_/g, ' '),
  ...field.metadata(),
});

/**
 * A view's OPTIONS metadata. As DRF's: the collection describes its POST, a record its PUT;
 * each falls back to the other method if the collection does not offer it.
 */
export function metadataOf(resource: Resource, preferred: 'POST' | 'PUT') {
  const has = (action: Resource['actions'][number]) => resource.actions.includes(action);
  const fieldEntries = Object.entries(resource.fields);
  return () => ({
    actions:
      has('create') || has('update')
        ? {
            [(preferred === 'PUT' ? has('update') : !has('create')) ? 'PUT' : 'POST']: Object.fromEntries([
              ['url', readOnly('field', 'Url')],
              ['id', readOnly('integer', 'ID')],
              ...fieldEntries.map(([name, field]) => [name, describeField(name, field)]),
              ...(resource.owner ? [['owner', readOnly('field', 'Owner')]] : []),
              ...Object.keys(resource.related).map((name) => [name, readOnly('field', name.charAt(0).toUpperCase() + name.slice(1))]),
              ...(resource.timestamps ? [['created_at', readOnly('datetime', 'Created at')], ['updated_at', readOnly('datetime', 'Updated at')]] : []),
            ]),
          }
        : undefined,
  });
}
