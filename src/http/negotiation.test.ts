import { describe, expect, it } from 'vitest';
import { negotiate } from './negotiation.js';

const OFFERS = ['application/json', 'text/html', 'text/csv'];

describe('negotiate', () => {
  it.each([
    [undefined, 'application/json'],
    ['', 'application/json'],
    ['*/*', 'application/json'],
    ['application/json', 'application/json'],
    ['text/csv', 'text/csv'],
    ['text/*', 'text/html'],
    ['text/csv;q=0.9, application/json;q=0.5', 'text/csv'],
    ['application/json;q=0.1, text/csv', 'text/csv'],
    ['text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8', 'text/html'],
    ['application/xml, */*;q=0.1', 'application/json'],
    ['TEXT/CSV', 'text/csv'],
  ])('Accept %j picks %s', (accept, expected) => {
    expect(negotiate(accept, OFFERS)).toBe(expected);
  });

  it.each(['application/xml', 'image/png', 'text/csv;q=0', '*/*;q=0'])('Accept %j is not acceptable', (accept) => {
    expect(negotiate(accept, OFFERS)).toBeNull();
  });

  it('a more specific q=0 excludes a type a wildcard would allow', () => {
    expect(negotiate('*/*, application/json;q=0', OFFERS)).toBe('text/html');
  });
});
