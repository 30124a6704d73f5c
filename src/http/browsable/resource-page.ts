import { html } from 'ghtml';
import type { User } from '../caller.js';
import { entityTag } from '../conditional.js';
import { JSON_TYPE, renderJson } from '../renderers.js';
import type { RenderContext } from '../view.js';
import type { ListControls } from '../view.js';
import { actionButton, apiForm, writableFields, type FieldsMeta } from './forms.js';
import { responseView } from './response-view.js';

// The generic browsable page of any view (issue 12 §1, §3): name and description, allowed
// methods, the response, pagination and list controls for a collection, and the forms the
// caller may use: create on a collection, edit (PUT/PATCH) and delete on a record they own.

type Page = { next?: string | null; previous?: string | null; results?: unknown[] };

export const isPage = (body: unknown): body is Page =>
  typeof body === 'object' && body !== null && Array.isArray((body as Page).results);

const splitUrl = (url: string): [string, URLSearchParams] => {
  const index = url.indexOf('?');
  return index === -1 ? [url, new URLSearchParams()] : [url.slice(0, index), new URLSearchParams(url.slice(index + 1))];
};

/** Title, description and allowed methods. */
export function pageHeading(title: string, description: string | undefined, allow: readonly string[]): string {
  const methods = allow.map((method) => html`<li><code>${method}</code></li>`);
  return html`<div class="page-head">
<h1>${title}</h1>
!${description ? html`<p class="lead">${description}</p>` : ''}
<ul class="methods" aria-label="Allowed methods">!${methods}</ul>
</div>`;
}

/** Previous / next links of a page. */
export function pagination(body: unknown): string {
  if (!isPage(body) || (!body.next && !body.previous)) return '';
  const link = (href: string | null | undefined, text: string, rel: string) =>
    href ? html`<a class="btn" rel="${rel}" href="${href}">${text}</a>` : html`<span class="btn" aria-disabled="true">${text}</span>`;
  return html`<nav class="pager" aria-label="Pagination">!${link(body.previous, '← Previous', 'prev')} !${link(body.next, 'Next →', 'next')}</nav>`;
}

/** The ordering and filter controls a collection declares, as a GET form on the same path. */
export function listControlsForm(path: string, controls: ListControls): string {
  const [base, query] = splitUrl(path);
  const current = query.get('ordering') ?? controls.defaultOrdering;
  const orderings = controls.orderings.map(
    (name) => html`<option value="${name}"!${name === current ? ' selected' : ''}>${name.startsWith('-') ? `${name.slice(1)} ↓` : `${name} ↑`}</option>`,
  );
  const filters = controls.filters.map(
    ({ param, description }) => html`<div class="field"><label for="filter-${param}">Filter ${param}</label>
<input type="search" id="filter-${param}" name="${param}" value="${query.get(param) ?? ''}" title="${description}"></div>`,
  );
  return html`<details class="box controls"!${[...query.keys()].some((k) => k !== 'cursor') ? ' open' : ''}>
<summary>Ordering and filters</summary>
<form class="box-body controls-form" method="get" action="${base}">
<div class="field"><label for="ordering">Ordering</label><select id="ordering" name="ordering">!${orderings}</select></div>
!${filters}
<div class="form-actions"><button type="submit" class="btn btn-primary">Apply</button> <a class="btn" href="${base}">Reset</a></div>
</form>
</details>`;
}

/** Whether the caller may change this record: signed in, and its owner when it has one. */
export function ownsRecord(user: User | null, record: Record<string, unknown>): boolean {
  if (user === null) return false;
  return !('owner' in record) || record.owner === `/api/v1/users/${user.id}/`;
}

const singular = (title: string) => title.replace(/ (List|Instance)$/, '');
const lowerFirst = (text: string) => text.charAt(0).toLowerCase() + text.slice(1);

