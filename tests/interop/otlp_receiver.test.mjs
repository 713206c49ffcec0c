// otlp_receiver.test.mjs: the OpenTelemetry JavaScript SDK's own exporters
// (OTLP/gRPC, OTLP/HTTP protobuf, OTLP/HTTP JSON; with and without gzip)
// send spans to proflink's `otlp` receiver; proflink hands them on with its
// `otlphttp` exporter to a sink in this test. Every span must come out
// identical to what the SDK serialized: ids, names, kinds, times, attributes
// of every type, events, links, status, resource and scope.
//
// Then bad input of every kind the issue lists, each answered with its
// status code, while a slow client and a garbage client stay connected and
// a well-behaved exporter keeps being served.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test otlp_receiver.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';

import { SpanKind, SpanStatusCode, TraceFlags } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  exportSpans, freePort, loadProtos, request as post, startProflink, tracerProvider, until,
} from './lib/common.mjs';
import { profilesObject } from './lib/profiles.mjs';

// ---- protobuf types, from proflink's own .proto files ----------------------
const protoRoot = loadProtos([
  'opentelemetry/proto/collector/trace/v1/trace_service.proto',
  'opentelemetry/proto/collector/profiles/v1development/profiles_service.proto',
  'google/rpc/status.proto',
]);
const TraceReq = protoRoot.lookupType(
  'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
const ProfilesReq = protoRoot.lookupType(
  'opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest');
const RpcStatus = protoRoot.lookupType('google.rpc.Status');
const toObj = (type, msg) =>
  type.toObject(msg, { longs: String, bytes: String, defaults: true, arrays: true });

// ---- helpers ----------------------------------------------------------------

function grpcFrame(msg, compressed = 0) {
  const b = Buffer.alloc(5 + msg.length);
  b[0] = compressed;
  b.writeUInt32BE(msg.length, 1);
  Buffer.from(msg).copy(b, 5);
  return b;
}

// One raw gRPC call with node's http2 client: returns HTTP status and the
// grpc-status / grpc-message from headers or trailers.
function grpcCall(port, p, body, extraHeaders = {}) {
  return new Promise((resolve, reject) => {
    const client = http2.connect(`http://127.0.0.1:${port}`);
    client.on('error', reject);
    const req = client.request({
      ':method': 'POST', ':path': p, 'content-type': 'application/grpc', te: 'trailers',
      ...extraHeaders,
    });
    const out = { status: 0, grpcStatus: null, grpcMessage: '', details: false };
    const take = (h) => {
      if (h['grpc-status'] !== undefined) out.grpcStatus = Number(h['grpc-status']);
      if (h['grpc-message'] !== undefined) out.grpcMessage = decodeURIComponent(h['grpc-message']);
      if (h['grpc-status-details-bin'] !== undefined) out.details = true;
    };
    req.on('response', (h) => { out.status = h[':status']; take(h); });
    req.on('trailers', take);
    req.on('data', () => {});
    req.on('end', () => { client.close(); resolve(out); });
    req.on('error', (e) => { client.close(); resolve({ ...out, error: e.code }); });
    req.end(body);
  });
}

// ---- the sink: what proflink's otlphttp exporter sends ----------------------
const received = { traces: [], profiles: [] };
let sink;

function startSink(port) {
  sink = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let body = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') body = zlib.gunzipSync(body);
      if (req.url === '/v1/traces') received.traces.push(toObj(TraceReq, TraceReq.decode(body)));
      else if (req.url === '/v1development/profiles')
        received.profiles.push(toObj(ProfilesReq, ProfilesReq.decode(body)));
      res.writeHead(200, { 'content-type': 'application/x-protobuf' });
      res.end();
    });
  });
  return new Promise((resolve) => sink.listen(port, '127.0.0.1', resolve));
}

function resourcesOf(service) {
  const out = [];
  for (const r of received.traces)
    for (const rs of r.resourceSpans)
      if (rs.resource?.attributes?.some((a) => a.key === 'service.name' &&
                                               a.value.stringValue === service))
        out.push(rs);
  return out;
}

// ---- proflink ---------------------------------------------------------------
let pl, grpcPort, httpPort, sinkPort, tmp;

