import { afterAll, describe, expect, it } from 'vitest';
import { basic, createTestDatabase, createUser, startServer, type RunningServer, type TestDatabase } from '../test/support/server.js';
import { percentile, report, tearDown } from './support.js';

/**
 * Login burst (issue 22, item 2): from one IP, busy Basic clients send their right password in
 * bursts of 16 concurrent requests (the first burst of each user on a cold credential cache),
 * while an attacker on the same IP guesses another user's password, 8 guesses at a time. Only
 * failed logins count: the right passwords are never answered 429, the attacker is locked out
 * of that username after 10 failures, and its refused guesses never add up to a block of the
 * IP (100 failures) that would lock the busy clients out too.
 */
const USERS = 6;
const ROUNDS = 8;
const BURST = 16;
const GUESSES = 400;
const GUESS_CONCURRENCY = 8;
const FORM = 'application/x-www-form-urlencoded';

describe('concurrent right logins beside a password guesser on one IP', () => {
  let database: TestDatabase;
  let server: RunningServer;
  afterAll(() => tearDown({ server, database }));

  it('never refuses a right password, and locks the guesser out after 10 failures', async () => {
    database = await createTestDatabase('sqlite');
    for (let u = 0; u < USERS; u++) await createUser(database, `busy${u}`, `busy${u}-password-1`);
    await createUser(database, 'victim', 'victim-password-1');
    server = await startServer(database, { env: { DISPATCHER_IN_SERVE: 'false' } });
    const started = Date.now();

    const legit: { status: number; ms: number; cold: boolean }[] = [];
    const clients = Array.from({ length: USERS }, async (_, u) => {
      const authorization = basic(`busy${u}`, `busy${u}-password-1`);
      for (let round = 0; round < ROUNDS; round++) {
        await Promise.all(
          Array.from({ length: BURST }, async () => {
            const t0 = performance.now();
            const response = await fetch(`${server.url}/api/v1/users/me/`, { headers: { authorization } });
            await response.arrayBuffer();
            legit.push({ status: response.status, ms: performance.now() - t0, cold: round === 0 });
          }),
        );
      }
    });

    const guesses: { status: number; at: number }[] = [];
    let next = 0;
    const attacker = Array.from({ length: GUESS_CONCURRENCY }, async () => {
      while (next < GUESSES) {
        const i = next++;
        const response = await fetch(`${server.url}/api/v1/auth/token/`, {
          method: 'POST',
          headers: { 'content-type': FORM },
          body: new URLSearchParams({ username: 'victim', password: `guess-${i}` }).toString(),
        });
        await response.arrayBuffer();
        guesses.push({ status: response.status, at: Date.now() - started });
      }
    });
    await Promise.all([...clients, ...attacker]);

    const count = <T extends { status: number }>(list: T[], status: number) => list.filter((r) => r.status === status).length;
    const times = legit.map((r) => r.ms);
    const coldTimes = legit.filter((r) => r.cold).map((r) => r.ms);
    const lockedAt = guesses.find((g) => g.status === 429)?.at ?? null;
    // After the burst: the victim's right password is refused until the window ends, a busy user's is not.
    const victim = await fetch(`${server.url}/api/v1/users/me/`, { headers: { authorization: basic('victim', 'victim-password-1') } });
    const busy = await fetch(`${server.url}/api/v1/users/me/`, { headers: { authorization: basic('busy0', 'busy0-password-1') } });

    report('login-burst', {
      right_requests: legit.length,
      right_200: count(legit, 200),
      right_429: count(legit, 429),
      right_p50_ms: Math.round(percentile(times, 0.5)),
      right_p99_ms: Math.round(percentile(times, 0.99)),
      cold_burst_p99_ms: Math.round(percentile(coldTimes, 0.99)),
      guesses: guesses.length,
      guesses_401: count(guesses, 401),
      guesses_429: count(guesses, 429),
      locked_out_after_ms: lockedAt,
      victim_after: victim.status,
      busy_after: busy.status,
      run_s: ((Date.now() - started) / 1000).toFixed(1),
    });

    expect(count(legit, 200)).toBe(USERS * ROUNDS * BURST);
    expect(count(guesses, 401)).toBe(10);
    expect(count(guesses, 429)).toBe(GUESSES - 10);
    expect(victim.status).toBe(429);
    expect(busy.status).toBe(200);
  });
});
