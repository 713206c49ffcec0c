// lib/common.mjs: small helpers that the area interop tests share.
//
// Starting proflink (startProflink: temp config, wait for its ports, a handle
// with stop() and the stderr log), free ports, the binary's path and polling
// with an assertion come from lib/proflink.mjs and are re-exported here, so a
// test imports its helpers from one place. What is added here:
//   - until(cond, ms, pollMs): polls; resolves true or false (the caller
//     asserts, with its own message);
//   - readJsonLines(file): the file exporter's OTLP/JSON lines, parsed;
//   - readBody(req) and request(): raw bodies of node http requests/answers;
//     pushSink(port, into): a fake Pyroscope push API that records every
//     request ({url, headers, body, at: arrival in ms}) and answers 200;
//   - loadProtos(files): a protobufjs Root over the project's proto/ folder;
//   - tracerProvider(resource, exporter): an OpenTelemetry JS SDK provider
//     whose spans go, one by one, to `exporter` (an OTLP exporter pointed at
//     proflink, or an InMemorySpanExporter); exportSpans(): one SDK exporter
//     call as a promise;
//   - otlpProfileTotals(requests): per sample type, (type, leaf function) and
//     (type, linked span id) totals of OTLP/JSON profile requests (as the
//     file exporter writes them), with every sample resolved; mapObj() turns
//     such a Map into a plain object of strings for deepEqual;
//   - burnCpuInCheckout/burnCpuInPricing: CPU work that shows up as its own
//     leaf function in a profile (the tests look for these names), and
//     runCheckoutApp(), the instrumented application of the end-to-end tests.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import protobuf from 'protobufjs';
import { SpanKind, context, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { protoFile, repo, sleep } from './proflink.mjs';

export {
  BIN, PROTO_DIRS, protoFile, sleep, freePort, waitFor, startProflink, httpGet, postTraces, TraceRequest,
  PushRequest,
} from './proflink.mjs';

export const FIXTURES = path.join(repo, 'tests', 'interop', 'fixtures');

export async function until(cond, ms = 10000, pollMs = 50) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return true;
    await sleep(pollMs);
  }
  return false;
}

// One JSON document a line (the file exporter's `format: json`); a missing
// file reads as no lines.
export function readJsonLines(file) {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
}

export function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
  });
}

export async function pushSink(port, into) {
  const server = http.createServer(async (req, res) => {
    into.push({ url: req.url, headers: req.headers, body: await readBody(req), at: Date.now() });
    res.writeHead(200, { 'content-type': 'application/proto' });
    res.end();
  });
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  return server;
}

// An HTTP request on a fresh connection: resolves {status, headers, body}.
export function request(port, p, headers, body, method = 'POST') {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: p, method, headers, agent: false },
      (res) => {
        readBody(res).then((b) => resolve({ status: res.statusCode, headers: res.headers, body: b }));
      });
    req.on('error', reject);
    req.end(body);
  });
}

export const mapObj = (m) => Object.fromEntries([...m].sort().map(([k, v]) => [k, String(v)]));

export function otlpProfileTotals(requests) {
  const out = { byType: new Map(), byFn: new Map(), bySpan: new Map(), functions: new Set(),
    samples: [] };
  const add = (m, k, v) => m.set(k, (m.get(k) ?? 0n) + v);
  for (const req of requests) {
    const d = req.dictionary ?? {};
    const strs = d.stringTable ?? [];
    const fnName = (fi) => strs[(d.functionTable?.[fi ?? 0] ?? {}).nameStrindex ?? 0] ?? '';
    const locFn = (li) => {
      const loc = d.locationTable?.[li ?? 0] ?? {};
      return loc.lines?.length ? fnName(loc.lines[0].functionIndex) : '';
    };
    for (const rp of req.resourceProfiles ?? []) {
      for (const sp of rp.scopeProfiles ?? []) {
        for (const prof of sp.profiles ?? []) {
          const st = prof.sampleType ?? {};
          const type = `${strs[st.typeStrindex ?? 0]}/${strs[st.unitStrindex ?? 0]}`;
          for (const s of prof.samples ?? []) {
            const locs = d.stackTable?.[s.stackIndex ?? 0]?.locationIndices ?? [];
            const leaf = locs.length ? locFn(locs[0]) : '';
            const fns = locs.map(locFn);
            fns.forEach((f) => out.functions.add(f));
            const link = s.linkIndex ? d.linkTable[s.linkIndex] : null;
            const span = link?.spanId ?? '';
            const v = (s.values ?? []).reduce((a, x) => a + BigInt(x), 0n);
            add(out.byType, type, v);
            add(out.byFn, `${type}|${leaf}`, v);
            if (span) add(out.bySpan, `${type}|${span}`, v);
            const labels = Object.fromEntries((s.attributeIndices ?? []).map((i) => {
              const a = d.attributeTable[i];
              return [strs[a.keyStrindex ?? 0], a.value?.stringValue ?? strs[a.value?.stringValueStrindex ?? 0]];
            }));
            out.samples.push({ type, span, traceId: link?.traceId ?? '', fns, value: v, labels,
              service: (rp.resource?.attributes ?? []).find((a) => a.key === 'service.name')
                ?.value?.stringValue });
          }
        }
      }
    }
  }
  return out;
}

