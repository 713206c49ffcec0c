// logs_metrics.test.mjs: logs and metrics from the OpenTelemetry JavaScript
// SDK (the OTLP/HTTP log and metric exporters) go through
//   otlp -> attributes -> redaction -> batch -> otlphttp
// in the real binary, to a fake OTLP/HTTP backend that decodes what arrives
// with protobufjs and the project's .proto files. Every log record and data
// point arrives, with its body / value / timestamps as the SDK sent them, and
// its attributes changed as configured: inserted, hashed, updated, deleted,
// masked; a resource attribute and the log bodies are masked too.
//
// Run: cd tests/interop && PROFLINK_BIN=$PWD/../../build/proflink node --test logs_metrics.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import zlib from 'node:zlib';

import protobuf from 'protobufjs';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { LoggerProvider, SimpleLogRecordProcessor } from '@opentelemetry/sdk-logs';
import { OTLPLogExporter } from '@opentelemetry/exporter-logs-otlp-http';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { freePort, protoFile, startProflink, waitFor } from './lib/proflink.mjs';

const root = new protobuf.Root();
root.resolvePath = protoFile;
root.loadSync([
  'opentelemetry/proto/logs/v1/logs.proto',
  'opentelemetry/proto/metrics/v1/metrics.proto',
], { keepCase: false });
// LogsData / MetricsData have the wire shape of the Export*ServiceRequest
// messages (field 1: the resource list), whose service files proflink does
// not carry.
const LogsRequest = root.lookupType('opentelemetry.proto.logs.v1.LogsData');
const MetricsRequest = root.lookupType('opentelemetry.proto.metrics.v1.MetricsData');

// A fake OTLP/HTTP backend keeping every decoded logs / metrics request.
async function backend() {
  const got = { logs: [], metrics: [], errors: [] };
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    let body = Buffer.concat(chunks);
    try {
      if (req.headers['content-encoding'] === 'gzip') body = zlib.gunzipSync(body);
      if (req.url === '/v1/logs') got.logs.push(LogsRequest.toObject(LogsRequest.decode(body), { longs: String }));
      else if (req.url === '/v1/metrics') got.metrics.push(MetricsRequest.toObject(MetricsRequest.decode(body), { longs: String }));
      else throw new Error(`unexpected path ${req.url}`);
    } catch (e) {
      got.errors.push(String(e));
      res.writeHead(400);
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/x-protobuf' });
    res.end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  got.port = server.address().port;
  got.stop = () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); });
  return got;
}

const procs = [];
after(async () => {
  for (const p of procs) await p.cleanup();
});

const value = (attrs, key) => {
  const v = (attrs || []).find((a) => a.key === key)?.value;
  if (!v) return undefined;
  return v.stringValue ?? v.intValue ?? v.doubleValue ?? v.boolValue;
};
const sha256 = (s) => crypto.createHash('sha256').update(s).digest('hex');

