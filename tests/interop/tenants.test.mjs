// tenants.test.mjs: two tenants through one proflink, batched, arrive at
// their backends under their own X-Scope-OrgID and never mixed.
//
// Clients send profiles (Pyroscope /ingest, folded) and spans (OTLP/HTTP),
// interleaved, with X-Scope-OrgID team-a or team-b; each tenant's data is
// named after it (application app-<tenant>, service svc-<tenant>). proflink
// runs both through a `batch` processor (which would merge them if it did
// not key by tenant) into the pyroscope exporter (no fixed tenant_id) and an
// otlphttp exporter with tenant_header: X-Scope-OrgID. Checks: every request
// a backend got carries one tenant header, and everything in its body
// belongs to that tenant; both tenants' data arrived in full. The traces
// also go to the embedded store, whose query API (?tenant=) and CLI
// (--tenant) list each tenant's traces only. The exporters also carry
// credentials from authentication extensions (auth: on otlphttp and
// pyroscope): every request a backend got has them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { BIN, httpGet, pushSink, request, startProflink, until } from './lib/common.mjs';
import zlib from 'node:zlib';
import { freePorts, httpBackend, protoRoot, PushRequest } from './lib/proflink.mjs';

const TraceRequest = protoRoot.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');

let pc, backend, sink, pyroPort, otlpPort, apiPort, dbPath;
const uploads = [];

before(async () => {
  let sinkPort;
  [pyroPort, otlpPort, sinkPort, apiPort] = await freePorts(4);
  sink = await pushSink(sinkPort, uploads);
  backend = await httpBackend();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-tenants-'));
  dbPath = path.join(dir, 'store', 'proflink.db');
  pc = await startProflink(`
extensions:
  bearertokenauth/out: { token: "to-the-backend" }
  basicauth/out: { client_auth: { username: pusher, password: "p@ss" } }
receivers:
  pyroscope: { endpoint: "127.0.0.1:${pyroPort}" }
  otlp: { protocols: { http: { endpoint: "127.0.0.1:${otlpPort}" } } }
processors:
  batch: { timeout: 500ms, send_batch_size: 100000 }
exporters:
  pyroscope: { endpoint: "http://127.0.0.1:${sinkPort}", auth: { authenticator: basicauth/out } }
  otlphttp: { endpoint: "http://127.0.0.1:${backend.port}", compression: none, tenant_header: X-Scope-OrgID,
              auth: { authenticator: bearertokenauth/out } }
  sqlite: { path: ${dbPath}, api: { endpoint: "127.0.0.1:${apiPort}" } }
service:
  extensions: [bearertokenauth/out, basicauth/out]
  telemetry: { metrics: { address: "127.0.0.1:0" } }
  pipelines:
    profiles: { receivers: [pyroscope], processors: [batch], exporters: [pyroscope] }
    traces: { receivers: [otlp], processors: [batch], exporters: [otlphttp, sqlite] }
`, { ports: [pyroPort, otlpPort], dir });
});

after(async () => {
  if (pc) await pc.cleanup();
  if (backend) await backend.stop();
  if (sink) await new Promise((r) => sink.close(r));
});

const tenants = ['team-a', 'team-b'];
const N = 6;

