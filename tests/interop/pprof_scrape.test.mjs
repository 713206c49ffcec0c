// pprof_scrape.test.mjs: the `pprof_scrape` receiver pulling from a service
// that serves Go's net/http/pprof endpoints.
//
// The service here is a stand-in written in node: /debug/pprof/profile
// honours ?seconds=N (it answers after N seconds, like Go) with a real CPU
// profile (one the Pyroscope Node.js SDK produced, tests/interop/fixtures),
// /debug/pprof/heap and /debug/pprof/goroutine answer with pprofs built
// with pprof-format in Go's shape. proflink scrapes it every second into the
// `file` exporter. Checks: the requested paths (seconds=N), the target's
// labels as resource attributes, totals equal to pprof-format's for each
// profile (the heap's cumulative alloc_* columns, unchanged between scrapes,
// give no delta: only inuse_* is sent; pprof_scrape_delta.test.mjs checks
// deltas against a real Go program), and a dead target that only costs a
// logged failure. A second target has its own interval, extra headers and
// basic auth, a third a bearer token: the requests carry them; a fourth
// answers slower than its own timeout: nothing of it is exported.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test pprof_scrape.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';

import {
  Profile, StringTable, ValueType, Sample, Location, Line, Function as PFunction, Label,
} from 'pprof-format';
import {
  FIXTURES, freePort, mapObj, otlpProfileTotals, readJsonLines as readFileLines, startProflink, until,
} from './lib/common.mjs';
import { profilesToFile } from './lib/yaml.mjs';

const CPU_FIXTURE = fs.readFileSync(path.join(FIXTURES, 'nodejs_wall.pprof.gz'));

// A Go-shaped profile: heap (4 columns, numeric `bytes` label) or goroutine.
function goProfile(kind) {
  const st = new StringTable();
  const fns = ['main.main', 'main.handler', 'runtime.mallocgc', 'runtime.gopark'].map(
    (name, i) => new PFunction({ id: i + 1, name: st.dedup(name), filename: st.dedup('main.go') }));
  const locs = fns.map((f, i) => new Location({ id: 10 + i, line: [new Line({ functionId: f.id, line: 10 * i })] }));
  let sampleType, periodType, period, sample;
  if (kind === 'heap') {
    sampleType = ['alloc_objects/count', 'alloc_space/bytes', 'inuse_objects/count', 'inuse_space/bytes'];
    periodType = ['space', 'bytes'];
    period = 524288;
    sample = [
      new Sample({ locationId: [12, 11, 10], value: [3, 3072, 1, 1024],
        label: [new Label({ key: st.dedup('bytes'), num: 1024, numUnit: st.dedup('bytes') })] }),
      new Sample({ locationId: [12, 10], value: [5, 640, 2, 256] }),
    ];
  } else {
    sampleType = ['goroutine/count'];
    periodType = ['goroutine', 'count'];
    period = 1;
    sample = [new Sample({ locationId: [13, 11, 10], value: [7] }), new Sample({ locationId: [13, 10], value: [2] })];
  }
  const vt = (s) => { const [t, u] = s.split('/'); return new ValueType({ type: st.dedup(t), unit: st.dedup(u) }); };
  const p = new Profile({
    sampleType: sampleType.map(vt), sample, location: locs, function: fns, stringTable: st,
    periodType: new ValueType({ type: st.dedup(periodType[0]), unit: st.dedup(periodType[1]) }),
    period, timeNanos: BigInt(Date.now()) * 1000000n,
  });
  return zlib.gzipSync(Buffer.from(p.encode()));
}

function totalsByType(buf) {
  const p = Profile.decode(zlib.gunzipSync(buf));
  const str = (i) => p.stringTable.strings[Number(i)];
  const out = {};
  for (const s of p.sample)
    s.value.forEach((v, i) => {
      const k = `${str(p.sampleType[i].type)}/${str(p.sampleType[i].unit)}`;
      out[k] = String(BigInt(out[k] ?? 0) + BigInt(v));
    });
  return out;
}

// Totals per sample type of one exported request.
const otlpTotals = (req) => mapObj(otlpProfileTotals([req]).byType);

let pl, tmp, service;
const requests = [];
const headersSeen = []; // [url, headers] of every request

before(async () => {
  const [svcPort, metricsPort, deadPort] = await Promise.all([freePort(), freePort(), freePort()]);
  service = http.createServer((req, res) => {
    headersSeen.push([req.url, req.headers]);
    if (req.headers['x-target'] && req.headers['x-target'] !== 'plain') {
      const answer = () => {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        res.end(goProfile('goroutine'));
      };
      if (req.headers['x-target'] === 'slow') setTimeout(answer, 3000);
      else answer();
      return;
    }
    requests.push(req.url);
    const url = new URL(req.url, 'http://x');
    const send = (b) => { res.writeHead(200, { 'content-type': 'application/octet-stream' }); res.end(b); };
    if (url.pathname === '/debug/pprof/profile') {
      const secs = Number(url.searchParams.get('seconds') ?? 30);
      setTimeout(() => send(CPU_FIXTURE), secs * 1000);
    } else if (url.pathname === '/debug/pprof/heap') send(goProfile('heap'));
    else if (url.pathname === '/debug/pprof/goroutine') send(goProfile('goroutine'));
    else { res.writeHead(404); res.end('404 page not found\n'); }
  });
  await new Promise((r) => service.listen(svcPort, '127.0.0.1', r));
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-scrape-'));
  pl = await startProflink(`
receivers:
  pprof_scrape:
    interval: 1s
    cpu_seconds: 1
    profiles: [cpu, heap, goroutine]
    targets:
      - endpoint: http://127.0.0.1:${svcPort}
        labels: { service.name: scraped-svc, env: test }
      - endpoint: http://127.0.0.1:${deadPort}
      - endpoint: http://127.0.0.1:${svcPort}/
        labels: { service.name: authed-svc }
        interval: 2s
        timeout: 5s
        headers: { X-Target: basic, X-Tenant: team-a }
        basic_auth: { username: scraper, password: s3cret }
      - endpoint: http://127.0.0.1:${svcPort}
        labels: { service.name: bearer-svc }
        headers: { X-Target: bearer }
        bearer_token: tok-123
      - endpoint: http://127.0.0.1:${svcPort}
        labels: { service.name: slow-svc }
        headers: { X-Target: slow }
        timeout: 1s
${profilesToFile(tmp, metricsPort)}
`, { dir: tmp });
});

