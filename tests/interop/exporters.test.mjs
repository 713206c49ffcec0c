// exporters.test.mjs: proflink's otlphttp and otlp (gRPC) exporters against
// a fake OTLP backend started by this file (node's http, https and http2
// modules). Requests go into proflink's OTLP/HTTP receiver (raw protobuf
// built with protobufjs from the project's .proto files, or the
// OpenTelemetry JS SDK); the backend decodes what reaches it with
// `protoc --decode`, an implementation independent of proflink's codec.
//
// Scenarios: what arrives equals what was sent; 503 for a while, connection
// resets and a slow backend: everything arrives, once; 400 is not retried and
// is counted failed; Retry-After is honoured; a full queue makes the receiver
// answer 503; kill -9 of proflink with a persistent queue, then a restart:
// every acknowledged span arrives; TLS with a CA made by openssl here.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-xxx/proflink node --test exporters.test.mjs

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import http2 from 'node:http2';
import zlib from 'node:zlib';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import {
  PROTO_DIRS, freePort, httpGet, loadProtos, postTraces, sleep, startProflink, waitFor,
} from './lib/common.mjs';

const TRACE_SERVICE = 'opentelemetry/proto/collector/trace/v1/trace_service.proto';
const REQUEST_TYPE = 'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-exporters-'));
const servers = new Set();
const proflinks = new Set();

after(async () => {
  for (const p of proflinks) p.h?.child.kill('SIGKILL');
  for (const s of servers) await s.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

// ---- protobuf (sending side) ----------------------------------------------

const root = loadProtos([TRACE_SERVICE]);
const ExportTraceServiceRequest = root.lookupType(REQUEST_TYPE);

let spanCounter = 0;
// A request with `n` spans named span-<tag>-<k>, rich enough to exercise
// every field kind (attributes of each type, events, links, status).
function makeRequest(tag, n) {
  const traceId = crypto.randomBytes(16);
  const spans = [];
  const names = [];
  for (let i = 0; i < n; i++) {
    const name = `span-${tag}-${spanCounter++}`;
    names.push(name);
    spans.push({
      traceId,
      spanId: crypto.randomBytes(8),
      parentSpanId: i ? spans[0].spanId : undefined,
      name,
      kind: 2,
      startTimeUnixNano: '1700000000000000000',
      endTimeUnixNano: '1700000000250000000',
      attributes: [
        { key: 'http.route', value: { stringValue: '/cart' } },
        { key: 'http.status_code', value: { intValue: 200 } },
        { key: 'ratio', value: { doubleValue: 0.25 } },
        { key: 'ok', value: { boolValue: true } },
        { key: 'list', value: { arrayValue: { values: [{ stringValue: 'a' }, { intValue: 7 }] } } },
      ],
      events: [{ timeUnixNano: '1700000000100000000', name: 'retry', attributes: [{ key: 'n', value: { intValue: 1 } }] }],
      links: [{ traceId: crypto.randomBytes(16), spanId: crypto.randomBytes(8) }],
      status: { code: 1, message: '' },
    });
  }
  const msg = ExportTraceServiceRequest.fromObject({
    resourceSpans: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: 'checkout' } }] },
      scopeSpans: [{ scope: { name: 'interop', version: '1.0' }, spans }],
    }],
  });
  return { bytes: Buffer.from(ExportTraceServiceRequest.encode(msg).finish()), names };
}

// ---- protoc (receiving side) ----------------------------------------------

function protocDecode(bytes) {
  return execFileSync('protoc', [...PROTO_DIRS.map((d) => `--proto_path=${d}`), `--decode=${REQUEST_TYPE}`, TRACE_SERVICE], {
    input: bytes,
    maxBuffer: 64 << 20,
  }).toString();
}

function spanNames(text) {
  return [...text.matchAll(/^\s*name: "(span-[^"]+)"/gm)].map((m) => m[1]);
}

// ---- the fake backend ---------------------------------------------------------

