import type { FastifyBaseLogger } from 'fastify';
import type { Registry } from 'prom-client';
import type { Agent } from 'undici';
import type { Config } from '../config.js';
import type { Storage } from '../db/database.js';
import {
  claimDueDeliveries,
  listenForDeliveries,
  nextDueAt,
  releaseAllLeases,
  releaseLeases,
} from '../db/delivery-queue.js';
import type { DeliveryRow } from '../db/schema.js';
import { createGuardedAgent } from './address-guard.js';
import { createDeliveryMetrics, type DeliveryMetrics } from './delivery-metrics.js';
import { recordAttempts, type AttemptRecord } from './record-attempt.js';
import { createSecretBox, type SecretBox } from './secrets.js';
import { sendAttempt } from './send-attempt.js';
import { signDelivery } from './signing.js';

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
  /** Attempts in flight at once in this process. */
  readonly maxInFlight?: number;
  /** Attempts in flight at once to one webhook, so a slow receiver cannot hold up the others. */
  readonly perWebhook?: number;
  readonly timeoutMs?: number;
}

/** How long a claim holds a delivery; a worker killed mid-attempt loses it after this (API.md §6). */
export const LEASE_MS = 30_000;
/** Idle workers look for due retries at least this often, even without a wake-up. */
const IDLE_POLL_MS = 1000;
const MIN_POLL_MS = 25;

interface WebhookTarget {
  url: string;
  secrets: string[];
}

export class Dispatcher {
  private readonly maxInFlight: number;
  private readonly perWebhook: number;
  private readonly agent: Agent;
  private readonly inFlight = new Map<number, number>();
  private inFlightTotal = 0;
  private readonly attempts = new Set<Promise<void>>();
  private pending: AttemptRecord[] = [];
  private flushing: Promise<void> | null = null;
  private running = false;
  private loop: Promise<void> | null = null;
  private wakeUp: (() => void) | null = null;
  private woken = false;
  private stopListening: () => Promise<void> = async () => {};

  constructor(private readonly options: DispatcherOptions) {
    this.maxInFlight = options.maxInFlight ?? 256;
    this.perWebhook = options.perWebhook ?? 16;
    this.agent = createGuardedAgent({ allowPrivate: options.allowPrivate, connectTimeoutMs: options.timeoutMs ?? 10_000 });
  }

  /** Starts claiming; on SQLite first takes back leases a killed process left behind. */
  async start(): Promise<void> {
    if (this.running) return;
    const { storage, log } = this.options;
    if (storage.dialect === 'sqlite') {
      const released = await releaseAllLeases(storage.db);
      if (released > 0) log.info({ released }, 'took back deliveries leased by a stopped process');
    }
    this.running = true;
    this.stopListening = listenForDeliveries(
      storage,
      () => this.wake(),
      (error) => log.warn({ err: error }, 'delivery notifications interrupted; reconnecting'),
    );
    this.loop = this.run();
  }

