// The floor of `npm run bench:streams` (bench/streams.js): bare `node:http` holding Server-Sent
// Event streams and writing the same messages restwire writes, to the same number of clients.
// GET /stream opens one (the same response headers restwire sends); POST /publish answers 201
// and then writes one `created` message, shaped and sized as restwire's for an experience, to
// every open stream in one loop. No database, no rules, no framework: what fanning a message out
// over HTTP costs on this machine.
import http from 'node:http';

const port = Number(process.env.PORT);
const host = process.env.HOST ?? '127.0.0.1';
const open = new Set();
let position = 0;

function publish(body, response) {
  const id = ++position;
  const at = new Date().toISOString();
  const record = { url: `/api/v1/experiences/${id}/`, id, title: body.title, q_like_dislike: body.q_like_dislike, owner: '/api/v1/users/1/', created_at: at, updated_at: at };
  const json = JSON.stringify(record);
  response.writeHead(201, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(json), location: record.url });
  response.end(json);
  const message = `id: ${id}\nevent: created\ndata: ${JSON.stringify({ action: 'created', record })}\n\n`;
  for (const stream of open) stream.write(message);
}

const server = http.createServer((request, response) => {
  if (request.method === 'GET' && request.url === '/healthz') {
    response.end('ok');
    return;
  }
  if (request.method === 'GET' && request.url.startsWith('/stream')) {
    response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
    response.flushHeaders();
    request.socket.setNoDelay(true);
    open.add(response);
    response.on('close', () => open.delete(response));
    return;
  }
  if (request.method === 'POST' && request.url === '/publish') {
    let text = '';
    request.setEncoding('utf8');
    request.on('data', (chunk) => (text += chunk));
    request.on('end', () => publish(JSON.parse(text), response));
    return;
  }
  response.writeHead(404).end();
});
server.keepAliveTimeout = 72_000;
server.listen(port, host, () => process.stdout.write(`Server listening at http://${host}:${port}\n`));
process.on('SIGTERM', () => {
  for (const stream of open) stream.destroy();
  server.close(() => process.exit(0));
});
