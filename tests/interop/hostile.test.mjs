// hostile.test.mjs: hostile input against the release binary (issue 12).
//
// Each row sends one attack to a proflink on default limits and asserts:
//   - the answer's status (or, for connection-level attacks, that the
//     server shut the connection or absorbed it);
//   - the request is answered within 1 s;
//   - peak RSS (VmHWM, reset through /proc/PID/clear_refs before the row)
//     stays under 64 MiB above the idle RSS;
//   - /health answers within 100 ms throughout (probed every 20 ms: the
//     telemetry endpoint has its own thread);
//   - a normal client is served afterwards.
// The measured figures are printed as a table (docs/SECURITY.md has them).
//
// The release binary is build/proflink (HOSTILE_BIN overrides it), not the
// sanitizer build the other interop tests use: memory and time figures of an
// ASan build mean nothing.
//
// Run: cd tests/interop && node --test hostile.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import path from 'node:path';
import zlib from 'node:zlib';
import { execFileSync } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import {
  PushRequest, TraceRequest, freePorts, repo, sleep, startProflink,
} from './lib/proflink.mjs';

const BIN = path.resolve(process.env.HOSTILE_BIN || path.join(repo, 'build/proflink'));
const MiB = 1024 * 1024;
const results = [];
let pl;
let ports;

// ---- protobuf writing (pprof and raw frames) -----------------------------------

function varint(v) {
  let x = BigInt(v);
  const out = [];
  while (x >= 0x80n) { out.push(Number((x & 0x7fn) | 0x80n)); x >>= 7n; }
  out.push(Number(x));
  return Buffer.from(out);
}
const tag = (f, wt) => varint((f << 3) | wt);
const fieldVarint = (f, v) => Buffer.concat([tag(f, 0), varint(v)]);
const fieldBytes = (f, b) => Buffer.concat([tag(f, 2), varint(b.length), b]);
const packed = (f, vals) => fieldBytes(f, Buffer.concat(vals.map(varint)));

// The inverse of the unkeyed splitmix64 finalizer pprof ids were hashed with
// before proflink keyed its tables: ids whose old hash is k << 32 all share
// one probe chain.
const M64 = (1n << 64n) - 1n;
function oldMixInverse(h) {
  h ^= h >> 33n;
  h = (h * 0x9cb4b2f8129337dbn) & M64;
  h ^= h >> 33n;
  h = (h * 0x4f74430c22a54005n) & M64;
  h ^= h >> 33n;
  return h;
}

function collidingPprof(n) {
  const parts = [
    fieldBytes(6, Buffer.alloc(0)), fieldBytes(6, Buffer.from('samples')),
    fieldBytes(6, Buffer.from('count')), fieldBytes(6, Buffer.from('f')),
    fieldBytes(1, Buffer.concat([fieldVarint(1, 1), fieldVarint(2, 2)])),
  ];
  for (let k = 1n; k <= BigInt(n); k++) {
    const id = oldMixInverse(k << 32n);
    parts.push(fieldBytes(5, Buffer.concat([fieldVarint(1, id), fieldVarint(2, 3)])));
    parts.push(fieldBytes(4, Buffer.concat([fieldVarint(1, id), fieldBytes(4, fieldVarint(1, id))])));
    parts.push(fieldBytes(2, Buffer.concat([packed(1, [id]), packed(2, [1])])));
  }
  return Buffer.concat(parts);
}

// A valid pprof of `size` bytes: one sample and one long string.
function paddedPprof(size) {
  return Buffer.concat([
    fieldBytes(6, Buffer.alloc(0)), fieldBytes(6, Buffer.from('samples')),
    fieldBytes(6, Buffer.from('count')), fieldBytes(6, Buffer.alloc(size, 0x78)),
    fieldBytes(1, Buffer.concat([fieldVarint(1, 1), fieldVarint(2, 2)])),
    fieldBytes(2, packed(2, [1])),
  ]);
}

function smallTraces() {
  return Buffer.from(TraceRequest.encode(TraceRequest.fromObject({
    resourceSpans: [{ scopeSpans: [{ spans: [{
      traceId: Buffer.alloc(16, 1), spanId: Buffer.alloc(8, 2), name: 'normal', kind: 2,
      startTimeUnixNano: '1700000000000000000', endTimeUnixNano: '1700000000100000000',
    }] }] }],
  })).finish());
}

