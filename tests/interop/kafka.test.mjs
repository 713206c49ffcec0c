// kafka.test.mjs: the kafka exporter and receiver against librdkafka's mock
// Kafka cluster (3 brokers, run by build/tests/kafka_mock: no Kafka broker is
// packaged for Debian), with kafkajs, an independent implementation of the
// Kafka protocol, on the other side.
//
//  1. proflink (otlp receiver -> kafka exporter, partition_traces_by_id)
//     writes; kafkajs reads every record and decodes it with the OTLP
//     definitions: one trace per record, key = its trace id, on the
//     partition the Collector's default hasher picks; profiles likewise.
//  2. kafkajs writes records as the Collector's exporter does (protobuf and
//     OTLP/JSON); a proflink with the kafka receiver delivers them whole to a
//     fake OTLP backend, with the record's headers as resource attributes.
//  3. agent proflink -> bus -> gateway proflink (correlation, persistent
//     queue) -> fake backend; the gateway is killed (SIGKILL) mid-run and
//     restarted: every span and sample arrives at least once, and samples
//     carry their span's name.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build/proflink node --test kafka.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { spawn } from 'node:child_process';
import { Kafka, logLevel } from 'kafkajs';
import {
  BIN, ProfilesRequest, TraceRequest, canonical, freePort, httpBackend, sleep, startProflink,
  waitFor,
} from './lib/proflink.mjs';

const MOCK = process.env.KAFKA_MOCK_BIN || path.join(path.dirname(BIN), 'tests', 'kafka_mock');
const PARTITIONS = 4;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-kafka-'));
const cleanups = [];
let mock;
let brokers;

before(async () => {
  mock = spawn(MOCK, ['-b', '3', '-p', String(PARTITIONS), 'otlp_spans', 'otlp_profiles',
    'kjs_proto', 'kjs_json', 'bus_spans', 'bus_profiles'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise((resolve, reject) => {
    readline.createInterface({ input: mock.stdout }).once('line', resolve);
    mock.once('exit', (c) => reject(new Error(`kafka_mock exited ${c}`)));
  });
  brokers = line.trim();
  assert.equal(brokers.split(',').length, 3, `3 brokers: ${brokers}`);
});

after(async () => {
  for (const c of cleanups.reverse()) await c();
  mock?.stdin.end();
  mock?.kill('SIGTERM');
  fs.rmSync(tmp, { recursive: true, force: true });
});

const kafka = () => new Kafka({ clientId: 'kafkajs-test', brokers: brokers.split(','), logLevel: logLevel.NOTHING });

// The Collector's default partitioner for keyed records: 32-bit FNV-1a,
// read as a signed int32, remainder truncated toward zero, made positive.
function saramaPartition(key, n) {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(key)) h = Math.imul(h ^ b, 16777619) >>> 0;
  return Math.abs((h | 0) % n); // abs also turns JavaScript's -0 into 0
}

const hex = (b) => Buffer.from(b).toString('hex');

// n traces of m spans each, interleaved in one request.
function tracesRequest(n, m, service = 'kafka-test') {
  const now = BigInt(Date.now()) * 1000000n;
  const traces = [];
  const spans = [];
  for (let t = 0; t < n; t++) traces.push({ id: crypto.randomBytes(16), spans: [] });
  for (let i = 0; i < m; i++) {
    for (const tr of traces) {
      const spanId = crypto.randomBytes(8);
      tr.spans.push({ id: hex(spanId), name: `op-${i}` });
      spans.push({
        traceId: tr.id, spanId, name: `op-${i}`, kind: 2,
        startTimeUnixNano: String(now), endTimeUnixNano: String(now + 5000000n),
        attributes: [{ key: 'i', value: { intValue: i } }],
      });
    }
  }
  const obj = {
    resourceSpans: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] },
      scopeSpans: [{ scope: { name: 'kafka-test' }, spans }],
    }],
  };
  return { obj, bytes: Buffer.from(TraceRequest.encode(TraceRequest.fromObject(obj)).finish()), traces };
}

