// store_web_bench.test.mjs: how fast the web view draws big answers, in
// headless chromium.
//   - a trace of 10,000 spans (OTLP/JSON, a tree four wide) -> the waterfall;
//   - a flame graph of 100,000 distinct stacks (Pyroscope /ingest, folded
//     lines, a tree ten wide and five deep) -> the service flame graph.
// Each is measured three times: the page's own drawing time (data in hand
// to DOM built, window.__proflink) and the time from navigation to the view
// being drawn (API query, transfer, JSON parse and drawing). Both drawing
// times must stay under 1 s. OTLP posts sent while four big flame graph
// queries run finish before the queries do: the API's thread does not hold
// up the pipeline's loop. Figures are printed (docs/PERFORMANCE.md).
//
// Run: cd tests/interop && PROFLINK_BIN=../../build/proflink node --test store_web_bench.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { freePort, startProflink, until } from './lib/common.mjs';
import { ARTIFACTS, launch, ready } from './lib/browser.mjs';

const SPANS = 10000;
const WIDE = 10; // flame graph: 10^5 distinct leaf stacks
const RUNS = 3;

let pl;
let browser;
after(async () => {
  await browser?.close().catch(() => {});
  pl?.child.kill('SIGKILL');
});

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const hex = (n) => crypto.randomBytes(n).toString('hex');

async function post(port, p, body, type) {
  const r = await fetch(`http://127.0.0.1:${port}${p}`, { method: 'POST', headers: { 'content-type': type }, body });
  assert.equal(r.status, 200, await r.text());
}

