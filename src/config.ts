import { resolve } from 'node:path';

/** The default WEBHOOK_RETRY_SCHEDULE, in seconds: nine retries over about two days. */
export const DEFAULT_RETRY_SCHEDULE: readonly number[] = Object.freeze([
  10, 60, 300, 1800, 3600, 10800, 21600, 43200, 86400,
]);

/**
 * Parses a comma-separated list of whole seconds (`"10, 60,300"`); an empty or blank string is
 * no retries. Throws an Error naming the bad entry for anything else.
 */
export function parseRetrySchedule(text: string): readonly number[] {
  if (typeof text !== 'string') throw new Error('retry schedule must be a string of comma-separated seconds');
  if (text.trim() === '') return Object.freeze([]);
  const delays = text.split(',').map((entry, index) => {
    const trimmed = entry.trim();
    const seconds = Number(trimmed);
    if (!/^\d+$/.test(trimmed) || !Number.isSafeInteger(seconds)) {
      throw new Error(
        `retry schedule must be comma-separated whole seconds, e.g. "10,60,300"; entry ${index + 1} (${JSON.stringify(entry)}) is not`,
      );
    }
    return seconds;
  });
  return Object.freeze(delays);
}

/** A rate as `N/second|minute|hour|day` (API.md §0). */
export interface Rate {
  readonly limit: number;
  readonly windowSeconds: number;
  readonly text: string;
}

/** The validated, frozen configuration. Nothing outside this module reads `process.env`. */
export interface Config {
  readonly host: string;
  readonly port: number;
  readonly publicUrl: string;
  readonly dataDir: string;
  readonly databaseUrl: string | null;
  readonly redisUrl: string | null;
  /** Namespaces every Redis key, so deployments (and test runs) sharing one Redis do not collide. */
  readonly redisKeyPrefix: string;
  readonly secretKey: string | null;
  readonly adminUsername: string | null;
  readonly adminPassword: string | null;
  readonly allowSignup: boolean;
  readonly trustProxy: boolean;
  readonly corsOrigins: readonly string[];
  readonly rateLimitAnon: Rate;
  readonly rateLimitUser: Rate;
  readonly webhookAllowPrivate: boolean;
  readonly webhookRetrySchedule: readonly number[];
  /** Whole-attempt timeout for a delivery (API.md §4: 10 s). */
  readonly webhookTimeoutMs: number;
  /** Delivered and failed deliveries older than this are deleted (DELIVERY_RETENTION_DAYS, 30). */
  readonly deliveryRetentionMs: number;
  /** How often the dispatcher prunes the delivery log (DELIVERY_PRUNE_INTERVAL_SECONDS, 300). */
  readonly deliveryPruneIntervalMs: number;
  /** How long a response stored under an Idempotency-Key is replayed (IDEMPOTENCY_TTL_HOURS, 24; REQUESTS.md §1). */
  readonly idempotencyTtlMs: number;
  /** Changes are kept this long for streams to resume from (CHANGE_RETENTION_HOURS, 24; fractions allowed; STREAMS.md §3). */
  readonly changeRetentionMs: number;
  /** Open event streams per user (per client IP for anonymous callers) in each process (STREAM_MAX_PER_USER, 20; STREAMS.md §1). */
  readonly streamMaxPerUser: number;
  readonly accessTokenSeconds: number;
  readonly refreshTokenSeconds: number;
  readonly sessionIdleSeconds: number;
  readonly sessionAbsoluteSeconds: number;
  readonly logLevel: string;
  readonly dispatcherInServe: boolean;
  /** Time a client has to send a whole request, headers and body (Node's requestTimeout). */
  readonly requestTimeoutMs: number;
  /** On SIGTERM, how long in-flight requests may finish before their connections are closed. */
  readonly drainTimeoutMs: number;
  /** The folder of the user's declarations (RESOURCES.md §1); `./resources` unless given. */
  readonly resourcesDir: string;
  /** Whether RESOURCES_DIR (or --resources) named it: a named folder must exist. */
  readonly resourcesDirGiven: boolean;
  /** The folder of the user's migration files (`./migrations` unless given). */
  readonly migrationsDir: string;
}