test('attributes and redaction act on SDK log records and metric data points', { timeout: 60000 }, async () => {
  const be = await backend();
  const port = await freePort();
  const proc = await startProflink(`
receivers:
  otlp:
    protocols:
      http: { endpoint: 127.0.0.1:${port} }
processors:
  attributes:
    actions:
      - { key: env, action: insert, value: prod }
      - { key: user.email, action: hash }
      - { key: tmp.debug, action: delete }
      - { key: route, action: update, value: /checkout }
  redaction:
    allow_all_keys: true
    blocked_values: ['4111[ -]?1111[ -]?1111[ -]?1111']
  batch: { send_batch_size: 1000, timeout: 200ms }
exporters:
  otlphttp: { endpoint: 'http://127.0.0.1:${be.port}', compression: none }
service:
  telemetry: { logs: { level: error } }
  pipelines:
    logs: { receivers: [otlp], processors: [attributes, redaction, batch], exporters: [otlphttp] }
    metrics: { receivers: [otlp], processors: [attributes, redaction, batch], exporters: [otlphttp] }
`, { ports: [port] });
  procs.push(proc);
  const resource = resourceFromAttributes({ 'service.name': 'checkout', 'host.note': 'card 4111 1111 1111 1111' });

  // logs
  const logProvider = new LoggerProvider({
    resource,
    processors: [new SimpleLogRecordProcessor({ exporter: new OTLPLogExporter({ url: `http://127.0.0.1:${port}/v1/logs` }) })],
  });
  const logger = logProvider.getLogger('lm-test', '1.0.0');
  const N = 20;
  for (let i = 0; i < N; i++) {
    logger.emit({
      severityText: 'INFO', severityNumber: 9, body: `order ${i} paid with 4111 1111 1111 1111`,
      timestamp: [1_700_000_000, i],
      attributes: { 'user.email': `u${i}@example.com`, 'tmp.debug': 'x', i, note: 'paid with 4111 1111 1111 1111' },
    });
  }
  await logProvider.forceFlush();
  await logProvider.shutdown();

  // metrics: a counter, a histogram and an up-down counter, two attribute sets
  const exporter = new OTLPMetricExporter({ url: `http://127.0.0.1:${port}/v1/metrics` });
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ resource, readers: [reader] });
  const meter = meterProvider.getMeter('lm-test', '1.0.0');
  const counter = meter.createCounter('orders');
  const hist = meter.createHistogram('latency');
  const gauge = meter.createUpDownCounter('inflight');
  for (const route of ['/a', '/b']) {
    counter.add(3, { route, 'user.email': 'x@example.com' });
    hist.record(12.5, { route, 'tmp.debug': 'y' });
    gauge.add(-2, { route });
  }
  await reader.forceFlush();
  await meterProvider.shutdown();

  const records = () => be.logs.flatMap((r) => r.resourceLogs.flatMap((rl) => rl.scopeLogs.flatMap((sl) => sl.logRecords.map((lr) => ({ rl, lr })))));
  await waitFor(() => records().length >= N && be.metrics.length > 0, 20000, 'logs and metrics at the backend');
  assert.deepEqual(be.errors, []);

  const recs = records();
  assert.equal(recs.length, N);
  const seen = new Set();
  for (const { rl, lr } of recs) {
    const i = Number(value(lr.attributes, 'i'));
    seen.add(i);
    assert.equal(lr.body.stringValue, `order ${i} paid with ****`);
    assert.equal(lr.severityText, 'INFO');
    assert.equal(lr.severityNumber, 9);
    assert.equal(lr.timeUnixNano, String(1_700_000_000n * 1_000_000_000n + BigInt(i)));
    assert.equal(value(lr.attributes, 'env'), 'prod');
    assert.equal(value(lr.attributes, 'user.email'), sha256(`u${i}@example.com`));
    assert.equal(value(lr.attributes, 'tmp.debug'), undefined);
    assert.equal(value(lr.attributes, 'note'), 'paid with ****');
    assert.equal(value(rl.resource.attributes, 'service.name'), 'checkout');
    assert.equal(value(rl.resource.attributes, 'host.note'), 'card ****');
    assert.equal(value(rl.resource.attributes, 'env'), undefined); // attributes acts on records, not resources
  }
  assert.equal(seen.size, N);

  const metrics = new Map();
  for (const req of be.metrics) {
    for (const rm of req.resourceMetrics) {
      assert.equal(value(rm.resource.attributes, 'host.note'), 'card ****');
      for (const sm of rm.scopeMetrics) for (const m of sm.metrics) metrics.set(m.name, m);
    }
  }
  const orders = metrics.get('orders').sum.dataPoints;
  const latency = metrics.get('latency').histogram.dataPoints;
  const inflight = metrics.get('inflight').sum.dataPoints;
  for (const pts of [orders, latency, inflight]) {
    assert.equal(pts.length, 2);
    assert.deepEqual(pts.map((p) => value(p.attributes, 'route')).sort(), ['/checkout', '/checkout']);
    for (const p of pts) {
      assert.equal(value(p.attributes, 'env'), 'prod');
      assert.equal(value(p.attributes, 'tmp.debug'), undefined);
    }
  }
  for (const p of orders) {
    assert.equal(Number(p.asDouble ?? p.asInt), 3);
    assert.equal(value(p.attributes, 'user.email'), sha256('x@example.com'));
  }
  for (const p of latency) {
    assert.equal(Number(p.count), 1);
    assert.equal(p.sum, 12.5);
    assert.ok(p.bucketCounts.length > 1 && p.explicitBounds.length === p.bucketCounts.length - 1);
  }
  for (const p of inflight) assert.equal(Number(p.asDouble ?? p.asInt), -2);
  await be.stop();
});
