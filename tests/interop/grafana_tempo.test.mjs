// grafana_tempo.test.mjs: Grafana's Tempo data source replayed against the
// store's API, with spans from the OpenTelemetry JS SDK.
//
// proflink runs the repository's collector.yaml (ports and path changed
// only): spans go through the correlation processor (30 s window) and,
// through the traces/store pipeline, straight to the store. Three traces
// are sent with explicit times (shop: GET /cart -> db query (client, error),
// GET /home; billing: POST /pay). Then, as Grafana calls them:
//   - every span can be read within 5 s of being sent (store JSON and
//     Tempo), although correlation still holds it;
//   - GET /api/echo and /api/status/buildinfo (the data source's test);
//   - GET /api/v2/traces/<id> and /api/traces/<id> with Accept:
//     application/protobuf, decoded with protobufjs as tempopb's
//     TraceByIDResponse / Trace: every sent span is in its trace with the
//     right parent, name and service; the id also works without its leading
//     zeros; a missing trace is 404 on v1 and an empty 200 on v2 (as Tempo);
//     without the header /api/traces/<id> stays the store's JSON;
//   - GET /api/search with the TraceQL Grafana's search builder writes:
//     each query parses with Grafana's own grammar (@grafana/lezer-traceql)
//     and returns exactly the traces that match what was sent; limit and
//     spss bound the answer; a pipeline query is a 400 with a message;
//   - GET /api/v2/search/tags and /api/v2/search/tag/<tag>/values.
// A second proflink with `api.auth` (basicauth) checks that the API wants
// credentials, and that X-Scope-OrgID selects the tenant spans came with.
// A third, again with collector.yaml, gets spans from the OTel SDK and
// profiles from the real @pyroscope/nodejs SDK (span_id labels): every span
// with linked samples carries pyroscope.profile.id = its own span id in
// Tempo's answer (Grafana's "Profiles for this span") and as profile_id in
// the store's JSON.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build/proflink node --test grafana_tempo.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import protobuf from 'protobufjs';
import { parser as traceqlParser } from '@grafana/lezer-traceql';
import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';

import { freePort, runCheckoutApp, startProflink, tracerProvider, until, TraceRequest } from './lib/common.mjs';
import { repo } from './lib/proflink.mjs';

const running = [];
after(async () => { for (const pl of running) await pl.stop(); });

// tempopb.TraceByIDResponse: trace (1) is wire-identical to OTLP TracesData,
// which is ExportTraceServiceRequest's layout (resource_spans = 1).
const tempoRoot = new protobuf.Root();
tempoRoot.add(new protobuf.Type('TraceByIDResponse')
  .add(new protobuf.Field('trace', 1, 'Trace'))
  .add(new protobuf.Field('status', 3, 'int32'))
  .add(new protobuf.Field('message', 4, 'string')));
tempoRoot.add(new protobuf.Type('Trace').add(new protobuf.Field('resourceSpans', 1,
  'opentelemetry.proto.trace.v1.ResourceSpans', 'repeated')));
tempoRoot.add(TraceRequest.root.lookup('opentelemetry'));
const TraceByIDResponse = tempoRoot.lookupType('TraceByIDResponse');

const hex = (b) => Buffer.from(b ?? []).toString('hex');

// Grafana's grammar: a query Grafana would reject is a broken test.
function assertGrafanaParses(q) {
  const tree = traceqlParser.parse(q);
  let errors = 0;
  tree.iterate({ enter: (n) => { if (n.type.isError) errors++; } });
  assert.equal(errors, 0, `Grafana's TraceQL grammar rejects ${q}`);
}

function defaultConfig(dir, ports) {
  const [grpc, http, pyro, api, metrics] = ports;
  let yaml = fs.readFileSync(path.join(repo, 'collector.yaml'), 'utf8');
  yaml = yaml.replaceAll('127.0.0.1:4317', `127.0.0.1:${grpc}`).replaceAll('127.0.0.1:4318', `127.0.0.1:${http}`)
    .replaceAll('127.0.0.1:4040', `127.0.0.1:${pyro}`).replaceAll('127.0.0.1:4041', `127.0.0.1:${api}`)
    .replaceAll('127.0.0.1:8888', `127.0.0.1:${metrics}`)
    .replace('./data/proflink.db', path.join(dir, 'data', 'proflink.db'));
  assert.ok(yaml.includes(`127.0.0.1:${api}`) && yaml.includes('traces/store'), 'collector.yaml shape');
  return yaml;
}

