import { timingSafeEqual } from 'node:crypto';
import { hubSignature, standardWebhooksSignature } from './signing.js';

// The receiver side of API.md §4 "A delivery", exported for users' own receivers and used by
// `restwire listen`. It accepts what `signDelivery` produces, under either header family.

/** Headers as Node's `IncomingMessage.headers` (or any plain object) holds them. */
export type IncomingHeaders = Record<string, string | string[] | undefined>;

/** Options for `verifyDelivery`. */
export interface VerifyOptions {
  /** Largest accepted distance between `webhook-timestamp` and now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** The current time in unix seconds (default: the clock); for tests and replays. */
  now?: number;
}

/** Default clock skew allowed, the five minutes the Standard Webhooks spec recommends. */
const DEFAULT_TOLERANCE_SECONDS = 300;
const SHA256_BYTES = 32;

/**
 * True if `rawBody` was signed with `secret`: a `v1,` entry of `webhook-signature` matches and
 * `webhook-timestamp` is within tolerance, or `X-Hub-Signature-256` matches. Never throws.
 *
 * The GitHub-style header has no timestamp, so it gives no replay protection; receivers that
 * need it should check the Standard Webhooks headers or de-duplicate on `X-Service-Delivery`.
 *
 * @example
 *   const ok = verifyDelivery(process.env.HOOK_SECRET!, req.headers, rawBody);
 */
export function verifyDelivery(
  secret: string,
  headers: IncomingHeaders,
  rawBody: string | Buffer,
  options: VerifyOptions = {},
): boolean {
  if (typeof secret !== 'string' || secret.length === 0) return false;
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  if (!Buffer.isBuffer(body)) return false;
  const header = safely(() => headerReader(headers));
  // Each header family is judged on its own: one that cannot be checked (a secret without
  // `whsec_` cannot key Standard Webhooks) must not hide a match in the other.
  return (
    header !== false &&
    (safely(() => verifyStandardWebhooks(secret, header, body, options)) === true ||
      safely(() => verifyHubSignature256(secret, header, body)) === true)
  );
}

/** Runs `check`, turning any exception into `false`: garbage from a stranger is "not verified". */
function safely<T>(check: () => T): T | false {
  try {
    return check();
  } catch {
    return false;
  }
}

type HeaderReader = (name: string) => string | undefined;

/** Case-insensitive lookup; of a repeated header the first value counts. */
function headerReader(headers: IncomingHeaders): HeaderReader {
  const byName = new Map<string, string>();
  for (const [name, value] of Object.entries(headers)) {
    const first = Array.isArray(value) ? value[0] : value;
    const key = name.toLowerCase();
    if (typeof first === 'string' && !byName.has(key)) byName.set(key, first);
  }
  return (name) => byName.get(name);
}

function verifyStandardWebhooks(secret: string, header: HeaderReader, body: Buffer, options: VerifyOptions): boolean {
  const id = header('webhook-id');
  const timestamp = header('webhook-timestamp');
  const signatures = header('webhook-signature');
  if (!id || !timestamp || !signatures || !/^\d{1,15}$/.test(timestamp)) return false;

  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const now = options.now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(timestamp)) > tolerance) return false;

  const expected = standardWebhooksSignature(secret, id, timestamp, body);
  // Every entry is compared (no early exit) and each comparison is constant-time, so timing
  // tells nothing about which entry or how much of it matched.
  let matched = false;
  for (const entry of signatures.split(' ')) {
    if (!entry.startsWith('v1,')) continue; // other versions are for other verifiers
    const given = decodeStrict(entry.slice(3), 'base64');
    if (given && constantTimeEqual(given, expected)) matched = true;
  }
  return matched;
}

function verifyHubSignature256(secret: string, header: HeaderReader, body: Buffer): boolean {
  const value = header('x-hub-signature-256');
  if (!value?.startsWith('sha256=')) return false;
  const given = decodeStrict(value.slice(7).toLowerCase(), 'hex');
  return given !== null && constantTimeEqual(given, hubSignature('sha256', secret, body));
}

/** timingSafeEqual throws on different lengths; a wrong length is simply a mismatch. */
function constantTimeEqual(given: Buffer, expected: Buffer): boolean {
  return given.length === SHA256_BYTES && expected.length === SHA256_BYTES && timingSafeEqual(given, expected);
}

/** Decodes only text that is the canonical encoding of its bytes (Node's decoders skip junk). */
function decodeStrict(text: string, encoding: 'base64' | 'hex'): Buffer | null {
  const bytes = Buffer.from(text, encoding);
  return bytes.length > 0 && bytes.toString(encoding) === text ? bytes : null;
}