// One profile whose samples are linked to the given spans (value = 1 each).
function profilesRequest(links, service = 'kafka-test') {
  const now = BigInt(Date.now()) * 1000000n;
  const obj = {
    resourceProfiles: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] },
      scopeProfiles: [{
        profiles: [{
          sampleType: { typeStrindex: 1, unitStrindex: 2 },
          timeUnixNano: String(now), durationNano: '1000000000',
          samples: links.map((l, i) => ({ stackIndex: 1, linkIndex: i + 1, values: [1], timestampsUnixNano: [String(now)] })),
        }],
      }],
    }],
    dictionary: {
      mappingTable: [{}],
      locationTable: [{}, { lines: [{ functionIndex: 1 }] }],
      functionTable: [{}, { nameStrindex: 3 }],
      linkTable: [{}, ...links.map((l) => ({ traceId: Buffer.from(l.traceId, 'hex'), spanId: Buffer.from(l.spanId, 'hex') }))],
      stringTable: ['', 'cpu', 'nanoseconds', 'work'],
      attributeTable: [{}],
      stackTable: [{}, { locationIndices: [1] }],
    },
  };
  return Buffer.from(ProfilesRequest.encode(ProfilesRequest.fromObject(obj)).finish());
}

function post(port, p, bytes) {
  return fetch(`http://127.0.0.1:${port}${p}`, { method: 'POST', headers: { 'content-type': 'application/x-protobuf' }, body: bytes })
    .then((r) => { assert.equal(r.status, 200, `POST ${p}`); });
}

// Reads `topics` with kafkajs from the start until stop() says so.
async function readAll(topics, stop, ms = 20000) {
  const consumer = kafka().consumer({ groupId: `reader-${crypto.randomUUID()}` });
  await consumer.connect();
  for (const topic of topics) await consumer.subscribe({ topic, fromBeginning: true });
  const records = [];
  await consumer.run({ eachMessage: async ({ topic, partition, message }) => { records.push({ topic, partition, ...message }); } });
  try {
    await waitFor(() => stop(records), ms, 'records');
  } finally {
    await consumer.disconnect();
  }
  return records;
}

test('proflink writes one Collector-format record per trace, keyed and partitioned by trace id; kafkajs decodes them all', { timeout: 60000 }, async () => {
  const port = await freePort();
  const h = await startProflink(`
receivers:
  otlp:
    protocols:
      http: { endpoint: 127.0.0.1:${port} }
exporters:
  kafka:
    brokers: [${brokers}]
    partition_traces_by_id: true
    record_headers: { origin: proflink-agent }
service:
  pipelines:
    traces: { receivers: [otlp], exporters: [kafka] }
    profiles: { receivers: [otlp], exporters: [kafka] }
`, { ports: [port] });
  cleanups.push(() => h.stop());
  const req = tracesRequest(8, 5);
  await post(port, '/v1/traces', req.bytes);
  const links = req.traces.slice(0, 3).flatMap((t) => t.spans.slice(0, 2).map((s) => ({ traceId: hex(t.id), spanId: s.id })));
  await post(port, '/v1development/profiles', profilesRequest(links));

  const records = await readAll(['otlp_spans', 'otlp_profiles'],
    (r) => r.filter((x) => x.topic === 'otlp_spans').length >= 8 && r.filter((x) => x.topic === 'otlp_profiles').length >= 3);
  const spanRecords = records.filter((r) => r.topic === 'otlp_spans');
  assert.equal(spanRecords.length, 8, 'one record per trace');
  const got = new Map();
  for (const r of spanRecords) {
    const key = r.key.toString();
    assert.match(key, /^[0-9a-f]{32}$/);
    assert.equal(r.partition, saramaPartition(key, PARTITIONS), `partition of ${key}`);
    assert.equal(r.headers.origin?.toString(), 'proflink-agent');
    assert.equal(r.headers['content-type'], undefined, 'no content-type header, as the Collector');
    const m = canonical(r.value);
    for (const { span } of m.values()) assert.equal(span.traceId, key, 'only the key\'s trace in its record');
    for (const [id, v] of m) got.set(id, v);
  }
  // the records hold exactly what was sent, resource and scope included
  const want = canonical(req.bytes);
  assert.equal(got.size, want.size);
  for (const [id, v] of want) assert.deepEqual(got.get(id), v, `span ${id}`);

  const profRecords = records.filter((r) => r.topic === 'otlp_profiles');
  assert.equal(profRecords.length, 3, 'one profile record per linked trace');
  for (const r of profRecords) {
    const key = r.key.toString();
    assert.equal(r.partition, saramaPartition(key, PARTITIONS));
    const p = ProfilesRequest.decode(r.value);
    const samples = p.resourceProfiles[0].scopeProfiles[0].profiles[0].samples;
    assert.equal(samples.length, 2);
    for (const s of samples) assert.equal(hex(p.dictionary.linkTable[s.linkIndex].traceId), key);
    // the same trace's spans sit on the same partition number of otlp_spans
    assert.ok(spanRecords.some((x) => x.key.toString() === key && x.partition === r.partition));
  }
});

