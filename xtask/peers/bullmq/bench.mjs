#!/usr/bin/env node
// BullMQ peer benchmark for `cargo xtask bench`.
//
//   REDIS_URL=redis://127.0.0.1:6379/0 node bench.mjs <mode> [options]
//
// Modes: enqueue | e2e | latency | priority | tenants (see usage() below and crates/chronos/docs/benchmarks.md).
// Results: one JSON object per line on stdout. Everything else goes to stderr.

import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';

const require = createRequire(import.meta.url);
const BULLMQ_VERSION = require('bullmq/package.json').version;
const IOREDIS_VERSION = require('ioredis/package.json').version;

const PEER = 'bullmq';
const JOB_NAME = 't';

// ---------------------------------------------------------------------------
// small helpers

const log = (...args) => console.error('[bullmq-peer]', ...args);

function emit(record) {
  process.stdout.write(JSON.stringify({ peer: PEER, ...record }) + '\n');
}

function usage() {
  return [
    'usage: REDIS_URL=redis://HOST:PORT/DB node bench.mjs <mode> [options]',
    '',
    'modes:',
    '  enqueue  --n 100000 --payload 100 [--producers 50] [--batch 1000]',
    '  e2e      --n 100000 --payload 100 --concurrency 1,16,64,256 [--n1 20000]',
    '  latency  --rate 50 --seconds 10 --payload 100 [--worker-concurrency 50]',
    '  priority --n 100000 --payload 100 --concurrency 1,16,64 [--n1 20000] [--producers 50]',
    '           [--batch 1000] [--work-ms 5] [--flow-ms 10] [--flow-batch 5] [--backlog 200]',
    '           [--cap 10] [--runs 3]',
    '  tenants  --n 100000 --payload 100 --concurrency 1,16,64 [--n1 20000] [--producers 50]',
    '           [--batch 1000] [--fair-concurrency 16] [--cap 120]',
    '',
    'common options:',
    '  --timeout SECONDS   abort (after cleanup) if the mode runs longer (default 900)',
  ].join('\n');
}

function die(msg, code = 2) {
  console.error(`bullmq-peer: error: ${msg}`);
  process.exit(code);
}

const DEFAULTS = {
  enqueue: { n: '100000', payload: '100', producers: '50', batch: '1000' },
  e2e: { n: '100000', payload: '100', concurrency: '1,16,64,256', n1: '20000', batch: '1000' },
  latency: { rate: '50', seconds: '10', payload: '100', 'worker-concurrency': '50' },
  priority: {
    n: '100000', payload: '100', concurrency: '1,16,64', n1: '20000', producers: '50', batch: '1000',
    'work-ms': '5', 'flow-ms': '10', 'flow-batch': '5', backlog: '200', cap: '10', runs: '3',
  },
  tenants: {
    n: '100000', payload: '100', concurrency: '1,16,64', n1: '20000', producers: '50', batch: '1000',
    'fair-concurrency': '16', cap: '120',
  },
};

function parseArgs(argv) {
  const mode = argv[0];
  if (!mode || mode === '-h' || mode === '--help') {
    console.error(usage());
    process.exit(mode ? 0 : 2);
  }
  if (!(mode in DEFAULTS)) die(`unknown mode '${mode}'\n${usage()}`);
  const allowed = new Set([...Object.keys(DEFAULTS[mode]), 'timeout']);
  const raw = { ...DEFAULTS[mode], timeout: '900' };
  for (let i = 1; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) die(`unexpected argument '${arg}'\n${usage()}`);
    let key = arg.slice(2);
    let value;
    const eq = key.indexOf('=');
    if (eq >= 0) {
      value = key.slice(eq + 1);
      key = key.slice(0, eq);
    } else {
      value = argv[++i];
      if (value === undefined) die(`option --${key} needs a value`);
    }
    if (!allowed.has(key)) die(`option --${key} is not valid for mode '${mode}'\n${usage()}`);
    raw[key] = value;
  }
  const positiveInt = (key) => {
    const v = Number(raw[key]);
    if (!Number.isInteger(v) || v <= 0) die(`--${key} must be a positive integer, got '${raw[key]}'`);
    return v;
  };
  const opts = { mode, timeoutS: positiveInt('timeout') };
  for (const key of Object.keys(DEFAULTS[mode])) {
    if (key === 'concurrency') {
      opts.concurrency = raw.concurrency.split(',').map((s) => {
        const v = Number(s.trim());
        if (!Number.isInteger(v) || v <= 0) die(`--concurrency must be a comma list of positive integers, got '${raw.concurrency}'`);
        return v;
      });
    } else if (key === 'payload') {
      const v = Number(raw.payload);
      if (!Number.isInteger(v) || v < 0) die(`--payload must be a non-negative integer, got '${raw.payload}'`);
      opts.payload = v;
    } else {
      opts[key.replace(/-(\w)/g, (_, c) => c.toUpperCase())] = positiveInt(key);
    }
  }
  return opts;
}

