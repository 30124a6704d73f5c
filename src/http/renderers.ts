/**
 * Renderers turn a handler's result into bytes of the negotiated media type (API.md §1):
 * JSON (the default), CSV for records and collections, and HTML for the browsable API.
 */
export type Renderer = (body: unknown, context: RenderContext) => string;

export interface RenderContext {
  /** Column order for CSV: the resource's declared fields. */
  columns: readonly string[];
  title: string;
  path: string;
  status: number;
  allow: readonly string[];
}

export const JSON_TYPE = 'application/json';
export const HTML_TYPE = 'text/html';
export const CSV_TYPE = 'text/csv';

export const CONTENT_TYPES: Record<string, string> = {
  [JSON_TYPE]: 'application/json; charset=utf-8',
  [HTML_TYPE]: 'text/html; charset=utf-8',
  [CSV_TYPE]: 'text/csv; charset=utf-8; header=present',
};

/** JSON, the default representation; also what ETags for If-Match are computed over. */
export function renderJson(body: unknown): string {
  return JSON.stringify(body);
}

// A cell a spreadsheet would run as a formula is defused with a leading quote (OWASP CSV injection).
const FORMULA_START = /^[=+\-@]/;

function csvCell(value: unknown): string {
  let text: string;
  if (value === null || value === undefined) text = '';
  else if (Array.isArray(value)) text = value.join(' ');
  else if (typeof value === 'object') text = JSON.stringify(value);
  else text = String(value);
  if (FORMULA_START.test(text)) text = `'${text}`;
  // RFC 4180 §2: quote fields holding a quote, comma or line break; double inner quotes.
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** RFC 4180 with a header row; a collection renders its page of `results`, a record one row. */
export const renderCsv: Renderer = (body, { columns }) => {
  const rows = isPage(body) ? body.results : [body];
  const lines = [columns.map(csvCell).join(',')];
  for (const row of rows) {
    const record = (row ?? {}) as Record<string, unknown>;
    lines.push(columns.map((column) => csvCell(record[column])).join(','));
  }
  return `${lines.join('\r\n')}\r\n`;
};

function isPage(body: unknown): body is { results: unknown[] } {
  return typeof body === 'object' && body !== null && Array.isArray((body as { results?: unknown }).results);
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for HTML element content and quoted attributes. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

/** Turns the path strings in pretty JSON into links, after escaping everything else. */
function linkify(escapedJson: string): string {
  return escapedJson.replace(/&quot;(\/api\/v1\/[^&\s]*)&quot;/g, (_match, path: string) => `&quot;<a href="${path}">${path}</a>&quot;`);
}

/** The browsable API: the JSON a client would get, readable in a browser, with every value escaped. */
export const renderHtml: Renderer = (body, { title, path, status, allow }) => {
  const json = linkify(escapeHtml(JSON.stringify(body, null, 2) ?? ''));
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} – restwire</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
header{background:#24292f;color:#fff;padding:.75rem 1.5rem}header a{color:#fff;text-decoration:none;font-weight:600}
main{max-width:60rem;margin:1.5rem auto;padding:0 1.5rem}h1{font-size:1.5rem;margin:.25rem 0 1rem}
.meta{color:#57606a;font-family:ui-monospace,monospace;font-size:13px}
pre{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:1rem;overflow:auto;font-size:13px}
a{color:#0969da}
</style>
</head>
<body>
<header><a href="/api/v1/">restwire API</a></header>
<main>
<h1>${escapeHtml(title)}</h1>
<p class="meta">GET ${escapeHtml(path)} · HTTP ${status} · Allow: ${escapeHtml(allow.join(', '))}</p>
<pre>${json}</pre>
</main>
</body>
</html>
`;
};

export const RENDERERS: Record<string, Renderer> = {
  [JSON_TYPE]: renderJson,
  [HTML_TYPE]: renderHtml,
  [CSV_TYPE]: renderCsv,
};
