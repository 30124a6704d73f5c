// `npm run bench` (issues #6, #13): restwire against a bare-Fastify memory baseline and the
// floor of its own database stack on this machine, then webhook throughput, the feature targets
// (#18, #19, #20) and `serve --workers N` against one process (#21). Prints the tables, writes
// bench/out/latest.json and appends a section to bench/RESULTS.md (unless --no-write). Every child process, temp folder and database it makes
// is removed on the way out, on error and on Ctrl-C too.
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem, type } from 'node:os';
import { parseArgs } from 'node:util';
import { FEATURE_GROUPS, runFeatureScenarios } from './feature-scenarios.js';
import { runHttpScenarios } from './http-scenarios.js';
import { Processes } from './processes.js';
import { markdownReport, textReport } from './report.js';
import { runScaleOut } from './scale-out.js';
import { runWebhookThroughput } from './webhook-throughput.js';

const USAGE = `usage: npm run bench -- [options]

  --quick            every scenario for a second or two (what CI runs)
  --no-write         do not append to bench/RESULTS.md (bench/out/latest.json is still written)
  --duration N       seconds per request scenario (default 10; --quick 1)
  --warmup N         seconds of discarded warm-up before each (default 2; --quick 0.5)
  --connections N    autocannon connections (default 50)
  --webhooks         only the webhook throughput section
  --no-webhooks      only the request scenarios
  --ordered          webhook throughput with every webhook "ordering": "record" (issue 14)
  --events N         burst size in deliveries (default 10000; --quick 1000)
  --event-rate N     steady deliveries per second (default 500)
  --steady N         seconds of the steady phase (default 10; --quick 2)
  --note TEXT        a remark written with the section in bench/RESULTS.md
  --only LIST        only these sections, comma-separated: http (the #6/#13 request scenarios),
                     webhooks, ${FEATURE_GROUPS.join(', ')} (the targets of issues #18, #19, #20),
                     workers (issue 21: \`serve --workers N\` against one process and the floor,
                     GET one and POST, with where the machine's CPU went); all but http and
                     webhooks left out of --quick unless named here
  --workers N        run the request scenarios on \`restwire serve --workers N\` (node:cluster)
  --compare-workers N  the cluster size the workers section compares with one process (default 2)

  BENCH_DATABASE_URL=postgres://…  run restwire on a fresh database there (and webhooks with 1 and 2 workers)
  BENCH_REDIS_URL=redis://…        give restwire REDIS_URL`;

const RESULTS = new URL('./RESULTS.md', import.meta.url);
const OUT_DIR = new URL('./out/', import.meta.url);

const RESULTS_HEADER = `# Benchmark results

Appended by \`npm run bench\` (bench/run.js); newest last. Each section is one run on one
machine: for each request scenario, restwire, a bare-Fastify baseline answering the same shapes
from memory (bench/baseline.js) and the floor of restwire's database (bench/floor.js: bare
Fastify doing the same SQL with the same driver) loaded in alternating slices by autocannon on
127.0.0.1, so the load generator shares the machine's cores with the servers. Compare ratios
within a section, not figures across machines.

`;

function parseOptions(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      'no-write': { type: 'boolean', default: false },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      webhooks: { type: 'boolean', default: false },
      ordered: { type: 'boolean', default: false },
      'no-webhooks': { type: 'boolean', default: false },
      events: { type: 'string' },
      'event-rate': { type: 'string' },
      steady: { type: 'string' },
      note: { type: 'string' },
      workers: { type: 'string' },
      'compare-workers': { type: 'string' },
      only: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const number = (name, fallback, min) => {
    if (values[name] === undefined) return fallback;
    const n = Number(values[name]);
    if (!Number.isFinite(n) || n < min) throw new Error(`--${name}: expected a number ≥ ${min}, got ${values[name]}`);
    return n;
  };
  if (values.webhooks && values['no-webhooks']) throw new Error('--webhooks and --no-webhooks exclude each other');
  const quick = values.quick;
  const sections = ['http', 'webhooks', ...FEATURE_GROUPS, 'workers'];
  const only = values.only === undefined ? null : values.only.split(',').map((name) => name.trim()).filter(Boolean);
  for (const name of only ?? []) if (!sections.includes(name)) throw new Error(`--only: unknown section ${name}; one of ${sections.join(', ')}`);
  if (only && (values.webhooks || values['no-webhooks'])) throw new Error('--only excludes --webhooks and --no-webhooks');
  const chosen = (name) => (only ? only.includes(name) : true);
  return {
    quick,
    write: !values['no-write'],
    http: chosen('http') && !values.webhooks,
    webhooks: chosen('webhooks') && !values['no-webhooks'],
    // The feature groups start a server each: a full run has them, --quick (CI) only when named.
    features: FEATURE_GROUPS.filter((name) => (only ? only.includes(name) : !quick && !values.webhooks)),
    scaleOut: only ? only.includes('workers') : !quick && !values.webhooks,
    note: values.note ?? null,
    load: {
      duration: number('duration', quick ? 1 : 10, 1),
      warmup: number('warmup', quick ? 0.5 : 2, 0),
      connections: number('connections', 50, 1),
    },
    events: number('events', quick ? 1000 : 10_000, 10),
    eventRate: number('event-rate', 500, 10),
    steadySeconds: number('steady', quick ? 2 : 10, 1),
    stallMs: quick ? 5000 : 15_000,
    // A dispatcher slower than this leaves deliveries uncounted (reported as not arrived).
    maxWaitMs: quick ? 20_000 : 300_000,
    // `restwire serve --workers N` (node:cluster) for the request scenarios; 0 = one per core.
    workers: values.workers === undefined ? null : number('workers', 0, 0),
    compareWorkers: number('compare-workers', 2, 2),
    databaseUrl: process.env.BENCH_DATABASE_URL || null,
    ordered: values.ordered,
    redisUrl: process.env.BENCH_REDIS_URL || null,
  };
}

