// The dispatcher (STYLE.md 7): the loop that claims due deliveries, admits them to their
// webhooks' lanes (lanes.ts), and for each one whose turn comes signs (signing.ts), sends
// (send-attempt.ts) and hands the outcome to be recorded (outcome-batch.ts, record-attempt.ts).
// It runs in `restwire worker` processes and in the process `serve` forks for it
// (cli/dispatcher-process.ts), never in the API's event loop; on PostgreSQL any number share the
// queue (claims are leases taken with SKIP LOCKED; see db/delivery-queue.ts). While it runs, it
// also keeps the delivery log pruned (retention.ts). On SIGTERM it stops claiming, gives back
// work that has not started, and lets attempts in flight finish and be recorded.

import type { FastifyBaseLogger } from 'fastify';
import type { Registry } from 'prom-client';
import type { Agent } from 'undici';
import type { Config } from '../config.js';
import type { Storage } from '../db/database.js';
import { claimDueDeliveries, listenForDeliveries, nextDueAt, recoverLeasesAtStart, releaseLeases } from '../db/delivery-queue.js';
import { createDeliveryMetrics, type DeliveryMetrics } from './delivery-metrics.js';
import { Lanes, type Claimed } from './lanes.js';
import { OutcomeBatch } from './outcome-batch.js';
import { schedulePruning } from './retention.js';
import { createSecretBox, type SecretBox } from './secrets.js';
import { signDelivery } from './signing.js';
import { loadTargets } from './targets.js';

/** What a dispatcher works with, and the limits it keeps. */
export interface DispatcherOptions {
  readonly storage: Storage;
  readonly secrets: SecretBox;
  readonly schedule: readonly number[];
  readonly allowPrivate: boolean;
  readonly log: FastifyBaseLogger;
  readonly metrics?: DeliveryMetrics;
  /** Deliveries this process holds at once: in flight, or claimed and waiting for a slot. */
  readonly maxInFlight?: number;
  /** Attempts in flight at once to one webhook, so a slow receiver cannot hold up the others. */
  readonly perWebhook?: number;
  /**
   * Deliveries one user's webhooks may hold in this process at once (in flight, stalled or
   * waiting), so one tenant's receivers can never take the whole process budget (issue 11).
   * Default: a quarter of `maxInFlight`.
   */
  readonly perOwner?: number;
  readonly timeoutMs?: number;
  /** Delivered and failed deliveries older than this are deleted (retention.ts); default 30 days. */
  readonly retentionMs?: number;
  /** Changes older than this leave the change log (retention.ts); default 24 hours. */
  readonly changeRetentionMs?: number;
  /** How often retention runs; default 5 minutes. */
  readonly pruneIntervalMs?: number;
}

/**
 * How long a claim holds a delivery, in attempt timeouts; a worker killed mid-attempt loses it
 * after this (API.md §6): 30 s with the default 10 s timeout. An attempt never starts unless it
 * can finish within its lease (see `pump` in lanes.ts).
 */
export const LEASE_TIMEOUTS = 3;
/** Idle workers look for due retries at least this often, even without a wake-up. */
const IDLE_POLL_MS = 1000;
/** The most rows one claim takes. */
const CLAIM_BATCH = 256;
/** How long a wake-up waits for others to join it. */
const WAKE_DELAY_MS = 2;

/** What sends: the SSRF-guarded agent and one attempt through it. */
interface Transport {
  agent: Agent;
  sendAttempt: typeof import('./send-attempt.js').sendAttempt;
}

/** Claims, admits, sends and records deliveries in this process until stopped. */
export class Dispatcher {
  private readonly timeoutMs: number;
  private readonly lanes: Lanes;
  private readonly outcomes: OutcomeBatch;
  /**
   * The guarded undici agent and the sender, loaded with the first attempt: undici is a tenth of
   * an idle process's memory, and a `serve` that never delivers need not carry it (issue #6).
   */
  private transport: Promise<Transport> | null = null;
  private running = false;
  private loop: Promise<void> | null = null;
  private wakeUp: (() => void) | null = null;
  private woken = false;
  private wakeTimer: NodeJS.Timeout | null = null;
  private stopListening: () => Promise<void> = async () => {};
  private pruning: { stop(): Promise<void> } | null = null;

