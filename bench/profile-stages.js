// Where a request's CPU goes, by pipeline stage (issue 21): reads a .cpuprofile written by
// `node bench/profile.js --prof` (bench/out/restwire.cpuprofile) and sums the samples of the
// last SECONDS of load (start-up, seeding and idle left out), each sample given to the first
// stage below that names a frame of its stack (so pg's and ioredis's own socket writes count as
// theirs, a response's as the socket write).
//
//   node bench/profile-stages.js bench/out/restwire.cpuprofile [SECONDS=4.5]
import { readFileSync } from 'node:fs';
const [file, windowArg] = process.argv.slice(2);
if (!file) throw new Error("usage: node bench/profile-stages.js FILE.cpuprofile [SECONDS]");
const p = JSON.parse(readFileSync(file, 'utf8'));
const nodes = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
// time of each sample
let t = p.startTime;
const times = [];
for (const d of p.timeDeltas) { t += d; times.push(t); }
const win = Number(windowArg ?? 4.5) * 1e6;
// The load ends ~at the last busy sample; find last non-idle sample time
let lastBusy = 0;
p.samples.forEach((id, i) => { const n = nodes.get(id); if (!['(idle)','(program)'].includes(n.callFrame.functionName)) lastBusy = times[i]; });
const from = lastBusy - win - 0.3e6, to = lastBusy - 0.3e6;
const STAGES = [
  ['GC', (f) => f.functionName === '(garbage collector)'],
  ['metrics onResponse', (f) => f.functionName === 'recordRequest'],
  ['security headers', (f) => f.functionName === 'securityHeaders'],
  ['request id', (f) => /logging\.js/.test(f.url) && f.functionName === ''],
  ['authenticate', (f) => f.functionName === 'authenticate' && /pipeline\.js/.test(f.url)],
  ['negotiate', (f) => f.functionName === 'negotiate'],
  ['idempotency', (f) => /idempotency/.test(f.url)],
  ['render (json, etag)', (f) => f.functionName === 'render' && /pipeline\.js/.test(f.url)],
  ['throttle (applyThrottle)', (f) => f.functionName === 'applyThrottle' || f.functionName === 'hit'],
  ['ioredis', (f) => /ioredis|rate-limiter-flexible|redis-store|request-throttle/.test(f.url)],
  ['pg driver', (f) => /node_modules\/pg(-protocol|-pool)?\//.test(f.url)],
  ['socket write (writev)', (f) => f.functionName === 'writev' || f.functionName === 'writeBuffer' || f.functionName === 'writeUtf8String' || f.functionName === 'writeLatin1String'],
  ['reply send (Fastify, http headers)', (f) => f.functionName === 'send' && /pipeline\.js/.test(f.url)],
  ['sqlite statement', (f) => /sqlite-driver\.js/.test(f.url) && f.functionName === 'executeQuery'],
  ['kysely', (f) => /kysely/.test(f.url)],
  ['group commit / write unit', (f) => /group-commit|write-unit|pipelining/.test(f.url)],
  ['change log / live', (f) => /change-log|change-feed|live\/|outbox/.test(f.url)],
  ['viewset action (handle/version)', (f) => /resources\//.test(f.url)],
  ['pipeline other (initial/dispatch/permit)', (f) => /http\/pipeline\.js/.test(f.url)],
  ['routing (find-my-way)', (f) => /find-my-way/.test(f.url)],
  ['fastify other', (f) => /fastify\//.test(f.url)],
  ['node http parse/response', (f) => /_http_|stream|net\.js|node:net/.test(f.url)],
];
const totals = new Map(); let busy = 0, all = 0;
p.samples.forEach((id, i) => {
  if (times[i] < from || times[i] > to) return;
  const d = p.timeDeltas[i] ?? 0; all += d;
  const leaf = nodes.get(id).callFrame;
  if (leaf.functionName === '(idle)') return;
  busy += d;
  const frames = []; for (let at = id; at !== undefined; at = parent.get(at)) frames.push(nodes.get(at).callFrame);
  let stage = 'other';
  outer: for (const [name, test] of STAGES) { for (const f of frames) if (test(f)) { stage = name; break outer; } }
  totals.set(stage, (totals.get(stage) ?? 0) + d);
});
console.log(`window ${(to-from)/1e6}s, busy ${(100*busy/all).toFixed(1)} %`);
for (const [name, v] of [...totals].sort((a,b)=>b[1]-a[1])) console.log(`${(100*v/busy).toFixed(1).padStart(6)} %  ${name}`);
