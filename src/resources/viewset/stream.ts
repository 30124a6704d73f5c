// A collection's event streams (issue 23, STREAMS.md): what a list or record GET asked for
// `text/event-stream` answers. Everything a list would refuse is refused before the stream opens
// (the action checks the page and filters; this file the position asked for); then the stream
// follows the process's hub (resources/live/hub.ts) from that position, judged by the caller's
// read rule and scope and the list's filters, and told each change as this caller would see it.

import { rolesText, type RoleCache } from '../../auth/roles.js';
import { changePositions, type LoggedChange } from '../../db/change-log.js';
import type { Condition, DynamicDb, Row } from '../../db/dynamic-tables.js';
import { InvalidQuery } from '../../http/errors.js';
import type { EventSink } from '../../http/event-stream.js';
import type { ApiRequest, ApiResponse } from '../../http/view.js';
import { readCondition } from '../access/compile.js';
import { fieldsAreShared } from '../access/field-rules.js';
import type { Check, LiveChanges, Reader, Standing, Subscription } from '../live/hub.js';
import type { Resource } from '../resource.js';

/** What a collection's streams need from its viewset. */
export interface StreamOptions {
  readonly db: DynamicDb;
  readonly live: LiveChanges;
  readonly represent: (rows: readonly Row[], executor: DynamicDb, detail: boolean, viewer: ApiRequest['user']) => Promise<Record<string, unknown>[]>;
  /** What `hooks.representFor` adds for the caller (a user's roles), applied to copies. */
  readonly shownTo: (request: ApiRequest, rows: readonly Row[], records: Record<string, unknown>[]) => Promise<Record<string, unknown>[]>;
  /** Each user's current roles, as every authenticator reads them (auth/roles.ts); without it, a stream keeps its opener's. */
  readonly roles?: Pick<RoleCache, 'current'>;
}

const POSITION = /^\d{1,15}$/;

/** The position a stream starts after: Last-Event-ID, else `since`, else none (STREAMS.md §3); a bad one is a 400. */
function startPosition(request: ApiRequest): number | null {
  const header = request.raw.headers['last-event-id'];
  const lastEventId = Array.isArray(header) ? header[0] : header;
  if (lastEventId !== undefined && lastEventId.trim() !== '') {
    if (!POSITION.test(lastEventId.trim())) throw new InvalidQuery({ 'Last-Event-ID': ['Must be a change position: a whole number.'] });
    return Number(lastEventId.trim());
  }
  const since = request.query.since;
  if (since !== undefined) {
    if (!POSITION.test(String(since))) throw new InvalidQuery({ since: ['Must be a change position: a whole number.'] });
    return Number(since);
  }
  return null;
}

/** The last committed position, for `X-Change-Position` (STREAMS.md §3). */
export async function changePosition(db: DynamicDb): Promise<number> {
  return (await changePositions(db)).last;
}

/** One message of a stream, as the hub hands it to the sink. */
type Message = { event: string; data: string };

/** The request as made by its user with other roles. */
function asRoles(request: ApiRequest, user: NonNullable<ApiRequest['user']>, roles: readonly string[]): ApiRequest {
  const withRoles = { ...user, roles };
  return { ...request, user: withRoles, identity: request.identity && { ...request.identity, user: withRoles } };
}

