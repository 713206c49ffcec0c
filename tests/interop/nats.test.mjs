// nats.test.mjs: the bus between tiers on NATS JetStream, with real
// processes: a 3-node nats-server JetStream cluster on loopback (store
// directories in a temp dir), one agent proflink (OTLP/HTTP receiver ->
// `nats` exporter with partitions: 2) and two gateway proflinks (`nats`
// receiver, partitions [0] and [1] -> otlphttp exporter -> a fake OTLP
// backend each). The streams (replicas 3) are created with the `nats` npm
// client, an independent implementation of the protocol.
//
// Spans come from the OpenTelemetry JS SDK (OTLP/proto exporter), profiles
// are OTLP profile requests whose samples link to those spans. During the
// run the stream leader's nats-server is killed (SIGKILL), then one gateway
// is killed (SIGKILL) and restarted. At the end every span (by span id) and
// every linked sample arrived at least once, each trace's spans and samples
// at the same gateway; duplicates are counted and reported.
//
// Skips (with a message) only when nats-server is not installed.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build/proflink node --test nats.test.mjs

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';

import { connect, headers } from 'nats';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { context, trace } from '@opentelemetry/api';
import { freePort, sleep, startProflink, tracerProvider, until } from './lib/common.mjs';
import { ProfilesRequest, TraceRequest, canonical, httpBackend } from './lib/proflink.mjs';

const haveServer = spawnSync('nats-server', ['--version']).status === 0;
const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-nats-'));
const cleanups = [];
after(async () => {
  for (const c of cleanups.reverse()) { try { await c(); } catch { /* already gone */ } }
  fs.rmSync(tmpRoot, { recursive: true, force: true });
});

// ---- the NATS cluster -------------------------------------------------------

async function startCluster(n = 3) {
  const nodes = [];
  for (let i = 0; i < n; i++) nodes.push({ name: `n${i}`, port: await freePort(), route: await freePort() });
  for (const node of nodes) {
    const dir = path.join(tmpRoot, node.name);
    fs.mkdirSync(dir, { recursive: true });
    const routes = nodes.filter((o) => o !== node).map((o) => `nats://127.0.0.1:${o.route}`).join(',');
    node.args = ['-a', '127.0.0.1', '-p', String(node.port), '-n', node.name, '-js', '-sd', dir,
      '--cluster_name', 'proflink', '--cluster', `nats://127.0.0.1:${node.route}`, '--routes', routes];
    node.start = () => {
      node.log = '';
      node.proc = spawn('nats-server', node.args, { stdio: ['ignore', 'ignore', 'pipe'] });
      node.proc.stderr.on('data', (d) => { node.log = (node.log + d).slice(-20000); });
      node.exited = new Promise((r) => node.proc.on('exit', r));
    };
    node.start();
    cleanups.push(async () => { node.proc.kill('SIGKILL'); await node.exited; });
  }
  return { nodes, urls: nodes.map((o) => `nats://127.0.0.1:${o.port}`) };
}

// Creates streams ([name, subjects]) once JetStream is up (the cluster has
// a meta leader).
async function createStreamsOn(urls, streams, replicas = 1) {
  const nc = await connect({ servers: urls, reconnectTimeWait: 100, maxReconnectAttempts: -1, waitOnFirstConnect: true });
  let jsm = null;
  assert.ok(await until(async () => {
    try { jsm = await nc.jetstreamManager({ timeout: 1000 }); return true; } catch { return false; }
  }, 30000, 250), 'JetStream is up');
  for (const [name, subjects] of streams) {
    const ok = await until(async () => {
      try {
        await jsm.streams.add({ name, subjects, num_replicas: replicas, storage: 'file' });
        return true;
      } catch { return false; }
    }, 30000, 250);
    assert.ok(ok, `stream ${name} created`);
  }
  return { nc, jsm };
}

const createStreams = (urls) => createStreamsOn(urls,
  [['OTEL_SPANS', ['otel_spans.>']], ['OTEL_PROFILES', ['otel_profiles.>']]], 3);

// ---- proflink ------------------------------------------------------------------

