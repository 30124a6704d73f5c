import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MigrationFileError, readMigrationFiles, writeMigrationFile } from './migration-files.js';
import type { Operation } from './migration-operations.js';

const create: Operation = {
  op: 'createCollection',
  collection: 'books',
  owner: true,
  timestamps: true,
  // Keys deliberately out of the written order, to show the file does not depend on it.
  fields: { title: { unique: false, null: false, type: 'string', maxLength: 200 } },
  indexes: ['title'],
};
const addYear: Operation = { op: 'addField', collection: 'books', field: 'year', state: { type: 'integer', null: true, unique: false } };

let dir: string;
beforeEach(() => {
  dir = join(mkdtempSync(join(tmpdir(), 'restwire-migration-files-')), 'migrations');
});
afterEach(() => rmSync(join(dir, '..'), { recursive: true, force: true }));

describe('writeMigrationFile', () => {
  it('numbers files, names them initial / --name / auto_<time>, and reads them back in order', () => {
    const now = new Date('2025-03-04T05:06:07Z');
    expect(basename(writeMigrationFile(dir, [create], undefined, now))).toBe('0001_initial.json');
    expect(basename(writeMigrationFile(dir, [addYear], 'add_year', now))).toBe('0002_add_year.json');
    expect(basename(writeMigrationFile(dir, [{ op: 'addIndex', collection: 'books', field: 'year' }], undefined, now))).toBe(
      '0003_auto_20250304_0506.json',
    );
    const files = readMigrationFiles(dir);
    expect(files.map((file) => file.name)).toEqual(['0001_initial.json', '0002_add_year.json', '0003_auto_20250304_0506.json']);
    expect(files[0]!.operations).toEqual([create]);
    expect(files[1]!.path).toBe(join(dir, '0002_add_year.json'));
  });

  it('writes readable, stable JSON with a summary', () => {
    const path = writeMigrationFile(dir, [create, addYear]);
    expect(readFileSync(path, 'utf8')).toBe(`{
  "restwire": 1,
  "summary": [
    "Create collection books (1 field)",
    "Add field books.year"
  ],
  "operations": [
    {
      "op": "createCollection",
      "collection": "books",
      "owner": true,
      "timestamps": true,
      "fields": {
        "title": {
          "type": "string",
          "null": false,
          "unique": false,
          "maxLength": 200
        }
      },
      "indexes": [
        "title"
      ]
    },
    {
      "op": "addField",
      "collection": "books",
      "field": "year",
      "state": {
        "type": "integer",
        "null": true,
        "unique": false
      }
    }
  ]
}
`);
  });

  it('refuses a --name that would not make a file name', () => {
    expect(() => writeMigrationFile(dir, [create], 'Add Year')).toThrow(/a-z, 0-9 and _/);
  });
});

describe('readMigrationFiles', () => {
  it('is empty when the folder does not exist', () => {
    expect(readMigrationFiles(join(dir, 'nope'))).toEqual([]);
  });

  const broken: Array<[string, string, RegExp]> = [
    ['not JSON', '{"restwire": 1,', /0001_x\.json: not valid JSON/],
    ['another format', '{"restwire": 2, "operations": []}', /"restwire" must be 1/],
    ['no operations', '{"restwire": 1}', /"operations" must be an array/],
    ['an unknown op', '{"restwire": 1, "operations": [{"op": "dropEverything"}]}', /operations\[0\]\.op: expected one of/],
    ['a missing member', '{"restwire": 1, "operations": [{"op": "removeField", "collection": "books"}]}', /operations\[0\]\.field: expected a non-empty string/],
    [
      'a bad field type',
      '{"restwire": 1, "operations": [{"op": "addField", "collection": "b", "field": "f", "state": {"type": "float", "null": true, "unique": false}}]}',
      /operations\[0\]\.state\.type: expected one of string/,
    ],
    [
      'a reference without target',
      '{"restwire": 1, "operations": [{"op": "addField", "collection": "b", "field": "f", "state": {"type": "reference", "null": true, "unique": false}}]}',
      /state\.to: a reference field names its target/,
    ],
  ];
  it.each(broken)('names the file and the problem for %s', (_case, text, message) => {
    writeMigrationFile(dir, [create]);
    writeFileSync(join(dir, '0001_x.json'), text);
    expect(() => readMigrationFiles(dir)).toThrow(MigrationFileError);
    expect(() => readMigrationFiles(dir)).toThrow(message);
  });

  it('refuses a .json file not named NNNN_name.json', () => {
    writeMigrationFile(dir, [create]);
    writeFileSync(join(dir, 'notes.json'), '{}');
    expect(() => readMigrationFiles(dir)).toThrow(/notes\.json: a migration file is named NNNN_name\.json/);
  });
});
