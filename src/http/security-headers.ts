import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

// Headers every response carries, the browsable HTML above all (issue 11, finding 12e). The
// pages are static: inline styles, links, nothing else; no script, frame, form or plug-in may run.

/** The policy the HTML pages need (renderers.ts, docs.ts), and nothing more. */
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
