import { html } from 'ghtml';
import { entityTag } from '../../http/conditional.js';
import { JSON_TYPE, renderJson } from '../../http/renderers.js';
import type { RenderContext } from '../../http/view.js';
import { actionButton, apiForm, writableFields } from '../../http/browsable/forms.js';
import { loginNote, pageHeading, pagination } from '../../http/browsable/resource-page.js';
import { responseView } from '../../http/browsable/response-view.js';

// The webhooks pages (issue 12 §4; API.md §4): the caller's webhooks with their last response,
// a create form (events as checkboxes from the declared events; the secret shown once), and a
// webhook's page with ping, disable / enable, secret rotation, edit and delete.

interface Webhook {
  url: string;
  id: number;
  target_url: string;
  events: string[];
  active: boolean;
  created_at: string;
  last_response: { code: number | null; status: string; message: string | null };
  disabled_reason: string | null;
}

/** Active / disabled, and how the last delivery went. */
export function webhookStatus(hook: Webhook): string {
  const state = hook.active ? html`<span class="badge badge-ok">Active</span>` : html`<span class="badge badge-off">Disabled</span>`;
  const { code, status, message } = hook.last_response ?? { code: null, status: 'unused', message: null };
  const tone = status === 'ok' ? 'ok' : status === 'failed' ? 'bad' : 'off';
  const last = html`<span class="badge badge-${tone}" title="${message ?? ''}">Last delivery: ${status}${code === null ? '' : ` (${code})`}</span>`;
  return html`!${state} !${last}`;
}

function webhookRow(hook: Webhook): string {
  return html`<tr>
<td><a href="${hook.url}"><code>${hook.target_url}</code></a></td>
<td>${hook.events.join(', ')}</td>
<td>!${webhookStatus(hook)}</td>
<td><a href="${hook.url}deliveries/">Recent deliveries</a></td>
</tr>`;
}

/** `/api/v1/webhooks/`: the list and the create form. */
export function webhookListPage(body: unknown, context: RenderContext): string {
  const { view, user, path, status, allow } = context;
  const hooks = ((body as { results?: Webhook[] }).results ?? []) as Webhook[];
  // A new webhook starts active (API.md §4); disabling is a button on its page.
  const all = writableFields(view);
  const fields = all && Object.fromEntries(Object.entries(all).filter(([name]) => name !== 'active'));
  const table = hooks.length
    ? html`<div class="table-wrap"><table class="table">
<caption class="visually-hidden">Your webhooks</caption>
<thead><tr><th scope="col">Target URL</th><th scope="col">Events</th><th scope="col">Status</th><th scope="col">Deliveries</th></tr></thead>
<tbody>!${hooks.map(webhookRow)}</tbody></table></div>`
    : html`<p class="blank">No webhooks yet.</p>`;
  const create =
    user === null
      ? loginNote(path, 'create a webhook')
      : fields
        ? apiForm({ id: 'create', heading: 'Add webhook', action: '/api/v1/webhooks/', fields, after: 'secret', intro: 'Leave the secret empty to have one generated. It is shown once.' })
        : '';
  return html`!${pageHeading('Webhooks', view.description, allow)}
<div class="columns">
<div class="col-main">
<section class="box" aria-labelledby="hooks-heading"><h2 class="box-header" id="hooks-heading">Your webhooks</h2>!${table}</section>
!${pagination(body)}
!${responseView({ method: 'GET', path, status, allow, headers: context.headers(), body, collapsed: true })}
</div>
<div class="col-side">!${create}</div>
</div>`;
}

/** `/api/v1/webhooks/{id}/`: status, actions, edit form, delete. */
export function webhookPage(body: unknown, context: RenderContext): string {
  const { view, path, status, allow } = context;
  const hook = body as Webhook;
  const etag = entityTag(renderJson(hook), JSON_TYPE);
  const all = writableFields(view) ?? {};
  // Secret and active have their own buttons (rotate, disable/enable).
  const fields = Object.fromEntries(Object.entries(all).filter(([name]) => name !== 'secret' && name !== 'active'));
  const toggle = hook.active
    ? actionButton({ method: 'PATCH', action: hook.url, label: 'Disable', body: { active: false }, etag })
    : actionButton({ method: 'PATCH', action: hook.url, label: 'Enable', body: { active: true }, etag });
  return html`!${pageHeading(`Webhook ${hook.id}`, view.description, allow)}
<div class="columns">
<div class="col-main">
<section class="box" aria-labelledby="summary-heading">
<h2 class="box-header" id="summary-heading">Summary</h2>
<dl class="box-body summary">
<dt>Target URL</dt><dd><code>${hook.target_url}</code></dd>
<dt>Events</dt><dd>${hook.events.join(', ')}</dd>
<dt>Status</dt><dd>!${webhookStatus(hook)}</dd>
!${hook.disabled_reason ? html`<dt>Disabled because</dt><dd>${hook.disabled_reason}</dd>` : ''}
!${hook.last_response?.message ? html`<dt>Last message</dt><dd>${hook.last_response.message}</dd>` : ''}
<dt>Created</dt><dd><time datetime="${hook.created_at}">${hook.created_at}</time></dd>
</dl>
<div class="box-footer toolbar">
<a class="btn btn-primary" href="${hook.url}deliveries/">Recent deliveries</a>
!${actionButton({ method: 'POST', action: `${hook.url}pings/`, label: 'Ping' })}
!${toggle}
!${actionButton({ method: 'PATCH', action: hook.url, label: 'Rotate secret', etag, special: 'rotate-secret', confirm: 'Rotate the secret? The old one keeps working for 24 hours.' })}
</div>
<div class="secret-once" data-secret-panel hidden></div>
</section>
!${responseView({ method: 'GET', path, status, allow, headers: context.headers(), body })}
</div>
<div class="col-side">
!${apiForm({ id: 'edit', heading: 'Edit webhook', action: hook.url, fields, values: hook as unknown as Record<string, unknown>, etag, after: 'reload' })}
<section class="box box-danger" aria-labelledby="delete-heading"><h2 class="box-header" id="delete-heading">Delete webhook</h2><div class="box-body">
!${actionButton({ method: 'DELETE', action: hook.url, label: 'Delete webhook', etag, confirm: 'Delete this webhook and its deliveries?', redirect: '/api/v1/webhooks/', danger: true })}
</div></section>
</div>
</div>`;
}
