import { connect, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, createTestDatabase, startServer, type RunningServer, type TestDatabase } from './support/server.js';

/**
 * Slow clients (issue 11, finding 5; README "Operations"): a request must arrive within
 * REQUEST_TIMEOUT_SECONDS, and SIGTERM waits DRAIN_TIMEOUT_SECONDS at most for what is in flight.
 */

/** Opens a POST whose body then trickles in, one byte every `everyMs`, until the socket closes. */
function trickle(port: number, everyMs: number): { socket: Socket; answer: Promise<string> } {
  const socket = connect(port, '127.0.0.1');
  socket.setEncoding('utf8');
  socket.write(
    `POST /api/v1/experiences/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${adminAuth}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{',
  );
  const timer = setInterval(() => socket.writable && socket.write(' '), everyMs);
  let text = '';
  socket.on('data', (chunk: string) => (text += chunk));
  const answer = new Promise<string>((resolve) => {
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      resolve(text);
    });
  });
  return { socket, answer };
}

describe('slow clients', () => {
  let database: TestDatabase;
  const servers: RunningServer[] = [];
  const sockets: Socket[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
  });
  afterEach(() => {
    for (const socket of sockets.splice(0)) socket.destroy();
  });
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop('SIGKILL')));
    await database?.drop();
  });

  it('answers a body that trickles in past REQUEST_TIMEOUT_SECONDS with 408 problem+json and closes the connection', async () => {
    const server = await startServer(database, { env: { REQUEST_TIMEOUT_SECONDS: '2' } });
    servers.push(server);
    const started = Date.now();
    const { socket, answer } = trickle(server.port, 500);
    sockets.push(socket);
    const text = await answer;
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(1_900);
    expect(elapsed).toBeLessThan(5_000);
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(text).toMatch(/content-type: application\/problem\+json/i);
    expect(text).toContain('"status":408');
  });

  it('on SIGTERM waits DRAIN_TIMEOUT_SECONDS at most for a slow request, then closes it and exits 0', async () => {
    const server = await startServer(database, { env: { REQUEST_TIMEOUT_SECONDS: '600', DRAIN_TIMEOUT_SECONDS: '2' } });
    servers.push(server);
    const { socket, answer } = trickle(server.port, 500);
    sockets.push(socket);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const started = Date.now();
    const code = await server.stop('SIGTERM');
    const elapsed = Date.now() - started;
    expect(code).toBe(0);
    expect(elapsed).toBeGreaterThanOrEqual(1_900);
    expect(elapsed).toBeLessThan(5_000);
    await answer; // the connection was closed, not left open
    expect(server.output()).toMatch(/drain deadline passed/);
  });
});
