// pyroscope_sdk.test.mjs: the real Pyroscope Node.js SDK (@pyroscope/nodejs)
// and the real OpenTelemetry JS SDK, both pointed at proflink.
//
// The application burns CPU inside spans; each span's work runs inside
// Pyroscope.wrapWithLabels({ span_id: <the span's id> }, fn), as the SDKs'
// span processors do. proflink runs the `otlp` and `pyroscope` receivers
// into the `file` exporter (OTLP/JSON lines) and the `pyroscope` exporter
// (pointed at a fake Pyroscope push API in this test). Checks:
//   1. the samples come out of the pipeline linked to their span ids (OTLP
//      Link), with the work function's name in their stacks, and the spans
//      come out too;
//   2. every pprof the SDK uploaded (captured by a recording proxy between
//      the SDK and proflink) decodes in proflink to the same totals per
//      sample type, per leaf function and per span_id label as the
//      independent decoder `pprof-format` computes from the same bytes;
//      a pprof saved from an earlier SDK run (fixtures/) too;
//   3. the pyroscope exporter sends push requests that pprof-format decodes,
//      with series labels __name__/service_name, the tenant and basic-auth
//      headers, and span_id sample labels.
//   4. the push API receiver takes requests encoded by protobufjs, in
//      protobuf and proto3 JSON, with the same totals as pprof-format's.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test pyroscope_sdk.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';

import {
  Function as PFunction, Line, Location, Profile, Sample, StringTable, ValueType,
} from 'pprof-format';
import Pyroscope from '@pyroscope/nodejs';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  FIXTURES, freePort, mapObj, otlpProfileTotals, pushSink, PushRequest, readBody,
  readJsonLines as readFileLines, request as post, startProflink, tracerProvider, until as poll,
} from './lib/common.mjs';

const FIXTURE = path.join(FIXTURES, 'nodejs_wall.pprof.gz');
const until = (cond, ms = 15000) => poll(cond, ms, 100);

const big = (v) => (typeof v === 'bigint' ? v : BigInt(v ?? 0));

// Totals of a pprof decoded by pprof-format: per sample type, per
// (type, leaf function) and per (type, span_id label).
function pprofTotals(buf) {
  const raw = buf[0] === 0x1f && buf[1] === 0x8b ? zlib.gunzipSync(buf) : buf;
  const p = Profile.decode(raw);
  const str = (i) => p.stringTable.strings[Number(i)] ?? '';
  const fnName = new Map(p.function.map((f) => [String(f.id), str(f.name)]));
  const locFn = new Map(p.location.map((l) => [String(l.id),
    l.line.length ? fnName.get(String(l.line[0].functionId)) : '']));
  const types = p.sampleType.map((t) => `${str(t.type)}/${str(t.unit)}`);
  const out = { byType: new Map(), byFn: new Map(), bySpan: new Map(), functions: new Set() };
  const add = (m, k, v) => m.set(k, (m.get(k) ?? 0n) + v);
  for (const s of p.sample) {
    const leaf = s.locationId.length ? locFn.get(String(s.locationId[0])) : '';
    for (const id of s.locationId) out.functions.add(locFn.get(String(id)));
    let span = '';
    for (const l of s.label) {
      const k = str(l.key);
      if ((k === 'span_id' || (k === 'profile_id' && !span)) && big(l.str) !== 0n) span = str(l.str);
    }
    s.value.forEach((v, i) => {
      add(out.byType, types[i], big(v));
      add(out.byFn, `${types[i]}|${leaf}`, big(v));
      if (span) add(out.bySpan, `${types[i]}|${span}`, big(v));
    });
  }
  return out;
}

// ---- proflink, a recording proxy in front of it, a fake Pyroscope --------------
let pl;
let tmp;
let otlpPort, pyroPort, proxyPort, sinkPort, metricsPort;
let proxy, sink;
const uploads = []; // { url, headers, body } as the SDK sent them
const pushes = []; // { headers, body } the pyroscope exporter sent

