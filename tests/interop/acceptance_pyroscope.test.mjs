// acceptance_pyroscope.test.mjs: the real @pyroscope/nodejs SDK and
// OpenTelemetry JS spans (work wrapped in wrapWithLabels({span_id})) go into
// proflink; the correlation processor sits in both pipelines; the pyroscope
// exporter pushes to a fake Pyroscope that accepts
// /push.v1.PusherService/Push (Connect unary, application/proto), decodes the
// PushRequest with protobufjs from proto/push/v1/push.proto, gunzips each
// raw_profile and decodes it with pprof-format. The spans leave through
// otlphttp to a fake OTLP backend.
//
// The SDK's uploads are also captured on their way in by a recording proxy
// (independent of proflink), so the totals pushed out can be compared with
// the totals the SDK sent, per sample type.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-xxx/proflink node --test acceptance_pyroscope.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import zlib from 'node:zlib';
import { Profile } from 'pprof-format';
import Pyroscope from '@pyroscope/nodejs';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { freePorts, startProflink, waitFor, httpBackend, PushRequest, TraceRequest } from './lib/proflink.mjs';
import { labelledSpans } from './lib/pyroscope_sdk.mjs';

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

// A fake Pyroscope push API.
async function fakePyroscope() {
  const pushes = [];
  const errors = [];
  const server = http.createServer(async (req, res) => {
    const body = await readBody(req);
    try {
      assert.equal(req.method, 'POST');
      assert.equal(req.url, '/push.v1.PusherService/Push');
      assert.match(req.headers['content-type'], /^application\/proto/);
      const msg = PushRequest.toObject(PushRequest.decode(body), { bytes: Buffer, longs: String });
      pushes.push({ headers: req.headers, msg });
      res.writeHead(200, { 'content-type': 'application/proto' });
      res.end();
    } catch (e) {
      errors.push(String(e));
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 'invalid_argument', message: String(e) }));
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { port: server.address().port, pushes, errors, stop: () => new Promise((r) => server.close(r)) };
}

