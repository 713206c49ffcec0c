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
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';

import protobuf from 'protobufjs';
import { Profile } from 'pprof-format';
import Pyroscope from '@pyroscope/nodejs';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const BIN = process.env.PROFLINK_BIN
  ? path.resolve(process.env.PROFLINK_BIN)
  : path.join(repo, 'build', 'proflink');

const protoRoot = new protobuf.Root();
protoRoot.resolvePath = (origin, target) =>
  path.isAbsolute(target) ? target : path.join(repo, 'proto', target);
protoRoot.loadSync(['push/v1/push.proto']);
const PushRequest = protoRoot.lookupType('push.v1.PushRequest');

// ---- helpers ------------------------------------------------------------------
async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

async function waitListening(port, ms = 10000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => { c.destroy(); resolve(true); });
      c.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`port ${port} never listened`);
}

async function until(cond, ms = 15000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
  });
}

function readFileLines(file) {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
}


let proc, tmp, sink, stderr = '';
let otlpPort, pyroPort, sinkPort, metricsPort;
const pushes = [];

before(async () => {
  [otlpPort, pyroPort, sinkPort, metricsPort] =
    await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-pyro-corr-'));
  sink = http.createServer(async (req, res) => {
    pushes.push({ url: req.url, headers: req.headers, body: await readBody(req) });
    res.writeHead(200, { 'content-type': 'application/proto' });
    res.end();
  });
  await new Promise((r) => sink.listen(sinkPort, '127.0.0.1', r));
  fs.writeFileSync(path.join(tmp, 'collector.yaml'), `
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${otlpPort}
  pyroscope:
    endpoint: 127.0.0.1:${pyroPort}
processors:
  correlation:
    window: 3s
exporters:
  file:
    path: ${path.join(tmp, 'out.jsonl')}
  pyroscope:
    endpoint: http://127.0.0.1:${sinkPort}
service:
  telemetry:
    logs: { level: warn }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    traces: { receivers: [otlp], processors: [correlation], exporters: [file] }
    profiles: { receivers: [pyroscope], processors: [correlation], exporters: [pyroscope] }
`);
  proc = spawn(BIN, ['--config', path.join(tmp, 'collector.yaml')], { stdio: ['ignore', 'ignore', 'pipe'] });
  proc.stderr.on('data', (d) => { stderr += d; });
  await waitListening(otlpPort);
  await waitListening(pyroPort);
});

after(async () => {
  if (proc && proc.exitCode === null) {
    proc.kill('SIGTERM');
    await new Promise((r) => { proc.once('exit', r); setTimeout(r, 5000); });
  }
  sink?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  if (stderr.trim()) console.log('proflink stderr:\n' + stderr);
});

function burnCpuInRequest(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) for (let i = 0; i < 10000; i++) x = (x * 31 + i) % 1000003;
  return x;
}

test('spans get pyroscope.profile.id and pushed samples carry span_id and span_name', async () => {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'corr-app' }),
    spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({
      url: `http://127.0.0.1:${otlpPort}/v1/traces` }))],
  });
  const tracer = provider.getTracer('interop');
  Pyroscope.init({ serverAddress: `http://127.0.0.1:${pyroPort}`, appName: 'corr-app',
    flushIntervalMs: 1000, wall: { collectCpuTime: true } });
  Pyroscope.start();
  const spans = [];
  for (let i = 0; i < 3; i++) {
    const span = tracer.startSpan(`GET /item/${i}`);
    spans.push(span.spanContext().spanId);
    Pyroscope.wrapWithLabels({ span_id: span.spanContext().spanId }, () => burnCpuInRequest(400));
    span.end();
    await new Promise((r) => setTimeout(r, 20));
  }
  await Pyroscope.stop();
  await provider.forceFlush();
  await provider.shutdown();

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