before(async () => {
  [otlpPort, pyroPort, proxyPort, sinkPort, metricsPort] =
    await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-pyroscope-'));

  sink = await pushSink(sinkPort, pushes);

  // Forwards every request to proflink unchanged and records it.
  proxy = http.createServer(async (req, res) => {
    const body = await readBody(req);
    const entry = { url: req.url, headers: req.headers, body };
    uploads.push(entry);
    const fwd = http.request({ host: '127.0.0.1', port: pyroPort, path: req.url, method: req.method,
      headers: req.headers, agent: false }, (r) => {
      const chunks = [];
      r.on('data', (c) => chunks.push(c));
      r.on('end', () => {
        const b = Buffer.concat(chunks);
        entry.status = r.statusCode;
        entry.answer = b.toString();
        res.writeHead(r.statusCode, r.headers);
        res.end(b);
      });
    });
    fwd.on('error', (e) => {
      entry.status = 502;
      entry.answer = String(e);
      res.writeHead(502);
      res.end();
    });
    fwd.end(body);
  });
  await new Promise((r) => proxy.listen(proxyPort, '127.0.0.1', r));

  const config = `
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${otlpPort}
  pyroscope:
    endpoint: 127.0.0.1:${pyroPort}
exporters:
  file:
    path: ${path.join(tmp, 'out.jsonl')}
  pyroscope:
    endpoint: http://127.0.0.1:${sinkPort}
    tenant_id: team-a
    basic_auth: { username: user, password: secret }
service:
  telemetry:
    logs: { level: warn }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    traces: { receivers: [otlp], exporters: [file] }
    profiles: { receivers: [pyroscope], exporters: [file, pyroscope] }
`;
  pl = await startProflink(config, { dir: tmp, ports: [otlpPort, pyroPort] });
});

after(async () => {
  await pl?.stop(5000);
  proxy?.close();
  sink?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  if (pl?.log.trim()) console.log('proflink stderr:\n' + pl.log);
});

// ---- the application ----------------------------------------------------------
// Pure CPU work; the name is what the test looks for in the stacks.
function burnCpuForSpan(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) {
    for (let i = 0; i < 10000; i++) x = (x * 31 + i) % 1000003;
  }
  return x;
}

const spanIds = [];
const traceIds = [];