// behaviour(i, backend) returns what to do with request i:
//   { status: 200 } (default), { status: 503, headers }, { destroy: true },
//   { delayMs, status }, { hang: true }
class Backend {
  constructor({ grpc = false, tls = null, behaviour = () => ({ status: 200 }) } = {}) {
    this.grpc = grpc;
    this.tls = tls;
    this.behaviour = behaviour;
    this.requests = 0;
    this.times = [];
    this.accepted = new Map(); // span name -> times accepted
    this.texts = []; // protoc text of each accepted request
    this.hung = [];
    this.headers = [];
  }

  record(body) {
    const text = protocDecode(body);
    this.texts.push(text);
    for (const n of spanNames(text)) this.accepted.set(n, (this.accepted.get(n) || 0) + 1);
  }

  async start(port = 0) {
    if (this.grpc) {
      this.server = this.tls ? http2.createSecureServer({ key: this.tls.key, cert: this.tls.cert }) : http2.createServer();
      this.server.on('stream', (stream, headers) => this.onStream(stream, headers));
    } else {
      const handler = (req, res) => this.onHttp(req, res);
      const opts = { key: this.tls?.key, cert: this.tls?.cert };
      if (this.tls?.requireClientCert) Object.assign(opts, { requestCert: true, rejectUnauthorized: true, ca: this.tls.ca });
      this.server = this.tls ? https.createServer(opts, handler) : http.createServer(handler);
    }
    this.sockets = new Set();
    this.server.on('connection', (s) => { this.sockets.add(s); s.on('close', () => this.sockets.delete(s)); });
    this.server.on('secureConnection', (s) => { this.sockets.add(s); s.on('close', () => this.sockets.delete(s)); });
    servers.add(this);
    await new Promise((resolve) => this.server.listen(port, '127.0.0.1', resolve));
    this.port = this.server.address().port;
    return this.port;
  }

  async stop() {
    if (!this.server) return;
    servers.delete(this);
    for (const h of this.hung) h();
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(() => resolve()));
    this.server = null;
  }

  async onHttp(req, res) {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    let body = Buffer.concat(chunks);
    const i = this.requests++;
    this.times.push(Date.now());
    this.headers.push(req.headers);
    const b = this.behaviour(i, this) || { status: 200 };
    if (b.destroy) { req.socket.destroy(); return; }
    if (b.hang) { await new Promise((r) => this.hung.push(r)); }
    if (b.delayMs) await sleep(b.delayMs);
    if (req.socket.destroyed) return; // the client gave up: nothing was accepted
    const status = b.status || 200;
    if (status === 200) {
      const enc = req.headers['content-encoding'];
      if (enc === 'gzip') body = zlib.gunzipSync(body);
      else if (enc === 'zstd') body = Buffer.from(execFileSync('zstd', ['-d', '-c'], { input: body }));
      this.record(body);
      res.writeHead(200, { 'content-type': 'application/x-protobuf' });
      res.end(Buffer.from([0x0a, 0x00]));
    } else {
      res.writeHead(status, { 'content-type': 'text/plain', ...(b.headers || {}) });
      res.end(`status ${status}`);
    }
  }

  onStream(stream, headers) {
    const chunks = [];
    stream.on('data', (c) => chunks.push(c));
    stream.on('error', () => {});
    stream.on('end', async () => {
      const i = this.requests++;
      this.times.push(Date.now());
      this.headers.push(headers);
      const b = this.behaviour(i, this) || { status: 200 };
      if (b.destroy) { stream.session.destroy(); return; }
      if (b.delayMs) await sleep(b.delayMs);
      if (stream.destroyed || stream.closed) return;
      if (b.grpcStatus) {
        stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(b.grpcStatus), 'grpc-message': 'scripted%20failure' }, { endStream: true });
        return;
      }
      const frame = Buffer.concat(chunks);
      let msg = frame.subarray(5, 5 + frame.readUInt32BE(1));
      if (frame[0] === 1) msg = zlib.gunzipSync(msg);
      this.record(msg);
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(Buffer.from([0, 0, 0, 0, 2, 0x0a, 0x00]));
    });
  }
}