// ---- HTTP helpers ---------------------------------------------------------------

function post(port, p, body, headers = {}) {
  const t0 = process.hrtime.bigint();
  return new Promise((resolve) => {
    const req = http.request({
      host: '127.0.0.1', port, path: p, method: 'POST', agent: false,
      headers: { 'Content-Length': body.length, ...headers },
    }, (res) => {
      let text = '';
      res.on('data', (d) => { if (text.length < 2000) text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text, ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
    });
    req.on('error', (e) => resolve({ status: 0, error: String(e), ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
    req.end(body);
  });
}

const PROBER = `
const { parentPort, workerData } = require('node:worker_threads');
const http = require('node:http');
let stop = false;
const probes = [];
parentPort.on('message', () => { stop = true; });
function get() {
  const t0 = process.hrtime.bigint();
  return new Promise((resolve) => {
    http.get({ host: '127.0.0.1', port: workerData.port, path: '/health', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
    }).on('error', () => resolve({ status: 0, ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
  });
}
(async () => {
  probes.push(await get());
  parentPort.postMessage('ready');
  while (!stop) {
    await new Promise((r) => setTimeout(r, 20));
    probes.push(await get());
  }
  parentPort.postMessage(probes);
})();
`;

function procKiB(field) {
  const m = fs.readFileSync(`/proc/${pl.pid}/status`, 'utf8').match(new RegExp(`${field}:\\s+(\\d+)`));
  return m ? Number(m[1]) : 0;
}

// ---- one row --------------------------------------------------------------------

async function row(name, attack, check) {
  // Reset the peak (VmHWM) to the current RSS, then take the idle figure.
  fs.writeFileSync(`/proc/${pl.pid}/clear_refs`, '5');
  await sleep(50);
  const idle = procKiB('VmRSS');
  // The probes run on a worker thread: the attack itself keeps this
  // thread's event loop busy, which must not count against proflink.
  const prober = new Worker(PROBER, { eval: true, workerData: { port: ports.metrics } });
  await new Promise((r) => prober.once('message', r)); // first probe done
  const t0 = process.hrtime.bigint();
  let r;
  try {
    r = await attack();
  } finally {
    prober.postMessage('stop');
  }
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const probes = await new Promise((r) => prober.on('message', (m) => { if (Array.isArray(m)) r(m); }));
  await prober.terminate();
  const peak = procKiB('VmHWM');
  const growMiB = Math.max(0, peak - idle) / 1024;
  const worstHealth = Math.max(...probes.map((p) => p.ms));
  const normal = await post(ports.http, '/v1/traces', smallTraces(), { 'Content-Type': 'application/x-protobuf' });
  results.push({ name, status: r.status ?? r.outcome, ms, growMiB, worstHealth, probes: probes.length });
  check(r);
  assert.ok(ms < 1000, `${name}: took ${ms.toFixed(0)} ms`);
  assert.ok(growMiB < 64, `${name}: peak RSS ${growMiB.toFixed(1)} MiB above idle`);
  assert.ok(probes.length >= 1 && probes.every((p) => p.status === 200), `${name}: /health failed during the attack`);
  assert.ok(worstHealth < 100, `${name}: /health took ${worstHealth.toFixed(1)} ms during the attack`);
  assert.equal(normal.status, 200, `${name}: a normal client afterwards got ${normal.status}`);
  assert.equal(pl.child.exitCode, null, `${name}: proflink exited`);
}

before(async () => {
  assert.ok(fs.existsSync(BIN), `release binary ${BIN} not built (ninja -C build)`);
  const [http_, grpc, pyro, metrics] = await freePorts(4);
  ports = { http: http_, grpc, pyro, metrics };
  process.env.PROFLINK_BIN = BIN;
  const yaml = `
receivers:
  otlp:
    protocols:
      grpc: { endpoint: 127.0.0.1:${grpc} }
      http: { endpoint: 127.0.0.1:${http_} }
  pyroscope: { endpoint: 127.0.0.1:${pyro} }
exporters:
  debug: { verbosity: basic }
service:
  telemetry:
    logs: { level: error }
    metrics: { address: 127.0.0.1:${metrics} }
  pipelines:
    traces: { receivers: [otlp], exporters: [debug] }
    profiles: { receivers: [otlp, pyroscope], exporters: [debug] }
`;
  pl = await startProflink(yaml, { ports: [http_, grpc, pyro, metrics], env: { PROFLINK_BIN: BIN } });
  // Warm up: first requests allocate the long-lived buffers.
  await post(ports.http, '/v1/traces', smallTraces(), { 'Content-Type': 'application/x-protobuf' });
});

after(async () => {
  if (pl) await pl.stop();
  if (results.length) {
    console.log('\n| row | answer | time ms | peak RSS above idle MiB | worst /health ms |');
    console.log('|---|---|---|---|---|');
    for (const r of results)
      console.log(`| ${r.name} | ${r.status} | ${r.ms.toFixed(0)} | ${r.growMiB.toFixed(1)} | ${r.worstHealth.toFixed(1)} |`);
  }
});

// ---- the rows ---------------------------------------------------------------------

test('H1: pprof with 80k ids colliding in the old unkeyed hash is decoded in linear time', async () => {
  const body = collidingPprof(80000);
  assert.ok(body.length < 8 * MiB);
  await row('H1 colliding pprof ids (80k)', () => post(ports.pyro, '/ingest?name=h1app&format=pprof', body,
    { 'Content-Type': 'application/octet-stream' }), (r) => assert.equal(r.status, 200, r.text));
});

test('H3: push request of 40 gzip samples each inflating to 19 MiB is refused before the memory is spent', async () => {
  const gz = zlib.gzipSync(paddedPprof(19 * MiB), { level: 9 });
  const req = PushRequest.encode(PushRequest.fromObject({
    series: [{
      labels: [{ name: 'service_name', value: 'h3' }, { name: '__name__', value: 'process_cpu' }],
      samples: Array.from({ length: 40 }, (_, i) => ({ rawProfile: gz, ID: `s${i}` })),
    }],
  })).finish();
  assert.ok(req.length < 2 * MiB, `${req.length} bytes`);
  await row('H3 push: 40 samples inflating to 19 MiB each', () => post(ports.pyro, '/push.v1.PusherService/Push', Buffer.from(req),
    { 'Content-Type': 'application/proto' }), (r) => {
    assert.equal(r.status, 413, r.text);
    assert.match(r.text, /resource_exhausted/);
  });
});

test('gzip bomb on /ingest (1 GiB of zeros in about 1 MiB) is refused', async () => {
  const chunk = zlib.gzipSync(Buffer.alloc(64 * MiB), { level: 9 });
  await row('gzip bomb /ingest', () => post(ports.pyro, '/ingest?name=bomb&format=pprof', chunk,
    { 'Content-Type': 'application/octet-stream' }), (r) => assert.equal(r.status, 413, r.text));
});

test('zstd bomb on OTLP/HTTP is refused', async () => {
  const bomb = execFileSync('zstd', ['-19', '-c'], { input: Buffer.alloc(256 * MiB), maxBuffer: 64 * MiB });
  await row('zstd bomb OTLP/HTTP', () => post(ports.http, '/v1/traces', bomb,
    { 'Content-Type': 'application/x-protobuf', 'Content-Encoding': 'zstd' }),
  (r) => assert.ok([400, 413].includes(r.status), `status ${r.status} ${r.text}`));
});

test('2^62 length prefix in OTLP protobuf is refused', async () => {
  const body = Buffer.concat([tag(1, 2), varint(1n << 62n), Buffer.alloc(16)]);
  await row('2^62 length prefix', () => post(ports.http, '/v1/traces', body,
    { 'Content-Type': 'application/x-protobuf' }), (r) => assert.equal(r.status, 400, r.text));
});

test('deeply nested AnyValue (100k levels of OTLP/JSON) is refused', async () => {
  const depth = 100000;
  const value = '{"arrayValue":{"values":['.repeat(depth) + ']}}'.repeat(depth);
  const body = Buffer.from(`{"resourceSpans":[{"resource":{"attributes":[{"key":"a","value":${value}}]}}]}`);
  await row('deep nesting (JSON, 100k)', () => post(ports.http, '/v1/traces', body,
    { 'Content-Type': 'application/json' }), (r) => assert.equal(r.status, 400, r.text));
});

test('deeply nested AnyValue in OTLP protobuf is refused', async () => {
  // AnyValue{array_value(5): ArrayValue{values(1): AnyValue{...}}} 5000 deep.
  let v = fieldBytes(1, Buffer.from('x'));
  for (let i = 0; i < 5000; i++) v = fieldBytes(5, fieldBytes(1, v));
  const kv = Buffer.concat([fieldBytes(1, Buffer.from('a')), fieldBytes(2, v)]);
  const body = fieldBytes(1, fieldBytes(1, fieldBytes(1, kv)));
  await row('deep nesting (protobuf, 5000)', () => post(ports.http, '/v1/traces', body,
    { 'Content-Type': 'application/x-protobuf' }), (r) => assert.equal(r.status, 400, r.text));
});

test('invalid UTF-8 in an OTLP string is refused', async () => {
  const span = Buffer.concat([
    fieldBytes(1, Buffer.alloc(16, 1)), fieldBytes(2, Buffer.alloc(8, 2)),
    fieldBytes(5, Buffer.from([0x66, 0xff, 0xfe, 0xc0, 0x80])),
  ]);
  const body = fieldBytes(1, fieldBytes(2, fieldBytes(2, span)));
  await row('invalid UTF-8 span name', () => post(ports.http, '/v1/traces', body,
    { 'Content-Type': 'application/x-protobuf' }), (r) => assert.equal(r.status, 400, r.text));
});

test('HTTP/2 rapid reset: 20k streams opened and cancelled on one connection', async () => {
  await row('HTTP/2 rapid reset (20k streams)', async () => {
    const client = http2.connect(`http://127.0.0.1:${ports.grpc}`);
    client.on('error', () => {});
    let goaway = false;
    client.on('goaway', () => { goaway = true; });
    await new Promise((r) => client.once('connect', r));
    for (let i = 0; i < 20000 && !client.destroyed && !goaway; i++) {
      const s = client.request({ ':method': 'POST', ':path': '/opentelemetry.proto.collector.trace.v1.TraceService/Export', 'content-type': 'application/grpc' });
      s.on('error', () => {});
      s.close(http2.constants.NGHTTP2_CANCEL);
      if (i % 500 === 0) await new Promise((r) => setImmediate(r));
    }
    await sleep(100);
    client.destroy();
    return { outcome: goaway ? 'GOAWAY' : 'absorbed' };
  }, () => {});
});

test('HTTP/2 CONTINUATION flood: one header block never ended', async () => {
  await row('HTTP/2 CONTINUATION flood', async () => {
    const sock = net.connect(ports.grpc, '127.0.0.1');
    sock.on('error', () => {});
    await new Promise((r) => sock.once('connect', r));
    let closed = false;
    sock.on('close', () => { closed = true; });
    sock.on('data', () => {});
    const frame = (type, flags, stream, payload) => {
      const h = Buffer.alloc(9);
      h.writeUIntBE(payload.length, 0, 3);
      h[3] = type; h[4] = flags; h.writeUInt32BE(stream, 5);
      return Buffer.concat([h, payload]);
    };
    sock.write(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'));
    sock.write(frame(4, 0, 0, Buffer.alloc(0)));
    // HEADERS without END_HEADERS: ':method: POST' (indexed 3), then
    // CONTINUATION frames of literal headers, 16 KiB each, 64 MiB in all.
    sock.write(frame(1, 0, 1, Buffer.from([0x83])));
    const entry = Buffer.concat([Buffer.from([0x00, 0x01, 0x61, 0x7f, 16]), Buffer.alloc(143, 0x62)]);
    const block = Buffer.concat(Array.from({ length: 110 }, () => entry));
    for (let i = 0; i < 4096 && !closed; i++) {
      if (!sock.write(frame(9, 0, 1, block))) await new Promise((r) => { sock.once('drain', r); sock.once('close', r); });
    }
    await sleep(100);
    const outcome = closed ? 'closed' : 'open';
    sock.destroy();
    return { outcome };
  }, (r) => assert.equal(r.outcome, 'closed', 'the server ends a connection whose header block never ends'));
});
