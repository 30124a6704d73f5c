// The date and datetime field types: a calendar date `YYYY-MM-DD`, and an RFC 3339 instant
// stored and shown as UTC text with milliseconds, so that text order is time order.

import { MESSAGES } from '../../http/messages.js';
import { fail, makeField, ok, type CommonOptions, type Field } from './field.js';

/** What only the date type says (DRF's `default_error_messages`); datetime's is in MESSAGES. */
const messages = {
  invalidDate: 'Date has wrong format. Use one of these formats instead: YYYY-MM-DD.',
};

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATETIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|z|[+-]\d{2}:?\d{2})?$/;

function validDate(year: number, month: number, day: number): boolean {
  const date = new Date(Date.UTC(year, month - 1, day));
  return year >= 1 && date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/** `YYYY-MM-DD` for a valid calendar date, or null. */
function readDate(value: string): string | null {
  const match = DATE.exec(value);
  return match && validDate(Number(match[1]), Number(match[2]), Number(match[3])) ? value : null;
}

/** An RFC 3339 date-time (a naive one is read as UTC) → UTC text with milliseconds, or null. */
function readDatetime(value: string): string | null {
  const match = DATETIME.exec(value);
  if (!match) return null;
  const [, y, mo, d, h, mi, s = '0', fraction = '', zone = 'Z'] = match;
  if (!validDate(Number(y), Number(mo), Number(d)) || Number(h) > 23 || Number(mi) > 59 || Number(s) > 59) return null;
  const ms = Number(fraction.padEnd(3, '0').slice(0, 3));
  let time = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), ms);
  if (Number(y) < 100) time = new Date(time).setUTCFullYear(Number(y));
  if (zone !== 'Z' && zone !== 'z') {
    const offset = /^([+-])(\d{2}):?(\d{2})$/.exec(zone)!;
    if (Number(offset[2]) > 23 || Number(offset[3]) > 59) return null;
    time -= (offset[1] === '-' ? -1 : 1) * (Number(offset[2]) * 60 + Number(offset[3])) * 60_000;
  }
  const date = new Date(time);
  if (date.getUTCFullYear() < 1 || date.getUTCFullYear() > 9999) return null;
  return date.toISOString();
}

function temporal(
  type: 'date' | 'datetime',
  read: (value: string) => string | null,
  message: string,
  options: CommonOptions<string> & { min?: string; max?: string },
): Field {
  const bound = (name: 'min' | 'max'): string | undefined => {
    const value = options[name];
    if (value === undefined) return undefined;
    const read_ = typeof value === 'string' ? read(value) : null;
    if (read_ === null) throw new TypeError(`option ${name} must be a valid ${type} string`);
    return read_;
  };
  const min = bound('min');
  const max = bound('max');
  return makeField(options as Record<string, unknown>, {
    type,
    own: ['min', 'max'],
    parse(value) {
      const parsed = typeof value === 'string' ? read(value.trim()) : null;
      if (parsed === null) return fail(message);
      // Fixed-width UTC text compares in time order.
      if (max !== undefined && parsed > max) return fail(MESSAGES.maxValue(max));
      if (min !== undefined && parsed < min) return fail(MESSAGES.minValue(min));
      return ok(parsed);
    },
    schema: {
      type: 'string',
      format: type === 'date' ? 'date' : 'date-time',
      ...(min ? { formatMinimum: min } : {}),
      ...(max ? { formatMaximum: max } : {}),
    },
    metadataType: type,
    metadata: { ...(min ? { min_value: min } : {}), ...(max ? { max_value: max } : {}) },
  });
}

/** A calendar date, `YYYY-MM-DD`. */
export function date(options: CommonOptions<string> & { min?: string; max?: string } = {}): Field {
  return temporal('date', readDate, messages.invalidDate, options);
}

/** An instant, RFC 3339; shown in UTC with milliseconds and `Z`. */
export function datetime(options: CommonOptions<string> & { min?: string; max?: string } = {}): Field {
  return temporal('datetime', readDatetime, MESSAGES.invalidDatetime, options);
}
