// store_faults.test.mjs: the default shape (otlp -> correlation -> sqlite)
// under the faults an operator meets, with OTLP/HTTP clients that keep what
// was not answered 200 and retry it (as the OpenTelemetry exporters do on
// 503 with Retry-After). For each: every span answered 200 is in the store
// at the end (counted by span id), and /health answers.
// - disk full under the store (a 4 MiB tmpfs; skipped when mount is not
//   permitted): clients get 503 with Retry-After, /health says degraded;
//   after space is freed every span answered 200 is stored;
// - sustained overload for about 20 s from one load generator (as many
//   requests in flight as it can keep);
// - proflink's clock an hour ahead of its senders, then stepped back two
//   hours (libfaketime): holds still release after about their window, the
//   clock_skew_seconds gauge reports the skew, and a warning is logged.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build/proflink node --test store_faults.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import {
  freePorts, startProflink, waitFor, httpGet, TraceRequest, sleep,
} from './lib/proflink.mjs';

// A request of n spans with fresh ids, ending `skewMs` from now (sender's clock).
function spansRequest(n, tag, skewMs = 0) {
  const traceId = crypto.randomBytes(16);
  const now = BigInt(Date.now() + skewMs) * 1000000n;
  const spans = [];
  for (let i = 0; i < n; i++) {
    spans.push({
      traceId, spanId: crypto.randomBytes(8), name: `${tag}-${i}`, kind: 2,
      startTimeUnixNano: String(now - 2000000n), endTimeUnixNano: String(now),
      attributes: [{ key: 'http.route', value: { stringValue: `/r/${i % 7}` } }],
    });
  }
  const bytes = Buffer.from(TraceRequest.encode(TraceRequest.fromObject({
    resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'faults' } }] }, scopeSpans: [{ spans }] }],
  })).finish());
  return { bytes, ids: spans.map((s) => s.spanId.toString('hex')) };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function post(port, bytes) {
  return new Promise((resolve) => {
    const req = http.request({
      host: '127.0.0.1', port, path: '/v1/traces', method: 'POST', agent,
      headers: { 'content-type': 'application/x-protobuf', 'content-length': bytes.length },
    }, (res) => { res.resume(); res.on('end', () => resolve({ status: res.statusCode, retryAfter: res.headers['retry-after'] })); });
    req.on('error', () => resolve({ status: 0 }));
    req.end(bytes);
  });
}

// A client as the OTLP exporters behave: a request answered 200 is done, one
// answered 503/429 (with Retry-After) is kept and sent again later.
function client(port) {
  const c = {
    answered: new Set(), pending: [], counts: {}, retryAfterMissing: 0,
    async send(r) {
      const res = await post(port, r.bytes);
      c.counts[res.status] = (c.counts[res.status] || 0) + 1;
      if (res.status === 200) { for (const id of r.ids) c.answered.add(id); return true; }
      if (res.status === 503 || res.status === 429) {
        if (!res.retryAfter) c.retryAfterMissing++;
      }
      c.pending.push(r);
      return false;
    },
    // Sends what was refused again until taken (or `ms` pass).
    async drain(ms) {
      const end = Date.now() + ms;
      while (c.pending.length && Date.now() < end) {
        const batch = c.pending.splice(0, 16);
        const ok = await Promise.all(batch.map((r) => c.send(r)));
        if (!ok.every(Boolean)) await sleep(300);
      }
      return c.pending.length === 0;
    },
  };
  return c;
}

function storedIds(db) {
  const out = execFileSync('sqlite3', [db, "SELECT printf('%016x', span_id) FROM spans"], { maxBuffer: 1 << 28 }).toString();
  return new Set(out.split('\n').filter(Boolean));
}

function missing(answered, stored) {
  let n = 0;
  for (const id of answered) if (!stored.has(id)) n++;
  return n;
}

