/**
 * A test client for Server-Sent Events (STREAMS.md): opens a stream with fetch and parses its
 * messages as the WHATWG parser does (id, event, data; comments kept apart), so tests can wait for
 * messages with a bound instead of sleeping.
 */
export interface StreamMessage {
  readonly id: string | null;
  readonly event: string;
  readonly data: string;
  json(): Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export interface OpenStream {
  readonly status: number;
  readonly headers: Headers;
  /** The body when the answer was not a stream (a problem+json). */
  readonly text: string | null;
  readonly messages: StreamMessage[];
  readonly comments: string[];
  /** True once the server ended the stream. */
  readonly ended: boolean;
  /** Waits until `count` messages have arrived (or fails after `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<StreamMessage[]>;
  /** Waits until the server ends the stream. */
  waitForEnd(timeoutMs?: number): Promise<void>;
  close(): void;
}

export async function openStream(url: string, headers: Record<string, string> = {}): Promise<OpenStream> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: controller.signal });
  const messages: StreamMessage[] = [];
  const comments: string[] = [];
  let ended = false;
  let text: string | null = null;
  const waiters = new Set<() => void>();
  const notify = () => waiters.forEach((waiter) => waiter());
  if (!response.headers.get('content-type')?.startsWith('text/event-stream')) {
    text = await response.text();
    ended = true;
  } else {
    void (async () => {
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          let end: number;
          while ((end = buffer.indexOf('\n\n')) !== -1) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let id: string | null = null;
            let event = 'message';
            const data: string[] = [];
            for (const line of block.split('\n')) {
              if (line.startsWith(':')) comments.push(line);
              else if (line.startsWith('id: ')) id = line.slice(4);
              else if (line.startsWith('event: ')) event = line.slice(7);
              else if (line.startsWith('data: ')) data.push(line.slice(6));
            }
            if (data.length) {
              const joined = data.join('\n');
              messages.push({ id, event, data: joined, json: () => JSON.parse(joined) });
            }
          }
          notify();
        }
      } catch {
        // Aborted by the test, or cut by the server.
      }
      ended = true;
      notify();
    })();
  }
  const until = (condition: () => boolean, timeoutMs: number, what: () => string) =>
    new Promise<void>((resolve, reject) => {
      if (condition()) return resolve();
      const check = () => {
        if (!condition()) return;
        clearTimeout(timer);
        waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(what()));
      }, timeoutMs);
      waiters.add(check);
    });
  return {
    status: response.status,
    headers: response.headers,
    text,
    messages,
    comments,
    get ended() {
      return ended;
    },
    async waitFor(count, timeoutMs = 10_000) {
      await until(() => messages.length >= count, timeoutMs, () => `expected ${count} messages within ${timeoutMs} ms, got ${messages.length}: ${messages.map((m) => `${m.id} ${m.event}`).join(', ')}`);
      return messages.slice(0, count);
    },
    async waitForEnd(timeoutMs = 10_000) {
      await until(() => ended, timeoutMs, () => `the stream did not end within ${timeoutMs} ms`);
    },
    close: () => controller.abort(),
  };
}
