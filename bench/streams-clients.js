// The SSE clients of `npm run bench:streams` (bench/streams.js), in a child process of their own
// so that reading thousands of streams does not share an event loop with the writer that times
// the 201s. Driven over IPC: `open` streams, `await` one record on all of them (fan-out
// latency), `verify` what arrived (lost, duplicated, out of order), `close`. Each stream is a
// raw `http.request` on its own socket with a minimal SSE line parser (WHATWG HTML §9.2: `id:`,
// `event:`, `data:`, comments); a stream the server ends is reopened with `Last-Event-ID`, as
// `EventSource` does, and counted as a reconnect.
import http from 'node:http';
import { performance } from 'node:perf_hooks';

/** Wall-clock milliseconds with sub-millisecond resolution, comparable across processes. */
const now = () => performance.timeOrigin + performance.now();

/** Reconnects per stream at most (a bounded loop: a server that keeps ending it is reported). */
const MAX_RECONNECTS = 20;

const streams = [];
let closing = false;
/** recordId → arrival times (fan-out mode). */
const arrivals = new Map();
/** { recordId, count, resolve, timer } waiting in `await`. */
let waiting = null;
let mode = 'latency';
const failures = [];

function send(message) {
  process.send?.(message);
}

class Stream {
  constructor(options) {
    this.options = options;
    this.lastId = null;
    this.messages = 0;
    this.outOfOrder = 0;
    this.duplicates = 0;
    this.reconnects = 0;
    this.resets = 0;
    /** Verify mode: record ids seen, as a bitmap from `base`. */
    this.seen = new Uint8Array(1024);
    this.request = null;
    this.open = false;
    this.ended = false;
  }

  /** Resolves once the 200 arrives; rejects on another status or a socket error. */
  connect() {
    return new Promise((resolve, reject) => {
      const headers = { accept: 'text/event-stream', ...this.options.headers };
      if (this.lastId !== null) headers['last-event-id'] = String(this.lastId);
      const request = http.request(this.options.url, { headers, agent: false });
      this.request = request;
      request.setTimeout(0);
      request.on('error', (error) => {
        if (!this.open) reject(error);
        else this.#lost(error.message);
      });
      request.on('response', (response) => {
        if (response.statusCode !== 200) {
          let body = '';
          response.setEncoding('utf8');
          response.on('data', (chunk) => (body += chunk));
          response.on('end', () => reject(new Error(`stream answered ${response.statusCode}: ${body.slice(0, 200)}`)));
          return;
        }
        this.open = true;
        response.setEncoding('utf8');
        let buffer = '';
        response.on('data', (chunk) => {
          buffer += chunk;
          let end;
          while ((end = buffer.indexOf('\n\n')) !== -1) {
            this.#block(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
          }
        });
        response.on('end', () => this.#lost('ended by the server'));
        response.on('error', (error) => this.#lost(error.message));
        resolve();
      });
      request.end();
    });
  }

  #lost(reason) {
    if (!this.open) return;
    this.open = false;
    if (closing || this.ended) return;
    if (this.reconnects >= MAX_RECONNECTS) {
      failures.push(`stream gave up after ${MAX_RECONNECTS} reconnects: ${reason}`);
      return;
    }
    this.reconnects++;
    this.connect().catch((error) => {
      failures.push(`reconnect failed: ${error.message}`);
    });
  }

  /** One message (the lines between two blank lines). */
  #block(block) {
    let id = null;
    let event = 'message';
    let data = null;
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? '' : line.slice(colon + (line[colon + 1] === ' ' ? 2 : 1));
      if (field === 'id') id = value;
      else if (field === 'event') event = value;
      else if (field === 'data') data = data === null ? value : `${data}\n${value}`;
    }
    if (data === null) return; // a comment only (keep-alive)
    const at = now();
    if (event === 'reset') {
      this.resets++;
      return;
    }
    this.messages++;
    if (id !== null) {
      const position = Number(id);
      if (this.lastId !== null && !(position > this.lastId)) this.outOfOrder++;
      this.lastId = position;
    }
    const recordId = JSON.parse(data).record.id;
    if (mode === 'verify') {
      const index = recordId - this.options.base;
      if (index < 0) return;
      if (index >= this.seen.length) {
        const grown = new Uint8Array(Math.max(index + 1, this.seen.length * 2));
        grown.set(this.seen);
        this.seen = grown;
      }
      if (this.seen[index]) this.duplicates++;
      this.seen[index] = 1;
      return;
    }
    let times = arrivals.get(recordId);
    if (!times) arrivals.set(recordId, (times = []));
    times.push(at);
    if (waiting && waiting.recordId === recordId && times.length >= waiting.count) finishWaiting();
  }

  close() {
    this.ended = true;
    this.request?.destroy();
  }
}

function finishWaiting() {
  const { recordId, resolve, timer } = waiting;
  waiting = null;
  clearTimeout(timer);
  resolve(arrivals.get(recordId) ?? []);
}

/** Opens `count` streams, `concurrency` at a time. */
async function open({ url, headers, count, concurrency, base = 0 }) {
  const started = now();
  let next = 0;
  let opened = 0;
  const errors = [];
  const lane = async () => {
    while (next < count) {
      next++;
      const stream = new Stream({ url, headers, base });
      try {
        await stream.connect();
        streams.push(stream);
        opened++;
      } catch (error) {
        if (errors.length < 5) errors.push(error.message);
        if (errors.length >= 5 && opened === 0) return; // nothing works: stop early
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
  return { opened, failed: count - opened, errors, ms: Math.round(now() - started) };
}

const handlers = {
  open,
  mode: ({ name }) => {
    mode = name;
    return { mode };
  },
  /** Resolves with the arrival times of `recordId` once `count` streams have it, or after `timeoutMs`. */
  await: ({ recordId, count, timeoutMs }) =>
    new Promise((resolve) => {
      const timer = setTimeout(finishWaiting, timeoutMs);
      waiting = { recordId, count, resolve, timer };
      if ((arrivals.get(recordId)?.length ?? 0) >= count) finishWaiting();
    }).then((times) => ({ times })),
  /** Per stream: which of `ids` never arrived, and what came out of order or twice. */
  verify: ({ ids }) => {
    const rows = streams.map((stream) => {
      let missing = 0;
      for (const id of ids) {
        const index = id - stream.options.base;
        if (index < 0 || index >= stream.seen.length || !stream.seen[index]) missing++;
      }
      return { messages: stream.messages, missing, outOfOrder: stream.outOfOrder, duplicates: stream.duplicates, reconnects: stream.reconnects, resets: stream.resets, open: stream.open };
    });
    return { rows, failures: failures.slice(0, 10) };
  },
  count: () => ({ open: streams.filter((stream) => stream.open).length, total: streams.length, failures: failures.slice(0, 10) }),
  close: () => {
    closing = true;
    for (const stream of streams.splice(0)) stream.close();
    arrivals.clear();
    failures.length = 0;
    closing = false;
    return { closed: true };
  },
};

process.on('message', async ({ seq, type, ...args }) => {
  try {
    send({ seq, ok: true, ...(await handlers[type](args)) });
  } catch (error) {
    send({ seq, ok: false, error: error instanceof Error ? error.stack : String(error) });
  }
});
process.on('disconnect', () => process.exit(0));
send({ ready: true });
