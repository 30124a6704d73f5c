import { html } from 'ghtml';
import type { RenderContext } from '../../http/view.js';
import { actionButton } from '../../http/browsable/forms.js';
import { pageHeading, pagination, streamAttribute } from '../../http/browsable/resource-page.js';
import { JSON_VIEW_LIMITS, jsonView, shortened } from '../../http/browsable/json-view.js';
import { cutNote, responseView } from '../../http/browsable/response-view.js';

// The deliveries dashboard (issue 12 §5; API.md §4), GitHub's "Recent deliveries": newest first,
// filter by status, Redeliver one or all failed, and each delivery's request and response. The
// table follows the list's own event stream (STREAMS.md §5): on each delivery created or attempted
// the script swaps in the fresh table (no reload, no polling).

interface Delivery {
  url: string;
  id: number;
  guid: string;
  event: string;
  action: string | null;
  status: 'pending' | 'delivered' | 'failed' | 'retrying';
  status_code: number | null;
  duration_ms: number | null;
  attempts: number;
  delivered_at: string | null;
  redelivery: boolean;
  request?: { headers: Record<string, string>; payload: unknown };
  response?: { headers: Record<string, string>; payload: string | null };
}

const STATUSES = ['pending', 'delivered', 'failed', 'retrying'] as const;
const TONES: Record<string, string> = { delivered: 'ok', failed: 'bad', retrying: 'warn', pending: 'off' };
const ICONS: Record<string, string> = { delivered: '✔', failed: '✖', retrying: '↻', pending: '…' };

export const statusBadge = (status: string) =>
  html`<span class="badge badge-${TONES[status] ?? 'off'}"><span aria-hidden="true">${ICONS[status] ?? ''}</span> ${status}</span>`;

const eventName = (d: Delivery) => (d.action ? `${d.event}.${d.action}` : d.event);
const time = (iso: string | null) => (iso ? html`<time datetime="${iso}">${iso.replace('T', ' ').replace(/\.\d+Z$/, ' UTC')}</time>` : html`<span class="muted">—</span>`);

function deliveryRow(d: Delivery): string {
  return html`<tr data-status="${d.status}">
<td>!${statusBadge(d.status)}</td>
<td><a href="${d.url}"><code>${d.guid.slice(0, 8)}</code></a> ${eventName(d)}!${d.redelivery ? html` <span class="badge badge-info" title="Redelivery">redelivery</span>` : ''}</td>
<td>${d.status_code ?? '—'}</td>
<td>${d.duration_ms === null ? '—' : `${d.duration_ms} ms`}</td>
<td>${d.attempts}</td>
<td>!${time(d.delivered_at)}</td>
</tr>`;
}

/** `/api/v1/webhooks/{id}/deliveries/`. */
export function deliveryListPage(body: unknown, context: RenderContext): string {
  const { view, path, status, allow } = context;
  const [base, queryText = ''] = path.split('?');
  const current = new URLSearchParams(queryText).get('status');
  const deliveries = ((body as { results?: Delivery[] }).results ?? []) as Delivery[];
  const hookPath = base!.replace(/deliveries\/$/, '');
  const tabs = [null, ...STATUSES].map((s) => {
    const href = s === null ? base! : `${base}?status=${s}`;
    return html`<a class="tab" href="${href}"!${s === current ? ' aria-current="page"' : ''}>${s ?? 'all'}</a>`;
  });
  const table = deliveries.length
    ? html`<div class="table-wrap"><table class="table deliveries">
<caption class="visually-hidden">Recent deliveries, newest first</caption>
<thead><tr><th scope="col">Status</th><th scope="col">Delivery</th><th scope="col">Code</th><th scope="col">Duration</th><th scope="col">Attempts</th><th scope="col">Time</th></tr></thead>
<tbody>!${deliveries.map(deliveryRow)}</tbody></table></div>`
    : html`<p class="blank">No deliveries${current ? ` with status ${current}` : ''} yet.</p>`;
  return html`!${pageHeading('Recent deliveries', view.description, allow)}
<p><a href="${hookPath}">← Webhook ${hookPath.split('/').at(-2) ?? ''}</a></p>
<section class="box" aria-labelledby="deliveries-heading">
<div class="box-header toolbar">
<h2 id="deliveries-heading">Deliveries</h2>
<nav class="tabs" aria-label="Filter by status">!${tabs}</nav>
!${actionButton({ method: 'POST', action: `${base}failed/attempts/`, label: 'Redeliver all failed' })}
</div>
<div id="deliveries-live" aria-live="polite"!${streamAttribute(context, path)}>!${table}</div>
</section>
!${pagination(body)}
!${responseView({ method: 'GET', path, status, allow, headers: context.headers(), body, collapsed: true })}`;
}

