import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { verify as verifyGithub } from '@octokit/webhooks-methods';
import { Webhook } from 'standardwebhooks';
import { generateSecret } from './secrets.js';
import { signDelivery } from './signing.js';

const deliveryId = '6f1c2a9e-93b4-4c61-9a55-0e3b1f4f7a10';
// Non-ASCII on purpose: signatures cover the UTF-8 bytes, not UTF-16 code units.
const body = JSON.stringify({ action: 'created', experience: { id: 42, title: 'Crème brûlée ✓' } });

/** A timestamp the standardwebhooks library accepts (it allows 5 minutes of clock skew). */
const nowSeconds = (): number => Math.floor(Date.now() / 1000);

describe('signDelivery', () => {
  it('returns exactly the five signature headers, in lower case', () => {
    const timestamp = nowSeconds();
    const headers = signDelivery({ deliveryId, timestamp, body, secrets: [generateSecret()] });
    expect(Object.keys(headers).sort()).toEqual([
      'webhook-id',
      'webhook-signature',
      'webhook-timestamp',
      'x-hub-signature',
      'x-hub-signature-256',
    ]);
    expect(headers['webhook-id']).toBe(deliveryId);
    expect(headers['webhook-timestamp']).toBe(String(timestamp));
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
  });

  it('is accepted by @octokit/webhooks-methods verify with the whsec_ string', async () => {
    const secret = generateSecret();
    const headers = signDelivery({ deliveryId, timestamp: nowSeconds(), body, secrets: [secret] });
    const sig256 = headers['x-hub-signature-256'] as string;
    expect(sig256).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(await verifyGithub(secret, body, sig256)).toBe(true);
    expect(await verifyGithub(secret, body + ' ', sig256)).toBe(false);
    expect(await verifyGithub(generateSecret(), body, sig256)).toBe(false);
  });

  it('signs X-Hub-Signature with HMAC-SHA1 keyed by the secret string', () => {
    const secret = generateSecret();
    const headers = signDelivery({ deliveryId, timestamp: nowSeconds(), body, secrets: [secret] });
    const expected = createHmac('sha1', Buffer.from(secret, 'utf8')).update(Buffer.from(body, 'utf8')).digest('hex');
    expect(headers['x-hub-signature']).toBe(`sha1=${expected}`);
  });

  it('is accepted by the standardwebhooks library with the same whsec_ string', () => {
    const secret = generateSecret();
    const headers = signDelivery({ deliveryId, timestamp: nowSeconds(), body, secrets: [secret] });
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(generateSecret()).verify(body, headers)).toThrow();
    expect(() => new Webhook(secret).verify(body.replace('42', '43'), headers)).toThrow();
  });

  it('signs a rotation overlap with both secrets; each verifies with its own', () => {
    const current = generateSecret();
    const previous = generateSecret();
    const headers = signDelivery({ deliveryId, timestamp: nowSeconds(), body, secrets: [current, previous] });
    const entries = (headers['webhook-signature'] as string).split(' ');
    expect(entries).toHaveLength(2);
    expect(entries.every((entry) => entry.startsWith('v1,'))).toBe(true);

    // Each receiver, holding one secret, accepts the delivery ...
    expect(new Webhook(current).verify(body, headers)).toBeTruthy();
    expect(new Webhook(previous).verify(body, headers)).toBeTruthy();
    // ... and each entry on its own is the one made by its secret.
    const [first, second] = entries;
    expect(() => new Webhook(current).verify(body, { ...headers, 'webhook-signature': first as string })).not.toThrow();
    expect(() => new Webhook(previous).verify(body, { ...headers, 'webhook-signature': second as string })).not.toThrow();
    expect(() => new Webhook(previous).verify(body, { ...headers, 'webhook-signature': first as string })).toThrow();
  });

  it('keys the GitHub-style headers with the current secret only', async () => {
    const current = generateSecret();
    const previous = generateSecret();
    const headers = signDelivery({ deliveryId, timestamp: nowSeconds(), body, secrets: [current, previous] });
    expect(await verifyGithub(current, body, headers['x-hub-signature-256'] as string)).toBe(true);
    expect(await verifyGithub(previous, body, headers['x-hub-signature-256'] as string)).toBe(false);
  });

  it('signs each attempt afresh: a new timestamp changes only the Standard Webhooks signature', () => {
    const secret = generateSecret();
    const a = signDelivery({ deliveryId, timestamp: 1_700_000_000, body, secrets: [secret] });
    const b = signDelivery({ deliveryId, timestamp: 1_700_000_060, body, secrets: [secret] });
    expect(b['webhook-signature']).not.toBe(a['webhook-signature']);
    expect(b['x-hub-signature-256']).toBe(a['x-hub-signature-256']);
    expect(b['webhook-id']).toBe(a['webhook-id']);
  });

  it('refuses no secrets and non-integer timestamps', () => {
    expect(() => signDelivery({ deliveryId, timestamp: nowSeconds(), body, secrets: [] })).toThrow(/at least one secret/);
    expect(() => signDelivery({ deliveryId, timestamp: Date.now() / 1000, body, secrets: [generateSecret()] })).toThrow(
      /unix seconds/,
    );
  });
});
