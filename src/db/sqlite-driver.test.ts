import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from './database.js';

// Another process holding SQLite's write lock (serve's dispatcher process) must not stall this
// one's event loop: a write waits for the lock on a timer (issue 21).

const folder = mkdtempSync(join(tmpdir(), 'restwire-sqlite-lock-'));
let storage: Storage | null = null;
afterAll(async () => {
  await storage?.close();
  rmSync(folder, { recursive: true, force: true });
});

describe('the SQLite driver and another connection holding the write lock', () => {
  it('waits for the lock without blocking the event loop, then writes', async () => {
    storage = await openStorage({ dataDir: folder, databaseUrl: null });
    await sql`create table t (n integer)`.execute(storage.db);
    const other = new SQLite(join(folder, 'restwire.sqlite3'));
    other.prepare('begin immediate').run();
    other.prepare('insert into t (n) values (1)').run();

    const ticks: number[] = [];
    const ticking = setInterval(() => ticks.push(Date.now()), 5);
    // Released 150 ms from now, by a timer: it could never fire while a wait held the event loop.
    let committedAt = 0;
    setTimeout(() => {
      committedAt = Date.now();
      other.prepare('commit').run();
    }, 150);
    await storage.db.transaction().execute((trx) => sql`insert into t (n) values (2)`.execute(trx));
    await sql`insert into t (n) values (3)`.execute(storage.db);
    clearInterval(ticking);
    other.close();

    expect(committedAt).toBeGreaterThan(0);
    // The other timers kept firing while the write waited.
    expect(ticks.filter((at) => at < committedAt).length).toBeGreaterThanOrEqual(2);
    const { rows } = await sql<{ n: number }>`select n from t order by n`.execute(storage.db);
    expect(rows.map((row) => row.n)).toEqual([1, 2, 3]);
  });

  it('gives up with SQLITE_BUSY once the lock is held longer than it waits', async () => {
    const other = new SQLite(join(folder, 'restwire.sqlite3'));
    other.prepare('begin immediate').run();
    try {
      await expect(sql`insert into t (n) values (4)`.execute(storage!.db)).rejects.toMatchObject({ code: 'SQLITE_BUSY' });
    } finally {
      other.prepare('rollback').run();
      other.close();
    }
  }, 15_000);
});

// The token a reused response is filed under (representation-cache.ts) must move with every
// change to the file, whoever makes it, and hold while nothing changes (issues 6, 21).
describe('the SQLite data version', () => {
  it('holds while nothing changes, and moves with a write here and a commit by another connection', async () => {
    const versionFolder = mkdtempSync(join(tmpdir(), 'restwire-sqlite-version-'));
    const versioned = await openStorage({ dataDir: versionFolder, databaseUrl: null });
    try {
      await sql`create table v (n integer)`.execute(versioned.db);
      const first = await versioned.dataVersion();
      await sql`select count(*) from v`.execute(versioned.db);
      expect(await versioned.dataVersion()).toBe(first);

      await sql`insert into v (n) values (1)`.execute(versioned.db);
      const afterWrite = await versioned.dataVersion();
      expect(afterWrite).not.toBe(first);
      await versioned.db.transaction().execute((trx) => sql`update v set n = 2`.execute(trx));
      const afterTransaction = await versioned.dataVersion();
      expect(afterTransaction).not.toBe(afterWrite);

      const other = new SQLite(join(versionFolder, 'restwire.sqlite3'));
      other.prepare('insert into v (n) values (3)').run();
      other.close();
      const afterOther = await versioned.dataVersion();
      expect(afterOther).not.toBe(afterTransaction);
      expect(await versioned.dataVersion()).toBe(afterOther);
    } finally {
      await versioned.close();
      rmSync(versionFolder, { recursive: true, force: true });
    }
  });
});
