import type { FastifyBaseLogger } from 'fastify';
import { sql, type Kysely } from 'kysely';
import { pruneStoredResponses } from '../db/idempotency-keys.js';
import { pruneChanges } from '../db/change-log.js';
import type { Database } from '../db/schema.js';

// The "prune" stage of the webhook pipeline (STYLE.md 7; issue 11, finding 2): the delivery log
// is kept for DELIVERY_RETENTION_DAYS, and the receivers' answers in it are capped per webhook
// and per user, so one tenant's chatty receivers cannot fill the disk. `schedulePruning` runs a
// pass every DELIVERY_PRUNE_INTERVAL_SECONDS while the dispatcher runs, in small batches so no
// statement holds the (SQLite: only) writer for long. Both statements are plain SQL that SQLite
// and PostgreSQL share.

/** Rows one statement deletes or truncates; a pass repeats until a batch comes back short. */
export const PRUNE_BATCH = 500;
/** What is left of an older response body: its first 1,024 characters. */
export const TRUNCATED_BODY_CHARS = 1024;
/** Full response bodies (up to 64 KiB, send-attempt.ts) kept for each webhook's latest deliveries… */
export const FULL_BODIES_PER_WEBHOOK = 20;
/** …and at most this many across one user's webhooks: at most 6.4 MiB of full bodies a user. */
export const FULL_BODIES_PER_USER = 100;
/** A pause between batches, so API writes get the database in between. */
const BATCH_PAUSE_MS = 10;
/** The first pass runs this long after start (or one interval, if shorter). */
const FIRST_PRUNE_MS = 5_000;

export interface RetentionOptions {
  /** Delivered and failed deliveries created before this (ms since the epoch) are deleted. */
  readonly before: number;
  /** Called after each batch with what it did (the metrics). */
  readonly onBatch?: (done: { deleted: number; truncated: number }) => void;
}

/** One retention pass: deletes expired deliveries, then truncates response bodies over the caps. */
export async function pruneDeliveries(db: Kysely<Database>, { before, onBatch }: RetentionOptions): Promise<{ deleted: number; truncated: number }> {
  let deleted = 0;
  let truncated = 0;
  for (;;) {
    const count = await deleteExpired(db, before);
    deleted += count;
    if (count > 0) onBatch?.({ deleted: count, truncated: 0 });
    if (count < PRUNE_BATCH) break;
    await pause();
  }
  for (;;) {
    const count = await truncateOlderBodies(db);
    truncated += count;
    if (count > 0) onBatch?.({ deleted: 0, truncated: count });
    if (count < PRUNE_BATCH) break;
    await pause();
  }
  return { deleted, truncated };
}

/**
 * Deletes one batch of delivered or failed deliveries created before `before`; never a pending or
 * retrying one, whatever its age (it is still owed an attempt), nor one whose payload a kept
 * redelivery sends (`payload_of`, issue 22): that goes in a later pass, after its redeliveries.
 * Walks the primary key, oldest first, so no index on created_at is needed (ids grow with time).
 */
async function deleteExpired(db: Kysely<Database>, before: number): Promise<number> {
  const result = await sql`
    delete from deliveries where id in (
      select d.id from deliveries d
      where d.created_at < ${before} and d.status in ('delivered', 'failed')
        and not exists (select 1 from deliveries r where r.payload_of = d.id)
      order by d.id
      limit ${PRUNE_BATCH}
    )`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/**
 * Cuts one batch of response bodies longer than TRUNCATED_BODY_CHARS that are not among the
 * latest FULL_BODIES_PER_WEBHOOK of their webhook and FULL_BODIES_PER_USER of their user. Only
 * long bodies are ranked (the partial index of migration 0004 holds them), and a cut body leaves
 * that index, so a pass reads what was kept plus what arrived since the last one.
 */
async function truncateOlderBodies(db: Kysely<Database>): Promise<number> {
  const result = await sql`
    update deliveries set response_body = substr(response_body, 1, ${sql.lit(TRUNCATED_BODY_CHARS)})
    where id in (
      select id from (
        select d.id,
          row_number() over (partition by d.webhook_id order by d.id desc) as webhook_rank,
          row_number() over (partition by w.owner_id order by d.id desc) as owner_rank
        from deliveries d join webhooks w on w.id = d.webhook_id
        where length(d.response_body) > ${sql.lit(TRUNCATED_BODY_CHARS)}
      ) ranked
      where webhook_rank > ${sql.lit(FULL_BODIES_PER_WEBHOOK)} or owner_rank > ${sql.lit(FULL_BODIES_PER_USER)}
      limit ${PRUNE_BATCH}
    )`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

function pause(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, BATCH_PAUSE_MS));
}

export interface PruningSchedule {
  /** Delivered and failed deliveries older than this are deleted; default 30 days. */
  readonly retentionMs?: number;
  /** Changes older than this leave the change log (CHANGE_RETENTION_HOURS; default 24 hours; STREAMS.md §3). */
  readonly changeRetentionMs?: number;
  /** How often a pass runs; default 5 minutes. */
  readonly intervalMs?: number;
  readonly log: FastifyBaseLogger;
  /** Called after each batch with what it did (the metrics). */
  readonly onBatch?: RetentionOptions['onBatch'];
}

/** Runs retention passes on a timer, one at a time; `stop` clears it and waits for a running pass. */
export function schedulePruning(db: Kysely<Database>, { retentionMs = 30 * 86_400_000, changeRetentionMs = 86_400_000, intervalMs = 300_000, log, onBatch }: PruningSchedule): { stop(): Promise<void> } {
  let timer: NodeJS.Timeout;
  let running: Promise<void> | null = null;

  /** One pass; a failure is logged and the next pass tries again. */
  async function prune(): Promise<void> {
    try {
      const done = await pruneDeliveries(db, { before: Date.now() - retentionMs, onBatch });
      if (done.deleted > 0 || done.truncated > 0) log.info(done, 'pruned the delivery log');
      // Responses stored under Idempotency-Keys expire by IDEMPOTENCY_TTL_HOURS (REQUESTS.md §1).
      const expired = await pruneStoredResponses(db, Date.now());
      if (expired > 0) log.info({ expired }, 'pruned expired idempotency keys');
    } catch (error) {
      log.warn({ err: error }, 'could not prune the delivery log; will try again');
    }
    // The change log, in the same pass (issue 23): a batch at a time, as deliveries.
    try {
      let changes = 0;
      for (let count = -1; count !== 0; ) {
        count = await pruneChanges(db, Date.now() - changeRetentionMs);
        changes += count;
        if (count > 0) await pause();
      }
      if (changes > 0) log.info({ changes }, 'pruned the change log');
    } catch (error) {
      log.warn({ err: error }, 'could not prune the change log; will try again');
    }
  }

  /** Starts a pass unless one is running. */
  function startPass(): void {
    running ??= prune().finally(() => {
      running = null;
    });
  }

  // The first pass runs soon after start, not one interval later: a process restarted more
  // often than the interval would otherwise never prune (issue 22).
  timer = setTimeout(() => {
    startPass();
    timer = setInterval(startPass, intervalMs);
    timer.unref();
  }, Math.min(FIRST_PRUNE_MS, intervalMs));
  timer.unref();

  return {
    async stop(): Promise<void> {
      // clearTimeout clears an interval too (one id space in Node).
      clearTimeout(timer);
      await running;
    },
  };
}
