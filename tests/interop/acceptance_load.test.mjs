// acceptance_load.test.mjs: 12 concurrent OpenTelemetry JS exporters (grpc,
// proto and json, mixed) send 24k spans as fast as they can into proflink,
// which forwards them with `otlphttp` to a fake backend (node http +
// protobufjs). Every span must arrive exactly once (unique span ids), the
// resident memory of proflink (VmRSS) must stay bounded during the run, and
// proflink must exit 0 on SIGTERM right after.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-xxx/proflink node --test acceptance_load.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { freePorts, startProflink, waitFor, httpBackend, grpcBackend } from './lib/proflink.mjs';

const SENDERS = Number(process.env.ACC_LOAD_SENDERS || 12);
const BATCHES = Number(process.env.ACC_LOAD_BATCHES || 8);
const BATCH = 250; // 12 * 8 * 250 = 24000 spans
// ASan roughly doubles memory; the bound is about "does not grow with the
// amount sent", not a tight budget.
const RSS_LIMIT_KIB = Number(process.env.ACC_RSS_LIMIT_KIB || 600 * 1024);

function makeBatches(sender) {
  const mem = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': `load-${sender}` }),
    spanProcessors: [new SimpleSpanProcessor(mem)],
  });
  const tracer = provider.getTracer('load');
  const batches = [];
  for (let b = 0; b < BATCHES; b++) {
    mem.reset();
    for (let i = 0; i < BATCH; i++) {
      const s = tracer.startSpan(`op-${i % 17}`, { attributes: { 'http.route': `/r/${i % 5}`, n: i, sender } });
      s.addEvent('e', { k: 'v' });
      s.end();
    }
    batches.push(mem.getFinishedSpans().slice());
  }
  return batches;
}

for (const out of ['otlphttp', 'otlp']) {
test(`load: 12 mixed SDK exporters, 24k spans -> ${out}, each arrives once; bounded RSS; exit 0 on SIGTERM`, { timeout: 120000 }, async () => {
  const backend = out === 'otlp' ? await grpcBackend() : await httpBackend();
  const exporterCfg = out === 'otlp'
    ? `otlp:\n    endpoint: 127.0.0.1:${backend.port}\n    tls: { insecure: true }`
    : `otlphttp:\n    endpoint: http://127.0.0.1:${backend.port}`;
  const [grpcPort, httpPort, metricsPort] = await freePorts(3);
  const pl = await startProflink(`
receivers:
  otlp:
    protocols:
      grpc: { endpoint: "127.0.0.1:${grpcPort}" }
      http: { endpoint: "127.0.0.1:${httpPort}" }
processors:
  batch: { send_batch_size: 2000, timeout: 100ms }
exporters:
  ${exporterCfg}
    retry_on_failure: { initial_interval: 100ms, max_interval: 1s }
service:
  telemetry:
    logs: { level: warn }
    metrics: { address: "127.0.0.1:${metricsPort}" }
  pipelines:
    traces: { receivers: [otlp], processors: [${out === 'otlp' ? '' : 'batch'}], exporters: [${out}] }
`, { ports: [grpcPort, httpPort] });
  let maxRss = 0;
  const sampler = setInterval(() => { maxRss = Math.max(maxRss, pl.rss()); }, 100);
  try {
    const expected = new Set();
    const work = [];
    let refused = 0;
    for (let k = 0; k < SENDERS; k++) {
      const batches = makeBatches(k);
      for (const b of batches) for (const s of b) expected.add(s.spanContext().spanId);
      const kind = ['grpc', 'proto', 'json'][k % 3];
      const exporter = kind === 'grpc' ? new GrpcExporter({ url: `http://127.0.0.1:${grpcPort}`, compression: k % 2 ? 'gzip' : 'none' })
        : kind === 'proto' ? new ProtoExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces`, compression: k % 2 ? 'gzip' : 'none' })
          : new JsonExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces` });
      work.push((async () => {
        for (const b of batches) {
          // (the otlp variant has no batch processor: one gRPC call per SDK export)
          // A refused batch (503 / UNAVAILABLE) is sent again, as an
          // application with a retrying pipeline would.
          for (let attempt = 0; ; attempt++) {
            const r = await new Promise((resolve) => exporter.export(b, resolve));
            if (r.code === 0) break;
            refused++;
            assert.ok(attempt < 50, `sender ${kind} gave up: ${r.error}`);
            await new Promise((res) => setTimeout(res, 100));
          }
        }
        await exporter.shutdown();
      })());
    }
    assert.equal(expected.size, SENDERS * BATCHES * BATCH);
    const t0 = Date.now();
    await Promise.all(work);
    const sendMs = Date.now() - t0;
    await waitFor(() => backend.counts.size >= expected.size, 60000,
      `all spans at the backend (${backend.counts.size}/${expected.size}; log: ${pl.log.slice(-2000)})`);
    const missing = [...expected].filter((id) => !backend.counts.has(id));
    assert.equal(missing.length, 0, `${missing.length} spans missing`);
    assert.equal(backend.duplicates(), 0, `${backend.duplicates()} spans arrived more than once`);
    assert.equal(backend.counts.size, expected.size);
    console.log(`# load: ${expected.size} spans in ${sendMs} ms (${Math.round(expected.size / (sendMs / 1000))}/s), ` +
      `refused and resent ${refused} batches, max RSS ${Math.round(maxRss / 1024)} MiB, backend requests ${backend.requests.length}`);
    assert.ok(maxRss > 0 && maxRss < RSS_LIMIT_KIB, `RSS ${maxRss} KiB over ${RSS_LIMIT_KIB}`);
  } finally {
    clearInterval(sampler);
    const r = await pl.stop();
    await backend.stop();
    fs_rm(pl);
    assert.deepEqual(r, { code: 0, signal: null }, `exit ${JSON.stringify(r)}: ${pl.log.slice(-3000)}`);
  }
});
}

function fs_rm(pl) { pl.cleanup().catch(() => {}); }
