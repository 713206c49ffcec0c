// wal_durability.test.mjs: an item answered 200 survives kill -9 while the
// batch and correlation processors hold it in memory in front of an
// exporter with a persistent sending queue, and arrives exactly once.
//
// proflink logs each batch at the pipeline's entry (exporters/queue_wal.c, in
// the queue's SQLite file, fsync'd before the answer) and deletes the log row
// in the transaction that stores the batch in the queue. The test:
//   1. batch (60 s timeout) and correlation (60 s window) hold everything:
//      5 requests answered 200, nothing reaches the backend, kill -9;
//   2. restart with short timeouts: every span arrives once;
//   3. kill -9 again after delivery and restart: nothing arrives twice;
//   4. a run where part of the data reached the queue before the kill.
// The queue file is created 0600.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build/proflink node --test wal_durability.test.mjs

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  freePort, httpBackend, postTraces, sleep, startProflink, waitFor,
} from './lib/proflink.mjs';
import { randomTraceRequest } from './lib/traces.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-wal-'));
const running = new Set();
after(() => {
  for (const h of running) h.child.kill('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

function makeRequest(n) {
  return randomTraceRequest(n, 'wal-test');
}

function config(port, backendPort, storage, { batchTimeout, window }) {
  return [
    'receivers:',
    '  otlp:',
    '    protocols:',
    `      http: { endpoint: "127.0.0.1:${port}" }`,
    'processors:',
    `  batch: { timeout: ${batchTimeout}, send_batch_size: 100000 }`,
    `  correlation: { window: ${window} }`,
    'exporters:',
    '  otlphttp:',
    `    endpoint: "http://127.0.0.1:${backendPort}"`,
    `    sending_queue: { storage: "${storage}" }`,
    '    retry_on_failure: { initial_interval: 100ms, max_interval: 200ms }',
    'service:',
    '  pipelines:',
    '    traces: { receivers: [otlp], processors: [batch, correlation], exporters: [otlphttp] }',
    '',
  ].join('\n');
}

async function start(yaml, port) {
  const h = await startProflink(yaml, { ports: [port] });
  running.add(h);
  return h;
}

// Waits (20 s at most) until every id has reached the backend, failing with
// the number missing and proflink's log otherwise; then, a moment later,
// checks that each arrived exactly once.
async function expectEachOnce(backend, ids, h, what) {
  try {
    await waitFor(() => ids.every((id) => backend.counts.has(id)), 20000, `answered spans (${what})`);
  } catch (e) {
    assert.fail(`${ids.filter((id) => !backend.counts.has(id)).length} of ${ids.length} answered spans missing (${what}); log:\n${h.log}`);
  }
  await sleep(500);
  assertEachOnce(backend, ids, what);
}

function assertEachOnce(backend, ids, what) {
  const missing = ids.filter((id) => !backend.counts.has(id));
  const twice = ids.filter((id) => (backend.counts.get(id) || 0) > 1);
  assert.equal(missing.length, 0, `${what}: ${missing.length} of ${ids.length} answered spans missing`);
  assert.equal(twice.length, 0, `${what}: ${twice.length} spans arrived more than once`);
}

test('kill -9 with batch and correlation holding answered spans: each arrives exactly once after restart', { timeout: 60000 }, async () => {
  const backend = await httpBackend();
  const port = await freePort();
  const storage = path.join(tmp, 'q1/');
  const held = config(port, backend.port, storage, { batchTimeout: '60s', window: '60s' });
  const quick = config(port, backend.port, storage, { batchTimeout: '100ms', window: '1s' });

  let h = await start(held, port);
  const ids = [];
  for (let i = 0; i < 5; i++) {
    const r = makeRequest(20);
    const res = await postTraces(port, r.bytes);
    assert.equal(res.status, 200);
    ids.push(...r.ids);
  }
  await sleep(300);
  assert.equal(backend.counts.size, 0, 'the processors hold everything before the kill');
  assert.equal((await h.kill9()).signal, 'SIGKILL');

  const files = fs.readdirSync(storage).filter((f) => f.endsWith('.db'));
  assert.ok(files.length >= 1, `queue file in ${storage}`);
  for (const f of files) {
    const mode = fs.statSync(path.join(storage, f)).mode & 0o777;
    assert.equal(mode, 0o600, `${f} is created 0600 (got ${mode.toString(8)})`);
  }

  h = await start(quick, port);
  await expectEachOnce(backend, ids, h, 'after the first restart');

  // Delivered data is gone from both the log and the queue: another crash
  // and restart sends nothing again.
  await h.kill9();
  h = await start(quick, port);
  await sleep(2500);
  assertEachOnce(backend, ids, 'after the second restart');
  await h.stop();
  await backend.stop();
});

test('kill -9 with part of the answered data already queued and the backend down: exactly once', { timeout: 60000 }, async () => {
  const backendPort = await freePort(); // nothing listens yet: the queue keeps rows
  const port = await freePort();
  const storage = path.join(tmp, 'q2/');
  // batch flushes at 50 spans: the first requests reach the queue, the last
  // ones are still held by batch or correlation at the kill.
  const yaml = config(port, backendPort, storage, { batchTimeout: '60s', window: '60s' })
    .replace('send_batch_size: 100000', 'send_batch_size: 50');
  let h = await start(yaml, port);
  const ids = [];
  for (let i = 0; i < 7; i++) {
    const r = makeRequest(20);
    assert.equal((await postTraces(port, r.bytes)).status, 200);
    ids.push(...r.ids);
  }
  await sleep(200);
  await h.kill9();
  const backend = await httpBackend({ port: backendPort });
  h = await start(config(port, backendPort, storage, { batchTimeout: '100ms', window: '1s' }), port);
  await expectEachOnce(backend, ids, h, 'queued and held parts');
  await h.stop();
  await backend.stop();
});

test('a reload (SIGHUP) keeps the log: answered spans from before and after it survive kill -9 exactly once', { timeout: 60000 }, async () => {
  const backend = await httpBackend();
  const port = await freePort();
  const storage = path.join(tmp, 'q3/');
  const held = config(port, backend.port, storage, { batchTimeout: '60s', window: '60s' });
  let h = await start(held, port);
  const ids = [];
  const send = async () => {
    const r = makeRequest(10);
    assert.equal((await postTraces(port, r.bytes)).status, 200);
    ids.push(...r.ids);
  };
  await send();
  await send();
  // Reload with a changed batch timeout: batch is replaced (it flushes into
  // the old chain, held by correlation), correlation and the queue stay.
  fs.writeFileSync(path.join(h.dir, 'collector.yaml'), held.replace('timeout: 60s', 'timeout: 50s'));
  h.child.kill('SIGHUP');
  await waitFor(() => /reload/i.test(h.log), 10000, 'reload logged');
  await sleep(300);
  await send();
  await send();
  await sleep(200);
  // The replaced batch flushed what it held when the reload retired it (it
  // may have reached the backend already); the rest is held at the kill.
  await h.kill9();
  h = await start(config(port, backend.port, storage, { batchTimeout: '100ms', window: '1s' }), port);
  await expectEachOnce(backend, ids, h, 'across a reload');
  await h.stop();
  await backend.stop();
});

test('a batch the full queue refuses after the answer is kept and sent after restart', { timeout: 60000 }, async () => {
  // The backend hangs: the first batch holds the queue's only slot and
  // place; the later ones are refused by the full queue after batch has
  // answered 200 for them.
  const port = await freePort();
  let backend = await httpBackend({ behaviour: () => ({ hang: true }) });
  const storage = path.join(tmp, 'q4/');
  const yaml = config(port, backend.port, storage, { batchTimeout: '100ms', window: '1s' })
    .replace(`sending_queue: { storage: "${storage}" }`, `sending_queue: { storage: "${storage}", queue_size: 1, num_consumers: 1 }`)
    .replace('processors: [batch, correlation]', 'processors: [batch]');
  let h = await start(yaml, port);
  const ids = [];
  for (let i = 0; i < 3; i++) {
    const r = makeRequest(10);
    assert.equal((await postTraces(port, r.bytes)).status, 200);
    ids.push(...r.ids);
    await sleep(400); // each request flushes on its own
  }
  // The write-ahead log says it keeps what the full queue refused.
  await waitFor(() => /refused downstream after it was answered; kept/.test(h.log), 5000, 'a kept refusal');
  await h.kill9();
  const backendPort = backend.port;
  await backend.stop();
  backend = await httpBackend({ port: backendPort });
  h = await start(yaml, port);
  await expectEachOnce(backend, ids, h, 'refused by the full queue');
  await h.stop();
  await backend.stop();
});

test('a batch the full queue refuses after the answer is sent again while running, once the queue has room', { timeout: 60000 }, async () => {
  // The backend answers 503 at first: the queue's only place stays taken
  // and the later batches are refused by the full queue after their 200.
  // When the backend recovers, the kept batches follow without a restart.
  const port = await freePort();
  let down = true;
  const backend = await httpBackend({ behaviour: () => (down ? { status: 503 } : null) });
  const storage = path.join(tmp, 'q5/');
  const yaml = config(port, backend.port, storage, { batchTimeout: '100ms', window: '1s' })
    .replace(`sending_queue: { storage: "${storage}" }`, `sending_queue: { storage: "${storage}", queue_size: 1, num_consumers: 1 }`)
    .replace('processors: [batch, correlation]', 'processors: [batch]');
  const h = await start(yaml, port);
  const ids = [];
  for (let i = 0; i < 4; i++) {
    const r = makeRequest(10);
    assert.equal((await postTraces(port, r.bytes)).status, 200);
    ids.push(...r.ids);
    await sleep(400); // each request flushes on its own
  }
  await waitFor(() => /refused downstream after it was answered; kept/.test(h.log), 5000, 'a kept refusal');
  assert.equal(ids.filter((id) => backend.counts.has(id)).length, 0, 'nothing delivered while the backend refuses');
  down = false;
  await expectEachOnce(backend, ids, h, 'kept, then sent while running');
  await h.stop();
  await backend.stop();
});
