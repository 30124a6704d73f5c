// The user's migrations folder (RESOURCES.md §5): one JSON file per change set, `0001_initial.json`,
// `0002_<name>.json`, … applied in name order. Files are meant to be reviewed and committed, so
// they are written the same way every time: 2-space indent, keys in a fixed order, a summary of
// one line per operation. Reading checks every file fully, so a hand edit that breaks one is
// reported with the file and the place before anything is applied.

import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describeOperation, type Operation, type OperationName } from './migration-operations.js';
import { FIELD_TYPES, type FieldState } from './schema-state.js';

/** The format version in every file's `restwire` member. */
export const MIGRATION_FORMAT = 1;

export interface MigrationFile {
  /** The file name, e.g. `0002_add_year.json`; also the name recorded once it is applied. */
  readonly name: string;
  readonly path: string;
  readonly operations: readonly Operation[];
}

/** A migration file that is not valid JSON or not a restwire migration; names the file and the problem. */
export class MigrationFileError extends Error {
  override name = 'MigrationFileError';
  constructor(
    readonly file: string,
    readonly problem: string,
  ) {
    super(`${file}: ${problem}`);
  }
}

const FILE_NAME = /^(\d{4})_([a-z0-9_]+)\.json$/;
const CHANGE_NAME = /^[a-z0-9_]+$/;

/** Every migration file of `dir` (none when it does not exist), sorted by name and checked. */
export function readMigrationFiles(dir: string): MigrationFile[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => name.endsWith('.json'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  return names.sort().map((name) => {
    const path = join(dir, name);
    if (!FILE_NAME.test(name)) {
      throw new MigrationFileError(path, 'a migration file is named NNNN_name.json (four digits, then a-z, 0-9, _)');
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(path, 'utf8'));
    } catch (error) {
      throw new MigrationFileError(path, `not valid JSON (${(error as Error).message})`);
    }
    return { name, path, operations: parseMigration(parsed, path) };
  });
}

/**
 * Writes `operations` as the next file of `dir` (creating it) and returns its path: numbered one
 * past the highest file there, named `name`, else `initial` for the first file and
 * `auto_<YYYYMMDD_HHMM>` (UTC) after it.
 */
export function writeMigrationFile(dir: string, operations: readonly Operation[], name?: string, now = new Date()): string {
  if (name !== undefined && !CHANGE_NAME.test(name)) {
    throw new Error(`--name ${JSON.stringify(name)}: a migration name uses only a-z, 0-9 and _`);
  }
  mkdirSync(dir, { recursive: true });
  const numbers = readdirSync(dir).map((file) => Number(FILE_NAME.exec(file)?.[1] ?? 0));
  const number = Math.max(0, ...numbers) + 1;
  const stamp = now.toISOString().replace(/[-:]/g, '').replace('T', '_').slice(0, 13);
  const suffix = name ?? (number === 1 ? 'initial' : `auto_${stamp}`);
  const path = join(dir, `${String(number).padStart(4, '0')}_${suffix}.json`);
  // 'wx': two makemigrations racing must not overwrite each other's file.
  writeFileSync(path, formatMigration(operations), { flag: 'wx' });
  return path;
}

/** The text of a migration file: stable, so the same operations always give the same bytes. */
export function formatMigration(operations: readonly Operation[]): string {
  const document = {
    restwire: MIGRATION_FORMAT,
    summary: operations.map(describeOperation),
    operations: operations.map(canonicalOperation),
  };
  return `${JSON.stringify(document, null, 2)}\n`;
}

// Key order of each operation and of a field state, as written.
const OPERATION_KEYS: Record<OperationName, readonly string[]> = {
  createCollection: ['op', 'collection', 'owner', 'timestamps', 'fields', 'indexes'],
  removeCollection: ['op', 'collection'],
  addField: ['op', 'collection', 'field', 'state'],
  removeField: ['op', 'collection', 'field'],
  alterField: ['op', 'collection', 'field', 'state'],
  renameField: ['op', 'collection', 'from', 'to'],
  alterCollection: ['op', 'collection', 'owner', 'timestamps'],
  addIndex: ['op', 'collection', 'field'],
  removeIndex: ['op', 'collection', 'field'],
};
const FIELD_KEYS = ['type', 'null', 'unique', 'default', 'maxLength', 'maxDigits', 'decimalPlaces', 'to', 'onDelete'] as const;