after(async () => {
  await pl?.stop(5000);
  service?.close();
  service?.closeAllConnections?.();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

test('scrapes cpu (seconds=N), heap and goroutine with the target labels', async () => {
  const out = path.join(tmp, 'out.jsonl');
  const has = (type) => readFileLines(out).some((r) => otlpTotals(r)[type]);
  assert.ok(await until(() => has('wall/nanoseconds') && has('inuse_space/bytes') && has('goroutine/count'), 15000),
    `profiles arrived; requests: ${requests.join(' ')}\n${pl.log}`);
  assert.ok(requests.includes('/debug/pprof/profile?seconds=1'), requests.join(' '));
  assert.ok(requests.includes('/debug/pprof/heap'));
  assert.ok(requests.includes('/debug/pprof/goroutine'));

  const lines = readFileLines(out).filter((r) => r.resourceProfiles[0].resource.attributes
    .some((a) => a.key === 'service.name' && a.value.stringValue === 'scraped-svc'));
  for (const r of lines) {
    const attrs = Object.fromEntries(r.resourceProfiles[0].resource.attributes.map((a) => [a.key, a.value.stringValue]));
    assert.equal(attrs.env, 'test');
  }
  const cpu = lines.find((r) => otlpTotals(r)['wall/nanoseconds']);
  assert.deepEqual(otlpTotals(cpu), totalsByType(CPU_FIXTURE));
  const heap = lines.find((r) => otlpTotals(r)['inuse_space/bytes']);
  const heapWant = totalsByType(goProfile('heap'));
  assert.deepEqual(otlpTotals(heap), {
    'inuse_objects/count': heapWant['inuse_objects/count'],
    'inuse_space/bytes': heapWant['inuse_space/bytes'],
  });
  const gr = lines.find((r) => otlpTotals(r)['goroutine/count']);
  assert.deepEqual(otlpTotals(gr), { 'goroutine/count': '9' });
  // the numeric heap label survives as an int attribute with its unit
  const dict = heap.dictionary;
  assert.ok(dict.attributeTable.some((a) => dict.stringTable[a.keyStrindex] === 'bytes' &&
    Number(a.value.intValue) === 1024 && dict.stringTable[a.unitStrindex] === 'bytes'));

  // CPU requests never overlap: at most one in flight per second of profile.
  const cpuRequests = requests.filter((u) => u.startsWith('/debug/pprof/profile')).length;
  const heapRequests = requests.filter((u) => u === '/debug/pprof/heap').length;
  assert.ok(cpuRequests <= heapRequests, `cpu ${cpuRequests} <= heap ${heapRequests}`);
  assert.equal(pl.child.exitCode, null, 'proflink still running with a dead target');
});

test('per-target headers, basic and bearer auth, and interval', async () => {
  const of = (t) => headersSeen.filter(([, h]) => h['x-target'] === t);
  assert.ok(await until(() => of('basic').length >= 6 && of('bearer').length >= 6, 15000),
    `requests: ${headersSeen.map(([u, h]) => `${u}:${h['x-target']}`).join(' ')}`);
  for (const [, h] of of('basic')) {
    assert.equal(h.authorization, 'Basic ' + Buffer.from('scraper:s3cret').toString('base64'));
    assert.equal(h['x-tenant'], 'team-a');
  }
  for (const [, h] of of('bearer')) assert.equal(h.authorization, 'Bearer tok-123');
  for (const [, h] of headersSeen.filter(([, x]) => !x['x-target'])) assert.equal(h.authorization, undefined);
  // interval 2s against the receiver's 1s: about half as many requests per profile type
  const perType = (t) => of(t).filter(([u]) => u === '/debug/pprof/heap').length;
  assert.ok(await until(() => perType('bearer') >= 6, 15000));
  const [basic, bearer] = [perType('basic'), perType('bearer')];
  assert.ok(basic >= 2 && basic * 2 <= bearer + 2, `basic ${basic} vs bearer ${bearer}`);
  // a target slower than its own timeout (1s; its answers take 3s): asked, never exported
  assert.ok(of('slow').length >= 1);
  const out = path.join(tmp, 'out.jsonl');
  assert.ok(!readFileLines(out).some((r) => r.resourceProfiles[0].resource.attributes
    .some((a) => a.key === 'service.name' && a.value.stringValue === 'slow-svc')), 'slow target timed out');
});
