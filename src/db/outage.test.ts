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
    ['crash shutdown', withCode('57P02', 'terminating connection because of crash of another server process')],
    ['starting up', withCode('57P03', 'the database system is starting up')],
    ['in recovery (failover)', withCode('57P03', 'the database system is not yet accepting connections')],
    [
      'database closed to connections',
      Object.assign(withCode('55000', 'database "app" is not currently accepting connections'), { severity: 'FATAL', routine: 'CheckMyDatabase' }),
    ],
    [
      'database closed, server messages in another language',
      Object.assign(withCode('55000', 'Datenbank »app« akzeptiert gegenwärtig keine Verbindungen'), { severity: 'SCHWERWIEGEND', routine: 'CheckMyDatabase' }),
    ],
    ['connection failure', withCode('08006')],
    ['connection does not exist', withCode('08003')],
    ['could not connect', withCode('08001')],
    ['server rejected the connection', withCode('08004')],
    ['too many connections', withCode('53300')],
    ['SQLite busy', withCode('SQLITE_BUSY', 'database is locked')],
    ['SQLite I/O', withCode('SQLITE_IOERR_WRITE', 'disk I/O error')],
    ['wrapped', new Error('outer', { cause: withCode('ECONNRESET') })],
  ])('%s: yes', (_name, error) => expect(isDatabaseUnavailable(error)).toBe(true));

  it.each([
    ['a unique violation', withCode('23505', 'duplicate key value')],
    ['a syntax error', withCode('42601')],
    ['a query\'s own 55000 (currval before nextval)', Object.assign(withCode('55000'), { severity: 'ERROR', routine: 'currval_oid' })],
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
