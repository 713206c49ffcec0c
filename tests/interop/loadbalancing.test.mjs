// loadbalancing.test.mjs: the two-tier deployment with real processes and
// real clients. One edge proflink (OTLP/HTTP + Pyroscope receivers, the
// correlation processor, the `loadbalancing` exporter with persistent
// per-member queues) in front of three gateway proflinks on 127.0.0.2,
// 127.0.0.3 and 127.0.0.4 (OTLP/gRPC receiver, file exporter).
//
//  1. OpenTelemetry JS and the Pyroscope Node.js SDK send to the edge: every
//     span and every linked sample of a trace lands in exactly one gateway,
//     each gateway gets a share, and nothing is missing.
//  2. A gateway is killed (SIGKILL) mid-run: nothing is lost and the traces
//     after the kill land whole in the other two.
//  3. resolver.dns against a dnsmasq started by the test: the answer changes
//     during the run (hosts file rewritten, SIGHUP) and the members follow.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build/proflink node --test loadbalancing.test.mjs

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';

import { context, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import {
  freePort, readJsonLines, runCheckoutApp, startProflink, until,
} from './lib/common.mjs';

const GW = ['127.0.0.2', '127.0.0.3', '127.0.0.4'];
const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-lb-'));
const cleanups = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
  fs.rmSync(tmpRoot, { recursive: true, force: true });
});

function canConnect(host, port) {
  return new Promise((resolve) => {
    const c = net.connect(port, host, () => { c.destroy(); resolve(true); });
    c.on('error', () => resolve(false));
  });
}

async function startGateway(ip, port, dir) {
  fs.mkdirSync(dir, { recursive: true });
  const out = path.join(dir, 'out.jsonl');
  const g = await startProflink(`
receivers:
  otlp:
    protocols:
      grpc: { endpoint: ${ip}:${port} }
exporters:
  file: { path: ${out} }
service:
  telemetry:
    logs: { level: warn }
    metrics: { address: ${ip}:${port + 1} }
  pipelines:
    traces: { receivers: [otlp], exporters: [file] }
    profiles: { receivers: [otlp], exporters: [file] }
`, { dir });
  assert.ok(await until(() => canConnect(ip, port), 15000), `gateway ${ip} listens: ${g.log}`);
  g.out = out;
  g.ip = ip;
  cleanups.push(() => g.stop(5000));
  return g;
}

function edgeConfig({ otlpPort, pyroPort, metricsPort, dir, resolver }) {
  return `
receivers:
  otlp:
    protocols:
      http: { endpoint: 127.0.0.1:${otlpPort} }
  pyroscope:
    endpoint: 127.0.0.1:${pyroPort}
processors:
  correlation:
    window: 4s
    max_window: 0s   # spans wait the window only, not an upload cadence
exporters:
  loadbalancing:
    routing_key: traceID
    protocol:
      otlp:
        timeout: 2s
        tls: { insecure: true }
        sending_queue: { storage: ${path.join(dir, 'queues')} }
        retry_on_failure: { initial_interval: 100ms, max_interval: 500ms }
    resolver:
${resolver}
service:
  telemetry:
    logs: { level: info }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    traces: { receivers: [otlp], processors: [correlation], exporters: [loadbalancing] }
    profiles: { receivers: [pyroscope], processors: [correlation], exporters: [loadbalancing] }
`;
}