/** Folders a command line may name, winning over the environment (RESOURCES.md §1). */
export interface FolderOptions {
  readonly resources?: string;
  readonly migrations?: string;
}

/** What `serve --host/--port` may name, winning over HOST and PORT (as Django's `runserver ADDR:PORT`). */
export interface ListenOptions {
  readonly host?: string;
  readonly port?: number;
}

/**
 * Every variable loadConfig reads, with what it sets, for `restwire --help`. A test keeps this
 * list and loadConfig in step.
 */
export const ENVIRONMENT: ReadonlyArray<readonly [name: string, meaning: string]> = Object.freeze([
  ['HOST, PORT', 'where serve listens (default 127.0.0.1, 8000; --host/--port win)'],
  ['PUBLIC_URL', 'the URL clients reach the server at, for absolute URLs and cookies (default http://HOST:PORT)'],
  ['DATA_DIR', 'folder of the SQLite file restwire.sqlite3 (default ./data)'],
  ['DATABASE_URL', 'postgres://… to use PostgreSQL instead of SQLite'],
  ['REDIS_URL, REDIS_KEY_PREFIX', 'share rate limits across processes in Redis (prefix default restwire)'],
  ['SECRET_KEY', 'signs tokens and cursors, encrypts webhook secrets (≥ 32 characters; default generated and stored)'],
  ['ADMIN_USERNAME, ADMIN_PASSWORD', 'the first user (default admin and a printed random password)'],
  ['ALLOW_SIGNUP', 'POST /api/v1/users/ creates accounts (default false)'],
  ['ACCESS_TOKEN_SECONDS, REFRESH_TOKEN_SECONDS', 'token lifetimes (default 900, 1209600)'],
  ['SESSION_IDLE_SECONDS, SESSION_ABSOLUTE_SECONDS', 'session lifetimes (default 7200, 1209600)'],
  ['RATE_LIMIT_ANON, RATE_LIMIT_USER', 'N/second|minute|hour|day (default 60/hour, 5000/hour)'],
  ['TRUST_PROXY', 'believe X-Forwarded-For and X-Forwarded-Proto (default false)'],
  ['CORS_ORIGINS', 'comma-separated origins allowed by CORS, or *'],
  ['LOG_LEVEL', 'trace, debug, info, warn, error or fatal (default info)'],
  ['WEBHOOK_ALLOW_PRIVATE', 'allow webhook targets on loopback and private networks (default false)'],
  ['WEBHOOK_RETRY_SCHEDULE', 'seconds between delivery retries (default 10,60,300,…,86400)'],
  ['WEBHOOK_TIMEOUT_SECONDS', 'time allowed for one delivery attempt (default 10)'],
  ['DELIVERY_RETENTION_DAYS, DELIVERY_PRUNE_INTERVAL_SECONDS', 'how long the delivery log keeps finished deliveries, how often it prunes (default 30, 300)'],
  ['IDEMPOTENCY_TTL_HOURS', 'how long an answer stored under an Idempotency-Key is replayed (default 24)'],
  ['CHANGE_RETENTION_HOURS', 'how long changes are kept for event streams to resume from (default 24; fractions allowed)'],
  ['STREAM_MAX_PER_USER', 'open event streams per user (per IP when anonymous) in each process (default 20)'],
  ['DISPATCHER_IN_SERVE', 'deliver webhooks from serve, in a dispatcher process of its own (default true; false when running worker)'],
  ['REQUEST_TIMEOUT_SECONDS', 'time a client has to send a whole request (default 30)'],
  ['DRAIN_TIMEOUT_SECONDS', 'on SIGTERM, how long in-flight requests may finish (default 10)'],
  ['RESOURCES_DIR, MIGRATIONS_DIR', 'your declarations and migrations (default ./resources, ./migrations; --resources/--migrations win)'],
]);

