import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import {
  InvalidSecretError,
  createSecretBox,
  generateSecret,
  parseSecret,
  standardWebhooksKey,
} from './secrets.js';

const secretOf = (bytes: number): string => 'whsec_' + randomBytes(bytes).toString('base64');

describe('generateSecret', () => {
  it('returns whsec_ + base64 of 32 random bytes that parseSecret accepts', () => {
    const secret = generateSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
    expect(parseSecret(secret)).toBe(secret);
  });

  it('never repeats', () => {
    const seen = new Set(Array.from({ length: 100 }, generateSecret));
    expect(seen.size).toBe(100);
  });
});

describe('parseSecret', () => {
  it.each([24, 32, 48, 64])('accepts base64 of %i bytes', (bytes) => {
    const secret = secretOf(bytes);
    expect(parseSecret(secret)).toBe(secret);
  });

  it.each([
    ['a number', 42],
    ['null', null],
    ['an object', { secret: 'whsec_x' }],
    ['an empty string', ''],
    ['the bare prefix', 'whsec_'],
    ['no prefix', randomBytes(32).toString('base64')],
    ['a wrong prefix', 'whsk_' + randomBytes(32).toString('base64')],
    ['an upper-case prefix', 'WHSEC_' + randomBytes(32).toString('base64')],
    ['23 bytes', secretOf(23)],
    ['65 bytes', secretOf(65)],
    ['base64url alphabet', 'whsec_' + Buffer.alloc(32, 0xfb).toString('base64url')],
    ['missing padding', secretOf(32).replace(/=+$/, '')],
    ['non-canonical trailing bits', 'whsec_' + Buffer.alloc(32, 0).toString('base64').replace('A=', 'B=')],
    ['embedded whitespace', secretOf(32).replace('whsec_', 'whsec_ ')],
    ['a trailing newline', secretOf(32) + '\n'],
    ['a plain password', 'whsec_correct horse battery staple'],
  ])('rejects %s with a message fit for a 400', (_label, value) => {
    expect(() => parseSecret(value)).toThrow(InvalidSecretError);
    expect(() => parseSecret(value)).toThrow("secret must be 'whsec_' followed by base64 of 24 to 64 bytes");
  });
});

describe('standardWebhooksKey', () => {
  it('is the decoded bytes after the prefix, the key the standardwebhooks library uses', () => {
    const raw = randomBytes(32);
    const secret = 'whsec_' + raw.toString('base64');
    expect(standardWebhooksKey(secret).equals(raw)).toBe(true);
    // The library's own signature, made from the whsec_ string, must match one made with our key.
    const msgId = 'msg_1';
    const at = new Date(1_700_000_000_000);
    const theirs = new Webhook(secret).sign(msgId, at, '{"a":1}');
    const ours = new Webhook(standardWebhooksKey(secret), { format: 'raw' }).sign(msgId, at, '{"a":1}');
    expect(ours).toBe(theirs);
  });

  it('refuses a string without the prefix', () => {
    expect(() => standardWebhooksKey('nope')).toThrow(InvalidSecretError);
  });
});

describe('createSecretBox', () => {
  const box = createSecretBox('test-secret-key-0123456789abcdef');

  it('round-trips a secret, with a fresh IV each time', () => {
    const secret = generateSecret();
    const a = box.seal(secret);
    const b = box.seal(secret);
    expect(a).not.toBe(b);
    expect(a).toMatch(/^v1\.[\w-]{16}\.[\w-]{22}\.[\w-]+$/);
    expect(a).not.toContain(secret.slice(6, 20));
    expect(box.open(a)).toBe(secret);
    expect(box.open(b)).toBe(secret);
  });

  it('round-trips empty and non-ASCII text', () => {
    expect(box.open(box.seal(''))).toBe('');
    expect(box.open(box.seal('clé ✓ 🔑'))).toBe('clé ✓ 🔑');
  });

  it('opens with a box built from the same SECRET_KEY (restart), not another', () => {
    const sealed = box.seal('whsec_abc');
    expect(createSecretBox('test-secret-key-0123456789abcdef').open(sealed)).toBe('whsec_abc');
    expect(() => createSecretBox('another-key').open(sealed)).toThrow(/failed authentication/);
  });

  it('detects tampering with any part', () => {
    const sealed = box.seal(generateSecret());
    const parts = sealed.split('.');
    for (let i = 1; i < 4; i++) {
      const bytes = Buffer.from(parts[i] as string, 'base64url');
      bytes[0] = (bytes[0] as number) ^ 1;
      const tampered = [...parts];
      tampered[i] = bytes.toString('base64url');
      expect(() => box.open(tampered.join('.'))).toThrow();
    }
  });

  it.each([
    ['an empty string', ''],
    ['garbage', 'not sealed'],
    ['an unknown version', 'v2.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA.AAAA'],
    ['a short IV', 'v1.AAAA.AAAAAAAAAAAAAAAAAAAAAA.AAAA'],
    ['a short tag', 'v1.AAAAAAAAAAAAAAAA.AAAA.AAAA'],
    ['too many parts', 'v1.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA.AAAA.AAAA'],
  ])('refuses %s', (_label, sealed) => {
    expect(() => box.open(sealed)).toThrow();
  });

  it('refuses an empty SECRET_KEY at construction', () => {
    expect(() => createSecretBox('')).toThrow(/SECRET_KEY/);
  });
});
