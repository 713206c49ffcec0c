// acceptance_otlp.test.mjs: spans from the real OpenTelemetry JS SDK (grpc,
// proto and http/json exporters, gzip on and off) go through proflink's otlp
// receiver and leave through its `otlp` (gRPC) and `otlphttp` exporters, each
// with gzip and without compression. The backends decode with their own
// implementations: a real @grpc/grpc-js server (service from
// @grpc/proto-loader) and node http + protobufjs. Every span must arrive
// equal to what the SDK's own serializer produces: ids, names, kinds, times,
// attributes of every type, events, links, status, resource and scope.
// An OTLP profiles request must reach ProfilesService/Export unchanged.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-xxx/proflink node --test acceptance_otlp.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { context, trace, SpanKind, SpanStatusCode, TraceFlags } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import {
  freePorts, startProflink, waitFor, grpcBackend, httpBackend, canonical,
  ProfilesRequest, ProfilesResponse,
} from './lib/proflink.mjs';
import grpc from '@grpc/grpc-js';
import { profilesObject } from './lib/profiles.mjs';

let pl, backends, grpcPort, httpPort;

before(async () => {
  backends = {
    grpcGzip: await grpcBackend(),
    grpcNone: await grpcBackend(),
    httpGzip: await httpBackend(),
    httpNone: await httpBackend(),
  };
  let metricsPort;
  [grpcPort, httpPort, metricsPort] = await freePorts(3);
  pl = await startProflink(`
receivers:
  otlp:
    protocols:
      grpc: { endpoint: "127.0.0.1:${grpcPort}" }
      http: { endpoint: "127.0.0.1:${httpPort}" }
exporters:
  otlp/gzip:
    endpoint: 127.0.0.1:${backends.grpcGzip.port}
    tls: { insecure: true }
    compression: gzip
    headers: { authorization: "Bearer grpc-token" }
  otlp/none:
    endpoint: 127.0.0.1:${backends.grpcNone.port}
    tls: { insecure: true }
    compression: none
  otlphttp/gzip:
    endpoint: http://127.0.0.1:${backends.httpGzip.port}
    compression: gzip
    headers: { authorization: "Bearer http-token" }
  otlphttp/none:
    endpoint: http://127.0.0.1:${backends.httpNone.port}
    compression: none
service:
  telemetry:
    logs: { level: warn }
    metrics: { address: "127.0.0.1:${metricsPort}" }
  pipelines:
    traces: { receivers: [otlp], exporters: [otlp/gzip, otlp/none, otlphttp/gzip, otlphttp/none] }
    profiles: { receivers: [otlp], exporters: [otlp/gzip, otlphttp/none] }
`, { ports: [grpcPort, httpPort] });
});

after(async () => {
  if (pl) {
    const r = await pl.stop();
    await pl.cleanup();
    assert.equal(r.code, 0, `proflink exit ${JSON.stringify(r)}: ${pl.log}`);
  }
  for (const b of Object.values(backends || {})) await b.stop();
});

// Rich spans: every attribute type, events, links with attributes, status,
// kinds, parent/child, resource and scope (with schema URL).
function makeSpans(service) {
  const mem = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      'service.name': service, 'service.version': '1.2.3', 'host.cores': 8,
      'deployment.canary': false, 'sample.ratio': 0.25, 'host.ips': ['10.0.0.1', '10.0.0.2'],
    }),
    spanProcessors: [new SimpleSpanProcessor(mem)],
  });
  const tracer = provider.getTracer('acceptance-scope', '7.8.9', { schemaUrl: 'https://opentelemetry.io/schemas/1.24.0' });
  const t0 = Date.now() - 5000;
  const root = tracer.startSpan('GET /cart', {
    kind: SpanKind.SERVER, startTime: t0,
    attributes: {
      'http.route': '/cart', 'str.empty': '', 'str.utf8': 'naïve ☃ 日本 \u0000 nul',
      'int.pos': 42, 'int.neg': -7, 'int.big': 9007199254740991, 'int.zero': 0,
      'double.val': 3.14159, 'double.neg': -0.5, 'double.tiny': 1e-300,
      'bool.t': true, 'bool.f': false,
      'arr.str': ['a', 'b', ''], 'arr.int': [1, -2, 3], 'arr.double': [1.5, 2.5],
      'arr.bool': [true, false], 'arr.empty': [],
    },
  });
  const rootCtx = root.spanContext();
  const kinds = [SpanKind.INTERNAL, SpanKind.SERVER, SpanKind.CLIENT, SpanKind.PRODUCER, SpanKind.CONSUMER];
  kinds.forEach((kind, i) => {
    const s = tracer.startSpan(`child-${i}`, {
      kind, startTime: t0 + i, attributes: { index: i },
      links: [
        { context: rootCtx, attributes: { 'link.kind': 'parent-ish', 'link.n': i, 'link.d': 0.5 } },
        { context: { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.SAMPLED } },
      ],
    }, trace.setSpan(context.active(), root));
    s.addEvent('cache.miss', { key: `k${i}`, size: 10 * i, hit: false, ratios: [0.1, 0.2] }, t0 + i + 0.5);
    s.addEvent('no-attributes', t0 + i + 0.75);
    if (i === 2) s.setStatus({ code: SpanStatusCode.ERROR, message: 'upstream timed out' });
    if (i === 3) s.setStatus({ code: SpanStatusCode.OK });
    s.end(t0 + i + 1.25);
  });
  root.end(t0 + 10);
  return mem.getFinishedSpans();
}

