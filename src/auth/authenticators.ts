import type { FastifyRequest } from 'fastify';
import { AuthenticationFailed } from '../http/errors.js';
import { MESSAGES } from '../http/messages.js';
import type { Authenticator, Identity } from '../http/caller.js';
import type { UserStore } from './users.js';

/** Splits `Authorization: <scheme> <credentials>`; the scheme is case-insensitive (RFC 9110 §11.1). */
export function readAuthorization(request: FastifyRequest): { scheme: string; credentials: string } | null {
  const header = request.headers.authorization;
  if (!header) return null;
  const space = header.indexOf(' ');
  if (space === -1) return { scheme: header.toLowerCase(), credentials: '' };
  return { scheme: header.slice(0, space).toLowerCase(), credentials: header.slice(space + 1).trim() };
}

/** Decodes Basic credentials (RFC 7617); null when they are not `user:password` in base64. */
export function decodeBasic(credentials: string): { username: string; password: string } | null {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(credentials)) return null;
  const decoded = Buffer.from(credentials, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon === -1) return null;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** Checks a username and password; the login throttle and the credential cache sit behind this. */
export type CredentialVerifier = (username: string, password: string, request: FastifyRequest) => Promise<Identity['user'] | null>;

/** HTTP Basic (RFC 7617), as in the seed's sample `curl -u user:pass`. */
export function basicAuthentication(verify: CredentialVerifier): Authenticator {
  return {
    scheme: 'basic',
    async authenticate(request) {
      const authorization = readAuthorization(request);
      if (authorization?.scheme !== 'basic') return null;
      const credentials = decodeBasic(authorization.credentials);
      if (!credentials) throw new AuthenticationFailed('Invalid basic header: credentials are not base64 of user:password.');
      const user = await verify(credentials.username, credentials.password, request);
      if (!user) throw new AuthenticationFailed(MESSAGES.invalidCredentials);
      return { user, scheme: 'basic' };
    },
  };
}

/** Verifies against the user store directly (no cache, no throttle). */
export function storeVerifier(users: UserStore): CredentialVerifier {
  return (username, password) => users.verifyCredentials(username, password);
}
