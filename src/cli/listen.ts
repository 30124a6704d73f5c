import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseSecret } from '../webhooks/secrets.js';
import type { EventValidator } from './event-catalog.js';
import { verifyDelivery } from '../webhooks/verify.js';

// `restwire listen --port P --secret S` (API.md §0): a local receiver that shows each delivery
// and whether its signature verifies, for developing against restwire's webhooks (API.md §4).

/** Where the listener prints; `process.stdout` or anything with a `write(text)`. */
export interface ListenerOutput {
  write(text: string): unknown;
}

/** Options for `startListener`. */
export interface ListenerOptions {
  /** Port to listen on; 0 picks a free one (see `Listener.port`). */
  port: number;
  /** Interface to bind (default 127.0.0.1: the listener is for local development). */
  host?: string;
  /** The webhook's `whsec_` secret, as returned when it was created. */
  secret: string;
  out?: ListenerOutput;
  /** With `--validate`: each body is checked against its event's schema (event-catalog.ts). */
  validator?: EventValidator;
}

/** A running listener. */
export interface Listener {
  /** The port actually bound. */
  port: number;
  /** Stops listening and drops open connections. */
  close(): Promise<void>;
}

// Deliveries are small JSON documents; the cap only keeps a stray upload from exhausting memory.
const MAX_BODY_BYTES = 5 * 1024 * 1024;

/** Starts a receiver that verifies and prints every POST on any path; 204 if verified, else 401. */
export async function startListener({
  port,
  host = '127.0.0.1',
  secret,
  out = process.stdout,
  validator,
}: ListenerOptions): Promise<Listener> {
  // Checked up front so a mistyped secret fails at start-up, not as a 401 on every delivery.
  parseSecret(secret);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new Error(`port must be an integer from 0 to 65535, got ${port}`);
  }

  const server = createServer(function receiveDelivery(req: IncomingMessage, res: ServerResponse) {
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST', 'content-type': 'text/plain' }).end('deliveries are POST requests\n');
      return;
    }
    readBody(req).then(
      (body) => {
        const verified = verifyDelivery(secret, req.headers, body);
        out.write(formatDelivery(req, body, verified, validator));
        if (verified) res.writeHead(204).end();
        else res.writeHead(401, { 'content-type': 'text/plain' }).end('signature verification failed\n');
      },
      () => {
        res.writeHead(413, { 'content-type': 'text/plain', connection: 'close' }).end('body too large\n');
      },
    );
  });

  await listen(server, port, host);
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject); // EADDRINUSE and friends reach the CLI as a rejection
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** The raw body bytes: signatures cover bytes, so nothing may be decoded before verifying. */
function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        req.removeAllListeners('data');
        req.resume(); // drain the rest unread
        reject(new Error('body too large'));
      } else {
        chunks.push(chunk);
      }
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** A readable block for one delivery: when, what, which, verified, then the pretty body. */
function formatDelivery(req: IncomingMessage, body: Buffer, verified: boolean, validator: EventValidator | undefined): string {
  const header = (name: string): string => {
    const value = req.headers[name];
    return printable(Array.isArray(value) ? value.join(', ') : (value ?? '—'));
  };
  const delivery = req.headers['x-service-delivery'] ? header('x-service-delivery') : header('webhook-id');
  return [
    `── ${new Date().toISOString()}  ${req.method ?? ''} ${printable(req.url ?? '/')}`,
    `   event     ${header('x-service-event')}`,
    `   delivery  ${delivery}`,
    `   hook      ${header('x-service-hook-id')}`,
    `   verified  ${verified ? '✓ signature valid' : '✗ signature INVALID'}`,
    ...(validator ? [`   schema    ${schemaLine(validator, header('x-service-event'), body)}`] : []),
    prettyBody(body),
    '',
    '',
  ].join('\n');
}

/** `--validate`: whether the body matches the catalog's schema of its event. */
function schemaLine(validator: EventValidator, event: string, body: Buffer): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return '✗ body is not JSON';
  }
  const verdict = validator.validate(event, parsed);
  if (verdict.kind === 'valid') return `✓ matches the ${event} schema`;
  if (verdict.kind === 'unknown') return `– no schema for "${event}" in the catalog`;
  return `✗ does NOT match the ${event} schema: ${printable(verdict.errors.join('; '))}`;
}

function prettyBody(body: Buffer): string {
  const text = body.toString('utf8');
  let pretty: string;
  try {
    pretty = JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return printable(text, true);
  }
  // JSON.stringify escapes C0 controls inside strings as \u00XX; the rest of UNSAFE is escaped the
  // same way, so the body stays valid JSON. The newlines left are its own indentation.
  return pretty.replace(UNSAFE, (c) => (c === '\n' ? c : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
}

// What a sender could use to drive or deceive the terminal: control characters (C0, DEL and C1;
// ESC [ and its one-byte form U+009B start ECMA-48 commands) and the bidi controls such as
// U+202E, which reorder what is shown (Trojan Source, CVE-2021-42574).
const UNSAFE = /[\p{Cc}\p{Bidi_Control}]/gu;

/** Replaces unsafe characters (UNSAFE), so a sender cannot drive the terminal or reorder what it shows. */
function printable(text: string, keepLines = false): string {
  return text.replace(UNSAFE, (c) => (keepLines && (c === '\n' || c === '\t') ? c : '\uFFFD'));
}