/** The forms a collection or record page offers this caller, or a note saying why there are none. */
function forms(body: unknown, context: RenderContext, collectionPath: string): string {
  const { view, user, allow } = context;
  const fields = writableFields(view, user);
  const name = lowerFirst(singular(view.name));
  const isRecord = !isPage(body) && typeof body === 'object' && body !== null && 'url' in body;
  if (!isRecord) {
    if (!allow.includes('POST') || fields === null) return '';
    if (user === null) return loginNote(context.path, `create a ${name}`);
    return apiForm({ id: 'create', heading: `Create ${name}`, action: collectionPath, fields, after: 'follow' });
  }
  const record = body as Record<string, unknown>;
  const canEdit = allow.includes('PUT') || allow.includes('PATCH');
  if (!canEdit && !allow.includes('DELETE')) return '';
  if (user === null) return loginNote(context.path, `edit this ${name}`);
  if (!ownsRecord(user, record)) {
    return html`<p class="note" data-read-only>Read-only: this ${name} belongs to <a href="${String(record.owner)}">${String(record.owner)}</a>. Only its owner can edit or delete it.</p>`;
  }
  const etag = entityTag(renderJson(record), JSON_TYPE);
  // A field the record does not show this caller (a read rule, ACCESS.md §3) has no value to edit.
  const editable = fields && Object.fromEntries(Object.entries(fields).filter(([name, meta]) => name in record || meta.write_only));
  const parent = collectionPath.replace(/[^/]+\/$/, '');
  return html`!${canEdit && editable ? apiForm({ id: 'edit', heading: `Edit ${name}`, action: String(record.url), fields: editable, values: record, etag, after: 'reload' }) : ''}
!${allow.includes('DELETE') ? html`<section class="box box-danger" aria-labelledby="delete-heading"><h2 class="box-header" id="delete-heading">Delete ${name}</h2><div class="box-body">!${actionButton({ method: 'DELETE', action: String(record.url), label: `Delete ${name}`, etag, confirm: `Delete this ${name}? This cannot be undone.`, redirect: parent, danger: true })}</div></section>` : ''}`;
}

export function loginNote(path: string, what: string): string {
  return html`<p class="note"><a href="/api/v1/auth/login/?next=${encodeURIComponent(path)}">Log in</a> to ${what}.</p>`;
}

/** The view's own actions (ViewAction): a link for a GET, a button or a form for a POST. */
function actionsBox(body: unknown, context: RenderContext, collectionPath: string): string {
  const actions = context.view.extraActions ?? [];
  if (actions.length === 0 || context.status >= 400) return '';
  const base = isPage(body) ? collectionPath : typeof body === 'object' && body !== null && 'url' in body ? String((body as { url: unknown }).url) : null;
  if (base === null) return '';
  const offered = actions.map(({ label, path, method, fields }) => {
    const action = `${base}${path}`;
    if (method === 'GET') return html`<p><a class="btn" href="${action}">${label}</a></p>`;
    if (fields && Object.keys(fields).length) {
      return apiForm({ id: `action-${path.replace(/\/$/, '')}`, heading: label, action, fields: fields as unknown as FieldsMeta /* OPTIONS metadata, as writableFields reads it */, after: 'reload' });
    }
    return actionButton({ method: 'POST', action, label });
  });
  return html`<section class="box" aria-labelledby="actions-heading"><h2 class="box-header" id="actions-heading">Actions</h2><div class="box-body">!${offered}</div></section>`;
}

/** Whether the page follows its own URL's event stream (STREAMS.md §5): a list or record read that succeeded. */
export function followsStream({ view, method, status }: RenderContext): boolean {
  return method === 'GET' && status === 200 && view.mediaTypes.includes('text/event-stream');
}

/**
 * The ` data-stream="…"` attribute of a page's live region, or nothing when it follows no
 * stream. The stream starts after the change position the page was read at (`since`, from its
 * X-Change-Position): a change committed between the read and the stream's start would
 * otherwise never redraw the page (a delivery's outcome, recorded a moment after its page
 * loaded, stayed "pending").
 */
export function streamAttribute(context: RenderContext, path: string): string {
  if (!followsStream(context)) return '';
  const position = context.headers()['x-change-position'];
  const url = position === undefined ? path : `${path}${path.includes('?') ? '&' : '?'}since=${encodeURIComponent(position)}`;
  return html` data-stream="${url}"`;
}

/** The generic page: heading, controls, response, pager, forms. */
export function resourcePage(body: unknown, context: RenderContext): string {
  const { view, path, status, allow } = context;
  const [base] = splitUrl(path);
  return html`!${pageHeading(view.name, view.description, allow)}
!${view.listControls && isPage(body) ? listControlsForm(path, view.listControls) : ''}
<div class="columns">
<div class="col-main" id="resource-live"!${streamAttribute(context, path)}>
!${responseView({ method: 'GET', path, status, allow, headers: context.headers(), body })}
!${pagination(body)}
</div>
<div class="col-side">!${forms(body, context, base)}!${actionsBox(body, context, base)}</div>
</div>`;
}
