// lib/proflink.mjs: shared helpers of the interop tests.
//
// - freePort(): a fresh loopback port below the ephemeral range (listen, close, reuse the number).
// - startProflink(yaml, {ports}): writes the config to a temp dir, starts the
//   binary (PROFLINK_BIN), waits until every port in `ports` accepts TCP and
//   returns a handle: stop() (SIGTERM, resolves {code, signal}), kill9(),
//   rss() (VmRSS in KiB from /proc), metrics() (the Prometheus text), log.
// - waitFor(cond, ms, what): polls instead of sleeping a fixed time.
// - fake OTLP backends that decode with implementations independent of
//   proflink: grpcBackend() is a real @grpc/grpc-js server with the service
//   loaded by @grpc/proto-loader; httpBackend() is node's http with
//   protobufjs. Both keep every decoded request and the metadata/headers.
// - protobufjs types from the project's .proto files (PROTO_DIRS) and canonical()
//   which flattens an ExportTraceServiceRequest into one record per span
//   (resource, scope, span) keyed by span id, for equality checks.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { spawn, execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repo = path.resolve(here, '../../..');
export const BIN = path.resolve(process.env.PROFLINK_BIN || path.join(repo, 'build/proflink'));
// The .proto files come from two roots, searched in order like protoc's -I:
// the build's proto/ directory (next to the binary, or PROFLINK_PROTO_DIR),
// which holds the OTLP signal files with their envelope stamped in at build
// time (proto/otlp_envelope.py), then the source's proto/ for the rest.
export const PROTO_DIRS = [
  path.resolve(process.env.PROFLINK_PROTO_DIR || path.join(path.dirname(BIN), 'proto')),
  path.join(repo, 'proto'),
];
if (!fs.existsSync(path.join(PROTO_DIRS[0], 'opentelemetry/proto/trace/v1/trace.proto'))) {
  throw new Error(`${PROTO_DIRS[0]} holds no generated .proto files: build proflink first, `
    + 'or set PROFLINK_PROTO_DIR to a build\'s proto/ directory');
}
// protobufjs resolvePath: a file's path in the first root that has it.
export function protoFile(origin, target) {
  if (path.isAbsolute(target)) return target;
  const found = PROTO_DIRS.map((d) => path.join(d, target)).find((f) => fs.existsSync(f));
  return found || path.join(PROTO_DIRS[PROTO_DIRS.length - 1], target);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A port below Linux's ephemeral range (32768 and up by default): the kernel
// also hands ports of that range to outgoing connections, and one of them
// could take the number between this check and proflink's bind.
function tryPort(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

export async function freePort() {
  for (let i = 0; i < 200; i++) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    if (await tryPort(port)) return port;
  }
  throw new Error('no free port in 20000-31999');
}

export async function freePorts(n) {
  const out = [];
  while (out.length < n) {
    const p = await freePort();
    if (!out.includes(p)) out.push(p);
  }
  return out;
}

export async function waitFor(cond, ms = 15000, what = 'condition') {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await sleep(50);
  }
  assert.fail(`timed out waiting for ${what}`);
}

export function canConnect(port) {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1', () => { c.destroy(); resolve(true); });
    c.on('error', () => resolve(false));
  });
}

const running = new Set();
process.on('exit', () => { for (const c of running) try { c.kill('SIGKILL'); } catch { /* gone */ } });

