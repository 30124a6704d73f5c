import { describe, expect, it } from 'vitest';
import { DatabaseOutage, isDatabaseUnavailable } from './outage.js';

const withCode = (code: string, message = code) => Object.assign(new Error(message), { code });

describe('isDatabaseUnavailable', () => {
  it.each([
    ['connection refused', withCode('ECONNREFUSED')],
    ['every address refused', new AggregateError([withCode('ECONNREFUSED'), withCode('ECONNREFUSED')])],
    ['terminated', new Error('Connection terminated unexpectedly')],
    ['pool timeout', new Error('timeout exceeded when trying to connect')],
    ['admin shutdown', withCode('57P01', 'terminating connection due to administrator command')],
    ['starting up', withCode('57P03', 'the database system is starting up')],
    ['connection failure', withCode('08006')],
    ['too many connections', withCode('53300')],
    ['SQLite busy', withCode('SQLITE_BUSY', 'database is locked')],
    ['SQLite I/O', withCode('SQLITE_IOERR_WRITE', 'disk I/O error')],
    ['wrapped', new Error('outer', { cause: withCode('ECONNRESET') })],
  ])('%s: yes', (_name, error) => expect(isDatabaseUnavailable(error)).toBe(true));

  it.each([
    ['a unique violation', withCode('23505', 'duplicate key value')],
    ['a syntax error', withCode('42601')],
    ['SQLite constraint', withCode('SQLITE_CONSTRAINT_UNIQUE')],
    ['a plain error', new Error('boom')],
    ['not an error', 'ECONNREFUSED'],
  ])('%s: no', (_name, error) => expect(isDatabaseUnavailable(error)).toBe(false));
});

describe('DatabaseOutage', () => {
  it('logs an outage once, however many requests fail, and its recovery once', async () => {
    const lines: string[] = [];
    let up = false;
    const outage = new DatabaseOutage(async () => up, { error: (_d, m) => lines.push(`error ${m}`), info: (_d, m) => lines.push(`info ${m}`) }, 10);
    for (let i = 0; i < 50; i++) outage.noted(withCode('ECONNREFUSED'));
    expect(outage.down).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(lines).toEqual(['error database unreachable: answering 503 until it returns']);
    up = true;
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(outage.down).toBe(false);
    expect(lines).toEqual(['error database unreachable: answering 503 until it returns', 'info database reachable again']);
    outage.noted(withCode('ECONNREFUSED'));
    expect(lines).toHaveLength(3);
    outage.stop();
  });
});
