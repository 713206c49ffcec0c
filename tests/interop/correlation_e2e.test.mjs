// correlation_e2e.test.mjs: spans from the OpenTelemetry JS SDK and profiles
// from the real @pyroscope/nodejs SDK meet in proflink's correlation
// processor; the `file` exporter writes what proflink exports (OTLP/JSON
// lines), and the test checks the enrichment on both sides:
//
//   spans    pyroscope.profile.id = the span id, profile.samples > 0, wall
//            time, the hottest functions (the busy function among them),
//            profile.cpu_time_total_ns of the root >= its child's;
//   samples  linked to their span (link with span id AND trace id, although
//            the SDK only labelled the span id), span_name, root_span_name,
//            service.name and http.route (taken from the root for the child).
//
// A second test checks that a reload (SIGHUP) flushes what the processor
// holds, through the real binary.
//
// The application code runs in this process: a request is a server span
// (http.route set) with a child span; each does CPU work inside
// Pyroscope.wrapWithLabels({span_id}), as span-profile integrations do.
// Pyroscope.stop() uploads the last wall profile.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test correlation_e2e.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import {
  freePort, readJsonLines as readLines, runCheckoutApp, startProflink, tracerProvider, until,
} from './lib/common.mjs';

const SERVICE = 'checkout-e2e';

const running = new Set();
after(() => { for (const pl of running) pl.child.kill('SIGKILL'); });