function agentConfig(urls, httpPort, metricsPort) {
  return `
receivers:
  otlp:
    protocols:
      http: { endpoint: 127.0.0.1:${httpPort} }
exporters:
  nats:
    endpoint: ${urls.join(',')}
    jetstream: { publish_timeout: 2s }
    traces: { subject: otel_spans }
    profiles: { subject: otel_profiles }
    partitions: 2
    sending_queue: { queue_size: 5000 }
    retry_on_failure: { initial_interval: 100ms, max_interval: 500ms, max_elapsed_time: 0s }
service:
  telemetry:
    logs: { level: info }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    traces: { receivers: [otlp], exporters: [nats] }
    profiles: { receivers: [otlp], exporters: [nats] }
`;
}

function gatewayConfig(urls, partition, backendPort, metricsPort, dir) {
  return `
receivers:
  nats:
    endpoint: ${urls.join(',')}
    jetstream: { ack_wait: 3s }
    partitions: [${partition}]
    nak_delay: 200ms
    traces: { subject: otel_spans, stream: OTEL_SPANS, durable: gateway_spans }
    profiles: { subject: otel_profiles, stream: OTEL_PROFILES, durable: gateway_profiles }
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:${backendPort}
    compression: none
    timeout: 2s
    sending_queue: { storage: ${path.join(dir, 'queues')} }
    retry_on_failure: { initial_interval: 100ms, max_interval: 500ms }
service:
  telemetry:
    logs: { level: info }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    traces: { receivers: [nats], exporters: [otlphttp] }
    profiles: { receivers: [nats], exporters: [otlphttp] }
`;
}

async function metricsText(port) {
  try { return await (await fetch(`http://127.0.0.1:${port}/metrics`)).text(); } catch { return ''; }
}

