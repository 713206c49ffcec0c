// acceptance_faults.test.mjs: proflink under faults, with real clients where
// it matters.
// - the backend is down when proflink starts and comes up later: nothing lost;
// - the backend cuts connections in the middle of requests: all arrive once;
// - the backend answers 503 for a while (with Retry-After), then 400 for a
//   phase: 503 data arrives once it recovers, 400 data is not retried;
// - kill -9 with a persistent sending queue, restart: every span whose
//   export got a 200 arrives (spans sent by the OpenTelemetry JS SDK);
// - garbage and slowloris clients on both receiver ports while an SDK
//   client keeps being served quickly;
// - overload: a backend that never answers and a small queue: proflink
//   answers 503 (HTTP) and UNAVAILABLE (gRPC) instead of growing: RSS stays
//   bounded while senders push for several seconds.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-xxx/proflink node --test acceptance_faults.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http2 from 'node:http2';
import net from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import {
  freePorts, startProflink, waitFor, httpBackend, postTraces, TraceRequest, sleep,
} from './lib/proflink.mjs';

function request(n, tag = 'f') {
  const traceId = crypto.randomBytes(16);
  const spans = [];
  for (let i = 0; i < n; i++) {
    spans.push({
      traceId, spanId: crypto.randomBytes(8), name: `${tag}-${i}`, kind: 2,
      startTimeUnixNano: String(BigInt(Date.now()) * 1000000n), endTimeUnixNano: String(BigInt(Date.now() + 1) * 1000000n),
      attributes: [{ key: 'k', value: { stringValue: 'v'.repeat(64) } }],
    });
  }
  const bytes = Buffer.from(TraceRequest.encode(TraceRequest.fromObject({
    resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'faults' } }] }, scopeSpans: [{ spans }] }],
  })).finish());
  return { bytes, ids: spans.map((s) => s.spanId.toString('hex')) };
}

function config({ httpPort, grpcPort, metricsPort, exporter }) {
  return `
receivers:
  otlp:
    protocols:
      http: { endpoint: "127.0.0.1:${httpPort}" }
${grpcPort ? `      grpc: { endpoint: "127.0.0.1:${grpcPort}" }` : ''}
exporters:
  otlphttp: ${JSON.stringify(exporter)}
service:
  telemetry:
    logs: { level: warn }
    metrics: { address: "127.0.0.1:${metricsPort}" }
  pipelines:
    traces: { receivers: [otlp], exporters: [otlphttp] }
`;
}

const fastRetry = { initial_interval: '50ms', max_interval: '300ms', max_elapsed_time: '60s' };

function assertOnce(backend, ids, what) {
  for (const id of ids) assert.equal(backend.counts.get(id), 1, `${what}: span ${id} arrived ${backend.counts.get(id) || 0} times`);
}

async function stopOk(pl) {
  const r = await pl.stop();
  await pl.cleanup();
  assert.deepEqual(r, { code: 0, signal: null }, `proflink exit ${JSON.stringify(r)}: ${pl.log.slice(-3000)}`);
}

test('backend down at start, then up: nothing lost', { timeout: 40000 }, async () => {
  const [httpPort, metricsPort, backendPort] = await freePorts(3);
  const pl = await startProflink(config({
    httpPort, metricsPort, exporter: { endpoint: `http://127.0.0.1:${backendPort}`, retry_on_failure: fastRetry },
  }), { ports: [httpPort] });
  const ids = [];
  for (let i = 0; i < 20; i++) {
    const r = request(10, `down-${i}`);
    assert.equal((await postTraces(httpPort, r.bytes)).status, 200);
    ids.push(...r.ids);
  }
  await sleep(300); // a few connection refusals happen
  const backend = await httpBackend({ port: backendPort });
  try {
    await waitFor(() => ids.every((id) => backend.counts.has(id)), 20000, `spans after the backend came up (${pl.log})`);
    assertOnce(backend, ids, 'down then up');
  } finally {
    await stopOk(pl);
    await backend.stop();
  }
});

