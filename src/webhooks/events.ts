import type { Change } from '../resources/resource.js';

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
 * collection kind (the owner is in `full_name` and `repository.owner`).
 */
const COLLECTION_IDS: Record<string, number> = { experiences: 1 };

/** The body of a resource event such as `experience` / `created`. */
export function eventPayload(
  event: string,
  change: Change,
  { publicUrl, owner }: { publicUrl: string; owner: Actor },
): Record<string, unknown> {
  const { url, ...fields } = change.record;
  return {
    action: change.action,
    [event]: { url: `${publicUrl}${String(url)}`, number: fields.id, ...fields },
    ...(change.changes ? { changes: change.changes } : {}),
    repository: {
      id: COLLECTION_IDS[change.resource.name] ?? 0,
      full_name: `${owner.login}/${change.resource.name}`,
      owner,
    },
    sender: { login: change.actor.username, id: change.actor.id },
  };
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
export function pingPayload(hook: Record<string, unknown>, sender: Actor): Record<string, unknown> {
  return {
    zen: ZEN[Math.floor(Math.random() * ZEN.length)],
    hook_id: hook.id,
    hook: { type: 'Repository', ...hook },
    sender,
  };
}
