// pyroscope_jfr.test.mjs: JFR uploads to /ingest?format=jfr as the
// Pyroscope Java agent sends them, through the correlation processor.
//
//   1. multipart/form-data with a `jfr` part (tests/jfr/async_context.jfr,
//      async-profiler style, gzipped) and a `labels` part: a LabelsSnapshot
//      built here with protobufjs from proto/jfr/labels.proto, whose
//      contexts carry the span ids of two spans OpenTelemetry JS sent to
//      proflink (one as `span_id`, one as `profile_id`, the Java agent's
//      older key). The correlation processor links the samples: each span
//      gets pyroscope.profile.id and its CPU time (3 and 2 samples of 10 ms),
//      and the samples pushed to a fake Pyroscope carry span_id labels, in
//      the process_cpu and memory series, with javaspy_event=itimer;
//   2. a raw JDK recording (tests/jfr/fixture.jfr) with format=jfr: one
//      series per kind (process_cpu, wall, memory, mutex, block);
//   3. a truncated recording: 400 with Pyroscope's JSON error shape;
//   4. async-profiler 3.x span context (spanId, spanName in the events,
//      tests/jfr/async_span.jfr): spans sent with those ids are linked, and
//      every kind (CPU, TLAB, locks, live objects, malloc) reaches Pyroscope
//      under the type id Pyroscope gives it.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test pyroscope_jfr.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

import { Profile } from 'pprof-format';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  loadProtos, PushRequest, readJsonLines, request as post,
  tracerProvider, until,
} from './lib/common.mjs';
import { startPushStack } from './lib/push_stack.mjs';
import { repo } from './lib/proflink.mjs';

const JFR_DIR = path.join(repo, 'tests', 'jfr');
const LabelsSnapshot = loadProtos(['jfr/labels.proto']).lookupType('jfr.LabelsSnapshot');

let pl, tmp, stop;
let otlpPort, pyroPort;
const pushes = [];

before(async () => {
  ({ pl, tmp, otlpPort, pyroPort, stop } = await startPushStack({
    prefix: 'proflink-jfr-', pushes,
    processors: () => `  correlation:
    window: 2s
    max_window: 0s   # spans wait the window (one upload teaches no cadence)`,
    pipelines: () => `    traces: { receivers: [otlp], processors: [correlation], exporters: [file] }
    profiles: { receivers: [pyroscope], processors: [correlation], exporters: [file, pyroscope] }`,
  }));
});

after(async () => {
  await stop?.();
});

function multipart(parts) {
  const boundary = 'jfr-boundary-' + Math.random().toString(16).slice(2);
  const chunks = [];
  for (const [name, data] of parts) {
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"; ` +
      `filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`));
    chunks.push(data, Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), type: `multipart/form-data; boundary=${boundary}` };
}

// Series pushed for `service`: [{labels, profile}] with every RawSample decoded.
function pushedSeries(service) {
  const out = [];
  for (const p of pushes) {
    const req = PushRequest.toObject(PushRequest.decode(p.body), { bytes: Buffer });
    for (const s of req.series) {
      const labels = Object.fromEntries(s.labels.map((l) => [l.name, l.value]));
      if (labels.service_name !== service) continue;
      for (const smp of s.samples) out.push({ labels, profile: Profile.decode(zlib.gunzipSync(smp.rawProfile)) });
    }
  }
  return out;
}

