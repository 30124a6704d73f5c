import type { CompiledQuery } from 'kysely';
import type { ChangeFeed } from '../../db/change-feed.js';
import { overStoredRow, readChanges, type LoggedChange } from '../../db/change-log.js';
import type { Storage } from '../../db/database.js';
import type { EventSink } from '../../http/event-stream.js';

// The process's open streams and the one feed they share (issue 23, STREAMS.md §2–§4). The feed
// (db/change-feed.ts) hands over committed changes in position order; the hub judges each change
// once per distinct condition among the streams of its collection (a stream's read rule and scope,
// and its list filters, each one compiled query run against the change's stored row), then gives
// every stream its message, in order. A stream that starts behind the hub (`since`,
// `Last-Event-ID`) first reads the log itself, then joins the hub between two changes. While no
// stream is open the hub wants no changes, and the feed only moves its position (db/change-feed.ts).

/** A condition a stream judges changes by: a compiled `SELECT id FROM <table> WHERE …`. */
export interface Check {
  /** Equal keys: equal queries, judged once per change. */
  readonly key: string;
  readonly table: string;
  readonly query: CompiledQuery;
}

/** How one stream stands towards one change. */
export interface Standing {
  /** The record could be read, and matched the filters, before the change (false for `created`). */
  readonly before: { readonly readable: boolean; readonly matched: boolean };
  /** After it (false for `deleted`). */
  readonly after: { readonly readable: boolean; readonly matched: boolean };
}

/** How a stream's caller reads, for the roles they have at one time. */
export interface Reader {
  /** What the caller may read (scope and read rule); null: every record. */
  readonly readCheck: Check | null;
  /** The message for a change the stream concerns itself with, or null for none. */
  message(change: LoggedChange, standing: Standing): Promise<{ event: string; data: string } | null>;
}

/** One open stream, as the viewset builds it (resources/viewset/stream.ts). */
export interface Subscription {
  readonly collection: string;
  /** A record stream's record; null for a list stream. */
  readonly recordId: number | null;
  /** The list's filters and search; null: none. */
  readonly filterCheck: Check | null;
  /**
   * The caller's reader as each change is judged: rules apply with their roles at the time of the
   * change (STREAMS.md §2), as the process knows them. Cheap: no query unless their roles are due
   * to be read again.
   */
  reader(): Promise<Reader>;
  readonly sink: EventSink;
}

interface Follower {
  readonly subscription: Subscription;
  /** The last position this stream has been given or skipped. */
  cursor: number;
}

type Verdicts = Map<string, Promise<boolean>>;

/** Positions up to `through` that the feed skipped, in the queue between the changes. */
interface Skip {
  readonly through: number;
}

/** Reads per query while a stream catches up. */
const CATCH_UP_BATCH = 500;

export class LiveChanges {
  readonly #storage: Storage;
  readonly #feed: ChangeFeed;
  /** Live streams by collection: in step with the hub. */
  readonly #live = new Map<string, Set<Follower>>();
  /** Streams waiting to join between two changes. */
  readonly #joining = new Set<Follower>();
  /** Every open stream, live, joining or catching up: while there is none, no change is read. */
  readonly #open = new Set<Follower>();
  /** The last position given to every live stream. */
  #position: number;
  #queue: Array<LoggedChange | Skip> = [];
  #busy = false;
  readonly #onError: (error: unknown) => void;

  constructor(storage: Storage, feed: ChangeFeed, onError: (error: unknown) => void) {
    this.#storage = storage;
    this.#feed = feed;
    this.#onError = onError;
    this.#position = feed.last;
    feed.subscribe({
      wanted: () => this.#open.size > 0,
      changes: (changes) => {
        this.#queue.push(...changes);
        void this.#drain();
      },
      skipped: (through) => {
        this.#queue.push({ through });
        void this.#drain();
      },
    });
  }

