// processors.test.mjs: spans from the OpenTelemetry JavaScript SDK go
// through a pipeline of standard processors in the real binary:
//   otlp -> memory_limiter -> resource -> attributes -> redaction -> batch -> file
// and come out of the file transformed: resource attribute inserted, e-mail
// hashed (SHA-256 hex), URL parts extracted, card numbers masked, and the
// requests merged into one batch. A second instance with a 1 MiB memory limit
// answers 503 (retryable) to the same request. A profile uploaded by the
// Pyroscope Node.js SDK (saved fixture) goes through redaction, attributes
// and batch: function and file names matching the patterns are gone from the
// whole string table, every sample gets the inserted label, two uploads are
// merged into one re-indexed request, and totals per sample type, per leaf
// function and per span are those pprof-format computes from the upload.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test processors.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';

import { Profile } from 'pprof-format';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import {
  FIXTURES, freePort, mapObj, otlpProfileTotals, request, startProflink as launch, tracerProvider,
  until,
} from './lib/common.mjs';

const procs = [];
let tmp;

async function startProflink(name, processorsYaml, pipelineProcessors, outFile,
  signal = 'traces') {
  const httpPort = await freePort();
  const pyroPort = await freePort();
  const metricsPort = await freePort();
  const config = `
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${httpPort}
  pyroscope:
    endpoint: 127.0.0.1:${pyroPort}
processors:
${processorsYaml}
exporters:
  file:
    path: ${outFile}
service:
  telemetry:
    logs: { level: error }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    ${signal}: { receivers: [${signal === 'profiles' ? 'pyroscope' : 'otlp'}], processors: [${pipelineProcessors}], exporters: [file] }
`;
  const proc = await launch(config, {
    dir: fs.mkdtempSync(path.join(tmp, `${name}-`)),
    ports: [signal === 'profiles' ? pyroPort : httpPort],
  });
  procs.push(proc);
  return { proc, httpPort, pyroPort };
}

function makeSpans(service, n, offset) {
  const mem = new InMemorySpanExporter();
  const provider = tracerProvider(service, mem);
  const tracer = provider.getTracer('processors-test', '1.0.0');
  for (let i = 0; i < n; i++) {
    const s = tracer.startSpan(`GET /cart/${offset + i}`, {
      kind: SpanKind.SERVER,
      startTime: 1_700_000_000_000 + i,
      attributes: {
        'user.email': `user${offset + i}@example.com`,
        'http.url': `https://shop.example.com:8443/cart/${offset + i}`,
        'payment.note': 'paid with 4111 1111 1111 1111, thanks',
        'retry.count': '3',
        'tmp.debug': 'x',
      },
    });
    s.end(1_700_000_000_010 + i);
  }
  return mem.getFinishedSpans();
}

const attr = (attrs, key) => attrs.find((a) => a.key === key)?.value;

before(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-processors-'));
});

after(async () => {
  for (const proc of procs) await proc.stop(5000);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

test('a chain of standard processors transforms and merges SDK spans', async () => {
  const out = path.join(tmp, 'chain.jsonl');
  const { httpPort } = await startProflink('chain', `
  memory_limiter: { limit_mib: 100000, check_interval: 1s }
  resource:
    attributes:
      - { key: deployment.environment, action: insert, value: prod }
  attributes:
    actions:
      - { key: user.email, action: hash }
      - key: http.url
        action: extract
        pattern: '^(?P<url_scheme>\\w+)://(?P<url_host>[^:/]+)(?::(?P<url_port>\\d+))?'
      - { key: retry.count, action: convert, converted_type: int }
      - { pattern: '^tmp\\.', action: delete }
  redaction:
    allow_all_keys: true
    blocked_values: ['\\b\\d{4}[ -]?\\d{4}[ -]?\\d{4}[ -]?\\d{4}\\b']
  batch:
    send_batch_size: 6
    timeout: 10s
`, 'memory_limiter, resource, attributes, redaction, batch', out);

  const exporter = new OTLPTraceExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces` });
  for (let k = 0; k < 3; k++) {
    const res = await new Promise((resolve) => exporter.export(makeSpans('shop', 2, 2 * k), resolve));
    assert.equal(res.code, 0, `export ${k}: ${res.error}`);
  }
  const lines = () => (fs.existsSync(out)
    ? fs.readFileSync(out, 'utf8').split('\n').filter((l) => l) : []);
  assert.ok(await until(() => lines().length >= 1), 'nothing written');
  const records = lines().map((l) => JSON.parse(l));
  assert.equal(records.length, 1, 'three requests of 2 spans merged into one batch of 6');
  const spans = records[0].resourceSpans.flatMap((rs) => {
    assert.equal(attr(rs.resource.attributes, 'deployment.environment').stringValue, 'prod');
    assert.equal(attr(rs.resource.attributes, 'service.name').stringValue, 'shop');
    return rs.scopeSpans.flatMap((ss) => ss.spans);
  });
  assert.equal(spans.length, 6);
  for (const s of spans) {
    const n = Number(s.name.split('/').pop());
    const want = crypto.createHash('sha256').update(`user${n}@example.com`).digest('hex');
    assert.equal(attr(s.attributes, 'user.email').stringValue, want);
    assert.equal(attr(s.attributes, 'url_scheme').stringValue, 'https');
    assert.equal(attr(s.attributes, 'url_host').stringValue, 'shop.example.com');
    assert.equal(attr(s.attributes, 'url_port').stringValue, '8443');
    assert.equal(attr(s.attributes, 'payment.note').stringValue, 'paid with ****, thanks');
    assert.equal(String(attr(s.attributes, 'retry.count').intValue), '3');
    assert.equal(attr(s.attributes, 'tmp.debug'), undefined);
  }
});

test('memory_limiter above its limit answers 503 and the data is not written', async () => {
  const out = path.join(tmp, 'limited.jsonl');
  const { httpPort } = await startProflink('limited', `
  memory_limiter: { limit_mib: 1, check_interval: 100ms }
`, 'memory_limiter', out);
  const body = ProtobufTraceSerializer.serializeRequest(makeSpans('shop', 1, 0));
  const res = await fetch(`http://127.0.0.1:${httpPort}/v1/traces`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-protobuf' },
    body,
  });
  assert.equal(res.status, 503);
  await res.arrayBuffer();
  await new Promise((r) => setTimeout(r, 200));
  assert.ok(!fs.existsSync(out) || fs.readFileSync(out, 'utf8') === '');
});