  constructor(private readonly options: DispatcherOptions) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.lanes = new Lanes({
      db: options.storage.db,
      log: options.log,
      maxInFlight: options.maxInFlight,
      perWebhook: options.perWebhook,
      perOwner: options.perOwner,
      timeoutMs: this.timeoutMs,
      attempt: (claimed) => this.attempt(claimed),
      wake: () => this.wake(),
    });
    this.outcomes = new OutcomeBatch({ storage: options.storage, schedule: options.schedule, log: options.log });
  }

  /** Circuits open now: webhooks cut to one probe at a time (the metric). */
  get openCircuits(): number {
    return this.lanes.openCircuits;
  }

  /** Starts claiming; on SQLite first takes back leases a killed process left behind. */
  async start(): Promise<void> {
    if (this.running) return;
    const { storage, log } = this.options;
    const released = await recoverLeasesAtStart(storage);
    if (released > 0) log.info({ released }, 'took back deliveries leased by a stopped process');
    this.running = true;
    this.stopListening = listenForDeliveries(
      storage,
      () => this.wake(),
      (error) => log.warn({ err: error }, 'delivery notifications interrupted; reconnecting'),
    );
    this.loop = this.run();
    const { retentionMs, changeRetentionMs, pruneIntervalMs, metrics } = this.options;
    this.pruning = schedulePruning(storage.db, {
      retentionMs,
      ...(changeRetentionMs !== undefined ? { changeRetentionMs } : {}),
      intervalMs: pruneIntervalMs,
      log,
      onBatch: (batch) => metrics?.observePruning(batch),
    });
  }

  /** Asks the loop to look for work now (after a commit that enqueued some). */
  wake(): void {
    this.woken = true;
    // Wake-ups within a few milliseconds share one claim: under a stream of commits, one claim
    // per commit would cost a write transaction per event (issue #6).
    this.wakeTimer ??= setTimeout(() => {
      this.wakeTimer = null;
      this.wakeUp?.();
    }, WAKE_DELAY_MS);
  }

  /** Stops claiming, lets in-flight attempts finish and records them (SIGTERM, API.md §5). */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    await this.pruning?.stop();
    this.wake();
    await this.loop;
    // Claimed work that has not started goes back to the queue at once.
    await this.lanes.drain();
    await this.outcomes.flush();
    await this.stopListening();
    if (this.transport) await (await this.transport).agent.close();
  }

  /** The loop: claim while the process budget has room, otherwise wait for a wake-up. */
  private async run(): Promise<void> {
    while (this.running) {
      try {
        this.woken = false;
        const claimed = this.lanes.wantsWork ? await this.claim() : 0;
        if (claimed === 0) await this.idle();
      } catch (error) {
        this.options.log.error({ err: error }, 'dispatcher could not claim deliveries; retrying');
        await this.sleep(IDLE_POLL_MS);
      }
    }
  }

  /**
   * Claims a batch and admits it to the webhooks' lanes, which start what has a free slot. Webhooks
   * whose lanes are closed and users at their fair share are left out of the claim itself, so one
   * tenant's backlog never fills the batch; what the lanes refuse since goes back to the queue.
   */
  private async claim(): Promise<number> {
    const { storage, secrets, log } = this.options;
    const now = Date.now();
    const { limit, ...scope } = this.lanes.claimScope();
    const rows = await claimDueDeliveries(storage, {
      now,
      limit: Math.min(limit, CLAIM_BATCH),
      leaseUntil: now + LEASE_TIMEOUTS * this.timeoutMs,
      ...scope,
    });
    if (rows.length === 0) return 0;

    const targets = await loadTargets({ db: storage.db, secrets, log }, [...new Set(rows.map((row) => row.webhook_id))]);
    const returned: number[] = [];
    const admitted = new Set<number>();
    for (const delivery of rows) {
      const target = targets.get(delivery.webhook_id);
      if (target && this.lanes.admit({ delivery, target })) admitted.add(delivery.webhook_id);
      else returned.push(delivery.id);
    }
    await releaseLeases(storage.db, returned);
    this.lanes.startAttempts(admitted);
    return rows.length - returned.length;
  }

  /** One attempt, when its lane gives it a slot: sign, send, then record the outcome. */
  private async attempt({ delivery, target }: Claimed): Promise<void> {
    const headers = {
      'x-service-delivery': delivery.guid,
      'x-service-event': delivery.event,
      'x-service-hook-id': String(delivery.webhook_id),
      // Every attempt is signed afresh with its own timestamp (API.md §6).
      ...signDelivery({
        deliveryId: delivery.guid,
        timestamp: Math.floor(Date.now() / 1000),
        body: delivery.payload,
        secrets: target.secrets,
      }),
    };
    const { agent, sendAttempt } = await this.loadTransport();
    const outcome = await sendAttempt({
      url: target.url,
      headers,
      body: delivery.payload,
      dispatcher: agent,
      timeoutMs: this.timeoutMs,
    });
    this.options.metrics?.observeAttempt(outcome);
    this.lanes.observe(delivery.webhook_id, outcome);
    await this.outcomes.add({ delivery, outcome, finishedAt: Date.now() }, target.ordered && delivery.record_key !== null);
  }

  private loadTransport(): Promise<Transport> {
    this.transport ??= Promise.all([import('./guarded-agent.js'), import('./send-attempt.js')]).then(([guarded, send]) => ({
      agent: guarded.createGuardedAgent({ allowPrivate: this.options.allowPrivate, connectTimeoutMs: this.timeoutMs }),
      sendAttempt: send.sendAttempt,
    }));
    return this.transport;
  }

  /** Waits for a wake-up, the next due retry, or the idle poll, whichever comes first. */
  private async idle(): Promise<void> {
    if (this.woken || !this.running) return;
    const now = Date.now();
    const due = await nextDueAt(this.options.storage.db, now);
    const wait = due === null ? IDLE_POLL_MS : Math.min(IDLE_POLL_MS, Math.max(0, due - now));
    await this.sleep(wait);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.woken || !this.running) {
        resolve();
        return;
      }
      const timer = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(timer);
        self.wakeUp = null;
        resolve();
      }
      this.wakeUp = done;
    });
  }
}

/** The dispatcher `serve` and `restwire worker` run, configured from Config. */
export function createDispatcher(
  config: Config,
  storage: Storage,
  { secretKey, log, registry }: { secretKey: string; log: FastifyBaseLogger; registry?: Registry },
): Dispatcher {
  const gauges = { openCircuits: () => dispatcher.openCircuits };
  const dispatcher: Dispatcher = new Dispatcher({
    storage,
    secrets: createSecretBox(secretKey),
    schedule: config.webhookRetrySchedule,
    allowPrivate: config.webhookAllowPrivate,
    timeoutMs: config.webhookTimeoutMs,
    retentionMs: config.deliveryRetentionMs,
    changeRetentionMs: config.changeRetentionMs,
    pruneIntervalMs: config.deliveryPruneIntervalMs,
    log,
    ...(registry ? { metrics: createDeliveryMetrics(registry, gauges) } : {}),
  });
  return dispatcher;
}
