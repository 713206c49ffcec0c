// file_exporter.test.mjs: spans serialized by the OpenTelemetry JavaScript
// SDK go through proflink (`otlp` receiver -> `file` exporter) and must come
// out of the file identical: the protobuf records decode (with protobufjs
// and proflink's .proto files) to exactly what the SDK serialized, and so
// do the OTLP/JSON lines once their hex ids are turned back into bytes.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test file_exporter.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  exportSpans, freePort, startProflink, TraceRequest, tracerProvider, until,
} from './lib/common.mjs';

const TraceReq = TraceRequest;
const toObj = (msg) =>
  TraceReq.toObject(msg, { longs: String, bytes: String, defaults: true, arrays: true });

let tmp, pl, httpPort;
let jsonPath, protoPath;

function makeSpans(service) {
  const mem = new InMemorySpanExporter();
  const provider = tracerProvider({
    'service.name': service, 'host.cores': 8, 'sample.ratio': 0.25,
    'host.ips': ['10.0.0.1', '10.0.0.2'], 'deployment.canary': false,
  }, mem);
  const tracer = provider.getTracer('file-scope', '1.0.0');
  const t0 = 1_700_000_000_123;
  const root = tracer.startSpan('GET /cart', {
    kind: SpanKind.SERVER, startTime: t0,
    attributes: {
      'http.route': '/cart', 'str.empty': '', 'str.utf8': 'naïve ☃ 日本 "quoted"\n',
      'int.neg': -7, 'int.big': 9007199254740991, 'int.zero': 0, 'double.val': 3.14159,
      'double.tiny': 1e-300, 'bool.f': false, 'arr.str': ['a', ''], 'arr.empty': [],
    },
  });
  const ctx = trace.setSpan(context.active(), root);
  for (let i = 0; i < 3; i++) {
    const s = tracer.startSpan(`child-${i}`, {
      kind: SpanKind.CLIENT, startTime: t0 + i, attributes: { index: i },
      links: [{ context: root.spanContext(), attributes: { 'link.n': i } }],
    }, ctx);
    s.addEvent('cache.miss', { key: `k${i}` }, t0 + i + 0.5);
    if (i === 1) s.setStatus({ code: SpanStatusCode.ERROR, message: 'boom' });
    s.end(t0 + i + 1.25);
  }
  root.end(t0 + 10);
  return mem.getFinishedSpans();
}

// Records of a `format: proto` file: 4-byte big-endian length + message.
function protoRecords(file) {
  const out = [];
  if (!fs.existsSync(file)) return out;
  const buf = fs.readFileSync(file);
  for (let i = 0; i + 4 <= buf.length;) {
    const n = buf.readUInt32BE(i);
    if (i + 4 + n > buf.length) break;
    out.push(toObj(TraceReq.decode(buf.subarray(i + 4, i + 4 + n))));
    i += 4 + n;
  }
  return out;
}

// OTLP/JSON uses hex ids; protobufjs' JSON form wants base64 bytes.
function hexIdsToBase64(v) {
  if (Array.isArray(v)) return v.map(hexIdsToBase64);
  if (v && typeof v === 'object') {
    const o = {};
    for (const [k, x] of Object.entries(v)) {
      o[k] = ['traceId', 'spanId', 'parentSpanId'].includes(k)
        ? Buffer.from(x, 'hex').toString('base64')
        : hexIdsToBase64(x);
    }
    return o;
  }
  return v;
}

function jsonRecords(file) {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l).map((l) =>
    toObj(TraceReq.fromObject(hexIdsToBase64(JSON.parse(l)))));
}

const serviceOf = (rs) =>
  rs.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue;
const resourcesOf = (records, service) =>
  records.flatMap((r) => r.resourceSpans).filter((rs) => serviceOf(rs) === service);

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-file-'));
  httpPort = await freePort();
  const metricsPort = await freePort();
  jsonPath = path.join(tmp, 'spans.jsonl');
  protoPath = path.join(tmp, 'spans.pb');
  const config = `
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${httpPort}
exporters:
  file/json:
    path: ${jsonPath}
  file/proto:
    path: ${protoPath}
    format: proto
service:
  telemetry:
    logs: { level: warn }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    traces: { receivers: [otlp], exporters: [file/json, file/proto] }
`;
  pl = await startProflink(config, { dir: tmp, ports: [httpPort] });
});

after(async () => {
  await pl?.stop(5000);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

for (const [name, Exporter] of [['proto', ProtoExporter], ['json', JsonExporter]]) {
  test(`spans sent with exporter-trace-otlp-${name} are written to the file unchanged`, async () => {
    const service = `file-${name}`;
    const spans = makeSpans(service);
    const exporter = new Exporter({ url: `http://127.0.0.1:${httpPort}/v1/traces` });
    const result = await exportSpans(exporter, spans);
    await exporter.shutdown();
    assert.equal(result.code, 0, `export failed: ${result.error}\n${pl.log}`);
    const expected = toObj(TraceReq.decode(ProtobufTraceSerializer.serializeRequest(spans)));
    // The exporter writes before the request is answered: no waiting needed,
    // but allow for slow machines anyway.
    assert.ok(await until(() => resourcesOf(protoRecords(protoPath), service).length > 0));
    assert.deepStrictEqual(resourcesOf(protoRecords(protoPath), service), expected.resourceSpans);
    assert.ok(await until(() => resourcesOf(jsonRecords(jsonPath), service).length > 0));
    assert.deepStrictEqual(resourcesOf(jsonRecords(jsonPath), service), expected.resourceSpans);
    const all = expected.resourceSpans[0].scopeSpans.flatMap((s) => s.spans);
    assert.equal(all.length, 4);
  });
}

test('the JSON lines use hex ids and decimal-string times', () => {
  const line = fs.readFileSync(jsonPath, 'utf8').split('\n')[0];
  const req = JSON.parse(line);
  const span = req.resourceSpans[0].scopeSpans[0].spans[0];
  assert.match(span.traceId, /^[0-9a-f]{32}$/);
  assert.match(span.spanId, /^[0-9a-f]{16}$/);
  assert.match(span.startTimeUnixNano, /^\d{19}$/);
  assert.equal(typeof span.kind, 'number');
});
