// Fewer round trips to PostgreSQL inside a write transaction (issue 21). node-postgres in
// pipeline mode writes a query to the socket at once, without waiting for the answer to the one
// before; the server runs them in order and answers each. Kysely awaits every statement, so on its
// own a transaction costs one round trip per statement. This driver lets a transaction send
// statements whose answer it does not need yet:
//
// - BEGIN goes out with the transaction's first statement (one round trip, not two);
// - `sendLater(trx, query)`: a statement whose outcome matters only at commit (a savepoint, the
//   change log's and the outbox's inserts, NOTIFY, the change log's numbering) goes out at once and
//   the transaction carries on; its error, if any, is thrown by the transaction's next awaited
//   statement or by its COMMIT (a failed statement aborts a PostgreSQL transaction, and COMMIT then
//   rolls it back), so nothing is committed that should not be;
// - `sendAhead(trx, query)`: a query whose rows are needed later (the active webhooks) goes out
//   ahead of the statements that follow it, which share its round trip.
//
// - every statement with parameters that runs often is parsed and planned once per connection, as
//   a named prepared statement (`preparingClient`); `prepared(query)` names one from its first run.
//
// Outside a transaction, and on SQLite (whose driver knows nothing of these marks), both run the
// statement and wait for it as any other: the same code serves both databases.

import { CompiledQuery, PostgresDialect, PostgresDriver, type DatabaseConnection, type Driver, type PostgresDialectConfig, type QueryResult, type TransactionSettings } from 'kysely';

import type pg from 'pg';
import { isPreparedStatementOutdated } from './outage.js';

/** Kysely's executors and transactions, as far as these helpers need them. */
interface Executor {
  executeQuery<R>(query: CompiledQuery<R>): Promise<QueryResult<R>>;
}

type Sink = ((answer: Promise<QueryResult<unknown>>) => void) | null;
/** Queries marked to be sent without waiting: null, or where their answer goes (`sendAhead`). */
const marked = new WeakMap<CompiledQuery, Sink>();
const EMPTY: QueryResult<never> = { rows: [] };
const ignore = () => {};

/** Statements sent without waiting that only a fault of the transaction can fail (`sendLater`'s `failsAlone: false`). */
const failingOnlyWithTransaction = new WeakSet<CompiledQuery>();

/**
 * Runs `query` in `trx`; on PostgreSQL, within a transaction, resolves as soon as it is sent. Its
 * error is thrown by the transaction's next awaited statement or its commit. `failsAlone: false`
 * says nothing the write did can make it fail, only a fault of the transaction (a NOTIFY, a row
 * no other transaction can write meanwhile): a release sent by `sendIfAnswered` need not wait
 * for it.
 */
export async function sendLater(trx: Executor, query: CompiledQuery, { failsAlone = true }: { failsAlone?: boolean } = {}): Promise<void> {
  const copy = CompiledQuery.raw(query.sql, [...query.parameters]);
  marked.set(copy, null);
  if (!failsAlone) failingOnlyWithTransaction.add(copy);
  await trx.executeQuery(copy);
}

/**
 * Sends `query` in `trx` ahead of what follows: the statements issued after it share its round
 * trip. Resolves with its rows once they arrive (at once on SQLite and outside a transaction).
 */
export async function sendAhead<R>(trx: Executor, query: CompiledQuery<R>): Promise<QueryResult<R>> {
  const copy = CompiledQuery.raw(query.sql, [...query.parameters]) as CompiledQuery<R>;
  let answer: Promise<QueryResult<unknown>> | undefined;
  marked.set(copy, (sent) => (answer = sent));
  const direct = await trx.executeQuery(copy);
  return (answer as Promise<QueryResult<R>> | undefined) ?? direct;
}

/** Queries to send without waiting only if every statement sent before them has answered (`sendIfAnswered`). */
const onlyIfAnswered = new WeakSet<CompiledQuery>();

/**
 * Runs `query` in `trx`; on PostgreSQL, within a transaction whose statements have all answered
 * (but those sent with `failsAlone: false`), resolves as soon as it is sent, with `early` the
 * promise of its answer (its error is also thrown by the next awaited statement). Otherwise it
 * waits for the answers before it and its own, as any statement, and `early` is null. For a
 * statement that can fail only when something sent before it did (a savepoint's release): sent
 * early, its failure is its own, or the transaction's. (The answer is wrapped: an async
 * function's result that is a promise is waited for.)
 */
export async function sendIfAnswered(trx: Executor, query: CompiledQuery): Promise<{ early: Promise<unknown> | null }> {
  const copy = CompiledQuery.raw(query.sql, [...query.parameters]);
  const sent: { early: Promise<unknown> | null } = { early: null };
  marked.set(copy, (answer) => (sent.early = answer));
  onlyIfAnswered.add(copy);
  await trx.executeQuery(copy);
  return sent;
}

/** Queries run after a failure (ROLLBACK TO): what was sent before them no longer matters. */
const discarding = new WeakSet<CompiledQuery>();

