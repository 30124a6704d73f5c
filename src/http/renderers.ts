/**
 * Renderers turn a handler's result into bytes of the negotiated media type (API.md §1):
 * JSON (the default) and CSV for records and collections here; HTML, the browsable API, is
 * `browsable/`'s renderBrowsable. The pipeline holds the table of all three, so the page
 * templates can use this file without importing themselves back.
 */
import type { RenderContext } from './view.js';

/** Turns a body into text of one media type. */
export type Renderer = (body: unknown, context: RenderContext) => string;

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

// A cell a spreadsheet would run as a formula is defused with a leading quote: OWASP "CSV
// Injection" lists = + - @, TAB (0x09) and CR (0x0D) as the characters that start one.
const FORMULA_START = /^[=+\-@\t\r]/;

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