// A recording proxy between the SDK and proflink's pyroscope receiver.
async function recordingProxy(target) {
  const uploads = [];
  const server = http.createServer(async (req, res) => {
    const body = await readBody(req);
    uploads.push({ url: req.url, body });
    const up = http.request({ host: '127.0.0.1', port: target, path: req.url, method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    up.on('error', () => { res.writeHead(502); res.end(); });
    up.end(body);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { port: server.address().port, uploads, stop: () => new Promise((r) => server.close(r)) };
}

function decodePprof(buf) {
  if (buf[0] === 0x1f && buf[1] === 0x8b) buf = zlib.gunzipSync(buf);
  return Profile.decode(buf);
}

// Sum of values per sample type "type/unit" of a pprof.
function totals(prof, into) {
  const str = (i) => prof.stringTable.strings[Number(i)];
  prof.sampleType.forEach((st, k) => {
    const key = `${str(st.type)}/${str(st.unit)}`;
    let sum = 0n;
    for (const s of prof.sample) sum += BigInt(s.value[k] ?? 0);
    into.set(key, (into.get(key) || 0n) + sum);
  });
  return into;
}

function burnCpuInWork(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) for (let i = 0; i < 10000; i++) x = (x * 31 + i) % 1000003;
  return x;
}

test('Pyroscope SDK + OTel JS -> correlation -> fake Pyroscope (push API) and OTLP backend', { timeout: 90000 }, async () => {
  const pyro = await fakePyroscope();
  const otlp = await httpBackend();
  const [otlpPort, pyroPort, metricsPort] = await freePorts(3);
  const pl = await startProflink(`
receivers:
  otlp:
    protocols:
      http: { endpoint: "127.0.0.1:${otlpPort}" }
  pyroscope:
    endpoint: 127.0.0.1:${pyroPort}
processors:
  correlation:
    window: 3s
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:${otlp.port}
  pyroscope:
    endpoint: http://127.0.0.1:${pyro.port}
service:
  telemetry:
    logs: { level: warn }
    metrics: { address: "127.0.0.1:${metricsPort}" }
  pipelines:
    traces: { receivers: [otlp], processors: [correlation], exporters: [otlphttp] }
    profiles: { receivers: [pyroscope], processors: [correlation], exporters: [pyroscope] }
`, { ports: [otlpPort, pyroPort] });
  const proxy = await recordingProxy(pyroPort);
  try {
    const provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ 'service.name': 'acc-pyro' }),
      spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: `http://127.0.0.1:${otlpPort}/v1/traces` }))],
    });
    const tracer = provider.getTracer('acc');
    Pyroscope.init({
      serverAddress: `http://127.0.0.1:${proxy.port}`, appName: 'acc-pyro',
      flushIntervalMs: 1500, wall: { collectCpuTime: true }, tags: { region: 'eu' },
    });
    Pyroscope.start();
    const spans = await labelledSpans({
      tracer, provider, Pyroscope, name: 'GET /work', burn: () => burnCpuInWork(500),
    });

    // What the SDK sent (through the proxy), per sample type.
    const sent = new Map();
    let sentWall = 0;
    for (const u of proxy.uploads) {
      assert.match(u.url, /^\/ingest\?/);
      const prof = decodePprof(u.body);
      totals(prof, sent);
      if (prof.sampleType.length > 2) sentWall++;
    }
    assert.ok(sentWall > 0, `the SDK sent a wall profile (${proxy.uploads.length} uploads)`);

    // What reached Pyroscope.
    const received = () => {
      const t = new Map();
      const labelled = new Map(); // span_id -> span_name
      const functions = new Set();
      const series = [];
      for (const p of pyro.pushes) {
        for (const s of p.msg.series) {
          const labels = Object.fromEntries(s.labels.map((l) => [l.name, l.value]));
          series.push(labels);
          for (const smp of s.samples) {
            const prof = decodePprof(smp.rawProfile);
            totals(prof, t);
            const str = (i) => prof.stringTable.strings[Number(i)];
            for (const f of prof.function) functions.add(str(f.name));
            for (const x of prof.sample) {
              const byKey = {};
              for (const l of x.label) byKey[str(l.key)] = str(l.str);
              if (byKey.span_id) labelled.set(byKey.span_id, byKey.span_name);
            }
          }
        }
      }
      return { t, labelled, functions, series };
    };
    const same = (a, b) => a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);
    await waitFor(() => same(received().t, sent), 30000,
      `pushed totals equal the SDK's (sent ${JSON.stringify([...sent].map(([k, v]) => [k, String(v)]))}, ` +
      `got ${JSON.stringify([...received().t].map(([k, v]) => [k, String(v)]))}; errors ${pyro.errors}; ${pl.log})`);
    const r = received();
    assert.deepEqual(pyro.errors, []);
    for (const labels of r.series) {
      assert.ok(labels.__name__, `series has __name__: ${JSON.stringify(labels)}`);
      assert.equal(labels.service_name, 'acc-pyro');
    }
    assert.ok(r.series.some((l) => l.region === 'eu'), 'SDK tags become series labels');
    for (const id of spans) {
      assert.ok(r.labelled.has(id), `samples of span ${id} carry span_id (have ${[...r.labelled.keys()]})`);
      assert.match(id, /^[0-9a-f]{16}$/);
    }
    spans.forEach((id, i) => assert.equal(r.labelled.get(id), `GET /work/${i}`, `span_name of ${id}`));
    assert.ok([...r.functions].some((f) => /burnCpuInWork/.test(f)), `work function among ${[...r.functions].slice(0, 20)}`);

    // Spans at the OTLP backend carry the profile link and summary.
    await waitFor(() => spans.every((id) => otlp.counts.has(id)), 20000, 'spans at the OTLP backend');
    const got = otlp.canonical();
    for (const id of spans) {
      const attrs = Object.fromEntries(got.get(id).span.attributes.map(([k, v]) => [k, JSON.parse(v)]));
      assert.deepEqual(attrs['pyroscope.profile.id'], { stringValue: id }, `pyroscope.profile.id on ${id}`);
      assert.ok(Number(attrs['profile.samples']?.intValue) > 0, `profile.samples on ${id}: ${JSON.stringify(attrs)}`);
      assert.ok(Number(attrs['profile.cpu_time_ns']?.intValue) > 0, `profile.cpu_time_ns on ${id}`);
      assert.ok(attrs['profile.top_functions']?.arrayValue?.values?.length > 0, `profile.top_functions on ${id}`);
    }
    void TraceRequest;
  } finally {
    await proxy.stop();
    const r = await pl.stop();
    await pl.cleanup();
    await pyro.stop();
    await otlp.stop();
    assert.deepEqual(r, { code: 0, signal: null }, pl.log);
  }
});

