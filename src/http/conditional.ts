import * as crypto from 'node:crypto';
import { PreconditionFailed } from './errors.js';
import { JSON_TYPE, renderJson } from './renderers.js';

/**
 * Conditional requests (RFC 9110 §13; API.md §1): a strong ETag on every GET, 304 for a
 * matching If-None-Match, 412 for a PUT/PATCH/DELETE whose If-Match does not match.
 */

// crypto.hash (Node 20.12+) hashes in one call, several times faster than a Hash object for
// the small bodies of a GET; older Node 20 releases fall back to createHash.
const sha1 =
  typeof crypto.hash === 'function'
    ? (text: string) => crypto.hash('sha1', text, 'base64url')
    : (text: string) => crypto.createHash('sha1').update(text).digest('base64url');

/** A strong entity tag over the exact bytes of a representation and its media type. */
export function entityTag(body: string, mediaType: string): string {
  return `"${sha1(`${mediaType}\0${body}`)}"`;
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
 * If-Match against a record's current representation (RFC 9110 §13.1.1, strong comparison; API.md
 * §1): the tag compared is the ETag of the record's JSON, the one a client editing it fetched.
 */
export function assertRecordMatches(ifMatch: string | string[] | undefined, record: unknown): void {
  if (ifMatch === undefined) return;
  const tags = listTags(Array.isArray(ifMatch) ? ifMatch.join(',') : ifMatch);
  if (tags.includes('*') || tags.includes(entityTag(renderJson(record), JSON_TYPE))) return;
  throw new PreconditionFailed();
}