// OTLP/JSON as the Collector's otlp_json marshaler writes it (hex ids,
// enums as numbers, 64-bit integers as strings).
function toOtlpJson(obj) {
  return JSON.stringify(obj, (k, v) => {
    if (v && v.type === 'Buffer') return Buffer.from(v.data).toString('hex');
    return v;
  });
}

test('kafkajs writes Collector-format records (protobuf and OTLP/JSON); the kafka receiver delivers them whole', { timeout: 60000 }, async () => {
  const backend = await httpBackend();
  cleanups.push(() => backend.stop());
  const producer = kafka().producer();
  await producer.connect();
  const proto = tracesRequest(3, 4, 'from-proto');
  const json = tracesRequest(2, 3, 'from-json');
  await producer.send({ topic: 'kjs_proto', messages: [{ value: proto.bytes, headers: { 'x-tenant': 'acme' } }] });
  await producer.send({ topic: 'kjs_json', messages: [{ key: 'k', value: toOtlpJson(json.obj), headers: { 'x-tenant': 'globex' } }] });
  await producer.disconnect();

  const metricsPort = await freePort();
  const h = await startProflink(`
receivers:
  kafka:
    brokers: [${brokers}]
    group_id: proflink-kjs
    initial_offset: earliest
    traces: { topics: [kjs_proto] }
    header_extraction: { extract_headers: true, headers: [x-tenant] }
  kafka/json:
    brokers: [${brokers}]
    group_id: proflink-kjs-json
    initial_offset: earliest
    traces: { topics: [kjs_json], encoding: otlp_json }
    header_extraction: { extract_headers: true, headers: [x-tenant] }
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:${backend.port}
    compression: none
service:
  telemetry:
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    traces: { receivers: [kafka, kafka/json], exporters: [otlphttp] }
`, { ports: [metricsPort] });
  cleanups.push(() => h.stop());
  const want = canonical(proto.bytes, canonical(json.bytes));
  await waitFor(() => backend.counts.size >= want.size, 20000, `all ${want.size} spans at the backend`);
  const got = backend.canonical();
  for (const [id, v] of want) {
    const g = got.get(id);
    assert.ok(g, `span ${id} delivered`);
    const attr = (list, k) => list.find(([key]) => key === k)?.[1];
    const service = JSON.parse(attr(v.resource.attributes, 'service.name')).stringValue;
    const tenant = JSON.parse(attr(g.resource.attributes, 'kafka.header.x-tenant') || '{}').stringValue;
    assert.equal(tenant, service === 'from-proto' ? 'acme' : 'globex', `header of span ${id}`);
    const others = g.resource.attributes.filter(([key]) => key !== 'kafka.header.x-tenant');
    assert.deepEqual({ ...g, resource: { ...g.resource, attributes: others } }, v, `span ${id} whole`);
  }
  assert.equal(backend.duplicates(), 0);
  // the offsets are committed once accepted (autocommit every second)
  const metrics = async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  await waitFor(async () => /proflink_receiver_kafka_commits_total\{receiver="kafka"\} [1-9]/.test(await metrics()), 10000, 'a commit');
  const text = await metrics();
  assert.match(text, /proflink_receiver_kafka_records_received_total\{receiver="kafka"\} 1\n/);
  assert.match(text, /proflink_receiver_kafka_commits_total\{receiver="kafka"\} [1-9]/);
});

function gatewayConfig(backendPort, dir, metricsPort) {
  return `
receivers:
  kafka:
    brokers: [${brokers}]
    group_id: gateway
    initial_offset: earliest
    session_timeout: 3s
    heartbeat_interval: 500ms
    traces: { topics: [bus_spans] }
    profiles: { topics: [bus_profiles] }
    error_backoff: { initial_interval: 200ms, max_interval: 1s }
processors:
  correlation: { window: 2s }
exporters:
  # one persistent queue (and write-ahead log) per pipeline
  otlphttp/traces:
    endpoint: http://127.0.0.1:${backendPort}
    compression: none
    sending_queue: { storage: ${path.join(dir, 'queue')} }
    retry_on_failure: { initial_interval: 100ms, max_interval: 500ms }
  otlphttp/profiles:
    endpoint: http://127.0.0.1:${backendPort}
    compression: none
    sending_queue: { storage: ${path.join(dir, 'queue')} }
    retry_on_failure: { initial_interval: 100ms, max_interval: 500ms }
service:
  telemetry:
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    traces: { receivers: [kafka], processors: [correlation], exporters: [otlphttp/traces] }
    profiles: { receivers: [kafka], processors: [correlation], exporters: [otlphttp/profiles] }
`;
}