function exportSpans(exporter, spans) {
  return new Promise((resolve) => exporter.export(spans, resolve));
}

const senders = [
  { name: 'grpc', make: (c) => new GrpcExporter({ url: `http://127.0.0.1:${grpcPort}`, ...c }) },
  { name: 'proto', make: (c) => new ProtoExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces`, ...c }) },
  { name: 'json', make: (c) => new JsonExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces`, ...c }) },
];

for (const s of senders) {
  for (const gzip of [false, true]) {
    const label = `${s.name}${gzip ? '+gzip' : ''}`;
    test(`SDK ${label} -> proflink -> otlp (grpc-js) and otlphttp backends: spans identical`, { timeout: 30000 }, async () => {
      const service = `acc-${label}`;
      const spans = makeSpans(service);
      const exporter = s.make(gzip ? { compression: 'gzip' } : {});
      const r = await exportSpans(exporter, spans);
      await exporter.shutdown();
      assert.equal(r.code, 0, `export failed: ${r.error}\n${pl.log}`);
      const expected = canonical(Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)));
      assert.equal(expected.size, 6);
      for (const [bname, b] of Object.entries(backends)) {
        await waitFor(() => [...expected.keys()].every((id) => b.counts.has(id)), 15000,
          `${label} spans at ${bname} (log: ${pl.log})`);
        const got = b.canonical();
        for (const [id, want] of expected) {
          assert.deepStrictEqual(got.get(id), want, `span ${want.span.name} at ${bname}`);
          assert.equal(b.counts.get(id), 1, `span ${id} once at ${bname}`);
        }
      }
      // spot checks that the comparison is about real data
      const root = [...expected.values()].find((v) => v.span.name === 'GET /cart');
      assert.ok(root.span.attributes.length >= 17);
      assert.equal(root.scope.name, 'acceptance-scope');
    });
  }
}

test('exporter headers and compression reach the backends', async () => {
  const g = backends.grpcGzip.requests.at(-1);
  assert.ok(g, 'grpc backend got requests');
  assert.deepEqual(g.headers.authorization, 'Bearer grpc-token');
  const h = backends.httpGzip.requests.at(-1);
  assert.equal(h.headers.authorization, 'Bearer http-token');
  assert.equal(h.headers['content-encoding'], 'gzip');
  assert.equal(h.headers['content-type'], 'application/x-protobuf');
  const n = backends.httpNone.requests.at(-1);
  assert.equal(n.headers['content-encoding'], undefined);
  // No export needed a retry: every backend answered OK at once, so a
  // retry means proflink's client failed (e.g. h2c connection reuse).
  assert.doesNotMatch(pl.log, /will retry|failed/);
  for (const b of [backends.grpcGzip, backends.grpcNone]) assert.equal(b.attempts, b.requests.length + b.profileRequests.length);
  assert.ok(!backends.httpGzip.errors && !backends.httpNone.errors, String(backends.httpGzip.errors || backends.httpNone.errors));
});

function profilesRequest(service) {
  return ProfilesRequest.fromObject(profilesObject(service, { scope: 'acc-profiler' }));
}

test('OTLP profiles (HTTP, and gRPC from grpc-js) reach ProfilesService/Export (grpc-js) and /v1development/profiles unchanged', { timeout: 30000 }, async () => {
  const msg = profilesRequest('acc-profiles');
  const bytes = Buffer.from(ProfilesRequest.encode(msg).finish());
  const res = await fetch(`http://127.0.0.1:${httpPort}/v1development/profiles`, {
    method: 'POST', headers: { 'content-type': 'application/x-protobuf' }, body: bytes,
  });
  assert.equal(res.status, 200);
  // and over gRPC, sent by a grpc-js client (gzip)
  const client = new grpc.Client(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure(),
    { 'grpc.default_compression_algorithm': 2 });
  const path = '/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export';
  const resp = await new Promise((resolve, reject) => client.makeUnaryRequest(path, (x) => x, (b) => Buffer.from(b), bytes,
    (e, r) => (e ? reject(e) : resolve(r))));
  client.close();
  assert.ok(ProfilesResponse.decode(resp));
  const opts = { longs: String, bytes: String, defaults: true, arrays: true };
  const want = ProfilesRequest.toObject(msg, opts);
  for (const b of [backends.grpcGzip, backends.httpNone]) {
    await waitFor(() => b.profileRequests.length >= 2, 15000, `profiles at backend (log: ${pl.log})`);
    for (const r of b.profileRequests) {
      const got = ProfilesRequest.toObject(ProfilesRequest.decode(r.bytes), opts);
      assert.deepStrictEqual(got, want);
    }
  }
});