function counter(text, name) {
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^\\S*${name}(?:_total)?\\{[^}]*\\} (\\d+)`, 'gm'))) sum += Number(m[1]);
  return sum;
}

// ---- what the backends got ---------------------------------------------------------

const hex = (b) => Buffer.from(b).toString('hex');

// Linked samples of every profile request a backend got: "traceId/spanId" keys, with repetitions.
function sampleKeys(rec) {
  const out = [];
  for (const r of rec.profileRequests) {
    const req = ProfilesRequest.decode(r.bytes);
    const links = req.dictionary?.linkTable || [];
    for (const rp of req.resourceProfiles || []) for (const sp of rp.scopeProfiles || []) {
      for (const p of sp.profiles || []) for (const s of p.samples || []) {
        const l = links[s.linkIndex || 0];
        if (l && l.traceId?.length) out.push(`${hex(l.traceId)}/${hex(l.spanId)}`);
      }
    }
  }
  return out;
}

// One profiles request with a linked sample per span of `traces`.
function profilesFor(traces) {
  const links = [{}];
  const samples = [];
  for (const t of traces) {
    for (const s of t.spans) {
      links.push({ traceId: Buffer.from(t.traceId, 'hex'), spanId: Buffer.from(s, 'hex') });
      samples.push({ stackIndex: 1, values: [10000000], linkIndex: links.length - 1 });
    }
  }
  return Buffer.from(ProfilesRequest.encode(ProfilesRequest.fromObject({
    resourceProfiles: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: 'checkout' } }] },
      scopeProfiles: [{
        scope: { name: 'nats-test' },
        profiles: [{
          sampleType: { typeStrindex: 1, unitStrindex: 2 },
          samples,
          timeUnixNano: String(BigInt(Date.now()) * 1000000n),
          durationNano: '1000000000',
          periodType: { typeStrindex: 1, unitStrindex: 2 },
          period: '10000000',
        }],
      }],
    }],
    dictionary: {
      mappingTable: [{}],
      locationTable: [{}, { lines: [{ functionIndex: 1, line: '1' }] }],
      functionTable: [{}, { nameStrindex: 3 }],
      linkTable: links,
      stringTable: ['', 'cpu', 'nanoseconds', 'handleRequest'],
      attributeTable: [{}],
      stackTable: [{}, { locationIndices: [1] }],
    },
  })).finish());
}

test('agent -> NATS JetStream (3 nodes) -> 2 gateways: a node and a gateway killed, nothing lost, traces stay whole',
  { skip: haveServer ? false : 'nats-server is not installed (apt-get install nats-server)', timeout: 150000 }, async () => {
    const cluster = await startCluster(3);
    const { nc, jsm } = await createStreams(cluster.urls);
    cleanups.push(() => nc.close());

    // Backend 0 can be made to hang: the gateway has then acknowledged
    // messages (its persistent queue took them) that the backend has not
    // got when the gateway is killed.
    let hang0 = false;
    const backends = [await httpBackend({ behaviour: () => (hang0 ? { hang: true } : null) }), await httpBackend()];
    for (const b of backends) cleanups.push(() => b.stop());
    const gwMetrics = [await freePort(), await freePort()];
    const gwDirs = [0, 1].map((i) => fs.mkdtempSync(path.join(tmpRoot, `gw${i}-`)));
    const startGateway = (i) => startProflink(gatewayConfig(cluster.urls, i, backends[i].port, gwMetrics[i], gwDirs[i]),
      { dir: gwDirs[i], ports: [gwMetrics[i]] });
    const gateways = [await startGateway(0), await startGateway(1)];
    cleanups.push(() => Promise.all(gateways.map((g) => g.stop(5000))));

    const [httpPort, agentMetrics] = [await freePort(), await freePort()];
    const agent = await startProflink(agentConfig(cluster.urls, httpPort, agentMetrics), { ports: [httpPort, agentMetrics] });
    cleanups.push(() => agent.stop(5000));

    const exporter = new OTLPTraceExporter({ url: `http://127.0.0.1:${httpPort}/v1/traces` });
    const provider = tracerProvider('checkout', exporter);
    const tracer = provider.getTracer('nats-test');
    const sent = []; // { traceId, spans: [spanId] }

    // A round: 10 traces of 3 spans from the SDK, then one profiles request
    // linking a sample to each of their spans.
    async function round() {
      const traces = [];
      for (let i = 0; i < 10; i++) {
        const root = tracer.startSpan('GET /cart');
        const ctx = trace.setSpan(context.active(), root);
        const kids = [tracer.startSpan('load cart', {}, ctx), tracer.startSpan('price cart', {}, ctx)];
        for (const k of kids) k.end();
        root.end();
        traces.push({ traceId: root.spanContext().traceId, spans: [root, ...kids].map((s) => s.spanContext().spanId) });
      }
      await provider.forceFlush();
      const res = await fetch(`http://127.0.0.1:${httpPort}/v1development/profiles`, {
        method: 'POST', headers: { 'content-type': 'application/x-protobuf' }, body: profilesFor(traces),
      });
      assert.equal(res.status, 200, 'the agent accepts the profiles');
      sent.push(...traces);
    }

    for (let i = 0; i < 5; i++) { await round(); await sleep(100); }

    // Kill the nats-server that leads the spans stream, mid-run.
    const info = await jsm.streams.info('OTEL_SPANS');
    const victim = cluster.nodes.find((o) => o.name === info.cluster?.leader) || cluster.nodes[0];
    victim.proc.kill('SIGKILL');
    await victim.exited;
    for (let i = 0; i < 5; i++) { await round(); await sleep(100); }

    // Kill -9 gateway 0 mid-run while its backend hangs (so it holds
    // acknowledged data), keep sending, restart it.
    hang0 = true;
    const acked0 = counter(await metricsText(gwMetrics[0]), 'nats_acks');
    for (let i = 0; i < 2; i++) { await round(); await sleep(100); }
    assert.ok(await until(async () => counter(await metricsText(gwMetrics[0]), 'nats_acks') > acked0, 10000),
      'gateway 0 acknowledged messages its backend has not got');
    await gateways[0].kill9();
    hang0 = false;
    backends[0].releaseHung();
    for (let i = 0; i < 5; i++) { await round(); await sleep(100); }
    gateways[0] = await startGateway(0);
    for (let i = 0; i < 1; i++) { await round(); await sleep(100); }

    const wantSpans = new Set(sent.flatMap((t) => t.spans));
    const wantSamples = new Set(sent.flatMap((t) => t.spans.map((s) => `${t.traceId}/${s}`)));
    const complete = () => {
      const spans = new Set(backends.flatMap((b) => [...b.counts.keys()]));
      const samples = new Set(backends.flatMap((b) => sampleKeys(b)));
      return [...wantSpans].every((s) => spans.has(s)) && [...wantSamples].every((s) => samples.has(s));
    };
    const done = await until(complete, 60000, 250);
    const gotSpans = new Set(backends.flatMap((b) => [...b.counts.keys()]));
    const missing = [...wantSpans].filter((s) => !gotSpans.has(s));
    assert.ok(done, `every span and sample arrived; ${missing.length} of ${wantSpans.size} spans missing\n` +
      `agent: ${agent.log.slice(-3000)}\ngateway 0: ${gateways[0].log.slice(-3000)}`);

    // The partition scheme: a trace's spans and its samples at one gateway.
    const spanAt = new Map(); // traceId -> gateway
    const sampleAt = new Map();
    for (const [i, b] of backends.entries()) {
      for (const r of b.requests) {
        for (const rs of traceIdsOf(r.bytes)) {
          const prev = spanAt.get(rs);
          assert.ok(prev === undefined || prev === i, `trace ${rs} has spans at both gateways`);
          spanAt.set(rs, i);
        }
      }
      for (const k of sampleKeys(b)) {
        const t = k.split('/')[0];
        const prev = sampleAt.get(t);
        assert.ok(prev === undefined || prev === i, `trace ${t} has samples at both gateways`);
        sampleAt.set(t, i);
      }
    }
    for (const [t, i] of sampleAt) assert.equal(spanAt.get(t), i, `trace ${t}: samples at the gateway of its spans`);
    const perGateway = [0, 1].map((i) => [...spanAt.values()].filter((v) => v === i).length);
    assert.ok(perGateway[0] > 0 && perGateway[1] > 0, `both partitions used: ${perGateway}`);

    // Duplicates (at least once): counted, reported.
    const spanDup = backends.reduce((n, b) => n + [...b.counts.values()].reduce((m, c) => m + c - 1, 0), 0);
    const allSamples = backends.flatMap((b) => sampleKeys(b));
    const sampleDup = allSamples.length - new Set(allSamples).size;
    const gwText = (await metricsText(gwMetrics[0])) + (await metricsText(gwMetrics[1]));
    const agText = await metricsText(agentMetrics);
    const report = {
      traces: sent.length, spans: wantSpans.size, samples: wantSamples.size,
      traces_per_gateway: perGateway, duplicate_spans: spanDup, duplicate_samples: sampleDup,
      agent_published: counter(agText, 'nats_messages_published'),
      agent_publish_failures: counter(agText, 'nats_publish_failures'),
      agent_publish_duplicates: counter(agText, 'nats_publish_duplicates'),
      gateway_acks_since_restart: counter(gwText, 'nats_acks'),
      gateway_redeliveries_since_restart: counter(gwText, 'nats_redeliveries'),
    };
    console.log('nats bus:', JSON.stringify(report));
    assert.ok(report.agent_published > 0 && report.gateway_acks_since_restart > 0, 'self-metrics count messages');
  });