test('backend cuts connections mid-request, 503 with Retry-After, then 400: retried once each, 400 not retried', { timeout: 40000 }, async () => {
  let phase = 'cut';
  const seen503 = [];
  const backend = await httpBackend({
    behaviour: (i) => {
      if (phase === 'cut' && i % 2 === 0) return { destroy: true };
      if (phase === '503') { seen503.push(Date.now()); return { status: 503, headers: { 'retry-after': '1' } }; }
      if (phase === '400') return { status: 400 };
      return null;
    },
  });
  const [httpPort, metricsPort] = await freePorts(2);
  const pl = await startProflink(config({
    httpPort, metricsPort, exporter: { endpoint: `http://127.0.0.1:${backend.port}`, retry_on_failure: fastRetry, sending_queue: { num_consumers: 2 } },
  }), { ports: [httpPort] });
  try {
    const cut = [];
    for (let i = 0; i < 10; i++) {
      const r = request(5, `cut-${i}`);
      assert.equal((await postTraces(httpPort, r.bytes)).status, 200);
      cut.push(...r.ids);
    }
    await waitFor(() => cut.every((id) => backend.counts.has(id)), 20000, 'spans after connection cuts');
    assertOnce(backend, cut, 'cut');

    phase = '503';
    const r503 = request(5, 'r503');
    assert.equal((await postTraces(httpPort, r503.bytes)).status, 200);
    await waitFor(() => seen503.length >= 2, 10000, 'two 503 attempts');
    // Retry-After: 1 (second) is honoured although the backoff is 50-300ms.
    assert.ok(seen503[1] - seen503[0] >= 900, `retry after ${seen503[1] - seen503[0]} ms, Retry-After says 1 s`);
    phase = 'ok';
    await waitFor(() => r503.ids.every((id) => backend.counts.has(id)), 10000, '503 data after recovery');
    assertOnce(backend, r503.ids, '503');

    phase = '400';
    const before = backend.attempts;
    const r400 = request(5, 'r400');
    assert.equal((await postTraces(httpPort, r400.bytes)).status, 200);
    await waitFor(() => backend.attempts > before, 5000, 'the 400 attempt');
    await sleep(1000); // several backoff intervals: a retry would show
    assert.equal(backend.attempts, before + 1, '400 is not retried');
    phase = 'ok';
    assert.ok(r400.ids.every((id) => !backend.counts.has(id)));
  } finally {
    await stopOk(pl);
    await backend.stop();
  }
});

