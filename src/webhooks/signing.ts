import { createHmac } from 'node:crypto';
import { standardWebhooksKey } from './secrets.js';

// The "sign" stage of the webhook pipeline (STYLE.md 7): the signature headers of one attempt.
// API.md §4 "A delivery" lists the headers; §6 "Webhook secrets and signatures" fixes the keys.

/** What one attempt is signed over, and with which secrets. */
export interface DeliveryToSign {
  /** The delivery's UUID; also sent as `X-Service-Delivery`, the same on every attempt. */
  deliveryId: string;
  /** Unix seconds of this attempt: every attempt is signed afresh (API.md §6). */
  timestamp: number;
  /** The exact request body, byte for byte as it is sent. */
  body: string;
  /** The current secret first, then a previous one still inside its 24 h rotation overlap. */
  secrets: readonly string[];
}

/** Returns the signature headers (lower-case names) for one delivery attempt. */
export function signDelivery({ deliveryId, timestamp, body, secrets }: DeliveryToSign): Record<string, string> {
  const [current] = secrets;
  if (current === undefined) throw new Error('signDelivery needs at least one secret');
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new Error(`signDelivery timestamp must be whole unix seconds, got ${timestamp}`);
  }
  // GitHub-style headers carry one signature only, so they use the current secret.
  return {
    'x-hub-signature': 'sha1=' + hubSignature('sha1', current, body).toString('hex'),
    'x-hub-signature-256': 'sha256=' + hubSignature('sha256', current, body).toString('hex'),
    'webhook-id': deliveryId,
    'webhook-timestamp': String(timestamp),
    // Standard Webhooks allows several space-separated signatures; during a rotation overlap
    // (API.md §4) each secret adds one, so a receiver holding either secret accepts the delivery.
    'webhook-signature': secrets
      .map((secret) => `v1,${standardWebhooksSignature(secret, deliveryId, String(timestamp), body).toString('base64')}`)
      .join(' '),
  };
}

/**
 * The raw X-Hub-Signature(-256) HMAC of `body`. GitHub verifiers key it with the UTF-8 bytes of
 * the whole secret string, `whsec_` prefix included (API.md §6).
 */
export function hubSignature(algorithm: 'sha1' | 'sha256', secret: string, body: string | Buffer): Buffer {
  return createHmac(algorithm, Buffer.from(secret, 'utf8')).update(body).digest();
}

/**
 * The raw Standard Webhooks v1 HMAC-SHA256 of `id.timestamp.body`, keyed with the decoded bytes
 * after `whsec_` (API.md §6). The body is hashed as given, so a receiver can pass raw bytes.
 */
export function standardWebhooksSignature(secret: string, id: string, timestamp: string, body: string | Buffer): Buffer {
  return createHmac('sha256', standardWebhooksKey(secret)).update(`${id}.${timestamp}.`, 'utf8').update(body).digest();
}
