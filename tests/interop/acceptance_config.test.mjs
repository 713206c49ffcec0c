// acceptance_config.test.mjs: Collector-style configuration files as users
// copy them: `protocols: {grpc:, http:}` with null values, the
// `health_check` extension, `${env:VAR}`
// substitution (with and without defaults), `tls: {insecure: true}`,
// `headers: {authorization: ...}` reaching the backend, `compression:
// none|gzip|zstd`, and `batch` + `memory_limiter` in the processor chain.
// The SDK sends; the backends (grpc-js, node http) check what arrives.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-xxx/proflink node --test acceptance_config.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import {
  BIN, freePorts, startProflink, waitFor, grpcBackend, httpBackend, canonical, canConnect,
} from './lib/proflink.mjs';

function sdkSpans(service, n) {
  const mem = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': service }), spanProcessors: [new SimpleSpanProcessor(mem)] });
  const tracer = provider.getTracer('config-test', '1.0');
  for (let i = 0; i < n; i++) {
    const s = tracer.startSpan(`cfg-${i}`, { attributes: { i, ok: true, r: 0.5, s: 'x' } });
    s.addEvent('ev', { a: 1 });
    s.end();
  }
  return mem.getFinishedSpans();
}

test('null protocols (defaults) validate; env substitution; headers; gzip/zstd/none; batch + memory_limiter', { timeout: 60000 }, async () => {
  // 1. `grpc:` and `http:` with null values mean "enabled, defaults".
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-acc-cfg-'));
  try {
    const nullFile = path.join(dir, 'null.yaml');
    fs.writeFileSync(nullFile, [
      'receivers:', '  otlp:', '    protocols:', '      grpc:', '      http:',
      'exporters:', '  debug:',
      'extensions:', '  health_check:',
      'service:', '  extensions: [health_check]', '  pipelines:', '    traces:', '      receivers: [otlp]', '      exporters: [debug]', '',
    ].join('\n'));
    execFileSync(BIN, ['validate', '--config', nullFile], { stdio: 'pipe' });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }

  // 2. A running file built like the Collector's docs, with env vars.
  const grpcGz = await grpcBackend();
  const grpcNone = await grpcBackend();
  const httpZstd = await httpBackend();
  const httpGz = await httpBackend();
  const httpNone = await httpBackend();
  const [grpcPort, httpPort, metricsPort, healthPort] = await freePorts(4);
  const env = {
    ACC_GRPC_ENDPOINT: `127.0.0.1:${grpcPort}`,
    ACC_HTTP_PORT: String(httpPort),
    ACC_TOKEN: 'Bearer s3cr3t',
    ACC_TEMPO: `127.0.0.1:${grpcGz.port}`,
  };
  const pl = await startProflink(`
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: \${env:ACC_GRPC_ENDPOINT}
      http:
        endpoint: 127.0.0.1:\${ACC_HTTP_PORT}
processors:
  memory_limiter:
    check_interval: 1s
    limit_mib: 4000
    spike_limit_mib: 800
  batch:
    send_batch_size: 50
    timeout: 200ms
exporters:
  otlp/tempo:
    endpoint: \${env:ACC_TEMPO}
    tls:
      insecure: true
    headers:
      authorization: \${env:ACC_TOKEN}
      X-Scope-OrgID: \${env:ACC_UNSET_TENANT:-tenant-a}
  otlp/plain:
    endpoint: 127.0.0.1:${grpcNone.port}
    compression: none
    tls: { insecure: true }
  otlphttp/zstd:
    endpoint: http://127.0.0.1:${httpZstd.port}
    compression: zstd
    headers: { authorization: "\${env:ACC_TOKEN}" }
  otlphttp/gzip:
    endpoint: http://127.0.0.1:${httpGz.port}
    compression: gzip
  otlphttp/none:
    endpoint: http://127.0.0.1:${httpNone.port}
    compression: none
extensions:
  health_check:
    endpoint: 127.0.0.1:${healthPort}
    path: /health/status
service:
  extensions: [health_check]
  telemetry:
    logs: { level: warn }
    metrics: { address: "127.0.0.1:${metricsPort}" }
  pipelines:
    traces:
      receivers: [otlp]
      processors: [memory_limiter, batch]
      exporters: [otlp/tempo, otlp/plain, otlphttp/zstd, otlphttp/gzip, otlphttp/none]
`, { ports: [grpcPort, httpPort, healthPort], env });
  const backends = { grpcGz, grpcNone, httpZstd, httpGz, httpNone };
  try {
    // the Collector's health_check extension, as copied configs list it
    let hc = await fetch(`http://127.0.0.1:${healthPort}/health/status`);
    assert.equal(hc.status, 200);
    assert.equal((await hc.json()).status, 'Server available');
    hc = await fetch(`http://127.0.0.1:${healthPort}/other`);
    assert.equal(hc.status, 404);
    // a reload (same file) keeps it answering
    pl.child.kill('SIGHUP');
    await waitFor(async () => /proflink_config_reloads_total\{result="success"\} 1/.test(
      await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()), 10000, `reload (${pl.log})`);
    await waitFor(async () => (await fetch(`http://127.0.0.1:${healthPort}/health/status`).catch(() => ({ status: 0 }))).status === 200,
      5000, `health after reload (${pl.log})`);
    const a = sdkSpans('cfg-grpc', 30);
    const b = sdkSpans('cfg-http', 30);
    const g = new GrpcExporter({ url: `http://127.0.0.1:${grpcPort}` });
    const h = new ProtoExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces` });
    assert.equal((await new Promise((r) => g.export(a, r))).code, 0);
    assert.equal((await new Promise((r) => h.export(b, r))).code, 0);
    await g.shutdown();
    await h.shutdown();
    const expected = canonical(Buffer.from(ProtobufTraceSerializer.serializeRequest(a)));
    canonical(Buffer.from(ProtobufTraceSerializer.serializeRequest(b)), expected);
    for (const [name, be] of Object.entries(backends)) {
      await waitFor(() => be.counts.size >= 60, 15000, `60 spans at ${name} (has ${be.counts.size}; ${pl.log})`);
      const got = be.canonical();
      for (const [id, want] of expected) assert.deepStrictEqual(got.get(id), want, `${name}: span ${want.span.name}`);
      assert.equal(be.duplicates(), 0);
      // batch merged the two requests (60 spans in fewer than 3 requests)
      assert.ok(be.requests.length <= 2, `${name}: ${be.requests.length} requests`);
    }
    const md = grpcGz.requests[0].headers;
    assert.equal(md.authorization, 'Bearer s3cr3t');
    assert.equal(md['x-scope-orgid'], 'tenant-a');
    assert.equal(httpZstd.requests[0].headers.authorization, 'Bearer s3cr3t');
    assert.equal(httpZstd.requests[0].headers['content-encoding'], 'zstd');
    assert.equal(httpGz.requests[0].headers['content-encoding'], 'gzip');
    assert.equal(httpNone.requests[0].headers['content-encoding'], undefined);
    assert.doesNotMatch(pl.log, /will retry/);
  } finally {
    const r = await pl.stop();
    await pl.cleanup();
    for (const be of Object.values(backends)) await be.stop();
    assert.deepEqual(r, { code: 0, signal: null }, pl.log);
  }
});

test('null protocols run on the default ports when they are free', { timeout: 30000 }, async (t) => {
  if ((await canConnect(4317)) || (await canConnect(4318))) { t.skip('4317/4318 in use on this machine'); return; }
  const [metricsPort] = await freePorts(1);
  const backend = await httpBackend();
  let pl;
  try {
    pl = await startProflink(`
receivers:
  otlp:
    protocols:
      grpc:
      http:
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:${backend.port}
service:
  telemetry: { metrics: { address: "127.0.0.1:${metricsPort}" } }
  pipelines:
    traces: { receivers: [otlp], exporters: [otlphttp] }
`, { ports: [4317, 4318] });
    const spans = sdkSpans('defaults', 3);
    const g = new GrpcExporter({ url: 'http://127.0.0.1:4317' });
    assert.equal((await new Promise((r) => g.export(spans, r))).code, 0);
    await g.shutdown();
    await waitFor(() => backend.counts.size === 3, 10000, 'spans via default ports');
  } catch (e) {
    // another test process took the port between the check and the start
    if (pl === undefined && /never listened|exited/.test(String(e))) { t.skip('default ports taken meanwhile'); return; }
    throw e;
  } finally {
    if (pl) { const r = await pl.stop(); await pl.cleanup(); assert.equal(r.code, 0); }
    await backend.stop();
  }
});