before(async () => {
  grpcPort = await freePort();
  httpPort = await freePort();
  sinkPort = await freePort();
  const metricsPort = await freePort();
  await startSink(sinkPort);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-otlp-'));
  const config = `
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:${grpcPort}
      http:
        endpoint: 127.0.0.1:${httpPort}
        max_request_body_size: 1MiB
        read_header_timeout: 20s
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:${sinkPort}
    compression: none
service:
  telemetry:
    logs: { level: warn }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    traces: { receivers: [otlp], exporters: [otlphttp] }
    profiles: { receivers: [otlp], exporters: [otlphttp] }
`;
  pl = await startProflink(config, { dir: tmp, ports: [grpcPort, httpPort] });
});

after(async () => {
  await pl?.stop(5000);
  sink?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

// ---- spans with every field the JS SDK can set --------------------------------
function makeSpans(service) {
  const mem = new InMemorySpanExporter();
  const provider = tracerProvider({
    'service.name': service,
    'service.version': '1.2.3',
    'host.cores': 8,
    'deployment.canary': false,
    'sample.ratio': 0.25,
    'host.ips': ['10.0.0.1', '10.0.0.2'],
  }, mem);
  const tracer = provider.getTracer('interop-scope', '4.5.6', { schemaUrl: 'https://opentelemetry.io/schemas/1.24.0' });
  const t0 = 1_700_000_000_123; // ms since the epoch
  const kinds = [SpanKind.INTERNAL, SpanKind.SERVER, SpanKind.CLIENT, SpanKind.PRODUCER, SpanKind.CONSUMER];
  const root = tracer.startSpan('GET /cart', {
    kind: SpanKind.SERVER,
    startTime: t0,
    attributes: {
      'http.route': '/cart', 'str.empty': '', 'str.utf8': 'naïve ☃ 日本',
      'int.pos': 42, 'int.neg': -7, 'int.big': 9007199254740991, 'int.zero': 0,
      'double.val': 3.14159, 'double.neg': -0.5, 'double.tiny': 1e-300,
      'bool.t': true, 'bool.f': false,
      'arr.str': ['a', 'b', ''], 'arr.int': [1, 2, 3], 'arr.double': [1.5, 2.5],
      'arr.bool': [true, false], 'arr.empty': [],
    },
  });
  const rootCtx = root.spanContext();
  const spans = [];
  kinds.forEach((kind, i) => {
    const s = tracer.startSpan(`child-${i}`, {
      kind,
      startTime: t0 + i,
      attributes: { index: i },
      links: [
        { context: rootCtx, attributes: { 'link.kind': 'parent-ish', 'link.n': i } },
        {
          context: { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331',
                     traceFlags: TraceFlags.SAMPLED,
                     traceState: undefined },
        },
      ],
    }, /* parent */ (await_ctx(root)));
    s.addEvent('cache.miss', { key: `k${i}`, size: 10 * i }, t0 + i + 0.5);
    s.addEvent('no-attributes', t0 + i + 0.75);
    if (i === 2) s.setStatus({ code: SpanStatusCode.ERROR, message: 'upstream timed out' });
    if (i === 3) s.setStatus({ code: SpanStatusCode.OK });
    s.setAttribute('late.attr', `late-${i}`);
    s.end(t0 + i + 1.25);
    spans.push(s);
  });
  root.end(t0 + 10);
  return mem.getFinishedSpans();
}

// Parent context helper: a context whose active span is `span`.
import { context, trace } from '@opentelemetry/api';
function await_ctx(span) {
  return trace.setSpan(context.active(), span);
}

// ---- tests --------------------------------------------------------------------
const variants = [
  { name: 'grpc', make: (c) => new GrpcExporter({ url: `http://127.0.0.1:${grpcPort}`, ...c }) },
  { name: 'proto', make: (c) => new ProtoExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces`, ...c }) },
  { name: 'json', make: (c) => new JsonExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces`, ...c }) },
];

