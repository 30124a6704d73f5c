import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

// The package's types (LOGIC.md §6): test/types/declaration.ts holds declarations whose own code
// must type-check, and mistakes marked `@ts-expect-error` that must not (an unused mark fails).

const CHECKOUT = new URL('../', import.meta.url).pathname;

describe('the types of a declaration', () => {
  it('type the values and records from the fields, and refuse misspelt types and options', () => {
    const tsc = spawnSync(process.execPath, [`${CHECKOUT}node_modules/typescript/bin/tsc`, '-p', 'test/types'], { cwd: CHECKOUT, encoding: 'utf8' });
    expect(tsc.stdout + tsc.stderr).toBe('');
    expect(tsc.status).toBe(0);
  }, 120_000);
});
