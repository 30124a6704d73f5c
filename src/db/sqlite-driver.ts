import type SQLite from 'better-sqlite3';
import {
  CompiledQuery,
  SqliteAdapter,
  SqliteDialect,
  type DatabaseConnection,
  type DialectAdapter,
  type Driver,
  type QueryResult,
} from 'kysely';

/**
 * Kysely's SQLite dialect with its driver replaced (issue #6). Three things differ from Kysely's
 * own SqliteDriver, each found in a profile or a failure:
 *
 * - **Hand-off, not a herd.** SQLite has one connection, so queries take turns. Kysely's mutex
 *   wakes every waiter on each release and all but one go back to sleep: with the 50 requests a
 *   busy server has in flight, a one-row read cost 6 µs instead of 3. Here the connection passes
 *   straight to the longest waiter.
 * - **Prepared once.** Kysely prepares every query anew, and preparing costs more than running a
 *   small query. Kysely emits a bounded set of SQL texts (values are parameters), so statements
 *   are cached by text; the cache is bounded for the few with variable `in` lists. One query runs
 *   at a time, so a statement is never used by two at once.
 * - **BEGIN IMMEDIATE.** With a plain BEGIN, a transaction that reads and then writes fails at
 *   once with SQLITE_BUSY when another process (a `serve --workers` sibling) committed in
 *   between; an immediate one waits for the write lock instead. Every transaction here writes.
 * - **Waiting for the write lock without holding the event loop.** Another process holds it at
 *   times: serve's dispatcher process (cli/dispatcher-process.ts) claims and records deliveries
 *   through the same file. SQLite's busy handler (busy_timeout) sleeps in the calling thread, so
 *   with better-sqlite3 a request's BEGIN stalled every request of the process while the other
 *   held the lock (issue 21, the backlog drill). Here busy_timeout is 0 (database.ts) and a
 *   statement that finds the lock taken, outside a transaction (a BEGIN, a single write), is
 *   tried again after a timer, up to LOCK_WAIT_MS: the event loop goes on meanwhile.
 */
export class RestwireSqliteDialect extends SqliteDialect {
  readonly #database: SQLite.Database;
  #driver: HandOffSqliteDriver | null = null;

  constructor(database: SQLite.Database) {
    super({ database });
    this.#database = database;
  }

  override createDriver(): Driver {
    this.#driver = new HandOffSqliteDriver(this.#database);
    return this.#driver;
  }

  /** The storage's data version token (database.ts `dataVersion`), read in turn with the connection's other statements. */
  async dataVersion(): Promise<string> {
    if (this.#driver === null) throw new Error('the dialect has no driver yet: open a Kysely instance with it first');
    const connection = await this.#driver.acquireConnection();
    try {
      return await connection.dataVersion();
    } finally {
      await this.#driver.releaseConnection();
    }
  }

  override createAdapter(): DialectAdapter {
    return new TransactionalDdlSqliteAdapter();
  }
}

/**
 * SQLite's DDL is transactional, but Kysely's adapter says it is not, so its Migrator would run
 * migrations outside a transaction: a failed one would leave half its changes behind
 * (RESOURCES.md §6), and two processes starting together could both apply it. In a transaction
 * (BEGIN IMMEDIATE, above) a failure rolls back, and the second process waits for the first and
 * then finds nothing pending.
 */
class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

class HandOffSqliteDriver implements Driver {
  readonly #database: SQLite.Database;
  readonly #connection: CachedStatementConnection;
  #held = false;
  readonly #waiting: Array<() => void> = [];

  constructor(database: SQLite.Database) {
    this.#database = database;
    this.#connection = new CachedStatementConnection(database);
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<CachedStatementConnection> {
    if (this.#held) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#held = true;
    return this.#connection;
  }

  async releaseConnection(): Promise<void> {
    // The connection stays held and goes to the next waiter, if there is one.
    const next = this.#waiting.shift();
    if (next) next();
    else this.#held = false;
  }

  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'));
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    // Some errors (a full disk, an I/O error) end the transaction themselves; a ROLLBACK then
    // fails with "no transaction is active" and would hide the error that matters.
    if (this.#database.inTransaction) await connection.executeQuery(CompiledQuery.raw('rollback'));
  }

  async destroy(): Promise<void> {
    this.#database.close();
  }
}

const STATEMENT_CACHE_SIZE = 500;

/** How long a statement waits for another process's write lock, as busy_timeout did. */
export const LOCK_WAIT_MS = 5_000;
/** The longest pause between two tries: the dispatcher process holds the lock a few milliseconds at a time. */
const LOCK_RETRY_MAX_MS = 4;

/** SQLITE_BUSY and its extended codes: another connection holds the lock this statement needs. */
function isBusy(error: unknown): boolean {
  return typeof (error as { code?: unknown }).code === 'string' && (error as { code: string }).code.startsWith('SQLITE_BUSY');
}

const DATA_VERSION = CompiledQuery.raw('pragma data_version');

class CachedStatementConnection implements DatabaseConnection {
  readonly #database: SQLite.Database;
  readonly #statements = new Map<string, SQLite.Statement>();
  /** Statements run that may write: the part of the data version this connection's own changes move. */
  #writes = 0;

  constructor(database: SQLite.Database) {
    this.#database = database;
  }

  #prepare(text: string): SQLite.Statement {
    let statement = this.#statements.get(text);
    if (statement === undefined) {
      statement = this.#database.prepare(text);
      if (this.#statements.size >= STATEMENT_CACHE_SIZE) this.#statements.delete(this.#statements.keys().next().value!);
      this.#statements.set(text, statement);
    }
    return statement;
  }

  /**
   * A token that moves whenever the database may have changed (a reused response's key, issue 6):
   * SQLite's data_version moves when another connection (another process) commits, and this
   * connection counts the statements it runs that may write. It was data_version and
   * total_changes() read in one `select` through the pragma's table-valued function; the plain
   * pragma costs serve about 3 µs less a reused GET (issue 21).
   */
  async dataVersion(): Promise<string> {
    const { rows } = await this.executeQuery<{ data_version: number }>(DATA_VERSION);
    return `${rows[0]!.data_version}.${this.#writes}`;
  }

  async executeQuery<R>({ sql, parameters }: CompiledQuery): Promise<QueryResult<R>> {
    const statement = this.#prepare(sql);
    // Counted before it runs: a statement that fails moves the token too, which costs a reuse at most.
    if (!statement.readonly) this.#writes++;
    for (let tries = 1, started = 0; ; tries++) {
      try {
        if (statement.reader) return { rows: statement.all(parameters) as R[] };
        const { changes, lastInsertRowid } = statement.run(parameters);
        return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] };
      } catch (error) {
        // Inside a transaction this connection holds the write lock already (BEGIN IMMEDIATE), and
        // a statement that failed may have done part of its work: never tried again there.
        if (!isBusy(error) || this.#database.inTransaction) throw error;
        started ||= Date.now();
        if (Date.now() - started >= LOCK_WAIT_MS) throw error;
        await new Promise((resolve) => setTimeout(resolve, Math.min(tries, LOCK_RETRY_MAX_MS)));
      }
    }
  }

  async *streamQuery<R>({ sql, parameters }: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    const statement = this.#prepare(sql);
    if (!statement.reader) throw new Error('only queries that return rows can be streamed');
    if (!statement.readonly) this.#writes++;
    for (const row of statement.iterate(parameters)) yield { rows: [row as R] };
  }
}
