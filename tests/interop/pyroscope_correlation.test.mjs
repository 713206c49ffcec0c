// pyroscope_correlation.test.mjs: the product's whole path with real
// clients. The Pyroscope Node.js SDK and OpenTelemetry JS send to proflink;
// the `correlation` processor (shared by the traces and profiles pipelines)
// joins the samples to their spans; the `pyroscope` exporter pushes to a
// fake Pyroscope push API. Checks what Grafana needs: each span that ran
// code carries `pyroscope.profile.id` = its span id, and the pushed pprof
// samples carry exactly one `span_id` label with that id, plus `span_name`.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test pyroscope_correlation.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import zlib from 'node:zlib';

import { Profile } from 'pprof-format';
import Pyroscope from '@pyroscope/nodejs';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  PushRequest, readJsonLines as readFileLines, tracerProvider,
  until,
} from './lib/common.mjs';
import { startPushStack } from './lib/push_stack.mjs';
import { labelledSpans } from './lib/pyroscope_sdk.mjs';

let pl, tmp, stop;
let otlpPort, pyroPort;
const pushes = [];

before(async () => {
  ({ pl, tmp, otlpPort, pyroPort, stop } = await startPushStack({
    prefix: 'proflink-pyro-corr-', pushes,
    processors: () => `  correlation:
    window: 3s`,
    pipelines: () => `    traces: { receivers: [otlp], processors: [correlation], exporters: [file] }
    profiles: { receivers: [pyroscope], processors: [correlation], exporters: [pyroscope] }`,
  }));
});

after(async () => {
  await stop?.();
});

function burnCpuInRequest(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) for (let i = 0; i < 10000; i++) x = (x * 31 + i) % 1000003;
  return x;
}

test('spans get pyroscope.profile.id and pushed samples carry span_id and span_name', async () => {
  const provider = tracerProvider('corr-app', new OTLPTraceExporter({
    url: `http://127.0.0.1:${otlpPort}/v1/traces` }));
  const tracer = provider.getTracer('interop');
  Pyroscope.init({ serverAddress: `http://127.0.0.1:${pyroPort}`, appName: 'corr-app',
    flushIntervalMs: 1000, wall: { collectCpuTime: true } });
  Pyroscope.start();
  const spans = await labelledSpans({
    tracer, provider, Pyroscope, name: 'GET /item', burn: () => burnCpuInRequest(400),
  });

  // Spans leave the correlation window with their profile summary.
  const out = path.join(tmp, 'out.jsonl');
  const exported = () => readFileLines(out).filter((r) => r.resourceSpans)
    .flatMap((r) => r.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans)));
  assert.ok(await until(() => spans.every((id) => exported().some((s) => s.spanId === id)), 20000),
    'spans exported');
  for (const id of spans) {
    const s = exported().find((x) => x.spanId === id);
    const attr = s.attributes?.find((a) => a.key === 'pyroscope.profile.id');
    assert.equal(attr?.value?.stringValue, id, `span ${id} has pyroscope.profile.id`);
  }

  // The samples reach Pyroscope with one span_id label each and span_name.
  const seen = new Map();
  const collect = () => {
    seen.clear();
    for (const p of pushes) {
      const req = PushRequest.toObject(PushRequest.decode(p.body), { bytes: Buffer });
      for (const series of req.series) {
        const labels = Object.fromEntries(series.labels.map((l) => [l.name, l.value]));
        if (labels.service_name !== 'corr-app') continue;
        for (const smp of series.samples) {
          const prof = Profile.decode(zlib.gunzipSync(smp.rawProfile));
          const str = (i) => prof.stringTable.strings[Number(i)];
          for (const s of prof.sample) {
            const keys = s.label.map((l) => str(l.key));
            assert.ok(keys.filter((k) => k === 'span_id').length <= 1, `one span_id label: ${keys}`);
            const byKey = Object.fromEntries(s.label.map((l) => [str(l.key), str(l.str)]));
            if (byKey.span_id) seen.set(byKey.span_id, byKey.span_name);
          }
        }
      }
    }
    return spans.every((id) => seen.has(id));
  };
  assert.ok(await until(collect, 20000), `pushed span ids: ${[...seen.keys()]}`);
  spans.forEach((id, i) => assert.equal(seen.get(id), `GET /item/${i}`, `span_name of ${id}`));
});