  /** Asks the loop to look for work now (after a commit that enqueued some). */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /** Stops claiming, lets in-flight attempts finish and records them (SIGTERM, API.md §5). */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.wake();
    await this.loop;
    await Promise.all(this.attempts);
    await this.flush();
    await this.stopListening();
    await this.agent.close();
  }

  private async run(): Promise<void> {
    while (this.running) {
      try {
        const claimed = await this.claim();
        if (claimed > 0) continue;
        await this.idle();
      } catch (error) {
        this.options.log.error({ err: error }, 'dispatcher could not claim deliveries; retrying');
        await this.sleep(IDLE_POLL_MS);
      }
    }
  }

  private async claim(): Promise<number> {
    const room = this.maxInFlight - this.inFlightTotal;
    if (room <= 0) {
      await this.sleep(IDLE_POLL_MS);
      return 0;
    }
    const now = Date.now();
    const saturated = [...this.inFlight].filter(([, n]) => n >= this.perWebhook).map(([id]) => id);
    const { storage } = this.options;
    this.woken = false;
    const rows = await claimDueDeliveries(storage, {
      now,
      limit: Math.min(room, 128),
      leaseUntil: now + LEASE_MS,
      excludeWebhookIds: saturated,
    });
    if (rows.length === 0) return 0;

    // A batch may hold more of one webhook's work than its cap allows; give the rest back.
    const accepted: DeliveryRow[] = [];
    const returned: number[] = [];
    const planned = new Map(this.inFlight);
    for (const row of rows) {
      const count = planned.get(row.webhook_id) ?? 0;
      if (count >= this.perWebhook) returned.push(row.id);
      else {
        planned.set(row.webhook_id, count + 1);
        accepted.push(row);
      }
    }
    await releaseLeases(storage.db, returned);
    const targets = await this.loadTargets([...new Set(accepted.map((row) => row.webhook_id))]);
    for (const row of accepted) {
      const target = targets.get(row.webhook_id);
      if (!target) continue;
      this.track(row.webhook_id, +1);
      const attempt = this.attempt(row, target).finally(() => {
        this.track(row.webhook_id, -1);
        this.attempts.delete(attempt);
      });
      this.attempts.add(attempt);
    }
    return accepted.length;
  }

  private async loadTargets(webhookIds: readonly number[]): Promise<Map<number, WebhookTarget>> {
    const targets = new Map<number, WebhookTarget>();
    if (webhookIds.length === 0) return targets;
    const hooks = await this.options.storage.db
      .selectFrom('webhooks')
      .select(['id', 'target_url', 'secret_sealed', 'previous_secret_sealed', 'previous_secret_expires_at'])
      .where('id', 'in', webhookIds)
      .execute();
    const now = Date.now();
    for (const hook of hooks) {
      const secrets = [this.options.secrets.open(hook.secret_sealed)];
      // During a rotation's 24 h overlap both secrets sign (API.md §4).
      if (hook.previous_secret_sealed && (hook.previous_secret_expires_at ?? 0) > now) {
        secrets.push(this.options.secrets.open(hook.previous_secret_sealed));
      }
      targets.set(hook.id, { url: hook.target_url, secrets });
    }
    return targets;
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
    const outcome = await sendAttempt({
      url: target.url,
      headers,
      body: delivery.payload,
      dispatcher: this.agent,
      ...(this.options.timeoutMs ? { timeoutMs: this.options.timeoutMs } : {}),
    });
    this.options.metrics?.observeAttempt(outcome);
    this.pending.push({ delivery, outcome, finishedAt: Date.now() });
    await this.flush();
  }

  /**
   * Writes pending outcomes. Attempts finishing while a write runs wait for the next one, so
   * outcomes are written in batches; an attempt's slot is freed only once its outcome is stored.
   */
  private async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    this.flushing = recordAttempts(this.options.storage, batch, this.options.schedule)
      .catch((error: unknown) => {
        // The leases stay; the deliveries are retried once they expire (at least once, API.md §4).
        this.options.log.error({ err: error, count: batch.length }, 'could not record delivery attempts');
      })
      .finally(() => {
        this.flushing = null;
      });
    await this.flushing;
  }

  private track(webhookId: number, delta: number): void {
    const count = (this.inFlight.get(webhookId) ?? 0) + delta;
    if (count > 0) this.inFlight.set(webhookId, count);
    else this.inFlight.delete(webhookId);
    this.inFlightTotal += delta;
    // A freed slot may let a saturated webhook's work be claimed.
    if (delta < 0) this.wake();
  }

  /** Waits for a wake-up, the next due retry, or the idle poll, whichever comes first. */
  private async idle(): Promise<void> {
    if (this.woken || !this.running) return;
    const due = await nextDueAt(this.options.storage.db);
    // Work that is due but not claimable now (its webhook is at its cap) is looked at again
    // after a short floor, so the loop never spins.
    const wait = due === null ? IDLE_POLL_MS : Math.min(IDLE_POLL_MS, Math.max(MIN_POLL_MS, due - Date.now()));
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
  return new Dispatcher({
    storage,
    secrets: createSecretBox(secretKey),
    schedule: config.webhookRetrySchedule,
    allowPrivate: config.webhookAllowPrivate,
    timeoutMs: config.webhookTimeoutMs,
    log,
    ...(registry ? { metrics: createDeliveryMetrics(registry, storage.db) } : {}),
  });
}