test('JFR multipart with a LabelsSnapshot: samples link to their spans and reach Pyroscope with span_id', { timeout: 60000 }, async () => {
  const provider = tracerProvider('java-app', new OTLPTraceExporter({
    url: `http://127.0.0.1:${otlpPort}/v1/traces` }));
  const tracer = provider.getTracer('interop');
  const a = tracer.startSpan('GET /a');
  const b = tracer.startSpan('GET /b');
  const ids = [a.spanContext().spanId, b.spanContext().spanId];
  a.end();
  b.end();
  await provider.forceFlush();

  // context 1 -> span_id of A; context 2 -> profile_id of B (+ span_name)
  const strings = { 1: 'span_id', 2: ids[0], 3: 'profile_id', 4: ids[1], 5: 'span_name', 6: 'GET /b' };
  const labels = LabelsSnapshot.encode(LabelsSnapshot.fromObject({
    contexts: { 1: { labels: { 1: 2 } }, 2: { labels: { 3: 4, 5: 6 } } },
    strings,
  })).finish();
  const jfr = fs.readFileSync(path.join(JFR_DIR, 'async_context.jfr'));
  const { body, type } = multipart([['jfr', zlib.gzipSync(jfr)], ['labels', zlib.gzipSync(labels)]]);
  const now = Math.floor(Date.now() / 1000);
  const r = await post(pyroPort,
    `/ingest?name=java-app%7Benv%3Dtest%7D&format=jfr&from=${now - 10}&until=${now}&sampleRate=100&spyName=javaspy`,
    { 'content-type': type }, body);
  assert.equal(r.status, 200, r.body.toString());
  await provider.shutdown();

  // the spans leave the window with their profile summary
  const out = path.join(tmp, 'out.jsonl');
  const spans = () => readJsonLines(out).filter((l) => l.resourceSpans)
    .flatMap((l) => l.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans)));
  assert.ok(await until(() => ids.every((id) => spans().some((s) => s.spanId === id)), 20000),
    `spans exported (log: ${pl.log})`);
  const cpu = { [ids[0]]: 30000000, [ids[1]]: 20000000 };
  for (const id of ids) {
    const s = spans().find((x) => x.spanId === id);
    const attr = (k) => s.attributes?.find((x) => x.key === k)?.value;
    assert.equal(attr('pyroscope.profile.id')?.stringValue, id, `span ${id} linked`);
    assert.equal(Number(attr('profile.cpu_time_ns')?.intValue), cpu[id], `CPU time of ${id}`);
  }

  // Pyroscope gets the CPU series with span_id labels and the memory series
  const bySpan = new Map();
  let memory = false;
  const collect = () => {
    bySpan.clear();
    memory = false;
    for (const { labels: l, profile } of pushedSeries('java-app')) {
      assert.equal(l.javaspy_event, 'itimer');
      assert.equal(l.env, 'test');
      const str = (i) => profile.stringTable.strings[Number(i)];
      if (l.__name__ === 'memory') memory = true;
      if (l.__name__ !== 'process_cpu') continue;
      for (const s of profile.sample) {
        const byKey = Object.fromEntries(s.label.map((x) => [str(x.key), str(x.str)]));
        const k = byKey.span_id ?? '';
        bySpan.set(k, (bySpan.get(k) ?? 0) + Number(s.value[0]));
      }
    }
    return memory && ids.every((id) => bySpan.has(id));
  };
  assert.ok(await until(collect, 20000), `pushed: ${[...bySpan]}`);
  assert.equal(bySpan.get(ids[0]), 30000000);
  assert.equal(bySpan.get(ids[1]), 20000000);
  assert.equal(bySpan.get(''), 10000000);
});