export function loadProtos(files) {
  const root = new protobuf.Root();
  root.resolvePath = protoFile;
  root.loadSync(files);
  return root;
}

// `resource` is a service name or a map of resource attributes.
export function tracerProvider(resource, exporter) {
  const attrs = typeof resource === 'string' ? { 'service.name': resource } : resource;
  return new BasicTracerProvider({
    resource: resourceFromAttributes(attrs),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
}

export function exportSpans(exporter, spans) {
  return new Promise((resolve) => exporter.export(spans, resolve));
}

export function burnCpuInCheckout(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) for (let i = 0; i < 10000; i++) x += Math.sqrt(i * x + 1);
  return x;
}

export function burnCpuInPricing(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) for (let i = 0; i < 10000; i++) x += Math.sin(i + x);
  return x;
}

// An application instrumented with OpenTelemetry (spans over OTLP/HTTP
// protobuf to otlpPort) and the Pyroscope SDK (wall profile with CPU time to
// pyroPort). Three `GET /checkout/:id` server spans (rootAttributes), each
// with a `price items` child; each span's CPU work (checkoutMs(r) and 250 ms)
// runs inside Pyroscope.wrapWithLabels({span_id}), as span-profile
// integrations do. Profiling goes on 1.5 s past the last span's end (beyond
// the correlation's max_clock_skew, so the profile covers every span); the
// one upload is at Pyroscope.stopWallProfiling(). Resolves with the
// provider (the caller shuts it down) and {traceId, rootId, childId} of each
// request.
export async function runCheckoutApp({
  service, otlpPort, pyroPort, tracerName, rootAttributes, checkoutMs,
  tags, labels = () => ({}), // the SDK's tags, and more pprof labels per (request, 'root' | 'child')
}) {
  // Loaded here only: a native profiler that the other tests do not need.
  const { default: Pyroscope } = await import('@pyroscope/nodejs');
  const provider = tracerProvider(service, new OTLPTraceExporter({
    url: `http://127.0.0.1:${otlpPort}/v1/traces`,
  }));
  const tracer = provider.getTracer(tracerName);
  Pyroscope.init({
    serverAddress: `http://127.0.0.1:${pyroPort}`,
    appName: service,
    flushIntervalMs: 60000, // one upload, at stop()
    wall: { collectCpuTime: true },
    ...(tags ? { tags } : {}),
  });
  Pyroscope.startWallProfiling();
  const requests = [];
  for (let r = 0; r < 3; r++) {
    const root = tracer.startSpan('GET /checkout/:id', { kind: SpanKind.SERVER, attributes: rootAttributes });
    const rootId = root.spanContext().spanId;
    Pyroscope.wrapWithLabels({ ...labels(r, 'root'), span_id: rootId },
      () => burnCpuInCheckout(checkoutMs(r)));
    const ctx = trace.setSpan(context.active(), root);
    const child = tracer.startSpan('price items', {}, ctx);
    const childId = child.spanContext().spanId;
    Pyroscope.wrapWithLabels({ ...labels(r, 'child'), span_id: childId }, () => burnCpuInPricing(250));
    child.end();
    root.end();
    requests.push({ traceId: root.spanContext().traceId, rootId, childId });
  }
  await provider.forceFlush();
  await sleep(1500);
  await Pyroscope.stopWallProfiling(); // uploads the wall profile (span_id labels)
  return { provider, requests };
}