/**
 * Runs `query` (a ROLLBACK TO) after a failure, whatever the statements sent before it without
 * waiting answered: the rollback undoes them.
 */
export async function afterFailure(trx: Executor, query: CompiledQuery): Promise<void> {
  const copy = CompiledQuery.raw(query.sql, [...query.parameters]);
  discarding.add(copy);
  await trx.executeQuery(copy);
}

/** Statements prepared under a name, by their SQL. */
const preparedNames = new Map<string, string>();
/** Names handed out so far (a statement renamed after a schema change takes a new one). */
let namesGiven = 0;
/**
 * Statements prepared in all: each is prepared on every connection that runs it, until that
 * connection closes, so a process that compiles ever new statements stops preparing them.
 */
const MAX_PREPARED = 256;
/** How often a statement runs unnamed before it is prepared: a statement run once stays unnamed. */
const PREPARE_AFTER = 3;
/** Runs so far of statements not prepared yet; forgotten whole when it holds this many. */
const runs = new Map<string, number>();
const MAX_COUNTED = 4096;

/**
 * Marks a compiled query to run as a named prepared statement on PostgreSQL from its first run
 * (`preparingClient` prepares every statement after a few runs). For a statement whose first
 * runs already cost PostgreSQL more to plan than to run (a webhook filter's thousands of
 * parameters). Returns the query; SQLite ignores the mark (better-sqlite3 keeps its statements).
 */
export function prepared<R>(query: CompiledQuery<R>): CompiledQuery<R> {
  if (!preparedNames.has(query.sql) && preparedNames.size < MAX_PREPARED) preparedNames.set(query.sql, newName());
  return query;
}

const newName = () => `restwire_${++namesGiven}`;

/** The name `text` runs under: given on its PREPARE_AFTER-th run, while names last. */
function nameOf(text: string): string | undefined {
  const name = preparedNames.get(text);
  if (name !== undefined || preparedNames.size >= MAX_PREPARED) return name;
  const count = (runs.get(text) ?? 0) + 1;
  if (count < PREPARE_AFTER) {
    if (runs.size >= MAX_COUNTED) runs.clear();
    runs.set(text, count);
    return undefined;
  }
  runs.delete(text);
  const given = newName();
  preparedNames.set(text, given);
  return given;
}

/**
 * A prepared statement whose result columns changed since it was prepared (a migration added a
 * column to a table it reads with `*`) fails on every run until it is prepared anew: its SQL then
 * takes a new name, which each connection prepares on its next run.
 */
function renameAfterSchemaChange(text: string, name: string): (error: unknown) => never {
  return (error) => {
    if (isPreparedStatementOutdated(error) && preparedNames.get(text) === name) preparedNames.set(text, newName());
    throw error;
  };
}

/**
 * node-postgres's client, running each statement with parameters under a name once it has run a
 * few times (as pgx and postgres.js do): PostgreSQL then parses it once per connection and plans
 * it as it sees fit (a generic plan after five runs) instead of parsing and planning every run,
 * which cost PostgreSQL a third of its CPU per create (issue 21). Kysely calls
 * `query(text, values)`; that form alone is rewritten.
 */
export function preparingClient({ Client, Query }: Pick<typeof pg, 'Client' | 'Query'>): typeof pg.Client {
  class PreparingClient extends Client {}
  const query = Client.prototype.query;
  // pg's `query` has a dozen overloads; this forwards any of them untouched but the one above.
  PreparingClient.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    holdWritesUntilTickEnds(this);
    const [text, values] = args;
    // Statements without parameters (BEGIN, COMMIT, SAVEPOINT, the numbering) go by the simple protocol.
    const name = args.length === 2 && typeof text === 'string' && Array.isArray(values) && values.length > 0 ? nameOf(text) : undefined;
    if (name === undefined) return Reflect.apply(query, this, args);
    // A Query made from the text and named after: node-postgres copies a `{ name, text, values }`
    // config through its property descriptors, 4 % of a batch's CPU.
    // `name` and `callback` are fields of pg's Query, not in its typings.
    const named = new Query(text as string, values as unknown[]) as pg.Query & { name: string; callback: (error: Error | null, result: unknown) => void };
    named.name = name;
    const answer = new Promise((resolve, reject) => {
      named.callback = (error: Error | null, result: unknown) => (error ? reject(error) : resolve(result));
    });
    Reflect.apply(query, this, [named]);
    return answer.catch(renameAfterSchemaChange(text as string, name));
  } as typeof query;
  return PreparingClient;
}

/** Sockets corked until the current tick's promise continuations have run. */
const corked = new WeakSet<object>();

/**
 * Corks the client's socket until the end of this tick, so that the statements a transaction
 * sends without waiting (and any other query issued in the same tick) leave in one write: one
 * wake-up of the server's backend instead of one per statement. `process.nextTick` runs after the
 * promise continuations queued now, which is where Kysely hands each statement over.
 */