test('Pyroscope Node.js SDK + OpenTelemetry JS: samples keep their span ids', async () => {
  const provider = tracerProvider('interop-app', new OTLPTraceExporter({
    url: `http://127.0.0.1:${otlpPort}/v1/traces` }));
  const tracer = provider.getTracer('interop');

  Pyroscope.init({
    serverAddress: `http://127.0.0.1:${proxyPort}`,
    appName: 'interop-app',
    flushIntervalMs: 1000,
    tags: { region: 'test' },
    tenantID: 'team-a',
    wall: { collectCpuTime: true },
  });
  Pyroscope.start();
  for (let i = 0; i < 4; i++) {
    const span = tracer.startSpan(`work-${i}`);
    const { spanId, traceId } = span.spanContext();
    spanIds.push(spanId);
    traceIds.push(traceId);
    Pyroscope.wrapWithLabels({ span_id: spanId }, () => burnCpuForSpan(400));
    span.end();
    await new Promise((r) => setTimeout(r, 20)); // let the profiler's timers run
  }
  await Pyroscope.stop();
  await provider.forceFlush();
  await provider.shutdown();

  const out = path.join(tmp, 'out.jsonl');
  const linked = () => {
    const t = otlpProfileTotals(readFileLines(out).filter((r) => r.resourceProfiles));
    return spanIds.every((id) => t.samples.some((s) => s.span === id));
  };
  assert.ok(await until(linked), `no linked samples arrived; uploads: ${JSON.stringify(
    uploads.map((u) => [u.url, u.status, u.answer]))}`);
  assert.ok(await until(() => uploads.every((u) => u.status !== undefined)), 'uploads answered: ' +
    JSON.stringify(uploads.filter((u) => u.status === undefined).map((u) => [u.url, u.headers, u.body.length])));
  for (const u of uploads) assert.equal(u.status, 200, `${u.url}: ${u.answer}`);

  const lines = readFileLines(out);
  const t = otlpProfileTotals(lines.filter((r) => r.resourceProfiles));
  for (const id of spanIds) {
    const mine = t.samples.filter((s) => s.span === id);
    assert.ok(mine.length > 0, `span ${id} has samples`);
    assert.ok(mine.some((s) => s.fns.some((f) => f.includes('burnCpuForSpan'))),
      `span ${id}: burnCpuForSpan in some stack; functions: ${[...new Set(mine.flatMap((s) => s.fns))].slice(0, 20)}`);
    assert.ok(mine.every((s) => s.service === 'interop-app'));
  }
  // Wall time and CPU time were attributed to the spans (4 x 400 ms of work;
  // the CPU share depends on how busy the shared machine is).
  const linkedOf = (type) => t.samples.filter((s) => s.type === type && s.span)
    .reduce((a, s) => a + s.value, 0n);
  assert.ok(linkedOf('wall/nanoseconds') > 800_000_000n,
    `wall time linked to spans: ${linkedOf('wall/nanoseconds')} ns`);
  assert.ok(linkedOf('cpu/nanoseconds') > 50_000_000n,
    `cpu time linked to spans: ${linkedOf('cpu/nanoseconds')} ns`);

  // The spans came out too, with the same ids.
  await until(() => {
    const spans = readFileLines(out).filter((r) => r.resourceSpans)
      .flatMap((r) => r.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans)));
    return spanIds.every((id) => spans.some((s) => s.spanId === id));
  });
  const spans = readFileLines(out).filter((r) => r.resourceSpans)
    .flatMap((r) => r.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans)));
  for (let i = 0; i < spanIds.length; i++) {
    const s = spans.find((x) => x.spanId === spanIds[i]);
    assert.ok(s, `span ${spanIds[i]} exported`);
    assert.equal(s.name, `work-${i}`);
    assert.equal(s.traceId, traceIds[i]);
  }

  // Keep one real wall upload as a fixture for the decoder comparison.
  const wall = uploads.find((u) => {
    try { return pprofTotals(u.body).byType.has('wall/nanoseconds') &&
      pprofTotals(u.body).bySpan.size > 0; } catch { return false; }
  });
  if (wall && process.env.PROFLINK_SAVE_FIXTURE) {
    fs.mkdirSync(path.dirname(FIXTURE), { recursive: true });
    fs.writeFileSync(FIXTURE, wall.body);
  }
});

test('every SDK upload decodes to the same totals as pprof-format reports', async () => {
  assert.ok(uploads.length >= 2, 'the SDK uploaded profiles');
  const expected = { byType: new Map(), byFn: new Map(), bySpan: new Map() };
  for (const u of uploads) {
    const t = pprofTotals(u.body);
    for (const k of ['byType', 'byFn', 'bySpan'])
      for (const [key, v] of t[k]) expected[k].set(key, (expected[k].get(key) ?? 0n) + v);
  }
  const got = otlpProfileTotals(readFileLines(path.join(tmp, 'out.jsonl')).filter((r) => r.resourceProfiles));
  assert.deepEqual(mapObj(got.byType), mapObj(expected.byType));
  assert.deepEqual(mapObj(got.byFn), mapObj(expected.byFn));
  assert.deepEqual(mapObj(got.bySpan), mapObj(expected.bySpan));
  assert.ok(expected.bySpan.size >= spanIds.length);
});

test('a saved SDK pprof decodes to the same totals as pprof-format reports', async () => {
  assert.ok(fs.existsSync(FIXTURE), `fixture ${FIXTURE}`);
  const body = fs.readFileSync(FIXTURE);
  const expected = pprofTotals(body);
  const out = path.join(tmp, 'out.jsonl');
  const before = readFileLines(out).length;
  const r = await post(pyroPort, '/ingest?name=fixture-app%7Bk%3Dv%7D&from=1700000000&until=1700000010&format=pprof&spyName=nodespy',
    { 'content-type': 'application/octet-stream' }, body);
  assert.equal(r.status, 200, r.body.toString());
  assert.ok(await until(() => readFileLines(out).length > before));
  const lines = readFileLines(out).slice(before).filter((l) =>
    l.resourceProfiles?.some((rp) => rp.resource?.attributes?.some((a) =>
      a.key === 'service.name' && a.value.stringValue === 'fixture-app')));
  const got = otlpProfileTotals(lines);
  assert.ok(expected.byType.size > 0 && expected.bySpan.size > 0);
  assert.deepEqual(mapObj(got.byType), mapObj(expected.byType));
  assert.deepEqual(mapObj(got.byFn), mapObj(expected.byFn));
  assert.deepEqual(mapObj(got.bySpan), mapObj(expected.bySpan));
});

