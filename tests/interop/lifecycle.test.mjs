// lifecycle.test.mjs: proflink's start, drain, stop and reload with the
// OpenTelemetry JS SDK's OTLP exporter as the sender.
//
// The pipeline holds data in a batch processor (timeout 10s) and writes to a
// file exporter, so that what reaches the file on SIGTERM or SIGHUP is only
// what the drain flushed. Every span the SDK saw acknowledged must be in the
// file: nothing accepted is lost.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-xxx/proflink node --test lifecycle.test.mjs

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';

import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BIN, exportSpans, freePort, tracerProvider, until as poll } from './lib/common.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-lifecycle-'));
const children = new Set();

after(() => {
  for (const c of children) c.kill('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

const until = (cond, ms = 10000) => poll(cond, ms, 25);

async function healthStatus(port) {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/health`);
    return res.status;
  } catch {
    return 0;
  }
}

function config({ httpPort, metricsPort, out, verbosity = 'basic', broken = false, batchTimeout = '10s' }) {
  if (broken) return 'receivers: {otlp: }\nexporters: {file: {path: [\n';
  return `
receivers:
  otlp:
    protocols:
      http: { endpoint: 127.0.0.1:${httpPort} }
processors:
  batch:
    timeout: ${batchTimeout}
exporters:
  file:
    path: ${out}
  debug:
    verbosity: ${verbosity}
service:
  shutdown_timeout: 5s
  telemetry:
    logs: { level: info }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [file, debug]
`;
}

async function startProflink(name, settings) {
  const file = path.join(tmp, `${name}.yaml`);
  fs.writeFileSync(file, config(settings));
  const proc = spawn(BIN, ['--config', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.add(proc);
  proc.log = '';
  proc.stderr.on('data', (d) => { proc.log += d; });
  proc.exited = new Promise((resolve) => proc.once('exit', (code, signal) => {
    children.delete(proc);
    resolve({ code, signal });
  }));
  const up = await until(async () => (await healthStatus(settings.metricsPort)) === 200);
  assert.ok(up, `proflink did not become healthy:\n${proc.log}`);
  return { proc, file };
}

// Spans named `${tag}-0` .. `${tag}-(n-1)` from the SDK.
function makeSpans(tag, n) {
  const mem = new InMemorySpanExporter();
  const provider = tracerProvider('lifecycle', mem);
  const tracer = provider.getTracer('lifecycle-test');
  for (let i = 0; i < n; i++) tracer.startSpan(`${tag}-${i}`).end();
  return mem.getFinishedSpans();
}

// Span names found in the file exporter's OTLP/JSON lines.
function namesInFile(file) {
  const names = new Set();
  if (!fs.existsSync(file)) return names;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const req = JSON.parse(line);
    for (const rs of req.resourceSpans || [])
      for (const ss of rs.scopeSpans || [])
        for (const s of ss.spans || []) names.add(s.name);
  }
  return names;
}

test('SIGTERM while the SDK is sending: exit 0 and every acknowledged span is written', { timeout: 60000 }, async () => {
  const httpPort = await freePort();
  const metricsPort = await freePort();
  const out = path.join(tmp, 'term.jsonl');
  const { proc } = await startProflink('term', { httpPort, metricsPort, out });
  const exporter = new ProtoExporter({
    url: `http://127.0.0.1:${httpPort}/v1/traces`,
    timeoutMillis: 2000,
  });

  const acked = [];
  let stop = false;
  let batches = 0;
  const sender = (async () => {
    while (!stop) {
      const tag = `t${batches++}`;
      const result = await exportSpans(exporter, makeSpans(tag, 5));
      if (result.code === 0) for (let i = 0; i < 5; i++) acked.push(`${tag}-${i}`);
      else break; // the receiver has closed: proflink is stopping
    }
  })();
  await until(() => acked.length >= 50, 10000);
  proc.kill('SIGTERM');
  const { code, signal } = await proc.exited;
  stop = true;
  await sender;
  await exporter.shutdown().catch(() => {});

  assert.equal(signal, null, `proflink died of ${signal}:\n${proc.log}`);
  assert.equal(code, 0, proc.log);
  assert.ok(acked.length >= 50, `too little traffic before SIGTERM (${acked.length} spans)`);
  const written = namesInFile(out);
  const lost = acked.filter((n) => !written.has(n));
  assert.deepEqual(lost, [], `${lost.length} of ${acked.length} acknowledged spans missing`);
});

test('SIGHUP: a broken file keeps the running pipelines; a good one replaces them', { timeout: 60000 }, async () => {
  const httpPort = await freePort();
  const metricsPort = await freePort();
  const out1 = path.join(tmp, 'hup-1.jsonl');
  const out2 = path.join(tmp, 'hup-2.jsonl');
  const { proc, file } = await startProflink('hup', { httpPort, metricsPort, out: out1 });
  const exporter = new ProtoExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces`, timeoutMillis: 2000 });

  assert.equal((await exportSpans(exporter, makeSpans('before', 3))).code, 0);

  fs.writeFileSync(file, config({ broken: true }));
  proc.kill('SIGHUP');
  assert.ok(await until(() => proc.log.includes('keeping the running configuration')), proc.log);
  assert.match(proc.log, /hup\.yaml:3:1: YAML syntax error/);
  assert.equal(proc.exitCode, null, 'proflink must keep running');
  assert.equal(await healthStatus(metricsPort), 200);
  assert.equal((await exportSpans(exporter, makeSpans('during', 3))).code, 0);

  // every component but the receiver changes: they are replaced (the
  // unchanged receiver is kept, on its port)
  fs.writeFileSync(file, config({ httpPort, metricsPort, out: out2, verbosity: 'normal', batchTimeout: '9s' }));
  proc.kill('SIGHUP');
  assert.ok(await until(() => proc.log.includes('reloaded')), proc.log);
  assert.match(proc.log, /1 components kept as they were, 3 replaced/);
  // the replaced batch processor flushed into the old file exporter on the way out
  const first = namesInFile(out1);
  for (const n of ['before-0', 'before-2', 'during-0', 'during-2'])
    assert.ok(first.has(n), `${n} missing from the first file`);
  // the new pipelines listen on the same port and write the new file
  assert.ok(await until(async () => (await exportSpans(exporter, makeSpans('after', 3))).code === 0));
  proc.kill('SIGTERM');
  const { code } = await proc.exited;
  await exporter.shutdown().catch(() => {});
  assert.equal(code, 0, proc.log);
  const second = namesInFile(out2);
  assert.ok(second.has('after-0') && second.has('after-2'), 'new spans missing from the new file');
  assert.ok(!second.has('before-0'), 'old spans must not be written twice');
});
