// The one place the browsable pages' security headers are set (issue 12 §6). Scripts and styles
// come only from restwire's own origin (`/static/restwire/`); no inline script or style, no
// framing, forms and fetches only to this origin. The self-contained docs page
// (`resources/docs.ts`, inline <style>) is sent without them.

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