function canonicalOperation(op: Operation): Record<string, unknown> {
  const source = op as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const key of OPERATION_KEYS[op.op]) {
    const value = source[key];
    if (key === 'state') out[key] = canonicalField(value as FieldState);
    else if (key === 'fields') {
      // Declaration order is kept: it is the column order.
      out[key] = Object.fromEntries(Object.entries(value as Record<string, FieldState>).map(([n, f]) => [n, canonicalField(f)]));
    } else if (key === 'indexes') out[key] = [...(value as string[])].sort();
    else out[key] = value;
  }
  return out;
}

function canonicalField(field: FieldState): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of FIELD_KEYS) if (field[key] !== undefined) out[key] = field[key];
  return out;
}

// Reading: every member checked, with the place named, so the error says what to fix.

function parseMigration(value: unknown, file: string): Operation[] {
  const fail = (problem: string): never => {
    throw new MigrationFileError(file, problem);
  };
  if (!isObject(value)) return fail('expected a JSON object {"restwire": 1, "operations": [...]}');
  if (value.restwire !== MIGRATION_FORMAT) fail(`"restwire" must be ${MIGRATION_FORMAT} (this restwire reads format ${MIGRATION_FORMAT})`);
  if (!Array.isArray(value.operations)) return fail('"operations" must be an array');
  if (value.summary !== undefined && !Array.isArray(value.summary)) fail('"summary" must be an array of strings');
  return value.operations.map((op, index) => parseOperation(op, `operations[${index}]`, fail));
}

function parseOperation(value: unknown, at: string, fail: (problem: string) => never): Operation {
  if (!isObject(value)) return fail(`${at}: expected an object`);
  const name = value.op;
  if (typeof name !== 'string' || !(name in OPERATION_KEYS)) {
    return fail(`${at}.op: expected one of ${Object.keys(OPERATION_KEYS).join(', ')}`);
  }
  const keys = OPERATION_KEYS[name as OperationName];
  for (const key of Object.keys(value)) if (!keys.includes(key)) fail(`${at}: unknown member "${key}" for ${name}`);
  for (const key of keys) {
    const member = value[key];
    const where = `${at}.${key}`;
    if (key === 'owner' || key === 'timestamps') {
      if (typeof member !== 'boolean') fail(`${where}: expected true or false`);
    } else if (key === 'state') {
      parseField(member, where, fail);
    } else if (key === 'fields') {
      if (!isObject(member)) fail(`${where}: expected an object of fields`);
      for (const [field, state] of Object.entries(member as object)) parseField(state, `${where}.${field}`, fail);
    } else if (key === 'indexes') {
      if (!Array.isArray(member) || !member.every((entry) => typeof entry === 'string')) fail(`${where}: expected an array of field names`);
    } else if (typeof member !== 'string' || member === '') {
      fail(`${where}: expected a non-empty string`);
    }
  }
  return value as unknown as Operation;
}

function parseField(value: unknown, at: string, fail: (problem: string) => never): void {
  if (!isObject(value)) return fail(`${at}: expected a field state object`);
  for (const key of Object.keys(value)) {
    if (!(FIELD_KEYS as readonly string[]).includes(key)) fail(`${at}: unknown member "${key}"`);
  }
  if (!(FIELD_TYPES as readonly unknown[]).includes(value.type)) fail(`${at}.type: expected one of ${FIELD_TYPES.join(', ')}`);
  if (typeof value.null !== 'boolean') fail(`${at}.null: expected true or false`);
  if (typeof value.unique !== 'boolean') fail(`${at}.unique: expected true or false`);
  const fallback = value.default;
  if (fallback !== undefined && fallback !== null && typeof fallback !== 'string' && typeof fallback !== 'number') {
    fail(`${at}.default: expected a string, a number or null`);
  }
  for (const key of ['maxLength', 'maxDigits', 'decimalPlaces'] as const) {
    if (value[key] !== undefined && !Number.isSafeInteger(value[key])) fail(`${at}.${key}: expected an integer`);
  }
  if (value.type === 'reference' || value.type === 'references') {
    if (typeof value.to !== 'string' || value.to === '') fail(`${at}.to: a ${value.type} field names its target collection`);
  }
  if (value.onDelete !== undefined && !['protect', 'cascade', 'setNull'].includes(value.onDelete as string)) {
    fail(`${at}.onDelete: expected protect, cascade or setNull`);
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
