import { createHash } from 'node:crypto';
import { PreconditionFailed } from './errors.js';

/**
 * Conditional requests (RFC 9110 §13; API.md §1): a strong ETag on every GET, 304 for a
 * matching If-None-Match, 412 for a PUT/PATCH/DELETE whose If-Match does not match.
 */

/** A strong entity tag over the exact bytes of a representation and its media type. */
export function entityTag(body: string, mediaType: string): string {
  return `"${createHash('sha1').update(mediaType).update('\0').update(body).digest('base64url')}"`;
}

function listTags(header: string): string[] {
  return header.split(',').map((tag) => tag.trim()).filter(Boolean);
}

/** If-None-Match uses the weak comparison (RFC 9110 §13.1.2): `W/` is ignored. */
export function noneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const tags = listTags(header);
  return tags.includes('*') || tags.some((tag) => tag.replace(/^W\//, '') === etag);
}

/**
 * If-Match uses the strong comparison (RFC 9110 §13.1.1). `currentTag` is the ETag of the
 * record's JSON representation, the one a client editing it will have fetched.
 */
export function assertIfMatch(header: string | undefined, currentTag: string): void {
  if (header === undefined) return;
  const tags = listTags(header);
  if (tags.includes('*') || tags.includes(currentTag)) return;
  throw new PreconditionFailed();
}
