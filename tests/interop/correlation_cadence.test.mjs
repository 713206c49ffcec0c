// correlation_cadence.test.mjs: correlation at the real upload cadence of
// the Pyroscope Node.js SDK. @pyroscope/nodejs is left at its defaults: it
// uploads every 60 s (flushIntervalMs), its heap profile (no span labels)
// just before its wall profile. OpenTelemetry JS exports spans through a
// BatchSpanProcessor, as applications do. The correlation processor is
// configured exactly as the project's collector.yaml configures it (window
// 30s, span_attributes [http.route]). For a little over 60 s, requests run a
// server span and a child span, each wrapped in wrapWithLabels({span_id}).
//
// Checks: every pushed sample that carries a span_id label also carries
// span_name (and the root's http.route); every labelled span that was
// sampled (at least 80 % of them) is exported with pyroscope.profile.id (its
// own id) and its profile summary, and shown in the embedded store with a
// non-zero time in nanoseconds; no sample counted late. Takes about 80 s.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build/proflink node --test correlation_cadence.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { execFileSync } from 'node:child_process';

import { Profile } from 'pprof-format';
import Pyroscope from '@pyroscope/nodejs';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { context, trace } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import {
  BIN, httpGet, PushRequest, readJsonLines, sleep, until,
} from './lib/common.mjs';
import { startPushStack } from './lib/push_stack.mjs';

const RUN_MS = 62000; // a little over the SDK's 60 s flush interval
let pl, tmp, stop;
let otlpPort, pyroPort, metricsPort;
const pushes = [];

// The correlation settings of the project's collector.yaml, read from it.
function collectorCorrelation() {
  const yaml = fs.readFileSync(new URL('../../collector.yaml', import.meta.url), 'utf8');
  const m = yaml.match(/\nprocessors:\n((?: {2}.*\n)+)/);
  assert.ok(m, 'collector.yaml has a processors section');
  assert.match(m[1], /^ {2}correlation:/m);
  return m[1];
}

before(async () => {
  ({ pl, tmp, otlpPort, pyroPort, metricsPort, stop } = await startPushStack({
    prefix: 'proflink-cadence-', pushes,
    processors: () => collectorCorrelation().replace(/\n$/, ''),
    exporters: (p) => `  sqlite:
    path: ${path.join(p.tmp, 'store.db')}`,
    pipelines: () => `    traces: { receivers: [otlp], processors: [correlation], exporters: [file, sqlite] }
    profiles: { receivers: [pyroscope], processors: [correlation], exporters: [pyroscope, sqlite] }`,
  }));
});

after(async () => {
  await stop?.();
});

function burnCpu(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) for (let i = 0; i < 10000; i++) x = (x * 31 + i) % 1000003;
  return x;
}

async function counter(name) {
  const res = await httpGet(metricsPort, '/metrics');
  const line = res.body.toString().split('\n')
    .find((l) => l.startsWith(`proflink_processor_${name}_total`) && l.includes('correlation'));
  return line ? Number(line.trim().split(/\s+/).pop()) : NaN;
}

