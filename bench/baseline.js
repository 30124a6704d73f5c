// The bar restwire is measured against (issue #6): bare Fastify answering the same shapes as
// restwire's experiences endpoints, from memory. No plugins, no logger, no schemas, no auth,
// no database: what an idiomatic minimal Fastify app does for one record, a page of 100 and a
// POST that parses JSON and echoes a created record.
//
// Run as a child of bench/run.js: HOST/PORT from the environment (PORT=0 picks a free port);
// prints "Server listening at http://HOST:PORT" once listening; exits on SIGTERM/SIGINT.
import Fastify from 'fastify';

const RECORDS = Number(process.env.BASELINE_RECORDS ?? 150);
const created = new Date('2026-01-01T00:00:00.000Z').getTime();

/** One experience as restwire renders it (API.md §2). */
function record(id) {
  const at = new Date(created + id * 1000).toISOString();
  return {
    url: `/api/v1/experiences/${id}/`,
    id,
    title: `Benchmark experience ${id}`,
    q_like_dislike: `Liked the benchmark, record number ${id}.\nIt was fine.`,
    owner: '/api/v1/users/1/',
    created_at: at,
    updated_at: at,
  };
}

const records = new Map();
for (let id = 1; id <= RECORDS; id++) records.set(id, record(id));
// Newest first, as restwire's default ordering `-id` (API.md §2).
const newestFirst = [...records.values()].reverse();

const app = Fastify({ logger: false });

app.get('/api/v1/experiences/:id/', async (request, reply) => {
  const found = records.get(Number(request.params.id));
  if (!found) return reply.code(404).send({ detail: 'Not found.' });
  return found;
});

app.get('/api/v1/experiences/', async (request, reply) => {
  const limit = Math.min(Math.max(Number(request.query.limit ?? 20) || 20, 1), 100);
  const results = newestFirst.slice(0, limit);
  // An opaque cursor of the same length class as restwire's, so the body size matches.
  const last = results.at(-1);
  const next = limit < newestFirst.length && last
    ? `/api/v1/experiences/?limit=${limit}&cursor=${Buffer.from(JSON.stringify({ o: '-id', v: last.id, i: last.id })).toString('base64url')}`
    : null;
  if (next) reply.header('link', `<${next}>; rel="next"`);
  return { next, previous: null, results };
});

let nextId = RECORDS + 1;
app.post('/api/v1/experiences/', async (request, reply) => {
  const body = request.body ?? {};
  const id = nextId++;
  const at = new Date().toISOString();
  const echoed = {
    url: `/api/v1/experiences/${id}/`,
    id,
    title: String(body.title ?? ''),
    q_like_dislike: String(body.q_like_dislike ?? ''),
    owner: '/api/v1/users/1/',
    created_at: at,
    updated_at: at,
  };
  return reply.code(201).header('location', echoed.url).send(echoed);
});

const address = await app.listen({ host: process.env.HOST ?? '127.0.0.1', port: Number(process.env.PORT ?? 0) });
process.stdout.write(`Server listening at ${address}\n`);

const stop = () => void app.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
