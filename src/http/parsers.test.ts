import { describe, expect, it } from 'vitest';
import { ParseError } from './errors.js';
import { isFormBody, parseBody } from './parsers.js';

const JSON_TYPE = 'application/json';

function multipart(parts: Array<{ name: string; value: string; contentType?: string }>, boundary = 'XyZ'): [Buffer, string] {
  const body = parts
    .map(({ name, value, contentType }) =>
      [`--${boundary}`, `Content-Disposition: form-data; name="${name}"`, ...(contentType ? [`Content-Type: ${contentType}`] : []), '', value].join('\r\n'),
    )
    .join('\r\n');
  return [Buffer.from(`${body}\r\n--${boundary}--\r\n`, 'latin1'), `multipart/form-data; boundary=${boundary}`];
}

describe('parseBody', () => {
  it('refuses a JSON string holding a lone surrogate, in a value or a name, instead of storing U+FFFD', async () => {
    for (const text of ['{"title":"\\ud800"}', '{"title":"a\\udfffb"}', '{"\\udc00":"x"}', '{"list":["ok","\\ud800"]}']) {
      await expect(parseBody(Buffer.from(text), JSON_TYPE), text).rejects.toThrow(/lone surrogate/);
    }
  });

  it('accepts a surrogate pair, escaped or not', async () => {
    expect(await parseBody(Buffer.from('{"a":"\\ud83d\\ude00","b":"😀"}'), JSON_TYPE)).toEqual({ a: '😀', b: '😀' });
  });

  it('refuses a form whose percent-encoding spells a surrogate (not UTF-8)', async () => {
    await expect(parseBody(Buffer.from('title=%ED%A0%80'), 'application/x-www-form-urlencoded')).rejects.toBeInstanceOf(ParseError);
  });

  it('refuses a multipart part that declares a charset other than UTF-8, rather than decoding it', async () => {
    const [body, type] = multipart([
      { name: 'title', value: 'ok' },
      { name: 'description', value: 'caf\xe9', contentType: 'text/plain; charset=latin1' },
    ]);
    await expect(parseBody(body, type)).rejects.toThrow(/charset "latin1"; only UTF-8/);
  });

  it('decodes multipart parts without a charset or with charset=utf-8', async () => {
    const [body, type] = multipart([
      { name: 'title', value: Buffer.from('café', 'utf8').toString('latin1'), contentType: 'text/plain; charset=UTF-8' },
      { name: 'q', value: 'like' },
    ]);
    expect(await parseBody(body, type)).toEqual({ title: 'café', q: 'like' });
  });
});

describe('isFormBody', () => {
  it('is true for the two form types only', () => {
    expect(isFormBody('application/x-www-form-urlencoded; charset=utf-8')).toBe(true);
    expect(isFormBody('Multipart/Form-Data; boundary=x')).toBe(true);
    expect(isFormBody('application/json')).toBe(false);
    expect(isFormBody(undefined)).toBe(false);
  });
});
