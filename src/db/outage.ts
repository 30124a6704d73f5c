// Database outages (issue 11, finding 9): which errors mean "the database cannot be used right
// now" rather than "this query is wrong", and logging each outage once instead of a stack per
// request. A request caught by one is answered 503 with Retry-After (http/problem-handler.ts).

/** Node socket errors: the server is not there, or the connection to it broke. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * PostgreSQL SQLSTATEs (Appendix A): class 08 connection exceptions, and the server refusing
 * or ending work as it shuts down, starts up or runs out of connections.
 */
const POSTGRES_STATES = /^(08...|57P0[1-3]|53300)$/;

/**
 * 55000 (object not in prerequisite state) is also what a query gets for its own mistakes
 * (`currval` before `nextval`); only as a connection's fatal error does it mean the database is
 * closed for maintenance (`ALTER DATABASE … ALLOW_CONNECTIONS false`; issue 22, item 21).
 * `routine` names the server's C function and, unlike `severity`, is never translated.
 */
function isDatabaseClosed(code: unknown, severity: unknown, routine: unknown): boolean {
  return code === '55000' && (severity === 'FATAL' || routine === 'CheckMyDatabase');
}

/** node-postgres's own messages for a lost or never-made connection (it sets no code on them). */
const POSTGRES_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/;

/** better-sqlite3: the file is locked beyond busy_timeout, unreadable, or the disk failed or filled. */
const SQLITE_CODES = /^SQLITE_(BUSY|LOCKED|IOERR|CANTOPEN|FULL)/;

/** Whether `error` (or what it wraps) means the database is unreachable or unusable for now. */
export function isDatabaseUnavailable(error: unknown, depth = 0): boolean {
  if (depth > 3 || typeof error !== 'object' || error === null) return false;
  const { code, message, severity, routine, cause, errors } = error as {
    code?: unknown;
    message?: unknown;
    severity?: unknown;
    routine?: unknown;
    cause?: unknown;
    errors?: unknown;
  };
  if (typeof code === 'string' && (SOCKET_CODES.has(code) || POSTGRES_STATES.test(code) || SQLITE_CODES.test(code))) return true;
  if (isDatabaseClosed(code, severity, routine)) return true;
  if (typeof message === 'string' && POSTGRES_MESSAGES.test(message)) return true;
  // An AggregateError (a host with several addresses, all refused) or a wrapped cause.
  if (Array.isArray(errors) && errors.some((inner) => isDatabaseUnavailable(inner, depth + 1))) return true;
  return cause !== undefined && isDatabaseUnavailable(cause, depth + 1);
}

/**
 * Whether `error` is PostgreSQL ending a transaction that lost a deadlock (40P01) or a
 * serialization check (40001): nothing it did was kept, and running it again may succeed. Writes
 * share commits (group-commit.ts), so a unit waiting for a row another lane locked can meet one.
 */
export function isTransactionConflict(error: unknown, depth = 0): boolean {
  if (depth > 3 || typeof error !== 'object' || error === null) return false;
  const { code, cause } = error as { code?: unknown; cause?: unknown };
  // A hook's write meets it inside the user's code, which wraps it (resources/user-code.ts).
  return code === '40P01' || code === '40001' || isTransactionConflict(cause, depth + 1);
}

export interface OutageLog {
  error(details: object, message: string): void;
  info(details: object, message: string): void;
}

/**
 * Reports each database outage once: an error line at the first failed request, then nothing
 * more however many requests fail, until a probe (`ping`, every `probeMs`) finds the database
 * again and an info line says so.
 */
export class DatabaseOutage {
  private since: number | null = null;
  private probe: NodeJS.Timeout | null = null;

  constructor(
    private readonly ping: () => Promise<boolean>,
    private readonly log: OutageLog,
    private readonly probeMs = 1_000,
  ) {}

  /** Whether an outage is under way (seen and not yet recovered). */
  get down(): boolean {
    return this.since !== null;
  }

  /** A request failed with an error `isDatabaseUnavailable` recognised. */
  noted(error: unknown): void {
    if (this.since !== null) return;
    this.since = Date.now();
    const reason = error instanceof Error ? error.message : String(error);
    this.log.error({ reason }, 'database unreachable: answering 503 until it returns');
    this.probe = setInterval(() => void this.check(), this.probeMs);
    this.probe.unref();
  }

  /** Stops probing (at shutdown). */
  stop(): void {
    if (this.probe) clearInterval(this.probe);
    this.probe = null;
  }

  private async check(): Promise<void> {
    if (this.since === null || !(await this.ping())) return;
    this.log.info({ outageMs: Date.now() - this.since }, 'database reachable again');
    this.since = null;
    this.stop();
  }
}

/**
 * Whether `error` is PostgreSQL refusing a prepared statement whose result columns a migration
 * changed (db/pipelining.ts prepares it anew meanwhile): not an outage, but the request succeeds
 * when tried again. `routine` as in `isDatabaseClosed`.
 */
export function isPreparedStatementOutdated(error: unknown): boolean {
  const { code, routine } = (error ?? {}) as { code?: unknown; routine?: unknown };
  return code === '0A000' && routine === 'RevalidateCachedQuery';
}
