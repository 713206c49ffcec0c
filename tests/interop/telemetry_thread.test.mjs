// telemetry_thread.test.mjs: /health and /metrics answer within 100 ms while
// the pipeline's loop decodes the heaviest request the default limits allow
// (issue 12, M4): the telemetry endpoint runs on a thread and loop of its
// own, and so does the Collector-style health_check extension (issue 14).
// The test runs with `service.workers: 1`, so decoding is on the pipeline
// loop as well.
//
// The heavy request is a 16 MiB OTLP/JSON body of small spans (about as
// many spans as the default 40 MiB decode budget lets through), sent four
// times at once; decoding and processing them keeps the pipeline loop busy
// for longer than 150 ms (asserted, so the test cannot pass vacuously on a
// quick machine). Probes run every 10 ms during that time.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build/proflink node --test telemetry_thread.test.mjs

import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import { freePorts, startProflink } from './lib/proflink.mjs';

function heavyBody(limit) {
  const spans = [];
  let i = 0;
  let size = 200;
  for (;;) {
    const s = {
      traceId: i.toString(16).padStart(32, '0'),
      spanId: (i + 1).toString(16).padStart(16, '0'),
      name: `op${i % 100}`,
      kind: 2,
      startTimeUnixNano: '1700000000000000000',
      endTimeUnixNano: '1700000000100000000',
      attributes: [
        { key: 'http.route', value: { stringValue: `/a/b/${i}` } },
        { key: 'n', value: { intValue: String(i) } },
      ],
    };
    size += JSON.stringify(s).length + 1;
    if (size > limit) break;
    spans.push(s);
    i++;
  }
  return Buffer.from(JSON.stringify({
    resourceSpans: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: 'heavy' } }] },
      scopeSpans: [{ scope: { name: 's' }, spans }],
    }],
  }));
}

function timedGet(port, path) {
  const t0 = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      let n = 0;
      res.on('data', (d) => { n += d.length; });
      res.on('end', () => resolve({ status: res.statusCode, ms: Number(process.hrtime.bigint() - t0) / 1e6, bytes: n }));
    }).on('error', reject);
  });
}

function post(port, path, body) {
  const t0 = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', agent: false,
      headers: { 'Content-Type': 'application/json', 'Content-Length': body.length } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('/health, /metrics and the health_check extension stay under 100 ms while a 16 MiB request is processed', async () => {
  const [httpPort, metricsPort, hcPort] = await freePorts(3);
  const p = await startProflink(`
receivers:
  otlp:
    protocols:
      http: { endpoint: 127.0.0.1:${httpPort} }
processors:
  attributes:
    actions: [{ key: touched, value: yes, action: upsert }]
exporters:
  debug: { verbosity: basic }
extensions:
  health_check: { endpoint: 127.0.0.1:${hcPort} }
service:
  workers: 1  # decoding on the pipeline loop too: the busiest it can be
  extensions: [health_check]
  telemetry: { metrics: { address: 127.0.0.1:${metricsPort} } }
  pipelines:
    traces: { receivers: [otlp], processors: [attributes], exporters: [debug] }
`, { ports: [httpPort, metricsPort, hcPort] });
  try {
    const body = heavyBody(16 * 1024 * 1024); // within the 40 MiB decode budget
    const probes = [];
    let done = false;
    // four of them at once: the loop decodes them one after the other
    const heavy = Promise.all([0, 1, 2, 3].map(() => post(httpPort, '/v1/traces', body)))
      .then((all) => ({ status: Math.max(...all.map((a) => a.status)), ms: Math.max(...all.map((a) => a.ms)) }))
      .finally(() => { done = true; });
    const t0 = Date.now();
    let k = 0;
    while (!done) {
      // the telemetry thread's /health and /metrics, and the Collector-style
      // health_check extension on its own thread
      const which = k++ % 3;
      const path = which === 0 ? '/health' : which === 1 ? '/metrics' : 'health_check /';
      const r = await timedGet(which === 2 ? hcPort : metricsPort, which === 2 ? '/' : path);
      probes.push({ path, at: Date.now() - t0, ...r });
      await new Promise((r) => setTimeout(r, 10));
    }
    const res = await heavy;
    assert.equal(res.status, 200);
    // The pipeline loop was busy long enough for the probes to mean something.
    assert.ok(res.ms > 150, `heavy requests took only ${res.ms.toFixed(0)} ms`);
    const during = probes.filter((x) => x.at < res.ms - 50);
    assert.ok(during.length >= 3, `only ${during.length} probes during the request`);
    assert.ok(during.some((x) => x.path === 'health_check /'), 'no health_check probe during the request');
    for (const name of ['/health', '/metrics', 'health_check /']) {
      const ms = during.filter((x) => x.path === name).map((x) => x.ms);
      console.log(`# ${name}: ${ms.length} probes, slowest ${Math.max(...ms).toFixed(1)} ms`);
    }
    console.log(`# heavy requests: ${res.ms.toFixed(0)} ms`);
    for (const x of during) {
      assert.equal(x.status, 200, `${x.path} answered ${x.status}`);
      assert.ok(x.ms < 100, `${x.path} took ${x.ms.toFixed(1)} ms at ${x.at} ms into a ${res.ms.toFixed(0)} ms request`);
    }
    // /metrics during the load is the full text, with the receiver's counters.
    const m = await timedGet(metricsPort, '/metrics');
    assert.ok(m.bytes > 500);
  } finally {
    const r = await p.stop();
    assert.equal(r.code, 0, p.log);
  }
});
