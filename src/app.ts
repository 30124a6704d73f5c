import cors from '@fastify/cors';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import { createAuthentication } from './auth/authentication.js';
import { loadKeys, type Keys } from './auth/keys.js';
import { UserStore } from './auth/users.js';
import type { Config } from './config.js';
import type { Storage } from './db/database.js';
import { DatabaseOutage } from './db/outage.js';
import { registerBrowsableAssets } from './http/browsable/assets.js';
import { loginView } from './http/browsable/login-view.js';
import { logSetup, requestIds } from './http/logging.js';
import { ChangeFeed } from './db/change-feed.js';
import { StreamRegistry } from './http/event-stream.js';
import { createMetrics, type Metrics } from './http/metrics.js';
import { LiveChanges } from './resources/live/hub.js';
import { buildOpenApi } from './resources/openapi/document.js';
import { registerOperations } from './http/operations.js';
import { CursorCodec } from './http/pagination.js';
import { BODY_LIMIT } from './http/parsers.js';
import { createIdempotency } from './http/idempotency.js';
import { createPipeline } from './http/pipeline.js';
import { clientErrorHandler, createProblemHandler, frameworkErrorHandler, notFoundHandler } from './http/problem-handler.js';
import { securityHeaders } from './http/security-headers.js';
import { METHODS, type View } from './http/view.js';
import { apiKeysResource, keyScopes } from './resources/api-keys.js';
import { authViews } from './resources/auth-views.js';
import { batchView } from './resources/batch.js';
import { docsViews } from './resources/openapi/views.js';
import { buildRegistry, type Registry } from './resources/registry.js';
import type { QueryFilter } from './resources/filters.js';
import type { Resource } from './resources/resource.js';
import { rootView } from './resources/root.js';
import { withRoleChanges, withSignup } from './resources/users.js';
import { buildViewSet, type ViewSet } from './resources/viewset/index.js';
import type { RedisStore } from './http/throttling/redis-store.js';
import { RequestThrottle, memoryLimiter, type LimiterFactory } from './http/throttling/request-throttle.js';
import { VERSION } from './version.js';
import { eventCatalogView } from './webhooks/catalog.js';
import { deliveriesResource } from './webhooks/deliveries-log.js';
import { createQueueMetrics } from './webhooks/delivery-metrics.js';
import { assignRepositoryIds } from './webhooks/events.js';
import { changeLogListener } from './webhooks/change-log.js';
import { outboxListener } from './webhooks/outbox.js';
import { createSecretBox } from './webhooks/secrets.js';
import { webhooksResource } from './webhooks/subscriptions.js';

/** Everything a running server holds, for the CLI to start and stop. */
export interface App {
  readonly server: FastifyInstance;
  readonly config: Config;
  readonly storage: Storage;
  readonly keys: Keys;
  readonly users: UserStore;
  readonly metrics: Metrics;
  /** The process's one Redis connection when `REDIS_URL` is set (closed with the server). */
  readonly redis: RedisStore | null;
}

export interface AppOptions {
  /** Overrides the rate-limit store (the cluster's shared one under `serve --workers`). */
  readonly limiterFactory?: LimiterFactory;
  /**
   * Called after a commit that queued deliveries: wakes the dispatcher where it runs (`serve`'s
   * dispatcher process, a cluster's primary). Dispatchers elsewhere hear NOTIFY (PostgreSQL) or poll.
   */
  readonly onDeliveriesQueued?: () => void;
  /** The collections served (default: the seed's `experiences`, as with no resources folder). */
  readonly registry?: Registry;
}

const INFO_OR_FINER = new Set(['trace', 'debug', 'info']);

/** Whether LOG_LEVEL lets info lines through: Fastify's request logs and its "listening" line. */
export function logsInfo(config: Pick<Config, 'logLevel'>): boolean {
  return INFO_OR_FINER.has(config.logLevel);
}

function isPreflight(request: FastifyRequest): boolean {
  return request.headers.origin !== undefined && request.headers['access-control-request-method'] !== undefined;
}

