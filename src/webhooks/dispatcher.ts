import type { FastifyBaseLogger } from 'fastify';
import type { Registry } from 'prom-client';
import type { Agent } from 'undici';
import type { Config } from '../config.js';
import type { Storage } from '../db/database.js';
import {
  claimDueDeliveries,
  listenForDeliveries,
  nextDueAt,
  recoverLeasesAtStart,
  releaseLeases,
} from '../db/delivery-queue.js';
import type { DeliveryRow } from '../db/schema.js';
import { CircuitBreaker } from './circuit-breaker.js';
import { createDeliveryMetrics, type DeliveryMetrics } from './delivery-metrics.js';
import { OutcomeBatch } from './outcome-batch.js';
import { schedulePruning } from './retention.js';
import { createSecretBox, type SecretBox } from './secrets.js';
import { signDelivery } from './signing.js';
import { loadTargets, type WebhookTarget } from './targets.js';

/**
 * The dispatcher: claims due deliveries, signs, sends, and hands outcomes to the recorder
 * (STYLE.md 7). It runs inside `serve` or in `restwire worker` processes; on PostgreSQL any
 * number share the queue (claims are leases taken with SKIP LOCKED; see db/delivery-queue.ts).
 */
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
  /** How often retention runs; default 5 minutes. */
  readonly pruneIntervalMs?: number;
}

/**
 * How long a claim holds a delivery, in attempt timeouts; a worker killed mid-attempt loses it
 * after this (API.md §6): 30 s with the default 10 s timeout. An attempt never starts unless it
 * can finish within its lease (see `pump`).
 */
export const LEASE_TIMEOUTS = 3;
/** Idle workers look for due retries at least this often, even without a wake-up. */
const IDLE_POLL_MS = 1000;
/** The most rows one claim takes. */
const CLAIM_BATCH = 256;
/** How long a wake-up waits for others to join it. */
const WAKE_DELAY_MS = 2;
/**
 * An attempt running longer than this is "stalled": it leaves the process budget that gates
 * claims, and its webhook's claimed work goes back to the queue, so a receiver that hangs holds
 * sockets, not the slots healthy webhooks need (issue 11, finding 1). Healthy receivers answer
 * well within it; a slow one still gets its answer, only without work queued behind it here.
 */
const STALL_MS = 1000;

/** What sends: the SSRF-guarded agent and one attempt through it. */
interface Transport {
  agent: Agent;
  sendAttempt: typeof import('./send-attempt.js').sendAttempt;
}

/** A claimed delivery waiting for a slot of its webhook. */
interface Claimed {
  delivery: DeliveryRow;
  target: WebhookTarget;
}

/** In-flight and waiting work of one webhook in this process. */
interface Lane {
  readonly ownerId: number;
  inFlight: number;
  /** In-flight attempts past STALL_MS: counted in `inFlight`, not in the process budget. */
  stalled: number;
  waiting: Claimed[];
}

export class Dispatcher {
  private readonly maxHeld: number;
  private readonly perWebhook: number;
  private readonly perOwner: number;
  private readonly timeoutMs: number;
  private readonly stallMs: number;
  private readonly breaker = new CircuitBreaker();
  /**
   * The guarded undici agent and the sender, loaded with the first attempt: undici is a tenth of
   * an idle process's memory, and a `serve` that never delivers need not carry it (issue #6).
   */
  private transport: Promise<Transport> | null = null;
  private readonly lanes = new Map<number, Lane>();
  /**
   * The process budget: deliveries claimed by this process and not yet recorded, in flight or
   * waiting, except stalled attempts. Claims stop while it is half full.
   */
  private held = 0;
  /** Per user: deliveries held here, stalled ones included (the fair share, `perOwner`). */
  private readonly ownerHeld = new Map<number, number>();
  private readonly attempts = new Set<Promise<void>>();
  private readonly outcomes: OutcomeBatch;
  private running = false;
  private loop: Promise<void> | null = null;
  private wakeUp: (() => void) | null = null;
  private woken = false;
  private wakeTimer: NodeJS.Timeout | null = null;
  private stopListening: () => Promise<void> = async () => {};
  private pruning: { stop(): Promise<void> } | null = null;