test('the pyroscope exporter pushes pprof that pprof-format decodes, with span labels', async () => {
  assert.ok(await until(() => pushes.length > 0), 'the exporter pushed');
  for (const p of pushes) {
    assert.equal(p.url, '/push.v1.PusherService/Push');
    assert.equal(p.headers['content-type'], 'application/proto');
    assert.equal(p.headers['connect-protocol-version'], '1');
    assert.equal(p.headers['x-scope-orgid'], 'team-a');
    assert.equal(p.headers.authorization, 'Basic ' + Buffer.from('user:secret').toString('base64'));
  }
  const spansSeen = new Set();
  const names = new Set();
  let cpuTotal = 0n;
  for (const p of pushes) {
    const req = PushRequest.toObject(PushRequest.decode(p.body), { bytes: Buffer });
    for (const series of req.series) {
      const labels = Object.fromEntries(series.labels.map((l) => [l.name, l.value]));
      assert.ok(labels.__name__, 'series has __name__');
      names.add(labels.__name__);
      if (labels.service_name === 'interop-app') assert.equal(labels.region, 'test');
      for (const s of series.samples) {
        assert.equal(s.rawProfile[0], 0x1f, 'raw_profile is gzipped');
        const prof = Profile.decode(zlib.gunzipSync(s.rawProfile));
        const str = (i) => prof.stringTable.strings[Number(i)];
        assert.equal(prof.sampleType.length, 1);
        for (const smp of prof.sample) {
          for (const l of smp.label) if (str(l.key) === 'span_id') spansSeen.add(str(l.str));
          // Pyroscope names every column of a Node.js wall upload `wall`,
          // its CPU time too (wall:cpu:nanoseconds:wall:nanoseconds)
          if (labels.__name__ === 'wall' && str(prof.sampleType[0].type) === 'cpu')
            cpuTotal += big(smp.value[0]);
        }
      }
    }
  }
  for (const id of spanIds) assert.ok(spansSeen.has(id), `span_id ${id} pushed as a label`);
  assert.deepEqual([...names].sort(), ['memory', 'wall']);
  assert.ok(cpuTotal > 0n);
});

test('push API: requests encoded by protobufjs (proto and proto3 JSON) decode to pprof-format totals', async () => {
  const body = fs.readFileSync(FIXTURE);
  const expected = pprofTotals(body);
  const msg = PushRequest.fromObject({
    series: [{
      labels: [{ name: '__name__', value: 'wall' }, { name: 'service_name', value: 'push-app' },
        { name: 'region', value: 'eu' }],
      samples: [{ rawProfile: body, ID: '734FD599-6865-419E-9475-932762D8F469' }],
    }],
  });
  const out = path.join(tmp, 'out.jsonl');
  const pushed = () => readFileLines(out).filter((l) =>
    l.resourceProfiles?.some((rp) => rp.resource?.attributes?.some((a) =>
      a.key === 'service.name' && a.value.stringValue === 'push-app')));

  const proto = Buffer.from(PushRequest.encode(msg).finish());
  let r = await post(pyroPort, '/push.v1.PusherService/Push',
    { 'content-type': 'application/proto', 'connect-protocol-version': '1' }, proto);
  assert.equal(r.status, 200, r.body.toString());
  assert.equal(r.body.length, 0);
  assert.ok(await until(() => pushed().length === 1));

  const json = JSON.stringify(PushRequest.toObject(msg, { bytes: String }));
  assert.ok(json.includes('"rawProfile"') && json.includes('"ID"'));
  r = await post(pyroPort, '/push.v1.PusherService/Push',
    { 'content-type': 'application/json', 'connect-protocol-version': '1' }, json);
  assert.equal(r.status, 200, r.body.toString());
  assert.equal(r.body.toString(), '{}');
  assert.ok(await until(() => pushed().length === 2));

  for (const line of pushed()) {
    const got = otlpProfileTotals([line]);
    assert.deepEqual(mapObj(got.byType), mapObj(expected.byType));
    assert.deepEqual(mapObj(got.byFn), mapObj(expected.byFn));
    assert.deepEqual(mapObj(got.bySpan), mapObj(expected.bySpan));
    const attrs = line.resourceProfiles[0].resource.attributes;
    assert.ok(attrs.some((a) => a.key === 'region' && a.value.stringValue === 'eu'));
    assert.ok(!attrs.some((a) => a.key === '__name__'));
  }

  // A corrupt raw profile: 400 with the Connect error shape.
  const bad = PushRequest.encode(PushRequest.fromObject({ series: [{ labels: [],
    samples: [{ rawProfile: body.subarray(0, body.length - 20) }] }] })).finish();
  r = await post(pyroPort, '/push.v1.PusherService/Push', { 'content-type': 'application/proto' },
    Buffer.from(bad));
  assert.equal(r.status, 400);
  const err = JSON.parse(r.body.toString());
  assert.equal(err.code, 'invalid_argument');
  assert.match(err.message, /series 0 sample 0: gzip/);
});

