// How every restwire process logs. Standard output that is a terminal gets one readable line per
// request (and per event) through pino-pretty; anything else, a file or a log collector, gets
// pino's JSON lines with `reqId`, as before (issue 19). Secrets are never logged: the headers
// that carry them are redacted wherever a request is serialised.

import { randomUUID } from 'node:crypto';
import type { LogController } from 'fastify';
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import type { Config } from '../config.js';

/** Which headers carry secrets: never logged (API.md §3 fine print; issue #3). */
export const REDACTED = ['req.headers.authorization', 'req.headers.cookie', 'req.headers["x-csrftoken"]'];

/** Where logs go: standard output unless a test hands another stream. */
export interface LogOutput {
  readonly isTTY?: boolean;
  write(text: string): unknown;
}

/** Pino's options for a process, and whether the lines are the readable, one-per-request kind. */
export interface LogSetup {
  readonly options: LoggerOptions & { stream?: DestinationStream };
  /** On a terminal, what turns Fastify's two request lines into one (OneLinePerRequest). */
  readonly logController?: LogController;
}

/**
 * The logger options for LOG_LEVEL and `output`. pino-pretty is loaded only for a terminal, so
 * a server logging JSON does not carry it in memory.
 */
export async function logSetup(config: Pick<Config, 'logLevel'>, output: LogOutput = process.stdout): Promise<LogSetup> {
  const base: LoggerOptions = { level: config.logLevel, redact: REDACTED };
  if (output.isTTY !== true) return { options: base };
  const { default: pretty } = await import('pino-pretty');
  const stream = pretty({
    // A stream, not pino-pretty's worker-thread transport: a line is written before the process
    // goes on, so the last lines before a crash or exit are not lost.
    destination: output as NodeJS.WritableStream,
    sync: true,
    colorize: process.stdout === output && pretty.isColorSupported,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,reqId',
    singleLine: true,
  });
  // Loaded here, not imported above: it extends a class of Fastify's, which the processes that
  // serve no HTTP (worker, serve's dispatcher process) would otherwise load for nothing.
  const { OneLinePerRequest } = await import('./request-lines.js');
  return { options: { ...base, stream }, logController: new OneLinePerRequest() };
}

/**
 * Fastify's `genReqId`: ids in a UUID's shape, whose first 24 characters are random per process
 * and the last 12 count its requests, so that the lines of several processes or restarts never
 * share an id. A `randomUUID()` per request cost about 1 µs of a GET's CPU (issue 21).
 */
export function requestIds(): () => string {
  const prefix = randomUUID().slice(0, 24);
  let count = 0;
  return () => prefix + (count++).toString(16).padStart(12, '0');
}

/** A logger for a process without an HTTP server (worker, the cluster's primary). */
export async function createLogger(config: Pick<Config, 'logLevel'>, output?: LogOutput): Promise<Logger> {
  const { options } = await logSetup(config, output);
  const { stream, ...rest } = options;
  return stream ? pino(rest, stream) : pino(rest);
}