/** The command as typed, without --note (shown on its own) and any password in a URL. */
function commandLine(argv) {
  const env = [];
  for (const name of ['BENCH_DATABASE_URL', 'BENCH_REDIS_URL']) {
    if (!process.env[name]) continue;
    const url = new URL(process.env[name]);
    url.password = '';
    env.push(`${name}=${url}`);
  }
  const shown = argv.filter((arg, i) => !arg.startsWith('--note') && argv[i - 1] !== '--note');
  const quoted = shown.map((arg) => (/^[\w./=:-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", "'\\''")}'`));
  const command = process.env.npm_lifecycle_event === 'bench'
    ? `npm run bench${quoted.length ? ` -- ${quoted.join(' ')}` : ''}`
    : `node bench/run.js${quoted.length ? ` ${quoted.join(' ')}` : ''}`;
  return [...env, command].join(' ');
}

function machine() {
  const cores = cpus();
  return {
    cores: cores.length,
    model: cores[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    os: `${type()} ${release()}`,
    node: process.version,
    loadAverage: loadavg().map((load) => Math.round(load * 100) / 100),
  };
}

const log = (message) => process.stderr.write(`bench: ${message}\n`);

async function main() {
  const argv = process.argv.slice(2);
  const options = parseOptions(argv);
  const processes = new Processes();
  let stopping = false;
  const interrupt = (signal) => {
    if (stopping) return;
    stopping = true;
    log(`${signal}: stopping every child process and removing temp data`);
    void processes.cleanUp().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  process.once('exit', () => processes.cleanUpNow());

  const report = {
    date: new Date().toISOString(),
    machine: machine(),
    command: commandLine(argv),
    note: options.note,
    load: options.load,
    http: null,
    webhooks: null,
    features: null,
    scaleOut: null,
  };
  try {
    if (options.http) {
      log('request scenarios');
      report.http = await runHttpScenarios(processes, options, log);
    }
    if (options.webhooks) {
      log('webhook throughput');
      report.webhooks = await runWebhookThroughput(processes, options, log);
    }
    if (options.features.length) {
      log(`feature scenarios: ${options.features.join(', ')}`);
      report.features = await runFeatureScenarios(processes, options, options.features, log);
    }
    if (options.scaleOut) {
      log(`serve --workers ${options.compareWorkers} against one process`);
      report.scaleOut = await runScaleOut(processes, options, log);
    }
  } finally {
    await processes.cleanUp();
  }

  process.stdout.write(`\n${textReport(report)}\n`);
  mkdirSync(OUT_DIR, { recursive: true });
  writeFileSync(new URL('latest.json', OUT_DIR), `${JSON.stringify(report, null, 2)}\n`);
  log('wrote bench/out/latest.json');
  if (options.write) {
    if (!existsSync(RESULTS)) writeFileSync(RESULTS, RESULTS_HEADER);
    appendFileSync(RESULTS, `\n${markdownReport(report)}`);
    log('appended to bench/RESULTS.md');
  }
}

main().catch((error) => {
  log(error instanceof Error ? error.stack ?? error.message : String(error));
  process.exitCode = 1;
});
