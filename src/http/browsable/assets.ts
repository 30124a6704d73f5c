import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';

// The browsable pages' script and stylesheet, served by restwire itself (issue 12 §7: no CDN, no
// build step of the user's). They live in the package's top-level `assets/` folder, two levels
// above both `src/http/browsable/` and `dist/http/browsable/`, so tests (src) and `npm start`
// (dist) read the same files. Outside `/api/v1/`, so they are not rate-limited (API.md §6).

export const ASSET_PREFIX = '/static/restwire/';

const ASSETS: Record<string, string> = {
  'browsable.js': 'text/javascript; charset=utf-8',
  'browsable.css': 'text/css; charset=utf-8',
};

const folder = new URL('../../../assets/', import.meta.url);

/** Registers `GET /static/restwire/<file>`; the files are read once, at start-up. */
export function registerBrowsableAssets(server: FastifyInstance): void {
  for (const [name, contentType] of Object.entries(ASSETS)) {
    const body = readFileSync(new URL(name, folder));
    const etag = `"${createHash('sha1').update(body).digest('base64url')}"`;
    server.get(`${ASSET_PREFIX}${name}`, async function browsableAsset(request, reply) {
      reply.header('etag', etag).header('cache-control', 'no-cache').header('x-content-type-options', 'nosniff');
      if (request.headers['if-none-match'] === etag) return reply.code(304).send();
      return reply.header('content-type', contentType).send(body);
    });
  }
}
