import { html } from 'ghtml';
import type { User } from '../caller.js';

// The login page (issue 12 §2), DRF's `/api-auth/login/`: a form the script sends to the session
// endpoint (`POST /api/v1/auth/session/`, API.md §3). A wrong username and a wrong password read
// alike; the login throttle's 429 shows as a message with its wait.

export const LOGIN_PATH = '/api/v1/auth/login/';

/** Stands for this site's origin when resolving `next`: only whether it stays the same matters. */
const SITE = 'http://restwire.invalid';

/**
 * Where to go after logging in: `next` when it is a path on this site, else the API root.
 * URL parsers drop tabs and newlines and read a backslash as `/`, so `/<tab>/host` or
 * `/<backslash>host` would leave the site (issue 22, item 9): any control character, whitespace
 * or backslash is refused, then the path must start with one `/` and resolve to this origin.
 * The resolved path is returned, so the page holds exactly where the browser will go.
 */
export function safeNext(path: string): string {
  const next = new URLSearchParams(path.split('?')[1] ?? '').get('next') ?? '';
  if (/[\u0000-\u001f\u007f\\\s]/u.test(next) || !next.startsWith('/') || next.startsWith('//')) return '/api/v1/';
  const url = new URL(next, SITE);
  return url.origin === SITE ? `${url.pathname}${url.search}${url.hash}` : '/api/v1/';
}

export function loginPage(path: string, user: User | null): string {
  const next = safeNext(path);
  const already = user ? html`<p class="note">You are signed in as <strong>${user.username}</strong>. Log in again to switch users.</p>` : '';
  return html`<div class="login">
<section class="box" aria-labelledby="login-heading">
<h1 class="box-header" id="login-heading">Log in to restwire</h1>
<form class="box-body" id="login-form" data-next="${next}" novalidate>
!${already}
<div class="form-error" data-form-error role="alert" hidden></div>
<div class="field"><label for="login-username">Username</label>
<input id="login-username" name="username" autocomplete="username" required autofocus></div>
<div class="field"><label for="login-password">Password</label>
<input id="login-password" name="password" type="password" autocomplete="current-password" required></div>
<div class="form-actions"><button type="submit" class="btn btn-primary btn-block">Log in</button></div>
</form>
</section>
</div>`;
}
