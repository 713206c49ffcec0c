// pprof_scrape_contention.test.mjs: the pprof_scrape receiver against a real
// Go program with block and mutex profiling on (tests/interop/fixtures/
// gocontend, built here with Debian's golang-go), scraped and pushed to a
// fake Pyroscope by the pyroscope exporter.
//
//   - block and mutex (the same sample types, contentions/count and
//     delay/nanoseconds) reach Pyroscope as two profile names: the pushed
//     type ids are block:contentions:count:contentions:count,
//     block:delay:nanoseconds:contentions:count and the mutex ones;
//   - the deltas sent for main.blockKnown and main.mutexKnown add up exactly
//     to the runtime's own cumulative totals for them, read from the
//     program after the last scrape (the first scrape primes, before any
//     contention);
//   - allocs scraped without heap: its inuse_* columns are gauges and reach
//     Pyroscope as memory:inuse_space:bytes:space:bytes and
//     memory:inuse_objects:count:space:bytes, alloc_* as deltas.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test pprof_scrape_contention.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';

import { Profile } from 'pprof-format';
import {
  freePort, pushSink, PushRequest, readJsonLines, startProflink, until,
} from './lib/common.mjs';
import { runGoFixture } from './lib/gofixture.mjs';

let pl, tmp, go, goPort, sink;
const pushes = [];

function get(p, binary = false) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: goPort, path: p, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve(binary ? Buffer.concat(chunks) : Buffer.concat(chunks).toString().trim()));
    }).on('error', reject);
  });
}

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-contend-'));
  ({ go, port: goPort } = await runGoFixture('gocontend', tmp));
  const [metricsPort, sinkPort] = await Promise.all([freePort(), freePort()]);
  sink = await pushSink(sinkPort, pushes);
  pl = await startProflink(`
receivers:
  pprof_scrape:
    interval: 1s
    profiles: [block, mutex, allocs]
    targets:
      - endpoint: http://127.0.0.1:${goPort}
        labels: { service.name: gocontend }
exporters:
  file:
    path: ${path.join(tmp, 'out.jsonl')}
  pyroscope:
    endpoint: http://127.0.0.1:${sinkPort}
service:
  telemetry:
    logs: { level: warn }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    profiles: { receivers: [pprof_scrape], exporters: [file, pyroscope] }
`, { dir: tmp });
});

