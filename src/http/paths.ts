// Record paths, the one way records name each other (SEED.md §1 rule 7): `/api/v1/<collection>/<id>/`.

import { NotFound } from './errors.js';

/** The path of a record: `/api/v1/<collection>/<id>/`. */
export function recordPath(collection: string, id: number): string {
  return `/api/v1/${collection}/${id}/`;
}

/** Parses a path id; anything but a positive integer in range is a 404, as an unknown id is. */
export function parseId(text: string | undefined): number {
  if (text === undefined || !/^[1-9]\d{0,15}$/.test(text)) throw new NotFound();
  const id = Number(text);
  if (!Number.isSafeInteger(id)) throw new NotFound();
  return id;
}
