// correlation_spill.test.mjs: the correlation processor's `storage` through
// the real binary. With a small max_bytes, held span batches spill to the
// storage directory (files 0600) instead of leaving early; a profile that
// comes later links its samples to spilled spans (span_name on the samples,
// pyroscope.profile.id on the spans read back), and every span comes out
// once with the directory empty afterwards. Then files left by a killed
// process are passed on by the next one.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build/proflink node --test correlation_spill.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { freePort, readJsonLines, startProflink, until } from './lib/common.mjs';

const running = new Set();
after(() => { for (const pl of running) pl.child.kill('SIGKILL'); });

const SERVICE = 'spill-svc';
const BATCHES = 12;
const PER_BATCH = 100;
const hex = (n, len) => n.toString(16).padStart(len, '0');
const traceId = (b) => hex(0x5000 + b, 32);
const spanId = (b, k) => hex(0x100000 + b * 1000 + k, 16);

async function post(port, p, body) {
  const r = await fetch(`http://127.0.0.1:${port}${p}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  assert.equal(r.status, 200, await r.text());
}

function spansBatch(b, t0) {
  const spans = [];
  for (let k = 0; k < PER_BATCH; k++)
    spans.push({
      traceId: traceId(b), spanId: spanId(b, k), parentSpanId: k ? spanId(b, 0) : '',
      name: k ? `child ${k}` : 'GET /spill', kind: k ? 1 : 2,
      startTimeUnixNano: String(t0 + BigInt(k) * 1000000n),
      endTimeUnixNano: String(t0 + BigInt(k) * 1000000n + 500000n),
      attributes: [{ key: 'http.route', value: { stringValue: '/spill' } },
        { key: 'padding', value: { stringValue: 'x'.repeat(400) } }],
    });
  return {
    resourceSpans: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: SERVICE } }] },
      scopeSpans: [{ scope: { name: 'spill' }, spans }],
    }],
  };
}

// A CPU profile of `service` covering [t0, t1]; one sample per link.
function profile(service, t0, t1, links) {
  return {
    resourceProfiles: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] },
      scopeProfiles: [{
        profiles: [{
          sampleType: { typeStrindex: 1, unitStrindex: 2 },
          samples: links.length
            ? links.map((l, i) => ({ stackIndex: 1, values: [10000000], linkIndex: i + 1,
              timestampsUnixNano: [String(l.ts)] }))
            : [{ stackIndex: 1, values: [10000000] }],
          timeUnixNano: String(t1), durationNano: String(t1 - t0),
          periodType: { typeStrindex: 1, unitStrindex: 2 }, period: '10000000',
        }],
      }],
    }],
    dictionary: {
      mappingTable: [{}],
      locationTable: [{}, { lines: [{ functionIndex: 1 }] }],
      functionTable: [{}, { nameStrindex: 3 }],
      linkTable: [{}, ...links.map((l) => ({ traceId: l.traceId, spanId: l.spanId }))],
      stringTable: ['', 'cpu', 'nanoseconds', 'spillWork'],
      attributeTable: [{}],
      stackTable: [{}, { locationIndices: [1] }],
    },
  };
}

function config(port, metricsPort, dir) {
  return [
    'receivers:',
    '  otlp:',
    '    protocols:',
    `      http: { endpoint: "127.0.0.1:${port}" }`,
    'processors:',
    '  correlation:',
    '    max_bytes: 400KiB',
    // Sized for decoded batches: compressed ones would all fit (the packed
    // spill path is tested in tests/test_correlation_spill.c).
    '    hold_compression: none',
    `    storage: "${path.join(dir, 'spill')}"`,
    '    span_attributes: [http.route]',
    'exporters:',
    `  file/traces: { path: "${path.join(dir, 'traces.jsonl')}", format: json }`,
    `  file/profiles: { path: "${path.join(dir, 'profiles.jsonl')}", format: json }`,
    'service:',
    '  telemetry:',
    `    metrics: { address: "127.0.0.1:${metricsPort}" }`,
    '  pipelines:',
    '    traces: { receivers: [otlp], processors: [correlation], exporters: [file/traces] }',
    '    profiles: { receivers: [otlp], processors: [correlation], exporters: [file/profiles] }',
    '',
  ].join('\n');
}

const spillFiles = (dir) => fs.readdirSync(path.join(dir, 'spill')).filter((f) => f.endsWith('.spill'));

function exportedSpans(dir) {
  const spans = new Map();
  let n = 0;
  for (const req of readJsonLines(path.join(dir, 'traces.jsonl')))
    for (const rs of req.resourceSpans ?? [])
      for (const ss of rs.scopeSpans ?? [])
        for (const s of ss.spans ?? []) { spans.set(s.spanId, s); n++; }
  return { spans, n };
}

async function counter(metricsPort, name) {
  const m = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((x) => x.text());
  return Number((m.match(new RegExp(
    `^proflink_processor_${name}_total\\{processor="correlation"\\} (\\d+)`, 'm')) ?? [])[1] ?? NaN);
}

test('held span batches spill to storage, link later samples, and come back enriched', { timeout: 60000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-spill-'));
  const port = await freePort();
  const metricsPort = await freePort();
  const pl = await startProflink(config(port, metricsPort, dir), { dir, ports: [port] });
  running.add(pl);
  const now = BigInt(Date.now()) * 1000000n;
  // Profiles are flowing (another service): span batches are indexed.
  await post(port, '/v1development/profiles', profile('other', now - 10000000000n, now, []));
  for (let b = 0; b < BATCHES; b++)
    await post(port, '/v1/traces', spansBatch(b, now - 5000000000n + BigInt(b) * 200000000n));
  assert.ok(await until(async () => (await counter(metricsPort, 'spilled_batches')) >= BATCHES / 2, 10000),
    `batches spilled (log: ${pl.log})`);
  assert.equal(await counter(metricsPort, 'released_early_spans'), 0);
  assert.equal(exportedSpans(dir).n, 0, 'nothing left yet');
  const files = spillFiles(dir);
  assert.ok(files.length >= BATCHES / 2, files.join(' '));
  for (const f of files)
    assert.equal(fs.statSync(path.join(dir, 'spill', f)).mode & 0o777, 0o600);

  // The service's upload: a sample for the root and one child of the
  // oldest batches (surely spilled), covering every span.
  const links = [];
  for (let b = 0; b < 3; b++)
    for (const k of [0, 7])
      links.push({ traceId: traceId(b), spanId: spanId(b, k),
        ts: now - 5000000000n + BigInt(b) * 200000000n + BigInt(k) * 1000000n + 100000n });
  await post(port, '/v1development/profiles', profile(SERVICE, now - 6000000000n, now + 2000000000n, links));
  assert.ok(await until(() => exportedSpans(dir).n >= BATCHES * PER_BATCH, 15000),
    `every span left on coverage (${exportedSpans(dir).n}; log: ${pl.log})`);
  assert.equal(await counter(metricsPort, 'linked_samples'), links.length);
  assert.equal(await counter(metricsPort, 'late_samples'), 0);
  assert.equal(await counter(metricsPort, 'spill_failures'), 0);
  const { spans, n } = exportedSpans(dir);
  assert.equal(n, BATCHES * PER_BATCH, 'each span once');
  for (const l of links) {
    const s = spans.get(l.spanId);
    const a = Object.fromEntries((s.attributes ?? []).map((kv) => [kv.key, kv.value]));
    assert.equal(a['pyroscope.profile.id']?.stringValue, l.spanId, JSON.stringify(a));
    assert.equal(Number(a['profile.cpu_time_ns']?.intValue), 10000000);
  }
  // The samples carry their spans' context.
  const req = readJsonLines(path.join(dir, 'profiles.jsonl')).at(-1);
  const strings = req.dictionary.stringTable;
  const names = [];
  for (const s of req.resourceProfiles[0].scopeProfiles[0].profiles[0].samples)
    for (const i of s.attributeIndices ?? []) {
      const at = req.dictionary.attributeTable[i];
      if (strings[at.keyStrindex] === 'span_name') names.push(at.value.stringValue);
    }
  assert.deepEqual(names.sort(), ['GET /spill', 'GET /spill', 'GET /spill', 'child 7', 'child 7', 'child 7']);
  assert.deepEqual(spillFiles(dir), [], 'files deleted once handed on');
  assert.equal((await pl.stop()).code, 0, pl.log);
  running.delete(pl);
  fs.rmSync(dir, { recursive: true, force: true });
});

test('spill files of a killed process are passed on by the next one', { timeout: 60000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-spill-'));
  const port = await freePort();
  const metricsPort = await freePort();
  const yaml = config(port, metricsPort, dir);
  let pl = await startProflink(yaml, { dir, ports: [port] });
  running.add(pl);
  const now = BigInt(Date.now()) * 1000000n;
  await post(port, '/v1development/profiles', profile('other', now - 10000000000n, now, []));
  for (let b = 0; b < BATCHES; b++)
    await post(port, '/v1/traces', spansBatch(b, now + BigInt(b) * 200000000n));
  assert.ok(await until(async () => (await counter(metricsPort, 'spilled_batches')) >= BATCHES / 2, 10000),
    pl.log);
  const spilled = await counter(metricsPort, 'spilled_batches');
  await pl.kill9();
  running.delete(pl);
  assert.equal(spillFiles(dir).length, spilled);

  pl = await startProflink(yaml, { dir, ports: [port] });
  running.add(pl);
  await post(port, '/v1/traces', spansBatch(BATCHES, now)); // brings the next consumer
  assert.ok(await until(() => exportedSpans(dir).n >= spilled * PER_BATCH, 10000),
    `replayed (${exportedSpans(dir).n}; log: ${pl.log})`);
  assert.equal(exportedSpans(dir).n, spilled * PER_BATCH);
  assert.deepEqual(spillFiles(dir), []);
  assert.equal((await pl.stop()).code, 0, pl.log);
  running.delete(pl);
  // Shutdown flushed the batch held by the second process too.
  assert.equal(exportedSpans(dir).n, (spilled + 1) * PER_BATCH);
  fs.rmSync(dir, { recursive: true, force: true });
});
