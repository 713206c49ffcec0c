// store_e2e.test.mjs: the default pipeline shape with real clients, read
// back with `proflink query` and the query API.
//
// Spans from the OpenTelemetry JS SDK (OTLP/HTTP protobuf) and profiles from
// the real @pyroscope/nodejs SDK (Pyroscope /ingest, span_id labels) go
// through the correlation processor into the sqlite exporter. Then:
//   - `proflink query traces --json` lists the three requests, slowest
//     first, with their root span name and 2 spans each;
//   - `proflink query trace ID --json` gives the span tree (root, then its
//     child at depth 1) with the profiled CPU work of each span among its
//     hottest functions (burnCpuInCheckout / burnCpuInPricing);
//   - `proflink query flamegraph --span CHILD` has the child's function in
//     its folded stacks; `query top --service` lists both functions;
//   - every span (all are labelled) shows a non-zero time in nanoseconds;
//   - GET /api/traces on the exporter's address answers the same traces.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test store_e2e.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

import { BIN, runCheckoutApp, until } from './lib/common.mjs';
import { startStore } from './lib/store.mjs';

const SERVICE = 'store-e2e';

let pl;
after(() => pl?.child.kill('SIGKILL'));

test('spans and Pyroscope profiles stored, then queried', { timeout: 90000 }, async () => {
  let dir, db, otlpPort, pyroPort, apiPort;
  ({ pl, dir, db, otlpPort, pyroPort, apiPort } = await startStore({ correlation: ['window: 20s'] }));

  const { provider, requests } = await runCheckoutApp({
    service: SERVICE, otlpPort, pyroPort, tracerName: 'store-e2e',
    rootAttributes: { 'http.route': '/checkout/:id' },
    checkoutMs: (r) => 200 + 100 * r,
  });

  const query = (...args) => execFileSync(BIN, ['query', ...args, '--db', db],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const queryJson = (...args) => JSON.parse(query(...args, '--json'));

  // Stored once correlation lets the spans go and the writer commits.
  let listed;
  assert.ok(await until(() => {
    try {
      listed = queryJson('traces', '--service', SERVICE);
    } catch {
      return false;
    }
    const ids = new Set(listed.traces.filter((t) => t.span_count === 2).map((t) => t.trace_id));
    return requests.every((r) => ids.has(r.traceId));
  }, 30000, 200), `traces stored (log: ${pl.log})`);
  assert.equal(listed.traces.length, 3);
  for (const t of listed.traces) {
    assert.equal(t.root_name, 'GET /checkout/:id');
    assert.equal(t.root_service, SERVICE);
  }
  for (let i = 1; i < listed.traces.length; i++)
    assert.ok(listed.traces[i - 1].duration_ns >= listed.traces[i].duration_ns, 'slowest first');
  // Samples are committed in their own transaction: wait for them too.
  assert.ok(await until(() => {
    listed = queryJson('traces', '--service', SERVICE);
    return listed.traces.filter((t) => t.cpu_ns !== null).length >= 2;
  }, 15000, 200), `samples stored: ${JSON.stringify(listed)}`);

  // Every labelled span shows its samples' time (CPU, else wall), in
  // nanoseconds, not a sample count.
  let untimed = [];
  assert.ok(await until(() => {
    untimed = [];
    for (const r of requests)
      for (const s of queryJson('trace', r.traceId).spans)
        if (!s.time || !(s.time.value > 0) || s.time.unit !== 'nanoseconds') untimed.push(`${s.name}: ${JSON.stringify(s.time)}`);
    return untimed.length === 0;
  }, 15000, 200), `spans without time: ${untimed.join('; ')}`);

  // The span tree of each request, with hot functions per span.
  const hotNames = [];
  for (const r of requests) {
    const d = queryJson('trace', r.traceId);
    assert.equal(d.spans.length, 2);
    assert.equal(d.spans[0].span_id, r.rootId);
    assert.equal(d.spans[0].depth, 0);
    assert.equal(d.spans[0].attributes['http.route'], '/checkout/:id');
    assert.equal(d.spans[1].span_id, r.childId);
    assert.equal(d.spans[1].parent_span_id, r.rootId);
    assert.equal(d.spans[1].depth, 1);
    for (const s of d.spans) hotNames.push(...s.top_functions.map((f) => `${s.name}:${f.name}`));
  }
  // (the Node.js SDK names functions "file:name:line")
  assert.ok(hotNames.some((n) => /^GET \/checkout\/:id:.*burnCpuInCheckout/.test(n)),
    hotNames.join(', '));
  assert.ok(hotNames.some((n) => /^price items:.*burnCpuInPricing/.test(n)), hotNames.join(', '));
  assert.ok(!hotNames.some((n) => /^price items:.*burnCpuInCheckout/.test(n)),
    `a span's hot functions are its own: ${hotNames.join(', ')}`);

  // The human-readable tree says the same.
  const text = query('trace', requests[2].traceId);
  assert.match(text, /GET \/checkout\/:id/);
  assert.match(text, /\n.* {4}price items/);

  // Folded stacks of one span, top functions of the service.
  const withSamples = requests.find((r) => {
    const f = query('flamegraph', '--span', r.childId);
    return f.includes('burnCpuInPricing');
  });
  assert.ok(withSamples, 'a child span has its own flame graph');
  const folded = query('flamegraph', '--span', withSamples.childId);
  for (const line of folded.trim().split('\n'))
    assert.match(line, /^\S.* \d+$/, 'folded format: frames, space, value');
  assert.ok(!folded.includes('burnCpuInCheckout'), 'only that span');
  const top = queryJson('top', '--service', SERVICE, '--since', '0');
  const names = top.functions.map((f) => f.name).join(', ');
  assert.match(names, /burnCpuInCheckout/);
  assert.match(names, /burnCpuInPricing/);
  const svg = query('flamegraph', '--trace', withSamples.traceId, '--format', 'svg');
  assert.ok(svg.startsWith('<?xml') && svg.includes('</svg>') && svg.includes('burnCpuInPricing'));

  // The query API on the exporter's address.
  const api = await fetch(`http://127.0.0.1:${apiPort}/api/traces?service=${SERVICE}`)
    .then((x) => x.json());
  assert.deepEqual(new Set(api.traces.map((t) => t.trace_id)),
    new Set(requests.map((r) => r.traceId)));

  const { code } = await pl.stop();
  assert.equal(code, 0, pl.log);
  await provider.shutdown();
  fs.rmSync(dir, { recursive: true, force: true });
});