for (const v of variants) {
  for (const gzip of [false, true]) {
    const label = `${v.name}${gzip ? '+gzip' : ''}`;
    test(`spans sent by exporter-trace-otlp-${label} come out identical`, async () => {
      const service = `interop-${label}`;
      const spans = makeSpans(service);
      assert.equal(spans.length, 6);
      const exporter = v.make(gzip ? { compression: 'gzip' } : {});
      const result = await exportSpans(exporter, spans);
      await exporter.shutdown();
      assert.equal(result.code, 0, `export failed: ${result.error}\n${pl.log}`);
      const expected = toObj(TraceReq, TraceReq.decode(ProtobufTraceSerializer.serializeRequest(spans)));
      assert.ok(await until(() => resourcesOf(service).length > 0), 'nothing reached the sink');
      const got = resourcesOf(service);
      assert.deepStrictEqual(got, expected.resourceSpans);
      // spot checks that the comparison is about real data
      const all = got[0].scopeSpans.flatMap((s) => s.spans);
      assert.equal(all.length, 6);
      assert.deepEqual([...new Set(all.map((s) => s.kind))].sort(), [1, 2, 3, 4, 5]);
      assert.equal(got[0].scopeSpans[0].scope.name, 'interop-scope');
    });
  }
}

function profilesRequest(service) {
  return ProfilesReq.fromObject(profilesObject(service, {
    scope: 'interop-profiler', sampleTimeNs: '1700000000100000000', startNs: '1700000000000000000',
    secondValues: [20000000, 5], profileAttributeIndices: [1],
  }));
}

function profilesOf(service) {
  return received.profiles.filter((r) => r.resourceProfiles.some((rp) =>
    rp.resource?.attributes?.some((a) => a.key === 'service.name' && a.value.stringValue === service)));
}

