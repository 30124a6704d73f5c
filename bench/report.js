// The benchmark's tables: plain text for the terminal, Markdown for bench/RESULTS.md.
import { PEAK_RSS_TARGET_MIB } from './http-scenarios.js';

const dash = '–';
const show = (value, suffix = '') => (value === null || value === undefined ? dash : `${value}${suffix}`);
const ratio = (value) => (value === null || value === undefined ? dash : `${value.toFixed(2)}×`);

/** The request scenarios as header + cells. */
function httpCells(http) {
  const header = ['Scenario', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'peak MiB: all (serve alone)', 'vs memory', 'vs floor', 'note'];
  const rows = http.rows.map((row) => {
    if (row.skipped) return [row.name, dash, dash, dash, dash, dash, dash, dash, `skipped: ${row.skipped}`];
    const notes = [];
    if (row.flagged) {
      const codes = Object.entries(row.statusCodes).map(([code, count]) => `${count}×${code}`).join(', ');
      notes.push(`FLAGGED: ${row.requests} answered, ${row.non2xx} non-2xx, ${row.errors} errors, ${row.timeouts} timeouts (${codes})`);
    }
    if (row.rssMet === false && row.server === 'restwire') notes.push(`RSS over ${PEAK_RSS_TARGET_MIB} MiB`);
    if (row.note) notes.push(row.note);
    const reference = row.server === 'restwire' ? null : dash;
    return [
      row.name,
      show(row.requestsPerSecond),
      show(row.p50Ms),
      show(row.p99Ms),
      show(row.non2xx),
      // With children (serve's dispatcher process, a cluster's workers): "all (own)".
      row.ownPeakRssMiB != null && row.ownPeakRssMiB !== row.peakRssMiB ? `${show(row.peakRssMiB)} (${row.ownPeakRssMiB})` : show(row.peakRssMiB),
      reference ?? ratio(row.vsBaseline),
      reference ?? ratio(row.vsFloor),
      notes.join('; '),
    ];
  });
  return { header, rows };
}

/** The targets of issue #13 as header + cells: the figure, what it is compared with, met or not. */
function targetCells(http) {
  const header = ['Target', 'restwire', 'compared with', 'ratio', 'met?'];
  const rows = http.targets.map((target) => {
    if (target.rss) {
      return [target.label, show(target.figure, ' MiB'), `${target.reference} MiB`, ratio(target.measured),
        target.met === null ? dash : target.met ? `met (highest: ${target.scenario})` : `NOT met (highest: ${target.scenario})`];
    }
    const of = http.rows.find((row) => row.id === target.of);
    return [
      target.label,
      show(target.figure, ' req/s'),
      `${show(target.reference, ' req/s')} (${of?.name ?? target.of})`,
      ratio(target.measured),
      target.met === null ? dash : target.met ? 'met' : 'NOT met',
    ];
  });
  return { header, rows };
}

/** "serve[, worker, worker]" peak RSS in MiB. */
const peaks = ({ serve, workers }) => [serve, ...workers].map((value) => show(value)).join(', ');

/** The webhook configurations as header + cells. */
function webhookCells(webhooks) {
  const header = [
    'Configuration',
    'steady events/s',
    'commit→1st attempt p50 ms',
    'p99 ms',
    'received',
    'backlog events',
    'drained',
    'deliveries/s',
    'first→last s',
    'peak RSS MiB steady',
    'peak RSS MiB drain',
    'targets',
    'note',
  ];
  const rows = webhooks.results.map((result) => {
    if (result.skipped) return [result.name, ...header.slice(1, -1).map(() => dash), `skipped: ${result.skipped}`];
    const { steady, backlog, peakRssMiB } = result;
    const notes = [`${result.auth} creates`];
    if (steady.received < steady.expected) notes.push(`steady: ${steady.expected - steady.received} deliveries never arrived`);
    if (backlog.received < backlog.expected) notes.push(`backlog: ${backlog.expected - backlog.received} deliveries never arrived`);
    if (steady.pacingLateMs > 50) notes.push(`pacing fell up to ${steady.pacingLateMs} ms behind`);
    notes.push(`backlog committed in ${backlog.createsSeconds} s`);
    if (result.workers > 0) notes.push('RSS: serve, then each worker');
    return [
      result.name,
      show(steady.eventRate),
      show(steady.commitToFirstAttemptP50Ms),
      show(steady.commitToFirstAttemptP99Ms),
      `${steady.received}/${steady.expected}`,
      show(backlog.expected),
      show(backlog.received),
      show(backlog.deliveriesPerSecond),
      show(backlog.firstToLastSeconds),
      peaks(peakRssMiB.steady),
      peaks(peakRssMiB.drain),
      result.targets.map(({ target, met }) => `${target}: ${met ? 'met' : 'NOT met'}`).join('; '),
      notes.join('; '),
    ];
  });
  return { header, rows };
}