// Trace ids (hex) of an ExportTraceServiceRequest.
function traceIdsOf(bytes) {
  const req = TraceRequest.decode(bytes);
  const ids = new Set();
  for (const rs of req.resourceSpans || []) for (const ss of rs.scopeSpans || []) for (const s of ss.spans || []) ids.add(hex(s.traceId));
  return ids;
}

// The wire format, checked with an independent client (the `nats` npm
// package): messages in the Collector's shape (one ExportTraceServiceRequest
// per message, serialized by the OpenTelemetry JS SDK as protobuf and as
// OTLP/JSON) reach the backend whole through the receiver, a message that
// does not decode is terminated and counted; what the exporter publishes
// (otlp_json, a quoted OTTL subject) reads back as the SDK's spans.
test('wire format: SDK-serialized messages in (proto and JSON), exporter messages out, a bad message terminated',
  { skip: haveServer ? false : 'nats-server is not installed (apt-get install nats-server)', timeout: 60000 }, async () => {
    const port = await freePort();
    const dir = fs.mkdtempSync(path.join(tmpRoot, 'single-'));
    const proc = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: 'ignore' });
    const exited = new Promise((r) => proc.on('exit', r));
    cleanups.push(async () => { proc.kill('SIGKILL'); await exited; });
    const url = `nats://127.0.0.1:${port}`;
    const { nc, jsm } = await createStreamsOn([url], [['OTEL', ['otel_spans', 'otel_spans_json', 'agent_spans']]]);
    cleanups.push(() => nc.close());

    const backend = await httpBackend();
    cleanups.push(() => backend.stop());
    const [metricsPort, httpPort] = [await freePort(), await freePort()];
    const pl = await startProflink(`
receivers:
  nats:
    endpoint: ${url}
    traces: { subject: otel_spans, stream: OTEL, durable: in_proto }
  nats/json:
    endpoint: ${url}
    traces: { subject: otel_spans_json, stream: OTEL, durable: in_json, encoding: otlp_json }
  otlp:
    protocols:
      http: { endpoint: 127.0.0.1:${httpPort} }
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:${backend.port}
    compression: none
    tenant_header: X-Scope-OrgID
  nats:
    endpoint: ${url}
    traces: { subject: '"agent_spans"', marshaler: otlp_json }
service:
  telemetry:
    logs: { level: info }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    traces/in: { receivers: [nats, nats/json], exporters: [otlphttp] }
    traces/out: { receivers: [otlp], exporters: [nats] }
`, { ports: [metricsPort, httpPort] });
    cleanups.push(() => pl.stop(5000));

    const { InMemorySpanExporter } = await import('@opentelemetry/sdk-trace-base');
    const { ProtobufTraceSerializer, JsonTraceSerializer } = await import('@opentelemetry/otlp-transformer');
    const mem = new InMemorySpanExporter();
    const provider = tracerProvider('wire', mem);
    const tracer = provider.getTracer('nats-wire');
    const batch = (n, name) => {
      mem.reset();
      for (let i = 0; i < n; i++) tracer.startSpan(`${name} ${i}`).end();
      return mem.getFinishedSpans().slice();
    };
    const protoSpans = batch(5, 'proto');
    const jsonSpans = batch(4, 'json');
    const js = nc.jetstream();
    await js.publish('otel_spans', Buffer.from('\x0a\x05not a request'));
    await js.publish('otel_spans', ProtobufTraceSerializer.serializeRequest(protoSpans));
    const h = headers();
    h.set('X-Scope-OrgID', 'acme');
    await js.publish('otel_spans_json', JsonTraceSerializer.serializeRequest(jsonSpans), { headers: h });

    const want = [...protoSpans, ...jsonSpans].map((s) => s.spanContext().spanId);
    assert.ok(await until(() => want.every((id) => backend.counts.has(id)), 20000),
      `every SDK span reached the backend: ${pl.log.slice(-2000)}`);
    const canon = backend.canonical();
    for (const s of [...protoSpans, ...jsonSpans]) {
      const got = canon.get(s.spanContext().spanId);
      assert.equal(got.span.name, s.name);
      assert.equal(got.span.traceId, s.spanContext().traceId);
      assert.deepEqual(got.resource.attributes.find(([k]) => k === 'service.name'), ['service.name', '{"stringValue":"wire"}']);
    }
    // the tenant header of a message is the batch's tenant
    const jsonId = jsonSpans[0].spanContext().spanId;
    const protoId = protoSpans[0].spanContext().spanId;
    const reqOf = (id) => backend.requests.find((r) => canonical(r.bytes).has(id));
    assert.equal(reqOf(jsonId).headers['x-scope-orgid'], 'acme');
    assert.equal(reqOf(protoId).headers['x-scope-orgid'], undefined);
    assert.ok(await until(async () => counter(await metricsText(metricsPort), 'nats_terms') === 1, 5000),
      'the message that does not decode is terminated and counted');
    assert.match(pl.log, /does not decode/);

    // Out: the exporter's message read back by the npm client.
    const outSpans = batch(3, 'out');
    const res = await fetch(`http://127.0.0.1:${httpPort}/v1/traces`, {
      method: 'POST', headers: { 'content-type': 'application/x-protobuf', 'x-scope-orgid': 'tenant-7' },
      body: ProtobufTraceSerializer.serializeRequest(outSpans),
    });
    assert.equal(res.status, 200);
    let msg = null;
    assert.ok(await until(async () => {
      try { msg = await jsm.streams.getMessage('OTEL', { last_by_subj: 'agent_spans' }); return true; } catch { return false; }
    }, 10000), 'the exporter published to agent_spans');
    assert.equal(msg.header.get('Content-Type'), 'application/json');
    assert.equal(msg.header.get('X-Scope-OrgID'), 'tenant-7', 'the tenant travels with the message');
    assert.match(msg.header.get('Nats-Msg-Id'), /^[0-9a-f]{32}$/);
    const body = JSON.parse(Buffer.from(msg.data).toString());
    const ids = body.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans.map((s) => s.spanId)));
    assert.deepEqual(ids.sort(), outSpans.map((s) => s.spanContext().spanId).sort());

    // The same request exported again is a new message (its own id), not a
    // duplicate the stream drops.
    const again = await fetch(`http://127.0.0.1:${httpPort}/v1/traces`, {
      method: 'POST', headers: { 'content-type': 'application/x-protobuf', 'x-scope-orgid': 'tenant-7' },
      body: ProtobufTraceSerializer.serializeRequest(outSpans),
    });
    assert.equal(again.status, 200);
    let second = null;
    assert.ok(await until(async () => {
      try { second = await jsm.streams.getMessage('OTEL', { last_by_subj: 'agent_spans' }); } catch { return false; }
      return second.seq > msg.seq;
    }, 10000), 'the second export is stored too');
    assert.notEqual(second.header.get('Nats-Msg-Id'), msg.header.get('Nats-Msg-Id'));
    assert.deepEqual(Buffer.from(second.data), Buffer.from(msg.data));

    // A request whose message would exceed the server's max_payload (1 MiB)
    // is split into several messages, each a whole request, none lost.
    const bigSpans = [];
    mem.reset();
    for (let i = 0; i < 2000; i++) tracer.startSpan(`big ${i}`, { attributes: { pad: 'x'.repeat(600) } }).end();
    bigSpans.push(...mem.getFinishedSpans());
    const before = (await jsm.streams.info('OTEL')).state.last_seq;
    const big = await fetch(`http://127.0.0.1:${httpPort}/v1/traces`, {
      method: 'POST', headers: { 'content-type': 'application/x-protobuf' },
      body: ProtobufTraceSerializer.serializeRequest(bigSpans),
    });
    assert.equal(big.status, 200);
    const bigIds = [];
    let messages = 0;
    assert.ok(await until(async () => {
      const last = (await jsm.streams.info('OTEL')).state.last_seq;
      bigIds.length = 0;
      messages = 0;
      for (let seq = before + 1; seq <= last; seq++) {
        const m = await jsm.streams.getMessage('OTEL', { seq });
        if (m.subject !== 'agent_spans') continue;
        assert.ok(m.data.length <= 1024 * 1024, `message of ${m.data.length} bytes`);
        messages++;
        const b = JSON.parse(Buffer.from(m.data).toString());
        for (const rs of b.resourceSpans) for (const ss of rs.scopeSpans) for (const sp of ss.spans) bigIds.push(sp.spanId);
      }
      return bigIds.length >= bigSpans.length;
    }, 15000, 200), `the big request's spans were published: ${bigIds.length} of ${bigSpans.length}`);
    assert.ok(messages >= 2, `split into ${messages} messages`);
    assert.deepEqual(bigIds.sort(), bigSpans.map((sp) => sp.spanContext().spanId).sort());
    assert.ok(counter(await metricsText(metricsPort), 'nats_oversize_splits') >= 1);
  });

