import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

// Webhook secrets: their one accepted form, and how they are kept encrypted at rest.
// API.md §4 (Subscriptions) and §6 "Webhook secrets and signatures".

const PREFIX = 'whsec_';
const MIN_KEY_BYTES = 24;
const MAX_KEY_BYTES = 64;
const GENERATED_KEY_BYTES = 32;

// Standard base64 (RFC 4648 §4) with padding; base64url or unpadded text is refused so that the
// same string decodes to the same key in every library a receiver might use.
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** Thrown by `parseSecret` when a client-supplied secret is unusable; its message fits a 400 body. */
export class InvalidSecretError extends Error {
  override readonly name = 'InvalidSecretError';
  readonly code = 'INVALID_WEBHOOK_SECRET';

  constructor() {
    super(`secret must be '${PREFIX}' followed by base64 of ${MIN_KEY_BYTES} to ${MAX_KEY_BYTES} bytes`);
  }
}

/** Returns a new secret: `whsec_` + base64 of 32 random bytes (API.md §4). */
export function generateSecret(): string {
  return PREFIX + randomBytes(GENERATED_KEY_BYTES).toString('base64');
}

/** Returns `value` unchanged if it is a well-formed secret, else throws `InvalidSecretError`. */
export function parseSecret(value: unknown): string {
  if (typeof value !== 'string' || !value.startsWith(PREFIX)) throw new InvalidSecretError();
  const encoded = value.slice(PREFIX.length);
  if (!BASE64.test(encoded)) throw new InvalidSecretError();
  const key = Buffer.from(encoded, 'base64');
  // Node's decoder is lenient (it ignores stray padding and trailing bits); demanding that the
  // bytes re-encode to the same text rejects every string that two decoders could read apart.
  if (key.length < MIN_KEY_BYTES || key.length > MAX_KEY_BYTES || key.toString('base64') !== encoded) {
    throw new InvalidSecretError();
  }
  return value;
}

/** The Standard Webhooks HMAC key: the base64-decoded bytes after `whsec_` (API.md §6). */
export function standardWebhooksKey(secret: string): Buffer {
  if (!secret.startsWith(PREFIX)) throw new InvalidSecretError();
  return Buffer.from(secret.slice(PREFIX.length), 'base64');
}

/** Encrypts and decrypts webhook secrets at rest with a key derived from SECRET_KEY. */
export interface SecretBox {
  /** Encrypts `plain` into a compact, versioned string safe to store in a text column. */
  seal(plain: string): string;
  /** Decrypts a string made by `seal`; throws if it was altered or sealed under another key. */
  open(sealed: string): string;
}

const BOX_VERSION = 'v1';
const BOX_INFO = 'restwire webhook secret';
const IV_BYTES = 12; // the GCM nonce size NIST SP 800-38D recommends
const TAG_BYTES = 16;

/**
 * Builds a `SecretBox` using AES-256-GCM under a key derived from `secretKey` with HKDF-SHA256.
 * The secret must be recoverable (to sign deliveries), so it is encrypted, not hashed (API.md §4).
 */
export function createSecretBox(secretKey: string): SecretBox {
  if (typeof secretKey !== 'string' || secretKey.length === 0) {
    throw new Error('SECRET_KEY must be a non-empty string');
  }
  // A dedicated `info` keeps this key independent of anything else derived from SECRET_KEY
  // (token signing), as RFC 5869 §3.2 intends; SECRET_KEY is high-entropy, so no salt is needed.
  const key = Buffer.from(hkdfSync('sha256', secretKey, Buffer.alloc(0), BOX_INFO, 32));

  return {
    seal(plain: string): string {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const ciphertext = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      const tag = cipher.getAuthTag();
      return [BOX_VERSION, ...[iv, tag, ciphertext].map((bytes) => bytes.toString('base64url'))].join('.');
    },

    open(sealed: string): string {
      const parts = typeof sealed === 'string' ? sealed.split('.') : [];
      if (parts.length !== 4 || parts[0] !== BOX_VERSION) throw new Error('sealed webhook secret is malformed');
      const [iv, tag, ciphertext] = parts.slice(1).map(decodeBase64url);
      if (!iv || iv.length !== IV_BYTES || !tag || tag.length !== TAG_BYTES || !ciphertext) {
        throw new Error('sealed webhook secret is malformed');
      }
      const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
      decipher.setAuthTag(tag);
      try {
        return Buffer.concat([decipher.update(ciphertext), decipher.final()]).toString('utf8');
      } catch {
        throw new Error('sealed webhook secret failed authentication (tampered, or sealed under another SECRET_KEY)');
      }
    },
  };
}

/** Strict base64url decoding: null unless the text is the canonical encoding of its bytes. */
function decodeBase64url(text: string): Buffer | null {
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : null;
}