/** A receiver's text (a header value, a response body) cut to JSON_VIEW_LIMITS.string, and whether it was. */
function receiverText(text: string): { text: string; cut: boolean } {
  const cut = shortened(text, JSON_VIEW_LIMITS.string);
  return cut === null ? { text, cut: false } : { text: cut, cut: true };
}

function headersTable(caption: string, headers: Record<string, string> | undefined): string {
  const rows = Object.entries(headers ?? {}).map(([name, value]) => html`<tr><th scope="row"><code>${name}</code></th><td><code>${receiverText(value).text}</code></td></tr>`);
  return html`<div class="table-wrap"><table class="table kv"><caption>${caption}</caption><tbody>!${rows}</tbody></table></div>`;
}

/** `/api/v1/webhooks/{id}/deliveries/{delivery_id}/`: the request sent and the response received. */
export function deliveryPage(body: unknown, context: RenderContext): string {
  const { view, path, status, allow } = context;
  const d = body as Delivery;
  const listPath = d.url.replace(/\d+\/$/, '');
  const responseBody = d.response?.payload;
  const payload = jsonView(d.request?.payload);
  const received = responseBody === null || responseBody === undefined || responseBody === '' ? { text: '(empty)', cut: false } : receiverText(responseBody);
  const cutHeaders = [...Object.values(d.request?.headers ?? {}), ...Object.values(d.response?.headers ?? {})].some((value) => receiverText(value).cut);
  return html`!${pageHeading(`Delivery ${d.guid}`, view.description, allow)}
<p><a href="${listPath}">← Recent deliveries</a></p>
<section class="box" aria-labelledby="summary-heading">
<div class="box-header toolbar"><h2 id="summary-heading">${eventName(d)}</h2>
!${actionButton({ method: 'POST', action: `${d.url}attempts/`, label: 'Redeliver', redirect: listPath })}</div>
<dl class="box-body summary">
<dt>Status</dt><dd>!${statusBadge(d.status)}!${d.redelivery ? html` <span class="badge badge-info">redelivery</span>` : ''}</dd>
<dt>Response code</dt><dd>${d.status_code ?? '—'}</dd>
<dt>Duration</dt><dd>${d.duration_ms === null ? '—' : `${d.duration_ms} ms`}</dd>
<dt>Attempts</dt><dd>${d.attempts}</dd>
<dt>Delivered</dt><dd>!${time(d.delivered_at)}</dd>
</dl>
</section>
<div class="columns even">
<section class="box" aria-labelledby="request-heading"><h2 class="box-header" id="request-heading">Request</h2><div class="box-body">
!${headersTable('Headers', d.request?.headers)}
<h3>Payload</h3>!${cutNote(payload.cuts, path)}<pre class="json" tabindex="0">!${payload.html}</pre></div></section>
<section class="box" aria-labelledby="response-heading"><h2 class="box-header" id="response-heading">Response</h2><div class="box-body">
!${headersTable('Headers', d.response?.headers)}
<h3>Body</h3>!${received.cut || cutHeaders ? cutNote(['string'], path) : ''}<pre class="json" tabindex="0">${received.text}</pre></div></section>
</div>
!${responseView({ method: 'GET', path, status, allow, headers: context.headers(), body, collapsed: true })}`;
}