test('web view speed: 10,000-span waterfall and 100,000-stack flame graph', { timeout: 300000 }, async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-webbench-'));
  const [otlpPort, pyroPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const yaml = [
    'receivers:',
    '  otlp:',
    '    protocols:',
    `      http: { endpoint: "127.0.0.1:${otlpPort}" }`,
    '  pyroscope:',
    `    endpoint: "127.0.0.1:${pyroPort}"`,
    'exporters:',
    '  sqlite:',
    `    path: "${path.join(dir, 'bench.db')}"`,
    `    api: { endpoint: "127.0.0.1:${apiPort}" }`,
    'service:',
    '  pipelines:',
    '    traces: { receivers: [otlp], exporters: [sqlite] }',
    '    profiles: { receivers: [pyroscope], exporters: [sqlite] }',
    '',
  ].join('\n');
  pl = await startProflink(yaml, { dir, ports: [otlpPort, pyroPort, apiPort] });
  const base = `http://127.0.0.1:${apiPort}`;

  // ---- one trace of 10,000 spans ----
  const traceId = hex(16);
  const ids = Array.from({ length: SPANS }, () => hex(8));
  const t0 = BigInt(Date.now() - 5000) * 1000000n;
  const services = ['gateway', 'orders', 'payments', 'inventory', 'search'];
  for (let from = 0; from < SPANS; from += 2500) {
    const spans = [];
    for (let i = from; i < Math.min(SPANS, from + 2500); i++) {
      const start = t0 + BigInt(i) * 100000n;
      spans.push({
        traceId, spanId: ids[i], parentSpanId: i ? ids[Math.floor((i - 1) / 4)] : undefined,
        name: `op-${i % 37}`, kind: i ? 1 : 2,
        startTimeUnixNano: String(start), endTimeUnixNano: String(start + BigInt(1000000 + (i % 97) * 10000)),
        status: i % 500 === 7 ? { code: 2, message: 'boom' } : {},
        attributes: [{ key: 'i', value: { intValue: String(i) } }],
      });
    }
    // one resource per service keeps the span's service in the store
    const byService = services.map((svc, k) => ({
      resource: { attributes: [{ key: 'service.name', value: { stringValue: svc } }] },
      scopeSpans: [{ scope: { name: 'bench' }, spans: spans.filter((_, j) => (from + j) % services.length === k) }],
    }));
    await post(otlpPort, '/v1/traces', JSON.stringify({ resourceSpans: byService }), 'application/json');
  }

  // ---- 100,000 distinct stacks ----
  const lines = [];
  const now = Math.floor(Date.now() / 1000);
  for (let n = 0; n < WIDE ** 5; n++) {
    const frames = ['main'];
    let x = n;
    for (let level = 0; level < 5; level++) {
      frames.push(`pkg${level}.fn${x % WIDE}`);
      x = Math.floor(x / WIDE);
    }
    lines.push(`${frames.join(';')} ${1 + (n % 13)}`);
  }
  await post(pyroPort, `/ingest?name=flamebench.cpu&from=${now - 10}&until=${now}&format=folded&sampleRate=100&spyName=gospy`,
    lines.join('\n') + '\n', 'text/plain');

  await until(async () => {
    const t = await fetch(`${base}/api/traces/${traceId}?top=1`).then((r) => (r.ok ? r.json() : null)).catch(() => null);
    return t && t.spans.length === SPANS;
  }, 60000, 200);
  let stacks = 0;
  await until(async () => {
    const f = await fetch(`${base}/api/flamegraph?service=flamebench&since=1h&format=json`).then((r) => r.json()).catch(() => null);
    stacks = f ? f.stacks : 0;
    return stacks === WIDE ** 5;
  }, 60000, 500);
  assert.equal(stacks, WIDE ** 5, 'distinct stacks stored');

  // the API alone, for the record
  const apiMs = async (url) => {
    const xs = [];
    for (let r = 0; r < RUNS; r++) {
      const s = Date.now();
      await fetch(url).then((x) => x.arrayBuffer());
      xs.push(Date.now() - s);
    }
    return median(xs);
  };
  const apiTrace = await apiMs(`${base}/api/traces/${traceId}?top=5`);
  const apiFlame = await apiMs(`${base}/api/flamegraph?service=flamebench&since=1h&format=json`);
  console.log(`query API: trace of ${SPANS} spans ${apiTrace} ms, flame graph of ${WIDE ** 5} stacks ${apiFlame} ms`);

  // Ingestion while the API is busy: four big flame graph queries (served
  // one after another on the API's thread) and, meanwhile, small OTLP
  // posts on the pipeline's loop. The posts must not wait for the queries.
  const t0q = Date.now();
  const queries = Promise.all(Array.from({ length: 4 }, () =>
    fetch(`${base}/api/flamegraph?service=flamebench&since=1h&format=json`).then((r) => r.arrayBuffer())))
    .then(() => Date.now() - t0q);
  const postMs = [];
  for (let i = 0; i < 10; i++) {
    const s = Date.now();
    const span = { traceId: hex(16), spanId: hex(8), name: 'during-query', kind: 2,
      startTimeUnixNano: String(t0), endTimeUnixNano: String(t0 + 1000000n) };
    await post(otlpPort, '/v1/traces', JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [span] }] }] }), 'application/json');
    postMs.push(Date.now() - s);
  }
  const postsDone = Date.now() - t0q;
  const queriesDone = await queries;
  console.log(`while 4 flame graph queries ran (${queriesDone} ms): 10 OTLP posts took ${postsDone} ms, ` +
    `median ${median(postMs)} ms, max ${Math.max(...postMs)} ms each`);
  assert.ok(postsDone < queriesDone, `ingestion went on during the queries (${postsDone} < ${queriesDone} ms)`);

  browser = await launch();
  const page = await browser.newPage();
  const measure = async (url, sel, key) => {
    const draws = [], totals = [];
    for (let r = 0; r < RUNS; r++) {
      await page.goto('about:blank');
      const start = Date.now();
      await page.goto(url);
      await page.waitForSelector(sel, { timeout: 60000 });
      await ready(page);
      totals.push(Date.now() - start);
      draws.push(await page.evaluate((k) => window.__proflink[k], key));
    }
    return { draw: median(draws), total: median(totals), draws, totals };
  };

  const wf = await measure(`${base}/#/trace/${traceId}`, '#waterfall .wf-row', 'waterfallMs');
  assert.equal(await page.$eval('#waterfall', (w) => Number(w.dataset.rows)), SPANS);
  // scrolled to the end, the last spans are drawn (rows are drawn as they come into view)
  await page.$eval('#waterfall', (w) => { w.scrollTop = w.scrollHeight; });
  await page.waitForFunction(() => document.querySelector('#waterfall .wf-row:last-child').style.top === `${(10000 - 1) * 22}px`);
  await page.screenshot({ path: path.join(ARTIFACTS, 'bench-waterfall.png') });
  const fg = await measure(`${base}/#/flame?service=flamebench&since=1h`, '#flame-box .fg-node', 'flameMs');
  const drawn = await page.$$eval('#flame-box .fg-node', (n) => n.length);
  await page.screenshot({ path: path.join(ARTIFACTS, 'bench-flamegraph.png') });

  console.log(`web view: trace of ${SPANS} spans: waterfall drawn in ${wf.draw.toFixed(0)} ms ` +
    `(median of ${RUNS}: ${wf.draws.map((x) => x.toFixed(0))}), navigation to drawn ${wf.total} ms (${wf.totals})`);
  console.log(`web view: flame graph of ${WIDE ** 5} distinct stacks: drawn in ${fg.draw.toFixed(0)} ms ` +
    `(${fg.draws.map((x) => x.toFixed(0))}; ${drawn} frames wide enough to draw), navigation to drawn ${fg.total} ms (${fg.totals})`);
  assert.ok(wf.draw < 1000, `waterfall of ${SPANS} spans drawn in ${wf.draw} ms`);
  assert.ok(fg.draw < 1000, `flame graph of ${WIDE ** 5} stacks drawn in ${fg.draw} ms`);

  const { code } = await pl.stop();
  assert.equal(code, 0, pl.log);
  fs.rmSync(dir, { recursive: true, force: true });
});
