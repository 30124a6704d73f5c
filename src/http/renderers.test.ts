import { describe, expect, it } from 'vitest';
import { renderCsv } from './renderers.js';
import type { RenderContext } from './view.js';

// The CSV renderer reads only the column order; the rest of the context is for HTML.
const csv = (record: Record<string, unknown>) => renderCsv({ results: [record] }, { columns: Object.keys(record) } as unknown as RenderContext);

describe('renderCsv', () => {
  // OWASP "CSV Injection": a cell starting with = + - @ TAB or CR is run as a formula by spreadsheets.
  it.each([
    ['=1+2', `'=1+2`],
    ['+1+2', `'+1+2`],
    ['-1+2', `'-1+2`],
    ['@SUM(A1)', `'@SUM(A1)`],
    ['\t=1+2', `'\t=1+2`],
    ['\r=1+2', `"'\r=1+2"`],
  ])('defuses %j as a formula with a leading quote', (value, cell) => {
    expect(csv({ a: value })).toBe(`a\r\n${cell}\r\n`);
  });

  it('leaves a value with a tab or carriage return after its first character as it is', () => {
    expect(csv({ a: 'x\ty', b: 'x\ry' })).toBe('a,b\r\nx\ty,"x\ry"\r\n');
  });
});
