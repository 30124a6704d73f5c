import { html } from 'ghtml';
import { STATUS_CODES } from 'node:http';

// What DRF's browsable API shows of every response: the request line, the status, the headers
// (rate-limit headers included) and the body, pretty-printed with every path a link.

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeText = (text: string) => text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);

/** Pretty JSON, escaped, with the `/api/v1/…` path strings in it turned into links. */
export function prettyJson(body: unknown): string {
  const escaped = escapeText(JSON.stringify(body, null, 2) ?? '');
  return escaped.replace(/&quot;(\/api\/v1\/[^&\s]*)&quot;/g, (_match, path: string) => `&quot;<a href="${path}">${path}</a>&quot;`);
}

// Shown first, in this order; the rest follow alphabetically.
const FIRST = ['allow', 'content-type', 'location', 'link', 'etag', 'vary', 'x-rate-limit-limit', 'x-rate-limit-remaining', 'x-rate-limit-reset', 'retry-after'];
const HIDDEN = new Set(['content-security-policy', 'x-content-type-options', 'referrer-policy', 'cache-control']);

const headerName = (name: string) => name.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase());

export interface ResponseSummary {
  readonly method: string;
  readonly path: string;
  readonly status: number;
  readonly allow: readonly string[];
  readonly headers: Readonly<Record<string, string>>;
  readonly body: unknown;
  /** Collapsed by default (dashboards show the data as a table first). */
  readonly collapsed?: boolean;
}

/** The response as a client received it: status line, headers, pretty body. */
export function responseView({ method, path, status, allow, headers, body, collapsed = false }: ResponseSummary): string {
  const all: Record<string, string> = { allow: allow.join(', '), ...headers };
  const names = Object.keys(all).filter((name) => !HIDDEN.has(name));
  names.sort((a, b) => {
    const [ia, ib] = [FIRST.indexOf(a), FIRST.indexOf(b)];
    return (ia === -1 ? 99 : ia) - (ib === -1 ? 99 : ib) || a.localeCompare(b);
  });
  const headerLines = names.map((name) => html`<span class="hname">${headerName(name)}:</span> ${all[name]}`).join('\n');
  const content = html`<div class="request-line"><span class="verb">${method}</span> <code>${path}</code></div>
<pre class="response-head" aria-label="Status and headers"><span class="status status-${String(Math.floor(status / 100))}xx">HTTP ${status} ${STATUS_CODES[status] ?? ''}</span>
!${headerLines}</pre>
<pre class="json" aria-label="Response body" tabindex="0">!${prettyJson(body)}</pre>`;
  return collapsed
    ? html`<details class="box response"><summary>Raw response</summary><div class="box-body">!${content}</div></details>`
    : html`<section class="box response" aria-label="Response"><div class="box-body">!${content}</div></section>`;
}
