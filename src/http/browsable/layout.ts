import { html } from 'ghtml';
import type { User } from '../caller.js';
import { ASSET_PREFIX } from './assets.js';

// The frame every browsable page shares: head (own stylesheet and script only, see
// `security-headers.ts`), the top bar with who is logged in, breadcrumbs, and the live region
// the script announces results in. `ghtml`'s `html` escapes every interpolated value; `!${…}`
// marks markup this folder built itself.

export interface PageFrame {
  readonly title: string;
  /** The request URL (path and query). */
  readonly path: string;
  readonly user: User | null;
  /** The page's main content, already built with `html`. */
  readonly main: string;
}

/** `/api/v1/webhooks/3/deliveries/` → API › webhooks › 3 › deliveries, each a link. */
export function breadcrumbs(path: string): string {
  const clean = path.split('?')[0]!;
  const parts = clean.replace(/^\/api\/v1\/?/, '').split('/').filter(Boolean);
  let href = '/api/v1/';
  const crumbs = [html`<li><a href="/api/v1/">API</a></li>`];
  parts.forEach((part, index) => {
    href += `${part}/`;
    const last = index === parts.length - 1;
    crumbs.push(last ? html`<li><a href="${href}" aria-current="page">${part}</a></li>` : html`<li><a href="${href}">${part}</a></li>`);
  });
  return html`<nav class="crumbs" aria-label="Breadcrumb"><ol>!${crumbs}</ol></nav>`;
}

function session(user: User | null, path: string): string {
  if (user === null) {
    return html`<a class="btn btn-header" href="/api/v1/auth/login/?next=${encodeURIComponent(path)}">Log in</a>`;
  }
  return html`<span class="whoami">Signed in as <a href="/api/v1/users/${user.id}/"><strong>${user.username}</strong></a></span>
<button type="button" class="btn btn-header" data-logout>Log out</button>`;
}

/** A whole HTML document around `main`. */
export function layout({ title, path, user, main }: PageFrame): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · restwire</title>
<link rel="stylesheet" href="${ASSET_PREFIX}browsable.css">
<script src="${ASSET_PREFIX}browsable.js" defer></script>
</head>
<body>
<a class="skip-link" href="#main">Skip to content</a>
<header class="topbar">
<nav class="topnav" aria-label="Site">
<a class="brand" href="/api/v1/">restwire</a>
<a href="/api/v1/">API root</a>
<a href="/api/v1/webhooks/">Webhooks</a>
<a href="/api/v1/docs/">Docs</a>
</nav>
<div class="session">!${session(user, path)}</div>
</header>
<main id="main" tabindex="-1">
!${breadcrumbs(path)}
!${main}
</main>
<div class="toast" id="toast" role="status" aria-live="polite" hidden></div>
</body>
</html>
`;
}
