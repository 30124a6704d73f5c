// The number field types: integer, exact decimal (stored scaled, so both databases order it
// exactly) and boolean (stored 0/1), with DRF's messages; a form's text is read as a number.

import { MESSAGES } from '../../http/messages.js';
import { fail, makeField, ok, type CommonOptions, type Field } from './field.js';

const SAFE = Number.MAX_SAFE_INTEGER;

/** What only these types say (DRF's `default_error_messages`); shared ones are MESSAGES. */
const messages = {
  tooLarge: 'String value too large.',
  invalidInteger: 'A valid integer is required.',
  invalidNumber: 'A valid number is required.',
  maxDigits: (digits: number) => `Ensure that there are no more than ${digits} digits in total.`,
  maxDecimalPlaces: (places: number) => `Ensure that there are no more than ${places} decimal places.`,
  maxWholeDigits: (digits: number) => `Ensure that there are no more than ${digits} digits before the decimal point.`,
};

/** A whole number (DRF's IntegerField); a form's digits are accepted. */
export function integer(options: CommonOptions<number> & { min?: number; max?: number } = {}): Field {
  const min = options.min ?? -SAFE;
  const max = options.max ?? SAFE;
  for (const [name, value] of [['min', min], ['max', max]] as const) {
    if (!Number.isSafeInteger(value)) throw new TypeError(`option ${name} must be a whole number within ±(2^53−1)`);
  }
  return makeField(options as Record<string, unknown>, {
    type: 'integer',
    own: ['min', 'max'],
    parse(value) {
      let number: number;
      if (typeof value === 'number') number = value;
      else if (typeof value === 'string' && value.length <= 1000 && /^\s*-?\d+(\.0*)?\s*$/.test(value)) number = Number.parseInt(value, 10);
      else if (typeof value === 'string' && value.length > 1000) return fail(messages.tooLarge);
      else return fail(messages.invalidInteger);
      if (!Number.isInteger(number)) return fail(messages.invalidInteger);
      if (number > max) return fail(MESSAGES.maxValue(max));
      if (number < min) return fail(MESSAGES.minValue(min));
      return ok(number === 0 ? 0 : number);
    },
    schema: { type: 'integer', minimum: min, maximum: max },
    metadataType: 'integer',
    metadata: { min_value: min, max_value: max },
  });
}

/**
 * An exact decimal (DRF's DecimalField), shown as a string with `decimalPlaces` digits. Stored as
 * an integer scaled by 10^decimalPlaces, so it orders and compares exactly on both databases;
 * that bounds `maxDigits` to 15 (the digits a double holds exactly).
 */
export function decimal(options: CommonOptions<string | number> & { maxDigits: number; decimalPlaces: number }): Field {
  const { maxDigits, decimalPlaces } = options ?? {};
  if (!Number.isSafeInteger(maxDigits) || maxDigits < 1 || maxDigits > 15) throw new TypeError('option maxDigits must be a whole number from 1 to 15');
  if (!Number.isSafeInteger(decimalPlaces) || decimalPlaces < 0 || decimalPlaces > maxDigits) {
    throw new TypeError('option decimalPlaces must be a whole number from 0 to maxDigits');
  }
  const show = (stored: unknown): string => {
    const scaled = Number(stored);
    const sign = scaled < 0 ? '-' : '';
    const digits = String(Math.abs(scaled)).padStart(decimalPlaces + 1, '0');
    return decimalPlaces === 0 ? `${sign}${digits}` : `${sign}${digits.slice(0, -decimalPlaces)}.${digits.slice(-decimalPlaces)}`;
  };
  const limit = `${'9'.repeat(maxDigits - decimalPlaces) || '0'}${decimalPlaces ? `.${'9'.repeat(decimalPlaces)}` : ''}`;
  return makeField(options as unknown as Record<string, unknown>, {
    type: 'decimal',
    own: ['maxDigits', 'decimalPlaces'],
    parse(value) {
      let textValue: string;
      if (typeof value === 'number' && Number.isFinite(value)) textValue = String(value);
      else if (typeof value === 'string' && value.length <= 1000) textValue = value.trim();
      else if (typeof value === 'string') return fail(messages.tooLarge);
      else return fail(messages.invalidNumber);
      // Exponents (1e3) are what JavaScript prints for large or tiny numbers; read them exactly.
      const match = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d{1,3}))?$/.exec(textValue);
      if (!match || (match[2] === '' && (match[3] ?? '') === '')) return fail(messages.invalidNumber);
      const exponent = Number(match[4] ?? 0);
      let whole = match[2]!;
      let fraction = match[3] ?? '';
      if (exponent > 0) {
        fraction = fraction.padEnd(exponent, '0');
        whole += fraction.slice(0, exponent);
        fraction = fraction.slice(exponent);
      } else if (exponent < 0) {
        whole = whole.padStart(-exponent + 1, '0');
        fraction = whole.slice(exponent) + fraction;
        whole = whole.slice(0, exponent);
      }
      whole = whole.replace(/^0+(?=\d)/, '');
      fraction = fraction.replace(/0+$/, '');
      const wholeDigits = whole === '0' || whole === '' ? 0 : whole.length;
      if (wholeDigits + fraction.length > maxDigits) return fail(messages.maxDigits(maxDigits));
      if (fraction.length > decimalPlaces) return fail(messages.maxDecimalPlaces(decimalPlaces));
      if (wholeDigits > maxDigits - decimalPlaces) {
        return fail(messages.maxWholeDigits(maxDigits - decimalPlaces));
      }
      const scaled = Number(`${whole || '0'}${fraction.padEnd(decimalPlaces, '0')}`);
      return ok(match[1] === '-' && scaled !== 0 ? -scaled : scaled);
    },
    show,
    schema: { type: 'string', format: 'decimal', pattern: `^-?\\d{1,${Math.max(1, maxDigits - decimalPlaces)}}${decimalPlaces ? `\\.\\d{${decimalPlaces}}` : ''}$`, examples: [show(0)] },
    metadataType: 'decimal',
    metadata: { max_digits: maxDigits, decimal_places: decimalPlaces, max_value: limit },
    state: { maxDigits, decimalPlaces },
  });
}

const TRUE = new Set(['true', 'True', 'TRUE', 'on', 'On', 'ON', '1', 'yes', 'y']);
const FALSE = new Set(['false', 'False', 'FALSE', 'off', 'Off', 'OFF', '0', 'no', 'n']);

/** true or false (DRF's BooleanField); stored 0/1. */
export function boolean(options: CommonOptions<boolean> = {}): Field {
  return makeField(options as Record<string, unknown>, {
    type: 'boolean',
    own: [],
    parse(value) {
      if (value === true || value === 1 || (typeof value === 'string' && TRUE.has(value.trim()))) return ok(1);
      if (value === false || value === 0 || (typeof value === 'string' && FALSE.has(value.trim()))) return ok(0);
      return fail(MESSAGES.invalidBoolean);
    },
    show: (stored) => Number(stored) === 1,
    schema: { type: 'boolean' },
    metadataType: 'boolean',
  });
}
