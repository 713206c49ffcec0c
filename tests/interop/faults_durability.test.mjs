// faults_durability.test.mjs: what proflink answered 200 is delivered, and
// its files stay sound, through the faults an operator meets with the
// pipeline correlation -> { otlphttp with a persistent sending queue, the
// sqlite store }:
//   (the store first: its copy of a batch is then the last holder of the
//   write-ahead entry, released on the store's writer thread)
//   1. 20 start -> send -> SIGTERM cycles, then 5 start -> send -> kill -9
//      cycles: after each, `PRAGMA integrity_check` on the queue file is ok,
//      no crash, no file set aside; every answered span reaches the backend
//      (counted by span id). Duplicates: none in the SIGTERM phase; after
//      the kill -9 phase at most what the killed runs had to send
//      (exporters/queue_wal.h: a crash between a send and its delete).
//   2. a truncated and a garbage-paged queue file and store file at start:
//      each is moved aside (<name>.corrupt-<UTC>), proflink starts, answers
//      and delivers; what could be read of the queue is sent.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build/proflink node --test faults_durability.test.mjs

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  freePort, httpBackend, postTraces, sleep, startProflink, waitFor,
} from './lib/proflink.mjs';
import { randomTraceRequest } from './lib/traces.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-faults-'));
const running = new Set();
const backends = new Set();
after(async () => {
  for (const h of running) h.child.kill('SIGKILL');
  for (const b of backends) await b.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

function makeRequest(n) {
  return randomTraceRequest(n, 'faults-test', { routes: true });
}

function config(port, backendPort, dir, window = '500ms') {
  return [
    'receivers:',
    '  otlp:',
    '    protocols:',
    `      http: { endpoint: "127.0.0.1:${port}" }`,
    'processors:',
    `  correlation: { window: ${window} }`,
    'exporters:',
    '  otlphttp:',
    `    endpoint: "http://127.0.0.1:${backendPort}"`,
    `    sending_queue: { storage: "${dir}/queue/" }`,
    '    retry_on_failure: { initial_interval: 50ms, max_interval: 200ms }',
    '  sqlite:',
    `    path: "${dir}/store.db"`,
    '    api: { endpoint: "" }',
    'service:',
    '  pipelines:',
    '    traces: { receivers: [otlp], processors: [correlation], exporters: [sqlite, otlphttp] }',
    '',
  ].join('\n');
}

const queueFile = (dir) => path.join(dir, 'queue', 'otlphttp.queue.db');

function integrity(file) {
  return execFileSync('sqlite3', [file, 'PRAGMA integrity_check;'], { encoding: 'utf8' }).trim();
}

function setAside(dir) {
  const found = [];
  for (const d of [dir, path.join(dir, 'queue')]) {
    if (!fs.existsSync(d)) continue;
    for (const f of fs.readdirSync(d)) if (/\.corrupt-\d{8}T\d{6}Z/.test(f) && !/-(wal|shm)$/.test(f)) found.push(f);
  }
  return found;
}

// Sends from `parallel` clients until stop() is called; answered() gives the
// ids of every request answered 200 (requests after the stop signal may fail).
function sendUntilStopped(port, parallel, spans) {
  const ids = [];
  let stopped = false;
  const loops = [];
  for (let c = 0; c < parallel; c++) {
    loops.push((async () => {
      while (!stopped) {
        const r = makeRequest(spans);
        try {
          const res = await postTraces(port, r.bytes);
          if (res.status === 200) ids.push(...r.ids);
        } catch { await sleep(5); }
      }
    })());
  }
  return { ids, async stop() { stopped = true; await Promise.all(loops); } };
}

async function start(yaml, port) {
  const h = await startProflink(yaml, { ports: [port] });
  running.add(h);
  return h;
}

// Sends `requests` requests of `spans` spans; returns the ids answered 200.
async function send(port, requests, spans) {
  const ids = [];
  for (let i = 0; i < requests; i++) {
    const r = makeRequest(spans);
    const res = await postTraces(port, r.bytes);
    if (res.status === 200) ids.push(...r.ids);
  }
  return ids;
}

test('20 SIGTERM and 5 kill -9 cycles with correlation + store + persistent queue: sound files, every answered span delivered', { timeout: 120000 }, async () => {
  const backend = await httpBackend();
  backends.add(backend);
  const port = await freePort();
  const dir = path.join(tmp, 'cycles');
  fs.mkdirSync(dir, { recursive: true });
  const yaml = config(port, backend.port, dir, '200ms');
  const answered = [];
  const killedIds = new Set();
  const bad = [];
  let sigtermTwice = -1;
  let pendingAtKills = 0;
  for (let cycle = 0; cycle < 25; cycle++) {
    const kill9 = cycle >= 20;
    if (cycle === 20) {
      // the SIGTERM phase is over: nothing it delivered arrived twice
      sigtermTwice = answered.filter((id) => backend.counts.get(id) > 1).length;
      pendingAtKills = answered.filter((id) => !backend.counts.has(id)).length;
    }
    const h = await start(yaml, port);
    // traffic from 4 clients; the signal arrives during it, while
    // correlation holds some spans, the queue sends others, and the store
    // writes (and frees) its copies on its own thread
    const load = sendUntilStopped(port, 4, 20);
    await sleep(300 + (cycle * 97) % 500);
    const exit = kill9 ? await h.kill9() : await h.stop(15000);
    await load.stop();
    running.delete(h);
    answered.push(...load.ids);
    if (kill9) for (const id of load.ids) killedIds.add(id);
    if (!kill9 && (exit.code !== 0 || exit.signal)) bad.push(`cycle ${cycle}: exit ${JSON.stringify(exit)}\n${h.log.slice(-2000)}`);
    const check = integrity(queueFile(dir));
    if (check !== 'ok') bad.push(`cycle ${cycle}: integrity_check: ${check}`);
    if (/damaged|cannot delete|malformed|not an error/.test(h.log)) bad.push(`cycle ${cycle}: log: ${h.log.slice(-2000)}`);
  }
  assert.deepEqual(bad, [], bad.join('\n'));
  assert.deepEqual(setAside(dir), [], 'no file was ever set aside');
  assert.ok(answered.length >= 25 * 200, `${answered.length} spans answered 200`);

  // One more run delivers what the last kill left.
  const h = await start(yaml, port);
  try {
    await waitFor(() => answered.every((id) => backend.counts.has(id)), 30000, 'answered spans delivered');
  } catch {
    const missing = answered.filter((id) => !backend.counts.has(id));
    assert.fail(`${missing.length} of ${answered.length} answered spans never reached the backend; log:\n${h.log.slice(-3000)}`);
  }
  await sleep(500);
  await h.stop();
  assert.equal(integrity(queueFile(dir)), 'ok');
  const twice = answered.filter((id) => backend.counts.get(id) > 1);
  console.log(`# ${answered.length} spans answered, all delivered; 0 twice in the SIGTERM phase; ${twice.length} twice after the kill -9 phase (${killedIds.size} spans answered in it, ${pendingAtKills} still queued when it began)`);
  assert.equal(sigtermTwice, 0, `${sigtermTwice} spans delivered twice in the SIGTERM phase`);
  // a kill -9 re-sends what was in flight (the sends whose rows were not
  // yet deleted): never more than what the killed runs had to send
  assert.ok(twice.length <= killedIds.size + pendingAtKills, `duplicates ${twice.length} within what the killed runs had to send`);
});

// Damages `file` in place: 'truncate' keeps the first third, 'garbage'
// overwrites every page after the first two with 0xA5 bytes in its middle.
function damage(file, how) {
  const size = fs.statSync(file).size;
  if (how === 'truncate') {
    fs.truncateSync(file, Math.max(4096, Math.floor(size / 3 / 4096) * 4096));
    return;
  }
  const fd = fs.openSync(file, 'r+');
  const junk = Buffer.alloc(512, 0xa5);
  for (let off = 8192 + 1024; off < size; off += 4096) fs.writeSync(fd, junk, 0, junk.length, off);
  fs.closeSync(fd);
}

for (const [queueHow, storeHow] of [['truncate', 'garbage'], ['garbage', 'truncate']]) {
  test(`a ${queueHow}d queue file and a ${storeHow}-paged store file at start: moved aside, proflink starts and delivers`, { timeout: 60000 }, async () => {
    const port = await freePort();
    const backendPort = await freePort(); // down at first: the queue keeps rows
    const dir = path.join(tmp, `damaged-${queueHow}`);
    fs.mkdirSync(dir, { recursive: true });
    const yaml = config(port, backendPort, dir, '100ms');
    let h = await start(yaml, port);
    const before = await send(port, 30, 40);
    assert.equal(before.length, 1200);
    await sleep(1500); // released by correlation into the queue and the store
    await h.stop(3000);
    running.delete(h);
    assert.ok(fs.statSync(queueFile(dir)).size > 64 * 1024, 'the queue holds the rows');
    damage(queueFile(dir), queueHow);
    damage(path.join(dir, 'store.db'), storeHow === 'garbage' ? 'garbage' : 'truncate');

    const backend = await httpBackend({ port: backendPort });
    backends.add(backend);
    h = await start(yaml, port);
    const after = await send(port, 5, 20);
    assert.equal(after.length, 100, 'answers 200 on the fresh files');
    try {
      await waitFor(() => after.every((id) => backend.counts.has(id)), 20000, 'new spans delivered');
    } catch {
      assert.fail(`new spans not delivered; log:\n${h.log.slice(-3000)}`);
    }
    const aside = setAside(dir);
    assert.ok(aside.some((f) => f.startsWith('otlphttp.queue.db.corrupt-')), `queue file set aside: ${aside}`);
    assert.ok(aside.some((f) => f.startsWith('store.db.corrupt-')), `store file set aside: ${aside}`);
    assert.match(h.log, /otlphttp\].*queue\.db is damaged \(.+\): moved aside to/);
    assert.match(h.log, /store\.db is damaged \(.+\): moved aside to/);
    const recovered = before.filter((id) => backend.counts.has(id)).length;
    console.log(`# ${queueHow}d queue: ${recovered} of ${before.length} spans of the damaged file read back and delivered`);
    await h.stop();
    assert.equal(integrity(queueFile(dir)), 'ok');
    assert.equal(integrity(path.join(dir, 'store.db')), 'ok');
  });
}