test('kill -9 with sending_queue.storage, restart: every SDK span acknowledged with 200 arrives', { timeout: 60000 }, async () => {
  let down = true;
  const backend = await httpBackend({ behaviour: () => (down ? { status: 503 } : null) });
  const [httpPort, metricsPort] = await freePorts(2);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-acc-kill9-'));
  const exporter = {
    endpoint: `http://127.0.0.1:${backend.port}`, retry_on_failure: fastRetry,
    sending_queue: { storage: path.join(dir, 'queue') },
  };
  let pl = await startProflink(config({ httpPort, metricsPort, exporter }), { ports: [httpPort], dir });
  const mem = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'kill9' }), spanProcessors: [new SimpleSpanProcessor(mem)],
  });
  const tracer = provider.getTracer('kill9');
  const acked = [];
  const sdk = new ProtoExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces`, timeoutMillis: 2000 });
  try {
    for (let b = 0; b < 20; b++) {
      mem.reset();
      for (let i = 0; i < 20; i++) tracer.startSpan(`k9-${b}-${i}`).end();
      const spans = mem.getFinishedSpans().slice();
      const r = await new Promise((resolve) => sdk.export(spans, resolve));
      if (r.code === 0) acked.push(...spans.map((s) => s.spanContext().spanId));
    }
    assert.ok(acked.length >= 200, `acknowledged ${acked.length}`);
    await pl.kill9();
    down = false; // the backend recovers while proflink is down
    pl = await startProflink(config({ httpPort, metricsPort, exporter }), { ports: [httpPort], dir });
    await waitFor(() => acked.every((id) => backend.counts.has(id)), 30000,
      `acknowledged spans after restart (${acked.filter((id) => backend.counts.has(id)).length}/${acked.length}; ${pl.log})`);
    assert.equal(backend.duplicates(), 0, 'no duplicates');
  } finally {
    await sdk.shutdown();
    await stopOk(pl);
    await backend.stop();
  }
});

test('garbage and slowloris clients do not stop an SDK client from being served', { timeout: 40000 }, async () => {
  const backend = await httpBackend();
  const [httpPort, grpcPort, metricsPort] = await freePorts(3);
  const pl = await startProflink(config({
    httpPort, grpcPort, metricsPort, exporter: { endpoint: `http://127.0.0.1:${backend.port}`, retry_on_failure: fastRetry },
  }), { ports: [httpPort, grpcPort] });
  const sockets = [];
  try {
    // slowloris: many connections that send half a request and stall
    for (let i = 0; i < 40; i++) {
      for (const port of [httpPort, grpcPort]) {
        const s = net.connect(port, '127.0.0.1');
        s.on('error', () => {});
        s.write(port === httpPort
          ? 'POST /v1/traces HTTP/1.1\r\nHost: x\r\ncontent-type: application/x-protobuf\r\ncontent-length: 100000\r\n\r\nabc'
          : 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
        sockets.push(s);
      }
    }
    // garbage: random bytes, a bad HTTP/2 preface, a huge header line
    const garbage = async (port, bytes) => new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => s.end(bytes));
      s.on('error', resolve); s.on('close', resolve); s.resume();
    });
    await Promise.all([
      garbage(httpPort, crypto.randomBytes(4096)),
      garbage(grpcPort, crypto.randomBytes(4096)),
      garbage(grpcPort, Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), crypto.randomBytes(2048)])),
      garbage(httpPort, `GET /${'a'.repeat(100000)} HTTP/1.1\r\n\r\n`),
    ]);
    // gRPC garbage inside a valid h2 stream: a bad length prefix
    await new Promise((resolve) => {
      const c = http2.connect(`http://127.0.0.1:${grpcPort}`);
      c.on('error', resolve);
      const st = c.request({ ':method': 'POST', ':path': '/opentelemetry.proto.collector.trace.v1.TraceService/Export', 'content-type': 'application/grpc' });
      st.on('response', () => {}); st.on('error', resolve);
      st.on('close', () => { c.close(); resolve(); });
      st.resume();
      st.end(Buffer.from([0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3]));
    });

    // gRPC slowloris: streams that announce a 1000-byte message, send 10
    // bytes of it and stall (on one connection, and one connection each)
    const stalled = [];
    const shared = http2.connect(`http://127.0.0.1:${grpcPort}`);
    shared.on('error', () => {});
    stalled.push(shared);
    for (let i = 0; i < 20; i++) {
      const c = i % 2 ? shared : http2.connect(`http://127.0.0.1:${grpcPort}`);
      if (c !== shared) { c.on('error', () => {}); stalled.push(c); }
      const st = c.request({ ':method': 'POST', ':path': '/opentelemetry.proto.collector.trace.v1.TraceService/Export', 'content-type': 'application/grpc', te: 'trailers' });
      st.on('error', () => {});
      st.resume();
      const part = Buffer.alloc(15);
      part.writeUInt32BE(1000, 1);
      st.write(part);
    }
    sockets.push({ destroy: () => { for (const c of stalled) c.destroy(); } });

    const mem = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': 'good' }), spanProcessors: [new SimpleSpanProcessor(mem)] });
    const tracer = provider.getTracer('good');
    const good = [
      new ProtoExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces`, timeoutMillis: 3000 }),
      new GrpcExporter({ url: `http://127.0.0.1:${grpcPort}`, timeoutMillis: 3000 }),
    ];
    const ids = [];
    for (let i = 0; i < 10; i++) {
      for (const ex of good) {
        mem.reset();
        tracer.startSpan(`good-${i}`).end();
        const spans = mem.getFinishedSpans().slice();
        const t = Date.now();
        const r = await new Promise((resolve) => ex.export(spans, resolve));
        assert.equal(r.code, 0, `good client refused: ${r.error}`);
        assert.ok(Date.now() - t < 2000, `good export took ${Date.now() - t} ms`);
        ids.push(spans[0].spanContext().spanId);
      }
    }
    for (const ex of good) await ex.shutdown();
    await waitFor(() => ids.every((id) => backend.counts.has(id)), 10000, 'good spans at the backend');
  } finally {
    // SIGTERM while the stalled clients are still connected: exit 0 anyway
    await stopOk(pl);
    for (const s of sockets) s.destroy();
    await backend.stop();
  }
});

