import { html } from 'ghtml';
import { STATUS_CODES } from 'node:http';
import { JSON_VIEW_LIMITS, jsonView, type JsonCut } from './json-view.js';

// What DRF's browsable API shows of every response: the request line, the status, the headers
// (rate-limit headers included) and the body, pretty-printed with every path a link.

const CUT_WORDS: Record<JsonCut, string> = {
  string: `strings longer than ${JSON_VIEW_LIMITS.string.toLocaleString('en-US')} characters are cut`,
  depth: `values nested deeper than ${JSON_VIEW_LIMITS.depth} levels are folded`,
  characters: `the body stops after ${JSON_VIEW_LIMITS.characters.toLocaleString('en-US')} characters`,
};

/**
 * Says what a page left out of a body and where to get it whole: the same URL asked for as JSON
 * (API.md §1: by the Accept header only, so the link is fetched by browsable.js and saved).
 */
export function cutNote(cuts: readonly JsonCut[], path: string): string {
  if (cuts.length === 0) return '';
  return html`<div class="note cut-note" role="note" data-cut>
<p><strong>Shown in part.</strong> This body is too large to show whole here: ${cuts.map((cut) => CUT_WORDS[cut]).join('; ')}. The JSON representation has all of it.</p>
<p><a class="btn" href="${path}" data-json-download>Download the full JSON</a> <span class="muted">or ask for this URL with <code>Accept: application/json</code>.</span></p>
</div>`;
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
  const shown = jsonView(body);
  const headerLines = names.map((name) => html`<span class="hname">${headerName(name)}:</span> ${all[name]}`).join('\n');
  const content = html`<div class="request-line"><span class="verb">${method}</span> <code>${path}</code></div>
<pre class="response-head" aria-label="Status and headers"><span class="status status-${String(Math.floor(status / 100))}xx">HTTP ${status} ${STATUS_CODES[status] ?? ''}</span>
!${headerLines}</pre>
!${cutNote(shown.cuts, path)}
<pre class="json" aria-label="Response body" tabindex="0">!${shown.html}</pre>`;
  return collapsed
    ? html`<details class="box response"><summary>Raw response</summary><div class="box-body">!${content}</div></details>`
    : html`<section class="box response" aria-label="Response"><div class="box-body">!${content}</div></section>`;
}
