// Admission and fairness for the dispatcher (STYLE.md 7; issue 11): which claimed deliveries
// this process takes, and when each may start. Every webhook has a lane here — its attempts in
// flight and its claimed work waiting for a slot — and three limits keep a slow or hanging
// receiver from holding up the others:
//   - a per-webhook cap of attempts in flight (`perWebhook`), cut to one probe at a time while
//     circuit-breaker.ts has the webhook's circuit open;
//   - a per-user share of the process budget (`perOwner`), so one tenant's receivers never take
//     all of it;
//   - an attempt running past STALL_MS stops counting against the process budget, and when all
//     of a webhook's slots are stalled its waiting work goes back to the queue.
// The dispatcher asks `exclusions` whom to leave out of a claim, `admit`s what it claimed, and
// `startAttempts`; the lanes call back `attempt` for each delivery whose turn it is.

import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { releaseLeases, type ClaimRoom } from '../db/delivery-queue.js';
import type { Database, DeliveryRow } from '../db/schema.js';
import { CircuitBreaker } from './circuit-breaker.js';
import type { AttemptOutcome } from './send-attempt.js';
import type { WebhookTarget } from './targets.js';

/**
 * An attempt running longer than this is "stalled": it leaves the process budget that gates
 * claims, and its webhook's claimed work goes back to the queue, so a receiver that hangs holds
 * sockets, not the slots healthy webhooks need (issue 11, finding 1). Healthy receivers answer
 * well within it; a slow one still gets its answer, only without work queued behind it here.
 */
const STALL_MS = 1000;

/** A claimed delivery waiting for a slot of its webhook. */
export interface Claimed {
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

export interface LanesOptions {
  readonly db: Kysely<Database>;
  readonly log: FastifyBaseLogger;
  /** Deliveries this process holds at once: in flight, or claimed and waiting for a slot. */
  readonly maxInFlight?: number;
  /** Attempts in flight at once to one webhook. */
  readonly perWebhook?: number;
  /** Deliveries one user's webhooks may hold at once; default a quarter of `maxInFlight`. */
  readonly perOwner?: number;
  /** An attempt's timeout: no attempt starts unless it can finish within its lease. */
  readonly timeoutMs: number;
  /** Runs one attempt; resolves once its outcome is stored, which frees its slot. */
  readonly attempt: (claimed: Claimed) => Promise<void>;
  /** Asks the dispatcher to claim again: room was made. */
  readonly wake: () => void;
}

/** The lanes of this process's webhooks, the process budget and each user's share of it. */
export class Lanes {
  private readonly maxHeld: number;
  private readonly perWebhook: number;
  private readonly perOwner: number;
  private readonly stallMs: number;
  private readonly breaker = new CircuitBreaker();
  private readonly lanes = new Map<number, Lane>();
  /**
   * The process budget: deliveries claimed by this process and not yet recorded, in flight or
   * waiting, except stalled attempts. Claims stop while it is half full.
   */
  private held = 0;
  /** Per user: deliveries held here, stalled ones included (the fair share, `perOwner`). */
  private readonly ownerHeld = new Map<number, number>();
  private readonly attempts = new Set<Promise<void>>();

  constructor(private readonly options: LanesOptions) {
    this.maxHeld = options.maxInFlight ?? 512;
    this.perWebhook = options.perWebhook ?? 16;
    // A quarter of the budget: one tenant's stuck work stays well under the half that stops claims.
    this.perOwner = options.perOwner ?? Math.max(1, Math.floor(this.maxHeld / 4));
    this.stallMs = Math.min(STALL_MS, options.timeoutMs / 2);
  }

  /** Circuits open now: webhooks cut to one probe at a time (the metric). */
  get openCircuits(): number {
    return this.breaker.openCount;
  }

  /** Whether to claim: the process budget is less than half full. */
  get wantsWork(): boolean {
    return this.held < this.maxHeld / 2;
  }

  /** How many more deliveries the process budget has room for. */
  get room(): number {
    return this.maxHeld - this.held;
  }

  /**
   * Whom the next claim leaves out: webhooks whose lanes have no room for a round of attempts
   * and users at their fair share, so one tenant's backlog never fills the batch; and how much
   * each of the others can take, so the claim leases nothing it would give back.
   */
  claimScope(): { limit: number; excludeWebhookIds: number[]; excludeOwnerIds: number[]; room: ClaimRoom } {
    const webhookRoom = new Map<number, number>();
    for (const id of this.breaker.openIds()) webhookRoom.set(id, this.laneLimit(id));
    for (const [id, lane] of this.lanes) webhookRoom.set(id, Math.max(0, this.laneRoom(id, lane)));
    const ownerRoom = new Map([...this.ownerHeld].map(([id, count]) => [id, Math.max(0, this.perOwner - count)] as const));
    const excludeWebhookIds = [...this.lanes].filter(([id, lane]) => !this.laneClaimable(id, lane)).map(([id]) => id);
    // The claim looks at no more due rows than the lanes that can take work hold, and at least one
    // new lane's worth: each row it looks at it also locks.
    const excluded = new Set(excludeWebhookIds);
    let wanted = 2 * this.perWebhook;
    for (const [id, room] of webhookRoom) if (!excluded.has(id)) wanted += room;
    return {
      limit: Math.min(this.room, wanted),
      excludeWebhookIds,
      excludeOwnerIds: [...ownerRoom].filter(([, room]) => room === 0).map(([id]) => id),
      room: {
        webhooks: { of: webhookRoom, otherwise: 2 * this.perWebhook },
        owners: { of: ownerRoom, otherwise: this.perOwner },
      },
    };
  }