/** Thrown when an environment variable has a value restwire cannot use; the message names it. */
export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
}

const WINDOWS: Record<string, number> = { second: 1, minute: 60, hour: 3600, day: 86_400 };

/** Parses `N/unit` (API.md §0), e.g. `60/hour`. */
export function parseRate(variable: string, text: string): Rate {
  const match = /^\s*(\d+)\s*\/\s*(second|minute|hour|day)\s*$/.exec(text);
  if (!match) throw new ConfigError(variable, `expected N/second|minute|hour|day, got ${JSON.stringify(text)}`);
  const limit = Number(match[1]);
  if (!Number.isSafeInteger(limit) || limit < 1) throw new ConfigError(variable, 'the limit must be at least 1');
  return Object.freeze({ limit, windowSeconds: WINDOWS[match[2]!]!, text: text.trim() });
}

/** Reads the environment once into a frozen Config, failing fast with a message that names the variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, folders: FolderOptions & ListenOptions = {}): Config {
  const read = (name: string): string | undefined => {
    const value = env[name];
    return value === undefined || value === '' ? undefined : value;
  };
  const bool = (name: string, fallback: boolean): boolean => {
    const value = read(name);
    if (value === undefined) return fallback;
    if (/^(1|true|yes|on)$/i.test(value)) return true;
    if (/^(0|false|no|off)$/i.test(value)) return false;
    throw new ConfigError(name, `expected true or false, got ${JSON.stringify(value)}`);
  };
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const value = read(name);
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!/^\d+$/.test(value) || n < min || n > max) {
      throw new ConfigError(name, `expected a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`);
    }
    return n;
  };
  /** A decimal number of hours, e.g. `0.5`. */
  const hours = (name: string, fallback: number, min: number, max: number): number => {
    const value = read(name);
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!/^\d+(\.\d+)?$/.test(value) || n < min || n > max) {
      throw new ConfigError(name, `expected a number of hours from ${min} to ${max}, got ${JSON.stringify(value)}`);
    }
    return n;
  };

  const host = folders.host ?? read('HOST') ?? '127.0.0.1';
  const port = folders.port ?? int('PORT', 8000, 0, 65_535);
  const publicUrl = (read('PUBLIC_URL') ?? `http://${host.includes(':') ? `[${host}]` : host}:${port}`).replace(/\/+$/, '');
  try {
    const url = new URL(publicUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('scheme');
  } catch {
    throw new ConfigError('PUBLIC_URL', `expected an http(s) URL, got ${JSON.stringify(publicUrl)}`);
  }

  const databaseUrl = read('DATABASE_URL') ?? null;
  if (databaseUrl !== null && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL', 'only postgres:// URLs are supported (leave it unset for embedded SQLite)');
  }
  const redisUrl = read('REDIS_URL') ?? null;
  if (redisUrl !== null && !/^rediss?:\/\//.test(redisUrl)) {
    throw new ConfigError('REDIS_URL', 'expected a redis:// or rediss:// URL');
  }
  const redisKeyPrefix = read('REDIS_KEY_PREFIX') ?? 'restwire';
  if (!/^[A-Za-z0-9._:-]{1,64}$/.test(redisKeyPrefix)) {
    throw new ConfigError('REDIS_KEY_PREFIX', `expected 1-64 letters, digits, '.', '_', ':' or '-', got ${JSON.stringify(redisKeyPrefix)}`);
  }
  const secretKey = read('SECRET_KEY') ?? null;
  if (secretKey !== null && secretKey.length < 32) {
    throw new ConfigError('SECRET_KEY', 'must be at least 32 characters (leave it unset to generate one)');
  }

  let webhookRetrySchedule = DEFAULT_RETRY_SCHEDULE;
  const schedule = read('WEBHOOK_RETRY_SCHEDULE');
  if (schedule !== undefined) {
    try {
      webhookRetrySchedule = parseRetrySchedule(schedule);
    } catch (error) {
      throw new ConfigError('WEBHOOK_RETRY_SCHEDULE', (error as Error).message);
    }
  }

  const adminUsername = read('ADMIN_USERNAME') ?? null;
  const adminPassword = read('ADMIN_PASSWORD') ?? null;
  if ((adminUsername === null) !== (adminPassword === null)) {
    throw new ConfigError(adminUsername === null ? 'ADMIN_USERNAME' : 'ADMIN_PASSWORD', 'set ADMIN_USERNAME and ADMIN_PASSWORD together');
  }

  const cors = read('CORS_ORIGINS');
  const corsOrigins = cors === undefined ? [] : cors.split(',').map((origin) => origin.trim()).filter(Boolean);
  for (const origin of corsOrigins) {
    if (origin !== '*' && !/^https?:\/\/[^/\s]+$/.test(origin)) {
      throw new ConfigError('CORS_ORIGINS', `expected exact origins like https://app.example.com, got ${JSON.stringify(origin)}`);
    }
  }

  return Object.freeze({
    host,
    port,
    publicUrl,
    dataDir: resolve(read('DATA_DIR') ?? './data'),
    databaseUrl,
    redisUrl,
    redisKeyPrefix,
    secretKey,
    adminUsername,
    adminPassword,
    allowSignup: bool('ALLOW_SIGNUP', false),
    trustProxy: bool('TRUST_PROXY', false),
    corsOrigins: Object.freeze(corsOrigins),
    rateLimitAnon: parseRate('RATE_LIMIT_ANON', read('RATE_LIMIT_ANON') ?? '60/hour'),
    rateLimitUser: parseRate('RATE_LIMIT_USER', read('RATE_LIMIT_USER') ?? '5000/hour'),
    webhookAllowPrivate: bool('WEBHOOK_ALLOW_PRIVATE', false),
    webhookRetrySchedule,
    webhookTimeoutMs: int('WEBHOOK_TIMEOUT_SECONDS', 10, 1, 60) * 1000,
    deliveryRetentionMs: int('DELIVERY_RETENTION_DAYS', 30, 1, 3650) * 86_400_000,
    deliveryPruneIntervalMs: int('DELIVERY_PRUNE_INTERVAL_SECONDS', 300, 1, 86_400) * 1000,
    idempotencyTtlMs: int('IDEMPOTENCY_TTL_HOURS', 24, 1, 24 * 365) * 3_600_000,
    changeRetentionMs: Math.round(hours('CHANGE_RETENTION_HOURS', 24, 0.0001, 87_600) * 3_600_000),
    streamMaxPerUser: int('STREAM_MAX_PER_USER', 20, 1, 100_000),
    accessTokenSeconds: int('ACCESS_TOKEN_SECONDS', 900, 1, 86_400),
    refreshTokenSeconds: int('REFRESH_TOKEN_SECONDS', 14 * 86_400, 60, 365 * 86_400),
    sessionIdleSeconds: int('SESSION_IDLE_SECONDS', 2 * 3600, 60, 365 * 86_400),
    sessionAbsoluteSeconds: int('SESSION_ABSOLUTE_SECONDS', 14 * 86_400, 60, 365 * 86_400),
    logLevel: read('LOG_LEVEL') ?? 'info',
    dispatcherInServe: bool('DISPATCHER_IN_SERVE', true),
    requestTimeoutMs: int('REQUEST_TIMEOUT_SECONDS', 30, 1, 3600) * 1000,
    drainTimeoutMs: int('DRAIN_TIMEOUT_SECONDS', 10, 1, 600) * 1000,
    resourcesDir: resolve(folders.resources ?? read('RESOURCES_DIR') ?? './resources'),
    resourcesDirGiven: (folders.resources ?? read('RESOURCES_DIR')) !== undefined,
    migrationsDir: resolve(folders.migrations ?? read('MIGRATIONS_DIR') ?? './migrations'),
  });
}
