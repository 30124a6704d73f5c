import { timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config.js';
import { PermissionDenied } from '../http/errors.js';

/**
 * CSRF protection for session-authenticated unsafe requests (API.md §3), as Django's
 * CsrfViewMiddleware: the `X-CSRFToken` header must equal the session's token (a cross-site
 * page cannot read the `csrftoken` cookie to copy it), and an `Origin` (or, without one, a
 * `Referer`) that is present must be this server's. Basic and Bearer requests carry their
 * credentials explicitly, so they need neither.
 */
export const CSRF_HEADER = 'x-csrftoken';

/**
 * The origins a browser may send session requests from: PUBLIC_URL's, and every exact origin
 * in CORS_ORIGINS (those are trusted with credentials already). The request's own Host is
 * added per request.
 */
export function trustedOrigins(config: Pick<Config, 'publicUrl' | 'corsOrigins'>): readonly string[] {
  return [config.publicUrl, ...config.corsOrigins.filter((origin) => origin !== '*')].map((url) => new URL(url).origin);
}

/** Throws PermissionDenied (403) unless the request carries the session's CSRF token from a trusted origin. */
export function checkCsrf(request: FastifyRequest, sessionToken: string, trusted: readonly string[]): void {
  const header = request.headers[CSRF_HEADER];
  if (typeof header !== 'string' || header === '') {
    throw new PermissionDenied('CSRF failed: the X-CSRFToken header is missing.');
  }
  const given = Buffer.from(header);
  const expected = Buffer.from(sessionToken);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw new PermissionDenied('CSRF failed: the X-CSRFToken header does not match.');
  }
  checkOrigin(request, trusted);
}

/**
 * Throws PermissionDenied (403) when the request's Origin (or, without one, its Referer) is
 * present and is neither this server's nor trusted. Session login needs this alone: it has no
 * session token yet, and without it a foreign page could sign the browser in to the attacker's
 * account ("login CSRF"; issue 11, finding 10).
 */
export function checkOrigin(request: FastifyRequest, trusted: readonly string[]): void {
  const source = requestOrigin(request);
  if (source === undefined) return;
  const own = request.headers.host ? `${request.protocol}://${request.headers.host}`.toLowerCase() : null;
  if (source === null || (source !== own && !trusted.includes(source))) {
    throw new PermissionDenied('CSRF failed: the request comes from another origin.');
  }
}

/** The Origin, else the Referer's origin; undefined when neither is sent, null when unusable. */
function requestOrigin(request: FastifyRequest): string | null | undefined {
  const origin = request.headers.origin;
  if (origin !== undefined) return origin === 'null' ? null : origin.toLowerCase();
  const referer = request.headers.referer;
  if (referer === undefined) return undefined;
  try {
    return new URL(referer).origin;
  } catch {
    return null;
  }
}