// async-profiler 3.x writes the span into the events themselves (spanId,
// spanName: tests/jfr/async_span.jfr from tests/jfr_fixture.h); the spans
// are sent with those ids as OTLP/JSON, and the correlation processor links
// them exactly as it links an SDK's span_id labels.
test('async-profiler span context in the events links samples to their spans', { timeout: 60000 }, async () => {
  const spanA = '00000000000000ef', spanB = '1234abcd00ff0001';
  const traceId = [...Array(32)].map(() => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('');
  const nowNs = BigInt(Date.now()) * 1000000n;
  const span = (spanId, name) => ({
    traceId, spanId, name, kind: 2,
    startTimeUnixNano: String(nowNs - 5000000000n), endTimeUnixNano: String(nowNs - 1000000000n),
  });
  const traces = {
    resourceSpans: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: 'span-app' } }] },
      scopeSpans: [{ spans: [span(spanA, 'GET /checkout'), span(spanB, 'GET /other')] }],
    }],
  };
  const t = await post(otlpPort, '/v1/traces', { 'content-type': 'application/json' },
    Buffer.from(JSON.stringify(traces)));
  assert.equal(t.status, 200, t.body.toString());

  const labels = LabelsSnapshot.encode(LabelsSnapshot.fromObject({
    contexts: { 1: { labels: { 3: 4 } }, 2: { labels: { 5: 6 } } },
    strings: { 1: 'GET /checkout', 2: '', 3: 'user', 4: 'alice', 5: 'span_id', 6: '00000000000000aa' },
  })).finish();
  const jfr = fs.readFileSync(path.join(JFR_DIR, 'async_span.jfr'));
  const { body, type } = multipart([['jfr', zlib.gzipSync(jfr)], ['labels', labels]]);
  const now = Math.floor(Date.now() / 1000);
  const r = await post(pyroPort,
    `/ingest?name=span-app&format=jfr&from=${now - 10}&until=${now}&sampleRate=100&spyName=javaspy`,
    { 'content-type': type }, body);
  assert.equal(r.status, 200, r.body.toString());

  const out = path.join(tmp, 'out.jsonl');
  const spans = () => readJsonLines(out).filter((l) => l.resourceSpans)
    .flatMap((l) => l.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans)));
  assert.ok(await until(() => [spanA, spanB].every((id) => spans().some((s) => s.spanId === id)), 20000),
    `spans exported (log: ${pl.log})`);
  const cpu = { [spanA]: 40000000, [spanB]: 20000000 };
  for (const id of [spanA, spanB]) {
    const s = spans().find((x) => x.spanId === id);
    const attr = (k) => s.attributes?.find((x) => x.key === k)?.value;
    assert.equal(attr('pyroscope.profile.id')?.stringValue, id, `span ${id} linked`);
    assert.equal(Number(attr('profile.cpu_time_ns')?.intValue), cpu[id], `CPU time of ${id}`);
  }

  // Pyroscope gets every kind under its type id, the CPU samples with span_id and span_name
  const types = new Set();
  const bySpan = new Map();
  const names = new Map();
  const collect = () => {
    types.clear(); bySpan.clear(); names.clear();
    for (const { labels: l, profile } of pushedSeries('span-app')) {
      const str = (i) => profile.stringTable.strings[Number(i)];
      const st = profile.sampleType[0];
      const pt = profile.periodType;
      types.add([l.__name__, str(st.type), str(st.unit), pt ? str(pt.type) : '', pt ? str(pt.unit) : ''].join(':'));
      if (l.__name__ !== 'process_cpu') continue;
      for (const s of profile.sample) {
        const byKey = Object.fromEntries(s.label.map((x) => [str(x.key), str(x.str)]));
        const k = byKey.span_id ?? '';
        bySpan.set(k, (bySpan.get(k) ?? 0) + Number(s.value[0]));
        if (byKey.span_name) names.set(k, byKey.span_name);
      }
    }
    return types.size >= 7 && bySpan.has(spanA) && bySpan.has(spanB);
  };
  assert.ok(await until(collect, 20000), `pushed: ${[...types]} ${[...bySpan]}`);
  assert.deepEqual([...types].sort(), [
    'memory:alloc_in_new_tlab_bytes:bytes:space:bytes',
    'memory:alloc_in_new_tlab_objects:count:space:bytes',
    'memory:live:count:objects:count',
    'memory:malloc_bytes:bytes::',
    'memory:malloc_objects:count::',
    'mutex:contentions:count:mutex:count',
    'mutex:delay:nanoseconds:mutex:count',
    'process_cpu:cpu:nanoseconds:cpu:nanoseconds',
  ]);
  assert.equal(bySpan.get(spanA), 40000000);
  assert.equal(bySpan.get(spanB), 20000000);
  assert.equal(bySpan.get(''), 10000000);
  assert.equal(names.get(spanA), 'GET /checkout');
  // B's event span name is empty: its name comes from the linked span
  assert.equal(names.get(spanB), 'GET /other');
});

test('a raw JDK recording becomes process_cpu, wall, memory, mutex and block series', { timeout: 60000 }, async () => {
  const expected = JSON.parse(fs.readFileSync(path.join(JFR_DIR, 'fixture.expected.json'), 'utf8'));
  const jfr = fs.readFileSync(path.join(JFR_DIR, 'fixture.jfr'));
  const r = await post(pyroPort, '/ingest?name=jdk-app&format=jfr&sampleRate=100&spyName=javaspy',
    { 'content-type': 'application/octet-stream' }, jfr);
  assert.equal(r.status, 200, r.body.toString());
  const names = new Set();
  let cpuTotal = 0;
  const collect = () => {
    names.clear();
    cpuTotal = 0;
    for (const { labels: l, profile } of pushedSeries('jdk-app')) {
      names.add(l.__name__);
      const str = (i) => profile.stringTable.strings[Number(i)];
      if (l.__name__ === 'process_cpu' && str(profile.sampleType[0].type) === 'cpu')
        for (const s of profile.sample) cpuTotal += Number(s.value[0]);
    }
    return names.size >= 5 && cpuTotal > 0;
  };
  assert.ok(await until(collect, 20000), `series: ${[...names]}`);
  assert.deepEqual([...names].sort(), ['block', 'memory', 'mutex', 'process_cpu', 'wall']);
  assert.equal(cpuTotal, expected.kinds.cpu.events * 10000000);

  // a truncated recording: 400, Pyroscope's JSON error shape
  const bad = await post(pyroPort, '/ingest?name=jdk-app&format=jfr',
    { 'content-type': 'application/octet-stream' }, jfr.subarray(0, jfr.length - 100));
  assert.equal(bad.status, 400);
  const e = JSON.parse(bad.body.toString());
  assert.equal(e.code, 'invalid_argument');
  assert.match(e.message, /JFR: chunk 0/);
});
