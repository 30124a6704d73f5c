#!/usr/bin/env -S MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072 node --max-semi-space-size=8 --heap-growing-percent=20 --no-wasm-tier-up --no-wasm-dynamic-tiering
// Node's young generation is capped at two 8 MiB semi-spaces (V8's default grows them to 16 MiB
// each under load, 32 MiB of RSS for a live heap of about 20 MiB), the old generation grows by
// a fifth past what the last full collection kept (V8 lets it grow up to 4x when collecting is
// cheap: 50 writers took serve to 154-186 MiB, 128-130 with this), and glibc keeps at most two
// malloc arenas (Node's background threads otherwise left 15-25 MiB in arenas of their own, one
// per thread). A fixed mmap threshold keeps glibc from raising it after the first password
// hash: scrypt's 16 MiB scratch (N=2^14, r=8) would then come from an arena and stay resident
// after every later hash (16-21 MiB of every scenario's peak). WebAssembly stays on V8's baseline
// compiler: the only module is undici's HTTP parser (webhook sends), and optimising it took
// 35 MiB of compiler memory at once a few hundred deliveries in (+25-35 MiB peak RSS).
// Peak RSS under 50 concurrent writers, issue 21 (bench/RESULTS.md). `node bin/restwire.js` or
// a process manager that starts node itself should pass the same; `serve --workers` passes them
// on to its workers.
// The compiled CLI lives in dist/ (`npm run build`; `npm start` builds first).
import('../dist/cli/main.js').catch((error) => {
  if (error && error.code === 'ERR_MODULE_NOT_FOUND' && String(error.message).includes('dist/cli/main.js')) {
    console.error('restwire: dist/ is missing; run `npm run build` (or `npm start`, which builds first).');
    process.exit(1);
  }
  throw error;
});
