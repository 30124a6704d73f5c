import type { FastifyRequest } from 'fastify';
import type { CredentialVerifier } from '../auth/authenticators.js';
import { checkOrigin } from '../auth/csrf.js';
import { allowAny } from '../auth/permissions.js';
import type { RefreshTokens } from '../auth/refresh-tokens.js';
import { SESSION_COOKIE, readCookie, type SessionStore } from '../auth/sessions.js';
import type { AccessTokens } from '../auth/tokens.js';
import type { User } from '../http/caller.js';
import type { UserStore } from '../auth/users.js';
import { AuthenticationFailed, ValidationError, type FieldErrors } from '../http/errors.js';
import { MESSAGES } from '../http/messages.js';
import type { RequestData } from '../http/parsers.js';
import { JSON_TYPE } from '../http/renderers.js';
import type { Action, ApiResponse, View } from '../http/view.js';

/**
 * The sign-in endpoints (API.md §3): tokens for programs, sessions for browsers (signup is the
 * users collection's create, `users.ts`). Credentials go through the same verifier as Basic, so
 * the login throttle and the credential cache apply to every scheme alike.
 */
export interface AuthViewOptions {
  readonly verify: CredentialVerifier;
  readonly users: UserStore;
  readonly accessTokens: AccessTokens;
  readonly refreshTokens: RefreshTokens;
  readonly sessions: SessionStore;
  /** Origins besides the server's own that may start a session (PUBLIC_URL, CORS_ORIGINS). */
  readonly trustedOrigins: readonly string[];
}

// RFC 6749 §5.1: responses carrying credentials must not be stored by caches.
const NO_STORE = { 'cache-control': 'no-store' } as const;

/** The body of a login and of a signup (`users.ts`): a username and a password. */
export const CREDENTIALS = {
  schema: {
    type: 'object',
    required: ['username', 'password'],
    properties: { username: { type: 'string' }, password: { type: 'string', writeOnly: true } },
  },
  required: true,
};
const TOKEN_PAIR = {
  description: 'A new access token (Bearer, a JWT) and a single-use refresh token.',
  headers: ['Cache-Control'],
  schema: {
    type: 'object',
    required: ['access_token', 'token_type', 'expires_in', 'refresh_token'],
    properties: {
      access_token: { type: 'string' },
      token_type: { type: 'string', const: 'Bearer' },
      expires_in: { type: 'integer', minimum: 1, description: 'Seconds the access token is valid.' },
      refresh_token: { type: 'string' },
    },
  },
};

/** Reads required string fields; 400 with `errors` naming each missing or non-string one. */
function requiredStrings<const Name extends string>(data: RequestData, names: readonly Name[]): Record<Name, string> {
  const errors: FieldErrors = {};
  const values = {} as Record<Name, string>;
  for (const name of names) {
    const value = data[name];
    if (value === undefined || value === null || value === '') errors[name] = [MESSAGES.required];
    else if (typeof value !== 'string') errors[name] = [MESSAGES.notAString];
    else values[name] = value;
  }
  if (Object.keys(errors).length) throw new ValidationError(errors);
  return values;
}

export function authViews({ verify, users, accessTokens, refreshTokens, sessions, trustedOrigins }: AuthViewOptions): View[] {
  /** An unknown user and a wrong password answer alike (API.md §6, "Login throttling"). */
  async function login(data: RequestData, raw: FastifyRequest): Promise<User> {
    const { username, password } = requiredStrings(data, ['username', 'password']);
    const user = await verify(username, password, raw);
    if (!user) throw new AuthenticationFailed(MESSAGES.invalidCredentials);
    return user;
  }

  async function tokenPair(user: User, family?: string): Promise<ApiResponse> {
    const { accessToken, expiresIn } = await accessTokens.issue(user);
    const refreshToken = await refreshTokens.issue(user.id, family);
    return {
      body: { access_token: accessToken, token_type: 'Bearer', expires_in: expiresIn, refresh_token: refreshToken },
      headers: NO_STORE,
    };
  }

  const obtainToken: Action = {
    permission: allowAny,
    docs: { request: CREDENTIALS, responses: { '200': TOKEN_PAIR } },
    async handle(request) {
      return tokenPair(await login(await request.data(), request.raw));
    },
  };

  const refreshToken: Action = {
    permission: allowAny,
    docs: {
      request: { schema: { type: 'object', required: ['refresh_token'], properties: { refresh_token: { type: 'string' } } }, required: true },
      responses: { '200': TOKEN_PAIR },
    },
    async handle(request) {
      const { refresh_token: token } = requiredStrings(await request.data(), ['refresh_token']);
      const { userId, family } = await refreshTokens.redeem(token);
      const user = await users.findById(userId);
      if (!user) throw new AuthenticationFailed(MESSAGES.invalidRefreshToken);
      return tokenPair(user, family);
    },
  };

  const startSession: Action = {
    permission: allowAny,
    docs: { request: CREDENTIALS, responses: { '204': { description: 'Logged in: the session cookies are set.', headers: ['Set-Cookie', 'Cache-Control'] } } },
    async handle(request) {
      // Before the password is looked at: a refused login does not count as a failure either.
      checkOrigin(request.raw, trustedOrigins);
      const user = await login(await request.data(), request.raw);
      const session = await sessions.create(user.id);
      return { status: 204, headers: { ...NO_STORE, 'set-cookie': sessions.cookiesFor(session) } };
    },
  };

  /**
   * Logout is idempotent: it ends the session that authenticated the request (the
   * authenticator has checked its CSRF token) and clears the cookies in any case.
   */
  const endSession: Action = {
    permission: allowAny,
    docs: { responses: { '204': { description: 'Logged out: the session cookies are cleared.', headers: ['Set-Cookie'] } } },
    async handle(request) {
      const id = readCookie(request.raw, SESSION_COOKIE);
      if (request.identity?.scheme === 'session' && id) await sessions.delete(id);
      return { status: 204, headers: { 'set-cookie': sessions.clearedCookies() } };
    },
  };

  return [
    {
      name: 'Obtain Token',
      description: 'Exchange a username and password for an access token and a refresh token.',
      path: '/api/v1/auth/token/',
      mediaTypes: [JSON_TYPE],
      actions: { POST: obtainToken },
    },
    {
      name: 'Refresh Token',
      description: 'Exchange a refresh token for a new pair; each refresh token works once.',
      path: '/api/v1/auth/token/refresh/',
      mediaTypes: [JSON_TYPE],
      actions: { POST: refreshToken },
    },
    {
      name: 'Session',
      description: 'Log in (POST: sets the sessionid and csrftoken cookies) or out (DELETE).',
      path: '/api/v1/auth/session/',
      mediaTypes: [JSON_TYPE],
      actions: { POST: startSession, DELETE: endSession },
    },
  ];
}
