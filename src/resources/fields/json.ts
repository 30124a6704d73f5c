// The json field type: any JSON value, stored as its text and bounded in bytes.

import { MESSAGES } from '../../http/messages.js';
import { checkLength, fail, makeField, ok, type CommonOptions, type Field } from './field.js';

/** What only this type says (DRF's `default_error_messages`); shared ones are MESSAGES. */
const messages = {
  notFinite: 'Value must be valid JSON: a number is out of range (it must be finite).',
  maxBytes: (limit: number) => `Ensure this value has no more than ${limit} bytes as JSON.`,
};

/** Any JSON value, stored as its text; at most `maxBytes` (default 64 KiB) of UTF-8 JSON. */
export function json(options: CommonOptions<unknown> & { maxBytes?: number } = {}): Field {
  const maxBytes = options.maxBytes ?? 65_536;
  checkLength('maxBytes', maxBytes, true);
  return makeField(options as Record<string, unknown>, {
    type: 'json',
    own: ['maxBytes'],
    parse(value, context) {
      let parsed = value;
      if (context.form && typeof value === 'string') {
        try {
          parsed = JSON.parse(value) as unknown;
        } catch {
          return fail(MESSAGES.invalidJson);
        }
      }
      // JSON.parse reads 1e400 as Infinity, which JSON.stringify writes as null: refused, not
      // stored as something else (issue 22 item 15). The replacer sees every value, at any depth.
      let finite = true;
      const textValue = JSON.stringify(parsed, (_key, item: unknown) => {
        if (typeof item === 'number' && !Number.isFinite(item)) finite = false;
        return item;
      });
      if (!finite) return fail(messages.notFinite);
      if (textValue === undefined) return fail(MESSAGES.invalidJson);
      if (Buffer.byteLength(textValue) > maxBytes) return fail(messages.maxBytes(maxBytes));
      return ok(textValue);
    },
    show: (stored) => JSON.parse(String(stored)) as unknown,
    schema: { description: `Any JSON value, at most ${maxBytes} bytes.` },
    metadataType: 'json',
    metadata: { max_bytes: maxBytes },
  });
}