// Back-pressure: while the gateway's exporter queue is full (its backend
// hangs), the receiver naks what the pipeline refuses and pauses; nothing is
// dropped, and once the backend answers again every message arrives.
test('a refusing pipeline gets naks and redeliveries, not losses',
  { skip: haveServer ? false : 'nats-server is not installed (apt-get install nats-server)', timeout: 90000 }, async () => {
    const port = await freePort();
    const dir = fs.mkdtempSync(path.join(tmpRoot, 'nak-'));
    const proc = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: 'ignore' });
    const exited = new Promise((r) => proc.on('exit', r));
    cleanups.push(async () => { proc.kill('SIGKILL'); await exited; });
    const url = `nats://127.0.0.1:${port}`;
    const { nc } = await createStreamsOn([url], [['OTEL', ['otel_spans']]]);
    cleanups.push(() => nc.close());

    let hang = true;
    const backend = await httpBackend({ behaviour: () => (hang ? { hang: true } : null) });
    cleanups.push(() => backend.stop());
    const metricsPort = await freePort();
    const pl = await startProflink(`
receivers:
  nats:
    endpoint: ${url}
    nak_delay: 200ms
    fetch_batch: 4
    traces: { subject: otel_spans, stream: OTEL, durable: gw }
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:${backend.port}
    compression: none
    timeout: 30s
    sending_queue: { queue_size: 1, num_consumers: 1 }
    retry_on_failure: { initial_interval: 100ms, max_interval: 200ms }
service:
  telemetry:
    logs: { level: info }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    traces: { receivers: [nats], exporters: [otlphttp] }
`, { ports: [metricsPort] });
    cleanups.push(() => pl.stop(5000));

    const { InMemorySpanExporter } = await import('@opentelemetry/sdk-trace-base');
    const { ProtobufTraceSerializer } = await import('@opentelemetry/otlp-transformer');
    const mem = new InMemorySpanExporter();
    const tracer = tracerProvider('nak', mem).getTracer('nats-nak');
    const js = nc.jetstream();
    const want = [];
    // enough messages that delivering each once takes several paused
    // fetches: the lag is still visible when the first naks are counted
    for (let m = 0; m < 40; m++) {
      mem.reset();
      for (let i = 0; i < 3; i++) tracer.startSpan(`m${m} s${i}`).end();
      const spans = mem.getFinishedSpans().slice();
      want.push(...spans.map((s) => s.spanContext().spanId));
      await js.publish('otel_spans', ProtobufTraceSerializer.serializeRequest(spans));
    }
    assert.ok(await until(async () => counter(await metricsText(metricsPort), 'nats_naks') >= 3, 10000),
      `the full queue makes the receiver nak: ${pl.log.slice(-2000)}`);
    assert.ok(await until(async () => counter(await metricsText(metricsPort), 'nats_redeliveries') >= 1, 10000),
      'messages that got a nak are delivered again');
    assert.ok(counter(await metricsText(metricsPort), 'nats_lag') > 0, 'the receiver lags while refused');
    hang = false;
    backend.releaseHung();
    assert.ok(await until(() => want.every((id) => backend.counts.has(id)), 40000),
      `every message arrives once the backend answers: ${pl.log.slice(-2000)}`);
    assert.ok(await until(async () => counter(await metricsText(metricsPort), 'nats_lag') === 0, 10000), 'caught up: no lag');
    console.log('nak test:', JSON.stringify({ naks: counter(await metricsText(metricsPort), 'nats_naks'),
      redeliveries: counter(await metricsText(metricsPort), 'nats_redeliveries'), duplicates: backend.duplicates() }));

    // A reload with another ack_wait updates the existing durable (libnats
    // would refuse to bind it otherwise) and consuming goes on.
    const file = path.join(pl.dir, 'collector.yaml');
    fs.writeFileSync(file, fs.readFileSync(file, 'utf8').replace('nak_delay: 200ms', 'nak_delay: 200ms\n    jetstream: { ack_wait: 7s }'));
    pl.child.kill('SIGHUP');
    const jsm = await nc.jetstreamManager();
    assert.ok(await until(async () => (await jsm.consumers.info('OTEL', 'gw')).config.ack_wait === 7e9, 10000),
      `the durable took ack_wait 7s: ${pl.log.slice(-2000)}`);
    mem.reset();
    tracer.startSpan('after reload').end();
    const last = mem.getFinishedSpans().slice();
    await js.publish('otel_spans', ProtobufTraceSerializer.serializeRequest(last));
    assert.ok(await until(() => backend.counts.has(last[0].spanContext().spanId), 10000), 'consuming goes on after the reload');
  });

