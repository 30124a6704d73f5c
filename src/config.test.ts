import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_SCHEDULE, ENVIRONMENT, loadConfig, parseRetrySchedule } from './config.js';

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

describe('loadConfig', () => {
  it('reads only the variables --help names (ENVIRONMENT), and every one of them', () => {
    const read = new Set<string>();
    const env = new Proxy({} as NodeJS.ProcessEnv, {
      get: (_target, name) => {
        if (typeof name === 'string') read.add(name);
        return undefined;
      },
    });
    loadConfig(env);
    const named = ENVIRONMENT.flatMap(([names]) => names.split(', '));
    expect([...read].sort()).toEqual([...named].sort());
  });

  it('lets --host and --port win over HOST and PORT, and derives PUBLIC_URL from them', () => {
    const config = loadConfig({ HOST: '127.0.0.1', PORT: '8000' }, { host: '0.0.0.0', port: 9090 });
    expect(config).toMatchObject({ host: '0.0.0.0', port: 9090, publicUrl: 'http://0.0.0.0:9090' });
    expect(loadConfig({ HOST: '::1', PORT: '8001' })).toMatchObject({ host: '::1', port: 8001, publicUrl: 'http://[::1]:8001' });
  });
});
