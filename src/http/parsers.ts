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
  const data = Object.create(null) as Record<string | symbol, unknown>;
  data[FORM] = true;
  return data as RequestData;
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

function parseJson(body: Buffer): RequestData {
  let value: unknown;
  try {
    value = JSON.parse(decodeUtf8(body));
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

function parseMultipart(body: Buffer, contentType: string): Promise<RequestData> {
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
  const essence = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
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
