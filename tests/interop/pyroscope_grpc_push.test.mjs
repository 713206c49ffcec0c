// pyroscope_grpc_push.test.mjs: the Pyroscope push API over gRPC
// (push.v1.PusherService/Push, h2c) on the `pyroscope` receiver's port, from
// a real @grpc/grpc-js client whose service comes from proto/push/v1/push.proto
// through @grpc/proto-loader, as Grafana Alloy and gRPC-configured SDKs call
// it. Checks: a push (plain and gzip-compressed by grpc-js) is accepted with
// an empty PushResponse and its profile reaches the file exporter with the
// totals of the pprof sent; a push the Connect form refuses with 400
// invalid_argument is refused over gRPC with INVALID_ARGUMENT and the same
// message; an empty push likewise ("no profiles received"); over the size
// limit: 413 for Connect, RESOURCE_EXHAUSTED for gRPC.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test pyroscope_grpc_push.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import {
  FIXTURES, mapObj, otlpProfileTotals, PushRequest, readJsonLines, request as post,
} from './lib/common.mjs';
import { freePorts, PROTO_DIRS, startProflink, waitFor } from './lib/proflink.mjs';

const FIXTURE = path.join(FIXTURES, 'nodejs_wall.pprof.gz');
let pl, port, tmp, out, Pusher;

before(async () => {
  let metricsPort;
  [port, metricsPort] = await freePorts(2);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-grpc-push-'));
  out = path.join(tmp, 'out.jsonl');
  pl = await startProflink(`
receivers:
  pyroscope:
    endpoint: 127.0.0.1:${port}
exporters:
  file:
    path: ${out}
service:
  telemetry:
    logs: { level: warn }
    metrics: { address: "127.0.0.1:${metricsPort}" }
  pipelines:
    profiles: { receivers: [pyroscope], exporters: [file] }
`, { ports: [port], dir: tmp });
  const def = protoLoader.loadSync('push/v1/push.proto', { includeDirs: PROTO_DIRS });
  Pusher = grpc.loadPackageDefinition(def).push.v1.PusherService;
});

after(async () => {
  await pl?.cleanup();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

function push(req, options = {}) {
  const client = new Pusher(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), options);
  return new Promise((resolve) => client.Push(req, (error, response) => {
    client.close();
    resolve({ error, response });
  }));
}

const lines = (service) => readJsonLines(out).filter((l) =>
  l.resourceProfiles?.some((rp) => rp.resource?.attributes?.some((a) =>
    a.key === 'service.name' && a.value.stringValue === service)));

function series(service, rawProfile) {
  return { series: [{
    labels: [{ name: '__name__', value: 'wall' }, { name: 'service_name', value: service },
      { name: 'region', value: 'eu' }],
    samples: [{ rawProfile, ID: '734FD599-6865-419E-9475-932762D8F469' }],
  }] };
}

test('push.v1.PusherService/Push over gRPC (grpc-js, h2c) is accepted and decoded like the Connect form', { timeout: 30000 }, async () => {
  const body = fs.readFileSync(FIXTURE);
  // the reference: the same message through the Connect form
  const connect = await post(port, '/push.v1.PusherService/Push',
    { 'content-type': 'application/proto', 'connect-protocol-version': '1' },
    Buffer.from(PushRequest.encode(PushRequest.fromObject(series('via-connect', body))).finish()));
  assert.equal(connect.status, 200, connect.body.toString());

  let r = await push(series('via-grpc', body));
  assert.equal(r.error, null, String(r.error));
  assert.deepEqual(r.response, {}); // an empty PushResponse
  r = await push(series('via-grpc-gzip', body), { 'grpc.default_compression_algorithm': 2 });
  assert.equal(r.error, null, String(r.error));

  await waitFor(() => ['via-connect', 'via-grpc', 'via-grpc-gzip'].every((s) => lines(s).length === 1),
    15000, `profiles in the file exporter (log: ${pl.log})`);
  const want = otlpProfileTotals(lines('via-connect'));
  assert.ok(want.byType.size > 0);
  for (const s of ['via-grpc', 'via-grpc-gzip']) {
    const got = otlpProfileTotals(lines(s));
    assert.deepEqual(mapObj(got.byType), mapObj(want.byType), s);
    assert.deepEqual(mapObj(got.byFn), mapObj(want.byFn), s);
    const attrs = lines(s)[0].resourceProfiles[0].resource.attributes;
    assert.ok(attrs.some((a) => a.key === 'region' && a.value.stringValue === 'eu'));
  }
});

test('gRPC push errors carry the Connect answer as a gRPC status', { timeout: 30000 }, async () => {
  const body = fs.readFileSync(FIXTURE);
  const bad = series('bad', body.subarray(0, body.length - 20));
  const connect = await post(port, '/push.v1.PusherService/Push',
    { 'content-type': 'application/proto' },
    Buffer.from(PushRequest.encode(PushRequest.fromObject(bad)).finish()));
  assert.equal(connect.status, 400);
  const cerr = JSON.parse(connect.body.toString());
  assert.equal(cerr.code, 'invalid_argument');

  let r = await push(bad);
  assert.equal(r.error?.code, grpc.status.INVALID_ARGUMENT);
  assert.equal(r.error.details, cerr.message);
  assert.match(r.error.details, /series 0 sample 0: gzip/);

  r = await push({ series: [] });
  assert.equal(r.error?.code, grpc.status.INVALID_ARGUMENT);
  assert.equal(r.error.details, 'no profiles received');
  assert.equal(lines('bad').length, 0);
});

test('a gRPC push over the size limit is RESOURCE_EXHAUSTED, as the Connect form answers 413', { timeout: 30000 }, async () => {
  const [small, metricsPort] = await freePorts(2);
  const tiny = await startProflink(`
receivers:
  pyroscope:
    endpoint: 127.0.0.1:${small}
    max_request_body_size: 1KiB
exporters:
  debug: {}
service:
  telemetry:
    logs: { level: error }
    metrics: { address: "127.0.0.1:${metricsPort}" }
  pipelines:
    profiles: { receivers: [pyroscope], exporters: [debug] }
`, { ports: [small] });
  try {
    const body = fs.readFileSync(FIXTURE);
    assert.ok(body.length > 2048);
    const connect = await post(small, '/push.v1.PusherService/Push', { 'content-type': 'application/proto' },
      Buffer.from(PushRequest.encode(PushRequest.fromObject(series('big', body))).finish()));
    assert.equal(connect.status, 413);
    const client = new Pusher(`127.0.0.1:${small}`, grpc.credentials.createInsecure());
    const r = await new Promise((resolve) => client.Push(series('big', body), (error, response) => {
      client.close();
      resolve({ error, response });
    }));
    assert.equal(r.error?.code, grpc.status.RESOURCE_EXHAUSTED, String(r.error));
  } finally {
    await tiny.cleanup();
  }
});
