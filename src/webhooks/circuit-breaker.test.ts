import { describe, expect, it } from 'vitest';
import { CircuitBreaker } from './circuit-breaker.js';

const timeout = { statusCode: null };
const answered = (statusCode: number) => ({ statusCode });

describe('CircuitBreaker', () => {
  it('opens after three consecutive attempts without an answer, cutting the webhook to one slot', () => {
    const breaker = new CircuitBreaker();
    expect(breaker.record(7, timeout)).toBeNull();
    expect(breaker.record(7, timeout)).toBeNull();
    expect(breaker.limit(7, 16)).toBe(16);
    expect(breaker.record(7, timeout)).toBe('opened');
    expect(breaker.isOpen(7)).toBe(true);
    expect(breaker.limit(7, 16)).toBe(1);
    expect(breaker.record(7, timeout)).toBeNull();
    expect(breaker.openCount).toBe(1);
  });

  it('closes on any answer, an HTTP error included, and starts counting afresh', () => {
    const breaker = new CircuitBreaker(2);
    breaker.record(1, timeout);
    breaker.record(1, timeout);
    expect(breaker.record(1, answered(500))).toBe('closed');
    expect(breaker.limit(1, 16)).toBe(16);
    expect(breaker.record(1, timeout)).toBeNull();
    expect(breaker.record(1, answered(200))).toBeNull();
    expect(breaker.record(1, timeout)).toBeNull();
    expect(breaker.isOpen(1)).toBe(false);
  });

  it('keeps webhooks apart', () => {
    const breaker = new CircuitBreaker(1);
    breaker.record(1, timeout);
    expect(breaker.isOpen(1)).toBe(true);
    expect(breaker.isOpen(2)).toBe(false);
  });

  it('refuses a bad threshold at construction', () => {
    expect(() => new CircuitBreaker(0)).toThrow(RangeError);
  });
});
