import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { Database, DeliveryRow } from '../db/schema.js';
import { Lanes, type Claimed } from './lanes.js';

// What a claim may take (issue 21): the lanes tell the claim each webhook's and each user's room,
// leave out the webhooks without room for a round, and ask for a claim once one has room again.

const PER_WEBHOOK = 4;
const LANE = 2 * PER_WEBHOOK;

/** Lanes whose attempts wait until the test finishes them; no lease is ever given back here. */
function lanes({ perOwner = 100 }: { perOwner?: number } = {}) {
  const running: (() => void)[] = [];
  let wakes = 0;
  const unused = new Proxy({}, { get: () => () => { throw new Error('not used by these tests'); } });
  const subject = new Lanes({
    db: unused as Kysely<Database>,
    log: unused as FastifyBaseLogger,
    maxInFlight: 512,
    perWebhook: PER_WEBHOOK,
    perOwner,
    timeoutMs: 10_000,
    attempt: () => new Promise<void>((resolve) => running.push(resolve)),
    wake: () => wakes++,
  });
  let nextId = 1;
  const admit = (webhookId: number, ownerId: number, count: number) => {
    for (let i = 0; i < count; i++) {
      const delivery = { id: nextId++, webhook_id: webhookId, lease_until: Date.now() + 30_000 } as DeliveryRow;
      const claimed: Claimed = { delivery, target: { url: 'http://127.0.0.1:1/', ownerId, secrets: [], ordered: false } };
      expect(subject.admit(claimed)).toBe(true);
    }
    subject.startAttempts([webhookId]);
  };
  /** Finishes the oldest `count` attempts in flight, letting their `finally` run. */
  const finish = async (count: number) => {
    for (const resolve of running.splice(0, count)) resolve();
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { subject, admit, finish, wakes: () => wakes };
}

describe('Lanes: what the next claim may take', () => {
  it("gives each webhook's and each user's room, and a default for the others", () => {
    const { subject, admit } = lanes({ perOwner: 50 });
    admit(1, 10, 3);
    const scope = subject.claimScope();
    expect(scope.room.webhooks.of.get(1)).toBe(LANE - 3);
    expect(scope.room.webhooks.otherwise).toBe(LANE);
    expect(scope.room.owners.of.get(10)).toBe(47);
    expect(scope.room.owners.otherwise).toBe(50);
    expect(scope.excludeWebhookIds).toEqual([]);
    // The lane's room and one new lane's worth: every row the claim looks at, it locks.
    expect(scope.limit).toBe(LANE - 3 + LANE);
  });

  it('leaves a webhook out until its lane has room for a round, then asks for a claim once', async () => {
    const { subject, admit, finish, wakes } = lanes();
    admit(1, 10, LANE);
    expect(subject.claimScope().excludeWebhookIds).toEqual([1]);

    await finish(PER_WEBHOOK - 1);
    expect(subject.claimScope().excludeWebhookIds).toEqual([1]);
    const before = wakes();

    await finish(1);
    expect(subject.claimScope().excludeWebhookIds).toEqual([]);
    expect(wakes()).toBe(before + 1);
  });

  it('leaves a user out at their share and gives the room left to the others', () => {
    const { subject, admit } = lanes({ perOwner: 6 });
    admit(1, 10, 6);
    admit(2, 20, 2);
    const scope = subject.claimScope();
    expect(scope.excludeOwnerIds).toEqual([10]);
    expect(scope.room.owners.of.get(20)).toBe(4);
  });
});
