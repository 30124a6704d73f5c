/**
 * Rendered GET responses, reused while the data they were made from is unchanged (issue #6).
 *
 * A page of 100 records cost a 101-row read, a hundred objects, 30 KB of JSON and its SHA-1 on
 * every request, for a collection that is read far more often than written. An action opts in
 * with `Action.version` (see `view.ts`): a token that changes whenever anything the response
 * could depend on may have changed. The pipeline asks for the token before the action reads, so a
 * cached response is never older than the token it is filed under.
 *
 * All entries share one token (the storage's data version is database-wide): when it moves, the
 * whole cache is dropped. Entries are bounded by count, each by size and all by total size,
 * oldest out first.
 */
export interface CachedRepresentation {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[]>> | undefined;
  /** Null when the response has no body (204). */
  readonly contentType: string | null;
  readonly text: string | null;
  readonly etag: string | null;
}

export interface RepresentationCacheOptions {
  /** Most entries kept (default 32). */
  readonly maxEntries?: number;
  /** Largest text kept, in UTF-16 units (default 128 Ki, a full page of long records): bigger ones are not cached. */
  readonly maxLength?: number;
  /** Most text kept in all, in UTF-16 units (default: no bound but the count). */
  readonly maxTotalLength?: number;
}

export class RepresentationCache {
  readonly #maxEntries: number;
  readonly #maxLength: number;
  readonly #maxTotalLength: number;
  #totalLength = 0;
  #version: string | null = null;
  /** The token the latest `get` was asked with: the newest this cache knows of. */
  #latest: string | null = null;
  #entries = new Map<string, CachedRepresentation>();

  constructor({ maxEntries = 32, maxLength = 128 * 1024, maxTotalLength = Infinity }: RepresentationCacheOptions = {}) {
    this.#maxEntries = maxEntries;
    this.#maxLength = maxLength;
    this.#maxTotalLength = maxTotalLength;
  }

  /** The response filed under `key` at this `version`, if any. */
  get(version: string, key: string): CachedRepresentation | undefined {
    this.#latest = version;
    return version === this.#version ? this.#entries.get(key) : undefined;
  }

  set(version: string, key: string, entry: CachedRepresentation): void {
    // A slow response rendered under an older token than a request since has seen would only
    // push out newer entries.
    if (version !== this.#latest) return;
    if (entry.text === null || entry.text.length > this.#maxLength) return;
    if (version !== this.#version) {
      this.#version = version;
      this.#entries = new Map();
      this.#totalLength = 0;
    }
    this.#delete(key);
    while (this.#entries.size > 0 && (this.#entries.size >= this.#maxEntries || this.#totalLength + entry.text.length > this.#maxTotalLength)) {
      this.#delete(this.#entries.keys().next().value!);
    }
    this.#entries.set(key, entry);
    this.#totalLength += entry.text.length;
  }

  #delete(key: string): void {
    const entry = this.#entries.get(key);
    if (entry === undefined) return;
    this.#entries.delete(key);
    this.#totalLength -= entry.text?.length ?? 0;
  }
}

export interface ReuseTrackerOptions {
  /** Lookups counted before an action's reuse is judged (default 100). */
  readonly window?: number;
  /** The share of a window's lookups that must have been answered from the cache (default a quarter). */
  readonly minShare?: number;
  /** How long an action that fell below it reads afresh, without the token (default 1 s). */
  readonly pauseMs?: number;
}

/**
 * Whether asking for the version token still pays, per action (issue 21). The token costs a
 * statement, on PostgreSQL a round trip, and a cached response is only reused while no data
 * changes: under steady writes, a GET of records chosen at random missed nearly every time and
 * paid two round trips instead of one (40 readers of 100 records beside 10 writers: 6,106 GETs/s
 * without the token, 3,977-4,275 with it). An action's lookups are counted in windows; one whose
 * window found less than `minShare` in the cache reads afresh for `pauseMs`, then is tried again.
 * Skipping the token never changes an answer, only what it costs.
 */
export class ReuseTracker<Action extends object> {
  readonly #window: number;
  readonly #minShare: number;
  readonly #pauseMs: number;
  readonly #actions = new WeakMap<Action, { lookups: number; hits: number; pausedUntil: number }>();

  constructor({ window = 100, minShare = 0.25, pauseMs = 1_000 }: ReuseTrackerOptions = {}) {
    this.#window = window;
    this.#minShare = minShare;
    this.#pauseMs = pauseMs;
  }

  /** Whether `action`'s responses are worth looking for in the cache now. */
  worthAsking(action: Action, now = Date.now()): boolean {
    const stats = this.#actions.get(action);
    return stats === undefined || stats.pausedUntil <= now;
  }

  /** Counts a lookup of `action`'s response: found in the cache (`hit`) or not. */
  record(action: Action, hit: boolean, now = Date.now()): void {
    let stats = this.#actions.get(action);
    if (stats === undefined) this.#actions.set(action, (stats = { lookups: 0, hits: 0, pausedUntil: 0 }));
    stats.lookups++;
    if (hit) stats.hits++;
    if (stats.lookups < this.#window) return;
    if (stats.hits < this.#minShare * stats.lookups) stats.pausedUntil = now + this.#pauseMs;
    stats.lookups = 0;
    stats.hits = 0;
  }
}
