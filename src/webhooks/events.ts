import type { Storage } from '../db/database.js';
import type { User } from '../http/caller.js';
import { withoutFields } from '../resources/access/field-rules.js';
import type { Change, Resource } from '../resources/resource.js';

/**
 * Event bodies (API.md §4 "A delivery"): GitHub's shape, with the subject named for the event
 * (`experience`), `repository` for the owner's collection and `sender` for who acted.
 */
export interface Actor {
  readonly login: string;
  readonly id: number;
}

/**
 * Repository ids name collections the way GitHub's name repositories: stable numbers, one per
 * collection (the owner is in `full_name` and `repository.owner`). A declaration may fix its
 * own (`eventId`; `experiences` is 1); any other collection with events is given the next free
 * number once, kept in `settings` so it survives restarts (RESOURCES.md §4).
 */
export async function assignRepositoryIds(storage: Storage, collections: readonly Resource[]): Promise<ReadonlyMap<string, number>> {
  const ids = new Map<string, number>();
  for (const resource of collections) if (resource.event && resource.eventId !== undefined) ids.set(resource.name, resource.eventId);
  const pending = collections.filter((resource) => resource.event && resource.eventId === undefined);
  if (pending.length === 0) return ids;
  const key = (name: string) => `repository_id:${name}`;
  const LOCK = 'repository_ids_lock';
  // A row to lock, so processes starting together hand numbers out one at a time.
  await storage.db.insertInto('settings').values({ key: LOCK, value: '' }).onConflict((oc) => oc.column('key').doNothing()).execute();
  await storage.db.transaction().execute(async (trx) => {
    await storage.lockForUpdate(trx.selectFrom('settings').select('key').where('key', '=', LOCK)).execute();
    const kept = await trx.selectFrom('settings').select(['key', 'value']).where('key', 'like', 'repository_id:%').execute();
    const known = new Map(kept.map((row) => [row.key.slice('repository_id:'.length), Number(row.value)]));
    // A fixed eventId may not take a number already given to another collection.
    for (const [name, id] of ids) {
      const holder = [...known].find(([other, given]) => given === id && other !== name);
      if (holder) throw new Error(`eventId ${id} of "${name}" is already the repository.id of "${holder[0]}"; choose another eventId`);
    }
    let next = Math.max(1, ...ids.values(), ...known.values()) + 1;
    for (const resource of pending) {
      let id = known.get(resource.name);
      if (id === undefined) {
        id = next++;
        await trx.insertInto('settings').values({ key: key(resource.name), value: String(id) }).execute();
      }
      ids.set(resource.name, id);
    }
  });
  return ids;
}

/** The body of a resource event such as `experience` / `created`. */
export function eventPayload(
  event: string,
  change: Change,
  { publicUrl, owner, repositoryId }: { publicUrl: string; owner: Actor; repositoryId: number },
): Record<string, unknown> {
  const { url, ...fields } = change.record;
  return {
    action: change.action,
    [event]: { url: `${publicUrl}${String(url)}`, number: fields.id, ...fields },
    ...(change.changes ? { changes: change.changes } : {}),
    repository: {
      id: repositoryId,
      full_name: `${owner.login}/${change.resource.name}`,
      owner,
    },
    sender: { login: change.actor.username, id: change.actor.id },
  };
}

/** A filtered webhook's verdict on one change (the body's `filter`, issue 14). */
export interface FilterVerdict {
  readonly matched_before: boolean;
  readonly matched_after: boolean;
}

/** Whether a webhook's owner may read the record before and after the change (ACCESS.md §4). */
export interface Sight {
  readonly before: boolean;
  readonly after: boolean;
}

/**
 * The bodies of one change, each written once and shared by every webhook it is the same for
 * (API.md §4): it depends on what the owner may see (ACCESS.md §4) and the webhook's filter
 * verdict (issue 14).
 */
export class ChangeBodies {
  private readonly texts = new Map<string, string>();

  constructor(
    private readonly event: string,
    private readonly change: Change,
    private readonly payload: Record<string, unknown>,
    /** The fields the record hides from each owner (by id; an owner shown all is absent); null without field read rules. */
    private readonly hidden: ReadonlyMap<number, ReadonlySet<string>> | null = null,
  ) {}

  /**
   * The body for a webhook of `owner` (with roles as read in the change's transaction; null for a
   * collection read by `*`, whose owners are not read), `sight` null for such a collection too.
   * An update that takes the record out of the owner's sight tells only which record left it;
   * one that brings it in is a full body; both say so in `access` (ACCESS.md §4).
   */
  for(owner: User | null, sight: Sight | null, filter: FilterVerdict | null): string {
    const moved = sight !== null && this.change.action === 'updated' && sight.before !== sight.after;
    const access = moved ? { readable_before: sight.before, readable_after: sight.after } : null;
    const shown = access?.readable_after === false ? { payload: this.leftSight(), shape: 'left' } : this.shownTo(owner);
    const key = `${shown.shape}|${access ? 'moved' : ''}|${filter ? `${Number(filter.matched_before)}${Number(filter.matched_after)}` : ''}`;
    let text = this.texts.get(key);
    if (text === undefined) {
      text = JSON.stringify({ ...shown.payload, ...(filter ? { filter } : {}), ...(access ? { access } : {}) });
      this.texts.set(key, text);
    }
    return text;
  }

  /**
   * What the owner is shown of the record (its fields and `changes`), and a `shape` naming it:
   * owners shown the same share one body. The one place a webhook body meets its owner, so
   * field rules (ACCESS.md §3, last point of §4) apply here, with the owner as the caller (the
   * payload without the fields the record hides from them, `shape` naming those).
   */
  private shownTo(owner: User | null): { payload: Record<string, unknown>; shape: string } {
    const hidden = owner ? this.hidden?.get(owner.id) : undefined;
    if (!hidden || hidden.size === 0) return { payload: this.payload, shape: 'whole' };
    const { [this.event]: subject, changes, ...rest } = this.payload;
    const payload: Record<string, unknown> = { action: rest.action, [this.event]: withoutFields(subject as Record<string, unknown>, hidden) };
    if (changes !== undefined) {
      const shown = withoutFields(changes as Record<string, unknown>, hidden);
      // An update that changed only hidden fields has nothing left to show in `changes`.
      if (Object.keys(shown).length > 0) payload.changes = shown;
    }
    Object.assign(payload, rest);
    return { payload, shape: `without:${[...hidden].sort().join(',')}` };
  }

  /** A record that left the owner's sight: which one it was, nothing of its fields, no `changes`. */
  private leftSight(): Record<string, unknown> {
    const { [this.event]: subject, changes: _changes, ...rest } = this.payload;
    const { url, number, id } = subject as Record<string, unknown>;
    return { action: rest.action, [this.event]: { url, number, id }, repository: rest.repository, sender: rest.sender };
  }
}

// GitHub greets a new hook with a line of its zen; so do we.
const ZEN = [
  'Design for failure.',
  'Approachable is better than simple.',
  'Keep it logically awesome.',
  'Non-blocking is better than blocking.',
  'Practicality beats purity.',
  'Speak like a human.',
  'Favor focus over features.',
  'Avoid administrative distraction.',
  'Mind your words, they are important.',
  'Encourage flow.',
];

/** The body of a `ping` (API.md §4): zen, the hook's id and description (never its secret), sender. */
export function pingPayload(webhook: Record<string, unknown>, sender: Actor): Record<string, unknown> {
  return {
    zen: ZEN[Math.floor(Math.random() * ZEN.length)],
    hook_id: webhook.id,
    hook: { type: 'Repository', ...webhook },
    sender,
  };
}