// ---- proflink -----------------------------------------------------------------

class Proflink {
  constructor(name, exporterType, exporterConfig) {
    this.dir = fs.mkdtempSync(path.join(tmp, `${name}-`));
    this.exporterType = exporterType;
    this.exporterConfig = exporterConfig;
    this.logs = []; // stderr of every run (restarts included)
    proflinks.add(this);
  }

  get log() {
    return this.logs.map((h) => h.log).join('');
  }

  async start() {
    if (!this.port) {
      this.port = await freePort();
      this.metricsPort = await freePort();
    }
    // YAML accepts JSON flow style, which keeps the generated file exact.
    const yaml = [
      'receivers:',
      '  otlp:',
      '    protocols:',
      '      http:',
      `        endpoint: 127.0.0.1:${this.port}`,
      'exporters:',
      `  ${this.exporterType}: ${JSON.stringify(this.exporterConfig)}`,
      'service:',
      '  telemetry:',
      `    metrics: { address: "127.0.0.1:${this.metricsPort}" }`,
      '  pipelines:',
      `    traces: { receivers: [otlp], exporters: [${this.exporterType}] }`,
      '',
    ].join('\n');
    this.h = await startProflink(yaml, { dir: this.dir, ports: [this.port] });
    this.logs.push(this.h);
  }

  async stop() {
    const r = await this.h.stop(15000);
    // with a sanitizer build (PROFLINK_BIN=build-asan/proflink) any report fails the test
    assert.doesNotMatch(this.log, /AddressSanitizer|LeakSanitizer|runtime error:/);
    return r;
  }

  async kill9() {
    return this.h.kill9();
  }

  // POSTs an OTLP/HTTP protobuf request; resolves with the HTTP status.
  async post(bytes) {
    return (await postTraces(this.port, bytes)).status;
  }

  async metric(name, exporter) {
    const { body: text } = await httpGet(this.metricsPort, '/metrics');
    const re = new RegExp(`^${name}\\{exporter="${exporter}"\\} (\\d+)`, 'm');
    const m = text.match(re);
    return m ? Number(m[1]) : undefined;
  }
}

const fastRetry = { initial_interval: '100ms', max_interval: '500ms', max_elapsed_time: '60s' };

function assertAllOnce(backend, names) {
  for (const n of names) assert.equal(backend.accepted.get(n), 1, `${n} accepted ${backend.accepted.get(n) || 0} times`);
}

// ---- tests --------------------------------------------------------------------

test('otlphttp: what arrives equals what was sent (protoc decode), gzip, headers', { timeout: 30000 }, async () => {
  const backend = new Backend();
  const port = await backend.start();
  const p = new Proflink('equal', 'otlphttp', {
    endpoint: `http://127.0.0.1:${port}`,
    headers: { authorization: 'Bearer t0ken' },
    retry_on_failure: fastRetry,
  });
  await p.start();
  const sent = [makeRequest('eq', 3), makeRequest('eq', 1), makeRequest('eq', 20)];
  for (const r of sent) assert.equal(await p.post(r.bytes), 200);
  await waitFor(() => backend.texts.length === 3, 10000, 'three requests at the backend');
  const want = sent.map((r) => protocDecode(r.bytes)).sort();
  assert.deepEqual([...backend.texts].sort(), want);
  assert.equal(backend.headers[0].authorization, 'Bearer t0ken');
  assert.equal(backend.headers[0]['content-encoding'], 'gzip');
  assert.equal(backend.headers[0]['content-type'], 'application/x-protobuf');
  await waitFor(async () => (await p.metric('otelcol_exporter_sent_spans', 'otlphttp')) === 24, 5000, 'sent counter');
  const r = await p.stop();
  assert.equal(r.code, 0);
  await backend.stop();
});