// Samples that come before their spans: the spans stream has a backlog the
// gateway reads one message per fetch, its profiles stream a few messages
// whose samples link to the spans at the end of that backlog. The profiles
// are read long before those spans; with sample_window 300ms the samples
// would leave unlinked. The receiver says the spans lag (JetStream's
// pending count) and correlation holds the samples until they came.
test('samples read before their spans (a spans backlog) wait for them: every sample leaves with its span\'s name',
  { skip: haveServer ? false : 'nats-server is not installed (apt-get install nats-server)', timeout: 120000 }, async () => {
    const port = await freePort();
    const dir = fs.mkdtempSync(path.join(tmpRoot, 'lag-'));
    const proc = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: 'ignore' });
    const exited = new Promise((r) => proc.on('exit', r));
    cleanups.push(async () => { proc.kill('SIGKILL'); await exited; });
    const url = `nats://127.0.0.1:${port}`;
    const { nc } = await createStreamsOn([url], [['LAG_SPANS', ['lag_spans']], ['LAG_PROFILES', ['lag_profiles']]]);
    cleanups.push(() => nc.close());
    const js = nc.jetstream();
    const BACKLOG = 1500;
    const LINKED = 20;
    const traces = [];
    for (let i = 0; i < BACKLOG; i++) {
      const now = BigInt(Date.now()) * 1000000n;
      const traceId = crypto.randomBytes(16);
      const spanId = crypto.randomBytes(8);
      const bytes = Buffer.from(TraceRequest.encode(TraceRequest.fromObject({
        resourceSpans: [{
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'checkout' } }] },
          scopeSpans: [{ spans: [{ traceId, spanId, name: `op-${i}`, kind: 2,
            startTimeUnixNano: String(now - 50000000n), endTimeUnixNano: String(now) }] }],
        }],
      })).finish());
      await js.publish('lag_spans', bytes);
      if (i >= BACKLOG - LINKED) traces.push({ traceId: hex(traceId), spans: [hex(spanId)] });
    }
    for (const t of traces) await js.publish('lag_profiles', profilesFor([t]));

    const run = async (name, busLagWait) => {
      const backend = await httpBackend();
      cleanups.push(() => backend.stop());
      const metricsPort = await freePort();
      const pl = await startProflink(`
receivers:
  nats:
    endpoint: ${url}
    fetch_batch: 1
    traces: { subject: lag_spans, stream: LAG_SPANS, durable: ${name}_spans }
    profiles: { subject: lag_profiles, stream: LAG_PROFILES, durable: ${name}_profiles }
processors:
  correlation: { window: 2s, sample_window: 300ms, max_window: 0s, bus_lag_wait: ${busLagWait} }
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:${backend.port}
    compression: none
service:
  telemetry:
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    traces: { receivers: [nats], processors: [correlation], exporters: [otlphttp] }
    profiles: { receivers: [nats], processors: [correlation], exporters: [otlphttp] }
`, { ports: [metricsPort] });
      cleanups.push(() => pl.stop(5000));
      const started = Date.now();
      assert.ok(await until(() => sampleKeys(backend).length >= LINKED && backend.counts.size >= BACKLOG, 60000),
        `${name}: every sample and span arrives (${sampleKeys(backend).length} samples, ${backend.counts.size} spans): ${pl.log.slice(-2000)}`);
      let named = 0;
      for (const r of backend.profileRequests) {
        const req = ProfilesRequest.decode(r.bytes);
        const d = req.dictionary;
        for (const rp of req.resourceProfiles) for (const sp of rp.scopeProfiles) for (const p of sp.profiles) {
          for (const s of p.samples) {
            if ((s.attributeIndices || []).some((i) => d.stringTable[d.attributeTable[i].keyStrindex] === 'span_name')) named++;
          }
        }
      }
      const text = await metricsText(metricsPort);
      const out = { named, held: counter(text, 'bus_lag_held_samples'), caughtUp: counter(text, 'bus_lag_caught_up_samples'), ms: Date.now() - started };
      await pl.stop(5000);
      return out;
    };
    const off = await run('off', '0s');
    const on = await run('on', '5m');
    console.log(`# nats, ${BACKLOG} spans read one per fetch, ${LINKED} samples linked to the last ones, sample_window 300ms: `
      + `bus_lag_wait 0s: ${off.named}/${LINKED} samples with span_name (backlog read in ${off.ms} ms); `
      + `bus_lag_wait 5m: ${on.named}/${LINKED} (held for lag ${on.held}, let go on catch-up ${on.caughtUp}; ${on.ms} ms)`);
    assert.equal(on.named, LINKED, 'every sample leaves with its span\'s name');
    assert.equal(on.held, LINKED, 'they were held for their lagging spans');
    assert.equal(on.caughtUp, LINKED);
  });