// Starts proflink on `yaml`; `ports` are waited for. `dir` reuses a
// directory (restarts with a persistent queue). `bin` runs another binary
// than BIN (the hostile suite measures the release build).
export async function startProflink(yaml, { ports = [], dir = null, env = {}, bin = BIN } = {}) {
  dir = dir || fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-acc-'));
  const file = path.join(dir, 'collector.yaml');
  fs.writeFileSync(file, yaml);
  const child = spawn(bin, ['--config', file], {
    stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env },
  });
  running.add(child);
  const h = {
    child, dir, log: '', pid: child.pid,
    exited: null,
    rss() {
      try {
        const m = fs.readFileSync(`/proc/${child.pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/);
        return m ? Number(m[1]) : 0;
      } catch { return 0; }
    },
    async stop(ms = 20000) {
      if (child.exitCode !== null || child.signalCode !== null) return h.exited;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), ms);
      const r = await h.exited;
      clearTimeout(t);
      return r;
    },
    async kill9() { child.kill('SIGKILL'); return h.exited; },
    async cleanup() { await h.stop(); fs.rmSync(dir, { recursive: true, force: true }); },
  };
  child.stderr.on('data', (d) => { h.log += d.toString(); if (h.log.length > 1 << 20) h.log = h.log.slice(-(1 << 19)); });
  h.exited = new Promise((resolve) => child.on('exit', (code, signal) => { running.delete(child); resolve({ code, signal }); }));
  const end = Date.now() + 15000;
  for (const p of ports) {
    while (!(await canConnect(p))) {
      if (child.exitCode !== null) assert.fail(`proflink exited ${child.exitCode}: ${h.log}`);
      if (Date.now() > end) { child.kill('SIGKILL'); assert.fail(`port ${p} never listened: ${h.log}`); }
      await sleep(30);
    }
  }
  return h;
}

export function httpGet(port, p) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: p }, (res) => {
      let s = '';
      res.on('data', (d) => { s += d; });
      res.on('end', () => resolve({ status: res.statusCode, body: s }));
    }).on('error', reject);
  });
}

// ---- protobuf types ---------------------------------------------------------

export const protoRoot = new protobuf.Root();
protoRoot.resolvePath = protoFile;
protoRoot.loadSync([
  'opentelemetry/proto/collector/trace/v1/trace_service.proto',
  'opentelemetry/proto/collector/profiles/v1development/profiles_service.proto',
  'push/v1/push.proto',
], { keepCase: false });
export const TraceRequest = protoRoot.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
export const TraceResponse = protoRoot.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse');
export const ProfilesRequest = protoRoot.lookupType('opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest');
export const ProfilesResponse = protoRoot.lookupType('opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceResponse');
export const PushRequest = protoRoot.lookupType('push.v1.PushRequest');

const toObjOpts = { longs: String, bytes: String, enums: Number, defaults: false, arrays: true };

function hexify(o) {
  // bytes come out base64 with bytes:String; ids are compared as hex.
  for (const k of ['traceId', 'spanId', 'parentSpanId']) if (typeof o[k] === 'string') o[k] = Buffer.from(o[k], 'base64').toString('hex');
  return o;
}

function normAttrs(list) {
  return (list || []).map((a) => [a.key, JSON.stringify(a.value ?? {})]).sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
}

function normSpan(s) {
  const o = hexify({ ...s });
  if (o.parentSpanId === '') delete o.parentSpanId;
  if (o.traceState === '') delete o.traceState;
  o.attributes = normAttrs(s.attributes);
  o.events = (s.events || []).map((e) => ({ ...e, attributes: normAttrs(e.attributes), droppedAttributesCount: e.droppedAttributesCount || 0 }));
  o.links = (s.links || []).map((l) => {
    const x = hexify({ ...l, attributes: normAttrs(l.attributes), droppedAttributesCount: l.droppedAttributesCount || 0, flags: l.flags || 0 });
    if (x.traceState === '') delete x.traceState;
    return x;
  });
  o.status = { code: s.status?.code || 0, message: s.status?.message || '' };
  for (const k of ['droppedAttributesCount', 'droppedEventsCount', 'droppedLinksCount']) o[k] = s[k] || 0;
  o.flags = s.flags || 0;
  o.kind = s.kind || 0;
  return o;
}

// Decoded request bytes -> Map(spanId hex -> {resource, scope, span}).
export function canonical(bytes, into = new Map()) {
  const req = TraceRequest.toObject(TraceRequest.decode(bytes), toObjOpts);
  for (const rs of req.resourceSpans || []) {
    const resource = { attributes: normAttrs(rs.resource?.attributes), dropped: rs.resource?.droppedAttributesCount || 0 };
    for (const ss of rs.scopeSpans || []) {
      const scope = { name: ss.scope?.name || '', version: ss.scope?.version || '', attributes: normAttrs(ss.scope?.attributes) };
      for (const s of ss.spans || []) {
        const span = normSpan(s);
        into.set(span.spanId, { resource, scope, span, schemaUrl: ss.schemaUrl || '', resourceSchemaUrl: rs.schemaUrl || '' });
      }
    }
  }
  return into;
}

// Span ids (hex) of a request, with repetitions.
export function spanIds(bytes) {
  const req = TraceRequest.decode(bytes);
  const out = [];
  for (const rs of req.resourceSpans || []) for (const ss of rs.scopeSpans || []) for (const s of ss.spans || []) out.push(Buffer.from(s.spanId).toString('hex'));
  return out;
}

// ---- fake backends ------------------------------------------------------------

class Recorder {
  constructor() {
    this.requests = []; // { bytes, headers, time }
    this.counts = new Map(); // span id -> times accepted
    this.profileRequests = [];
    this.attempts = 0;
  }
  recordTraces(bytes, headers) {
    this.requests.push({ bytes, headers, time: Date.now() });
    for (const id of spanIds(bytes)) this.counts.set(id, (this.counts.get(id) || 0) + 1);
  }
  canonical() {
    const m = new Map();
    for (const r of this.requests) canonical(r.bytes, m);
    return m;
  }
  duplicates() { return [...this.counts.values()].filter((c) => c > 1).length; }
}

// A Tempo-like OTLP/gRPC backend: a real grpc-js server. behaviour(i) may
// return { code, details } to fail call i with a gRPC status, or
// { hang: true } to never answer.
export async function grpcBackend({ behaviour = () => null, port = 0 } = {}) {
  const def = protoLoader.loadSync([
    'opentelemetry/proto/collector/trace/v1/trace_service.proto',
    'opentelemetry/proto/collector/profiles/v1development/profiles_service.proto',
  ], { includeDirs: PROTO_DIRS, keepCase: false, longs: String, bytes: Buffer, defaults: false });
  const rec = new Recorder();
  const hung = [];
  const server = new grpc.Server();
  // Keep the raw request bytes (grpc-js still does framing, decompression,
  // trailers) so they are decoded by the same protobufjs path as the SDK's.
  const raw = (d) => ({ ...d, requestDeserialize: (b) => Buffer.from(b) });
  const traceSvc = def['opentelemetry.proto.collector.trace.v1.TraceService'];
  const profSvc = def['opentelemetry.proto.collector.profiles.v1development.ProfilesService'];
  const handle = (record, respType) => (call, cb) => {
    const i = rec.attempts++;
    const b = behaviour(i, call) || {};
    if (b.hang) { hung.push(() => cb({ code: grpc.status.UNAVAILABLE, details: 'shutdown' })); return; }
    if (b.code) { cb({ code: b.code, details: b.details || 'scripted', metadata: b.metadata }); return; }
    record(call.request, call.metadata.getMap());
    cb(null, {});
  };
  server.addService({ Export: raw(traceSvc.Export) }, { Export: handle((bytes, md) => rec.recordTraces(bytes, md), TraceResponse) });
  server.addService({ Export: raw(profSvc.Export) }, { Export: handle((bytes, md) => rec.profileRequests.push({ bytes, headers: md }), ProfilesResponse) });
  const bound = await new Promise((resolve, reject) => server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  rec.port = bound;
  rec.stop = async () => {
    for (const h of hung.splice(0)) h();
    await new Promise((r) => server.tryShutdown(() => r()));
    server.forceShutdown();
  };
  return rec;
}

// An OTLP/HTTP backend (node http + protobufjs). behaviour(i, req) may return
// { status, headers }, { destroy: true } (cut the connection mid-request),
// { hang: true } (never answer).
export async function httpBackend({ behaviour = () => null, port = 0 } = {}) {
  const rec = new Recorder();
  const hung = [];
  const sockets = new Set();
  const server = http.createServer(async (req, res) => {
    const i = rec.attempts++;
    const b = behaviour(i, req) || {};
    if (b.destroy) { req.socket.destroy(); return; }
    const chunks = [];
    try { for await (const c of req) chunks.push(c); } catch { return; }
    if (b.hang) { hung.push(() => res.destroy()); return; }
    if (b.status && b.status !== 200) {
      res.writeHead(b.status, { 'content-type': 'text/plain', ...(b.headers || {}) });
      res.end(`status ${b.status}`);
      return;
    }
    let body = Buffer.concat(chunks);
    const enc = req.headers['content-encoding'];
    try {
      if (enc === 'gzip') body = zlib.gunzipSync(body);
      else if (enc === 'zstd') body = Buffer.from(execFileSync('zstd', ['-d', '-c'], { input: body }));
      else if (enc && enc !== 'identity') throw new Error(`unknown encoding ${enc}`);
      if (req.url.endsWith('/v1/traces')) rec.recordTraces(body, req.headers);
      else if (req.url.endsWith('/v1development/profiles')) rec.profileRequests.push({ bytes: body, headers: req.headers });
      else throw new Error(`unexpected path ${req.url}`);
    } catch (e) {
      rec.errors = (rec.errors || []).concat(String(e));
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(String(e));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/x-protobuf' });
    res.end(Buffer.from([0x0a, 0x00]));
  });
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  rec.port = server.address().port;
  rec.releaseHung = () => { for (const h of hung.splice(0)) h(); };
  rec.stop = async () => {
    for (const h of hung.splice(0)) h();
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(() => r()));
  };
  return rec;
}

// Posts bytes to proflink's OTLP/HTTP traces path: resolves {status, headers}.
export function postTraces(port, bytes, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port, path: '/v1/traces', method: 'POST',
      headers: { 'content-type': 'application/x-protobuf', 'content-length': bytes.length, ...headers },
    }, (res) => { res.resume(); res.on('end', () => resolve({ status: res.statusCode, headers: res.headers })); });
    req.on('error', reject);
    req.end(bytes);
  });
}
