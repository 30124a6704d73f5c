import { html } from 'ghtml';
import type { User } from '../caller.js';

// The login page (issue 12 §2), DRF's `/api-auth/login/`: a form the script sends to the session
// endpoint (`POST /api/v1/auth/session/`, API.md §3). A wrong username and a wrong password read
// alike; the login throttle's 429 shows as a message with its wait.

export const LOGIN_PATH = '/api/v1/auth/login/';

/** A `next` that stays on this site (no `//host`, no scheme), else the API root. */
export function safeNext(path: string): string {
  const next = new URLSearchParams(path.split('?')[1] ?? '').get('next') ?? '';
  return next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/\\') ? next : '/api/v1/';
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
