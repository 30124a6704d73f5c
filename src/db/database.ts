import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { CompiledQuery, Kysely, sql, type Transaction } from 'kysely';
import type pg from 'pg';
import type { Config } from '../config.js';
import { numberChanges } from './change-log.js';
import { GroupCommit } from './group-commit.js';
import { migrateToLatest } from './migrations.js';
import { PipelinedPostgresDialect, preparingClient } from './pipelining.js';
import { RestwireSqliteDialect } from './sqlite-driver.js';
import type { Database } from './schema.js';

export type Dialect = 'sqlite' | 'postgres';

/** The storage seam: typed SQL through Kysely, plus the few facts that differ by dialect. */
export interface Storage {
  readonly db: Kysely<Database>;
  readonly dialect: Dialect;
  /** The pg pool when on PostgreSQL (LISTEN/NOTIFY needs its own client); null on SQLite. */
  readonly pool: pg.Pool | null;
  /**
   * Adds FOR NO KEY UPDATE on PostgreSQL, so concurrent read-modify-writes of one row take turns;
   * on SQLite a write transaction holds the database's one write lock already (BEGIN IMMEDIATE).
   * Not FOR UPDATE: that also waits for the KEY SHARE lock every insert of a row referring to this
   * one takes (its foreign key check), so two transactions that each added a position to a resume
   * and then updated the resume (a hook) waited for each other: a deadlock.
   */
  lockForUpdate<Q extends { forNoKeyUpdate(): Q }>(query: Q): Q;
  /**
   * Runs a record write in a transaction and settles once it has committed. Writes that arrive
   * together share one commit, each in its own savepoint (`group-commit.ts`); `alone` gives the
   * write a transaction of its own (a write that lost a deadlock to another shared commit).
   */
  transact<T>(work: (trx: Transaction<Database>) => Promise<T>, options?: { alone?: boolean }): Promise<T>;
  /**
   * A token that changes whenever committed data may have changed, by this process or any other,
   * so rendered responses can be reused while it holds (`http/representation-cache.ts`).
   */
  dataVersion(): Promise<string>;
  /**
   * Calls `listener` with the last position it numbered (null when only the commit learnt it:
   * PostgreSQL, whose NOTIFY carries it) after a `transact` of this process that logged changes
   * has committed (the change feed's wake-up on SQLite; db/change-feed.ts). Returns a function
   * that stops it.
   */
  onChangesCommitted(listener: (last: number | null) => void): () => void;
  /** True when the database answers a trivial query (for /readyz). */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}


/** Opens SQLite under DATA_DIR, or PostgreSQL when `databaseUrl` is set, and applies migrations. */
export async function openStorage(
  options: Pick<Config, 'databaseUrl' | 'dataDir'>,
  { migrate = true }: { migrate?: boolean } = {},
): Promise<Storage> {
  const storage = options.databaseUrl ? await openPostgres(options.databaseUrl) : openSqlite(options.dataDir);
  if (migrate) {
    try {
      await migrateToLatest(storage.db);
    } catch (error) {
      await storage.close();
      throw error;
    }
  }
  return storage;
}

/** `dataVersion`: how the dialect reads its data version token (`Storage.dataVersion`). */
function storageOf(db: Kysely<Database>, dialect: Dialect, pool: pg.Pool | null, dataVersion: () => Promise<string>): Storage {
  const committedListeners = new Set<(last: number | null) => void>();
  // The last position each transaction numbered (a group commit's units share one transaction;
  // null when only the commit learns it), told to listeners once it has committed: by then every
  // position up to it is committed too.
  const numbered = new WeakMap<object, number | null>();
  // The change log's numbering is every write transaction's last step (db/change-log.ts).
  const beforeCommit = async (trx: Transaction<Database>) => {
    const numbering = await numberChanges(trx, dialect);
    if (numbering !== null) numbered.set(trx, numbering.last);
  };
  const tellCommitted = (trx: object | null) => {
    const last = trx === null ? undefined : numbered.get(trx);
    if (last === undefined) return;
    numbered.delete(trx!);
    for (const listener of committedListeners) listener(last);
  };
  // Writes share commits on both databases (group-commit.ts): on SQLite to write the WAL's pages
  // once, on PostgreSQL because the change log's numbering holds one row lock from the numbering
  // to the commit (db/change-log.ts), so transactions that each numbered their own changes would
  // commit one at a time, each waiting for its own WAL flush.
  // On PostgreSQL a few batches run at once, on connections of their own, so that one batch's
  // statements run while another waits for the counter's lock or its commit's WAL flush; the pool
  // (10) keeps the rest for reads and the two LISTENing connections.
  const group = new GroupCommit(db, { beforeCommit, lanes: dialect === 'postgres' ? POSTGRES_WRITE_LANES : 1, multiStatement: dialect === 'postgres' });
  return {
    db,
    dialect,
    pool,
    lockForUpdate: (query) => (dialect === 'postgres' ? query.forNoKeyUpdate() : query),
    transact: async (work, options) => {
      let transaction: object | null = null;
      const value = await group.run((trx) => {
        transaction = trx;
        return work(trx);
      }, options?.alone ?? false);
      // A failed unit of a group commit that committed others' changes is told by those units.
      tellCommitted(transaction);
      return value;
    },
    onChangesCommitted(listener) {
      committedListeners.add(listener);
      return () => committedListeners.delete(listener);
    },
    dataVersion,
    async ping() {
      try {
        await sql`select 1`.execute(db);
        return true;
      } catch {
        return false;
      }
    },
    close: () => db.destroy(),
  };
}

