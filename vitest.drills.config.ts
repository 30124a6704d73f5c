import { defineConfig } from 'vitest/config';

// The drill suite of issue 11 (`npm run drills`): real processes and servers broken on purpose.
// Apart from `npm test` (vitest.config.ts does not include drills/), run one file at a time:
// each drill measures latencies and memory, which a neighbouring drill would disturb.
export default defineConfig({
  test: {
    include: ['drills/**/*.drill.ts'],
    testTimeout: 180_000,
    hookTimeout: 90_000,
    fileParallelism: false,
    // Drills print their figures; show them even when they pass.
    silent: false,
  },
});
