// What the "sign" and "send" stages need to know about a webhook (STYLE.md 7): its URL, its
// secrets unsealed (both during a rotation's overlap), its owner (for the per-user share,
// lanes.ts) and whether its deliveries are ordered per record. Loaded for each claimed batch,
// one query for all of the batch's webhooks, so a changed URL or secret applies to the next
// claim. A webhook whose secret cannot be unsealed is disabled here, with a reason.

import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { disableWebhook } from './record-attempt.js';
import type { SecretBox } from './secrets.js';

/** A webhook as the dispatcher sends to it. */
export interface WebhookTarget {
  url: string;
  ownerId: number;
  secrets: string[];
  /** `ordering = 'record'`: a finished attempt may free the next delivery of its record. */
  ordered: boolean;
}

export interface TargetSources {
  readonly db: Kysely<Database>;
  readonly secrets: SecretBox;
  readonly log: FastifyBaseLogger;
}

/** The targets of these webhooks, by id; one whose secret cannot be unsealed is disabled and left out. */
export async function loadTargets({ db, secrets: box, log }: TargetSources, webhookIds: readonly number[]): Promise<Map<number, WebhookTarget>> {
  const targets = new Map<number, WebhookTarget>();
  if (webhookIds.length === 0) return targets;
  const webhooks = await db
    .selectFrom('webhooks')
    .select(['id', 'owner_id', 'target_url', 'secret_sealed', 'previous_secret_sealed', 'previous_secret_expires_at', 'ordering'])
    .where('id', 'in', webhookIds)
    .execute();
  const now = Date.now();
  for (const webhook of webhooks) {
    try {
      const secrets = [box.open(webhook.secret_sealed)];
      // During a rotation's 24 h overlap both secrets sign (API.md §4).
      const previous = webhook.previous_secret_sealed && (webhook.previous_secret_expires_at ?? 0) > now ? openOrNull(box, webhook.previous_secret_sealed) : null;
      if (previous !== null) secrets.push(previous);
      targets.set(webhook.id, { url: webhook.target_url, ownerId: Number(webhook.owner_id), secrets, ordered: webhook.ordering === 'record' });
    } catch {
      // Sealed under another SECRET_KEY: nothing can be signed, so the webhook stops with a
      // reason its owner can read, and the rest of the batch goes on.
      await disableWebhook(db, webhook.id, 'Its secret cannot be decrypted: SECRET_KEY changed since it was stored. Set a new secret to resume.');
      log.error({ webhookId: webhook.id }, 'webhook secret cannot be decrypted with this SECRET_KEY; webhook disabled');
    }
  }
  return targets;
}

/** The previous secret, or null when it cannot be unsealed: the current one still signs. */
function openOrNull(box: SecretBox, sealed: string): string | null {
  try {
    return box.open(sealed);
  } catch {
    return null;
  }
}
