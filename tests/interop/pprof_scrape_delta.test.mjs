// pprof_scrape_delta.test.mjs: the pprof_scrape receiver against a real Go
// program serving net/http/pprof (tests/interop/fixtures/goalloc, built here
// with Debian's golang-go), with a known allocation pattern.
//
// Go's allocs profile counts since the process started; proflink sends the
// difference between two scrapes, as Grafana Alloy does. Checks:
//   - the allocations made before the first scrape (allocateAtStartup,
//     1000 x 4096 bytes) never reach the exporter: the first scrape primes;
//   - after /alloc?n=3000 the deltas sent for main.allocateKnown add up to
//     exactly 3000 objects and 3000 x 4096 bytes, and after /alloc?n=500 to
//     3500: no scrape repeats what an earlier one sent;
//   - the heap profile's inuse_* columns pass as they are, its alloc_*
//     columns as deltas too.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test pprof_scrape_delta.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

import {
  freePort, readJsonLines, startProflink, until,
} from './lib/common.mjs';
import { runGoFixture } from './lib/gofixture.mjs';
import { profilesToFile } from './lib/yaml.mjs';

let pl, tmp, go, goPort;

function get(p) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: goPort, path: p, agent: false }, (res) => {
      let b = '';
      res.on('data', (c) => { b += c; });
      res.on('end', () => resolve(b.trim()));
    }).on('error', reject);
  });
}

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-delta-'));
  ({ go, port: goPort } = await runGoFixture('goalloc', tmp));
  const metricsPort = await freePort();
  pl = await startProflink(`
receivers:
  pprof_scrape:
    interval: 1s
    profiles: [allocs, heap]
    targets:
      - endpoint: http://127.0.0.1:${goPort}
        labels: { service.name: goalloc }
${profilesToFile(tmp, metricsPort)}
`, { dir: tmp });
});

after(async () => {
  await pl?.stop(5000);
  if (go && go.exitCode === null) go.kill('SIGTERM');
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

// Per sample type, the total of the samples whose stack holds `fn`, summed
// over every exported profile.
function totalsFor(fn) {
  const out = {};
  for (const line of readJsonLines(path.join(tmp, 'out.jsonl'))) {
    const d = line.dictionary;
    if (!d) continue;
    const str = (i) => d.stringTable[i ?? 0] ?? '';
    for (const rp of line.resourceProfiles ?? [])
      for (const sp of rp.scopeProfiles ?? [])
        for (const p of sp.profiles ?? []) {
          const type = str(p.sampleType?.typeStrindex);
          for (const s of p.samples ?? []) {
            const stack = d.stackTable[s.stackIndex ?? 0];
            const names = (stack?.locationIndices ?? []).map((li) => {
              const loc = d.locationTable[li];
              return str(d.functionTable[loc?.lines?.[0]?.functionIndex ?? 0]?.nameStrindex);
            });
            if (!names.includes(fn)) continue;
            const v = (s.values ?? []).reduce((a, x) => a + Number(x), 0);
            out[type] = (out[type] ?? 0) + v;
          }
        }
  }
  return out;
}

function typesSeen() {
  const seen = new Set();
  for (const line of readJsonLines(path.join(tmp, 'out.jsonl'))) {
    const d = line.dictionary;
    for (const rp of line.resourceProfiles ?? [])
      for (const sp of rp.scopeProfiles ?? [])
        for (const p of sp.profiles ?? []) seen.add(d.stringTable[p.sampleType?.typeStrindex ?? 0]);
  }
  return seen;
}

// The 4096-byte objects of allocateKnown in totals `t`. With
// MemProfileRate = 1 the Go runtime now and then records a small object of
// its own under allocateKnown's stack (seen once: 3,001 objects and
// 3000 * 4096 + 96 bytes), so whole 4096-byte units of alloc_space count
// the known objects and alloc_objects may exceed them by such an extra; an
// allocation sent twice or not at all still fails.
const known = (t) => Math.floor((t.alloc_space ?? 0) / 4096);
function assertKnown(t, want) {
  assert.equal(known(t), want, JSON.stringify(t));
  assert.ok(t.alloc_objects >= want && t.alloc_objects <= want + 2, JSON.stringify(t));
}

async function allocAndWait(n, want) {
  assert.equal(await get(`/alloc?n=${n}`), 'ok');
  const after = Number(await get('/scrapes'));
  // two more scrapes start after the allocation finished: the second one
  // certainly saw it
  assert.ok(await until(async () => Number(await get('/scrapes')) >= after + 2, 15000), 'scrapes go on');
  assert.ok(await until(() => known(totalsFor('main.allocateKnown')) === want, 15000),
    `allocateKnown totals ${JSON.stringify(totalsFor('main.allocateKnown'))}, want ${want} (log: ${pl.log})`);
}

test('cumulative Go profiles become deltas: the first scrape primes, each allocation is sent once', { timeout: 90000 }, async () => {
  assert.ok(await until(async () => Number(await get('/scrapes')) >= 2, 15000), 'first scrapes');
  await allocAndWait(3000, 3000);
  assertKnown(totalsFor('main.allocateKnown'), 3000);
  await allocAndWait(500, 3500);
  assertKnown(totalsFor('main.allocateKnown'), 3500);
  // nothing of what happened before the first scrape
  const startup = totalsFor('main.allocateAtStartup');
  assert.equal(startup.alloc_objects ?? 0, 0, JSON.stringify(startup));
  // allocs: alloc_* only (twice: from allocs and from heap); heap: inuse_* as they are
  const seen = typesSeen();
  for (const k of ['alloc_objects', 'alloc_space', 'inuse_objects', 'inuse_space'])
    assert.ok(seen.has(k), `${k} in ${[...seen]}`);
});