function holdWritesUntilTickEnds(client: pg.Client): void {
  // `connection.stream` is node-postgres's socket; not in its typings.
  const stream = (client as unknown as { connection?: { stream?: { cork?: () => void; uncork?: () => void } } }).connection?.stream;
  if (!stream?.cork || !stream.uncork || corked.has(stream)) return;
  corked.add(stream);
  stream.cork();
  process.nextTick(() => {
    corked.delete(stream);
    stream.uncork!();
  });
}

/** A pooled connection that sends marked statements without waiting, within a transaction. */
class PipelinedConnection implements DatabaseConnection {
  readonly inner: DatabaseConnection;
  #inTransaction = false;
  /** In a transaction begun with settings (an isolation level): not pipelined, but a transaction. */
  #inSetTransaction = false;
  /** Statements sent and not yet awaited: the next awaited one (or the commit) throws their error. */
  #outstanding: Promise<unknown>[] = [];
  /** How many of `#outstanding` the write's own doing may fail (all but `failsAlone: false` ones). */
  #mayFailAlone = 0;

  constructor(inner: DatabaseConnection) {
    this.inner = inner;
  }

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const sink = marked.get(query);
    // The inner connection hands the query to the pg client synchronously, so it is on its way
    // (pipeline mode) before anything issued after this call.
    const answer = this.inner.executeQuery<R>(query);
    if (sink !== undefined && this.#inTransaction && (this.#mayFailAlone === 0 || !onlyIfAnswered.has(query))) {
      answer.catch(ignore);
      this.#outstanding.push(answer);
      if (!failingOnlyWithTransaction.has(query)) this.#mayFailAlone++;
      sink?.(answer as Promise<QueryResult<unknown>>);
      return EMPTY;
    }
    if (discarding.has(query)) this.#outstanding = [];
    this.#mayFailAlone = 0;
    if (this.#outstanding.length > 0) {
      const earlier = this.#outstanding;
      this.#outstanding = [];
      try {
        await Promise.all(earlier);
      } catch (error) {
        answer.catch(ignore);
        throw error;
      }
    }
    try {
      return await answer;
    } catch (error) {
      // A statement prepared before a migration changed its result columns fails once, and has a
      // new name by now (preparingClient): outside a transaction it runs again at once. Inside
      // one the transaction has failed, and the write with it.
      if (!isPreparedStatementOutdated(error) || this.#inTransaction || this.#inSetTransaction) throw error;
      return await this.inner.executeQuery<R>(query);
    }
  }

  streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    return this.inner.streamQuery<R>(query, chunkSize);
  }

  begin(): void {
    this.#inTransaction = true;
    const begin = this.inner.executeQuery(BEGIN);
    begin.catch(ignore);
    this.#outstanding.push(begin);
  }

  /** A transaction begun with settings, by Kysely's own BEGIN: its statements are sent one by one. */
  beganWithSettings(): void {
    this.#inSetTransaction = true;
  }

  /** The transaction ended: a rollback does not care what the statements in flight answered. */
  ended(): void {
    this.#inTransaction = false;
    this.#inSetTransaction = false;
    this.#outstanding = [];
    this.#mayFailAlone = 0;
  }
}

const BEGIN = CompiledQuery.raw('begin');
const COMMIT = CompiledQuery.raw('commit');
const ROLLBACK = CompiledQuery.raw('rollback');

class PipelinedPostgresDriver extends PostgresDriver implements Driver {
  readonly #wrappers = new WeakMap<DatabaseConnection, PipelinedConnection>();

  override async acquireConnection(): Promise<DatabaseConnection> {
    const inner = await super.acquireConnection();
    let connection = this.#wrappers.get(inner);
    if (!connection) this.#wrappers.set(inner, (connection = new PipelinedConnection(inner)));
    return connection;
  }

  override async releaseConnection(connection: DatabaseConnection): Promise<void> {
    // PostgresDriver releases its own connection type; the wrapper only holds one.
    await super.releaseConnection((connection as PipelinedConnection).inner as Parameters<PostgresDriver['releaseConnection']>[0]);
  }

  override async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    if (settings.isolationLevel || settings.accessMode) {
      await super.beginTransaction(connection, settings);
      (connection as PipelinedConnection).beganWithSettings();
      return;
    }
    (connection as PipelinedConnection).begin();
  }

  override async commitTransaction(connection: DatabaseConnection): Promise<void> {
    try {
      await connection.executeQuery(COMMIT);
    } finally {
      (connection as PipelinedConnection).ended();
    }
  }

  override async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    (connection as PipelinedConnection).ended();
    await connection.executeQuery(ROLLBACK);
  }
}

/** Kysely's PostgreSQL dialect with the pipelining driver; its pool must be made with `pipeline: true`. */
export class PipelinedPostgresDialect extends PostgresDialect {
  readonly #config: PostgresDialectConfig;

  constructor(config: PostgresDialectConfig) {
    super(config);
    this.#config = config;
  }

  override createDriver(): Driver {
    return new PipelinedPostgresDriver(this.#config);
  }
}
