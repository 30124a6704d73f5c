import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ChangeFeed, type ChangeSubscriber } from './change-feed.js';
import { appendChanges, type LoggedChange } from './change-log.js';
import { openStorage, type Storage } from './database.js';

// The change feed reads committed changes only while a subscriber wants them; otherwise it moves
// its position to what committed without reading (issue 18), and reads from there once wanted.
describe('ChangeFeed', () => {
  let dir: string;
  let storage: Storage;
  let feed: ChangeFeed;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'restwire-change-feed-'));
    storage = await openStorage({ dataDir: dir, databaseUrl: null });
    feed = new ChangeFeed(storage, { pollMs: 60_000, onError: (error) => { throw error; } });
    await feed.start();
  });

  afterEach(async () => {
    await feed.stop();
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const write = (recordId: number) =>
    storage.transact((trx) => appendChanges(trx, [{ collection: 'notes', recordId, action: 'created', record: { id: recordId }, changes: null, row: { id: recordId }, previous: null }]));

  /** A subscriber that wants changes while `wanted` is true, and what it was told. */
  function subscriber() {
    const told = { wanted: false, changes: [] as LoggedChange[], skipped: [] as number[] };
    const subscription: ChangeSubscriber = {
      wanted: () => told.wanted,
      changes: (changes) => told.changes.push(...changes),
      skipped: (last) => told.skipped.push(last),
    };
    feed.subscribe(subscription);
    return told;
  }

  const until = async (condition: () => boolean) => {
    const deadline = Date.now() + 5_000;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };

  it('reads nothing while no one wants changes, moving its position to each commit', async () => {
    const told = subscriber();
    await write(1);
    await write(2);
    await until(() => feed.last === 2);
    expect(told.skipped).toEqual([1, 2]);
    expect(told.changes).toEqual([]);
  });

  it('reads what commits once wanted, from where it stood, in order', async () => {
    const told = subscriber();
    await write(1);
    await until(() => feed.last === 1);
    told.wanted = true;
    await write(2);
    await write(3);
    await until(() => told.changes.length === 2);
    expect(told.changes.map((change) => [change.position, change.recordId])).toEqual([
      [2, 2],
      [3, 3],
    ]);
    told.wanted = false;
    await write(4);
    await until(() => feed.last === 4);
    expect(told.changes).toHaveLength(2);
    expect(told.skipped).toEqual([1, 4]);
  });
});