// Every index of an OTLP profiles request points inside its dictionary, and
// index 0 of each table is the zero value.
function checkDictionary(req) {
  const d = req.dictionary || {};
  const n = (t) => (d[t] || []).length;
  assert.equal((d.stringTable || [])[0], '', 'string_table[0] is ""');
  for (const t of ['mappingTable', 'locationTable', 'functionTable', 'linkTable', 'attributeTable', 'stackTable']) {
    assert.ok(n(t) >= 1, `${t} holds index 0`);
  }
  const str = (i, what) => assert.ok((i || 0) < n('stringTable'), `${what} ${i} < ${n('stringTable')}`);
  for (const f of d.functionTable) { str(f.nameStrindex, 'function name'); str(f.systemNameStrindex, 'system name'); str(f.filenameStrindex, 'file'); }
  for (const m of d.mappingTable) str(m.filenameStrindex, 'mapping file');
  for (const l of d.locationTable) {
    assert.ok((l.mappingIndex || 0) < n('mappingTable'));
    for (const ln of l.lines || []) assert.ok((ln.functionIndex || 0) < n('functionTable'), `function index ${ln.functionIndex}`);
  }
  for (const s of d.stackTable) for (const li of s.locationIndices || []) assert.ok(li < n('locationTable'), `location index ${li}`);
  for (const a of d.attributeTable) str(a.keyStrindex, 'attribute key');
  const out = new Map();
  for (const rp of req.resourceProfiles || []) {
    const svc = rp.resource?.attributes?.find((a) => a.key === 'service.name')?.value?.stringValue;
    for (const sp of rp.scopeProfiles || []) {
      for (const p of sp.profiles || []) {
        const st = p.sampleType || {};
        str(st.typeStrindex, 'sample type'); str(st.unitStrindex, 'sample unit');
        const key = `${svc}:${d.stringTable[st.typeStrindex || 0]}/${d.stringTable[st.unitStrindex || 0]}`;
        for (const s of p.samples || []) {
          assert.ok((s.stackIndex || 0) < n('stackTable'), `stack index ${s.stackIndex}`);
          assert.ok((s.linkIndex || 0) < n('linkTable'), `link index ${s.linkIndex}`);
          for (const ai of s.attributeIndices || []) assert.ok(ai < n('attributeTable'), `attribute index ${ai}`);
          for (const v of s.values || []) out.set(key, (out.get(key) || 0n) + BigInt(v));
        }
        for (const ai of p.attributeIndices || []) assert.ok(ai < n('attributeTable'));
      }
    }
  }
  return out;
}

