// The import rules of docs/ARCHITECTURE.md ("Layers"), checked by `npm run check:imports` in CI.
// Layers, lowest first; a file may import its own layer and the ones below, never above:
//   config.ts, version.ts  ←  db  ←  http  ←  auth, resources  ←  webhooks  ←  app.ts, cli, index.ts
// auth and resources share a layer, but only resources may import auth (a user's collections use
// its permissions and endpoints), never the reverse.
/** The layers above each one, as path patterns under src/. */
const ABOVE = {
  floor: ['db/', 'http/', 'auth/', 'resources/', 'webhooks/', 'cli/', 'app\\.ts$', 'index\\.ts$'],
  db: ['http/', 'auth/', 'resources/', 'webhooks/', 'cli/', 'app\\.ts$', 'index\\.ts$'],
  http: ['auth/', 'resources/', 'webhooks/', 'cli/', 'app\\.ts$', 'index\\.ts$'],
  auth: ['resources/', 'webhooks/', 'cli/', 'app\\.ts$', 'index\\.ts$'],
  resources: ['webhooks/', 'cli/', 'app\\.ts$', 'index\\.ts$'],
  webhooks: ['cli/', 'app\\.ts$', 'index\\.ts$'],
};

/** @param {string} name @param {string} from @param {string[]} above */
const noUpward = (name, from, above) => ({
  name,
  severity: 'error',
  comment: 'An import that runs up the layers: move what both need down to the lower layer.',
  from: { path: `^src/${from}` },
  to: { path: above.map((part) => `^src/${part}`).join('|') },
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import cycle hides which file depends on which: break it by moving the shared part down.',
      from: {},
      to: { circular: true },
    },
    noUpward('config-is-the-floor', '(config|version)\\.ts$', ABOVE.floor),
    noUpward('db-below-http', 'db/', ABOVE.db),
    noUpward('http-below-auth-and-resources', 'http/', ABOVE.http),
    noUpward('auth-below-resources', 'auth/', ABOVE.auth),
    noUpward('resources-below-webhooks', 'resources/', ABOVE.resources),
    noUpward('webhooks-below-app', 'webhooks/', ABOVE.webhooks),
    {
      name: 'tests-stay-out-of-src-layers',
      severity: 'error',
      comment: 'Code in src/ never imports the black-box test support.',
      from: { path: '^src/', pathNot: '\\.test\\.ts$' },
      to: { path: '^test/' },
    },
  ],
  options: {
    // TypeScript 7 has no compiler API; swc parses the sources. Type-only imports count too.
    parser: 'swc',
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|node_modules)/' },
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
