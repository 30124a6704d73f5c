import { describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { sign as signGithub } from '@octokit/webhooks-methods';
import { generateSecret } from './secrets.js';
import { signDelivery } from './signing.js';
import { verifyDelivery, type IncomingHeaders } from './verify.js';

const secret = generateSecret();
const body = '{"action":"updated","experience":{"id":7,"title":"naïve ✓"}}';
const now = 1_700_000_000;
const signed = (overrides: Partial<Parameters<typeof signDelivery>[0]> = {}): Record<string, string> =>
  signDelivery({ deliveryId: 'd-1', timestamp: now, body, secrets: [secret], ...overrides });

/** Keeps only the named headers, to test each header family on its own. */
const only = (headers: Record<string, string>, ...names: string[]): Record<string, string> =>
  Object.fromEntries(Object.entries(headers).filter(([name]) => names.includes(name)));

const standardOnly = (h: Record<string, string>) => only(h, 'webhook-id', 'webhook-timestamp', 'webhook-signature');

describe('verifyDelivery', () => {
  it('accepts a delivery signed by signDelivery, as string or raw bytes', () => {
    expect(verifyDelivery(secret, signed(), body, { now })).toBe(true);
    expect(verifyDelivery(secret, signed(), Buffer.from(body, 'utf8'), { now })).toBe(true);
  });

  it('accepts the Standard Webhooks headers alone', () => {
    expect(verifyDelivery(secret, standardOnly(signed()), body, { now })).toBe(true);
  });

  it('accepts X-Hub-Signature-256 alone, with no timestamp to check', () => {
    expect(verifyDelivery(secret, only(signed(), 'x-hub-signature-256'), body, { now: now + 10 ** 6 })).toBe(true);
  });

  it('accepts signatures made by the reference libraries', async () => {
    const github = await signGithub(secret, body);
    expect(verifyDelivery(secret, { 'x-hub-signature-256': github }, body)).toBe(true);

    const at = new Date(now * 1000);
    const standard = {
      'webhook-id': 'msg_2',
      'webhook-timestamp': String(now),
      'webhook-signature': new Webhook(secret).sign('msg_2', at, body),
    };
    expect(verifyDelivery(secret, standard, body, { now })).toBe(true);
  });

  it('reads header names case-insensitively, and array values', () => {
    const headers: IncomingHeaders = {};
    for (const [name, value] of Object.entries(standardOnly(signed()))) headers[name.toUpperCase()] = [value];
    expect(verifyDelivery(secret, headers, body, { now })).toBe(true);
    expect(verifyDelivery(secret, { 'X-Hub-Signature-256': signed()['x-hub-signature-256'] }, body)).toBe(true);
  });

  it('accepts either secret of a rotation overlap, and any v1 entry', () => {
    const previous = generateSecret();
    const headers = standardOnly(signed({ secrets: [secret, previous] }));
    expect(verifyDelivery(secret, headers, body, { now })).toBe(true);
    expect(verifyDelivery(previous, headers, body, { now })).toBe(true);
    expect(verifyDelivery(generateSecret(), headers, body, { now })).toBe(false);
    // Unknown versions and stray spaces are skipped, not fatal.
    const sig = headers['webhook-signature'] as string;
    expect(verifyDelivery(secret, { ...headers, 'webhook-signature': `v2,abc  ${sig}` }, body, { now })).toBe(true);
  });

  it('rejects a tampered body', () => {
    expect(verifyDelivery(secret, signed(), body.replace('7', '8'), { now })).toBe(false);
    expect(verifyDelivery(secret, signed(), body + '\n', { now })).toBe(false);
  });

  it('rejects the wrong secret', () => {
    expect(verifyDelivery(generateSecret(), signed(), body, { now })).toBe(false);
  });

  it('rejects a timestamp outside the tolerance, either way, unless widened', () => {
    const headers = standardOnly(signed());
    expect(verifyDelivery(secret, headers, body, { now: now + 300 })).toBe(true);
    expect(verifyDelivery(secret, headers, body, { now: now + 301 })).toBe(false);
    expect(verifyDelivery(secret, headers, body, { now: now - 301 })).toBe(false);
    expect(verifyDelivery(secret, headers, body, { now: now + 3600, toleranceSeconds: 3600 })).toBe(true);
  });

  it('rejects a timestamp changed after signing (it is covered by the signature)', () => {
    const headers = { ...standardOnly(signed()), 'webhook-timestamp': String(now + 1) };
    expect(verifyDelivery(secret, headers, body, { now })).toBe(false);
  });

  it('rejects a replayed id (the id is covered by the signature)', () => {
    const headers = { ...standardOnly(signed()), 'webhook-id': 'd-2' };
    expect(verifyDelivery(secret, headers, body, { now })).toBe(false);
  });

  it.each<[string, IncomingHeaders]>([
    ['no headers', {}],
    ['an empty signature', { 'x-hub-signature-256': '' }],
    ['sha1 only', { 'x-hub-signature': 'sha1=' + '0'.repeat(40) }],
    ['a short sha256', { 'x-hub-signature-256': 'sha256=abcd' }],
    ['non-hex sha256', { 'x-hub-signature-256': 'sha256=' + 'z'.repeat(64) }],
    ['a zero sha256', { 'x-hub-signature-256': 'sha256=' + '0'.repeat(64) }],
    ['a bare v1', { 'webhook-id': 'd-1', 'webhook-timestamp': String(now), 'webhook-signature': 'v1,' }],
    ['a short v1', { 'webhook-id': 'd-1', 'webhook-timestamp': String(now), 'webhook-signature': 'v1,AAAA' }],
    ['junk signature', { 'webhook-id': 'd-1', 'webhook-timestamp': String(now), 'webhook-signature': '💥' }],
    ['junk timestamp', { ...signed(), 'x-hub-signature-256': '', 'webhook-timestamp': 'yesterday' }],
    ['a huge timestamp', { ...signed(), 'x-hub-signature-256': '', 'webhook-timestamp': '9'.repeat(400) }],
    ['a missing id', { 'webhook-timestamp': String(now), 'webhook-signature': signed()['webhook-signature'] }],
    ['undefined values', { 'webhook-id': undefined, 'x-hub-signature-256': undefined }],
    ['empty arrays', { 'webhook-id': [], 'x-hub-signature-256': [] }],
  ])('returns false for %s', (_label, headers) => {
    expect(verifyDelivery(secret, headers, body, { now })).toBe(false);
  });

  it('never throws on garbage arguments', () => {
    const garbage: unknown[] = [null, undefined, 42, 'text', [], { toString: null }];
    const call = verifyDelivery as (...args: unknown[]) => boolean;
    for (const value of garbage) {
      expect(call(value, signed(), body)).toBe(false);
      expect(call(secret, value, body)).toBe(false);
      expect(call(secret, signed(), value, { now })).toBe(false);
      expect(typeof call(secret, signed(), body, value)).toBe('boolean');
    }
    const throwing = Object.defineProperty({}, 'webhook-id', {
      enumerable: true,
      get: () => {
        throw new Error('boom');
      },
    });
    expect(verifyDelivery(secret, throwing as IncomingHeaders, body)).toBe(false);
  });

  it('checks X-Hub-Signature-256 even for a secret that cannot key Standard Webhooks', async () => {
    const plain = 'not-a-whsec-secret';
    const headers = { 'webhook-id': 'd', 'webhook-timestamp': String(now), 'webhook-signature': 'v1,AAAA' };
    expect(verifyDelivery(plain, { ...headers, 'x-hub-signature-256': await signGithub(plain, body) }, body, { now })).toBe(true);
    expect(verifyDelivery(plain, headers, body, { now })).toBe(false);
  });
});
