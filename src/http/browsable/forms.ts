import { html } from 'ghtml';
import type { User } from '../caller.js';
import type { View } from '../view.js';

// Forms generated from a view's OPTIONS metadata, which `resources/viewset/metadata.ts` builds
// from the field declarations (RESOURCES.md §2), so a declared collection gets its forms with no
// extra work. One control per field type, each with a label, its limits as HTML attributes, and a slot
// for the server's message. `assets/browsable.js` submits them as JSON (with the CSRF header
// and If-Match) and puts each validation error beside its field.

/** One field as DRF's SimpleMetadata describes it (the names OPTIONS uses). */
export interface FieldMeta {
  readonly type: string;
  readonly required?: boolean;
  readonly read_only?: boolean;
  readonly write_only?: boolean;
  readonly label?: string;
  readonly help_text?: string;
  readonly allow_null?: boolean;
  readonly max_length?: number;
  readonly min_length?: number;
  readonly min_value?: number | string;
  readonly max_value?: number | string;
  readonly decimal_places?: number;
  readonly choices?: ReadonlyArray<{ value: string; display_name: string } | string>;
  readonly related_collection?: string;
  readonly many?: boolean;
  readonly child?: { readonly choices?: readonly string[] };
}

export type FieldsMeta = Readonly<Record<string, FieldMeta>>;

/**
 * The writable fields of a view: those its metadata lists for POST (create) or PUT (update); for a
 * signed-in `user`, those they may write (ACCESS.md §3: a field read-only for them is no input).
 */
export function writableFields(view: View, user?: User | null): FieldsMeta | null {
  const actions = (view.metadata?.(user ?? undefined) as { actions?: Record<string, FieldsMeta> } | undefined)?.actions;
  const fields = actions?.POST ?? actions?.PUT;
  if (!fields) return null;
  return Object.fromEntries(Object.entries(fields).filter(([, meta]) => !meta.read_only));
}

// The viewset's integers default to ±(2^53−1); such bounds are not worth showing.
const bound = (value: number | string | undefined) =>
  value === undefined || Math.abs(Number(value)) >= Number.MAX_SAFE_INTEGER ? null : String(value);
// `text` and `string` share the metadata type; a limit this long is prose, so it gets a textarea.
const MULTILINE_FROM = 256;

const choiceList = (meta: FieldMeta) =>
  (meta.choices ?? meta.child?.choices ?? []).map((c) => (typeof c !== 'string' ? c : { value: c, display_name: c === '*' ? '* (every event)' : c }));

/** `2024-05-01T09:30:00.000Z` → `2024-05-01T09:30:00`, the value a datetime-local input takes (in UTC). */
const localDatetime = (value: unknown) => (typeof value === 'string' ? value.replace(/(\.\d+)?Z$/, '') : '');

