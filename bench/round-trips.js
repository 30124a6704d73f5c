// How many statements and round trips each request makes to PostgreSQL and Redis (issue 21):
// the figure the machine's load does not move. Starts `restwire serve` on a fresh database with
// bench/round-trips-probe.cjs preloaded, sends each request shape one at a time (a few times,
// the last one counted: the first may fill per-process caches), and prints what each sent.
// Round trips are the waits one after the other: statements sent before the answer to the one
// before (pipelined, or PostgreSQL and Redis at once) share one. The change feed's read after a
// commit is listed apart (the response does not wait for it).
//
//   BENCH_DATABASE_URL=postgres://… [BENCH_REDIS_URL=redis://…] node bench/round-trips.js [--sql] [--json]
//
// --sql lists each request's statements; --json prints the whole report as JSON.
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { GET_ONE, GET_PAGE, post } from './http-scenarios.js';
import { Processes } from './processes.js';
import { Receivers } from './receivers.js';
import { EXPERIENCE, basicAuth, bearerAuth, createWebhook, freshStore, restwireEnv, seedExperiences, startServe } from './restwire.js';

const PROBE = fileURLToPath(new URL('./round-trips-probe.cjs', import.meta.url));
const REPEAT = 3;

async function main() {
  const { values } = parseArgs({ options: { sql: { type: 'boolean', default: false }, json: { type: 'boolean', default: false } } });
  const databaseUrl = process.env.BENCH_DATABASE_URL;
  if (!databaseUrl) throw new Error('set BENCH_DATABASE_URL (round trips are counted on PostgreSQL)');
  const processes = new Processes();
  process.once('exit', () => processes.cleanUpNow());
  try {
    const store = await freshStore(processes, { databaseUrl, redisUrl: process.env.BENCH_REDIS_URL });
    const server = await startServe(processes, restwireEnv(store), 'restwire serve', ['serve'], ['--require', PROBE]);
    const bearer = (await bearerAuth(server)).authorization;
    await seedExperiences(server, bearer, 3);
    const send = async ({ path, method = 'GET', headers = {}, body }) => {
      const response = await fetch(`${server.url}${path}`, { method, headers: { accept: 'application/json', ...headers }, body });
      await response.arrayBuffer();
      return response.status;
    };
    const drain = async () => (await (await fetch(`${server.url}/__round_trips`)).json());
    let keys = 0;
    const withKey = (request) => ({ ...request, headers: { ...request.headers, 'idempotency-key': `round-trips-${process.pid}-${++keys}` } });
    const batchOf = (count) => ({
      path: '/api/v1/batch/',
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: bearer },
      body: JSON.stringify({ requests: Array.from({ length: count }, () => ({ method: 'POST', path: '/api/v1/experiences/', body: EXPERIENCE })) }),
    });
    const shapes = [
      ['GET one, anonymous', () => GET_ONE],
      ['GET one, Bearer', () => ({ ...GET_ONE, headers: { authorization: bearer } })],
      ['GET page of 100, anonymous', () => GET_PAGE],
      ['POST create, Bearer', () => post(bearer)],
      ['POST create, Basic', () => post(basicAuth)],
      ['POST create, Bearer, Idempotency-Key', () => withKey(post(bearer))],
      ['PATCH, Bearer', () => ({ path: '/api/v1/experiences/1/', method: 'PATCH', headers: { 'content-type': 'application/json', authorization: bearer }, body: JSON.stringify({ title: `Patched ${Math.random()}` }) })],
      ['POST batch of 2 creates, Bearer', () => batchOf(2)],
    ];
    const results = [];
    const run = async (name, make) => {
      await drain();
      for (let i = 0; i < REPEAT; i += 1) await send(make());
      const { requests } = await drain();
      const last = requests.at(-1);
      results.push({ name, ...last });
    };
    for (const [name, make] of shapes) await run(name, make);
    const receivers = await Receivers.start(processes, 1);
    try {
      await createWebhook(server, bearer, receivers.url(0));
      await run('POST create, Bearer, 1 webhook', () => post(bearer));
      await run('POST create, Bearer, Idempotency-Key, 1 webhook', () => withKey(post(bearer)));
    } finally {
      await receivers.stop();
    }
    await server.stop();
    if (values.json) {
      console.log(JSON.stringify(results, null, 2));
      return;
    }
    console.log(`restwire on PostgreSQL${store.redisUrl ? ' + Redis' : ''}: statements and round trips per request (the last of ${REPEAT} alike)\n`);
    console.log('| request | status | PostgreSQL statements | Redis commands | round trips | change feed reads after it |');
    console.log('|---|---|---|---|---|---|');
    for (const r of results) console.log(`| ${r.name} | ${r.status} | ${r.statements.pg} | ${r.statements.redis} | ${r.roundTrips} | ${r.statements.feed} |`);
    if (values.sql) {
      for (const r of results) {
        console.log(`\n${r.name} (${r.method} ${r.url} → ${r.status}):`);
        for (const call of r.calls) console.log(`  ${call}`);
      }
    }
  } finally {
    await processes.cleanUp();
  }
}

main().catch((error) => {
  console.error(`round-trips: ${error.stack ?? error}`);
  process.exitCode = 1;
});
