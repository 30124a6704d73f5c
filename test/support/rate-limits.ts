import { expect } from 'vitest';

/** The X-Rate-Limit-* headers of a response (API.md §1), null where absent. */
export const rateHeaders = (response: Response) => ({
  limit: response.headers.get('x-rate-limit-limit'),
  remaining: response.headers.get('x-rate-limit-remaining'),
  reset: response.headers.get('x-rate-limit-reset'),
});

/** The three headers are there, as integers, and Reset is seconds left in the window (never a timestamp). */
export function expectRateHeaders(response: Response, windowSeconds: number): { limit: number; remaining: number; reset: number } {
  const headers = rateHeaders(response);
  expect(headers, `${response.status} ${response.url}`).toEqual({
    limit: expect.stringMatching(/^\d+$/),
    remaining: expect.stringMatching(/^\d+$/),
    reset: expect.stringMatching(/^\d+$/),
  });
  const reset = Number(headers.reset);
  expect(reset).toBeLessThanOrEqual(windowSeconds);
  return { limit: Number(headers.limit), remaining: Number(headers.remaining), reset };
}
