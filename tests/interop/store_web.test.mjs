// store_web.test.mjs: the store's web view in a real browser.
//
// A store is filled the way a user fills it: spans from the OpenTelemetry JS
// SDK (OTLP/HTTP) and a wall profile from the real @pyroscope/nodejs SDK
// (span_id labels, uploaded at stop(); SDK defaults otherwise) go through the
// correlation processor into the sqlite exporter. Debian's chromium, driven
// headless by puppeteer-core, then opens the page on the exporter's API
// address and reads what a user would read:
//   - the search page lists the three requests with duration and time, the
//     link ratio per service and the status strip;
//   - a trace shows its waterfall (root, child at depth 1), a click on the
//     child shows its details and a flame graph whose frames and table name
//     the child's own function with a time in ms, not a count;
//   - "with descendants" on the root adds the child's function; the search
//     box highlights frames; the profile type selector lists the types;
//   - a search with a minimum duration narrows the list;
//   - a diff of two spans colours frames red and green;
//   - the pprof download is a gzipped pprof.
// A screenshot of each view is written to tests/interop/artifacts/ (kept by
// CI as build artifacts).
//
// Run: cd tests/interop && PROFLINK_BIN=../../build/proflink node --test store_web.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { ARTIFACTS, launch, ready } from './lib/browser.mjs';
import { runCheckoutApp, until } from './lib/common.mjs';
import { startStore } from './lib/store.mjs';

const SERVICE = 'web-shop';

let pl;
let browser;
after(async () => {
  await browser?.close().catch(() => {});
  pl?.child.kill('SIGKILL');
});

const texts = (page, sel) => page.$$eval(sel, (els) => els.map((e) => e.textContent.trim()));