  /** The last position the hub has seen committed (where a stream without `since` starts). */
  get position(): number {
    return Math.max(this.#position, this.#feed.last);
  }

  /** Starts a stream after `after` (a position); it is given every later change it concerns. */
  follow(subscription: Subscription, after: number): void {
    const follower: Follower = { subscription, cursor: after };
    this.#open.add(follower);
    subscription.sink.onClose(() => {
      this.#open.delete(follower);
      this.#joining.delete(follower);
      this.#live.get(subscription.collection)?.delete(follower);
    });
    this.#join(follower);
  }

  #join(follower: Follower): void {
    if (follower.subscription.sink.closed) return;
    this.#joining.add(follower);
    if (!this.#busy) this.#admit();
  }

  /** Between two changes: streams in step join; those behind catch up first. */
  #admit(): void {
    for (const follower of [...this.#joining]) {
      if (follower.cursor > this.#position) continue;
      this.#joining.delete(follower);
      if (follower.cursor === this.#position) {
        let set = this.#live.get(follower.subscription.collection);
        if (!set) this.#live.set(follower.subscription.collection, (set = new Set()));
        set.add(follower);
      } else {
        void this.#catchUp(follower);
      }
    }
  }

  async #catchUp(follower: Follower): Promise<void> {
    try {
      const changes = await readChanges(this.#storage.db, follower.cursor, CATCH_UP_BATCH);
      // Positions are dense: a hole means pruning took changes this stream has not had (STREAMS.md §3).
      const first = changes[0]?.position ?? null;
      if ((first === null && follower.cursor < this.#position) || (first !== null && first !== follower.cursor + 1)) {
        follower.subscription.sink.send(null, 'reset', JSON.stringify({ reason: 'position too old' }));
        follower.subscription.sink.close();
        return;
      }
      for (const change of changes) {
        if (follower.subscription.sink.closed) return;
        if (change.collection === follower.subscription.collection) await this.#give(follower, change, new Map());
        follower.cursor = change.position;
      }
    } catch (error) {
      this.#onError(error);
      follower.subscription.sink.close();
      return;
    }
    this.#join(follower);
  }

  async #drain(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      while (this.#queue.length > 0) {
        const item = this.#queue.shift()!;
        if ('through' in item) {
          this.#skip(item.through);
          continue;
        }
        const change = item;
        if (change.position <= this.#position) continue;
        this.#admit();
        const followers = [...(this.#live.get(change.collection) ?? [])];
        const verdicts: Verdicts = new Map();
        try {
          // Judged together, sent in order: a stream's messages follow commit order.
          const messages = await Promise.all(followers.map((follower) => this.#message(follower.subscription, change, verdicts)));
          followers.forEach((follower, index) => {
            const message = messages[index];
            if (message) this.#send(follower.subscription, change, message);
          });
        } catch (error) {
          // Not judged (the database failed): its streams end, and their clients resume from
          // their last id, so the change is not lost to them (STREAMS.md §4).
          this.#onError(error);
          for (const follower of followers) follower.subscription.sink.close();
        }
        this.#position = change.position;
      }
    } finally {
      this.#busy = false;
      this.#admit();
    }
  }

  /**
   * Moves past positions the feed did not read (no stream was open when they committed). A stream
   * that joined since has not had them: it goes back to reading the log from where it is.
   */
  #skip(through: number): void {
    if (through <= this.#position) return;
    for (const followers of this.#live.values()) {
      for (const follower of followers) {
        follower.cursor = this.#position;
        this.#joining.add(follower);
      }
    }
    this.#live.clear();
    this.#position = through;
  }

  async #give(follower: Follower, change: LoggedChange, verdicts: Verdicts): Promise<void> {
    const message = await this.#message(follower.subscription, change, verdicts);
    if (message) this.#send(follower.subscription, change, message);
  }

  #send(subscription: Subscription, change: LoggedChange, message: { event: string; data: string }): void {
    subscription.sink.send(change.position, message.event, message.data);
    // A record stream ends after its record's `deleted` (STREAMS.md §2).
    if (subscription.recordId !== null && message.event === 'deleted') subscription.sink.close();
  }

  async #message(subscription: Subscription, change: LoggedChange, verdicts: Verdicts) {
    if (subscription.sink.closed) return null;
    if (subscription.recordId !== null && subscription.recordId !== change.recordId) return null;
    const reader = await subscription.reader();
    const previous = change.action === 'updated' ? (change.previous ?? change.row) : change.row;
    const judge = (check: Check | null, row: Record<string, unknown>, when: string): Promise<boolean> => {
      if (check === null) return Promise.resolve(true);
      const key = `${when} ${check.key}`;
      let verdict = verdicts.get(key);
      if (verdict === undefined) verdicts.set(key, (verdict = this.#holds(check, row)));
      return verdict;
    };
    const [readableBefore, matchedBefore, readableAfter, matchedAfter] = await Promise.all([
      change.action === 'created' ? false : judge(reader.readCheck, previous, 'before'),
      change.action === 'created' ? false : judge(subscription.filterCheck, previous, 'before'),
      change.action === 'deleted' ? false : judge(reader.readCheck, change.row, 'after'),
      change.action === 'deleted' ? false : judge(subscription.filterCheck, change.row, 'after'),
    ]);
    return reader.message(change, {
      before: { readable: readableBefore, matched: matchedBefore },
      after: { readable: readableAfter, matched: matchedAfter },
    });
  }

  async #holds(check: Check, row: Record<string, unknown>): Promise<boolean> {
    const { rows } = await this.#storage.db.executeQuery(overStoredRow(this.#storage.dialect, check.table, check.query, row));
    return rows.length > 0;
  }
}