function redactUrl(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '<unparseable REDIS_URL>';
  }
}

// Wall clock in ms with sub-ms resolution, monotonic within this process.
const nowMs = () => performance.timeOrigin + performance.now();

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Resolves to `fallback` if `p` has not settled within `ms`; never rejects.
function bounded(p, ms, fallback = 'timeout') {
  let timer;
  return Promise.race([
    Promise.resolve(p).catch((e) => e),
    new Promise((r) => {
      timer = setTimeout(() => r(fallback), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

// Job data whose JSON encoding is exactly `payload` bytes: {"p":"xxxx"}.
// (For payload < 8 the JSON is 8 bytes: {"p":""}.)
function makeData(payload) {
  return { p: 'x'.repeat(Math.max(0, payload - 8)) };
}

const round = (x, digits) => Number(x.toFixed(digits));

// Nearest-rank percentile on an ascending array.
function percentile(sorted, q) {
  if (sorted.length === 0) return NaN;
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1];
}

// ---------------------------------------------------------------------------
// run context: Redis connection, unique key prefix, resource tracking, cleanup

class Run {
  constructor(url) {
    this.url = url;
    // Every key this run creates lives under "<prefix>:". Kept short (BullMQ's
    // default is "bull") because key names count in bytes_per_task.
    this.prefix = `bmq-${randomBytes(3).toString('hex')}`;
    this.queues = new Set();
    this.workers = new Set();
    this.admin = null;
    this.cleaning = null;
    this.stopping = false; // set on abort; long loops check it
  }

  connection() {
    // Fresh options object per Queue/Worker: BullMQ mutates it.
    return { url: this.url, maxRetriesPerRequest: null };
  }

  async connectAdmin() {
    const admin = new IORedis(this.url, {
      lazyConnect: true,
      connectTimeout: 3000,
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
      retryStrategy: () => null, // no reconnect: fail fast
    });
    let lastError = null;
    admin.on('error', (e) => {
      lastError = e; // reported through the rejected promise below
    });
    try {
      await admin.connect();
      await admin.ping();
    } catch (e) {
      admin.disconnect();
      const cause = lastError ?? e;
      throw new Error(`cannot reach Redis at ${redactUrl(this.url)}: ${cause && cause.message ? cause.message : cause}`);
    }
    this.admin = admin;
    const info = await admin.info('server');
    const version = /redis_version:(\S+)/.exec(info)?.[1] ?? '?';
    log(`redis ${version} at ${redactUrl(this.url)}; bullmq ${BULLMQ_VERSION}, ioredis ${IOREDIS_VERSION}, node ${process.version}`);
    log(`key prefix for this run: ${this.prefix}:`);
  }

  async usedMemory() {
    const info = await this.admin.info('memory');
    const m = /^used_memory:(\d+)/m.exec(info);
    if (!m) throw new Error('INFO memory did not report used_memory');
    return Number(m[1]);
  }

  // Redis CPU (user + sys, us) and per-command calls, for the cost of one phase. The Redis is
  // used by this phase alone, so the delta between two snaps is the phase's cost.
  async snap() {
    const stats = await this.admin.info('commandstats');
    const cpu = await this.admin.info('cpu');
    const secs = (name) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(cpu)?.[1] ?? NaN);
    const calls = new Map();
    for (const m of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
      if (m[1] !== 'info') calls.set(m[1], Number(m[2]));
    }
    return { cpuUs: (secs('used_cpu_user') + secs('used_cpu_sys')) * 1e6, calls };
  }

  // Per-task cost between two snaps, as fields of a result line. Calls count as commandstats
  // does: EVALSHA and each command inside the script.
  static cost(before, after, n) {
    const per = [];
    for (const [name, c] of after.calls) {
      const d = c - (before.calls.get(name) ?? 0);
      if (d > 0) per.push([name, d / n]);
    }
    // By calls as printed (two decimals), then by name (a script's first call may be an EVAL).
    const shown = (x) => Math.round(x * 100);
    per.sort((a, b) => shown(b[1]) - shown(a[1]) || a[0].localeCompare(b[0]));
    return {
      redis_cpu_us_per_task: round((after.cpuUs - before.cpuUs) / n, 2),
      redis_calls_per_task: round(per.reduce((s, [, x]) => s + x, 0), 3),
      redis_top: per.slice(0, 5).map(([name, x]) => `${name} ${x.toFixed(2)}`).join('; '),
    };
  }

  async queue(name) {
    const q = new Queue(name, { connection: this.connection(), prefix: this.prefix });
    q.on('error', (e) => log(`queue ${name} error: ${e.message}`));
    this.queues.add(q);
    await q.waitUntilReady();
    return q;
  }

  worker(name, processor, opts) {
    const w = new Worker(name, processor, {
      connection: this.connection(),
      prefix: this.prefix,
      ...opts,
    });
    w.on('error', (e) => log(`worker ${name} error: ${e.message}`));
    this.workers.add(w);
    return w;
  }

  async closeWorker(w) {
    this.workers.delete(w);
    await w.close();
  }

  // Delete a queue's data and close it.
  async dropQueue(q) {
    this.queues.delete(q);
    const t0 = nowMs();
    await q.obliterate({ force: true });
    await q.close();
    log(`  obliterated queue '${q.name}' in ${((nowMs() - t0) / 1000).toFixed(1)} s`);
  }

  // Best effort, bounded: close workers, obliterate remaining queues, then
  // delete any leftover key under this run's prefix.
  cleanup() {
    if (!this.cleaning) this.cleaning = this._cleanup();
    return this.cleaning;
  }

  async _cleanup() {
    for (const w of [...this.workers]) {
      this.workers.delete(w);
      const r = await bounded(w.close(), 10_000);
      if (r === 'timeout') log(`worker '${w.name}' did not close within 10 s`);
    }
    for (const q of [...this.queues]) {
      this.queues.delete(q);
      const r = await bounded(q.obliterate({ force: true }), 60_000);
      if (r instanceof Error || r === 'timeout') log(`obliterate '${q.name}' failed: ${r.message ?? r}`);
      await bounded(q.close(), 5_000);
    }
    if (this.admin) {
      const sweep = async () => {
        let cursor = '0';
        let deleted = 0;
        do {
          const [next, keys] = await this.admin.scan(cursor, 'MATCH', `${this.prefix}:*`, 'COUNT', 1000);
          cursor = next;
          if (keys.length) deleted += await this.admin.unlink(...keys);
        } while (cursor !== '0');
        return deleted;
      };
      const r = await bounded(sweep(), 60_000);
      if (typeof r === 'number') {
        if (r > 0) log(`removed ${r} leftover key(s) under ${this.prefix}:`);
      } else {
        log(`leftover key sweep failed: ${r.message ?? r}`);
      }
      this.admin.disconnect();
      this.admin = null;
    }
  }
}

// ---------------------------------------------------------------------------
// modes

// `opts(i)` gives the options of the i-th job (none by default).
async function fillBulk(run, q, n, batch, data, opts = () => undefined) {
  for (let done = 0; done < n && !run.stopping; ) {
    const size = Math.min(batch, n - done);
    const jobs = new Array(size);
    for (let i = 0; i < size; i++) jobs[i] = { name: JOB_NAME, data, opts: opts(done + i) };
    await q.addBulk(jobs);
    done += size;
  }
}

async function expectWaiting(q, n) {
  const counts = await q.getJobCounts('wait', 'active', 'completed', 'failed', 'delayed', 'prioritized');
  if (counts.wait !== n) throw new Error(`queue '${q.name}': expected ${n} waiting jobs, found ${JSON.stringify(counts)}`);
}

async function modeEnqueue(run, o) {
  const data = makeData(o.payload);
  log(`enqueue: n=${o.n} payload=${o.payload} B (job data JSON), producers=${o.producers}, batch=${o.batch}`);

  // (a) queue.add from N concurrent producers sharing one Queue (one connection).
  {
    const q = await run.queue('single');
    let issued = 0;
    const producer = async () => {
      while (issued < o.n && !run.stopping) {
        issued++;
        await q.add(JOB_NAME, data);
      }
    };
    const s0 = await run.snap();
    const t0 = nowMs();
    await Promise.all(Array.from({ length: o.producers }, producer));
    const secs = (nowMs() - t0) / 1000;
    const cost = Run.cost(s0, await run.snap(), o.n);
    await expectWaiting(q, o.n);
    emit({ mode: 'enqueue', case: `single_c${o.producers}`, n: o.n, payload: o.payload, tasks_per_s: round(o.n / secs, 1), ...cost });
    log(`  single_c${o.producers}: ${o.n} jobs in ${secs.toFixed(2)} s`);
    await run.dropQueue(q);
  }

  // (b) queue.addBulk, one batch in flight at a time.
  {
    const q = await run.queue('bulk');
    const s0 = await run.snap();
    const t0 = nowMs();
    await fillBulk(run, q, o.n, o.batch, data);
    const secs = (nowMs() - t0) / 1000;
    const cost = Run.cost(s0, await run.snap(), o.n);
    await expectWaiting(q, o.n);
    emit({ mode: 'enqueue', case: `bulk_${o.batch}`, n: o.n, payload: o.payload, tasks_per_s: round(o.n / secs, 1), ...cost });
    log(`  bulk_${o.batch}: ${o.n} jobs in ${secs.toFixed(2)} s`);
    await run.dropQueue(q);
  }

  // (c) Redis memory per pending job (no worker), via INFO used_memory delta.
  {
    const q = await run.queue('mem');
    await sleep(200);
    const before = await run.usedMemory();
    await fillBulk(run, q, o.n, o.batch, data);
    await expectWaiting(q, o.n);
    await sleep(200);
    const after = await run.usedMemory();
    const perTask = (after - before) / o.n;
    const sample = await run.admin.call('MEMORY', 'USAGE', q.toKey('1'), 'SAMPLES', '0');
    log(`  (MEMORY USAGE of one job hash '${q.toKey('1')}': ${sample} B)`);
    emit({
      mode: 'enqueue',
      case: 'bytes_per_task',
      n: o.n,
      payload: o.payload,
      value: round(perTask, 1),
      used_memory_before: before,
      used_memory_after: after,
    });
    log(`  bytes_per_task: used_memory ${before} -> ${after} (${perTask.toFixed(1)} B/job)`);
    await run.dropQueue(q);
  }

  // (d), (e) Redis memory per finished job that is kept: completed, and failed (one attempt,
  // the processor throws). Jobs are added without options: BullMQ's defaults keep every
  // completed and failed job (removeOnComplete/removeOnFail unset) and make one attempt.
  await bytesPerKept(run, o, data, 'completed');
  await bytesPerKept(run, o, data, 'failed');
}

// Memory per kept finished job, measured as bytes_per_task is, after a first job has paid the
// queue's fixed cost (its completed or failed set, the worker's keys).
async function bytesPerKept(run, o, data, target) {
  const q = await run.queue(`mem-${target}`);
  let done = 0;
  const processor = target === 'completed' ? async () => {} : async () => {
    throw new Error('boom');
  };
  const w = run.worker(q.name, processor, { concurrency: 64 });
  w.on(target, () => {
    done++;
  });
  await w.waitUntilReady();
  const settled = async (n) => {
    const deadline = nowMs() + 300_000;
    while (done < n && !run.stopping) {
      if (nowMs() > deadline) throw new Error(`bytes_per_${target}: only ${done} of ${n} jobs ${target} in 300 s`);
      await sleep(5);
    }
  };
  await q.add(JOB_NAME, data);
  await settled(1);
  await sleep(200);
  const before = await run.usedMemory();
  await fillBulk(run, q, o.n, o.batch, data);
  await settled(o.n + 1);
  await run.closeWorker(w);
  await sleep(200);
  const after = await run.usedMemory();
  const counts = await q.getJobCounts(target);
  if (counts[target] !== o.n + 1) throw new Error(`bytes_per_${target}: expected ${o.n + 1} ${target} jobs, found ${JSON.stringify(counts)}`);
  const perTask = (after - before) / o.n;
  emit({
    mode: 'enqueue',
    case: `bytes_per_${target}`,
    n: o.n,
    payload: o.payload,
    value: round(perTask, 1),
    used_memory_before: before,
    used_memory_after: after,
  });
  log(`  bytes_per_${target}: used_memory ${before} -> ${after} (${perTask.toFixed(1)} B/job)`);
  await run.dropQueue(q);
}

async function modeE2e(run, o) {
  const data = makeData(o.payload);
  log(`e2e: n=${o.n} (n1=${o.n1} for concurrency 1) payload=${o.payload} B, concurrency=${o.concurrency.join(',')}`);
  for (const c of o.concurrency) {
    const n = c === 1 ? Math.min(o.n, o.n1) : o.n;
    const q = await run.queue(`e2e-c${c}`);
    await fillBulk(run, q, n, o.batch, data); // not timed
    await expectWaiting(q, n);
    const { secs, cost, cpuUs } = await drainTimed(run, q, c, n);
    emit({ mode: 'e2e', concurrency: c, n, payload: o.payload, tasks_per_s: round(n / secs, 1), ...cost, worker_cpu_us_per_task: round(cpuUs / n, 2) });
    log(`  concurrency ${c}: ${n} jobs in ${secs.toFixed(2)} s`);
    await run.dropQueue(q);
  }
}

// Drains the n jobs waiting in q with one no-op Worker of concurrency c: seconds from
// `worker.run()` to the n-th `completed` event, and the Redis cost from the worker's start to
// its close.
async function drainTimed(run, q, c, n) {
  let completed = 0;
  let failed = 0;
  let finish;
  const allDone = new Promise((r) => (finish = r));
  const w = run.worker(q.name, async () => {}, {
    concurrency: c,
    autorun: false,
    // Worker-level equivalent of job option removeOnComplete/removeOnFail: true.
    removeOnComplete: { count: 0 },
    removeOnFail: { count: 0 },
  });
  w.on('completed', () => {
    if (++completed + failed === n) finish();
  });
  w.on('failed', (_job, err) => {
    if (failed++ === 0) log(`  job failed: ${err?.message}`);
    if (completed + failed === n) finish();
  });
  const s0 = await run.snap();
  await w.waitUntilReady();

  const t0 = nowMs();
  // The worker's own CPU (user + system) while it drains: this process runs nothing else then.
  const cpu0 = process.cpuUsage();
  const running = w.run().catch((e) => log(`worker run() ended with error: ${e.message}`));
  await allDone;
  const secs = (nowMs() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const cpuUs = cpu.user + cpu.system;
  await run.closeWorker(w);
  await running;
  const cost = Run.cost(s0, await run.snap(), n);
  if (failed > 0) throw new Error(`drain at concurrency ${c}: ${failed} of ${n} jobs failed`);

  const counts = await q.getJobCounts('wait', 'active', 'completed', 'failed', 'prioritized');
  if (counts.wait + counts.active + counts.completed + counts.failed + counts.prioritized !== 0) {
    throw new Error(`drain at concurrency ${c}: queue not empty after run: ${JSON.stringify(counts)}`);
  }
  return { secs, cost, cpuUs };
}

// chronos-rs level n (0..9, 0 first) is BullMQ priority n + 1 (1 first; 0 means no priority).
const spread = (i) => ({ priority: (i % 10) + 1 });

async function expectPrioritized(q, n) {
  const counts = await q.getJobCounts('wait', 'prioritized');
  if (counts.prioritized !== n) throw new Error(`queue '${q.name}': expected ${n} prioritized jobs, found ${JSON.stringify(counts)}`);
}

// The `enqueue` and `e2e` measurements with jobs spread over priorities 1..10, then the
// starvation runs.
async function modePriority(run, o) {
  const data = makeData(o.payload);
  log(`priority: n=${o.n} (n1=${o.n1} for concurrency 1) payload=${o.payload} B, priorities 1..10, producers=${o.producers}, batch=${o.batch}, concurrency=${o.concurrency.join(',')}`);
  {
    const q = await run.queue('prio-single');
    let issued = 0;
    const producer = async () => {
      while (issued < o.n && !run.stopping) {
        await q.add(JOB_NAME, data, spread(issued++));
      }
    };
    const s0 = await run.snap();
    const t0 = nowMs();
    await Promise.all(Array.from({ length: o.producers }, producer));
    const secs = (nowMs() - t0) / 1000;
    const cost = Run.cost(s0, await run.snap(), o.n);
    await expectPrioritized(q, o.n);
    emit({ mode: 'priority', case: `enqueue_single_c${o.producers}`, n: o.n, payload: o.payload, tasks_per_s: round(o.n / secs, 1), ...cost });
    log(`  enqueue_single_c${o.producers}: ${o.n} jobs in ${secs.toFixed(2)} s`);
    await run.dropQueue(q);
  }
  {
    const q = await run.queue('prio-bulk');
    const s0 = await run.snap();
    const t0 = nowMs();
    await fillBulk(run, q, o.n, o.batch, data, spread);
    const secs = (nowMs() - t0) / 1000;
    const cost = Run.cost(s0, await run.snap(), o.n);
    await expectPrioritized(q, o.n);
    emit({ mode: 'priority', case: `enqueue_bulk_${o.batch}`, n: o.n, payload: o.payload, tasks_per_s: round(o.n / secs, 1), ...cost });
    log(`  enqueue_bulk_${o.batch}: ${o.n} jobs in ${secs.toFixed(2)} s`);
    await run.dropQueue(q);
  }
  for (const c of o.concurrency) {
    const n = c === 1 ? Math.min(o.n, o.n1) : o.n;
    const q = await run.queue(`prio-drain-c${c}`);
    await fillBulk(run, q, n, o.batch, data, spread); // not timed
    await expectPrioritized(q, n);
    const { secs, cost } = await drainTimed(run, q, c, n);
    emit({ mode: 'priority', case: 'drain', concurrency: c, n, payload: o.payload, tasks_per_s: round(n / secs, 1), ...cost });
    log(`  drain concurrency ${c}: ${n} jobs in ${secs.toFixed(2)} s`);
    await run.dropQueue(q);
  }
  for (let i = 0; i < o.runs && !run.stopping; i++) await starvation(run, o, i);
}

// One priority-10 job behind a priority-1 backlog, while priority-1 jobs keep arriving
// (flow-batch every flow-ms) faster than a concurrency-1 worker whose jobs take work-ms runs
// them. BullMQ has no aging: the run reports whether the low job started within the cap, the
// starts between its add and its start (or all starts within the cap), and its wait.
async function starvation(run, o, i) {
  const q = await run.queue(`prio-starve-${i}`);
  const urgent = () => ({ priority: 1 });
  const flow = { low: false };
  await fillBulk(run, q, o.backlog, o.flowBatch, flow, urgent);
  let starts = 0;
  let low = null;
  const w = run.worker(
    q.name,
    async (job) => {
      const before = starts++;
      if (job.data.low) low = { before, at: nowMs() };
      await sleep(o.workMs);
    },
    { concurrency: 1, removeOnComplete: { count: 0 }, removeOnFail: { count: 0 } },
  );
  await w.waitUntilReady();
  await sleep(200); // a steady rate on the backlog first
  const startsAt = starts;
  const t0 = nowMs();
  await q.add(JOB_NAME, { low: true }, { priority: 10 });
  let result = null;
  for (let next = t0 + o.flowMs; !run.stopping; next += o.flowMs) {
    const wait = next - nowMs();
    if (wait > 0) await sleep(wait);
    if (low) {
      result = { ran: 1, starts: low.before - startsAt, waited_ms: round(low.at - t0, 1) };
      break;
    }
    if (nowMs() - t0 >= o.cap * 1000) {
      result = { ran: 0, starts: starts - startsAt, waited_ms: o.cap * 1000 };
      break;
    }
    await fillBulk(run, q, o.flowBatch, o.flowBatch, flow, urgent);
  }
  await run.closeWorker(w);
  emit({
    mode: 'priority',
    case: 'starvation',
    run: i,
    ...result,
    cap_s: o.cap,
    flow_per_s: round((o.flowBatch * 1000) / o.flowMs, 1),
    work_ms: o.workMs,
  });
  log(`  starvation run ${i}: ${result?.ran ? `ran after ${result.starts} starts` : `not run after ${o.cap} s`}`);
  await run.dropQueue(q);
}

// The reference for chronos-rs's tenants: BullMQ's open-source version has no groups (fair
// sharing between groups and per-group concurrency are in its paid edition), so these are plain
// jobs: enqueue (single and bulk), drain, and a newcomer's single job behind a backlog of n,
// which waits in FIFO order (starts counted as in `starvation`, up to --cap seconds).
async function modeTenants(run, o) {
  const data = makeData(o.payload);
  log(`tenants (plain jobs: no groups in bullmq): n=${o.n} (n1=${o.n1} for concurrency 1) payload=${o.payload} B, producers=${o.producers}, batch=${o.batch}, concurrency=${o.concurrency.join(',')}`);
  {
    const q = await run.queue('tn-single');
    let issued = 0;
    const producer = async () => {
      while (issued < o.n && !run.stopping) {
        issued++;
        await q.add(JOB_NAME, data);
      }
    };
    const s0 = await run.snap();
    const t0 = nowMs();
    await Promise.all(Array.from({ length: o.producers }, producer));
    const secs = (nowMs() - t0) / 1000;
    const cost = Run.cost(s0, await run.snap(), o.n);
    await expectWaiting(q, o.n);
    emit({ mode: 'tenants', case: `enqueue_single_c${o.producers}`, n: o.n, payload: o.payload, tasks_per_s: round(o.n / secs, 1), ...cost });
    log(`  enqueue_single_c${o.producers}: ${o.n} jobs in ${secs.toFixed(2)} s`);
    await run.dropQueue(q);
  }
  {
    const q = await run.queue('tn-bulk');
    const s0 = await run.snap();
    const t0 = nowMs();
    await fillBulk(run, q, o.n, o.batch, data);
    const secs = (nowMs() - t0) / 1000;
    const cost = Run.cost(s0, await run.snap(), o.n);
    await expectWaiting(q, o.n);
    emit({ mode: 'tenants', case: `enqueue_bulk_${o.batch}`, n: o.n, payload: o.payload, tasks_per_s: round(o.n / secs, 1), ...cost });
    log(`  enqueue_bulk_${o.batch}: ${o.n} jobs in ${secs.toFixed(2)} s`);
    await run.dropQueue(q);
  }
  for (const c of o.concurrency) {
    const n = c === 1 ? Math.min(o.n, o.n1) : o.n;
    const q = await run.queue(`tn-drain-c${c}`);
    await fillBulk(run, q, n, o.batch, data); // not timed
    await expectWaiting(q, n);
    const { secs, cost } = await drainTimed(run, q, c, n);
    emit({ mode: 'tenants', case: 'drain', concurrency: c, n, payload: o.payload, tasks_per_s: round(n / secs, 1), ...cost });
    log(`  drain concurrency ${c}: ${n} jobs in ${secs.toFixed(2)} s`);
    await run.dropQueue(q);
  }
  {
    const q = await run.queue('tn-newcomer');
    await fillBulk(run, q, o.n, o.batch, { newcomer: false });
    let starts = 0;
    let seen = null;
    const w = run.worker(
      q.name,
      async (job) => {
        const before = starts++;
        if (job.data.newcomer) seen = { before, at: nowMs() };
      },
      { concurrency: o.fairConcurrency, removeOnComplete: { count: 0 }, removeOnFail: { count: 0 } },
    );
    await w.waitUntilReady();
    await sleep(300); // a steady rate on the backlog first
    const startsAt = starts;
    const t0 = nowMs();
    await q.add(JOB_NAME, { newcomer: true });
    let result = null;
    while (!run.stopping) {
      await sleep(1);
      if (seen) {
        result = { ran: 1, starts: seen.before - startsAt, waited_ms: round(seen.at - t0, 1) };
        break;
      }
      if (nowMs() - t0 >= o.cap * 1000) {
        result = { ran: 0, starts: starts - startsAt, waited_ms: o.cap * 1000 };
        break;
      }
    }
    await run.closeWorker(w);
    emit({ mode: 'tenants', case: 'newcomer', ...result, backlog: o.n, concurrency: o.fairConcurrency, cap_s: o.cap });
    log(`  newcomer: ${result?.ran ? `ran after ${result.starts} starts` : `not run after ${o.cap} s`}`);
    await run.dropQueue(q);
  }
}

async function modeLatency(run, o) {
  const total = o.rate * o.seconds;
  const fill = makeData(o.payload).p;
  log(`latency: rate=${o.rate}/s for ${o.seconds} s (${total} jobs), payload=${o.payload} B, worker concurrency=${o.workerConcurrency}`);

  const q = await run.queue('latency');
  const samples = [];
  const w = run.worker(
    q.name,
    async (job) => {
      samples.push(nowMs() - job.data.t);
    },
    { concurrency: o.workerConcurrency, removeOnComplete: { count: 0 }, removeOnFail: { count: 0 } },
  );
  await w.waitUntilReady();
  await sleep(500); // let the worker reach its blocking fetch

  const interval = 1000 / o.rate;
  const adds = [];
  const start = nowMs();
  for (let i = 0; i < total && !run.stopping; i++) {
    const wait = start + i * interval - nowMs();
    if (wait > 0) await sleep(wait);
    adds.push(q.add(JOB_NAME, { t: nowMs(), p: fill }));
  }
  await Promise.all(adds);
  const sendSecs = (nowMs() - start) / 1000;

  const deadline = nowMs() + 30_000;
  while (samples.length < total && nowMs() < deadline && !run.stopping) await sleep(10);
  await run.closeWorker(w);
  if (samples.length < total) throw new Error(`latency: only ${samples.length} of ${total} jobs started within 30 s after the last add`);

  const sorted = [...samples].sort((a, b) => a - b);
  const mean = sorted.reduce((s, x) => s + x, 0) / sorted.length;
  emit({
    mode: 'latency',
    rate: o.rate,
    seconds: o.seconds,
    n: total,
    payload: o.payload,
    p50_ms: round(percentile(sorted, 0.5), 3),
    p99_ms: round(percentile(sorted, 0.99), 3),
    mean_ms: round(mean, 3),
    max_ms: round(sorted[sorted.length - 1], 3),
  });
  log(`  sent ${total} jobs in ${sendSecs.toFixed(2)} s (actual rate ${(total / sendSecs).toFixed(1)}/s)`);
  await run.dropQueue(q);
}

// ---------------------------------------------------------------------------
// main

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const url = process.env.REDIS_URL;
  if (!url) die('REDIS_URL is not set (e.g. REDIS_URL=redis://127.0.0.1:6379/0)');

  const run = new Run(url);
  try {
    await run.connectAdmin();
  } catch (e) {
    die(e.message, 3);
  }

  let exiting = false;
  const abort = async (msg, code, { tryCleanup = true } = {}) => {
    if (exiting) return;
    exiting = true;
    run.stopping = true;
    console.error(`bullmq-peer: error: ${msg}`);
    if (tryCleanup) await bounded(run.cleanup(), 30_000);
    process.exit(code);
  };
  process.on('SIGINT', () => abort('interrupted', 130));
  process.on('SIGTERM', () => abort('terminated', 143));
  // Once aborting, in-flight BullMQ calls fail as their connections close.
  process.on('unhandledRejection', (e) => {
    if (!exiting) abort(`unhandled rejection: ${e && e.stack ? e.stack : e}`, 1);
  });
  const watchdog = setTimeout(() => abort(`mode '${o.mode}' exceeded --timeout ${o.timeoutS} s`, 1), o.timeoutS * 1000);
  watchdog.unref();

  // If the server goes away mid-run, BullMQ's connections keep retrying; the
  // admin connection does not reconnect, so its loss is reported here.
  run.admin.on('end', () => {
    if (!run.cleaning) abort(`lost connection to Redis at ${redactUrl(url)}`, 3, { tryCleanup: false });
  });

  const t0 = nowMs();
  try {
    if (o.mode === 'enqueue') await modeEnqueue(run, o);
    else if (o.mode === 'e2e') await modeE2e(run, o);
    else if (o.mode === 'priority') await modePriority(run, o);
    else if (o.mode === 'tenants') await modeTenants(run, o);
    else await modeLatency(run, o);
  } catch (e) {
    await abort(e && e.stack ? e.stack : String(e), 1);
    return;
  }
  await run.cleanup();
  clearTimeout(watchdog);
  log(`done in ${((nowMs() - t0) / 1000).toFixed(1)} s`);
  process.exit(0);
}

main();