  /**
   * Queues a claimed delivery in its webhook's lane; false when the lane is closed or its user
   * is at their share since the claim (its lease is to be given back).
   */
  admit(claimed: Claimed): boolean {
    const webhookId = claimed.delivery.webhook_id;
    const lane = this.lane(webhookId, claimed.target.ownerId);
    if (this.laneClosed(webhookId, lane) || (this.ownerHeld.get(lane.ownerId) ?? 0) >= this.perOwner) return false;
    lane.waiting.push(claimed);
    this.hold(lane.ownerId, 1);
    return true;
  }

  /** Starts the waiting attempts of these webhooks that have free slots; forgets idle lanes. */
  startAttempts(webhookIds: Iterable<number>): void {
    for (const webhookId of webhookIds) this.pump(webhookId);
    for (const [webhookId, lane] of this.lanes) this.dropIfIdle(webhookId, lane);
  }

  /** Counts an attempt's outcome towards its webhook's circuit, and logs when it opens or closes. */
  observe(webhookId: number, outcome: AttemptOutcome): void {
    const transition = this.breaker.record(webhookId, outcome);
    if (transition === 'opened') {
      this.options.log.warn({ webhookId, error: outcome.error }, 'webhook receiver keeps failing to answer; one attempt at a time until it answers again');
    } else if (transition === 'closed') {
      this.options.log.info({ webhookId }, 'webhook receiver answers again; full concurrency restored');
    }
  }

  /** On stop: gives back the leases of work that has not started, and waits for the attempts in flight. */
  async drain(): Promise<void> {
    const waiting = [...this.lanes.values()].flatMap((lane) => this.unqueue(lane));
    await releaseLeases(this.options.db, waiting);
    await Promise.all(this.attempts);
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
    return this.laneRoom(webhookId, lane) <= 0 || lane.stalled >= this.breaker.limit(webhookId, this.perWebhook);
  }

  /**
   * Whether a claim may bring a webhook more work: its lane has room for a round of attempts (so
   * one that finished an attempt is not claimed for one at a time) and not every slot is stalled.
   */
  private laneClaimable(webhookId: number, lane: Lane): boolean {
    const round = this.breaker.limit(webhookId, this.perWebhook);
    return this.laneRoom(webhookId, lane) >= round && lane.stalled < round;
  }

  /** How many more deliveries a webhook's lane may hold (negative once its circuit has opened on a full lane). */
  private laneRoom(webhookId: number, lane: Lane): number {
    return this.laneLimit(webhookId) - lane.inFlight - lane.waiting.length;
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
      const claimed = lane.waiting.shift()!;
      // Never start an attempt that could outlive its lease: another worker may take it then.
      if (Date.now() + this.options.timeoutMs + 1000 > (claimed.delivery.lease_until ?? 0)) {
        stale.push(claimed.delivery.id);
        this.hold(lane.ownerId, -1);
        continue;
      }
      lane.inFlight++;
      let stalled = false;
      const stallTimer = setTimeout(() => {
        stalled = true;
        this.stall(webhookId, lane);
      }, this.stallMs);
      const attempt = this.options.attempt(claimed).finally(() => {
        const budgetWasFull = !this.wantsWork;
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
        // Claim again when this webhook has room for a round again, or has run dry; when its user
        // is back under their share; or when the process budget has room for a batch again.
        if (
          this.laneRoom(webhookId, lane) === this.breaker.limit(webhookId, this.perWebhook) ||
          lane.waiting.length === 0 ||
          (this.ownerHeld.get(lane.ownerId) ?? 0) === this.perOwner - 1 ||
          (budgetWasFull && this.wantsWork)
        ) {
          this.options.wake();
        }
      });
      this.attempts.add(attempt);
    }
    if (stale.length) void releaseLeases(this.options.db, stale).catch(() => {});
  }

  /**
   * An attempt ran past STALL_MS: it stops counting against the process budget, and when every
   * slot of its webhook is stuck, the work waiting for one goes back to the queue (issue 11).
   */
  private stall(webhookId: number, lane: Lane): void {
    lane.stalled++;
    this.held--;
    if (lane.stalled >= this.breaker.limit(webhookId, this.perWebhook) && lane.waiting.length > 0) {
      void releaseLeases(this.options.db, this.unqueue(lane)).catch(() => {});
    }
    this.options.wake();
  }
}
