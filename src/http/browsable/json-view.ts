// The response body as the browsable pages show it: pretty JSON, escaped, each `/api/v1/…` path a
// link, and bounded (issue 22 item 5). `JSON.stringify(body, null, 2)` indents every level anew,
// so a value nested 2,600 deep became a 13 MB page, and a list of long texts a 30 MB one. Here
// strings are cut at `string` characters, containers deeper than `depth` levels are shown as
// `{…}`, and the walk stops once `characters` of HTML are written; the recursion is at most
// `depth` calls deep, so the work is linear in what is shown. The JSON representation itself is
// never cut: the page says what was cut and where to get it whole.

import { escapeHtml } from '../renderers.js';

/** How much of a body a page shows. */
export interface JsonViewLimits {
  /** HTML characters written before the walk stops. */
  readonly characters: number;
  /** Levels of nesting shown; a deeper array or object is `[…]` or `{…}`. */
  readonly depth: number;
  /** Characters shown of one string (or key). */
  readonly string: number;
}

export const JSON_VIEW_LIMITS: JsonViewLimits = { characters: 400_000, depth: 20, string: 2_000 };

/** What was left out of a view: each kind at most once. */
export type JsonCut = 'string' | 'depth' | 'characters';

export interface JsonView {
  readonly html: string;
  /** Empty when the whole body is shown. */
  readonly cuts: readonly JsonCut[];
}

const API_PATH = /^\/api\/v1\/[^&<>"'\s\\]*$/;
const count = (n: number) => n.toLocaleString('en-US');
const mark = (text: string) => `<span class="cut-mark">${text}</span>`;

/** Cuts `text` to `limit` characters (not splitting a surrogate pair) with an ellipsis; null if it fits. */
export function shortened(text: string, limit: number): string | null {
  if (text.length <= limit) return null;
  const end = /[\ud800-\udbff]/.test(text.charAt(limit - 1)) ? limit - 1 : limit;
  return `${text.slice(0, end)}…`;
}

class ViewWriter {
  private readonly parts: string[] = [];
  private length = 0;
  readonly cuts = new Set<JsonCut>();

  constructor(readonly limits: JsonViewLimits) {}

  get full(): boolean {
    return this.length >= this.limits.characters;
  }

  write(text: string): void {
    this.parts.push(text);
    this.length += text.length;
  }

  /** A string or key as JSON text, cut and marked when long, a link when it is an API path. */
  string(value: string): void {
    const cut = shortened(value, this.limits.string);
    if (cut !== null) {
      this.cuts.add('string');
      this.write(`${escapeHtml(JSON.stringify(cut))} ${mark(`+${count(value.length - cut.length + 1)} characters`)}`);
      return;
    }
    const text = escapeHtml(JSON.stringify(value));
    this.write(API_PATH.test(value) ? `&quot;<a href="${text.slice(6, -6)}">${text.slice(6, -6)}</a>&quot;` : text);
  }

  value(value: unknown, depth: number): void {
    if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
      value = (value as { toJSON(): unknown }).toJSON();
    }
    if (typeof value === 'string') return this.string(value);
    if (value === null || typeof value !== 'object') {
      this.write(escapeHtml(JSON.stringify(value) ?? 'null'));
      return;
    }
    const array = Array.isArray(value);
    const [open, close] = array ? ['[', ']'] : ['{', '}'];
    const keys = array ? null : Object.keys(value).filter((key) => isShown((value as Record<string, unknown>)[key]));
    const size = keys === null ? (value as unknown[]).length : keys.length;
    if (size === 0) return this.write(open + close);
    if (depth >= this.limits.depth) {
      this.cuts.add('depth');
      return this.write(`${open}…${close} ${mark(`nested deeper than ${this.limits.depth} levels`)}`);
    }
    const inner = '\n' + '  '.repeat(depth + 1);
    this.write(open);
    for (let i = 0; i < size; i++) {
      if (this.full) {
        this.write(`,${inner}…`);
        break;
      }
      this.write(i === 0 ? inner : `,${inner}`);
      if (keys === null) {
        const item = (value as unknown[])[i];
        this.value(isShown(item) ? item : null, depth + 1);
      } else {
        this.string(keys[i]!);
        this.write(': ');
        this.value((value as Record<string, unknown>)[keys[i]!], depth + 1);
      }
    }
    this.write('\n' + '  '.repeat(depth) + close);
  }

  html(): string {
    return this.parts.join('');
  }
}

/** What JSON.stringify keeps as an object member (an array holds null in its place). */
const isShown = (value: unknown) => value !== undefined && typeof value !== 'function' && typeof value !== 'symbol';

/** Pretty JSON of `body` as escaped HTML, cut to `limits`. */
export function jsonView(body: unknown, limits: JsonViewLimits = JSON_VIEW_LIMITS): JsonView {
  const writer = new ViewWriter(limits);
  if (isShown(body)) writer.value(body, 0);
  if (writer.full) {
    writer.cuts.add('characters');
    writer.write(`\n${mark(`… cut here: the page shows ${count(limits.characters)} characters of this body`)}`);
  }
  return { html: writer.html(), cuts: [...writer.cuts] };
}