// A Go CPU profile (samples/count and cpu/nanoseconds, period cpu/nanoseconds)
// uploaded to /ingest reaches the Pyroscope push API with BOTH sample types,
// each with the totals the upload had (the count column unconverted).
test('a Go CPU pprof keeps both sample types (samples/count, cpu/nanoseconds) on the way to Pyroscope', async () => {
  const st = new StringTable();
  const fnMain = new PFunction({ id: 1, name: st.dedup('main.main'), filename: st.dedup('main.go') });
  const fnWork = new PFunction({ id: 2, name: st.dedup('main.work'), filename: st.dedup('main.go') });
  const prof = new Profile({
    stringTable: st,
    sampleType: [new ValueType({ type: st.dedup('samples'), unit: st.dedup('count') }),
      new ValueType({ type: st.dedup('cpu'), unit: st.dedup('nanoseconds') })],
    periodType: new ValueType({ type: st.dedup('cpu'), unit: st.dedup('nanoseconds') }),
    period: 10000000,
    timeNanos: BigInt(Date.now()) * 1000000n,
    durationNanos: 10000000000n,
    function: [fnMain, fnWork],
    location: [new Location({ id: 1, line: [new Line({ functionId: 1, line: 10 })] }),
      new Location({ id: 2, line: [new Line({ functionId: 2, line: 20 })] })],
    sample: [new Sample({ locationId: [2, 1], value: [7, 70000000] }),
      new Sample({ locationId: [1], value: [3, 30000000] })],
  });
  const before = pushes.length;
  const r = await post(pyroPort, '/ingest?name=go-cpu-app&format=pprof&spyName=gospy',
    { 'content-type': 'application/octet-stream' }, zlib.gzipSync(Buffer.from(prof.encode())));
  assert.equal(r.status, 200, r.body.toString());
  const byType = new Map();
  const seen = () => {
    byType.clear();
    for (const p of pushes.slice(before)) {
      const req = PushRequest.toObject(PushRequest.decode(p.body), { bytes: Buffer });
      for (const series of req.series) {
        const labels = Object.fromEntries(series.labels.map((l) => [l.name, l.value]));
        if (labels.service_name !== 'go-cpu-app') continue;
        assert.equal(labels.__name__, 'process_cpu');
        for (const s of series.samples) {
          const got = Profile.decode(zlib.gunzipSync(s.rawProfile));
          const str = (i) => got.stringTable.strings[Number(i)];
          const key = `${str(got.sampleType[0].type)}:${str(got.sampleType[0].unit)}:` +
            `${str(got.periodType.type)}:${str(got.periodType.unit)}`;
          let sum = 0n;
          for (const smp of got.sample) sum += big(smp.value[0]);
          byType.set(key, (byType.get(key) ?? 0n) + sum);
        }
      }
    }
    return byType.size >= 2;
  };
  assert.ok(await until(seen), `pushed types: ${[...byType.keys()]}`);
  assert.deepEqual(mapObj(byType), {
    'cpu:nanoseconds:cpu:nanoseconds': '100000000',
    'samples:count:cpu:nanoseconds': '10',
  });
});
