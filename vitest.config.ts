import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Black-box suites start real servers and databases; running files in parallel on two
    // cores makes their timings noisy without making the run much shorter.
    fileParallelism: false,
  },
});
