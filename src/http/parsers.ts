import { Busboy, type BusboyInstance } from '@fastify/busboy';
import { ParseError, UnsupportedMediaType } from './errors.js';

/** What a request body decodes to: field name → value, as DRF's `request.data`. */
export type RequestData = Record<string, unknown>;

// Form values are all strings; fields that read JSON or lists from one need to know.
const FORM = Symbol('form');

/** Whether a body came from a URL-encoded or multipart form. */
export function isFormData(data: RequestData): boolean {
  return (data as Record<symbol, unknown>)[FORM] === true;
}

function formData(): RequestData {
  // Not enumerable: the mark is not a field, and copies or comparisons of the data ignore it.
  return Object.defineProperty(Object.create(null) as RequestData, FORM, { value: true });
}

/** The largest body read (API.md §1: over 1 MiB is a 413). Fastify enforces it while reading. */
export const BODY_LIMIT = 1024 * 1024;

export const SUPPORTED_MEDIA_TYPES = [
  'application/json',
  'application/x-www-form-urlencoded',
  'multipart/form-data',
] as const;

const utf8 = new TextDecoder('utf-8', { fatal: true });

function decodeUtf8(body: Buffer): string {
  try {
    return utf8.decode(body);
  } catch {
    throw new ParseError('The request body is not valid UTF-8.');
  }
}

// With the u flag a pair matches as one code point, so this finds only lone surrogates.
const LONE_SURROGATE = /\p{Surrogate}/u;

/**
 * JSON.parse's reviver: a `\ud800` escape with no partner decodes to a string that is not
 * Unicode, which UTF-8 storage would turn into U+FFFD without a word; refuse it (RFC 8259 §8.2,
 * issue 11, finding 12b), in names as in values.
 */
function refuseLoneSurrogates(key: string, value: unknown): unknown {
  if (LONE_SURROGATE.test(key) || (typeof value === 'string' && LONE_SURROGATE.test(value))) {
    throw new ParseError('JSON parse error: a string holds a lone surrogate (\\ud800-\\udfff without its pair).');
  }
  return value;
}

function parseJson(body: Buffer): RequestData {
  let value: unknown;
  try {
    value = JSON.parse(decodeUtf8(body), refuseLoneSurrogates);
  } catch (error) {
    if (error instanceof ParseError) throw error;
    throw new ParseError(`JSON parse error: ${(error as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ParseError('Expected a JSON object.');
  }
  return value as RequestData;
}

/**
 * URL-encoded forms, decoded strictly: URLSearchParams would turn invalid UTF-8 into U+FFFD and
 * store it silently, where API.md §6 wants a 400. A repeated field keeps its last value, as
 * DRF's QueryDict does for `request.data[name]`.
 */
function parseForm(body: Buffer): RequestData {
  const text = decodeUtf8(body);
  const data = formData();
  for (const pair of text.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const rawKey = eq === -1 ? pair : pair.slice(0, eq);
    const rawValue = eq === -1 ? '' : pair.slice(eq + 1);
    try {
      data[decodeURIComponent(rawKey.replace(/\+/g, ' '))] = decodeURIComponent(rawValue.replace(/\+/g, ' '));
    } catch {
      throw new ParseError('The form body has a malformed percent-encoding or invalid UTF-8.');
    }
  }
  return data;
}

const BOUNDARY = /;\s*boundary\s*=\s*(?:"([^"]+)"|([^;\s]+))/i;
const PART_CHARSET = /^content-type:[^\r\n]*;\s*charset\s*=\s*"?([^";\s\r\n]+)/im;

/**
 * The first charset other than UTF-8 that a part's own Content-Type declares, or null. Busboy
 * would decode such a part by its charset (latin1 …) and hand back text the client did not mean
 * as UTF-8; API.md §6 takes UTF-8 only (issue 11, finding 12c). The boundary never occurs inside
 * a part, so splitting on it finds exactly the parts' header sections.
 */
function foreignCharset(body: Buffer, contentType: string): string | null {
  const match = BOUNDARY.exec(contentType);
  const boundary = match?.[1] ?? match?.[2];
  if (boundary === undefined) return null;
  const delimiter = Buffer.from(`--${boundary}`);
  for (let start = body.indexOf(delimiter); start !== -1; start = body.indexOf(delimiter, start + delimiter.length)) {
    const headersEnd = body.indexOf('\r\n\r\n', start);
    if (headersEnd === -1) break;
    const charset = PART_CHARSET.exec(body.toString('latin1', start + delimiter.length, headersEnd))?.[1]?.toLowerCase();
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') return charset;
  }
  return null;
}

function parseMultipart(body: Buffer, contentType: string): Promise<RequestData> {
  const charset = foreignCharset(body, contentType);
  if (charset !== null) {
    return Promise.reject(new ParseError(`A multipart part declares charset ${JSON.stringify(charset)}; only UTF-8 is accepted.`));
  }
  return new Promise((resolve, reject) => {
    const data = formData();
    let busboy: BusboyInstance;
    try {
      busboy = new Busboy({ headers: { 'content-type': contentType }, defCharset: 'utf8' });
    } catch (error) {
      reject(new ParseError(`Malformed multipart body: ${(error as Error).message}`));
      return;
    }
    busboy.on('field', (name: string, value: string) => {
      data[name] = value;
    });
    // Files are not fields of any resource; drain them so parsing can finish.
    busboy.on('file', (_name: string, stream: NodeJS.ReadableStream) => stream.resume());
    busboy.on('error', (error: Error) => reject(new ParseError(`Malformed multipart body: ${error.message}`)));
    busboy.on('finish', () => {
      for (const value of Object.values(data)) {
        if (typeof value === 'string' && value.includes('\uFFFD')) {
          reject(new ParseError('A multipart field is not valid UTF-8.'));
          return;
        }
      }
      resolve(data);
    });
    busboy.end(body);
  });
}

/**
 * Decodes a buffered body by its Content-Type. An empty body is an empty object; a non-empty
 * body of another type is a 415 (API.md §1).
 */
export async function parseBody(body: Buffer | undefined, contentType: string | undefined): Promise<RequestData> {
  if (body === undefined || body.length === 0) return {};
  const essence = mediaTypeEssence(contentType);
  switch (essence) {
    case 'application/json':
      return parseJson(body);
    case 'application/x-www-form-urlencoded':
      return parseForm(body);
    case 'multipart/form-data':
      return parseMultipart(body, contentType!);
    default:
      throw new UnsupportedMediaType(essence || '(none)', SUPPORTED_MEDIA_TYPES);
  }
}

/** `type/subtype` of a Content-Type, lower-cased, without parameters ('' when absent). */
export function mediaTypeEssence(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase();
}

/** Whether a body of this Content-Type is a form, whose fields are all strings. */
export function isFormBody(contentType: string | undefined): boolean {
  const essence = mediaTypeEssence(contentType);
  return essence === 'application/x-www-form-urlencoded' || essence === 'multipart/form-data';
}
