// Throw-away databases for the tests under src/, which cannot import test/support (tsconfig's
// rootDir): SQLite always, PostgreSQL too when TEST_DATABASE_URL is set (as .ci/run does). Not
// part of the build (tsconfig.build.json), and not a test file itself.

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

export type Backend = 'sqlite' | 'postgres';

/** The databases the tests run on here. */
export const BACKENDS: readonly Backend[] = process.env.TEST_DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite'];

export interface TestDatabase {
  readonly dataDir: string;
  /** null for SQLite (its file is in `dataDir`). */
  readonly url: string | null;
  /** Drops the PostgreSQL database and removes the folder. */
  drop(): Promise<void>;
}

/** Runs one statement as TEST_DATABASE_URL's user, on a connection of its own. */
export async function asAdmin(statement: string, values: unknown[] = []): Promise<void> {
  const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
  await client.connect();
  try {
    await client.query(statement, values);
  } finally {
    await client.end();
  }
}

/** A fresh temp folder (`restwire-<label>-…`), plus a fresh PostgreSQL database for 'postgres'. */
export async function createTestDatabase(backend: Backend, label: string): Promise<TestDatabase> {
  const dataDir = mkdtempSync(join(tmpdir(), `restwire-${label}-`));
  if (backend === 'sqlite') return { dataDir, url: null, drop: async () => rmSync(dataDir, { recursive: true, force: true }) };
  const name = `restwire_test_${randomBytes(6).toString('hex')}`;
  await asAdmin(`create database ${name}`);
  const url = new URL(process.env.TEST_DATABASE_URL!);
  url.pathname = `/${name}`;
  return {
    dataDir,
    url: url.toString(),
    async drop() {
      await asAdmin(`drop database if exists ${name} with (force)`);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
