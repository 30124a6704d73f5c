import { describe, expect, it } from 'vitest';
import { escapeHtml } from '../renderers.js';
import { jsonView } from './json-view.js';

const nested = (levels: number): unknown => {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = { a: [value] };
  return value;
};

describe('jsonView', () => {
  it('shows a small body as JSON.stringify(body, null, 2) would, escaped, with API paths as links', () => {
    const body = { url: '/api/v1/books/1/', title: '<b>"x"</b>', list: [1, null, {}, []], nested: { ok: true }, skipped: undefined };
    const view = jsonView(body);
    expect(view.cuts).toEqual([]);
    const expected = escapeHtml(JSON.stringify(body, null, 2)).replace('&quot;/api/v1/books/1/&quot;', '&quot;<a href="/api/v1/books/1/">/api/v1/books/1/</a>&quot;');
    expect(view.html).toBe(expected);
  });

  it('folds nesting past the depth limit, so a deep value costs what its first levels cost', () => {
    const shallow = jsonView(nested(30), { characters: 1e6, depth: 20, string: 100 });
    const deep = jsonView(nested(100_000), { characters: 1e6, depth: 20, string: 100 });
    expect(deep.cuts).toEqual(['depth']);
    expect(deep.html).toBe(shallow.html);
    expect(deep.html).toContain('nested deeper than 20 levels');
    expect(deep.html.length).toBeLessThan(5_000);
  });

  it('cuts long strings and keys with an ellipsis and says how much is left out', () => {
    const view = jsonView({ ['k'.repeat(50)]: 'v'.repeat(1_000) }, { characters: 1e6, depth: 20, string: 10 });
    expect(view.cuts).toEqual(['string']);
    expect(view.html).toContain('&quot;kkkkkkkkkk…&quot; <span class="cut-mark">+40 characters</span>');
    expect(view.html).toContain('&quot;vvvvvvvvvv…&quot; <span class="cut-mark">+990 characters</span>');
  });

  it('stops after the character budget and marks where', () => {
    const records = Array.from({ length: 10_000 }, (_, id) => ({ id, text: '"'.repeat(50) }));
    const view = jsonView({ results: records }, { characters: 20_000, depth: 20, string: 100 });
    expect(view.cuts).toEqual(['characters']);
    expect(view.html.length).toBeLessThan(21_000);
    expect(view.html).toMatch(/…\n[\s\S]*cut here: the page shows 20,000 characters of this body<\/span>$/);
  });
});
