import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Counter, Gauge } from 'prom-client';
import { TooManyStreams } from './errors.js';

// Server-Sent Events on the wire (issue 23, STREAMS.md; WHATWG HTML §9.2): the pipeline's render
// stage for `text/event-stream`. A view's action answers with a `stream` (view.ts ApiResponse);
// this file opens it (200, no-store, the headers the pipeline set), writes its messages, keeps it
// alive, cuts a client that stops reading, counts it, caps how many a caller holds, and closes
// every one at shutdown. What goes in the messages is the viewset's business (resources/live/).

export const EVENT_STREAM_TYPE = 'text/event-stream';

/** A comment at least this often while nothing else is sent (STREAMS.md §2: every 15 s at most). */
export const KEEP_ALIVE_MS = 10_000;

/** A client with this much waiting for it in the server is cut off (STREAMS.md §4). */
export const MAX_BUFFERED_BYTES = 1024 * 1024;

const KEEP_ALIVE = ': keep-alive\n\n';

/** How long a caller over the stream limit is told to wait. */
const LIMIT_RETRY_AFTER_SECONDS = 10;

/** One open stream, as the code that fills it sees it. */
export interface EventSink {
  /** Sends one message (`data` is one line of JSON; `id` null: a message without one, `reset`). */
  send(id: number | null, event: string, data: string): void;
  /** Ends the stream. */
  close(): void;
  readonly closed: boolean;
  /** Called once when the stream ends, whoever ends it. */
  onClose(listener: () => void): void;
}

/** What an action returns to be streamed: called with the sink once the 200 is sent. */
export type EventStreamStart = (sink: EventSink) => void;

export interface StreamRegistryOptions {
  /** Open streams per user, or per client IP for anonymous callers, in this process. */
  readonly maxPerCaller: number;
  readonly metrics: { readonly open: Gauge; readonly messages: Counter };
}

/** The process's open streams: the limit per caller, the metrics and shutdown. */
export class StreamRegistry {
  readonly #options: StreamRegistryOptions;
  readonly #open = new Set<EventSink>();
  readonly #perCaller = new Map<string, number>();
  /**
   * The last message written, encoded: a change fanned out to many streams is one message string
   * handed to each sink (resources/viewset/stream.ts), encoded here once instead of once per
   * stream, and written as bytes (no per-write length count for the chunked encoding).
   */
  #lastFrame: { id: number | null; event: string; data: string; bytes: Buffer } | null = null;

  constructor(options: StreamRegistryOptions) {
    this.#options = options;
  }

  /** Refuses a caller already at the limit (429, before anything is sent). */
  checkLimit(callerKey: string): void {
    if ((this.#perCaller.get(callerKey) ?? 0) >= this.#options.maxPerCaller) {
      throw new TooManyStreams(this.#options.maxPerCaller, LIMIT_RETRY_AFTER_SECONDS);
    }
  }

  /** Sends the 200 and its headers, then hands the sink to `start`. */
  open(request: FastifyRequest, reply: FastifyReply, callerKey: string, start: EventStreamStart): void {
    this.checkLimit(callerKey);
    const { metrics } = this.#options;
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(reply.getHeaders())) {
      if (value !== undefined && name !== 'set-cookie' && name !== 'content-length') headers[name] = Array.isArray(value) ? value.join(', ') : String(value);
    }
    reply.hijack();
    const response = reply.raw;
    response.writeHead(200, {
      ...headers,
      'content-type': `${EVENT_STREAM_TYPE}; charset=utf-8`,
      'cache-control': 'no-store',
      // Proxies that buffer responses (nginx) would hold messages back.
      'x-accel-buffering': 'no',
    });
    response.flushHeaders();
    request.raw.socket?.setNoDelay(true);

    let closed = false;
    const closeListeners: Array<() => void> = [];
    // One timer per stream, pushed back by every message (refresh() re-arms it, also once fired).
    const keepAlive = setTimeout(() => write(KEEP_ALIVE) && keepAlive.refresh(), KEEP_ALIVE_MS);
    /** Writes, or cuts the client once too much waits for it; false when the stream is gone. */
    const write = (chunk: string | Buffer): boolean => {
      if (closed) return false;
      response.write(chunk);
      if (response.writableLength > MAX_BUFFERED_BYTES) {
        response.destroy();
        finish();
        return false;
      }
      return true;
    };
    const finish = () => {
      if (closed) return;
      closed = true;
      clearTimeout(keepAlive);
      this.#open.delete(sink);
      const left = (this.#perCaller.get(callerKey) ?? 1) - 1;
      if (left > 0) this.#perCaller.set(callerKey, left);
      else this.#perCaller.delete(callerKey);
      metrics.open.dec();
      for (const listener of closeListeners) listener();
    };
    const registry = this;
    const sink: EventSink = {
      send(id, event, data) {
        if (write(registry.#frame(id, event, data))) {
          metrics.messages.inc();
          keepAlive.refresh();
        }
      },
      close() {
        if (closed) return;
        response.end();
        finish();
      },
      get closed() {
        return closed;
      },
      onClose(listener) {
        if (closed) listener();
        else closeListeners.push(listener);
      },
    };
    this.#open.add(sink);
    this.#perCaller.set(callerKey, (this.#perCaller.get(callerKey) ?? 0) + 1);
    metrics.open.inc();
    response.on('close', finish);
    start(sink);
  }

  /** One message on the wire, encoded once for every sink it is handed to in a row. */
  #frame(id: number | null, event: string, data: string): Buffer {
    const last = this.#lastFrame;
    if (last !== null && last.id === id && last.event === event && last.data === data) return last.bytes;
    const bytes = Buffer.from(`${id === null ? '' : `id: ${id}\n`}event: ${event}\ndata: ${data}\n\n`);
    this.#lastFrame = { id, event, data, bytes };
    return bytes;
  }

  /** Ends every open stream (shutdown: clients reconnect elsewhere and resume, STREAMS.md §4). */
  closeAll(): void {
    for (const sink of [...this.#open]) sink.close();
  }
}
