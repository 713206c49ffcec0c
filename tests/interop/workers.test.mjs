// workers.test.mjs: service.workers: 3 receiver loops (SO_REUSEPORT) in
// front of one pipeline loop that holds state (correlation, batch). Several
// OpenTelemetry JS exporters send concurrently over OTLP/HTTP and OTLP/gRPC;
// every span arrives exactly once, the receiver's counters add up across the
// workers, /health answers, a SIGHUP reload keeps serving, and the process
// exits cleanly (no sanitizer report in the ASan build).
//
// Run: cd tests/interop && PROFLINK_BIN=../../build/proflink node --test workers.test.mjs

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { OTLPTraceExporter as HttpExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { BIN, readJsonLines, startProflink, until } from './lib/common.mjs';
import { freePorts } from './lib/proflink.mjs';

function config({ grpcPort, httpPort, metricsPort, out, workers }) {
  return `
receivers:
  otlp:
    protocols:
      grpc: { endpoint: 127.0.0.1:${grpcPort} }
      http: { endpoint: 127.0.0.1:${httpPort} }
processors:
  correlation:
    window: 1s
    max_window: 0s
  batch:
    timeout: 200ms
exporters:
  file: { path: ${out} }
service:
  workers: ${workers}
  telemetry:
    logs: { level: info }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    traces: { receivers: [otlp], processors: [correlation, batch], exporters: [file] }
`;
}

async function sendFrom(exporter, service, n) {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': service }),
    spanProcessors: [new BatchSpanProcessor(exporter, { maxExportBatchSize: 20, scheduledDelayMillis: 20 })],
  });
  const tracer = provider.getTracer('workers');
  const ids = [];
  for (let i = 0; i < n; i++) {
    const s = tracer.startSpan(`op ${i}`);
    s.end();
    ids.push(s.spanContext().spanId);
    if (i % 50 === 49) await new Promise((r) => setImmediate(r));
  }
  await provider.forceFlush();
  await provider.shutdown();
  return ids;
}