  constructor(private readonly options: DispatcherOptions) {
    this.maxHeld = options.maxInFlight ?? 512;
    this.perWebhook = options.perWebhook ?? 16;
    // A quarter of the budget: one tenant's stuck work stays well under the half that stops claims.
    this.perOwner = options.perOwner ?? Math.max(1, Math.floor(this.maxHeld / 4));
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.stallMs = Math.min(STALL_MS, this.timeoutMs / 2);
    this.outcomes = new OutcomeBatch({ storage: options.storage, schedule: options.schedule, log: options.log });
  }

  /** Circuits open now: webhooks cut to one probe at a time (the metric). */
  get openCircuits(): number {
    return this.breaker.openCount;
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
    const { retentionMs, pruneIntervalMs, metrics } = this.options;
    this.pruning = schedulePruning(storage.db, {
      retentionMs,
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
    const waiting = [...this.lanes.values()].flatMap((lane) => this.unqueue(lane));
    await releaseLeases(this.options.storage.db, waiting);
    await Promise.all(this.attempts);
    await this.outcomes.flush();
    await this.stopListening();
    if (this.transport) await (await this.transport).agent.close();
  }

  private async run(): Promise<void> {
    while (this.running) {
      try {
        this.woken = false;
        const claimed = this.held < this.maxHeld / 2 ? await this.claim() : 0;
        if (claimed === 0) await this.idle();
      } catch (error) {
        this.options.log.error({ err: error }, 'dispatcher could not claim deliveries; retrying');
        await this.sleep(IDLE_POLL_MS);
      }
    }
  }

  /**
   * How much one webhook may hold here: twice its in-flight cap (one round in flight, one
   * waiting), so a fast receiver never waits for a claim; 2 while its circuit is open.
   */
  private laneLimit(webhookId: number): number {
    return 2 * this.breaker.limit(webhookId, this.perWebhook);
  }

  /**
   * A webhook gets no more work while its lane is full or every slot it has is stalled: what it
   * was given would wait here for a stuck slot, holding the budget others need (issue 11).
   */
  private laneClosed(webhookId: number, lane: Lane): boolean {
    return lane.inFlight + lane.waiting.length >= this.laneLimit(webhookId) || lane.stalled >= this.breaker.limit(webhookId, this.perWebhook);
  }

  /**
   * Claims a batch and queues it per webhook. Webhooks whose lanes are closed and users at their
   * fair share are left out of the claim itself, so one tenant's backlog never fills the batch.
   */
  private async claim(): Promise<number> {
    const { storage } = this.options;
    const now = Date.now();
    const closed = [...this.lanes].filter(([id, lane]) => this.laneClosed(id, lane)).map(([id]) => id);
    const fullOwners = [...this.ownerHeld].filter(([, count]) => count >= this.perOwner).map(([id]) => id);
    const rows = await claimDueDeliveries(storage, {
      now,
      limit: Math.min(this.maxHeld - this.held, CLAIM_BATCH),
      leaseUntil: now + LEASE_TIMEOUTS * this.timeoutMs,
      excludeWebhookIds: closed,
      excludeOwnerIds: fullOwners,
    });
    if (rows.length === 0) return 0;

    const targets = await loadTargets({ db: storage.db, secrets: this.options.secrets, log: this.options.log }, [...new Set(rows.map((row) => row.webhook_id))]);
    const returned: number[] = [];
    const touched = new Set<number>();
    for (const delivery of rows) {
      const target = targets.get(delivery.webhook_id);
      const lane = target ? this.lane(delivery.webhook_id, target.ownerId) : undefined;
      if (!target || !lane || this.laneClosed(delivery.webhook_id, lane) || (this.ownerHeld.get(lane.ownerId) ?? 0) >= this.perOwner) {
        returned.push(delivery.id);
        continue;
      }
      lane.waiting.push({ delivery, target });
      this.hold(lane.ownerId, 1);
      touched.add(delivery.webhook_id);
    }
    await releaseLeases(storage.db, returned);
    for (const webhookId of touched) this.pump(webhookId);
    for (const [webhookId, lane] of this.lanes) this.dropIfIdle(webhookId, lane);
    return rows.length - returned.length;
  }

  private lane(webhookId: number, ownerId: number): Lane {
    let lane = this.lanes.get(webhookId);
    if (!lane) {
      lane = { ownerId, inFlight: 0, stalled: 0, waiting: [] };
      this.lanes.set(webhookId, lane);
    }
    return lane;
  }

  private dropIfIdle(webhookId: number, lane: Lane): void {
    if (lane.inFlight === 0 && lane.waiting.length === 0) this.lanes.delete(webhookId);
  }

  /** Counts deliveries in (or, with a negative count, out of) the process budget and the user's share. */
  private hold(ownerId: number, count: number): void {
    this.held += count;
    const owned = (this.ownerHeld.get(ownerId) ?? 0) + count;
    if (owned > 0) this.ownerHeld.set(ownerId, owned);
    else this.ownerHeld.delete(ownerId);
  }

  /** Takes a lane's waiting work out of this process; returns the ids whose leases to give back. */
  private unqueue(lane: Lane): number[] {
    const ids = lane.waiting.splice(0).map((item) => item.delivery.id);
    this.hold(lane.ownerId, -ids.length);
    return ids;
  }

  /** Starts waiting attempts of a webhook while it has free slots. */
  private pump(webhookId: number): void {
    const lane = this.lanes.get(webhookId);
    if (!lane) return;
    const stale: number[] = [];
    while (lane.inFlight < this.breaker.limit(webhookId, this.perWebhook) && lane.waiting.length > 0) {
      const { delivery, target } = lane.waiting.shift()!;
      // Never start an attempt that could outlive its lease: another worker may take it then.
      if (Date.now() + this.timeoutMs + 1000 > (delivery.lease_until ?? 0)) {
        stale.push(delivery.id);
        this.hold(lane.ownerId, -1);
        continue;
      }
      lane.inFlight++;
      let stalled = false;
      const stallTimer = setTimeout(() => {
        stalled = true;
        this.stall(webhookId, lane);
      }, this.stallMs);
      const attempt = this.attempt(delivery, target).finally(() => {
        clearTimeout(stallTimer);
        lane.inFlight--;
        if (stalled) {
          lane.stalled--;
          this.hold(lane.ownerId, -1);
          this.held++; // a stalled attempt had already left the process budget
        } else {
          this.hold(lane.ownerId, -1);
        }
        this.attempts.delete(attempt);
        this.pump(webhookId);
        this.dropIfIdle(webhookId, lane);
        // Claim again when there is room for a batch, or when this webhook has run dry.
        if (this.held <= this.maxHeld / 2 || lane.waiting.length === 0) this.wake();
      });
      this.attempts.add(attempt);
    }
    if (stale.length) void releaseLeases(this.options.storage.db, stale).catch(() => {});
  }

  /**
   * An attempt ran past STALL_MS: it stops counting against the process budget, and when every
   * slot of its webhook is stuck, the work waiting for one goes back to the queue (issue 11).
   */
  private stall(webhookId: number, lane: Lane): void {
    lane.stalled++;
    this.held--;
    if (lane.stalled >= this.breaker.limit(webhookId, this.perWebhook) && lane.waiting.length > 0) {
      void releaseLeases(this.options.storage.db, this.unqueue(lane)).catch(() => {});
    }
    this.wake();
  }

  private loadTransport(): Promise<Transport> {
    this.transport ??= Promise.all([import('./guarded-agent.js'), import('./send-attempt.js')]).then(([guarded, send]) => ({
      agent: guarded.createGuardedAgent({ allowPrivate: this.options.allowPrivate, connectTimeoutMs: this.timeoutMs }),
      sendAttempt: send.sendAttempt,
    }));
    return this.transport;
  }

  private async attempt(delivery: DeliveryRow, target: WebhookTarget): Promise<void> {
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
    const transition = this.breaker.record(delivery.webhook_id, outcome);
    if (transition === 'opened') {
      this.options.log.warn(
        { webhookId: delivery.webhook_id, error: outcome.error },
        'webhook receiver keeps failing to answer; one attempt at a time until it answers again',
      );
    } else if (transition === 'closed') {
      this.options.log.info({ webhookId: delivery.webhook_id }, 'webhook receiver answers again; full concurrency restored');
    }
    await this.outcomes.add({ delivery, outcome, finishedAt: Date.now() }, target.ordered && delivery.record_key !== null);
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
    pruneIntervalMs: config.deliveryPruneIntervalMs,
    log,
    ...(registry ? { metrics: createDeliveryMetrics(registry, storage.db, gauges) } : {}),
  });
  return dispatcher;
}