/** Assembles the HTTP server: pipeline, resources, operations. Does not listen. */
export async function buildApp(config: Config, storage: Storage, options: AppOptions = {}): Promise<App> {
  const logging = await logSetup(config);
  const server = Fastify({
    logger: logging.options,
    ...(logging.logController ? { logController: logging.logController } : {}),
    genReqId: requestIds(),
    // A child logger per request cost more than the rest of Fastify's work on a small request
    // (issue #6). Request logs are at info, so below that level every request shares the
    // server's logger, and the error handler names the request id itself.
    ...(logsInfo(config) ? {} : { childLoggerFactory: (logger: FastifyBaseLogger) => logger }),
    trustProxy: config.trustProxy,
    bodyLimit: BODY_LIMIT,
    exposeHeadRoutes: false,
    return503OnClosing: true,
    // A client that trickles its headers or body (one byte every few seconds) is answered 408
    // and cut off after REQUEST_TIMEOUT_SECONDS, instead of holding a socket, and shutdown, for
    // ever (issue 11, finding 5). Node checks once per connectionsCheckingInterval.
    requestTimeout: config.requestTimeoutMs,
    http: { headersTimeout: Math.min(config.requestTimeoutMs, 60_000), connectionsCheckingInterval: 1_000 },
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
  });
  const keys = await loadKeys(storage.db, config.secretKey);
  const metrics = createMetrics();
  const userStore = new UserStore(storage.db);

  // Request and login limits count in Redis when REDIS_URL is set, shared by every process (issue #4).
  // Loaded only when configured: ioredis is a fifth of an idle process's memory (issue #6).
  const redis =
    config.redisUrl === null
      ? null
      : await (await import('./http/throttling/redis-store.js')).openRedisStore(config, { log: server.log, counters: metrics.rateLimitStore });
  if (redis) server.addHook('onClose', redis.close);
  const shared = options.limiterFactory ?? redis?.limiters ?? null;
  const auth = await createAuthentication({ config, storage, keys, users: userStore, limiterFactory: shared ?? memoryLimiter });
  // Without a shared store, requests are counted in this process's own windows (request-throttle.ts).
  const throttle = new RequestThrottle({ anon: config.rateLimitAnon, user: config.rateLimitUser }, shared);
  const secretBox = createSecretBox(keys.secretKey);
  // Stored responses are sealed as webhook secrets are: one may hold a secret shown once (REQUESTS.md §1).
  const idempotency = createIdempotency({ storage, sealer: secretBox, ttlMs: config.idempotencyTtlMs });
    // Live changes (issue 23): the open streams, and the one reader of the change log they share.
  const streams = new StreamRegistry({ maxPerCaller: config.streamMaxPerUser, metrics: metrics.streams });
  const feed = new ChangeFeed(storage, { onError: (error) => server.log.warn({ err: error }, 'could not read the change log; will try again') });
  await feed.start();
  const live = new LiveChanges(storage, feed, (error) => server.log.warn({ err: error }, 'could not judge a change for its streams'));
  // Streams end before the server drains, so they never hold up the deadline (STREAMS.md §4).
  server.addHook('preClose', async () => streams.closeAll());
  server.addHook('onClose', async () => feed.stop());
  const pipeline = createPipeline({ authenticators: auth.authenticators, throttle, idempotency, streams });

  server.decorateRequest('api', null);
  const outage = new DatabaseOutage(storage.ping, server.log);
  server.addHook('onClose', async () => outage.stop());
  server.setErrorHandler(createProblemHandler(outage));
  server.setNotFoundHandler(notFoundHandler);
  // Bodies are read as bytes here (with the 1 MiB limit) and decoded by the pipeline on first
  // use, so a bad body is judged after authentication, permission and throttling, as in DRF.
  server.removeAllContentTypeParsers();
  server.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  server.addHook('onRequest', securityHeaders);
  server.addHook('onResponse', metrics.recordRequest);
  if (config.corsOrigins.length > 0) {
    const any = config.corsOrigins.includes('*');
    const corsOptions = {
      origin: any ? '*' : [...config.corsOrigins],
      credentials: !any,
      methods: METHODS.filter((m) => m !== 'HEAD'),
      allowedHeaders: ['Authorization', 'Content-Type', 'Accept', 'If-Match', 'If-None-Match', 'X-CSRFToken'],
      exposedHeaders: ['ETag', 'Location', 'Link', 'Retry-After', 'X-Rate-Limit-Limit', 'X-Rate-Limit-Remaining', 'X-Rate-Limit-Reset', 'X-Change-Position'],
      maxAge: 600,
    };
    // Only a real preflight (Origin and Access-Control-Request-Method, Fetch §3.2.2) is answered
    // by CORS; a plain OPTIONS goes on to the pipeline for the metadata and Allow (API.md §6).
    await server.register(cors, {
      delegator: (request, callback) => callback(null, { ...corsOptions, preflight: isPreflight(request) }),
    });
  }
  server.addHook('onRequest', pipeline.onRequest);

  const cursors = new CursorCodec(keys.derive('cursor'));
  const wake = options.onDeliveriesQueued ?? (() => {});
  // The queue is in the database for this process to report; the dispatcher's own metrics are
  // the dispatcher process's (cli/dispatcher-process.ts).
  createQueueMetrics(metrics.registry, storage.db);
  // The registry drives everything below: routes, the root, events, related lists, OpenAPI.
  const registry = options.registry ?? buildRegistry(null);
  const repositoryIds = await assignRepositoryIds(storage, registry.collections);
  const viewSets = new Map<string, ViewSet>();
  // Webhook filters are read by the list filters of the collection's viewset (issue 14); filled
  // once the viewsets below are built.
  const eventFilters = new Map<string, readonly QueryFilter[]>();
  const filtersOf = (collection: string) => viewSets.get(collection)?.filters ?? [];
  // Every collection is a declaration served by the one viewset: the declared ones, `users`
  // (signup is its create, only while ALLOW_SIGNUP is on, API.md §6), and the webhooks and their
  // deliveries, declared beside the webhook pipeline with hooks saying what is special about them;
  // and the API keys, whose scopes name the others.
  const served: Resource[] = [
    ...registry.collections,
    withRoleChanges(config.allowSignup ? withSignup(registry.users) : registry.users, (userId) => auth.roles.forget(userId)),
    webhooksResource({ storage, secrets: secretBox, allowPrivate: config.webhookAllowPrivate, eventNames: registry.eventNames, eventFilters, wake }),
    deliveriesResource({ storage, wake }),
  ];
  const collections: Resource[] = [...served, apiKeysResource({ storage, apiKeys: auth.apiKeys, scopes: keyScopes(served) })];
  const viewSetOptions = {
    storage,
    cursors,
    // Only collections with an `event` raise one; the others' changes pass through the outbox untouched.
    // The change log (issue 23) beside the outbox: every change, in its own transaction.
    listeners: [outboxListener({ storage, publicUrl: config.publicUrl, wake, repositoryIds, filtersOf }), changeLogListener()],
    context: { form: false, publicUrl: config.publicUrl, collections: new Set(collections.map((resource) => resource.name)) },
    collections,
    viewSets,
    log: server.log,
    live,
    roles: auth.roles,
  };
  for (const resource of collections) viewSets.set(resource.name, buildViewSet(resource, viewSetOptions));
  for (const resource of registry.collections) if (resource.event) eventFilters.set(resource.event, filtersOf(resource.name));
  const views: View[] = [
    rootView([...registry.collections.map((resource) => resource.name), 'users', 'webhooks', 'keys', 'events']),
    ...collections.flatMap((resource) => viewSets.get(resource.name)!.views),
    ...authViews({ ...auth, users: userStore }),
    eventCatalogView(collections),
    loginView,
    // Its requests go to the collection and record views, through the same permit stage (REQUESTS.md §4).
    batchView({ storage, charge: pipeline.charge, views: () => [...viewSets.values()].flatMap((viewSet) => [viewSet.collection, viewSet.detail]) }),
  ];
  // API.md §5: generated on first request from the declarations and every view registered here.
  views.push(...docsViews(() => buildOpenApi({
        resources: collections,
        filters: new Map([...viewSets].map(([name, viewSet]) => [name, viewSet.filters])),
        views,
        version: VERSION,
      })));
  for (const view of views) {
    server.route({ method: [...METHODS], url: view.path, config: { view }, handler: pipeline.dispatch });
  }
  registerOperations(server, { storage, metrics });
  registerBrowsableAssets(server);

  return { server, config, storage, keys, users: userStore, metrics, redis };
}
