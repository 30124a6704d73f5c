import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Files that assert an upper bound on a wall-clock time (a p99, "within 1 s", a timeout that must
 * fire between 1.9 and 5 s), or count exactly through Redis (a rate-limit command slower than
 * 150 ms is counted in the process's memory instead, by design): they run one at a time, after
 * the rest, with the machine to themselves, so a neighbouring file cannot make them fail.
 */
const TIMED = [
  'src/auth/login-throttle.test.ts', // counts through Redis
  'test/api-keys.test.ts', // a revoke reaches another process within 5 s
  'test/outages.test.ts', // fails open within 450 ms per request
  'test/postgres-refusals.test.ts', // serves again within 10 s of its connections being ended (57P01)
  'test/own-resources-inputs.test.ts', // a refused 40 000-item list within 5 s
  'test/shared-limits.test.ts', // two processes count exactly through Redis
  'test/streams.test.ts', // streams end within 1 s of SIGTERM
  'test/timeouts.test.ts', // REQUEST_TIMEOUT_SECONDS between 1.9 and 5 s
  'test/webhooks-reliability.test.ts', // p99 commit-to-attempt under 1 s; retry spacing
  'test/webhooks.test.ts', // 20 events within 3 s beside a hanging receiver
];

export default defineConfig({
  test: {
    // Hang guards, not targets: a test that stops making progress fails after a minute.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Waits on a condition (a log line, a delivery) fail after 5 s rather than vitest's 1 s: with
    // two files at once on two cores the condition arrives later, it still has to arrive.
    expect: { poll: { timeout: 5_000 } },
    projects: [
      {
        extends: true,
        test: {
          name: 'parallel',
          include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...TIMED],
          // Black-box files mostly wait (on child processes, databases, timers): two at once on
          // two cores. Each has its own database, data folder, ports and Redis key prefix.
          maxWorkers: 2,
        },
      },
      {
        extends: true,
        test: {
          name: 'timed',
          include: TIMED,
          // One file at a time; vitest runs this group after the parallel one.
          fileParallelism: false,
        },
      },
    ],
  },
});