test('otlp (gRPC, h2c): what arrives equals what was sent; UNAVAILABLE is retried', { timeout: 30000 }, async () => {
  const backend = new Backend({ grpc: true, behaviour: (i) => (i < 2 ? { grpcStatus: 14 } : { status: 200 }) });
  const port = await backend.start();
  const p = new Proflink('grpc', 'otlp', {
    endpoint: `127.0.0.1:${port}`,
    tls: { insecure: true },
    sending_queue: { num_consumers: 1 },
    retry_on_failure: fastRetry,
  });
  await p.start();
  const sent = [makeRequest('grpc', 4), makeRequest('grpc', 2)];
  for (const r of sent) assert.equal(await p.post(r.bytes), 200);
  await waitFor(() => backend.texts.length === 2, 10000, 'two requests at the backend');
  assert.deepEqual([...backend.texts].sort(), sent.map((r) => protocDecode(r.bytes)).sort());
  assert.equal(backend.headers[0]['content-type'], 'application/grpc');
  assert.equal(backend.headers[0][':path'], '/opentelemetry.proto.collector.trace.v1.TraceService/Export');
  assertAllOnce(backend, sent.flatMap((r) => r.names));
  await p.stop();
  await backend.stop();
});

test('otlphttp: spans from the OpenTelemetry JS SDK reach the backend', { timeout: 30000 }, async () => {
  const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-proto');
  const { BasicTracerProvider, SimpleSpanProcessor } = await import('@opentelemetry/sdk-trace-base');
  const backend = new Backend();
  const port = await backend.start();
  const p = new Proflink('sdk', 'otlphttp', { endpoint: `http://127.0.0.1:${port}`, retry_on_failure: fastRetry });
  await p.start();
  const exporter = new OTLPTraceExporter({ url: `http://127.0.0.1:${p.port}/v1/traces` });
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracer = provider.getTracer('interop');
  const names = [];
  for (let i = 0; i < 5; i++) {
    const name = `span-sdk-${i}`;
    names.push(name);
    tracer.startSpan(name).end();
  }
  await provider.forceFlush();
  await waitFor(() => names.every((n) => backend.accepted.has(n)), 10000, 'SDK spans at the backend');
  assertAllOnce(backend, names);
  await provider.shutdown();
  await p.stop();
  await backend.stop();
});

test('otlphttp: 503 for a while, then everything arrives once', { timeout: 40000 }, async () => {
  const t0 = Date.now();
  const backend = new Backend({ behaviour: () => (Date.now() - t0 < 2000 ? { status: 503 } : { status: 200 }) });
  const port = await backend.start();
  const p = new Proflink('503', 'otlphttp', { endpoint: `http://127.0.0.1:${port}`, retry_on_failure: fastRetry });
  await p.start();
  const sent = [];
  for (let i = 0; i < 20; i++) {
    const r = makeRequest('u', 5);
    assert.equal(await p.post(r.bytes), 200);
    sent.push(...r.names);
  }
  await waitFor(() => sent.every((n) => backend.accepted.has(n)), 20000, 'all spans after the outage');
  assertAllOnce(backend, sent);
  assert.ok(backend.requests > 20, 'some requests were refused and retried');
  assert.equal(await p.metric('otelcol_exporter_send_failed_spans', 'otlphttp'), 0);
  await p.stop();
  await backend.stop();
});

test('otlphttp: connection resets are retried, everything arrives once', { timeout: 30000 }, async () => {
  const backend = new Backend({ behaviour: (i) => (i < 4 ? { destroy: true } : { status: 200 }) });
  const port = await backend.start();
  const p = new Proflink('reset', 'otlphttp', { endpoint: `http://127.0.0.1:${port}`, retry_on_failure: fastRetry });
  await p.start();
  const sent = [];
  for (let i = 0; i < 3; i++) {
    const r = makeRequest('r', 4);
    assert.equal(await p.post(r.bytes), 200);
    sent.push(...r.names);
  }
  await waitFor(() => sent.every((n) => backend.accepted.has(n)), 15000, 'all spans after the resets');
  assertAllOnce(backend, sent);
  await p.stop();
  await backend.stop();
});