async function startEdge(resolver) {
  const [otlpPort, pyroPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
  const dir = fs.mkdtempSync(path.join(tmpRoot, 'edge-'));
  const e = await startProflink(edgeConfig({ otlpPort, pyroPort, metricsPort, dir, resolver }),
    { dir, ports: [otlpPort, pyroPort, metricsPort] });
  Object.assign(e, { otlpPort, pyroPort, metricsPort });
  e.metricsText = async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  cleanups.push(() => e.stop(5000));
  return e;
}

function metric(text, name, component) {
  const id = component.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const re = new RegExp(`^${name}\\{(?:component|exporter)="${id}"[^}]*\\} (\\d+)`, 'm');
  const m = text.match(re);
  return m ? Number(m[1]) : 0;
}

// What one gateway holds: span ids by trace id, and linked samples by trace id.
function gatewayContent(file) {
  const spans = new Map(); // traceId -> Set(spanId)
  const samples = new Map(); // traceId -> count
  let unlinked = 0;
  for (const rec of readJsonLines(file)) {
    for (const rs of rec.resourceSpans || []) {
      for (const ss of rs.scopeSpans || []) {
        for (const s of ss.spans || []) {
          if (!spans.has(s.traceId)) spans.set(s.traceId, new Set());
          spans.get(s.traceId).add(s.spanId);
        }
      }
    }
    const links = rec.dictionary?.linkTable || [];
    for (const rp of rec.resourceProfiles || []) {
      for (const sp of rp.scopeProfiles || []) {
        for (const p of sp.profiles || []) {
          for (const smp of p.samples || p.sample || []) {
            const li = smp.linkIndex || 0;
            const tid = li > 0 ? links[li]?.traceId : null;
            if (tid) samples.set(tid, (samples.get(tid) || 0) + 1);
            else unlinked++;
          }
        }
      }
    }
  }
  return { spans, samples, unlinked };
}

// Extra traces: `n` traces of a root and a child span, sent by the SDK in
// batches of 16 spans.
async function sendTraces(otlpPort, service, n) {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': service }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({
      url: `http://127.0.0.1:${otlpPort}/v1/traces` }), { maxExportBatchSize: 16, scheduledDelayMillis: 50 })],
  });
  const tracer = provider.getTracer('lb-test');
  const out = [];
  for (let i = 0; i < n; i++) {
    const root = tracer.startSpan(`GET /item/${i}`);
    const child = tracer.startSpan('db query', {}, trace.setSpan(context.active(), root));
    child.end();
    root.end();
    out.push({ traceId: root.spanContext().traceId,
      spanIds: [root.spanContext().spanId, child.spanContext().spanId] });
  }
  await provider.forceFlush();
  await provider.shutdown();
  return out;
}

// A clean exit (0) also means no sanitizer report in the ASan build.
async function stopAll(edge, gws) {
  const r = await edge.stop(10000);
  assert.equal(r.code, 0, `edge exit: ${edge.log}`);
  for (const g of gws) {
    if (g.child.signalCode === 'SIGKILL') continue;
    const gr = await g.stop(10000);
    assert.equal(gr.code, 0, `gateway ${g.ip} exit: ${g.log}`);
  }
}

function whereIs(contents, traceId) {
  return contents.map((c, i) => (c.spans.has(traceId) || c.samples.has(traceId) ? i : -1)).filter((i) => i >= 0);
}

const staticResolver = (port) => `      static:
        hostnames: [${GW.map((ip) => `${ip}:${port}`).join(', ')}]`;