// Linked span id -> { count, named } over the backend's profile requests.
function samplesAtBackend(backend) {
  const out = new Map();
  for (const { bytes } of backend.profileRequests) {
    const p = ProfilesRequest.decode(bytes);
    const d = p.dictionary;
    for (const rp of p.resourceProfiles) for (const sp of rp.scopeProfiles) for (const pr of sp.profiles) {
      for (const s of pr.samples) {
        if (!s.linkIndex) continue;
        const id = hex(d.linkTable[s.linkIndex].spanId);
        const named = (s.attributeIndices || []).some((i) => d.stringTable[d.attributeTable[i].keyStrindex] === 'span_name');
        const e = out.get(id) || { count: 0, named: 0 };
        e.count++;
        if (named) e.named++;
        out.set(id, e);
      }
    }
  }
  return out;
}

test('agent -> bus -> gateway with correlation; kill -9 of the gateway mid-run loses nothing', { timeout: 120000 }, async () => {
  const backend = await httpBackend();
  cleanups.push(() => backend.stop());
  const agentPort = await freePort();
  const agent = await startProflink(`
receivers:
  otlp:
    protocols:
      http: { endpoint: 127.0.0.1:${agentPort} }
exporters:
  kafka:
    brokers: [${brokers}]
    partition_traces_by_id: true
    traces: { topic: bus_spans }
    profiles: { topic: bus_profiles }
service:
  pipelines:
    traces: { receivers: [otlp], exporters: [kafka] }
    profiles: { receivers: [otlp], exporters: [kafka] }
`, { ports: [agentPort] });
  cleanups.push(() => agent.stop());
  const dir = fs.mkdtempSync(path.join(tmp, 'gateway-'));
  const metricsPort = await freePort();
  let gateway = await startProflink(gatewayConfig(backend.port, dir, metricsPort), { dir, ports: [metricsPort] });

  const spanIds = [];
  const round = async () => {
    const req = tracesRequest(4, 3);
    await post(agentPort, '/v1/traces', req.bytes);
    const links = req.traces.flatMap((t) => t.spans.map((s) => ({ traceId: hex(t.id), spanId: s.id })));
    await post(agentPort, '/v1development/profiles', profilesRequest(links));
    spanIds.push(...links.map((l) => l.spanId));
  };
  for (let i = 0; i < 5; i++) { await round(); await sleep(200); }
  try {
    await waitFor(() => backend.counts.size > 0, 30000, 'the gateway delivers before the kill');
  } catch (e) {
    assert.fail(`${e.message}; agent log:\n${agent.log}\ngateway log:\n${gateway.log}`);
  }
  const gwMetrics = async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const received = Number((await gwMetrics()).match(/proflink_receiver_kafka_records_received_total\{receiver="kafka"\} (\d+)/)?.[1]);
  assert.equal((await gateway.kill9()).signal, 'SIGKILL');
  const before = backend.counts.size;
  const beforeKill = spanIds.length;
  for (let i = 0; i < 5; i++) { await round(); await sleep(100); }
  gateway = await startProflink(gatewayConfig(backend.port, dir, metricsPort), { dir, ports: [metricsPort] });
  cleanups.push(() => gateway.stop());

  const samples = () => samplesAtBackend(backend);
  try {
    await waitFor(() => spanIds.every((id) => backend.counts.has(id)), 40000, 'every span');
    await waitFor(() => { const s = samples(); return spanIds.every((id) => s.has(id)); }, 20000, 'every sample');
  } catch (e) {
    const s = samples();
    assert.fail(`${e.message}: spans ${spanIds.filter((id) => backend.counts.has(id)).length}/${spanIds.length}, `
      + `samples ${spanIds.filter((id) => s.has(id)).length}/${spanIds.length}, before the kill ${before}; gateway log:\n${gateway.log}`);
  }
  const s = samples();
  const unnamed = spanIds.filter((id) => s.get(id).named === 0);
  const unnamedAfter = spanIds.slice(beforeKill).filter((id) => s.get(id).named === 0);
  const dupSpans = backend.duplicates();
  const dupSamples = [...s.values()].filter((e) => e.count > 1).length;
  console.log(`# bus: ${spanIds.length} spans and samples; records read before the kill ${received}, spans at the backend ${before}; `
    + `duplicated after the crash: ${dupSpans} spans, ${dupSamples} samples; samples without span_name: ${unnamed.length}`);
  // A sample replayed after the crash may find its span gone already (sent
  // before the kill); what was written after the crash is joined whole.
  assert.equal(unnamedAfter.length, 0, 'every sample written after the crash carries its span\'s name');
});