test('profiles: the pyroscope exporter sends each tenant its own X-Scope-OrgID, never mixed', async () => {
  for (let i = 0; i < N; i++) {
    for (const t of tenants) {
      const r = await request(pyroPort, `/ingest?name=app-${t}&format=folded&from=${1700000000 + i}&until=${1700000010 + i}`,
        { 'X-Scope-OrgID': t, 'content-type': 'text/plain' }, `main;work_${t.replace('-', '_')};leaf_${i} ${10 + i}\n`);
      assert.equal(r.status, 200, r.body.toString());
    }
  }
  const seen = () => tenants.every((t) => uploads.some((u) => u.headers['x-scope-orgid'] === t));
  assert.ok(await until(seen, 10000), `uploads: ${uploads.map((u) => u.headers['x-scope-orgid'])} ${pc.log}`);
  await new Promise((r) => setTimeout(r, 700)); // anything still batched
  const leaves = new Map(tenants.map((t) => [t, new Set()]));
  for (const u of uploads) {
    const t = u.headers['x-scope-orgid'];
    assert.ok(tenants.includes(t), `an upload without a known tenant: ${t}`);
    assert.equal(u.headers.authorization, `Basic ${Buffer.from('pusher:p@ss').toString('base64')}`);
    // series labels as sent, and the samples' pprof (gzipped) as text
    const push = PushRequest.decode(u.body);
    const body = push.series.map((s) => JSON.stringify(s.labels) + s.samples.map((x) => {
      const raw = Buffer.from(x.rawProfile);
      return (raw[0] === 0x1f ? zlib.gunzipSync(raw) : raw).toString('latin1');
    }).join('')).join('');
    const other = tenants.find((x) => x !== t);
    assert.ok(body.includes(`app-${t}`), `${t}'s upload lacks its app`);
    assert.ok(!body.includes(`app-${other}`) && !body.includes(`work_${other.replace('-', '_')}`),
      `${t}'s upload holds ${other}'s data`);
    for (let i = 0; i < N; i++) if (body.includes(`leaf_${i}`)) leaves.get(t).add(i);
  }
  for (const t of tenants) assert.equal(leaves.get(t).size, N, `${t}: not every request arrived`);
  // batching did merge within a tenant (fewer uploads than requests)
  assert.ok(uploads.length < 2 * N, `uploads ${uploads.length}: batch did not merge`);
});

test('traces: otlphttp forwards each batch tenant in tenant_header, never mixed', async () => {
  const now = Date.now() - 60000;
  for (let i = 0; i < N; i++) {
    for (const t of tenants) {
      const body = {
        resourceSpans: [{
          resource: { attributes: [{ key: 'service.name', value: { stringValue: `svc-${t}` } }] },
          scopeSpans: [{ spans: [{ traceId: `${t === 'team-a' ? 'a' : 'b'}${String(i).padStart(31, '0')}`,
            spanId: `${t === 'team-a' ? 'a' : 'b'}${String(i).padStart(15, '0')}`, name: `op-${i}`,
            startTimeUnixNano: `${now}000000`, endTimeUnixNano: `${now + 5}000000` }] }],
        }],
      };
      const r = await request(otlpPort, '/v1/traces', { 'content-type': 'application/json', 'X-Scope-OrgID': t },
        JSON.stringify(body));
      assert.equal(r.status, 200);
    }
  }
  assert.ok(await until(() => backend.counts.size === 2 * N, 10000), `spans: ${backend.counts.size}`);
  for (const r of backend.requests) {
    const t = r.headers['x-scope-orgid'];
    assert.ok(tenants.includes(t), `a request without a tenant header: ${JSON.stringify(r.headers)}`);
    assert.equal(r.headers.authorization, 'Bearer to-the-backend');
    const req = TraceRequest.decode(r.bytes);
    for (const rs of req.resourceSpans) {
      const svc = rs.resource.attributes.find((a) => a.key === 'service.name').value.stringValue;
      assert.equal(svc, `svc-${t}`, 'spans of another tenant in the request');
    }
  }
  assert.ok(backend.requests.length < 2 * N, 'batch did not merge');
});

test('store: traces keep their tenant; the API and the CLI filter by it', async () => {
  const list = async (q) => {
    const r = await httpGet(apiPort, `/api/traces?since=1h&limit=100${q}`);
    return JSON.parse(r.body).traces || JSON.parse(r.body);
  };
  const ok = await until(async () => {
    try { return (await list('')).length === 2 * N; } catch { return false; }
  }, 15000);
  assert.ok(ok, `the store did not get the traces: ${pc.log}`);
  for (const t of tenants) {
    const mine = await list(`&tenant=${t}`);
    assert.equal(mine.length, N, `${t}: ${JSON.stringify(mine)}`);
    for (const tr of mine) {
      assert.equal(tr.tenant, t);
      assert.equal(tr.trace_id[0], t === 'team-a' ? 'a' : 'b');
    }
    const cli = JSON.parse(execFileSync(BIN, ['query', 'traces', '--db', dbPath, '--tenant', t,
      '--since', '1h', '--limit', '100', '--json']).toString());
    const rows = cli.traces || cli;
    assert.equal(rows.length, N, `CLI --tenant ${t}`);
    assert.ok(rows.every((r) => r.tenant === t));
  }
  assert.equal((await list('&tenant=nobody')).length, 0);
});