test('a Node.js SDK pprof via /ingest and via the push API -> otlp (grpc-js ProfilesService): valid dictionary, same totals', { timeout: 30000 }, async () => {
  const { grpcBackend, ProfilesRequest } = await import('./lib/proflink.mjs');
  const fs = await import('node:fs');
  const gz = fs.readFileSync(new URL('./fixtures/nodejs_wall.pprof.gz', import.meta.url));
  const want = totals(decodePprof(gz), new Map());
  assert.ok(want.size >= 2, 'the fixture has sample types');
  const backend = await grpcBackend();
  const [pyroPort, metricsPort] = await freePorts(2);
  const pl = await startProflink(`
receivers:
  pyroscope: { endpoint: "127.0.0.1:${pyroPort}" }
exporters:
  otlp: { endpoint: "127.0.0.1:${backend.port}", tls: { insecure: true } }
service:
  telemetry: { metrics: { address: "127.0.0.1:${metricsPort}" } }
  pipelines:
    profiles: { receivers: [pyroscope], exporters: [otlp] }
`, { ports: [pyroPort] });
  try {
    const now = Math.floor(Date.now() / 1000);
    let r = await fetch(`http://127.0.0.1:${pyroPort}/ingest?format=pprof&from=${now - 10}&until=${now}&name=acc-ingest%7Bregion%3Deu%7D&spyName=nodespy`, {
      method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: gz,
    });
    assert.equal(r.status, 200, await r.text());
    const push = PushRequest.encode(PushRequest.fromObject({
      series: [{
        labels: [{ name: '__name__', value: 'wall' }, { name: 'service_name', value: 'acc-push' }],
        samples: [{ rawProfile: gz, ID: '5a6b0a4c-6e8f-4f0a-9f00-000000000001' }],
      }],
    })).finish();
    r = await fetch(`http://127.0.0.1:${pyroPort}/push.v1.PusherService/Push`, {
      method: 'POST', headers: { 'content-type': 'application/proto', 'connect-protocol-version': '1' }, body: push,
    });
    assert.equal(r.status, 200, await r.text());
    const got = () => {
      const t = new Map();
      for (const p of backend.profileRequests) {
        const req = ProfilesRequest.toObject(ProfilesRequest.decode(p.bytes), { longs: String, bytes: Buffer, arrays: true });
        for (const [k, v] of checkDictionary(req)) t.set(k, (t.get(k) || 0n) + v);
      }
      return t;
    };
    const expected = new Map();
    for (const svc of ['acc-ingest', 'acc-push']) for (const [k, v] of want) expected.set(`${svc}:${k}`, v);
    await waitFor(() => got().size >= expected.size, 15000, `profiles at the backend (${pl.log})`);
    assert.deepEqual(got(), expected);
  } finally {
    const r = await pl.stop();
    await pl.cleanup();
    await backend.stop();
    assert.equal(r.code, 0, pl.log);
  }
});

test('pyroscope exporter: Connect errors 503 (unavailable) retried until the push succeeds, once; 400 (invalid_argument) not retried', { timeout: 30000 }, async () => {
  const fs = await import('node:fs');
  const gz = fs.readFileSync(new URL('./fixtures/nodejs_wall.pprof.gz', import.meta.url));
  const attempts = new Map(); // service -> attempts
  const ok = new Map(); // service -> accepted pushes
  const server = http.createServer(async (req, res) => {
    const body = await readBody(req);
    const msg = PushRequest.decode(body);
    const svc = msg.series[0].labels.find((l) => l.name === 'service_name')?.value;
    const n = (attempts.get(svc) || 0) + 1;
    attempts.set(svc, n);
    if (svc === 'acc-503' && n <= 2) {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 'unavailable', message: 'ingester not ready' }));
      return;
    }
    if (svc === 'acc-400') {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 'invalid_argument', message: 'bad profile' }));
      return;
    }
    ok.set(svc, (ok.get(svc) || 0) + 1);
    res.writeHead(200, { 'content-type': 'application/proto' });
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
    retry_on_failure: { initial_interval: 50ms, max_interval: 200ms }
service:
  telemetry: { metrics: { address: "127.0.0.1:${metricsPort}" } }
  pipelines:
    profiles: { receivers: [pyroscope], exporters: [pyroscope] }
`, { ports: [pyroPort] });
  try {
    const now = Math.floor(Date.now() / 1000);
    for (const svc of ['acc-503', 'acc-400']) {
      const r = await fetch(`http://127.0.0.1:${pyroPort}/ingest?format=pprof&from=${now - 10}&until=${now}&name=${svc}&spyName=nodespy`, {
        method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: gz,
      });
      assert.equal(r.status, 200);
    }
    await waitFor(() => ok.get('acc-503') >= 1 && attempts.get('acc-400') >= 1, 15000, `pushes (${JSON.stringify([...attempts])}; ${pl.log})`);
    await new Promise((r) => setTimeout(r, 600));
    assert.equal(attempts.get('acc-503'), 3, '503 retried until accepted');
    assert.equal(ok.get('acc-503'), 1, 'accepted once');
    assert.equal(attempts.get('acc-400'), 1, '400 not retried');
  } finally {
    const r = await pl.stop();
    await pl.cleanup();
    await new Promise((r2) => server.close(r2));
    assert.equal(r.code, 0, pl.log);
  }
});