function control(id: string, name: string, meta: FieldMeta, value: unknown): string {
  const describedBy = `${id}-error${meta.help_text ? ` ${id}-help` : ''}`;
  const text = value === null || value === undefined ? '' : String(value);
  const required = meta.required === true;
  switch (meta.type) {
    case 'boolean':
      return html`<input type="checkbox" id="${id}" name="${name}" aria-describedby="${describedBy}"!${value === true ? ' checked' : ''}>`;
    case 'integer':
    case 'decimal': {
      const step = meta.type === 'integer' ? '1' : (10 ** -(meta.decimal_places ?? 0)).toFixed(meta.decimal_places ?? 0);
      const max = bound(meta.max_value);
      const min = meta.type === 'decimal' && max !== null ? `-${max}` : bound(meta.min_value);
      return html`<input type="number" id="${id}" name="${name}" value="${text}" step="${step}"!${min === null ? '' : html` min="${min}"`}!${max === null ? '' : html` max="${max}"`} aria-describedby="${describedBy}"!${required ? ' required' : ''}>`;
    }
    case 'date':
    case 'datetime': {
      const type = meta.type === 'date' ? 'date' : 'datetime-local';
      const shown = meta.type === 'date' ? text : localDatetime(value);
      const min = meta.min_value === undefined ? '' : html` min="${meta.type === 'date' ? String(meta.min_value) : localDatetime(meta.min_value)}"`;
      const max = meta.max_value === undefined ? '' : html` max="${meta.type === 'date' ? String(meta.max_value) : localDatetime(meta.max_value)}"`;
      return html`<input type="${type}" id="${id}" name="${name}" value="${shown}"!${meta.type === 'datetime' ? ' step="1"' : ''}!${min}!${max} aria-describedby="${describedBy}"!${required ? ' required' : ''}>`;
    }
    case 'choice': {
      const options = choiceList(meta).map((c) => html`<option value="${c.value}"!${c.value === text ? ' selected' : ''}>${c.display_name}</option>`);
      const empty = required && text !== '' ? '' : html`<option value="">—</option>`;
      return html`<select id="${id}" name="${name}" aria-describedby="${describedBy}">!${empty}!${options}</select>`;
    }
    case 'json':
      return html`<textarea id="${id}" name="${name}" rows="3" class="mono" aria-describedby="${describedBy}">${value === undefined ? '' : JSON.stringify(value)}</textarea>`;
    case 'field': {
      // A reference: its choices come from the target collection's first page (browsable.js).
      const from = `/api/v1/${meta.related_collection ?? ''}/`;
      const selected = text === '' ? '' : html`<option value="${text}" selected>${text}</option>`;
      return html`<select id="${id}" name="${name}" data-options-from="${from}" aria-describedby="${describedBy}"><option value="">—</option>!${selected}</select>`;
    }
    default: {
      const type = meta.type === 'email' ? 'email' : meta.type === 'url' ? 'url' : meta.write_only && name.includes('password') ? 'password' : 'text';
      const limits = html`!${meta.max_length ? html` maxlength="${meta.max_length}"` : ''}!${meta.min_length ? html` minlength="${meta.min_length}"` : ''}`;
      if (type === 'text' && (meta.max_length ?? 0) >= MULTILINE_FROM) {
        return html`<textarea id="${id}" name="${name}" rows="4"!${limits} aria-describedby="${describedBy}"!${required ? ' required' : ''}>${text}</textarea>`;
      }
      return html`<input type="${type}" id="${id}" name="${name}" value="${text}"!${limits} aria-describedby="${describedBy}"!${required ? ' required' : ''}>`;
    }
  }
}

/** A list of checkboxes: `references` (options from the target collection) or a list of choices (webhook events). */
function checkboxList(id: string, name: string, meta: FieldMeta, value: unknown): string {
  const current = Array.isArray(value) ? value.map(String) : [];
  const from = meta.related_collection ? `/api/v1/${meta.related_collection}/` : null;
  const options = from ? current.map((path) => ({ value: path, display_name: path })) : choiceList(meta);
  const boxes = options.map(
    (option, index) => html`<label class="check"><input type="checkbox" name="${name}" id="${id}-${index}" value="${option.value}"!${current.includes(option.value) ? ' checked' : ''}> <span>${option.display_name}</span></label>`,
  );
  return html`<fieldset class="checklist" id="${id}" aria-describedby="${id}-error"!${from ? html` data-options-from="${from}" data-name="${name}"` : ''}>
<legend>${meta.label ?? name}!${meta.required ? html` <span class="req" aria-hidden="true">*</span>` : ''}</legend>
!${boxes}</fieldset>`;
}

const kind = (meta: FieldMeta) =>
  meta.type === 'field' ? (meta.many ? 'references' : 'reference') : meta.type === 'list' ? 'list' : meta.type;

// A value longer than this is not put in an edit form (issue 22 item 5: pages grew with their
// records). Cutting it there instead would save the cut value on the next PUT, so the field is
// shown without it, left out of what the form sends, and only PATCH is offered.
export const FORM_VALUE_LIMIT = 20_000;

/** The characters a value takes in its control: its text, or its JSON for a `json` field. */
const valueLength = (meta: FieldMeta, value: unknown) =>
  value === null || value === undefined ? 0 : meta.type === 'json' ? (JSON.stringify(value)?.length ?? 0) : String(value).length;

function tooLongRow(id: string, name: string, meta: FieldMeta, length: number): string {
  return html`<div class="field" data-field="${name}" data-type="${kind(meta)}" data-too-long>
<label for="${id}">${meta.label ?? name}</label>
<textarea id="${id}" name="${name}" rows="2" disabled aria-describedby="${id}-error ${id}-help"></textarea>
<p class="help cut-mark" id="${id}-help">This value is ${length.toLocaleString('en-US')} characters, too long to edit here; saving this form keeps it as it is. Change it through the JSON API.</p>
<p class="field-error" id="${id}-error" data-error-for="${name}" hidden></p>
</div>`;
}