test('otlphttp: a slow backend (over the timeout) gets the data once it answers in time', { timeout: 30000 }, async () => {
  const backend = new Backend({ behaviour: (i) => (i === 0 ? { delayMs: 2500 } : { delayMs: 200 }) });
  const port = await backend.start();
  const p = new Proflink('slow', 'otlphttp', {
    endpoint: `http://127.0.0.1:${port}`,
    timeout: '1s',
    sending_queue: { num_consumers: 1 },
    retry_on_failure: fastRetry,
  });
  await p.start();
  const r = makeRequest('slow', 6);
  assert.equal(await p.post(r.bytes), 200);
  await waitFor(() => r.names.every((n) => backend.accepted.has(n)), 15000, 'spans after the timeout');
  assert.ok(backend.requests >= 2);
  assertAllOnce(backend, r.names);
  await p.stop();
  await backend.stop();
});

test('otlphttp: 400 is not retried and is counted as failed', { timeout: 30000 }, async () => {
  const backend = new Backend({ behaviour: () => ({ status: 400 }) });
  const port = await backend.start();
  const p = new Proflink('400', 'otlphttp', { endpoint: `http://127.0.0.1:${port}`, retry_on_failure: fastRetry });
  await p.start();
  assert.equal(await p.post(makeRequest('bad', 4).bytes), 200);
  await waitFor(async () => (await p.metric('otelcol_exporter_send_failed_spans', 'otlphttp')) === 4, 5000, 'failed counter');
  await sleep(800); // several retry intervals: a retry would show up here
  assert.equal(backend.requests, 1);
  assert.match(p.log, /400/);
  await p.stop();
  await backend.stop();
});

test('otlphttp: Retry-After is honoured', { timeout: 30000 }, async () => {
  const backend = new Backend({ behaviour: (i) => (i === 0 ? { status: 429, headers: { 'retry-after': '2' } } : { status: 200 }) });
  const port = await backend.start();
  const p = new Proflink('retryafter', 'otlphttp', { endpoint: `http://127.0.0.1:${port}`, retry_on_failure: { initial_interval: '50ms', max_interval: '100ms' } });
  await p.start();
  const r = makeRequest('ra', 2);
  assert.equal(await p.post(r.bytes), 200);
  await waitFor(() => r.names.every((n) => backend.accepted.has(n)), 10000, 'spans after Retry-After');
  assert.ok(backend.times[1] - backend.times[0] >= 1900, `retried after ${backend.times[1] - backend.times[0]} ms`);
  await p.stop();
  await backend.stop();
});

test('back-pressure: a full sending queue makes the receiver answer 503, nothing is lost', { timeout: 30000 }, async () => {
  const backend = new Backend({ behaviour: (i) => (i === 0 ? { hang: true } : { status: 200 }) });
  const port = await backend.start();
  const p = new Proflink('full', 'otlphttp', {
    endpoint: `http://127.0.0.1:${port}`,
    sending_queue: { num_consumers: 1, queue_size: 2 },
    retry_on_failure: fastRetry,
  });
  await p.start();
  const a = makeRequest('bp', 1), b = makeRequest('bp', 1), c = makeRequest('bp', 1);
  assert.equal(await p.post(a.bytes), 200);
  await waitFor(() => backend.requests === 1, 5000, 'first request in flight');
  assert.equal(await p.post(b.bytes), 200);
  assert.equal(await p.post(c.bytes), 503); // queue full: the client is told to retry
  for (const h of backend.hung) h(); // the backend comes back
  await waitFor(() => [...a.names, ...b.names].every((n) => backend.accepted.has(n)), 10000, 'queued spans');
  assert.equal(await p.post(c.bytes), 200); // the client's retry now succeeds
  await waitFor(() => c.names.every((n) => backend.accepted.has(n)), 10000, 'retried spans');
  assert.equal(await p.metric('otelcol_exporter_enqueue_failed_spans', 'otlphttp'), 1);
  await p.stop();
  await backend.stop();
});

