import { describe, expect, it } from 'vitest';
import { InvalidQuery } from './errors.js';
import { CURSOR_VALUE_CHARS, CursorCodec, parsePageRequest, valueDigest } from './pagination.js';

const codec = new CursorCodec(Buffer.alloc(32, 7));
const books = { collection: '/api/v1/books/', ordering: 'title' };

describe('cursors (API.md §2, issue 22 item 11)', () => {
  it('decode what they encode, for the list they were issued for only', () => {
    const token = codec.encode({ value: 'Dune', id: 3, reverse: true }, books);
    expect(codec.decode(token, books)).toEqual({ value: 'Dune', id: 3, reverse: true });
    expect(() => codec.decode(token, { ...books, collection: '/api/v1/authors/' })).toThrow(InvalidQuery);
    expect(() => codec.decode(token, { ...books, ordering: '-title' })).toThrow(InvalidQuery);
    expect(() => codec.decode(`${token.slice(0, -1)}A`, books)).toThrow(InvalidQuery);
  });

  it('carry a long value as its first characters and a digest, so they stay short', () => {
    const title = '😀'.repeat(15_000);
    const token = codec.encode({ value: title, id: 9, reverse: false }, books);
    expect(token.length).toBeLessThan(2_048);
    expect(codec.decode(token, books)).toEqual({ value: '😀'.repeat(CURSOR_VALUE_CHARS), digest: valueDigest(title), id: 9, reverse: false });
  });

  it('are an "Invalid cursor." on another collection’s list', () => {
    const token = codec.encode({ value: 'Dune', id: 3, reverse: false }, books);
    const read = (collection: string) => parsePageRequest({ ordering: 'title', cursor: token }, { title: 'title', id: 'id' }, '-id', codec, collection);
    expect(read('/api/v1/books/').position).toMatchObject({ value: 'Dune', id: 3 });
    try {
      read('/api/v1/tags/');
      expect.unreachable();
    } catch (error) {
      expect((error as InvalidQuery).errors).toEqual({ cursor: ['Invalid cursor.'] });
    }
  });
});