test('three receiver loops feed one pipeline: every span exactly once', async () => {
  const [grpcPort, httpPort, metricsPort] = await freePorts(3);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-workers-'));
  const out = path.join(dir, 'out.jsonl');
  const pl = await startProflink(config({ grpcPort, httpPort, metricsPort, out, workers: 3 }),
    { dir, ports: [grpcPort, httpPort, metricsPort] });
  try {
    assert.match(pl.log, /OTLP\/HTTP listening on .* \(3 workers\)/);
    const senders = [];
    for (let k = 0; k < 4; k++) {
      senders.push(sendFrom(new HttpExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces` }), `http-${k}`, 300));
      senders.push(sendFrom(new GrpcExporter({ url: `http://127.0.0.1:${grpcPort}` }), `grpc-${k}`, 300));
    }
    const health = [];
    let sending = true;
    const probe = (async () => {
      while (sending) {
        const r = await fetch(`http://127.0.0.1:${metricsPort}/health`);
        health.push(r.status);
        await new Promise((res) => setTimeout(res, 50));
      }
    })();
    // a reload while the senders are in flight: the new receivers join the
    // same worker loops. The signal goes at once, not on a timer that fast
    // senders could beat, and the test waits for the reload to be logged.
    pl.child.kill('SIGHUP');
    const reloaded = until(() => /reloaded/.test(pl.log), 20000);
    const sent = (await Promise.all(senders)).flat();
    sending = false;
    await probe;
    assert.ok(await reloaded, `reloaded while sending\n${pl.log}`);
    assert.equal(sent.length, 2400);

    const counts = new Map();
    const collect = () => {
      counts.clear();
      for (const rec of readJsonLines(out)) {
        for (const rs of rec.resourceSpans || []) for (const ss of rs.scopeSpans || []) {
          for (const s of ss.spans || []) counts.set(s.spanId, (counts.get(s.spanId) || 0) + 1);
        }
      }
      return sent.every((id) => counts.has(id));
    };
    assert.ok(await until(collect, 20000), `all spans written (${counts.size} of ${sent.length})\n${pl.log}`);
    for (const id of sent) assert.equal(counts.get(id), 1, `span ${id} written once`);
    assert.ok(health.length > 0 && health.every((s) => s === 200 || s === 503), `health: ${health}`);

    const m = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const accepted = [...m.matchAll(/^otelcol_receiver_accepted_spans\{receiver="otlp"[^}]*\} (\d+)/gm)]
      .reduce((a, x) => a + Number(x[1]), 0);
    assert.ok(accepted >= 1, 'the receiver counts across workers');
    assert.match(pl.log, /reloaded .* components kept/);
  } finally {
    const r = await pl.stop(15000);
    assert.equal(r.code, 0, pl.log);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// SO_REUSEPORT must not let a second process join the port: it fails to
// start as it would without workers, and the first keeps every connection.
test('a second proflink on the same ports fails with "address already in use"', async () => {
  const [httpPort, grpcPort] = await freePorts(2);
  const yaml = `
receivers:
  otlp:
    protocols:
      http: { endpoint: 127.0.0.1:${httpPort} }
      grpc: { endpoint: 127.0.0.1:${grpcPort} }
exporters:
  nop:
service:
  workers: 2
  telemetry: { metrics: { address: "" } }
  pipelines:
    traces: { receivers: [otlp], exporters: [nop] }
`;
  const first = await startProflink(yaml, { ports: [httpPort, grpcPort] });
  try {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-workers-'));
    const file = path.join(dir, 'second.yaml');
    fs.writeFileSync(file, yaml);
    const { spawnSync } = await import('node:child_process');
    const second = spawnSync(BIN, ['--config', file], { encoding: 'utf8', timeout: 10000 });
    assert.equal(second.status, 1, `second instance: status ${second.status}, ${second.stderr}`);
    assert.match(second.stderr, /address already in use/);
  } finally {
    const r = await first.stop();
    assert.equal(r.code, 0, first.log);
  }
});

// Exporters encode on the workers: a stop right after the last answer still
// delivers every acknowledged span, each once, through otlphttp with gzip.
// End to end only: encodings are quick, so most are done before the SIGTERM
// arrives; that the pending count includes those still running (what makes
// the drain wait for them) is asserted in tests/test_workers.c.
test('SIGTERM right after the last answer: otlphttp delivers every span encoded on the workers', async () => {
  const { httpBackend, postTraces, TraceRequest } = await import('./lib/proflink.mjs');
  const crypto = await import('node:crypto');
  const backend = await httpBackend();
  const [httpPort] = await freePorts(1);
  const p = await startProflink(`
receivers:
  otlp:
    protocols:
      http: { endpoint: 127.0.0.1:${httpPort} }
exporters:
  otlphttp: { endpoint: http://127.0.0.1:${backend.port}, compression: gzip }
service:
  workers: 2
  pipelines:
    traces: { receivers: [otlp], exporters: [otlphttp] }
`, { ports: [httpPort] });
  const REQUESTS = 40;
  const SPANS = 500;
  const bodies = [];
  for (let r = 0; r < REQUESTS; r++) {
    const traceId = crypto.randomBytes(16);
    const spans = [];
    for (let i = 0; i < SPANS; i++) {
      spans.push({ traceId, spanId: crypto.randomBytes(8), name: `op${i % 7}`, kind: 2,
        startTimeUnixNano: 1700000000000000000, endTimeUnixNano: 1700000000100000000,
        attributes: [{ key: 'i', value: { intValue: i } }] });
    }
    bodies.push(Buffer.from(TraceRequest.encode(TraceRequest.fromObject({
      resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'w' } }] },
        scopeSpans: [{ scope: { name: 's' }, spans }] }],
    })).finish()));
  }
  try {
    const answers = await Promise.all(bodies.map((b) => postTraces(httpPort, b)));
    assert.deepEqual([...new Set(answers.map((a) => a.status))], [200]);
  } finally {
    const r = await p.stop();
    assert.equal(r.code, 0, p.log);
  }
  await backend.stop();
  assert.equal(backend.counts.size, REQUESTS * SPANS, p.log);
  assert.equal(backend.duplicates(), 0);
  assert.ok(!/dropp/.test(p.log), p.log);
});