test('persistent queue: kill -9 mid-stream, restart, every acknowledged span arrives', { timeout: 60000 }, async () => {
  const t0 = Date.now();
  // Down for the first second (503), then slow: some data is stored, some in flight.
  const backend = new Backend({ behaviour: () => (Date.now() - t0 < 1000 ? { status: 503 } : { status: 200, delayMs: 100 }) });
  const port = await backend.start();
  const storage = path.join(tmp, 'queue-store/');
  const cfg = {
    endpoint: `http://127.0.0.1:${port}`,
    sending_queue: { storage, num_consumers: 2 },
    retry_on_failure: fastRetry,
  };
  const p = new Proflink('kill9', 'otlphttp', cfg);
  await p.start();
  const acked = [];
  let refused = 0;
  const until = Date.now() + 1800;
  while (Date.now() < until) {
    const r = makeRequest('k', 10);
    const status = await p.post(r.bytes);
    if (status === 200) acked.push(...r.names);
    else refused++;
    await sleep(10);
  }
  const killed = await p.kill9();
  assert.equal(killed.signal, 'SIGKILL');
  assert.ok(acked.length > 0);
  const before = acked.filter((n) => backend.accepted.has(n)).length;
  await p.start(); // same config, same storage
  try {
    await waitFor(() => acked.every((n) => backend.accepted.has(n)), 30000, 'acknowledged spans');
  } catch (e) {
    const missing = acked.filter((n) => !backend.accepted.has(n));
    assert.fail(`${missing.length} of ${acked.length} acknowledged spans missing (${before} arrived before the kill), e.g. ${missing.slice(0, 5)}; backend saw ${backend.requests} requests; log:\n${p.log}`);
  }
  // Duplicates are bounded by what was in flight: at most num_consumers requests.
  let dups = 0;
  for (const n of acked) dups += backend.accepted.get(n) - 1;
  assert.ok(dups <= 2 * 10, `${dups} duplicated spans`);
  assert.ok(refused === 0, `${refused} requests refused`);
  await p.stop();
  await backend.stop();
});

test('persistent queue: backend down, kill -9, restart with the backend up', { timeout: 60000 }, async () => {
  const port = await freePort(); // nothing listens yet
  const storage = path.join(tmp, 'down.db');
  const p = new Proflink('down', 'otlphttp', {
    endpoint: `http://127.0.0.1:${port}`,
    sending_queue: { storage },
    retry_on_failure: fastRetry,
  });
  await p.start();
  const acked = [];
  for (let i = 0; i < 10; i++) {
    const r = makeRequest('d', 7);
    assert.equal(await p.post(r.bytes), 200);
    acked.push(...r.names);
  }
  await p.kill9();
  const backend = new Backend();
  await backend.start(port);
  await p.start();
  await waitFor(() => acked.every((n) => backend.accepted.has(n)), 20000, 'stored spans after restart');
  assertAllOnce(backend, acked);
  await p.stop();
  await backend.stop();
});

// ---- TLS ------------------------------------------------------------------------