test('overload: a backend that never answers, a small queue: 503 / UNAVAILABLE to senders, bounded RSS; acknowledged data arrives after recovery', { timeout: 60000 }, async () => {
  let hang = true;
  const backend = await httpBackend({ behaviour: () => (hang ? { hang: true } : null) });
  const [httpPort, grpcPort, metricsPort] = await freePorts(3);
  const pl = await startProflink(config({
    httpPort, grpcPort, metricsPort,
    exporter: {
      endpoint: `http://127.0.0.1:${backend.port}`, timeout: '30s', retry_on_failure: fastRetry,
      sending_queue: { queue_size: 20, num_consumers: 2 },
    },
  }), { ports: [httpPort, grpcPort] });
  let maxRss = 0;
  const sampler = setInterval(() => { maxRss = Math.max(maxRss, pl.rss()); }, 100);
  const statuses = new Map();
  const grpcCodes = new Map();
  const acked = [];
  try {
    const end = Date.now() + 5000;
    const httpWorker = async () => {
      while (Date.now() < end) {
        const req = request(500, 'ovh'); // ~250 KB per request
        const r = await postTraces(httpPort, req.bytes);
        statuses.set(r.status, (statuses.get(r.status) || 0) + 1);
        if (r.status === 200) acked.push(...req.ids);
        else assert.ok(r.status === 503 || r.status === 429, `status ${r.status}`);
      }
    };
    const client = http2.connect(`http://127.0.0.1:${grpcPort}`);
    client.on('error', () => {});
    const grpcWorker = async () => {
      while (Date.now() < end) {
        const req = request(500, 'ovg');
        const frame = Buffer.alloc(5 + req.bytes.length);
        frame.writeUInt32BE(req.bytes.length, 1);
        req.bytes.copy(frame, 5);
        const code = await new Promise((resolve) => {
          const st = client.request({ ':method': 'POST', ':path': '/opentelemetry.proto.collector.trace.v1.TraceService/Export', 'content-type': 'application/grpc', te: 'trailers' });
          let status = null;
          st.on('response', (h) => { if (h['grpc-status'] !== undefined) status = h['grpc-status']; });
          st.on('trailers', (t) => { status = t['grpc-status']; });
          st.on('error', () => resolve('error'));
          st.on('close', () => resolve(status));
          st.resume();
          st.end(frame);
        });
        grpcCodes.set(code, (grpcCodes.get(code) || 0) + 1);
        if (code === '0') acked.push(...req.ids);
      }
    };
    await Promise.all([httpWorker(), httpWorker(), httpWorker(), grpcWorker(), grpcWorker()]);
    client.close();
    console.log(`# overload: http ${JSON.stringify([...statuses])}, grpc ${JSON.stringify([...grpcCodes])}, max RSS ${Math.round(maxRss / 1024)} MiB`);
    assert.ok((statuses.get(503) || 0) + (statuses.get(429) || 0) > 0, `HTTP senders were refused: ${JSON.stringify([...statuses])}`);
    assert.ok((grpcCodes.get('14') || 0) + (grpcCodes.get('8') || 0) > 0, `gRPC senders got UNAVAILABLE: ${JSON.stringify([...grpcCodes])}`);
    assert.ok(!grpcCodes.has('error') && !grpcCodes.has(null), `gRPC calls ended without a status: ${JSON.stringify([...grpcCodes])}`);
    // 20 batches of ~250 KB held at most, plus buffers: far below this.
    assert.ok(maxRss < Number(process.env.ACC_RSS_LIMIT_KIB || 400 * 1024), `RSS ${maxRss} KiB`);

    // Recovery: the backend answers again (the hung requests are cut, so
    // proflink retries them): every acknowledged span arrives, once.
    hang = false;
    backend.releaseHung();
    await waitFor(() => acked.every((id) => backend.counts.has(id)), 30000,
      `acknowledged spans after recovery (${acked.filter((id) => backend.counts.has(id)).length}/${acked.length})`);
    assert.equal(backend.duplicates(), 0, 'no duplicates');
  } finally {
    clearInterval(sampler);
    await backend.stop();
    await stopOk(pl);
  }
});

