import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_SCHEDULE, parseRetrySchedule } from './config.js';

describe('parseRetrySchedule', () => {
  it('parses the default schedule text into DEFAULT_RETRY_SCHEDULE', () => {
    expect(parseRetrySchedule('10,60,300,1800,3600,10800,21600,43200,86400')).toEqual(DEFAULT_RETRY_SCHEDULE);
    expect(DEFAULT_RETRY_SCHEDULE).toEqual([10, 60, 300, 1800, 3600, 10800, 21600, 43200, 86400]);
  });

  it('tolerates whitespace and allows zero delays', () => {
    expect(parseRetrySchedule(' 1, 2 ,3 ')).toEqual([1, 2, 3]);
    expect(parseRetrySchedule('0,0')).toEqual([0, 0]);
    expect(parseRetrySchedule('\t5\n')).toEqual([5]);
  });

  it('reads an empty or blank string as no retries', () => {
    expect(parseRetrySchedule('')).toEqual([]);
    expect(parseRetrySchedule('   ')).toEqual([]);
  });

  it.each(['10,,60', '10,', ',10', '-1', '1.5', '1e3', '0x10', 'ten', '10 60', '+5', '99999999999999999999'])(
    'refuses %j with a message naming the entry',
    (text) => {
      expect(() => parseRetrySchedule(text)).toThrow(/comma-separated whole seconds.*entry \d+/);
    },
  );

  it('returns a frozen list', () => {
    expect(Object.isFrozen(parseRetrySchedule('1,2'))).toBe(true);
  });
});
