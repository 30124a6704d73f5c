import { describe, expect, it } from 'vitest';
import { LOGIN_PATH, safeNext } from './login-page.js';

const withNext = (next: string) => `${LOGIN_PATH}?next=${encodeURIComponent(next)}`;

describe('safeNext', () => {
  it.each([
    ['a path', '/api/v1/experiences/', '/api/v1/experiences/'],
    ['a path with a query and a fragment', '/api/v1/experiences/?ordering=-id#top', '/api/v1/experiences/?ordering=-id#top'],
    ['dot segments, resolved', '/api/v1/x/../experiences/', '/api/v1/experiences/'],
  ])('keeps %s', (_name, next, expected) => expect(safeNext(withNext(next))).toBe(expected));

  it.each([
    ['nothing', ''],
    ['another origin', 'https://evil.example/'],
    ['a scheme-relative URL', '//evil.example/'],
    ['a tab between the slashes', '/\t/evil.example/'],
    ['a newline between the slashes', '/\n/evil.example/'],
    ['a carriage return between the slashes', '/\r/evil.example/'],
    ['a NUL', '/\0/evil.example/'],
    ['DEL', '/\x7f/evil.example/'],
    ['a space', '/ /evil.example/'],
    ['a non-ASCII space', '/\u3000/evil.example/'],
    ['a backslash', '/\\evil.example/'],
    ['a backslash after a tab', '/\t\\evil.example/'],
    ['a leading tab', '\t//evil.example/'],
    ['a relative path', 'api/v1/'],
    ['javascript:', 'javascript:alert(1)'],
  ])('refuses %s', (_name, next) => expect(safeNext(withNext(next))).toBe('/api/v1/'));

  it('never leaves the origin, whatever the ASCII character between two slashes', () => {
    const origin = 'https://api.example';
    for (let code = 0; code < 128; code++) {
      const next = safeNext(withNext(`/${String.fromCharCode(code)}/evil.example/x`));
      expect(new URL(next, origin).origin, `character ${code}`).toBe(origin);
    }
  });
});
