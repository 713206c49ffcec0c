// pyroscope_otlp.test.mjs: OTLP profiles sent to the `pyroscope` receiver's
// port, as an OpenTelemetry profiler pointed at "the Pyroscope address"
// does: over HTTP (fetch, protobuf) and over gRPC from a real
// @grpc/grpc-js client (h2c, gzip), on the same port as /ingest. proflink
// exports them with otlphttp to a node http backend; each request must
// arrive there unchanged. gRPC errors come back as grpc-js sees them.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test pyroscope_otlp.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import grpc from '@grpc/grpc-js';
import {
  freePorts, startProflink, waitFor, httpBackend, ProfilesRequest, ProfilesResponse,
} from './lib/proflink.mjs';
import { profilesObject } from './lib/profiles.mjs';

let pl, backend, port;

before(async () => {
  backend = await httpBackend();
  let metricsPort;
  [port, metricsPort] = await freePorts(2);
  pl = await startProflink(`
receivers:
  pyroscope:
    endpoint: 127.0.0.1:${port}
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:${backend.port}
    compression: none
service:
  telemetry:
    logs: { level: warn }
    metrics: { address: "127.0.0.1:${metricsPort}" }
  pipelines:
    profiles: { receivers: [pyroscope], exporters: [otlphttp] }
`, { ports: [port] });
});

after(async () => {
  await pl?.cleanup();
  await backend?.stop();
});

function profilesRequest(service) {
  return ProfilesRequest.fromObject(profilesObject(service, { scope: 'otel-ebpf-profiler', binary: '/usr/bin/app' }));
}

const opts = { longs: String, bytes: String, defaults: true, arrays: true };
const EXPORT = '/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export';

function grpcCall(path, bytes) {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(),
    { 'grpc.default_compression_algorithm': 2 }); // gzip
  return new Promise((resolve) => client.makeUnaryRequest(path, (x) => x, (b) => Buffer.from(b), bytes,
    (e, r) => { client.close(); resolve({ error: e, response: r }); }));
}

test('OTLP profiles over HTTP and gRPC (grpc-js) on the Pyroscope port reach the exporter unchanged', { timeout: 30000 }, async () => {
  const viaHttp = profilesRequest('pyro-otlp-http');
  const res = await fetch(`http://127.0.0.1:${port}/v1development/profiles`, {
    method: 'POST', headers: { 'content-type': 'application/x-protobuf' },
    body: Buffer.from(ProfilesRequest.encode(viaHttp).finish()),
  });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'application/x-protobuf');
  assert.deepEqual([...new Uint8Array(await res.arrayBuffer())], [0x0a, 0x00]);

  const viaGrpc = profilesRequest('pyro-otlp-grpc');
  const { error, response } = await grpcCall(EXPORT, Buffer.from(ProfilesRequest.encode(viaGrpc).finish()));
  assert.equal(error, null, String(error));
  assert.ok(ProfilesResponse.decode(response));

  await waitFor(() => backend.profileRequests.length >= 2, 15000, `profiles at backend (log: ${pl.log})`);
  const got = backend.profileRequests.map((r) => ProfilesRequest.toObject(ProfilesRequest.decode(r.bytes), opts));
  const byService = (s) => got.find((g) => g.resourceProfiles[0].resource.attributes[0].value.stringValue === s);
  assert.deepStrictEqual(byService('pyro-otlp-http'), ProfilesRequest.toObject(viaHttp, opts));
  assert.deepStrictEqual(byService('pyro-otlp-grpc'), ProfilesRequest.toObject(viaGrpc, opts));
});

test('gRPC errors on the Pyroscope port are what grpc-js expects', { timeout: 30000 }, async () => {
  // a truncated message: INVALID_ARGUMENT
  const bytes = Buffer.from(ProfilesRequest.encode(profilesRequest('bad')).finish());
  let r = await grpcCall(EXPORT, bytes.subarray(0, bytes.length - 3));
  assert.equal(r.error?.code, grpc.status.INVALID_ARGUMENT);
  // traces are not served on this port: UNIMPLEMENTED
  r = await grpcCall('/opentelemetry.proto.collector.trace.v1.TraceService/Export', Buffer.alloc(0));
  assert.equal(r.error?.code, grpc.status.UNIMPLEMENTED);
  // the Pyroscope routes still answer on the same port
  const ingest = await fetch(`http://127.0.0.1:${port}/ingest?name=app&format=folded`, {
    method: 'POST', body: 'main;work 10\n',
  });
  assert.equal(ingest.status, 200);
});
