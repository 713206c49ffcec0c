// bench_exporters.mjs: OTLP/HTTP in -> otlphttp out to a local sink, and
// what it costs proflink: spans per CPU-second of the proflink process
// (user + system time from /proc/<pid>/stat), with the in-memory sending
// queue and with the persistent (SQLite) queue.
//
// One node process is both the load generator (pre-encoded requests over
// keep-alive connections, fixed concurrency) and the sink (answers 200 with
// an empty partial_success, counts requests). Only proflink's CPU time is
// measured, so the load generator and sink running on the same cores lower
// wall-clock throughput but not the per-CPU-second figure.
//
// Usage: node tests/bench/bench_exporters.mjs [--bin build/proflink]
//        [--requests 2000] [--spans 200] [--concurrency 8] [--runs 3]
//        [--compression gzip] [--workers N]
// --workers sets service.workers (default: proflink's own, one per CPU);
// --workers 1 is the single-loop figure the headline table records.
import http from 'node:http';
import net from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
const require = createRequire(path.join(repo, 'tests/interop/package.json'));
const protobuf = require('protobufjs');

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const BIN = path.resolve(args.bin || process.env.PROFLINK_BIN || path.join(repo, 'build/proflink'));
const REQUESTS = Number(args.requests || 2000);
const SPANS = Number(args.spans || 200);
const CONCURRENCY = Number(args.concurrency || 8);
const RUNS = Number(args.runs || 3);
const COMPRESSION = args.compression || 'gzip';
const WORKERS = args.workers; // undefined: proflink's default
const CLK_TCK = 100; // sysconf(_SC_CLK_TCK) on Linux

// The build's proto/ (OTLP signal files with their envelope stamped in),
// then the source's: see tests/interop/lib/proflink.mjs.
const PROTO_DIRS = [path.join(path.dirname(BIN), 'proto'), path.join(repo, 'proto')];
const root = new protobuf.Root();
root.resolvePath = (o, t) => (path.isAbsolute(t) ? t
  : PROTO_DIRS.map((d) => path.join(d, t)).find((f) => fs.existsSync(f)) || path.join(PROTO_DIRS[1], t));
root.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto');
const Req = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');

function makeRequest(n) {
  const traceId = crypto.randomBytes(16);
  const spans = [];
  for (let i = 0; i < n; i++) {
    spans.push({
      traceId, spanId: crypto.randomBytes(8), name: `GET /api/item/${i % 17}`, kind: 2,
      startTimeUnixNano: '1700000000000000000', endTimeUnixNano: '1700000000250000000',
      attributes: [
        { key: 'http.route', value: { stringValue: '/api/item/:id' } },
        { key: 'http.method', value: { stringValue: 'GET' } },
        { key: 'http.status_code', value: { intValue: 200 } },
        { key: 'net.peer.name', value: { stringValue: `backend-${i % 5}.internal` } },
      ],
      status: { code: 1 },
    });
  }
  return Buffer.from(Req.encode(Req.fromObject({ resourceSpans: [{
    resource: { attributes: [{ key: 'service.name', value: { stringValue: 'bench' } }] },
    scopeSpans: [{ scope: { name: 'bench' }, spans }] }] })).finish());
}

const freePort = () => new Promise((resolve) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK; // utime + stime
}

async function runOnce(persistent, body) {
  let sinkRequests = 0;
  const sink = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      sinkRequests++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' });
      res.end(Buffer.from([0x0a, 0x00]));
    });
  });
  sink.keepAliveTimeout = 60000;
  await new Promise((r) => sink.listen(0, '127.0.0.1', r));
  const sinkPort = sink.address().port;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-bench-'));
  const port = await freePort();
  const metricsPort = await freePort();
  const queue = persistent ? `, storage: "${dir}/queue/"` : '';
  fs.writeFileSync(path.join(dir, 'c.yaml'), [
    'receivers:', '  otlp:', '    protocols:', '      http:', `        endpoint: 127.0.0.1:${port}`,
    'exporters:', '  otlphttp:', `    endpoint: http://127.0.0.1:${sinkPort}`,
    `    compression: ${COMPRESSION}`,
    `    sending_queue: { queue_size: 5000${queue} }`,
    'service:', ...(WORKERS ? [`  workers: ${WORKERS}`] : []), '  telemetry:', '    logs: { level: warn }', `    metrics: { address: "127.0.0.1:${metricsPort}" }`,
    '  pipelines:', '    traces: { receivers: [otlp], exporters: [otlphttp] }', ''].join('\n'));
  const child = spawn(BIN, ['--config', path.join(dir, 'c.yaml')], { stdio: ['ignore', 'ignore', 'inherit'] });
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise((r) => { const s = net.connect(port, '127.0.0.1'); s.on('connect', () => { s.destroy(); r(true); }); s.on('error', () => r(false)); });
    if (ok) break;
    await sleep(25);
  }
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const post = () => new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/v1/traces', method: 'POST', agent,
      headers: { 'content-type': 'application/x-protobuf', 'content-length': body.length } },
    (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); });
    req.on('error', reject);
    req.end(body);
  });
  // warm-up
  for (let i = 0; i < 20; i++) await post();
  while (sinkRequests < 20) await sleep(5);
  const cpu0 = cpuSeconds(child.pid);
  const t0 = process.hrtime.bigint();
  let sent = 0, refused = 0, next = 0;
  const worker = async () => {
    while (next < REQUESTS) {
      next++;
      let status;
      while ((status = await post()) !== 200) { refused++; await sleep(2); }
      sent++;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  while (sinkRequests < 20 + REQUESTS) await sleep(2);
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = cpuSeconds(child.pid) - cpu0;
  child.kill('SIGTERM');
  await new Promise((r) => child.on('exit', r));
  agent.destroy();
  await new Promise((r) => sink.close(r));
  fs.rmSync(dir, { recursive: true, force: true });
  const spans = REQUESTS * SPANS;
  return { spansPerCpuSecond: spans / cpu, spansPerSecond: spans / wall, cpu, wall, refused };
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

const body = makeRequest(SPANS);
console.log(`proflink ${BIN}`);
console.log(`${REQUESTS} requests x ${SPANS} spans (${body.length} bytes each), concurrency ${CONCURRENCY}, ` +
  `compression ${COMPRESSION}, ${RUNS} runs, ${os.cpus().length} CPUs, workers ${WORKERS || 'default'}`);
const results = {};
for (const mode of ['memory', 'persistent']) {
  const runs = [];
  for (let i = 0; i < RUNS; i++) {
    const r = await runOnce(mode === 'persistent', body);
    runs.push(r);
    console.log(`  ${mode.padEnd(10)} run ${i + 1}: ${Math.round(r.spansPerCpuSecond)} spans/CPU-s, ` +
      `${Math.round(r.spansPerSecond)} spans/s wall, cpu ${r.cpu.toFixed(2)} s, wall ${r.wall.toFixed(2)} s, refused ${r.refused}`);
  }
  results[mode] = { cpu: median(runs.map((r) => r.spansPerCpuSecond)), wall: median(runs.map((r) => r.spansPerSecond)) };
}
const cost = 1 - results.persistent.cpu / results.memory.cpu;
console.log(`median spans per CPU-second: memory ${Math.round(results.memory.cpu)}, persistent ${Math.round(results.persistent.cpu)} ` +
  `(persistent queue costs ${(cost * 100).toFixed(1)} %)`);
console.log(`median spans per second (wall): memory ${Math.round(results.memory.wall)}, persistent ${Math.round(results.persistent.wall)}`);
