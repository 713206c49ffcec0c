// exporter_options.test.mjs: exporter settings against real peers.
//   - otlp (gRPC) with compression: zstd against a grpc-js server, which has
//     no zstd: the exporter falls back (gzip) and every span arrives once;
//     the downgrade shows in /metrics.
//   - otlphttp with encoding: json: a node http backend gets gzipped
//     OTLP/JSON (application/json) whose span ids are the ones sent.
//   - pyroscope with api: ingest: a fake Pyroscope gets POST /ingest with
//     format=pprof, the name with labels, from/until, spyName, and a gzipped
//     pprof that pprof-format decodes to the totals the SDK sent.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-xxx/proflink node --test exporter_options.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import zlib from 'node:zlib';
import { Profile } from 'pprof-format';
import { freePorts, startProflink, waitFor, grpcBackend, postTraces, httpGet, TraceRequest } from './lib/proflink.mjs';

function traces(n, tag) {
  const traceId = crypto.randomBytes(16);
  const spans = [];
  for (let i = 0; i < n; i++) {
    spans.push({
      traceId, spanId: crypto.randomBytes(8), name: `${tag}-${i}`, kind: 2,
      startTimeUnixNano: String(BigInt(Date.now()) * 1000000n), endTimeUnixNano: String(BigInt(Date.now() + 1) * 1000000n),
    });
  }
  const bytes = Buffer.from(TraceRequest.encode(TraceRequest.fromObject({
    resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'opts' } }] }, scopeSpans: [{ spans }] }],
  })).finish());
  return { bytes, ids: spans.map((s) => s.spanId.toString('hex')) };
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

async function stopOk(pl) {
  const r = await pl.stop();
  await pl.cleanup();
  assert.deepEqual(r, { code: 0, signal: null }, `proflink exit ${JSON.stringify(r)}: ${pl.log.slice(-3000)}`);
}

test('otlp (gRPC) compression: zstd against grpc-js (no zstd): falls back to gzip, nothing lost, counted', { timeout: 30000 }, async () => {
  const backend = await grpcBackend();
  const [httpPort, metricsPort] = await freePorts(2);
  const pl = await startProflink(`
receivers: { otlp: { protocols: { http: { endpoint: "127.0.0.1:${httpPort}" } } } }
exporters:
  otlp:
    endpoint: 127.0.0.1:${backend.port}
    tls: { insecure: true }
    compression: zstd
    sending_queue: { num_consumers: 1 }
service:
  telemetry: { metrics: { address: "127.0.0.1:${metricsPort}" } }
  pipelines: { traces: { receivers: [otlp], exporters: [otlp] } }
`, { ports: [httpPort] });
  try {
    const sent = [];
    for (let i = 0; i < 3; i++) {
      const r = traces(4, `zstd${i}`);
      sent.push(...r.ids);
      assert.equal((await postTraces(httpPort, r.bytes)).status, 200);
    }
    await waitFor(() => sent.every((id) => backend.counts.has(id)), 15000, `spans at grpc-js (${pl.log})`);
    for (const id of sent) assert.equal(backend.counts.get(id), 1, `span ${id} once`);
    const m = await httpGet(metricsPort, '/metrics');
    assert.match(m.body, /proflink_exporter_compression_downgrades_total\{exporter="otlp"\} 1\b/);
    assert.match(pl.log, /does not accept zstd/);
    assert.equal((pl.log.match(/does not accept zstd/g) || []).length, 1, 'logged once');
    assert.doesNotMatch(pl.log, /dropping/);
  } finally {
    await stopOk(pl);
    await backend.stop();
  }
});