async function metric(port, name) {
  const r = await httpGet(port, '/metrics');
  let v = null;
  for (const line of r.body.split('\n')) {
    if (line.startsWith(name) && (line[name.length] === '{' || line[name.length] === ' ')) {
      v = (v || 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return v;
}

function config({ httpPort, metricsPort, db, correlation = [], extra = '', straight = false }) {
  const processors = straight ? '[]' : '[correlation]';
  return `
receivers:
  otlp:
    protocols:
      http: { endpoint: "127.0.0.1:${httpPort}" }
processors:
  correlation:
${['window: 30s', 'span_attributes: [http.route]', ...correlation].map((l) => `    ${l}`).join('\n')}
exporters:
  sqlite:
    path: "${db}"
    api: { endpoint: none }
service:
  telemetry:
    logs: { level: info }
    metrics: { address: "127.0.0.1:${metricsPort}" }
${extra}
  pipelines:
    traces: { receivers: [otlp], processors: ${processors}, exporters: [sqlite] }
    profiles: { receivers: [otlp], processors: ${processors}, exporters: [sqlite] }
`;
}

function tryMount(dir) {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', dir], { stdio: 'pipe' });
    return null;
  } catch (e) {
    return String(e.stderr || e.message).trim();
  }
}

async function diskFull(t, straight) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-diskfull-'));
  const mnt = path.join(dir, 'mnt');
  fs.mkdirSync(mnt);
  const why = tryMount(mnt);
  if (why) {
    fs.rmSync(dir, { recursive: true, force: true });
    t.skip(`cannot mount a tmpfs (${why}): needs root or CAP_SYS_ADMIN`);
    return;
  }
  let pl;
  try {
    const [httpPort, metricsPort] = await freePorts(2);
    const db = path.join(mnt, 'proflink.db');
    // Short holds, so the store sees the data during the test.
    pl = await startProflink(config({ httpPort, metricsPort, db, straight, correlation: ['max_window: 2s', 'span_window: 2s'] }),
      { dir, ports: [httpPort, metricsPort] });
    const c = client(httpPort);
    // Fill the disk: keep sending until the store refuses for a while.
    let refusedSince = 0;
    let healthDegraded = null;
    const end = Date.now() + 60000;
    while (Date.now() < end) {
      const reqs = Array.from({ length: 8 }, () => spansRequest(200, 'full'));
      await Promise.all(reqs.map((r) => c.send(r)));
      if (c.counts[503] && !refusedSince) refusedSince = Date.now();
      if (refusedSince && !healthDegraded) {
        const h = await httpGet(metricsPort, '/health');
        if (h.status !== 200) healthDegraded = h;
      }
      if (refusedSince && healthDegraded && Date.now() - refusedSince > 3000) break;
      if (refusedSince) await sleep(100);
    }
    assert.ok(c.counts[503] > 0, `the store never refused: ${JSON.stringify(c.counts)}\n${pl.log.slice(-2000)}`);
    assert.equal(c.counts[500] || 0, 0, 'no 500 for a full disk');
    assert.equal(c.retryAfterMissing, 0, 'every 503 has Retry-After');
    assert.ok(healthDegraded, '/health reports the full disk');
    const body = JSON.parse(healthDegraded.body);
    assert.equal(body.status, 'degraded');
    assert.match(body.reason, /sqlite/);
    assert.match(pl.log, /kept and retried every second/);
    // Free space: the store is moved to a bigger place underneath? No: the
    // tmpfs grows (remount), as an operator frees space.
    execFileSync('mount', ['-o', 'remount,size=256m', mnt]);
    assert.ok(await c.drain(60000), `refused requests still not taken: ${c.pending.length}\n${pl.log.slice(-2000)}`);
    await waitFor(async () => (await httpGet(metricsPort, '/health')).status === 200, 20000, '/health back to ok');
    const r = await pl.stop(60000);
    assert.equal(r.signal, null, pl.log.slice(-2000));
    const stored = storedIds(db);
    assert.equal(missing(c.answered, stored), 0,
      `${missing(c.answered, stored)} of ${c.answered.size} answered spans not stored\n${pl.log.slice(-3000)}`);
    assert.doesNotMatch(pl.log, /dropped/);
    t.diagnostic(`answered ${c.answered.size} spans; responses ${JSON.stringify(c.counts)}; stored ${stored.size}`);
  } finally {
    if (pl) await pl.stop();
    try { execFileSync('umount', [mnt]); } catch { /* not mounted */ }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('disk full under the store (otlp -> correlation -> sqlite): 503 with Retry-After, degraded health, nothing answered is lost',
  { timeout: 120000 }, (t) => diskFull(t, false));

test('disk full under the store, sent straight to it: 503 with Retry-After, never 500',
  { timeout: 120000 }, (t) => diskFull(t, true));

// A load generator: one template request of n spans whose span ids are
// rewritten in place (4 bytes of this run's prefix, a 4-byte counter), so
// one node process sends as fast as proflink takes.
function loadGenerator(n) {
  const template = spansRequest(n, 'load');
  const offsets = template.ids.map((id) => template.bytes.indexOf(Buffer.from(id, 'hex')));
  assert.ok(offsets.every((o) => o >= 0));
  const prefix = ((crypto.randomBytes(4).readUInt32BE(0) & 0x7fffffff) | 1) >>> 0;
  let counter = 0;
  return {
    prefix,
    next() {
      const bytes = Buffer.from(template.bytes);
      for (const o of offsets) {
        bytes.writeUInt32BE(prefix, o);
        bytes.writeUInt32BE(++counter, o + 4);
      }
      return { bytes, n };
    },
  };
}

test('sustained overload for 20 s: every span answered 200 is stored', { timeout: 150000 }, async (t) => {
  const [httpPort, metricsPort] = await freePorts(2);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-overload-'));
  const db = path.join(dir, 'data', 'proflink.db');
  // The default shape; holds of 10 s so the test can wait for them, and a
  // drain long enough for what is still held at the end.
  const pl = await startProflink(config({
    httpPort, metricsPort, db, correlation: ['max_window: 10s'],
    extra: '  shutdown_timeout: 60s',
  }), { dir, ports: [httpPort, metricsPort] });
  try {
    const gen = loadGenerator(500);
    const counts = {};
    let answered = 0;
    let retryAfterMissing = 0;
    let peakRss = 0;
    const pending = [];
    async function send(r) {
      const res = await post(httpPort, r.bytes);
      counts[res.status] = (counts[res.status] || 0) + 1;
      if (res.status === 200) { answered += r.n; return true; }
      if ((res.status === 503 || res.status === 429) && !res.retryAfter) retryAfterMissing++;
      pending.push(r);
      return false;
    }
    const end = Date.now() + 20000;
    const rssTimer = setInterval(() => { peakRss = Math.max(peakRss, pl.rss()); }, 200);
    const workers = Array.from({ length: 32 }, async () => {
      while (Date.now() < end) {
        const r = pending.pop() || gen.next();
        if (!(await send(r))) await sleep(20);
      }
    });
    await Promise.all(workers);
    // The clients keep what was refused and send it again until taken.
    const drainEnd = Date.now() + 60000;
    while (pending.length && Date.now() < drainEnd) {
      const batch = pending.splice(0, 8);
      const ok = await Promise.all(batch.map(send));
      if (!ok.every(Boolean)) await sleep(200);
    }
    clearInterval(rssTimer);
    assert.equal(pending.length, 0, 'every refused request was taken in the end');
    assert.equal(retryAfterMissing, 0, 'every 503 has Retry-After');
    const h = await httpGet(metricsPort, '/health');
    assert.ok(h.status === 200 || h.status === 503, `/health answers: ${h.status}`);
    const r = await pl.stop(90000);
    assert.equal(r.signal, null, pl.log.slice(-2000));
    // Span ids are unique: every request answered 200 in the end, so the
    // store must hold exactly that many spans of this run.
    const stored = Number(execFileSync('sqlite3', [db,
      `SELECT count(*) FROM spans WHERE ((span_id >> 32) & 4294967295) = ${gen.prefix}`]).toString().trim());
    t.diagnostic(`answered ${answered} spans in 20 s (${Math.round(answered / 20)}/s); responses ${JSON.stringify(counts)}; stored ${stored}; peak RSS ${Math.round(peakRss / 1024)} MiB`);
    assert.equal(stored, answered, `${answered - stored} answered spans not stored\n${pl.log.slice(-3000)}`);
    assert.doesNotMatch(pl.log, /items dropped/);
  } finally {
    await pl.cleanup();
  }
});

const FAKETIME_LIB = ['/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1', '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1']
  .find((p) => fs.existsSync(p));

test('clock an hour ahead, then stepped back two hours: holds keep their window, skew is reported', { timeout: 120000, skip: !FAKETIME_LIB && 'libfaketime is not installed (scripts/deps.sh: faketime)' }, async (t) => {
  const [httpPort, metricsPort] = await freePorts(2);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-clock-'));
  const db = path.join(dir, 'data', 'proflink.db');
  const stamp = path.join(dir, 'faketime');
  fs.writeFileSync(stamp, '+1h\n');
  const pl = await startProflink(config({
    httpPort, metricsPort, db, correlation: ['max_window: 0s', 'span_window: 5s', 'clock_skew_warning: 10m'],
  }), {
    dir,
    ports: [httpPort, metricsPort],
    env: {
      LD_PRELOAD: FAKETIME_LIB,
      FAKETIME_TIMESTAMP_FILE: stamp,
      FAKETIME_NO_CACHE: '1',
      FAKETIME_DONT_FAKE_MONOTONIC: '1', // a real clock step moves the wall clock only
    },
  });
  try {
    // How long a batch sent now is held: until held_spans goes back to 0.
    async function holdOf(tag) {
      const r = spansRequest(10, tag);
      const t0 = Date.now();
      assert.equal((await post(httpPort, r.bytes)).status, 200);
      await waitFor(async () => (await metric(metricsPort, 'proflink_processor_held_spans')) === 0, 40000, `${tag} released`);
      return (Date.now() - t0) / 1000;
    }
    const ahead = await holdOf('ahead');
    await waitFor(async () => (await metric(metricsPort, 'proflink_processor_clock_skew_seconds')) > 3500, 20000, 'skew gauge ~ +3600');
    // Keep data coming so each period has a measurement.
    fs.writeFileSync(stamp, '-1h\n');
    const behind = await holdOf('behind');
    const feeder = setInterval(() => post(httpPort, spansRequest(1, 'tick').bytes), 500);
    try {
      await waitFor(async () => (await metric(metricsPort, 'proflink_processor_clock_skew_seconds')) < -3500, 30000, 'skew gauge ~ -3600');
    } finally {
      clearInterval(feeder);
    }
    t.diagnostic(`hold with the clock 1 h ahead: ${ahead.toFixed(1)} s; after a 2 h backward step: ${behind.toFixed(1)} s (span_window 5 s)`);
    assert.ok(ahead >= 4 && ahead < 9, `hold ${ahead} s, window 5 s`);
    assert.ok(behind >= 4 && behind < 9, `hold ${behind} s, window 5 s`);
    assert.match(pl.log, /senders' data times are \d+ s behind proflink's clock/);
    assert.match(pl.log, /senders' data times are \d+ s ahead of proflink's clock/);
  } finally {
    await pl.cleanup();
  }
});