test('default 60 s SDK cadence: every labelled span and sample is linked', { timeout: 180000 }, async () => {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'cadence-app' }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({
      url: `http://127.0.0.1:${otlpPort}/v1/traces` }))],
  });
  const tracer = provider.getTracer('cadence');
  // Defaults: flushIntervalMs 60 s, wall and heap profiles.
  Pyroscope.init({ serverAddress: `http://127.0.0.1:${pyroPort}`, appName: 'cadence-app' });
  Pyroscope.start();

  const labelled = new Map(); // span id -> name
  const started = Date.now();
  let i = 0;
  while (Date.now() - started < RUN_MS) {
    const root = tracer.startSpan(`GET /orders/${i}`, { attributes: { 'http.route': '/orders/:id' } });
    const rootId = root.spanContext().spanId;
    labelled.set(rootId, `GET /orders/${i}`);
    Pyroscope.wrapWithLabels({ span_id: rootId }, () => burnCpu(120));
    const child = tracer.startSpan('SELECT orders', {}, trace.setSpan(context.active(), root));
    const childId = child.spanContext().spanId;
    labelled.set(childId, 'SELECT orders');
    Pyroscope.wrapWithLabels({ span_id: childId }, () => burnCpu(80));
    child.end();
    root.end();
    i++;
    await sleep(1300);
  }
  // The last spans end before the SDK's final upload covers them (+ the
  // processor's 1 s clock skew), as they would before its next periodic one.
  await provider.forceFlush();
  await sleep(2500);
  await Pyroscope.stop();
  await provider.shutdown();
  assert.ok(i >= 40, `${i} requests`);

  // Every span is exported, and the pushes have settled.
  const out = path.join(tmp, 'out.jsonl');
  const exported = () => new Map(readJsonLines(out).filter((r) => r.resourceSpans)
    .flatMap((r) => r.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans)))
    .map((s) => [s.spanId, s]));
  assert.ok(await until(() => [...labelled.keys()].every((id) => exported().has(id)), 30000),
    `spans exported: ${exported().size} of ${labelled.size}`);
  let seen = -1;
  for (let k = 0; k < 20 && seen !== pushes.length; k++) {
    seen = pushes.length;
    await sleep(1000);
  }

  // Samples: every one that names a span carries its span_name.
  let withSpan = 0;
  const bare = [];
  const bareIds = new Set();
  const names = new Map();
  for (const p of pushes) {
    const req = PushRequest.toObject(PushRequest.decode(p.body), { bytes: Buffer });
    for (const series of req.series) {
      const labels = Object.fromEntries(series.labels.map((l) => [l.name, l.value]));
      if (labels.service_name !== 'cadence-app') continue;
      for (const smp of series.samples) {
        const prof = Profile.decode(zlib.gunzipSync(smp.rawProfile));
        const str = (k) => prof.stringTable.strings[Number(k)];
        for (const s of prof.sample) {
          const byKey = Object.fromEntries(s.label.map((l) => [str(l.key), str(l.str)]));
          if (!byKey.span_id) continue;
          withSpan++;
          if (!byKey.span_name) { bare.push(byKey.span_id); bareIds.add(byKey.span_id); }
          else names.set(byKey.span_id, byKey.span_name);
          if (labelled.get(byKey.span_id) === 'SELECT orders')
            assert.equal(byKey['http.route'], '/orders/:id', 'the root\'s http.route on a child sample');
        }
      }
    }
  }
  assert.ok(withSpan > 0, 'samples with span_id were pushed');
  if (bare.length) {
    // what a failure needs to be read: which span, when it ran and left,
    // and what the processor counted
    const spans = exported();
    const order = [...labelled.keys()];
    const info = [...bareIds].map((id) => {
      const sp = spans.get(id);
      const at = (ns) => ((Number(BigInt(ns) / 1000000n) - started) / 1000).toFixed(2);
      return `${labelled.get(id)} (#${order.indexOf(id)} of ${order.length}), ` +
        `start ${sp ? at(sp.startTimeUnixNano) : '?'} s, end ${sp ? at(sp.endTimeUnixNano) : '?'} s`;
    });
    const pushTimes = pushes.map((p) => ((p.at ?? 0) - started) / 1000);
    const counters = {};
    for (const c of ['late_samples', 'late_spans', 'unlinked_samples', 'spans_released_on_coverage'])
      counters[c] = await counter(c);
    assert.fail(`samples without span_name: ${bare.length} of ${withSpan}: ${info.join('; ')}; ` +
      `counters ${JSON.stringify(counters)}; pushes at ${JSON.stringify(pushTimes)}`);
  }
  for (const [id, name] of names) if (labelled.has(id)) assert.equal(name, labelled.get(id));

  // Spans: every one that had samples (its id is on a pushed sample) leaves
  // with its profile summary. A span the wall profiler never sampled (a
  // loaded machine can skip 80 ms) has nothing to link.
  const spans = exported();
  const sampled = [...labelled.keys()].filter((id) => names.has(id) || bareIds.has(id));
  assert.ok(sampled.length >= labelled.size * 0.8,
    `most spans were sampled: ${sampled.length} of ${labelled.size}`);
  const missing = [];
  for (const id of sampled) {
    const attr = (k) => spans.get(id).attributes?.find((a) => a.key === k)?.value;
    if (attr('pyroscope.profile.id')?.stringValue !== id) missing.push(id);
    else assert.ok(Number(attr('profile.samples')?.intValue) > 0, `span ${id} has samples`);
  }
  assert.deepEqual(missing, [], `sampled spans without pyroscope.profile.id: ${missing.length} of ${sampled.length}`);

  // The store shows each sampled span with its time (wall here), in
  // nanoseconds, not a sample count.
  const db = path.join(tmp, 'store.db');
  const traceOf = new Map(sampled.map((id) => [id, spans.get(id).traceId]));
  let untimed = [];
  assert.ok(await until(() => {
    untimed = [];
    const byTrace = new Map();
    for (const [id, tr] of traceOf) {
      if (!byTrace.has(tr)) {
        try {
          byTrace.set(tr, JSON.parse(execFileSync(BIN, ['query', 'trace', tr, '--db', db, '--json'],
            { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })).spans);
        } catch {
          byTrace.set(tr, []);
        }
      }
      const s = byTrace.get(tr).find((x) => x.span_id === id);
      if (!s || !s.time || !(s.time.value > 0) || s.time.unit !== 'nanoseconds')
        untimed.push(`${id}: ${JSON.stringify(s?.time)}`);
    }
    return untimed.length === 0;
  }, 20000, 500), `sampled spans without a time in the store: ${untimed.length}: ${untimed.slice(0, 3).join('; ')}`);

  assert.equal(await counter('late_samples'), 0, 'no sample came after its span left');
  assert.ok(await counter('spans_released_on_coverage') > 0, 'spans left once the wall upload covered them');
});