test('spans and Pyroscope samples are joined and enriched on both sides', { timeout: 90000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-corr-'));
  const otlpPort = await freePort();
  const pyroPort = await freePort();
  const metricsPort = await freePort();
  const tracesFile = path.join(dir, 'traces.jsonl');
  const profilesFile = path.join(dir, 'profiles.jsonl');
  const yaml = [
    'receivers:',
    '  otlp:',
    '    protocols:',
    `      http: { endpoint: "127.0.0.1:${otlpPort}" }`,
    '  pyroscope:',
    `    endpoint: "127.0.0.1:${pyroPort}"`,
    'processors:',
    '  correlation:',
    '    window: 20s',
    '    span_attributes: [http.route]',
    'exporters:',
    `  file/traces: { path: "${tracesFile}", format: json }`,
    `  file/profiles: { path: "${profilesFile}", format: json }`,
    'service:',
    '  telemetry:',
    `    metrics: { address: "127.0.0.1:${metricsPort}" }`,
    '  pipelines:',
    '    traces: { receivers: [otlp], processors: [correlation], exporters: [file/traces] }',
    '    profiles: { receivers: [pyroscope], processors: [correlation], exporters: [file/profiles] }',
    '',
  ].join('\n');
  const pl = await startProflink(yaml, { dir, ports: [otlpPort, pyroPort] });
  running.add(pl);

  // ---- the application: OpenTelemetry for spans, Pyroscope for profiles ----
  const { provider, requests } = await runCheckoutApp({
    service: SERVICE, otlpPort, pyroPort, tracerName: 'e2e',
    rootAttributes: { 'http.route': '/checkout/:id', 'http.request.method': 'GET' },
    checkoutMs: () => 250,
  });
  const uploaded = Date.now();

  // ---- what proflink exported ----
  // Samples go on as soon as their spans are known; spans once profiles of
  // their service cover them (or the window closes).
  if (process.env.E2E_DEBUG) { // prints the correlation counters
    await new Promise((r) => setTimeout(r, 1000));
    const m = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((x) => x.text());
    console.log(m.split("\n").filter((l) => /correlation|pyroscope|otlp/.test(l) && !l.startsWith("#")).join("\n"));
  }
  assert.ok(await until(() => readLines(profilesFile).length > 0, 10000),
    `profiles exported (log: ${pl.log})`);
  assert.ok(await until(() => {
    const ids = new Set();
    for (const req of readLines(tracesFile))
      for (const rs of req.resourceSpans ?? [])
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? []) ids.add(s.spanId);
    return requests.every((r) => ids.has(r.rootId) && ids.has(r.childId));
  }, 30000), `spans exported (log: ${pl.log})`);
  // Released on coverage, well before the 20 s window.
  assert.ok(Date.now() - uploaded < 10000, `spans left ${Date.now() - uploaded} ms after the upload`);
  const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((x) => x.text());
  const counter = (name) => Number((metrics.match(new RegExp(
    `^proflink_processor_${name}_total\\{processor="correlation"\\} (\\d+)`, 'm')) ?? [])[1]);
  assert.ok(counter('linked_samples') > 10, metrics);
  assert.equal(counter('unlinked_samples'), 0, metrics);
  assert.equal(counter('spans_released_on_coverage'), 6, metrics);
  const { code } = await pl.stop();
  running.delete(pl);
  assert.equal(code, 0, pl.log);
  await provider.shutdown();

  // Spans.
  const spans = new Map();
  for (const req of readLines(tracesFile))
    for (const rs of req.resourceSpans ?? [])
      for (const ss of rs.scopeSpans ?? [])
        for (const s of ss.spans ?? []) spans.set(s.spanId, s);
  const attr = (span, key) => {
    const kv = (span.attributes ?? []).find((a) => a.key === key);
    if (!kv) return undefined;
    const v = kv.value;
    if ('stringValue' in v) return v.stringValue;
    if ('intValue' in v) return Number(v.intValue);
    if ('arrayValue' in v) return (v.arrayValue.values ?? []).map((x) => x.stringValue);
    return v;
  };
  let linkedRoots = 0;
  for (const r of requests) {
    const root = spans.get(r.rootId);
    const kid = spans.get(r.childId);
    assert.ok(root && kid, 'both spans exported');
    if (attr(root, 'pyroscope.profile.id') === undefined) continue; // no sample hit this one
    linkedRoots++;
    assert.equal(attr(root, 'pyroscope.profile.id'), r.rootId);
    assert.ok(attr(root, 'profile.samples') > 0);
    assert.ok(attr(root, 'profile.wall_time_ns') > 0);
    assert.ok(attr(root, 'profile.cpu_time_ns') >= 0);
    const top = attr(root, 'profile.top_functions');
    assert.ok(Array.isArray(top) && top.length > 0 && top.length <= 5, JSON.stringify(top));
    assert.match(top.join(' '), /\(\d+\.\d%\)/);
    if (attr(kid, 'pyroscope.profile.id') !== undefined) {
      assert.equal(attr(kid, 'pyroscope.profile.id'), r.childId);
      assert.ok(attr(root, 'profile.cpu_time_total_ns') >= attr(kid, 'profile.cpu_time_total_ns'));
    }
  }
  assert.ok(linkedRoots >= 2, `at least two of three roots got samples (${linkedRoots})`);
  const hot = [...spans.values()].flatMap((s) => attr(s, 'profile.top_functions') ?? []);
  assert.ok(hot.some((f) => /burnCpuIn(Checkout|Pricing)/.test(f)), JSON.stringify(hot));

  // Samples.
  const byId = new Map(requests.flatMap((r) => [[r.rootId, { ...r, isRoot: true }],
    [r.childId, { ...r, isRoot: false }]]));
  let linkedSamples = 0;
  for (const req of readLines(profilesFile)) {
    const d = req.dictionary ?? {};
    const strings = d.stringTable ?? [];
    const attrs = d.attributeTable ?? [];
    const links = d.linkTable ?? [];
    for (const rp of req.resourceProfiles ?? [])
      for (const sp of rp.scopeProfiles ?? [])
        for (const p of sp.profiles ?? [])
          for (const s of p.samples ?? []) {
            const link = links[s.linkIndex ?? 0];
            if (!link || !byId.has(link.spanId)) continue;
            const want = byId.get(link.spanId);
            linkedSamples++;
            assert.equal(link.traceId, want.traceId, 'link completed with the trace id');
            const labels = {};
            for (const i of s.attributeIndices ?? []) {
              const a = attrs[i];
              const key = strings[a.keyStrindex ?? 0];
              assert.ok(!(key in labels), `key ${key} once per sample`);
              labels[key] = a.value?.stringValue ?? strings[a.value?.stringValueStrindex ?? 0];
            }
            assert.equal(labels.span_name, want.isRoot ? 'GET /checkout/:id' : 'price items');
            assert.equal(labels.root_span_name, 'GET /checkout/:id');
            assert.equal(labels['service.name'], SERVICE);
            assert.equal(labels['http.route'], '/checkout/:id');
          }
  }
  assert.ok(linkedSamples > 10, `linked samples exported (${linkedSamples})`);
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a reload keeps an unchanged correlation processor with what it holds; changing it flushes', { timeout: 60000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-corr-'));
  const otlpPort = await freePort();
  const metricsPort = await freePort();
  const tracesFile = path.join(dir, 'traces.jsonl');
  const yaml = [
    'receivers:',
    '  otlp:',
    '    protocols:',
    `      http: { endpoint: "127.0.0.1:${otlpPort}" }`,
    'processors:',
    '  correlation: { window: 10m }',
    'exporters:',
    `  file: { path: "${tracesFile}", format: json }`,
    'service:',
    '  telemetry:',
    `    metrics: { address: "127.0.0.1:${metricsPort}" }`,
    '  pipelines:',
    '    traces: { receivers: [otlp], processors: [correlation], exporters: [file] }',
    '    profiles: { receivers: [otlp], processors: [correlation], exporters: [file] }',
    '',
  ].join('\n');
  const pl = await startProflink(yaml, { dir, ports: [otlpPort] });
  running.add(pl);

  const provider = tracerProvider('reload-e2e', new OTLPTraceExporter({
    url: `http://127.0.0.1:${otlpPort}/v1/traces`,
  }));
  const span = provider.getTracer('e2e').startSpan('held');
  span.end();
  await provider.forceFlush();
  // A profiles pipeline exists, so the span waits for its window (10 min).
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(readLines(tracesFile).length, 0, 'held while the window is open');
  // The same file again: correlation is kept as it is, still holding the span.
  pl.child.kill('SIGHUP');
  assert.ok(await until(() => /reloaded .*3 components kept as they were/.test(pl.log), 10000), pl.log);
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(readLines(tracesFile).length, 0, 'still held after a reload that changed nothing');
  // Its settings change: the old instance is replaced and hands on what it held.
  fs.writeFileSync(path.join(dir, 'collector.yaml'), yaml.replace('window: 10m', 'window: 9m'));
  pl.child.kill('SIGHUP');
  assert.ok(await until(() => readLines(tracesFile).length > 0, 10000),
    `flushed by the reload that replaced it (log: ${pl.log})`);
  const out = readLines(tracesFile)[0].resourceSpans[0].scopeSpans[0].spans[0];
  assert.equal(out.spanId, span.spanContext().spanId);
  assert.ok(await until(() => /1 replaced/.test(pl.log), 10000), pl.log);
  assert.equal((await pl.stop()).code, 0, pl.log);
  running.delete(pl);
  await provider.shutdown();
  fs.rmSync(dir, { recursive: true, force: true });
});