test('every span and linked sample of a trace lands in exactly one of three gateways', async () => {
  const port = await freePort();
  const gws = [];
  for (const ip of GW) gws.push(await startGateway(ip, port, path.join(tmpRoot, `t1-${ip}`)));
  const edge = await startEdge(staticResolver(port));

  const { provider, requests } = await runCheckoutApp({
    service: 'checkout', otlpPort: edge.otlpPort, pyroPort: edge.pyroPort, tracerName: 'lb',
    rootAttributes: { 'http.route': '/checkout/:id' }, checkoutMs: () => 300,
  });
  await provider.shutdown();
  const extra = await sendTraces(edge.otlpPort, 'catalog', 45);

  const expected = new Map();
  for (const r of requests) expected.set(r.traceId, [r.rootId, r.childId]);
  for (const t of extra) expected.set(t.traceId, t.spanIds);

  let contents = [];
  const complete = () => {
    contents = gws.map((g) => gatewayContent(g.out));
    for (const [tid, ids] of expected) {
      const got = new Set(contents.flatMap((c) => [...(c.spans.get(tid) || [])]));
      if (!ids.every((id) => got.has(id))) return false;
    }
    // the checkout requests ran code: their samples must have arrived too
    return requests.every((r) => contents.some((c) => (c.samples.get(r.traceId) || 0) > 0));
  };
  if (!await until(complete, 30000)) {
    const missing = [...expected].filter(([tid, ids]) => !ids.every((id) => contents.some((c) => c.spans.get(tid)?.has(id)))).length;
    const unlinked = requests.filter((r) => !contents.some((c) => c.samples.get(r.traceId))).length;
    assert.fail(`traces with missing spans: ${missing}, checkout traces without samples: ${unlinked}, unlinked samples: ${contents.map((c) => c.unlinked)}\n${edge.log}`);
  }

  for (const tid of expected.keys()) {
    const at = whereIs(contents, tid);
    assert.equal(at.length, 1, `trace ${tid} is in gateways ${at.map((i) => GW[i])}`);
  }
  // each gateway owns a share of the 48 traces
  for (let i = 0; i < 3; i++) assert.ok(contents[i].spans.size > 0, `gateway ${GW[i]} got traces`);
  // a span is delivered once (no failover happened in this run)
  for (const c of contents) for (const [tid, ids] of c.spans) assert.ok(ids.size <= expected.get(tid).length);

  const m = await edge.metricsText();
  assert.equal(metric(m, 'proflink_exporter_members', 'loadbalancing'), 3);
  for (const ip of GW) {
    assert.ok(metric(m, 'otelcol_exporter_sent_spans', `loadbalancing/${ip}:${port}`) > 0,
      `per-member counters for ${ip}`);
  }
  await stopAll(edge, gws);
});

test('a gateway killed mid-run loses nothing; its share moves to the other two', async () => {
  const port = await freePort();
  const gws = [];
  for (const ip of GW) gws.push(await startGateway(ip, port, path.join(tmpRoot, `t2-${ip}`)));
  const edge = await startEdge(staticResolver(port));

  const before = [];
  for (let round = 0; round < 6; round++) before.push(...await sendTraces(edge.otlpPort, 'orders', 8));
  // the spans go out after the correlation window (4 s): kill while they flow
  await new Promise((r) => setTimeout(r, 3000));
  await gws[1].kill9();
  const killedAt = Date.now();
  const afterKill = [];
  for (let round = 0; round < 6; round++) afterKill.push(...await sendTraces(edge.otlpPort, 'orders', 8));

  const all = [...before, ...afterKill];
  let contents = [];
  const complete = () => {
    contents = gws.map((g) => gatewayContent(g.out));
    return all.every((t) => t.spanIds.every((id) => contents.some((c) => c.spans.get(t.traceId)?.has(id))));
  };
  assert.ok(await until(complete, 40000), `every acknowledged span reaches a live gateway or was written by the killed one before it died\n${edge.log}`);
  assert.ok(Date.now() - killedAt < 40000);

  // after the kill, whole traces land in one of the two live gateways
  for (const t of afterKill) {
    const at = whereIs(contents, t.traceId);
    assert.ok(at.length === 1 && at[0] !== 1, `trace ${t.traceId} after the kill is in ${at.map((i) => GW[i])}`);
  }
  // the killed member's share really moved: its keys exist among the later traces
  const m = await edge.metricsText();
  const killedMember = `loadbalancing/${GW[1]}:${port}`;
  assert.ok(metric(m, 'proflink_exporter_rerouted_items_total', killedMember) > 0,
    `the killed member handed data on\n${m.split('\n').filter((l) => l.includes('loadbalancing')).join('\n')}`);
  assert.equal(metric(m, 'proflink_exporter_member_down', killedMember), 1);
  await stopAll(edge, gws);
});

function haveDnsmasq() {
  return spawnSync('/usr/sbin/dnsmasq', ['--version']).status === 0;
}