export function buildStreams(resource: Resource, options: StreamOptions) {
  const { db, live, represent, shownTo, roles } = options;
  const table = resource.table;
  // A record shown as logged is the writer's view of it; one with reverse lists (filtered per
  // reader), members per caller, fields some callers may not read (ACCESS.md §3), or detail-only
  // fields is shown again for each reader, and so is one whose changes are logged as rows only.
  const fromRows = resource.changesLoggedAsRows;
  const listShownPerReader = fromRows || Boolean(resource.hooks.representFor) || Object.keys(resource.related).length > 0 || !fieldsAreShared(resource);
  const recordShownPerReader = listShownPerReader || resource.detailOnly.length > 0;
  // A record shown alike to every reader gives every stream standing alike towards a change the
  // same message: it is built once, and its one string lets the sinks encode it once
  // (http/event-stream.ts), not once per stream (issue 23: one change to 10,000 streams).
  const sharedMessages = new WeakMap<LoggedChange, Map<string, Promise<Message | null>>>();

  /** A condition as a check, compiled once per stream; equal ones are judged once per change. */
  function checkOf(conditions: readonly Condition[]): Check | null {
    if (conditions.length === 0) return null;
    let query = db.selectFrom(table).select('id');
    for (const condition of conditions) query = query.where(condition);
    const compiled = query.compile();
    return { key: `${compiled.sql} ${JSON.stringify(compiled.parameters)}`, table, query: compiled };
  }

  /**
   * Opens a stream of the list (`recordId` null, `filters` its conditions) or of one record (known
   * to exist and be readable: the action has loaded it).
   */
  async function openStream(request: ApiRequest, recordId: number | null, filters: readonly Condition[]): Promise<ApiResponse> {
    const requested = startPosition(request);
    const filterCheck = checkOf(filters);
    const { prunedThrough } = await changePositions(db);
    const detail = recordId !== null;
    const perReader = detail ? recordShownPerReader : listShownPerReader;

    /** How this caller reads with one set of roles: their read check and the messages they are shown. */
    async function readerFor(asOf: ApiRequest): Promise<Reader> {
      const scope = resource.hooks.scope ? await resource.hooks.scope(asOf) : null;
      const readable = readCondition(resource.access, asOf.user);
      const readCheck = checkOf([...(scope ? [scope] : []), ...(readable ? [readable] : [])]);

      async function shown(change: LoggedChange): Promise<Record<string, unknown>> {
        if (!perReader) return change.record;
        const row = change.row as Row;
        return (await shownTo(asOf, [row], await represent([row], db, detail, asOf.user)))[0]!;
      }

      /** An update's `changes`: as logged, or, logged as rows, each member the previous row shows otherwise. */
      async function changesOf(change: LoggedChange, record: Record<string, unknown>): Promise<Record<string, unknown>> {
        if (!fromRows || change.previous === null) return change.changes ?? {};
        const before = (await represent([change.previous as Row], db, false, asOf.user))[0]!;
        const differs = ([name, value]: [string, unknown]) => name in record && JSON.stringify(value) !== JSON.stringify(record[name]);
        return Object.fromEntries(Object.entries(before).filter(differs).map(([name, value]) => [name, { from: value }]));
      }

      function message(change: LoggedChange, standing: Standing): Promise<Message | null> {
        if (perReader) return messageFor(change, standing);
        const key = `${+standing.before.readable}${+standing.before.matched}${+standing.after.readable}${+standing.after.matched}`;
        let byStanding = sharedMessages.get(change);
        if (!byStanding) sharedMessages.set(change, (byStanding = new Map()));
        let shared = byStanding.get(key);
        if (!shared) byStanding.set(key, (shared = messageFor(change, standing)));
        return shared;
      }

      async function messageFor(change: LoggedChange, { before, after }: Standing): Promise<Message | null> {
        const inBefore = before.readable && before.matched;
        const inAfter = after.readable && after.matched;
        const data = (body: Record<string, unknown>) => ({ event: change.action, data: JSON.stringify({ action: change.action, ...body }) });
        if (change.action === 'created') return inAfter ? data({ record: await shown(change) }) : null;
        if (change.action === 'deleted') return inBefore ? data({ record: await shown(change) }) : null;
        if (!inBefore && !inAfter) return null;
        // Out of view: once more, marked; a record the caller may no longer read only by url and id (STREAMS.md §2).
        if (!after.readable) return data({ record: { url: change.record.url, id: change.record.id }, matched_after: false });
        const record = await shown(change);
        // A change to a field the reader may not read is not theirs to see (ACCESS.md §3).
        const changes = Object.fromEntries(Object.entries(await changesOf(change, record)).filter(([name]) => name in record));
        const body = { record, changes };
        if (!inAfter) return data({ ...body, matched_after: false });
        if (!inBefore) return data({ ...body, matched_before: false });
        return data(body);
      }

      return { readCheck, message };
    }

    // Rules apply with the caller's roles at the time of each change (STREAMS.md §2): the roles
    // come from the cache every authenticator reads (a change made here is seen at once, one made
    // elsewhere within its TTL, ACCESS.md §1), and the reader is compiled again only when they differ.
    const user = request.user;
    let current = { roles: user?.roles ?? [], text: rolesText(user?.roles ?? []), reader: readerFor(request) };
    async function reader(): Promise<Reader> {
      if (user === null || !roles) return current.reader;
      const now = await roles.current(user.id);
      if (now !== current.roles) {
        const text = rolesText(now);
        if (text !== current.text) current = { roles: now, text, reader: readerFor(asRoles(request, user, now)) };
        else current = { ...current, roles: now };
      }
      return current.reader;
    }
    await current.reader;

    return {
      stream(sink: EventSink) {
        // A position after which changes may be gone: the client reads again (STREAMS.md §3).
        if (requested !== null && requested < prunedThrough) {
          sink.send(null, 'reset', JSON.stringify({ reason: 'position too old' }));
          sink.close();
          return;
        }
        const subscription: Subscription = { collection: resource.name, recordId, filterCheck, reader, sink };
        live.follow(subscription, requested ?? live.position);
      },
    };
  }

  return { openStream };
}