// ---- profiles ------------------------------------------------------------------

const FIXTURE = path.join(FIXTURES, 'nodejs_wall.pprof.gz');
const big = (v) => (typeof v === 'bigint' ? v : BigInt(v ?? 0));
const add = (m, k, v) => m.set(k, (m.get(k) ?? 0n) + v);

// Totals of the upload as pprof-format reads it, with function names passed
// through `rename` (what redaction should have done).
function pprofTotals(buf, rename) {
  const p = Profile.decode(zlib.gunzipSync(buf));
  const str = (i) => p.stringTable.strings[Number(i)] ?? '';
  const fnName = new Map(p.function.map((f) => [String(f.id), rename(str(f.name))]));
  const locFn = new Map(p.location.map((l) => [String(l.id),
    l.line.length ? fnName.get(String(l.line[0].functionId)) : '']));
  const types = p.sampleType.map((t) => `${str(t.type)}/${str(t.unit)}`);
  const out = { byType: new Map(), byFn: new Map(), bySpan: new Map() };
  for (const s of p.sample) {
    const leaf = s.locationId.length ? locFn.get(String(s.locationId[0])) : '';
    let span = '';
    for (const l of s.label) if (str(l.key) === 'span_id') span = str(l.str);
    s.value.forEach((v, i) => {
      add(out.byType, types[i], big(v));
      add(out.byFn, `${types[i]}|${leaf}`, big(v));
      if (span) add(out.bySpan, `${types[i]}|${span}`, big(v));
    });
  }
  return out;
}

const post = (port, p, body) => request(port, p, { 'content-type': 'application/octet-stream' }, body);

test('Pyroscope SDK profiles: function and file names redacted, labels added, uploads merged', async () => {
  assert.ok(fs.existsSync(FIXTURE), `fixture ${FIXTURE}`);
  const out = path.join(tmp, 'profiles.jsonl');
  const { pyroPort } = await startProflink('profiles', `
  redaction:
    allow_all_keys: true
    functions: ['burnCpuForSpan']
    files: ['^/work/']
  attributes:
    actions:
      - { key: env, action: insert, value: prod }
  batch:
    send_batch_size: 100000
    timeout: 300ms
`, 'redaction, attributes, batch', out, 'profiles');
  const body = fs.readFileSync(FIXTURE);
  for (let i = 0; i < 2; i++) {
    const r = await post(pyroPort, '/ingest?name=fixture-app&from=1700000000&until=1700000010&format=pprof&spyName=nodespy', body);
    assert.equal(r.status, 200, r.body.toString());
  }
  const lines = () => (fs.existsSync(out)
    ? fs.readFileSync(out, 'utf8').split('\n').filter((l) => l) : []);
  assert.ok(await until(() => lines().length >= 1), 'nothing written');
  await new Promise((r) => setTimeout(r, 500));
  const reqs = lines().map((l) => JSON.parse(l));
  assert.equal(reqs.length, 1, 'both uploads in one merged request');
  const req = reqs[0];
  for (const s of req.dictionary.stringTable) {
    assert.ok(!s.includes('burnCpuForSpan'), `string table still holds ${s}`);
    assert.ok(!s.startsWith('/work/'), `string table still holds ${s}`);
  }
  const rename = (n) => (n.includes('burnCpuForSpan') ? '[REDACTED]' : n);
  const one = pprofTotals(body, rename);
  const twice = (m) => new Map([...m].map(([k, v]) => [k, 2n * v]));
  const got = otlpProfileTotals([req]);
  assert.deepEqual(mapObj(got.byType), mapObj(twice(one.byType)));
  assert.deepEqual(mapObj(got.byFn), mapObj(twice(one.byFn)));
  assert.deepEqual(mapObj(got.bySpan), mapObj(twice(one.bySpan)));
  assert.ok([...got.byFn.keys()].some((k) => k.endsWith('|[REDACTED]')));
  const labels = got.samples.map((x) => x.labels);
  assert.ok(labels.length > 0 && labels.every((l) => l.env === 'prod'));
});