test('otlp (gRPC) exporter against grpc-js: UNAVAILABLE retried, INVALID_ARGUMENT dropped, RESOURCE_EXHAUSTED retried only with RetryInfo (after its delay)', { timeout: 40000 }, async () => {
  const { grpcBackend, protoRoot } = await import('./lib/proflink.mjs');
  const grpc = (await import('@grpc/grpc-js')).default;
  const protobuf = (await import('protobufjs')).default;
  protoRoot.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto']);
  const Status = protoRoot.lookupType('google.rpc.Status');
  const RetryInfo = protoRoot.lookupType('google.rpc.RetryInfo');
  void protobuf;
  const retryInfoStatus = (ms) => {
    const md = new grpc.Metadata();
    md.set('grpc-status-details-bin', Buffer.from(Status.encode(Status.fromObject({
      code: 8, message: 'slow down',
      details: [{ type_url: 'type.googleapis.com/google.rpc.RetryInfo', value: RetryInfo.encode(RetryInfo.fromObject({ retryDelay: { seconds: 0, nanos: ms * 1e6 } })).finish() }],
    })).finish()));
    return md;
  };
  // script per span name prefix: how many failures, which status
  const attemptsByName = new Map();
  const times = new Map();
  const backend = await grpcBackend({
    behaviour: (i, call) => {
      const req = TraceRequest.decode(call.request);
      const name = req.resourceSpans[0].scopeSpans[0].spans[0].name.split('-')[0];
      const n = (attemptsByName.get(name) || 0) + 1;
      attemptsByName.set(name, n);
      times.set(name, [...(times.get(name) || []), Date.now()]);
      if (name === 'unavail' && n <= 2) return { code: grpc.status.UNAVAILABLE };
      if (name === 'invalid') return { code: grpc.status.INVALID_ARGUMENT };
      if (name === 'exhausted') return { code: grpc.status.RESOURCE_EXHAUSTED };
      if (name === 'retryinfo' && n === 1) return { code: grpc.status.RESOURCE_EXHAUSTED, metadata: retryInfoStatus(1200) };
      return null;
    },
  });
  const [httpPort, metricsPort] = await freePorts(2);
  const pl = await startProflink(`
receivers: { otlp: { protocols: { http: { endpoint: "127.0.0.1:${httpPort}" } } } }
exporters:
  otlp:
    endpoint: 127.0.0.1:${backend.port}
    tls: { insecure: true }
    retry_on_failure: { initial_interval: 50ms, max_interval: 200ms }
service:
  telemetry: { metrics: { address: "127.0.0.1:${metricsPort}" } }
  pipelines: { traces: { receivers: [otlp], exporters: [otlp] } }
`, { ports: [httpPort] });
  try {
    const reqs = {};
    for (const name of ['unavail', 'invalid', 'exhausted', 'retryinfo']) {
      reqs[name] = request(3, name);
      assert.equal((await postTraces(httpPort, reqs[name].bytes)).status, 200);
    }
    await waitFor(() => reqs.unavail.ids.every((id) => backend.counts.has(id)) && reqs.retryinfo.ids.every((id) => backend.counts.has(id)),
      15000, `retried data arrives (${JSON.stringify([...attemptsByName])}; ${pl.log})`);
    await sleep(600); // several backoff intervals: a wrong retry would show
    assert.equal(attemptsByName.get('unavail'), 3);
    assert.equal(attemptsByName.get('invalid'), 1, 'INVALID_ARGUMENT is not retried');
    assert.equal(attemptsByName.get('exhausted'), 1, 'RESOURCE_EXHAUSTED without RetryInfo is not retried');
    assert.equal(attemptsByName.get('retryinfo'), 2);
    const [t1, t2] = times.get('retryinfo');
    assert.ok(t2 - t1 >= 1100, `RetryInfo delay honoured: retried after ${t2 - t1} ms`);
    assertOnce(backend, [...reqs.unavail.ids, ...reqs.retryinfo.ids], 'grpc retries');
  } finally {
    await stopOk(pl);
    await backend.stop();
  }
});

test('SIGTERM with the backend down and sending_queue.storage: exit 0 at once, the data is sent after a restart', { timeout: 40000 }, async () => {
  const [httpPort, metricsPort, backendPort] = await freePorts(3);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-acc-term-'));
  const cfg = config({
    httpPort, metricsPort,
    exporter: { endpoint: `http://127.0.0.1:${backendPort}`, retry_on_failure: fastRetry, sending_queue: { storage: path.join(dir, 'queue') } },
  });
  let pl = await startProflink(cfg, { ports: [httpPort], dir });
  const ids = [];
  for (let i = 0; i < 10; i++) {
    const r = request(5, `term-${i}`);
    assert.equal((await postTraces(httpPort, r.bytes)).status, 200);
    ids.push(...r.ids);
  }
  const t = Date.now();
  const r = await pl.stop();
  assert.deepEqual(r, { code: 0, signal: null }, pl.log);
  assert.ok(Date.now() - t < 5000, `stopped in ${Date.now() - t} ms with the data on disk`);
  const backend = await httpBackend({ port: backendPort });
  pl = await startProflink(cfg, { ports: [httpPort], dir });
  try {
    await waitFor(() => ids.every((id) => backend.counts.has(id)), 15000, `stored spans after restart (${pl.log})`);
    assertOnce(backend, ids, 'stored');
  } finally {
    await stopOk(pl);
    await backend.stop();
  }
});