test('the web view in chromium: search, trace, span flame graph, search, diff', { timeout: 180000 }, async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  let dir, otlpPort, pyroPort, apiPort;
  ({ pl, dir, otlpPort, pyroPort, apiPort } = await startStore({ prefix: 'proflink-web-' }));
  const base = `http://127.0.0.1:${apiPort}`;

  const { provider, requests } = await runCheckoutApp({
    service: SERVICE, otlpPort, pyroPort, tracerName: 'store-web',
    rootAttributes: { 'http.route': '/checkout/:id' },
    checkoutMs: (r) => 200 + 100 * r,
  });
  await provider.shutdown();

  // Stored, and the child spans show their samples' time.
  let listed;
  assert.ok(await until(async () => {
    listed = await fetch(`${base}/api/traces?service=${SERVICE}`).then((r) => r.json()).catch(() => null);
    if (!listed || listed.traces.length !== 3) return false;
    const trees = await Promise.all(requests.map((r) => fetch(`${base}/api/traces/${r.traceId}`).then((x) => x.json())));
    return trees.every((t) => t.spans.length === 2 && t.spans.some((s) => s.time && s.time.value > 0));
  }, 60000, 250), `stored with samples: ${JSON.stringify(listed)} (log: ${pl.log})`);

  browser = await launch();
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });

  // ---- the search page ----
  await page.goto(`${base}/`);
  await ready(page);
  await page.waitForSelector('#traces tr.trace-row');
  const roots = await texts(page, '#traces td.root');
  assert.deepEqual(roots.map((r) => r.replace(/\s+error$/, '')), Array(3).fill('GET /checkout/:id'));
  const durations = await page.$$eval('#traces tr.trace-row', (rows) => rows.map((r) => r.dataset.trace));
  assert.deepEqual(new Set(durations), new Set(requests.map((r) => r.traceId)));
  const times = await texts(page, '#traces td.time');
  assert.ok(times.every((t) => /^\d+(\.\d+)?(ns|us|ms|s)( wall)?$/.test(t)), `times are durations: ${times}`);
  await page.waitForSelector('#link-ratio tr[data-service]');
  const link = await page.$eval(`#link-ratio tr[data-service="${SERVICE}"]`, (tr) => [...tr.cells].map((c) => c.textContent.trim()));
  assert.equal(link[1], '6', 'six spans of the service');
  assert.ok(Number(link[2]) >= 3, `spans with a profile: ${link}`);
  assert.match(link[3], /%$/);
  await page.waitForFunction(() => document.querySelector('#st-size'), { timeout: 10000 });
  assert.match(await page.$eval('#st-size', (e) => e.textContent), /\d+(\.\d+)? (B|KiB|MiB)/);
  assert.match(await page.$eval('#st-link', (e) => e.textContent), /^\d+(\.\d+)?%$/);
  await page.screenshot({ path: path.join(ARTIFACTS, 'search.png') });

  // ---- a trace: waterfall, click the child span ----
  const slowest = listed.traces[0].trace_id;
  const req = requests.find((r) => r.traceId === slowest);
  await page.click(`#traces tr[data-trace="${slowest}"]`);
  await page.waitForSelector('#waterfall .wf-row');
  await ready(page);
  const rows = await page.$$eval('#waterfall .wf-row', (rs) => rs.map((r) => ({ id: r.dataset.span, name: r.querySelector('.wf-name').firstChild.textContent })));
  assert.deepEqual(rows, [{ id: req.rootId, name: 'GET /checkout/:id' }, { id: req.childId, name: 'price items' }]);
  const bars = await page.$$eval('#waterfall .wf-bar', (bs) => bs.map((b) => parseFloat(b.style.width)));
  assert.ok(bars[0] > 90 && bars[1] > 0 && bars[1] < bars[0], `duration bars ${bars}`);
  await page.click(`#waterfall .wf-row[data-span="${req.childId}"]`);
  await page.waitForSelector('#span-flame #flamegraph .fg-node');
  const spanTime = await page.$eval('#span-time', (e) => e.textContent);
  assert.match(spanTime, /^\d+(\.\d+)?(us|ms|s)( wall)? \((cpu|wall)\)$/, `the span's time: ${spanTime}`);
  const frames = await page.$$eval('#span-flame .fg-node', (ns) => ns.map((n) => n.dataset.name));
  assert.ok(frames.some((f) => f.includes('burnCpuInPricing')), `frames: ${frames.slice(0, 20)}`);
  assert.ok(!frames.some((f) => f.includes('burnCpuInCheckout')), 'only the span\'s own samples');
  const fnRows = await page.$$eval('#fn-table tbody tr', (rs) => rs.map((r) => ({ name: r.dataset.fn, self: r.querySelector('.self').textContent, total: r.querySelector('.total').textContent })));
  const pricing = fnRows.find((r) => r.name.includes('burnCpuInPricing'));
  assert.ok(pricing, 'the function table lists the span\'s function');
  assert.match(pricing.total, /^\d+(\.\d+)?(us|ms|s)$/, `a time, not a count: ${pricing.total}`);
  const info = await page.$eval('#span-flame #fg-info', (e) => e.textContent);
  assert.match(info, /^total \d+(\.\d+)?(us|ms|s) \((cpu|wall), nanoseconds\)$/, info);
  const types = await page.$$eval('#fg-type option', (os) => os.map((o) => o.value));
  assert.ok(types.includes('cpu') || types.includes('wall'), `types: ${types}`);
  // hover a frame: its value and share
  const node = await page.$('#span-flame .fg-node[data-name*="burnCpuInPricing"]');
  await node.hover();
  assert.match(await page.$eval('#span-flame #fg-info', (e) => e.textContent), /burnCpuInPricing.*: \d+(\.\d+)?(us|ms|s) \(\d+(\.\d)?% of total\)/);
  // search highlights
  await page.type('#span-flame #fg-search', 'Pricing');
  const matched = await page.$$eval('#span-flame .fg-node.match', (ns) => ns.map((n) => n.dataset.name));
  assert.ok(matched.length >= 1 && matched.every((n) => n.includes('Pricing')), `matches: ${matched}`);
  assert.match(await page.$eval('#fg-match', (e) => e.textContent), /^\d+ frames match$/);
  await page.screenshot({ path: path.join(ARTIFACTS, 'trace.png') });

  // the root with its descendants: both functions
  await page.click(`#waterfall .wf-row[data-span="${req.rootId}"]`);
  await page.waitForSelector('#with-descendants');
  await page.waitForFunction(() => document.querySelector('#span-flame #flamegraph .fg-node, #span-flame #fg-empty'));
  await page.click('#with-descendants');
  await page.waitForFunction(() => [...document.querySelectorAll('#span-flame .fg-node')].some((n) => n.dataset.name.includes('burnCpuInPricing')), { timeout: 10000 });
  const both = await page.$$eval('#span-flame .fg-node', (ns) => ns.map((n) => n.dataset.name));
  assert.ok(both.some((f) => f.includes('burnCpuInCheckout')) && both.some((f) => f.includes('burnCpuInPricing')), 'with descendants');
  // zoom into a frame: it becomes the full width
  const width = await page.$eval('#span-flame #flamegraph', (e) => e.clientWidth);
  await page.click('#span-flame .fg-node[data-name*="burnCpuInCheckout"]');
  const zoomed = await page.$eval('#span-flame .fg-node', (n) => [n.dataset.name, parseFloat(n.style.width)]);
  assert.match(zoomed[0], /burnCpuInCheckout/);
  assert.ok(Math.abs(zoomed[1] - width) < 2, `zoomed to full width: ${zoomed} of ${width}`);
  const pprofHref = await page.$eval('#span-flame a.download-pprof', (a) => a.href);
  const pprof = Buffer.from(await fetch(pprofHref).then((r) => r.arrayBuffer()));
  assert.ok(pprof[0] === 0x1f && pprof[1] === 0x8b, 'the pprof download is gzipped');
  const sp = await fetch(pprofHref.replace('format=pprof', 'format=speedscope')).then((r) => r.json());
  assert.ok(sp.shared.frames.some((f) => f.name.includes('burnCpuInPricing')), 'speedscope frames');

  // ---- a search: minimum duration ----
  await page.goto(`${base}/#/`);
  await ready(page);
  const minDur = Math.round((listed.traces[0].duration_ns + listed.traces[1].duration_ns) / 2 / 1e6);
  await page.type('#search-form input[name="min_duration"]', `${minDur}ms`);
  await page.click('#search-form button[type="submit"]');
  await page.waitForFunction(() => location.hash.includes('min_duration'));
  await ready(page);
  await page.waitForSelector('#traces tr.trace-row');
  const narrowed = await page.$$eval('#traces tr.trace-row', (rs) => rs.map((r) => r.dataset.trace));
  assert.deepEqual(narrowed, [slowest], 'only the slowest trace is that slow');
  await page.goto(`${base}/#/?since=1h&min_duration=100s`);
  await ready(page);
  assert.equal(await page.$eval('#no-traces', (e) => e.textContent), 'No traces match.');

  // ---- a diff: the root's own samples against the child's ----
  await page.goto(`${base}/#/diff?a=span:${req.rootId}&b=span:${req.childId}`);
  await ready(page);
  await page.waitForSelector('#diff-box .fg-node');
  const worse = await page.$$eval('#diff-box .fg-node.worse', (ns) => ns.map((n) => n.dataset.name));
  const better = await page.$$eval('#diff-box .fg-node.better', (ns) => ns.map((n) => n.dataset.name));
  assert.ok(worse.some((n) => n.includes('burnCpuInPricing')), `red (more after): ${worse}`);
  assert.ok(better.some((n) => n.includes('burnCpuInCheckout')), `green (less after): ${better}`);
  const red = await page.$eval('#diff-box .fg-node.worse', (n) => getComputedStyle(n).backgroundColor);
  assert.match(red, /^rgba?\(220, 40, 40/);
  await page.screenshot({ path: path.join(ARTIFACTS, 'diff.png') });

  // ---- a service flame graph over a time range ----
  await page.goto(`${base}/#/flame?service=${SERVICE}&since=1h`);
  await ready(page);
  await page.waitForSelector('#flame-box .fg-node');
  const svcFrames = await page.$$eval('#flame-box .fg-node', (ns) => ns.map((n) => n.dataset.name));
  assert.ok(svcFrames.some((f) => f.includes('burnCpuInCheckout')) && svcFrames.some((f) => f.includes('burnCpuInPricing')));
  await page.screenshot({ path: path.join(ARTIFACTS, 'flamegraph.png') });

  assert.deepEqual(errors, [], 'no script errors');
  const { code } = await pl.stop();
  assert.equal(code, 0, pl.log);
  fs.rmSync(dir, { recursive: true, force: true });
});