/** Write batches running at once on PostgreSQL (GroupCommit lanes). */
const POSTGRES_WRITE_LANES = 4;

// PostgreSQL's data version token: two statements that see the same snapshot see the same data in
// every table (MVCC), and every commit changes it. (SQLite's is its driver's: sqlite-driver.ts.)
const POSTGRES_DATA_VERSION = CompiledQuery.raw('select pg_current_snapshot()::text as version');

function openSqlite(dataDir: string): Storage {
  mkdirSync(dataDir, { recursive: true });
  const database = new SQLite(join(dataDir, 'restwire.sqlite3'));
  // WAL lets readers run beside the writer; NORMAL sync keeps every commit across a killed
  // process (only an OS crash or power loss can lose the last commits). No busy_timeout: a
  // statement that finds another process holding the write lock (serve's dispatcher process,
  // `restwire migrate`) waits for it on a timer in sqlite-driver.ts, not asleep in this thread.
  database.pragma('journal_mode = WAL');
  database.pragma('synchronous = NORMAL');
  database.pragma('busy_timeout = 0');
  database.pragma('foreign_keys = ON');
  // SQLite's built-in lower() folds ASCII only; overriding it makes `lower(title)` fold every
  // script, as PostgreSQL's does, so case-insensitive search is one query on both (API.md §2).
  database.function('lower', { deterministic: true }, (value: unknown) =>
    typeof value === 'string' ? value.toLowerCase() : value,
  );
  const dialect = new RestwireSqliteDialect(database);
  const db = new Kysely<Database>({ dialect });
  return storageOf(db, 'sqlite', null, () => dialect.dataVersion());
}

async function openPostgres(connectionString: string): Promise<Storage> {
  // Loaded only for PostgreSQL, so an SQLite process does not carry the driver (issue #6).
  const { default: pg } = await import('pg');
  // PostgreSQL returns int8 (bigint) as a string to protect precision; our ids and millisecond
  // timestamps stay far below 2^53, so numbers are safe and keep both dialects alike.
  pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));
  // Pipeline mode: a transaction's statements that need no answer yet go out without waiting
  // for the one before (pipelining.ts); queries awaited one by one behave as without it.
  // JIT off: restwire's statements are short, and the planner's cost estimates (on tables never
  // analysed yet, or grown since) put some of them past jit_above_cost, where compiling them took
  // 1.4 s for a delivery claim that ran in 9 ms. A URL's own `options` parameter replaces this.
  const options: pg.PoolConfig & { pipeline: boolean } = {
    connectionString,
    options: '-c jit=off',
    max: 10,
    connectionTimeoutMillis: 5000,
    pipeline: true,
    Client: preparingClient(pg),
  };
  const pool = new pg.Pool(options);
  // A client that loses its server must not crash the process: node-postgres emits 'error' on
  // it when no query of its own is running, idle in the pool (the pool's 'error') or held by a
  // transaction between statements (its own, or nothing listens: 57P01 took serve down in the
  // postgres-outage drill). The query that needed it fails as unavailable (a 503), and the pool
  // drops it on release; the next query connects anew.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = new Kysely<Database>({ dialect: new PipelinedPostgresDialect({ pool }) });
  return storageOf(db, 'postgres', pool, async () => (await db.executeQuery<{ version: string }>(POSTGRES_DATA_VERSION)).rows[0]!.version);
}