test('resolver.dns follows a DNS answer that changes during the run', { skip: !haveDnsmasq() && 'dnsmasq not installed (scripts/deps.sh)' }, async () => {
  const port = await freePort();
  const dnsPort = await freePort();
  const dir = fs.mkdtempSync(path.join(tmpRoot, 'dns-'));
  fs.chmodSync(dir, 0o755);
  const hosts = path.join(dir, 'hosts');
  const name = 'gateways.proflink.test';
  fs.writeFileSync(hosts, `${GW[0]} ${name}\n${GW[1]} ${name}\n`);
  fs.chmodSync(hosts, 0o644);
  const dns = spawn('/usr/sbin/dnsmasq', [
    '--keep-in-foreground', '--no-resolv', '--no-hosts', `--addn-hosts=${hosts}`,
    '--listen-address=127.0.0.1', '--bind-interfaces', `--port=${dnsPort}`, '--conf-file=/dev/null',
    `--user=${os.userInfo().username}`, '--pid-file=', '--local-ttl=0', '--log-facility=-',
  ], { stdio: ['ignore', 'ignore', 'pipe'] });
  let dnsLog = '';
  dns.stderr.on('data', (d) => { dnsLog += d; });
  cleanups.push(async () => { dns.kill('SIGTERM'); });
  // dnsmasq answers on UDP; wait until its TCP side listens as a readiness sign
  assert.ok(await until(() => canConnect('127.0.0.1', dnsPort), 10000), `dnsmasq starts: ${dnsLog}`);

  const gws = [];
  for (const ip of GW) gws.push(await startGateway(ip, port, path.join(tmpRoot, `t3-${ip}`)));
  const edge = await startEdge(`      dns:
        hostname: ${name}
        port: "${port}"
        interval: 300ms
        timeout: 500ms
        server: 127.0.0.1:${dnsPort}`);
  const membersIs = async (n) => metric(await edge.metricsText(), 'proflink_exporter_members', 'loadbalancing') === n;
  assert.ok(await until(() => membersIs(2), 10000), `two members resolved\n${edge.log}\n${dnsLog}`);

  const first = await sendTraces(edge.otlpPort, 'dns-a', 30);
  const arrived = (ts) => () => {
    const c = gws.map((g) => gatewayContent(g.out));
    return ts.every((t) => t.spanIds.every((id) => c.some((x) => x.spans.get(t.traceId)?.has(id))));
  };
  assert.ok(await until(arrived(first), 20000), `first traces arrive\n${edge.log}`);
  let c = gws.map((g) => gatewayContent(g.out));
  for (const t of first) {
    const at = whereIs(c, t.traceId);
    assert.ok(at.length === 1 && at[0] !== 2, `before the change: trace in ${at.map((i) => GW[i])}`);
  }
  assert.equal(c[2].spans.size, 0, 'nothing reaches 127.0.0.4 before DNS names it');

  // The answer changes: .2 leaves, .4 joins.
  fs.writeFileSync(hosts, `${GW[1]} ${name}\n${GW[2]} ${name}\n`);
  dns.kill('SIGHUP');
  const changed = async () => {
    const m = await edge.metricsText();
    return metric(m, 'proflink_exporter_resolutions_changed_total', 'loadbalancing') >= 2 &&
      metric(m, 'proflink_exporter_members', 'loadbalancing') === 2 &&
      m.includes(`"loadbalancing/${GW[2]}:${port}"`);
  };
  assert.ok(await until(changed, 10000), `members follow the new answer\n${edge.log}\n${dnsLog}`);
  const g0before = c[0].spans.size;
  const second = await sendTraces(edge.otlpPort, 'dns-b', 30);
  assert.ok(await until(arrived(second), 20000), `second traces arrive\n${edge.log}`);
  c = gws.map((g) => gatewayContent(g.out));
  for (const t of second) {
    const at = whereIs(c, t.traceId);
    assert.ok(at.length === 1 && at[0] !== 0, `after the change: trace in ${at.map((i) => GW[i])}`);
  }
  assert.ok(c[2].spans.size > 0, '127.0.0.4 gets traces once DNS names it');
  assert.equal(c[0].spans.size, g0before, '127.0.0.2 gets nothing after it left');
  await stopAll(edge, gws);
  dns.kill('SIGTERM');
});