/** The feature scenarios (issues #18, #19, #20): every row, with the server's CPU per request. */
function featureCells(features) {
  const header = ['Group', 'Scenario', 'req/s', 'CPU µs/request', 'p50 ms', 'p99 ms', 'non-2xx', 'peak RSS MiB', 'note'];
  const rows = [];
  for (const group of features.groups) {
    if (group.skipped) {
      rows.push([`${group.name} (#${group.issue})`, dash, dash, dash, dash, dash, dash, dash, `skipped: ${group.skipped}`]);
      continue;
    }
    for (const row of group.rows) {
      const note = row.flagged ? `FLAGGED: ${row.requests} answered, ${row.non2xx} non-2xx, ${row.errors} errors, ${row.timeouts} timeouts` : '';
      const records = row.records > 1 ? ` (${row.requestsPerSecond * row.records} records/s)` : '';
      rows.push([`${group.name} (#${group.issue})`, row.name, `${show(row.requestsPerSecond)}${records}`, show(row.cpuUsPerRequest), show(row.p50Ms), show(row.p99Ms), show(row.non2xx), show(row.peakRssMiB), note]);
    }
  }
  return { header, rows };
}

/** The targets of issues #18, #19 and #20 (and #21's peak RSS per group): with the feature, without it, the ratio (or difference), met or not. */
function featureTargetCells(features) {
  const header = ['Target', 'with', 'without', 'ratio', 'met?'];
  const rows = [];
  for (const group of features.groups) {
    if (group.skipped) {
      rows.push([`#${group.issue} (${group.name})`, dash, dash, dash, 'not measured']);
      continue;
    }
    for (const t of group.targets) {
      const measured = t.measured === null ? dash : t.difference ? `${t.measured >= 0 ? '+' : ''}${t.measured} ${t.unit.split(' ')[0]}` : ratio(t.measured);
      const met = t.met === null ? `not judged${t.note ? ` (${t.note})` : ''}` : t.met ? 'met' : 'NOT MET';
      rows.push([t.label, `${show(t.figure)} ${t.unit}`, `${show(t.reference)} ${t.unit}`, measured, t.sql ? `${met}; ${t.sql}` : met]);
    }
  }
  return { header, rows };
}

/**
 * `serve --workers N` against one process and the floor (issue 21): every row with where the CPU
 * went during its slices, in % of one core (the machine has `cores` × 100 %).
 */
function scaleOutCells(scale) {
  const header = ['Scenario', 'server', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'vs floor', 'vs 1 process',
    'server CPU', 'PostgreSQL CPU', 'Redis CPU', 'autocannon CPU', 'other work', 'machine busy', 'commits/s (creates each)', 'peak RSS MiB', 'note'];
  const share = ({ percent, usPerRequest }) => (percent === null ? dash : `${percent} % (${show(usPerRequest)} µs)`);
  const rows = scale.rows.map((row) => [
    row.scenario,
    row.name,
    show(row.requestsPerSecond),
    show(row.p50Ms),
    show(row.p99Ms),
    show(row.non2xx),
    row.kind === 'floor' ? dash : ratio(row.vsFloor),
    row.kind === 'many' ? ratio(row.vsOne) : dash,
    share(row.cpu.server),
    share(row.cpu.postgres),
    share(row.cpu.redis),
    share(row.cpu.loadGenerator),
    show(row.cpu.other, ' %'),
    show(row.cpu.machine, ' %'),
    row.commits ? `${row.commits.perSecond} (${show(row.commits.createsPerCommit)})` : dash,
    show(row.peakRssMiB),
    row.flagged ? `FLAGGED: ${row.requests} answered, ${row.non2xx} non-2xx, ${row.errors} errors, ${row.timeouts} timeouts` : '',
  ]);
  return { header, rows };
}

const scaleOutTitle = (report) => {
  const scale = report.scaleOut;
  return `serve --workers ${scale.workers} against one process (issue 21; ${scale.backend}${scale.redis ? ' + Redis' : ''}, a fresh store per server, ` +
    `${scale.seeded} seeded experiences, ${report.load.connections} connections, ${report.load.duration} s per server and scenario after ${report.load.warmup} s warm-up, ` +
    `the floor and both in alternating slices; CPU in % of one core over the slices (${report.machine.cores} cores = ${report.machine.cores * 100} %) ` +
    'and µs per request answered: the server\'s node processes, PostgreSQL\'s backends for its database, Redis (shared with other work), autocannon (the bench process), ' +
    'other work on the machine (the rest), the whole machine; on PostgreSQL, the POST rows\' commits per second and creates per commit, ' +
    'from the distinct transaction ids (xmin) of the rows created)';
};

const scaleOutVerdicts = (scale) =>
  scale.comparisons.map((c) => `- ${c.label}: ${show(c.figure)} vs ${show(c.reference)} req/s = ${ratio(c.measured)}${c.flagged ? ' (rows FLAGGED: requests failed)' : ''}`).join('\n');

