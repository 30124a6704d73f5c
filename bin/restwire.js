#!/usr/bin/env node
// The compiled CLI lives in dist/ (`npm run build`; `npm start` builds first).
import('../dist/cli/main.js').catch((error) => {
  if (error && error.code === 'ERR_MODULE_NOT_FOUND' && String(error.message).includes('dist/cli/main.js')) {
    console.error('restwire: dist/ is missing; run `npm run build` (or `npm start`, which builds first).');
    process.exit(1);
  }
  throw error;
});
