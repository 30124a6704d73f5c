// The one place security headers are set. Every response carries SECURITY_HEADERS, set first so
// that errors and 404s do too (issue 11, finding 12e); a browsable page replaces the policy with
// BROWSABLE_SECURITY_HEADERS (issue 12 §6).

import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

/**
 * The policy of every response that is not a browsable page; none of them is HTML. Its style,
 * image and form sources date from the docs page's inline style (now a browsable page) and are
 * kept, so that no other response's headers change.
 */
export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  // A JSON body is never sniffed into HTML or script.
  'x-content-type-options': 'nosniff',
  // For browsers older than frame-ancestors.
  'x-frame-options': 'DENY',
};

/** onRequest hook: set first, so that every answer (errors and 404s too) carries them. */
export function securityHeaders(_request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  reply.headers(SECURITY_HEADERS);
  done();
}

// Browsable pages, the docs page (`resources/openapi/docs-page.ts`) among them: scripts and
// styles come only from restwire's own origin (`/static/restwire/`); no inline script or style,
// no framing, forms and fetches only to this origin.

/** Content-Security-Policy of every browsable page (CSP Level 3). */
export const BROWSABLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Headers added to every browsable page. */
export const BROWSABLE_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': BROWSABLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
};