const featuresTitle = (report) =>
  `Feature scenarios (issues #18, #19, #20; restwire on ${report.features.backend}, one project and fresh store per group, non-admin caller, ` +
  `${report.load.connections} connections, ${report.load.duration} s per scenario after ${report.load.warmup} s warm-up, with and without the feature in alternating slices; ` +
  'CPU = the server process\'s user + kernel time over the requests answered)';

/** Columns padded for a terminal. */
function textTable({ header, rows }) {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => String(row[column]).length)));
  const line = (cells) => cells.map((cell, column) => String(cell).padEnd(widths[column])).join('  ').trimEnd();
  return [line(header), line(widths.map((width) => '-'.repeat(width))), ...rows.map(line)].join('\n');
}

function markdownTable({ header, rows }) {
  const escape = (cell) => String(cell).replaceAll('|', '\\|');
  const line = (cells) => `| ${cells.map(escape).join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

const PEAK_MEMORY_NOTE =
  'Peak MiB: the server process\'s peak RSS; for a server of several processes (serve and its dispatcher process, or `--workers`), the peak of the first one\'s RSS ' +
  'plus what each child adds (its private pages; what it shares with the first, Node\'s binary among it, counts once), with the first one\'s own peak RSS in brackets.';

/** The whole report for the terminal. */
export function textReport(report) {
  const parts = [];
  if (report.http) {
    parts.push(`Requests (restwire${report.http.workers != null ? ` serve --workers ${report.http.workers}` : ''} on ${report.http.backend}${report.http.redis ? ' + Redis' : ''}; ${report.load.connections} connections, ${report.load.duration} s each after ${report.load.warmup} s warm-up, the servers of a scenario in alternating slices)`);
    parts.push(textTable(httpCells(report.http)));
    parts.push(PEAK_MEMORY_NOTE);
    parts.push(`\nTargets (issue #13)`);
    parts.push(textTable(targetCells(report.http)));
  }
  if (report.webhooks) {
    parts.push(`\nWebhooks (${report.webhooks.hooks} receivers answering 204; an event = one delivery to one webhook${report.webhooks.redis ? '; REDIS_URL set' : ''})`);
    parts.push(textTable(webhookCells(report.webhooks)));
  }
  if (report.features) {
    parts.push(`\n${featuresTitle(report)}`, textTable(featureCells(report.features)), '\nTargets (issues #18, #19, #20; #21 for memory)', textTable(featureTargetCells(report.features)));
  }
  if (report.scaleOut) {
    parts.push(`\n${scaleOutTitle(report)}`, textTable(scaleOutCells(report.scaleOut)), '', scaleOutVerdicts(report.scaleOut));
  }
  return parts.join('\n');
}

/** The section appended to bench/RESULTS.md. */
export function markdownReport(report) {
  const { machine } = report;
  const parts = [
    `## ${report.date.replace('T', ' ').replace(/:\d\d\.\d+Z$/, ' UTC')}`,
    '',
    `- Machine: ${machine.cores} cores (${machine.model}), ${machine.memoryGiB} GiB, ${machine.os}; Node ${machine.node}; load average at start ${machine.loadAverage.join(' / ')}`,
    `- Command: \`${report.command}\``,
  ];
  if (report.note) parts.push(`- Note: ${report.note}`);
  if (report.http) {
    parts.push(
      `- Requests: restwire${report.http.workers != null ? ` serve --workers ${report.http.workers}` : ''} on ${report.http.backend}${report.http.redis ? ' + Redis' : ''} (${report.http.seeded} seeded experiences), ` +
        `autocannon ${report.load.connections} connections, pipelining 1, ${report.load.duration} s per server and scenario after ${report.load.warmup} s warm-up, ` +
        'restwire, the memory baseline (bench/baseline.js) and the floor of its database (bench/floor.js) in alternating slices',
      '',
      markdownTable(httpCells(report.http)),
      '',
      PEAK_MEMORY_NOTE,
      '',
      markdownTable(targetCells(report.http)),
    );
  }
  if (report.webhooks) {
    const w = report.webhooks;
    parts.push(
      '',
      `- Webhooks: ${w.hooks} webhooks, each a node:http receiver on 127.0.0.1 answering 204; an event is one delivery to one webhook${w.redis ? '; REDIS_URL set in every configuration' : ''}. ` +
        `Steady: creates paced for ${w.eventRate} events/s over ${w.steadySeconds} s while the dispatcher runs; commit = the create's response reaching the client. ` +
        `Backlog: ${w.events} events committed with nothing dispatching, then drained (SQLite: serve restarted with its dispatcher; PostgreSQL: the workers started).`,
      '',
      markdownTable(webhookCells(w)),
    );
  }
  if (report.features) {
    parts.push('', `- ${featuresTitle(report)}`, '', markdownTable(featureCells(report.features)), '', markdownTable(featureTargetCells(report.features)));
  }
  if (report.scaleOut) {
    parts.push('', `- ${scaleOutTitle(report)}`, '', markdownTable(scaleOutCells(report.scaleOut)), '', scaleOutVerdicts(report.scaleOut));
  }
  return `${parts.join('\n')}\n`;
}
