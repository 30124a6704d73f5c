import { performance } from 'node:perf_hooks';
import { request, type Dispatcher } from 'undici';
import { VERSION } from '../version.js';
import { TargetRefusedError } from './address-guard.js';
import { parseRetryAfter } from './retry-schedule.js';

// The "send" stage of the webhook pipeline (STYLE.md 7): one HTTP POST to a receiver, turned into
// a record of what happened whatever happens (API.md §4 "Delivery guarantees", §6 "Retries").

/** How much of a receiver's response body is kept for the delivery log (API.md §4). */
export const RESPONSE_BODY_LIMIT = 64 * 1024;

/** One attempt to make: where, with which signed headers, and through which (guarded) dispatcher. */
export interface AttemptRequest {
  url: string;
  /** The delivery and signature headers; content-type, content-length and user-agent are added. */
  headers: Record<string, string>;
  body: string;
  /** Limit for the whole attempt, connect to last byte, in milliseconds (default 10 000). */
  timeoutMs?: number;
  /** Required so that no send can bypass the SSRF guard: pass `createGuardedAgent(…)` (guarded-agent.ts). */
  dispatcher: Dispatcher;
}

/** What one attempt did, ready to be recorded in the delivery log. */
export interface AttemptOutcome {
  /** A 2xx arrived, in full (up to the body limit), within the timeout. */
  ok: boolean;
  /** The response status, or null when none arrived. */
  statusCode: number | null;
  durationMs: number;
  /** Exactly the headers sent, lower-case names. */
  requestHeaders: Record<string, string>;
  responseHeaders: Record<string, string>;
  /** The response body as UTF-8 text, cut at RESPONSE_BODY_LIMIT bytes. */
  responseBody: string;
  /** Why the attempt failed ("HTTP 500", "timeout after 10000 ms", …); null exactly when ok. */
  error: string | null;
  /** Seconds the receiver asked to wait with Retry-After on a 429 or 503. */
  retryAfterSeconds?: number;
}

/** Sends one delivery attempt and reports its outcome; never throws. */
export async function sendAttempt({
  url,
  headers,
  body,
  timeoutMs = 10_000,
  dispatcher,
}: AttemptRequest): Promise<AttemptOutcome> {
  const started = performance.now();
  // One signal for connect, headers and body: API.md §6 counts the whole attempt against 10 s.
  const signal = AbortSignal.timeout(timeoutMs);
  const requestHeaders: Record<string, string> = {};
  const result = {
    statusCode: null as number | null,
    responseHeaders: {} as Record<string, string>,
    responseBody: '',
  };
  const finish = (error: string | null, retryAfterSeconds?: number): AttemptOutcome => ({
    ok: error === null,
    ...result,
    durationMs: Math.round(performance.now() - started),
    requestHeaders,
    error,
    ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
  });

  try {
    for (const [name, value] of Object.entries(headers)) requestHeaders[name.toLowerCase()] = value;
    Object.assign(requestHeaders, {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body, 'utf8')),
      'user-agent': `restwire-hookshot/${VERSION}`,
    });
    // undici's `request` never follows redirects (that takes an interceptor), so a 3xx comes
    // back as itself and counts as a failure: API.md §4 "Redirects are not followed".
    const response = await request(url, { method: 'POST', headers: requestHeaders, body, dispatcher, signal });
    result.statusCode = response.statusCode;
    result.responseHeaders = flattenHeaders(response.headers);
    result.responseBody = await readCapped(response.body, RESPONSE_BODY_LIMIT);
  } catch (error) {
    return finish(describeFailure(error, signal, timeoutMs));
  }
  const status = result.statusCode;
  if (status >= 200 && status < 300) return finish(null);
  const retryAfter = status === 429 || status === 503 ? parseRetryAfter(result.responseHeaders['retry-after']) : undefined;
  return finish(status >= 300 && status < 400 ? `redirect not followed (HTTP ${status})` : `HTTP ${status}`, retryAfter);
}

/** Reads at most `limit` bytes, then destroys the stream so the rest is never downloaded. */
async function readCapped(body: Dispatcher.ResponseData['body'], limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const bytes = chunk as Buffer;
    if (size + bytes.length > limit) {
      chunks.push(bytes.subarray(0, limit - size));
      size = limit;
      break; // leaving the loop destroys the body, which closes the connection
    }
    chunks.push(bytes);
    size += bytes.length;
  }
  return Buffer.concat(chunks, size).toString('utf8');
}

/** Joins repeated response headers the way HTTP allows (RFC 9110 §5.3). */
function flattenHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return flat;
}

const NETWORK_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'DNS lookup failed (temporary)',
  UND_ERR_CONNECT_TIMEOUT: 'connect timeout',
  UND_ERR_SOCKET: 'connection closed by the receiver',
  UND_ERR_CLOSED: 'connection closed',
};

/** A short, stable description of why no complete response was received. */
function describeFailure(error: unknown, signal: AbortSignal, timeoutMs: number): string {
  if (signal.aborted) return `timeout after ${timeoutMs} ms`;
  if (error instanceof TargetRefusedError) return `target refused: ${error.message}`;
  const err = error as (Error & { code?: unknown; cause?: unknown }) | null;
  const code = typeof err?.code === 'string' ? err.code : undefined;
  if (code !== undefined && NETWORK_ERRORS[code]) return NETWORK_ERRORS[code];
  // TLS failures carry OpenSSL codes (CERT_HAS_EXPIRED, …); the message says it best.
  const message = err instanceof Error ? err.message : String(error);
  return code ? `${code}: ${message}` : message || 'request failed';
}
