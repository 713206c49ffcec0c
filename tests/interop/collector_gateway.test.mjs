// collector_gateway.test.mjs: an OpenTelemetry Collector gateway
// configuration from the Collector's documentation (fixtures/collector-gateway.yaml:
// OTLP in and out, memory_limiter, attributes, redaction, batch, health_check,
// pprof, zpages) validates and runs as it is. Only what an operator changes
// on the command line differs: the ports (other tests run at the same time)
// and the backend's address, each with the Collector's --set syntax.
// The SDK sends over OTLP/gRPC; a grpc-js backend checks what arrives;
// /metrics is read under the Collector's metric names.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build/proflink node --test collector_gateway.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { BIN, repo, freePorts, waitFor, grpcBackend, canConnect } from './lib/proflink.mjs';

const CONFIG = path.join(repo, 'tests', 'interop', 'fixtures', 'collector-gateway.yaml');

function spans(n) {
  const mem = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'shop' }),
    spanProcessors: [new SimpleSpanProcessor(mem)],
  });
  const tracer = provider.getTracer('gateway-test', '1.0');
  for (let i = 0; i < n; i++) {
    tracer.startSpan(`checkout-${i}`, {
      attributes: {
        name: `order-${i}`,
        id: '4111111111111111', // a Visa number in an allowed key: masked
        description: 'paid by 5105105105105100 today', // MasterCard: masked inside
        email: 'someone@example.com', // hashed by attributes, then not allowed
        'db.statement': 'SELECT 1', // deleted by attributes
        safe_attribute: '4111111111111111', // ignored: never masked
        'user.secret': 'x', // not allowed: removed
      },
    }).end();
  }
  return mem.getFinishedSpans();
}

const attr = (span, key) => span.attributes.find(([k]) => k === key)?.[1];

test('a Collector gateway configuration from its docs validates and runs unchanged, with the Collector\'s metric names', { timeout: 60000 }, async () => {
  // as it is, including 0.0.0.0 listeners and a backend named otelcol
  execFileSync(BIN, ['validate', '--config', CONFIG], { stdio: 'pipe' });

  const backend = await grpcBackend();
  const [grpcPort, httpPort, healthPort, metricsPort, pprofPort, zpagesPort] = await freePorts(6);
  const child = spawn(BIN, [
    '--config', CONFIG,
    `--set=receivers::otlp::protocols::grpc::endpoint=127.0.0.1:${grpcPort}`,
    `--set=receivers::otlp::protocols::http::endpoint=127.0.0.1:${httpPort}`,
    `--set=exporters::otlp::endpoint=127.0.0.1:${backend.port}`,
    `--set=extensions::health_check::endpoint=127.0.0.1:${healthPort}`,
    `--set=extensions::pprof::endpoint=127.0.0.1:${pprofPort}`,
    `--set=extensions::zpages::endpoint=127.0.0.1:${zpagesPort}`,
    `--set=service.telemetry.metrics.address=127.0.0.1:${metricsPort}`,
  ], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (d) => { log += d; });
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    await waitFor(async () => (await canConnect(grpcPort)) && (await canConnect(healthPort)), 15000, `listening (${log})`);
    const hc = await fetch(`http://127.0.0.1:${healthPort}/`);
    assert.equal(hc.status, 200);

    const exporter = new GrpcExporter({ url: `http://127.0.0.1:${grpcPort}` });
    const sent = spans(5);
    const result = await new Promise((resolve) => exporter.export(sent, resolve));
    assert.equal(result.code, 0, `export: ${result.error} (${log})`);
    await exporter.shutdown();

    // batch (default 200 ms) -> otlp exporter -> the backend
    await waitFor(() => backend.counts.size === 5, 10000, `5 spans at the backend (${log})`);
    const got = [...backend.canonical().values()].map((x) => x.span);
    for (const s of got) {
      assert.match(attr(s, 'name'), /order-\d/);
      assert.equal(attr(s, 'id'), JSON.stringify({ stringValue: '****' }));
      assert.equal(attr(s, 'description'), JSON.stringify({ stringValue: 'paid by **** today' }));
      assert.equal(attr(s, 'environment'), JSON.stringify({ stringValue: 'production' }));
      assert.equal(attr(s, 'safe_attribute'), JSON.stringify({ stringValue: '4111111111111111' }));
      for (const gone of ['email', 'db.statement', 'user.secret']) assert.equal(attr(s, gone), undefined, gone);
      assert.match(attr(s, 'redaction.redacted.keys'), /email/);
      assert.match(attr(s, 'redaction.masked.keys'), /id/);
    }

    // the Collector's names, for the signals each component handles
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const value = (re) => Number((metrics.match(re) ?? [])[1]);
    assert.equal(value(/^otelcol_receiver_accepted_spans\{receiver="otlp",transport="grpc"\} (\d+)$/m), 5, metrics);
    assert.equal(value(/^otelcol_receiver_refused_spans\{receiver="otlp",transport="grpc"\} (\d+)$/m), 0);
    assert.equal(value(/^otelcol_processor_accepted_spans\{processor="batch"\} (\d+)$/m), 5);
    assert.equal(value(/^otelcol_processor_accepted_spans\{processor="memory_limiter"\} (\d+)$/m), 5);
    await waitFor(async () => /^otelcol_exporter_sent_spans\{exporter="otlp"\} 5$/m.test(
      await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()), 10000, 'sent counter');
    assert.equal(value(/^otelcol_exporter_send_failed_spans\{exporter="otlp"\} (\d+)$/m), 0);
    assert.equal(value(/^otelcol_exporter_enqueue_failed_spans\{exporter="otlp"\} (\d+)$/m), 0);
    assert.equal(value(/^otelcol_exporter_queue_capacity\{exporter="otlp"\} (\d+)$/m), 1000);
    assert.match(metrics, /^otelcol_exporter_queue_size\{exporter="otlp"\} \d+$/m);
    assert.match(metrics, /^otelcol_process_uptime [0-9.]+$/m);
    assert.match(metrics, /^otelcol_process_memory_rss [1-9]\d*$/m);
    assert.match(metrics, /^otelcol_process_cpu_seconds [0-9.]+$/m);
    const after = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    assert.match(after, /^otelcol_processor_incoming_items\{processor="batch",otel_signal="traces"\} 5$/m);
    assert.match(after, /^otelcol_processor_outgoing_items\{processor="batch",otel_signal="traces"\} 5$/m);
    assert.match(after, /^proflink_exporter_send_duration_seconds_count\{exporter="otlp"\} [1-9]/m);
    assert.match(after, /^proflink_exporter_send_duration_seconds_bucket\{exporter="otlp",le="\+Inf"\} [1-9]/m);
    // only traces flow here: no other signal's series
    assert.doesNotMatch(metrics, /otelcol_receiver_accepted_(profile_samples|log_records|metric_points)\{receiver="otlp"/);
  } finally {
    child.kill('SIGTERM');
    assert.equal(await exited, 0, log);
    await backend.stop();
  }
});