for (const via of ['http', 'grpc']) {
  test(`an OTLP profiles request over ${via} comes out identical`, async () => {
    const service = `interop-profiles-${via}`;
    const msg = profilesRequest(service);
    const bytes = Buffer.from(ProfilesReq.encode(msg).finish());
    if (via === 'http') {
      const r = await post(httpPort, '/v1development/profiles',
        { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' }, zlib.gzipSync(bytes));
      assert.equal(r.status, 200);
      assert.deepEqual([...r.body], [0x0a, 0x00]);
    } else {
      const g = await grpcCall(grpcPort,
        '/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export',
        grpcFrame(zlib.gzipSync(bytes), 1), { 'grpc-encoding': 'gzip' });
      assert.equal(g.grpcStatus, 0);
    }
    assert.ok(await until(() => profilesOf(service).length > 0), 'nothing reached the sink');
    assert.deepStrictEqual(profilesOf(service)[0], toObj(ProfilesReq, msg));
  });
}

test('bad input gets its status code; good clients keep being served', async () => {
  // A slow client (headers never finished) and a garbage HTTP/2 client stay
  // connected for the whole test.
  const slow = net.connect(httpPort, '127.0.0.1');
  slow.write('POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n');
  const junk = net.connect(grpcPort, '127.0.0.1');
  junk.on('error', () => {});
  slow.on('error', () => {});
  junk.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x04\x99\xff\xff\xff\xff');

  const spans = makeSpans('interop-bad');
  const good = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans));
  const pb = { 'content-type': 'application/x-protobuf' };
  const checkStatus = (r, code) => {
    const st = toObj(RpcStatus, RpcStatus.decode(r.body));
    assert.equal(st.code, code);
    assert.ok(st.message.length > 0, 'the Status says what went wrong');
    return st;
  };

  // truncated protobuf
  let r = await post(httpPort, '/v1/traces', pb, good.subarray(0, good.length - 7));
  assert.equal(r.status, 400);
  checkStatus(r, 3);
  // wrong wire type for resource_spans (fixed32 instead of length-delimited)
  r = await post(httpPort, '/v1/traces', pb, Buffer.from([0x0d, 1, 2, 3, 4]));
  assert.equal(r.status, 400);
  // a length prefix far beyond the body
  r = await post(httpPort, '/v1/traces', pb, Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 1]));
  assert.equal(r.status, 400);
  // invalid UTF-8 in a span name
  const bad = Buffer.from(good);
  const at = bad.indexOf('child-1');
  bad[at] = 0xff; bad[at + 1] = 0xfe;
  r = await post(httpPort, '/v1/traces', pb, bad);
  assert.equal(r.status, 400);
  assert.match(checkStatus(r, 3).message, /utf-?8/i);
  // bad gzip
  r = await post(httpPort, '/v1/traces', { ...pb, 'content-encoding': 'gzip' },
    Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xde, 0xad, 0xbe, 0xef]));
  assert.equal(r.status, 400);
  // wrong content type, unsupported encoding
  r = await post(httpPort, '/v1/traces', { 'content-type': 'text/plain' }, good);
  assert.equal(r.status, 415);
  r = await post(httpPort, '/v1/traces', { ...pb, 'content-encoding': 'br' }, good);
  assert.equal(r.status, 415);
  // oversize: raw, and a gzip bomb that only grows when inflated
  r = await post(httpPort, '/v1/traces', pb, Buffer.alloc(2 * 1024 * 1024, 1));
  assert.equal(r.status, 413);
  r = await post(httpPort, '/v1/traces', { ...pb, 'content-encoding': 'gzip' },
    zlib.gzipSync(Buffer.alloc(8 * 1024 * 1024)));
  assert.equal(r.status, 413);
  // unknown path, wrong method
  r = await post(httpPort, '/v1/nope', pb, good);
  assert.equal(r.status, 404);
  r = await post(httpPort, '/v1/traces', {}, undefined, 'GET');
  assert.equal(r.status, 405);
  // profiles: a sample whose stack index is outside the dictionary
  const prof = ProfilesReq.encode(ProfilesReq.fromObject({
    resourceProfiles: [{ scopeProfiles: [{ profiles: [{ samples: [{ stackIndex: 7, values: [1] }] }] }] }],
    dictionary: { stringTable: [''], stackTable: [{}], locationTable: [{}], functionTable: [{}],
                  mappingTable: [{}], linkTable: [{}], attributeTable: [{}] },
  })).finish();
  r = await post(httpPort, '/v1development/profiles', pb, Buffer.from(prof));
  assert.equal(r.status, 400);
  assert.match(checkStatus(r, 3).message, /stack/i);

  // gRPC
  const traces = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';
  let g = await grpcCall(grpcPort, traces, grpcFrame(good.subarray(0, good.length - 7)));
  assert.equal(g.grpcStatus, 3);
  const huge = Buffer.from([0, 0x7f, 0xff, 0xff, 0xff, 1, 2, 3]);
  g = await grpcCall(grpcPort, traces, huge);
  assert.ok(g.grpcStatus === 3 || g.grpcStatus === 8, `huge prefix: ${g.grpcStatus}`);
  g = await grpcCall(grpcPort, traces, grpcFrame(Buffer.from([1, 2, 3]), 1), { 'grpc-encoding': 'gzip' });
  assert.equal(g.grpcStatus, 3);
  g = await grpcCall(grpcPort, traces, grpcFrame(good), { 'grpc-encoding': 'snappy' });
  assert.equal(g.grpcStatus, 12);
  g = await grpcCall(grpcPort, '/opentelemetry.proto.collector.trace.v1.TraceService/Nope', grpcFrame(good));
  assert.equal(g.grpcStatus, 12);
  g = await grpcCall(grpcPort, '/opentelemetry.proto.collector.logs.v1.LogsService/Export', grpcFrame(Buffer.alloc(0)));
  assert.equal(g.grpcStatus, 12, 'no logs pipeline: UNIMPLEMENTED');
  g = await grpcCall(grpcPort, traces, grpcFrame(Buffer.alloc(5 * 1024 * 1024)));
  assert.equal(g.grpcStatus, 8, 'over max_recv_msg_size: RESOURCE_EXHAUSTED');
  g = await grpcCall(grpcPort, traces, grpcFrame(good), { 'content-type': 'application/json' });
  assert.equal(g.status, 415);
  // a good raw call on the same server
  g = await grpcCall(grpcPort, traces, grpcFrame(zlib.gzipSync(good), 1), { 'grpc-encoding': 'gzip' });
  assert.equal(g.grpcStatus, 0);

  // and a real exporter is still served while the bad clients hang around
  const exporter = new ProtoExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces` });
  const fresh = makeSpans('interop-after-bad');
  const res = await exportSpans(exporter, fresh);
  await exporter.shutdown();
  assert.equal(res.code, 0);
  assert.ok(await until(() => resourcesOf('interop-after-bad').length > 0));
  assert.equal(pl.child.exitCode, null, 'proflink still running');
  slow.destroy();
  junk.destroy();
});

test('proflink stops cleanly on SIGTERM, with no sanitizer report', async () => {
  const { code, signal } = await pl.stop(15000);
  assert.equal(code ?? signal, 0, pl.log);
  assert.doesNotMatch(pl.log, /AddressSanitizer|LeakSanitizer|runtime error/);
});