after(async () => {
  await pl?.stop(5000);
  sink?.close();
  if (go && go.exitCode === null) go.kill('SIGTERM');
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

// Per Pyroscope profile type id, the total of the pushed samples whose
// stack holds `fn` (every type id when fn is null).
function pushedTotals(fn) {
  const out = {};
  for (const p of pushes) {
    const req = PushRequest.toObject(PushRequest.decode(p.body), { bytes: Buffer });
    for (const s of req.series) {
      const labels = Object.fromEntries(s.labels.map((l) => [l.name, l.value]));
      if (labels.service_name !== 'gocontend') continue;
      for (const smp of s.samples) {
        const prof = Profile.decode(zlib.gunzipSync(smp.rawProfile));
        const str = (i) => prof.stringTable.strings[Number(i)];
        const st = prof.sampleType[0], pt = prof.periodType;
        const id = [labels.__name__, str(st.type), str(st.unit), pt ? str(pt.type) : '', pt ? str(pt.unit) : ''].join(':');
        out[id] ??= 0;
        for (const sample of prof.sample)
          if (fn === null || stackHas(prof, sample, fn)) out[id] += Number(sample.value[0]);
      }
    }
  }
  return out;
}

function stackHas(prof, sample, fn) {
  const str = (i) => prof.stringTable.strings[Number(i)];
  const locs = new Map(prof.location.map((l) => [Number(l.id), l]));
  const fns = new Map(prof.function.map((f) => [Number(f.id), f]));
  return sample.locationId.some((id) => (locs.get(Number(id))?.line ?? [])
    .some((ln) => str(fns.get(Number(ln.functionId))?.name) === fn));
}

// The runtime's own cumulative totals (per sample type) for stacks holding fn.
async function runtimeTotals(profile, fn) {
  const prof = Profile.decode(zlib.gunzipSync(await get(`/debug/pprof/${profile}`, true)));
  const str = (i) => prof.stringTable.strings[Number(i)];
  const out = {};
  prof.sampleType.forEach((t, c) => {
    out[str(t.type)] = prof.sample.filter((s) => stackHas(prof, s, fn))
      .reduce((a, s) => a + Number(s.value[c]), 0);
  });
  return out;
}

test('Go block and mutex profiles: two profile names, deltas adding up to the runtime totals; allocs keeps inuse_*', { timeout: 120000 }, async () => {
  assert.ok(await until(async () => Number(await get('/scrapes')) >= 2, 20000), 'first scrapes');
  assert.equal(await get('/contend?n=40'), 'ok');
  const after = Number(await get('/scrapes'));
  assert.ok(await until(async () => Number(await get('/scrapes')) >= after + 2, 20000), 'scrapes go on');
  const block = await runtimeTotals('block', 'main.blockKnown');
  const mutex = await runtimeTotals('mutex', 'main.mutexKnown');
  assert.ok(block.contentions >= 40, JSON.stringify(block));
  assert.ok(mutex.contentions >= 1, JSON.stringify(mutex));

  const want = {
    'block:contentions:count:contentions:count': [block.contentions, 'main.blockKnown'],
    'block:delay:nanoseconds:contentions:count': [block.delay, 'main.blockKnown'],
    'mutex:contentions:count:contentions:count': [mutex.contentions, 'main.mutexKnown'],
    'mutex:delay:nanoseconds:contentions:count': [mutex.delay, 'main.mutexKnown'],
  };
  const matches = () => Object.entries(want).every(([id, [total, fn]]) => pushedTotals(fn)[id] === total);
  assert.ok(await until(matches, 20000), `pushed ${JSON.stringify(pushedTotals('main.blockKnown'))} ` +
    `${JSON.stringify(pushedTotals('main.mutexKnown'))} want ${JSON.stringify(want)} (log: ${pl.log})`);
  // blockKnown never waits for a mutex; mutexKnown blocks on a channel too
  // (waiting for its goroutine), and the block series has exactly that
  assert.equal(pushedTotals('main.blockKnown')['mutex:contentions:count:contentions:count'] ?? 0, 0);
  const mutexBlocks = await runtimeTotals('block', 'main.mutexKnown');
  assert.equal(pushedTotals('main.mutexKnown')['block:contentions:count:contentions:count'],
    mutexBlocks.contentions);

  const ids = Object.keys(pushedTotals(null)).sort();
  for (const id of ['memory:alloc_objects:count:space:bytes', 'memory:alloc_space:bytes:space:bytes',
    'memory:inuse_objects:count:space:bytes', 'memory:inuse_space:bytes:space:bytes', ...Object.keys(want)])
    assert.ok(ids.includes(id), `${id} in ${ids}`);
  // inuse_* are gauges: each scrape sends the live heap, never a delta of 0
  assert.ok(pushedTotals(null)['memory:inuse_space:bytes:space:bytes'] > 0);

  // the file exporter's OTLP profiles carry the names as profile attributes
  const names = new Set();
  for (const line of readJsonLines(path.join(tmp, 'out.jsonl'))) {
    const d = line.dictionary;
    for (const rp of line.resourceProfiles ?? [])
      for (const sp of rp.scopeProfiles ?? [])
        for (const p of sp.profiles ?? [])
          for (const ai of p.attributeIndices ?? []) {
            const a = d.attributeTable[ai];
            if (d.stringTable[a.keyStrindex] === 'pyroscope.profile.name') names.add(a.value.stringValue);
          }
  }
  assert.deepEqual([...names].sort(), ['block', 'memory', 'mutex']);
});
