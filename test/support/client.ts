/**
 * A response body as the tests read it. Any shape: each test asserts the fields it reads.
 */
export type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** What a test sees of one response: status, headers, the raw text and, when JSON, the body. */
export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  readonly body: Json | null;
}

export type Send = (method: string, path: string, auth: string | null, body?: unknown, headers?: Record<string, string>) => Promise<Answer>;

/**
 * Sends requests to the server at `base()` (read at each call, so a client made before the
 * server starts follows it): `auth` is an Authorization value or null for anonymous, a `body`
 * is sent as JSON.
 */
export function jsonClient(base: () => string): Send {
  return async (method, path, auth, body, headers = {}) => {
    const response = await fetch(`${base()}${path}`, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(auth ? { authorization: auth } : {}), ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    const parsed = text && response.headers.get('content-type')?.includes('json') ? (JSON.parse(text) as Json) : null;
    return { status: response.status, headers: response.headers, text, body: parsed };
  };
}