async function get(port, p, headers = {}) {
  const res = await fetch(`http://127.0.0.1:${port}${p}`, { headers });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}

// Sends the three traces; resolves with what was sent.
async function sendTraces(httpPort, headers = {}) {
  const sent = [];
  const t0 = Date.now() - 60000;
  const providers = [];
  const make = (resource) => {
    const p = tracerProvider(resource, new OTLPTraceExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces`, headers }));
    providers.push(p);
    return p.getTracer('grafana-tempo-test');
  };
  const shop = make({ 'service.name': 'shop', 'deployment.environment': 'prod' });
  const billing = make('billing');
  const span = (tracer, label, service, name, opts, start, dur, parent) => {
    const ctx = parent ? trace.setSpan(context.active(), parent.span) : context.active();
    const s = tracer.startSpan(name, { ...opts, startTime: t0 + start }, ctx);
    const rec = {
      label, service, name, span: s, traceId: s.spanContext().traceId, spanId: s.spanContext().spanId,
      parentId: parent ? parent.spanId : '', end: () => s.end(t0 + start + dur),
    };
    sent.push(rec);
    return rec;
  };
  const cart = span(shop, 'cart', 'shop', 'GET /cart', { kind: SpanKind.SERVER, attributes: { 'http.status_code': 200 } }, 0, 50);
  const db = span(shop, 'cart', 'shop', 'db query', { kind: SpanKind.CLIENT, attributes: { 'db.system': 'postgresql' } }, 10, 20, cart);
  db.span.setStatus({ code: SpanStatusCode.ERROR, message: 'deadlock' });
  const home = span(shop, 'home', 'shop', 'GET /home', { kind: SpanKind.SERVER, attributes: { 'http.status_code': 500 } }, 1000, 300);
  const render = span(shop, 'home', 'shop', 'render', { kind: SpanKind.INTERNAL }, 1100, 100, home);
  const pay = span(billing, 'pay', 'billing', 'POST /pay', { kind: SpanKind.SERVER }, 2000, 150);
  for (const s of [db, cart, render, home, pay]) s.end();
  for (const p of providers) await p.forceFlush();
  const sentAt = Date.now();
  for (const p of providers) await p.shutdown();
  return { sent, sentAt, t0 };
}

function traceIdsByLabel(sent) {
  const m = {};
  for (const s of sent) m[s.label] = s.traceId;
  return m;
}

// Spans of a decoded Trace: spanId -> {parent, name, service, attrs}.
function spansOf(traceMsg) {
  const out = new Map();
  for (const rs of traceMsg?.resourceSpans ?? []) {
    const service = rs.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue;
    for (const ss of rs.scopeSpans)
      for (const s of ss.spans)
        out.set(hex(s.spanId), {
          traceId: hex(s.traceId), parent: hex(s.parentSpanId), name: s.name, service,
          kind: s.kind, status: s.status?.code ?? 0,
          attrs: Object.fromEntries(s.attributes.map((a) => [a.key, a.value])),
        });
  }
  return out;
}

test('Grafana Tempo data source on the store API (default collector.yaml)', { timeout: 120000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-tempo-'));
  const ports = [];
  for (let i = 0; i < 5; i++) ports.push(await freePort());
  const [, httpPort, , api] = ports;
  const pl = await startProflink(defaultConfig(dir, ports), { dir, ports: [httpPort, api] });
  running.push(pl);

  const { sent, sentAt } = await sendTraces(httpPort);
  const ids = traceIdsByLabel(sent);

  // Fresh: readable in the store's JSON and in Tempo within 5 s, while
  // correlation (30 s window) still holds the spans.
  let fresh = false;
  assert.ok(await until(async () => {
    for (const id of Object.values(ids)) {
      const j = await get(api, `/api/traces/${id}`);
      const t = await get(api, `/api/v2/traces/${id}`, { Accept: 'application/protobuf' });
      if (j.status !== 200 || t.status !== 200) return false;
      const n = sent.filter((s) => s.traceId === id).length;
      if (JSON.parse(j.body).spans.length !== n) return false;
      if (spansOf(TraceByIDResponse.decode(t.body).trace).size !== n) return false;
    }
    fresh = true;
    return true;
  }, 5000, 100), `spans readable within 5 s of being sent (log: ${pl.log})`);
  assert.ok(fresh && Date.now() - sentAt < 5000 + 1000);

  // Save & test
  const echo = await get(api, '/api/echo');
  assert.equal(echo.status, 200);
  assert.equal(echo.body.toString(), 'echo');
  const bi = await get(api, '/api/status/buildinfo');
  assert.equal(bi.status, 200);
  assert.match(JSON.parse(bi.body).version, /^\d+\.\d+/);

  // Trace by id, as Grafana asks (v2, then v1 after a v2 404)
  for (const id of Object.values(ids)) {
    const want = sent.filter((s) => s.traceId === id);
    const short = id.replace(/^0+/, ''); // Tempo's ids lose their leading zeros
    const v2 = await get(api, `/api/v2/traces/${short}`, { Accept: 'application/protobuf' });
    assert.equal(v2.status, 200);
    assert.match(v2.headers.get('content-type'), /application\/protobuf/);
    const v1 = await get(api, `/api/traces/${id}`, { Accept: 'application/protobuf' });
    assert.equal(v1.status, 200);
    for (const got of [spansOf(TraceByIDResponse.decode(v2.body).trace), spansOf(TraceRequest.decode(v1.body))]) {
      assert.equal(got.size, want.length);
      for (const s of want) {
        const g = got.get(s.spanId);
        assert.ok(g, `span ${s.name} in trace ${id}`);
        assert.equal(g.traceId, id);
        assert.equal(g.parent, s.parentId, `parent of ${s.name}`);
        assert.equal(g.name, s.name);
        assert.equal(g.service, s.service);
      }
    }
    const db = [...spansOf(TraceRequest.decode(v1.body)).values()].find((g) => g.name === 'db query');
    if (db) {
      assert.equal(db.status, 2);
      assert.equal(db.attrs['db.system'].stringValue, 'postgresql');
    }
    // the store's own JSON on the same path without the header
    const js = await get(api, `/api/traces/${id}`);
    assert.equal(js.status, 200);
    assert.deepEqual(JSON.parse(js.body).spans.map((s) => s.span_id).sort(), want.map((s) => s.spanId).sort());
  }
  const missing = 'f'.repeat(32);
  assert.equal((await get(api, `/api/traces/${missing}`, { Accept: 'application/protobuf' })).status, 404);
  const v2miss = await get(api, `/api/v2/traces/${missing}`, { Accept: 'application/protobuf' });
  assert.equal(v2miss.status, 200);
  assert.equal(spansOf(TraceByIDResponse.decode(v2miss.body).trace).size, 0);
  assert.equal((await get(api, '/api/v2/traces/xyz', { Accept: 'application/protobuf' })).status, 400);

  // Search: the builder's queries, each with exactly the traces it matches
  const start = Math.floor(Date.now() / 1000) - 3600, end = Math.floor(Date.now() / 1000) + 60;
  const searches = [
    ['{}', ['cart', 'home', 'pay']],
    ['{resource.service.name="shop"}', ['cart', 'home']],
    ['{resource.service.name="shop" && status=error}', ['cart']],
    ['{name="render"}', ['home']],
    ['{(name="render" || name="POST /pay")}', ['home', 'pay']],
    ['{span.http.status_code>=200 && span.http.status_code<300}', ['cart']],
    ['{span.http.status_code>499}', ['home']],
    ['{span.http.status_code<=200}', ['cart']],
    ['{.db.system=~"post.*"}', ['cart']],
    ['{resource.service.name!~"sh.*"}', ['pay']],
    ['{resource.deployment.environment="prod" && span.db.system!="mysql"}', ['cart']],
    ['{duration>100ms && kind=server}', ['home', 'pay']],
    ['{duration<=20ms && kind=client}', ['cart']],
    ['{traceDuration>=300ms}', ['home']],
    ['{traceDuration<100ms}', ['cart']],
    ['{rootServiceName="billing"}', ['pay']],
    ['{rootName!="GET /cart" && resource.service.name="shop"}', ['home']],
    ['{status=error && name="GET /cart"}', []],
  ];
  for (const [q, labels] of searches) {
    assertGrafanaParses(q);
    const r = await get(api, `/api/search?q=${encodeURIComponent(q)}&limit=20&spss=3&start=${start}&end=${end}`,
      { Accept: 'application/json' });
    assert.equal(r.status, 200, `${q}: ${r.body}`);
    const body = JSON.parse(r.body);
    const got = body.traces.map((t) => t.traceID.padStart(32, '0')).sort();
    assert.deepEqual(got, labels.map((l) => ids[l]).sort(), `search ${q}`);
    for (const t of body.traces) {
      const set = t.spanSets[0];
      assert.ok(set.matched >= 1 && set.spans.length >= 1 && set.spans.length <= 3, q);
      for (const s of set.spans)
        assert.ok(sent.some((x) => x.spanId === s.spanID && x.traceId === t.traceID.padStart(32, '0')), `${q}: span ${s.spanID}`);
      assert.match(t.startTimeUnixNano, /^\d+$/);
    }
  }
  // newest first, limit and spss
  const lim = JSON.parse((await get(api, `/api/search?q=${encodeURIComponent('{}')}&limit=1&start=${start}&end=${end}`)).body);
  assert.equal(lim.traces.length, 1);
  assert.equal(lim.traces[0].traceID.padStart(32, '0'), ids.pay);
  assert.equal(lim.traces[0].rootServiceName, 'billing');
  assert.equal(lim.traces[0].rootTraceName, 'POST /pay');
  assert.equal(lim.traces[0].durationMs, 150);
  const sp = JSON.parse((await get(api, `/api/search?q=${encodeURIComponent('{resource.service.name="shop"}')}&spss=1&start=${start}&end=${end}`)).body);
  for (const t of sp.traces) {
    assert.equal(t.spanSets[0].spans.length, 1);
    assert.equal(t.spanSets[0].matched, 2);
  }
  // out of range: nothing
  const old = JSON.parse((await get(api, `/api/search?q=%7B%7D&start=1000&end=2000`)).body);
  assert.equal(old.traces.length, 0);
  // what the subset does not do: a clear 400
  const piped = '{ name = "render" } | count() > 1';
  assertGrafanaParses(piped);
  const bad = await get(api, `/api/search?q=${encodeURIComponent(piped)}`);
  assert.equal(bad.status, 400);
  assert.match(bad.body.toString(), /pipelines/);

  // Tags and values
  const tags = JSON.parse((await get(api, '/api/v2/search/tags?limit=5000')).body);
  const scope = (n) => tags.scopes.find((s) => s.name === n).tags;
  assert.deepEqual(scope('resource').sort(), ['deployment.environment', 'service.name']);
  for (const k of ['db.system', 'http.status_code']) assert.ok(scope('span').includes(k), k);
  for (const k of ['name', 'status', 'kind', 'duration']) assert.ok(scope('intrinsic').includes(k), k);
  const values = async (t) => JSON.parse((await get(api, `/api/v2/search/tag/${t}/values?limit=5000`)).body).tagValues;
  assert.deepEqual(await values('resource.service.name'), [{ type: 'string', value: 'billing' }, { type: 'string', value: 'shop' }]);
  assert.deepEqual((await values('name')).map((v) => v.value).sort(), ['GET /cart', 'GET /home', 'POST /pay', 'db query', 'render'].sort());
  assert.deepEqual(await values('span.http.status_code'), [{ type: 'int', value: '200' }, { type: 'int', value: '500' }]);
  assert.ok((await values('status')).some((v) => v.type === 'keyword' && v.value === 'error'));
  assert.deepEqual(await values('.db.system'), [{ type: 'string', value: 'postgresql' }]);
});

test('store API: basicauth and X-Scope-OrgID tenants', { timeout: 60000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-tempo-auth-'));
  const [httpPort, api, metrics] = [await freePort(), await freePort(), await freePort()];
  const yaml = [
    'extensions:',
    '  basicauth/grafana: { htpasswd: { inline: "grafana:s3cret" } }',
    'receivers:',
    `  otlp: { protocols: { http: { endpoint: "127.0.0.1:${httpPort}" } } }`,
    'exporters:',
    '  sqlite:',
    `    path: "${path.join(dir, 'data', 'proflink.db')}"`,
    `    api: { endpoint: "127.0.0.1:${api}", auth: { authenticator: basicauth/grafana } }`,
    'service:',
    '  extensions: [basicauth/grafana]',
    `  telemetry: { metrics: { address: "127.0.0.1:${metrics}" } }`,
    '  pipelines:',
    '    traces: { receivers: [otlp], exporters: [sqlite] }',
    '',
  ].join('\n');
  const pl = await startProflink(yaml, { dir, ports: [httpPort, api] });
  running.push(pl);
  const a = await sendTraces(httpPort, { 'X-Scope-OrgID': 'team-a' });
  const b = await sendTraces(httpPort, { 'X-Scope-OrgID': 'team-b' });
  const auth = { Authorization: `Basic ${Buffer.from('grafana:s3cret').toString('base64')}` };
  assert.equal((await get(api, '/api/echo')).status, 401);
  assert.equal((await get(api, '/api/echo', { Authorization: `Basic ${Buffer.from('grafana:nope').toString('base64')}` })).status, 401);
  assert.equal((await get(api, '/api/echo', auth)).status, 200);

  const search = async (tenant) => {
    const h = tenant ? { ...auth, 'X-Scope-OrgID': tenant } : auth;
    const r = await get(api, `/api/search?q=${encodeURIComponent('{}')}&limit=100`, h);
    assert.equal(r.status, 200);
    return JSON.parse(r.body).traces.map((t) => t.traceID.padStart(32, '0')).sort();
  };
  const idsOf = (x) => [...new Set(x.sent.map((s) => s.traceId))].sort();
  assert.ok(await until(async () => (await search()).length === 6, 10000, 100), 'all six traces stored');
  assert.deepEqual(await search('team-a'), idsOf(a));
  assert.deepEqual(await search('team-b'), idsOf(b));
  const aId = a.sent[0].traceId;
  const tr = await get(api, `/api/traces/${aId}`, { ...auth, 'X-Scope-OrgID': 'team-b', Accept: 'application/protobuf' });
  assert.equal(tr.status, 404, "another tenant's trace is not found");
  const ok = await get(api, `/api/v2/traces/${aId}`, { ...auth, 'X-Scope-OrgID': 'team-a', Accept: 'application/protobuf' });
  assert.equal(spansOf(TraceByIDResponse.decode(ok.body).trace).size, a.sent.filter((s) => s.traceId === aId).length);
  const jl = JSON.parse((await get(api, '/api/traces?since=0&limit=100', { ...auth, 'X-Scope-OrgID': 'team-a' })).body);
  assert.deepEqual(jl.traces.map((t) => t.trace_id).sort(), idsOf(a));
});

test('profiled spans carry pyroscope.profile.id = their span id', { timeout: 120000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-tempo-prof-'));
  const ports = [];
  for (let i = 0; i < 5; i++) ports.push(await freePort());
  const [, httpPort, pyroPort, api] = ports;
  const pl = await startProflink(defaultConfig(dir, ports), { dir, ports: [httpPort, pyroPort, api] });
  running.push(pl);
  const { provider, requests } = await runCheckoutApp({
    service: 'tempo-profiled', otlpPort: httpPort, pyroPort, tracerName: 'grafana-tempo-test',
    rootAttributes: { 'http.route': '/checkout/:id' }, checkoutMs: () => 150,
  });
  await provider.shutdown();
  // wait until samples are linked to most spans (the SDK's one upload)
  const storeSpans = async () => {
    const out = [];
    for (const r of requests) out.push(...JSON.parse((await get(api, `/api/traces/${r.traceId}`)).body).spans ?? []);
    return out;
  };
  let stored = [];
  assert.ok(await until(async () => {
    stored = await storeSpans();
    return stored.length === 6 && stored.filter((s) => s.samples > 0).length >= 4;
  }, 90000, 500), `samples linked: ${JSON.stringify(stored.map((s) => s.samples))} (log: ${pl.log})`);
  stored = await storeSpans();
  // every span with linked samples, and only such a span, names itself
  const samples = new Map(stored.map((s) => [s.span_id, s.samples]));
  let named = 0;
  for (const r of requests) {
    const t = await get(api, `/api/v2/traces/${r.traceId}`, { Accept: 'application/protobuf' });
    const spans = spansOf(TraceByIDResponse.decode(t.body).trace);
    assert.equal(spans.size, 2);
    for (const [id, g] of spans) {
      const pid = g.attrs['pyroscope.profile.id']?.stringValue;
      if (samples.get(id) > 0) {
        assert.equal(pid, id, `span ${g.name} with samples`);
        named++;
      } else {
        assert.equal(pid, undefined, `span ${g.name} without samples`);
      }
    }
  }
  assert.ok(named >= 4);
  for (const s of stored) assert.equal(s.profile_id, s.samples > 0 ? s.span_id : '', `store JSON ${s.name}`);
});
