// Preloaded into `restwire serve` by bench/round-trips.js (`node --require`): counts what each
// HTTP request sends to PostgreSQL and Redis. Every pg `Client#query` and every ioredis command
// issued while a request is being handled (its async context, AsyncLocalStorage) is filed under
// that request, with when it was sent and when it was answered, so queries sent before the
// previous one's answer (pipelined) show as one round trip. `GET /__round_trips` (answered here,
// never by restwire) returns the requests filed since the last such call and forgets them.
// Measurement only: never loaded by restwire itself.
'use strict';
const { AsyncLocalStorage } = require('node:async_hooks');
const http = require('node:http');
const pg = require('pg');
const { Redis } = require('ioredis');

const current = new AsyncLocalStorage();
/** Requests since the last report: { method, url, status, calls: [{ kind, text, sent, answered }] }. */
let requests = [];
/** Calls issued outside any request (the change feed, the dispatcher, start-up). */
let background = 0;

function file(kind, text, promise) {
  const request = current.getStore();
  if (!request) {
    background += 1;
    return promise;
  }
  const call = { kind, text: String(text).replace(/\s+/g, ' ').trim().slice(0, 160), sent: process.hrtime.bigint(), answered: null };
  request.calls.push(call);
  const done = () => (call.answered = process.hrtime.bigint());
  if (promise && typeof promise.then === 'function') promise.then(done, done);
  return promise;
}

const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (config, values, callback) {
  const text = typeof config === 'string' ? config : (config && config.text) || '?';
  // Kysely passes (sql, parameters) and awaits the promise; a callback form is answered by the callback.
  if (typeof values === 'function' || typeof callback === 'function') {
    const request = current.getStore();
    if (request) {
      const call = { kind: 'pg', text: String(text).replace(/\s+/g, ' ').trim().slice(0, 160), sent: process.hrtime.bigint(), answered: null };
      request.calls.push(call);
      const wrap = (cb) => (...args) => ((call.answered = process.hrtime.bigint()), cb(...args));
      if (typeof values === 'function') return query.call(this, config, wrap(values));
      return query.call(this, config, values, wrap(callback));
    }
    background += 1;
    return query.call(this, config, values, callback);
  }
  return file('pg', text, query.call(this, config, values, callback));
};

const sendCommand = Redis.prototype.sendCommand;
Redis.prototype.sendCommand = function (command, stream) {
  const result = sendCommand.call(this, command, stream);
  file('redis', command && command.name, command && command.promise);
  return result;
};

const emit = http.Server.prototype.emit;
http.Server.prototype.emit = function (event, request, response) {
  if (event !== 'request') return emit.apply(this, arguments);
  if (request.url === '/__round_trips') {
    const body = JSON.stringify({ requests: requests.map(report), background });
    requests = [];
    background = 0;
    response.writeHead(200, { 'content-type': 'application/json' }).end(body);
    return true;
  }
  const filed = { method: request.method, url: request.url, status: null, calls: [] };
  requests.push(filed);
  response.once('finish', () => (filed.status = response.statusCode));
  const args = arguments;
  return current.run(filed, () => emit.apply(this, args));
};

/**
 * The change feed's read (db/change-feed.ts), woken by this process's commit in the request's
 * async context but not on the request's path: the response does not wait for it, and one read
 * serves every change committed meanwhile. Counted apart.
 */
const FEED_READ = /^select \* from "change_log" where "position" > /;

/** A request's calls, and its round trips: a call sent before the previous one was answered joins its trip. */
function report({ method, url, status, calls }) {
  let trips = 0;
  let lastAnswer = null;
  const byKind = { pg: 0, redis: 0, feed: 0 };
  for (const call of calls) {
    if (call.kind === 'pg' && FEED_READ.test(call.text)) {
      byKind.feed += 1;
      continue;
    }
    if (lastAnswer === null || call.sent >= lastAnswer) trips += 1;
    // A call still unanswered when the report is made counts as answered now.
    const answered = call.answered ?? process.hrtime.bigint();
    lastAnswer = lastAnswer === null || answered > lastAnswer ? answered : lastAnswer;
    byKind[call.kind] += 1;
  }
  return { method, url, status, statements: byKind, roundTrips: trips, calls: calls.map(({ kind, text }) => `${kind}: ${text}`) };
}