test('otlphttp encoding: json sends gzipped OTLP/JSON with the same spans', { timeout: 30000 }, async () => {
  const got = [];
  const server = http.createServer(async (req, res) => {
    let body = await readBody(req);
    if (req.headers['content-encoding'] === 'gzip') body = zlib.gunzipSync(body);
    got.push({ url: req.url, type: req.headers['content-type'], enc: req.headers['content-encoding'], body: body.toString() });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const [httpPort, metricsPort] = await freePorts(2);
  const pl = await startProflink(`
receivers: { otlp: { protocols: { http: { endpoint: "127.0.0.1:${httpPort}" } } } }
exporters:
  otlphttp: { endpoint: "http://127.0.0.1:${server.address().port}", encoding: json }
service:
  telemetry: { metrics: { address: "127.0.0.1:${metricsPort}" } }
  pipelines: { traces: { receivers: [otlp], exporters: [otlphttp] } }
`, { ports: [httpPort] });
  try {
    const r = traces(5, 'json');
    assert.equal((await postTraces(httpPort, r.bytes)).status, 200);
    await waitFor(() => got.length >= 1, 15000, `request at the backend (${pl.log})`);
    assert.equal(got[0].url, '/v1/traces');
    assert.equal(got[0].type, 'application/json');
    assert.equal(got[0].enc, 'gzip');
    const msg = JSON.parse(got[0].body);
    const spans = msg.resourceSpans[0].scopeSpans[0].spans;
    assert.deepEqual(spans.map((s) => s.spanId), r.ids);
    assert.equal(spans[0].name, 'json-0');
    assert.match(spans[0].traceId, /^[0-9a-f]{32}$/);
  } finally {
    await stopOk(pl);
    await new Promise((r) => server.close(r));
  }
});

function totals(buf) {
  if (buf[0] === 0x1f && buf[1] === 0x8b) buf = zlib.gunzipSync(buf);
  const prof = Profile.decode(buf);
  const str = (i) => prof.stringTable.strings[Number(i)];
  const out = new Map();
  prof.sampleType.forEach((st, k) => {
    let sum = 0n;
    for (const s of prof.sample) sum += BigInt(s.value[k] ?? 0);
    out.set(`${str(st.type)}/${str(st.unit)}`, sum);
  });
  return out;
}

test('pyroscope api: ingest posts format=pprof per series to /ingest with labels, times and spyName', { timeout: 30000 }, async () => {
  const gz = fs.readFileSync(new URL('./fixtures/nodejs_wall.pprof.gz', import.meta.url));
  const want = totals(gz);
  const fixtureStart = BigInt(Profile.decode(zlib.gunzipSync(gz)).timeNanos);
  assert.ok(fixtureStart > 0n, 'the fixture has a time');
  const got = [];
  const server = http.createServer(async (req, res) => {
    const body = await readBody(req);
    got.push({ url: req.url, auth: req.headers.authorization, tenant: req.headers['x-scope-orgid'], body });
    res.writeHead(200);
    res.end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const [pyroPort, metricsPort] = await freePorts(2);
  const pl = await startProflink(`
receivers:
  pyroscope: { endpoint: "127.0.0.1:${pyroPort}" }
exporters:
  pyroscope:
    endpoint: http://127.0.0.1:${server.address().port}
    api: ingest
    tenant_id: team-a
    bearer_token: s3cret
service:
  telemetry: { metrics: { address: "127.0.0.1:${metricsPort}" } }
  pipelines: { profiles: { receivers: [pyroscope], exporters: [pyroscope] } }
`, { ports: [pyroPort] });
  try {
    const now = Math.floor(Date.now() / 1000);
    const r = await fetch(`http://127.0.0.1:${pyroPort}/ingest?format=pprof&from=${now - 10}&until=${now}&name=opts-ingest%7Bregion%3Deu%7D&spyName=nodespy`, {
      method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: gz,
    });
    assert.equal(r.status, 200, await r.text());
    await waitFor(() => got.length >= want.size, 15000, `ingest requests (${got.length}; ${pl.log})`);
    const sums = new Map();
    for (const g of got) {
      const u = new URL(g.url, 'http://x');
      assert.equal(u.pathname, '/ingest');
      assert.equal(u.searchParams.get('format'), 'pprof');
      assert.equal(u.searchParams.get('spyName'), 'nodespy');
      assert.match(u.searchParams.get('name'), /^opts-ingest\{.*region=eu.*\}$/);
      const from = Number(u.searchParams.get('from'));
      const until = Number(u.searchParams.get('until'));
      // the profile's own start (the pprof's time_nanos) and end, in seconds
      assert.equal(BigInt(from), fixtureStart / 1000000000n);
      assert.ok(until >= from && until - from <= 60, `from ${from} until ${until}`);
      assert.equal(g.auth, 'Bearer s3cret');
      assert.equal(g.tenant, 'team-a');
      assert.ok(g.body[0] === 0x1f && g.body[1] === 0x8b, 'gzipped pprof');
      for (const [k, v] of totals(g.body)) sums.set(k, (sums.get(k) || 0n) + v);
    }
    assert.deepEqual(sums, want);
  } finally {
    await stopOk(pl);
    await new Promise((r) => server.close(r));
  }
});
