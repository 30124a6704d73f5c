import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';

/** A delivery as the receiver saw it. */
export interface Received {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  readonly at: number;
}

/**
 * A real webhook receiver on 127.0.0.1: records every request and answers with the status the
 * test chooses (a fixed one, or a script of statuses, then 204). `hang` makes it never answer.
 */
export interface Receiver {
  readonly url: string;
  readonly port: number;
  readonly received: Received[];
  respond(statuses: ReadonlyArray<number | 'hang'>, headers?: Record<string, string>): void;
  /** Decides each answer from the request itself (after a `respond` script runs out). */
  respondWith(decide: (request: Received) => number | 'hang'): void;
  /** The most requests it has held unanswered at once. */
  readonly maxInFlight: number;
  /** Resolves when `predicate` holds for the received list, or rejects after `timeoutMs`. */
  waitFor(predicate: (received: Received[]) => boolean, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(port = 0): Promise<Receiver> {
  const received: Received[] = [];
  let script: Array<number | 'hang'> = [];
  let extraHeaders: Record<string, string> = {};
  let decide: ((request: Received) => number | 'hang') | null = null;
  let inFlight = 0;
  let maxInFlight = 0;
  const hanging = new Set<import('node:http').ServerResponse>();
  const server: Server = createServer((request, response) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    let done = false;
    const finish = () => {
      if (!done) inFlight--;
      done = true;
    };
    response.on('finish', finish);
    response.on('close', finish);
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const entry = { path: request.url ?? '/', headers: request.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      received.push(entry);
      const next = script.length ? script.shift()! : decide ? decide(entry) : 204;
      if (next === 'hang') {
        hanging.add(response);
        return;
      }
      response.writeHead(next, extraHeaders).end(next === 204 ? undefined : 'receiver says hi');
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const address = server.address() as import('node:net').AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}/hook`,
    port: address.port,
    received,
    respond(statuses, headers = {}) {
      script = [...statuses];
      extraHeaders = headers;
    },
    respondWith(fn) {
      decide = fn;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    async waitFor(predicate, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(received)) {
        if (Date.now() > deadline) throw new Error(`receiver: condition not met within ${timeoutMs} ms; got ${received.length} requests`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return received;
    },
    async close() {
      for (const response of hanging) response.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