function fieldRow(formId: string, name: string, meta: FieldMeta, value: unknown): string {
  const id = `${formId}-${name}`;
  const length = valueLength(meta, value);
  if (length > FORM_VALUE_LIMIT) return tooLongRow(id, name, meta, length);
  const type = kind(meta);
  const many = type === 'references' || type === 'list';
  const label = meta.label ?? name;
  const help = meta.help_text ? html`<p class="help" id="${id}-help">${meta.help_text}</p>` : '';
  const input = many ? checkboxList(id, name, meta, value) : control(id, name, meta, value);
  const labelTag = many
    ? ''
    : html`<label for="${id}">${label}!${meta.required ? html` <span class="req" aria-hidden="true">*</span>` : ''}!${type === 'datetime' ? html` <span class="muted">(UTC)</span>` : ''}</label>`;
  const boolean = type === 'boolean';
  return html`<div class="field!${boolean ? ' field-check' : ''}" data-field="${name}" data-type="${type}"!${meta.allow_null ? ' data-nullable' : ''}>
!${boolean ? input + labelTag : labelTag + input}
!${help}<p class="field-error" id="${id}-error" data-error-for="${name}" hidden></p>
</div>`;
}

export interface FormSpec {
  readonly id: string;
  readonly heading: string;
  readonly action: string;
  readonly fields: FieldsMeta;
  /** Current values (an edit form); none for a create form. */
  readonly values?: Readonly<Record<string, unknown>>;
  /** The record's JSON ETag, sent as If-Match (a stale edit is a 412). */
  readonly etag?: string;
  /** What follows a success: open the new record, reload the page, or show the new webhook's secret. */
  readonly after: 'follow' | 'reload' | 'secret';
  readonly intro?: string;
}

/** A create form (POST) or, with `values`, an edit form offering PUT and PATCH. */
export function apiForm(spec: FormSpec): string {
  const edit = spec.values !== undefined;
  const entries = Object.entries(spec.fields);
  const rows = entries.map(([name, meta]) => fieldRow(spec.id, name, meta, spec.values?.[name]));
  // A PUT replaces every field, and a value left out of the form is not there to send.
  const putAllowed = !entries.some(([name, meta]) => valueLength(meta, spec.values?.[name]) > FORM_VALUE_LIMIT);
  const buttons = edit
    ? html`!${putAllowed ? html`<button type="submit" class="btn btn-primary" value="PUT">Save (PUT)</button>
` : ''}<button type="submit" class="btn!${putAllowed ? '' : ' btn-primary'}" value="PATCH">Save changed fields (PATCH)</button>`
    : html`<button type="submit" class="btn btn-primary" value="POST">${spec.heading}</button>`;
  return html`<section class="box" aria-labelledby="${spec.id}-heading">
<h2 class="box-header" id="${spec.id}-heading">${spec.heading}</h2>
<form class="box-body api-form" id="${spec.id}" data-action="${spec.action}" data-after="${spec.after}"!${spec.etag ? html` data-etag="${spec.etag}"` : ''} novalidate>
!${spec.intro ? html`<p class="muted">${spec.intro}</p>` : ''}
<div class="form-error" data-form-error role="alert" hidden></div>
!${rows}
<div class="form-actions">!${buttons}</div>
</form>
</section>`;
}

/** A one-button form for an action without fields: DELETE, a ping, a redelivery. */
export function actionButton(options: {
  readonly method: 'POST' | 'PATCH' | 'DELETE';
  readonly action: string;
  readonly label: string;
  readonly body?: Readonly<Record<string, unknown>>;
  readonly etag?: string;
  readonly confirm?: string;
  /** Where to go after success (default: reload this page). */
  readonly redirect?: string;
  readonly danger?: boolean;
  /** `secret`: generate a new webhook secret, send it, and show it once. */
  readonly special?: 'rotate-secret';
}): string {
  const { method, action, label, body, etag, confirm, redirect, danger, special } = options;
  return html`<form class="action-form api-form" data-action="${action}" data-after="!${redirect ? 'redirect' : special === 'rotate-secret' ? 'secret' : 'reload'}"!${redirect ? html` data-redirect="${redirect}"` : ''}!${etag ? html` data-etag="${etag}"` : ''}!${confirm ? html` data-confirm="${confirm}"` : ''}!${body ? html` data-body="${JSON.stringify(body)}"` : ''}!${special ? html` data-special="${special}"` : ''}>
<div class="form-error" data-form-error role="alert" hidden></div>
<button type="submit" class="btn!${danger ? ' btn-danger' : ''}" value="${method}">${label}</button>
</form>`;
}