function makeTestCA() {
  const dir = fs.mkdtempSync(path.join(tmp, 'ca-'));
  const f = (n) => path.join(dir, n);
  const ossl = (...args) => execFileSync('openssl', args, { stdio: 'pipe' });
  ossl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '1', '-subj', '/CN=proflink test CA');
  ossl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=127.0.0.1');
  fs.writeFileSync(f('ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  ossl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('server.pem'), '-days', '1', '-extfile', f('ext.cnf'));
  ossl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('client.key'), '-out', f('client.csr'), '-subj', '/CN=proflink');
  ossl('x509', '-req', '-in', f('client.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('client.pem'), '-days', '1');
  return {
    caFile: f('ca.pem'), key: fs.readFileSync(f('server.key')), cert: fs.readFileSync(f('server.pem')),
    ca: fs.readFileSync(f('ca.pem')), clientCert: f('client.pem'), clientKey: f('client.key'),
  };
}

test('TLS: custom CA, insecure_skip_verify, client certificates, gRPC over TLS; without trust nothing is sent', { timeout: 60000 }, async () => {
  const ca = makeTestCA();
  // otlphttp over https with ca_file
  const b1 = new Backend({ tls: ca });
  const port1 = await b1.start();
  const p1 = new Proflink('tls-http', 'otlphttp', { endpoint: `https://127.0.0.1:${port1}`, tls: { ca_file: ca.caFile }, retry_on_failure: fastRetry });
  await p1.start();
  const r1 = makeRequest('tls', 3);
  assert.equal(await p1.post(r1.bytes), 200);
  await waitFor(() => r1.names.every((n) => b1.accepted.has(n)), 10000, 'spans over https');
  await p1.stop();

  // the same server without the CA: the system CAs do not know it
  const p2 = new Proflink('tls-noca', 'otlphttp', { endpoint: `https://127.0.0.1:${port1}`, retry_on_failure: fastRetry });
  await p2.start();
  const r2 = makeRequest('tls-noca', 2);
  assert.equal(await p2.post(r2.bytes), 200);
  await sleep(1000);
  assert.ok(!r2.names.some((n) => b1.accepted.has(n)));
  assert.match(p2.log, /certificate|SSL/i);
  await p2.stop();

  // insecure_skip_verify: no CA, no verification, delivered
  const p2b = new Proflink('tls-skip', 'otlphttp', { endpoint: `https://127.0.0.1:${port1}`, tls: { insecure_skip_verify: true }, retry_on_failure: fastRetry });
  await p2b.start();
  const r2b = makeRequest('tls-skip', 2);
  assert.equal(await p2b.post(r2b.bytes), 200);
  await waitFor(() => r2b.names.every((n) => b1.accepted.has(n)), 10000, 'spans with insecure_skip_verify');
  await p2b.stop();
  await b1.stop();

  // mutual TLS: the server requires a client certificate signed by the CA
  const bm = new Backend({ tls: { ...ca, requireClientCert: true } });
  const portm = await bm.start();
  const pm = new Proflink('tls-mutual', 'otlphttp', {
    endpoint: `https://127.0.0.1:${portm}`,
    tls: { ca_file: ca.caFile, cert_file: ca.clientCert, key_file: ca.clientKey },
    retry_on_failure: fastRetry,
  });
  await pm.start();
  const rm = makeRequest('tls-mutual', 3);
  assert.equal(await pm.post(rm.bytes), 200);
  await waitFor(() => rm.names.every((n) => bm.accepted.has(n)), 10000, 'spans over mutual TLS');
  await pm.stop();
  const pn = new Proflink('tls-nocert', 'otlphttp', { endpoint: `https://127.0.0.1:${portm}`, tls: { ca_file: ca.caFile }, retry_on_failure: fastRetry });
  await pn.start();
  const rn = makeRequest('tls-nocert', 1);
  assert.equal(await pn.post(rn.bytes), 200);
  await sleep(1000);
  assert.ok(!rn.names.some((n) => bm.accepted.has(n)), 'no client certificate: nothing accepted');
  await pn.stop();
  await bm.stop();

  // otlp (gRPC) over TLS (h2 by ALPN); an endpoint without a scheme means TLS
  const b3 = new Backend({ grpc: true, tls: ca });
  const port3 = await b3.start();
  const p3 = new Proflink('tls-grpc', 'otlp', { endpoint: `127.0.0.1:${port3}`, tls: { ca_file: ca.caFile }, retry_on_failure: fastRetry });
  await p3.start();
  const r3 = makeRequest('tls-grpc', 4);
  assert.equal(await p3.post(r3.bytes), 200);
  await waitFor(() => r3.names.every((n) => b3.accepted.has(n)), 10000, 'spans over gRPC+TLS');
  assertAllOnce(b3, r3.names);
  await p3.stop();
  await b3.stop();
});
