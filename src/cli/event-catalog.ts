import { readFile } from 'node:fs/promises';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';

// The event catalog as `restwire listen --validate` uses it (issue 14): fetched from a server's
// `GET /api/v1/events/` or read from a file holding that response, and compiled into one JSON
// Schema validator per event. Formats (`uri`, `date-time`) are not checked: the schemas' types,
// required properties and enums are what a receiver relies on.

/** A delivery body judged against its event's schema. */
export type SchemaVerdict = { kind: 'valid' } | { kind: 'invalid'; errors: string[] } | { kind: 'unknown' };

/** Validates delivery bodies by event name. */
export interface EventValidator {
  readonly events: readonly string[];
  validate(event: string, body: unknown): SchemaVerdict;
}

interface CatalogEntry {
  name: string;
  schema: Record<string, unknown>;
}

/** Loads a catalog from an `http(s)://` URL or a file, and compiles it; throws with a clear message. */
export async function loadEventCatalog(source: string): Promise<EventValidator> {
  let text: string;
  if (/^https?:\/\//i.test(source)) {
    const response = await fetch(source, { headers: { accept: 'application/json' } });
    if (!response.ok) throw new Error(`could not fetch the event catalog from ${source}: HTTP ${response.status}`);
    text = await response.text();
  } else {
    text = await readFile(source, 'utf8');
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`the event catalog at ${source} is not JSON`);
  }
  const results = (parsed as { results?: unknown }).results;
  if (!Array.isArray(results)) throw new Error(`the event catalog at ${source} has no "results" list (expected GET /api/v1/events/)`);
  return compileEventCatalog(results as CatalogEntry[]);
}

/** One validator per catalog entry (JSON Schema 2020-12, as OpenAPI 3.1 uses). */
export function compileEventCatalog(entries: readonly CatalogEntry[]): EventValidator {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  const validators = new Map<string, ValidateFunction>(entries.map((entry) => [entry.name, ajv.compile(entry.schema)]));
  return {
    events: [...validators.keys()],
    validate(event, body) {
      const check = validators.get(event);
      if (!check) return { kind: 'unknown' };
      if (check(body)) return { kind: 'valid' };
      return { kind: 'invalid', errors: (check.errors ?? []).map((error) => `${error.instancePath || '/'} ${error.message ?? 'is invalid'}`) };
    },
  };
}
