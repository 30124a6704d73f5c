import { describe, expect, it } from 'vitest';
import { RepresentationCache, ReuseTracker, type CachedRepresentation } from './representation-cache.js';

const entry = (text: string): CachedRepresentation => ({ status: 200, headers: undefined, contentType: 'application/json', text, etag: `"${text}"` });

describe('RepresentationCache', () => {
  it('answers only under the version an entry was filed with', () => {
    const cache = new RepresentationCache();
    cache.get('1.0', 'GET /a');
    cache.set('1.0', 'GET /a', entry('a'));
    expect(cache.get('1.0', 'GET /a')?.text).toBe('a');
    expect(cache.get('1.1', 'GET /a')).toBeUndefined();
    expect(cache.get('1.0', 'GET /b')).toBeUndefined();
  });

  it('drops every entry when the version moves', () => {
    const cache = new RepresentationCache();
    cache.get('1.0', 'GET /a');
    cache.set('1.0', 'GET /a', entry('a'));
    cache.get('1.1', 'GET /b');
    cache.set('1.1', 'GET /b', entry('b'));
    expect(cache.get('1.0', 'GET /a')).toBeUndefined();
    expect(cache.get('1.1', 'GET /a')).toBeUndefined();
    expect(cache.get('1.1', 'GET /b')?.text).toBe('b');
  });

  it('does not let a response rendered under an older token push out newer entries', () => {
    const cache = new RepresentationCache();
    expect(cache.get('1.0', 'GET /slow')).toBeUndefined();
    expect(cache.get('1.1', 'GET /a')).toBeUndefined();
    cache.set('1.1', 'GET /a', entry('a'));
    cache.set('1.0', 'GET /slow', entry('slow'));
    expect(cache.get('1.1', 'GET /a')?.text).toBe('a');
    expect(cache.get('1.0', 'GET /slow')).toBeUndefined();
  });

  it('keeps at most maxEntries, the oldest out first', () => {
    const cache = new RepresentationCache({ maxEntries: 2 });
    cache.get('1', 'a');
    cache.set('1', 'a', entry('a'));
    cache.set('1', 'b', entry('b'));
    cache.set('1', 'c', entry('c'));
    expect(cache.get('1', 'a')).toBeUndefined();
    expect(cache.get('1', 'b')?.text).toBe('b');
    expect(cache.get('1', 'c')?.text).toBe('c');
  });

  it('does not keep responses without a body or larger than maxLength', () => {
    const cache = new RepresentationCache({ maxLength: 3 });
    cache.get('1', 'big');
    cache.set('1', 'big', entry('abcd'));
    cache.set('1', 'empty', { ...entry(''), text: null, contentType: null, etag: null });
    expect(cache.get('1', 'big')).toBeUndefined();
    expect(cache.get('1', 'empty')).toBeUndefined();
  });

  it('keeps at most maxTotalLength of text in all, the oldest out first', () => {
    const cache = new RepresentationCache({ maxTotalLength: 5 });
    cache.get('1', 'a');
    cache.set('1', 'a', entry('aa'));
    cache.set('1', 'b', entry('bb'));
    cache.set('1', 'a', entry('aa'));
    cache.set('1', 'c', entry('ccc'));
    expect(cache.get('1', 'b')).toBeUndefined();
    expect(cache.get('1', 'a')?.text).toBe('aa');
    expect(cache.get('1', 'c')?.text).toBe('ccc');
  });
});

describe('ReuseTracker', () => {
  const lookups = (tracker: ReuseTracker<object>, action: object, hits: number, misses: number, now: number) => {
    for (let n = 0; n < hits; n++) tracker.record(action, true, now);
    for (let n = 0; n < misses; n++) tracker.record(action, false, now);
  };

  it('keeps asking while a window finds at least its share in the cache', () => {
    const tracker = new ReuseTracker<object>({ window: 8, minShare: 0.25, pauseMs: 1_000 });
    const action = {};
    expect(tracker.worthAsking(action, 0)).toBe(true);
    lookups(tracker, action, 2, 6, 0);
    expect(tracker.worthAsking(action, 1)).toBe(true);
  });

  it('pauses an action whose window found less, then asks again', () => {
    const tracker = new ReuseTracker<object>({ window: 8, minShare: 0.25, pauseMs: 1_000 });
    const action = {};
    const other = {};
    lookups(tracker, action, 1, 7, 100);
    expect(tracker.worthAsking(action, 101)).toBe(false);
    expect(tracker.worthAsking(action, 1_099)).toBe(false);
    // Judged per action: another action's reuse is its own.
    expect(tracker.worthAsking(other, 101)).toBe(true);
    expect(tracker.worthAsking(action, 1_100)).toBe(true);
    // A fresh window after the pause: this one pays, so the action stays asked.
    lookups(tracker, action, 4, 4, 1_100);
    expect(tracker.worthAsking(action, 1_101)).toBe(true);
  });

  it('judges only full windows', () => {
    const tracker = new ReuseTracker<object>({ window: 8, minShare: 0.25, pauseMs: 1_000 });
    const action = {};
    lookups(tracker, action, 0, 7, 0);
    expect(tracker.worthAsking(action, 1)).toBe(true);
    lookups(tracker, action, 0, 1, 1);
    expect(tracker.worthAsking(action, 2)).toBe(false);
  });
});
