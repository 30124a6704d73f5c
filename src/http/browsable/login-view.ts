import type { Permission } from '../caller.js';
import { HTML_TYPE } from '../renderers.js';
import type { View } from '../view.js';
import { LOGIN_PATH, loginPage } from './login-page.js';

// The login page's route: a view like any other, so it runs the one pipeline (rate limits,
// session lookup), with its page named by the view (`page`), as every view that needs its own.

const anyone: Permission = { name: 'allowAny', hasPermission: () => true, hasObjectPermission: () => true };

/** `GET /api/v1/auth/login/`: HTML only; the page itself carries no data. */
export const loginView: View = {
  name: 'Log in',
  description: 'Log in with your username and password (a session cookie; log out from any page).',
  path: LOGIN_PATH,
  mediaTypes: [HTML_TYPE],
  page: (_body, context) => loginPage(context.path, context.user),
  actions: { GET: { permission: anyone, handle: async () => ({ body: {}, headers: { 'cache-control': 'no-store' } }) } },
};

