// grafana_pyroscope.test.mjs: the store as Grafana's Pyroscope data source,
// replayed with Connect-ES (@connectrpc/connect-node), the client library
// Profiles Drilldown is built on, in binary protobuf (as Grafana's Go
// backend, connect-go, sends) and in JSON (as Drilldown sends through the
// Grafana proxy).
//
// Data from real SDKs: an application traced with the OpenTelemetry JS SDK
// and profiled with @pyroscope/nodejs (span_id labels) goes through the
// correlation processor into the sqlite store. A recording proxy between
// the Pyroscope SDK and proflink keeps the pprof uploads, which
// `pprof-format` decodes independently: the expected totals per sample type
// and per span come from what was sent. Checks:
//   - ProfileTypes names the types name:type:unit:period_type:period_unit
//     from the uploaded sample types and period;
//   - a service's flame graph total (SelectMergeStacktraces) equals the sum
//     of its samples of that type; Grafana's levelsToTree (ported below)
//     rebuilds the tree from `levels` with every child inside its parent;
//   - a span profile's total (SelectMergeSpanProfile, and
//     SelectMergeStacktraces with span_selector) equals that span's own
//     samples; with include_descendants, the root's plus its child's;
//   - SelectSeries points add up to the same total, per span_name too;
//   - a selector on a span attribute (http.route) adds up the spans of that
//     endpoint; regex and negative matchers;
//   - LabelNames / LabelValues / Series / GetProfileStats, SelectMergeProfile
//     (pprof) and GET /pyroscope/render agree with the same totals;
//   - errors are Connect errors: a span selector entry that is not 16 hex
//     characters is invalid_argument, an unknown method unimplemented.
//   - the SDK's tags (region=eu, in the upload's name) and pprof labels
//     (step=checkout|pricing, wrapWithLabels) are labels: LabelNames,
//     LabelValues, selectors and SelectSeries group_by agree with the
//     samples sent with them;
//   - profile_id_selector (a span's profile id is its span id) and
//     trace_id_selector select the samples of those spans and traces;
//   - stack_trace_selector: a call site (a root-to-node path of the flame
//     graph) selects exactly the sent samples whose stacks start with it,
//     in SelectMergeStacktraces, SelectSeries and SelectMergeProfile, where
//     go_pgo.keep_locations cuts each stack to its leaf-most frames;
//   - tenants: the proxy also sends every upload with X-Scope-OrgID team-a,
//     and team-b uploads another profile of the same service name: each
//     tenant sees only its own samples, no header only the untenanted ones.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test grafana_pyroscope.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';

import { createFileRegistry, fromBinary } from '@bufbuild/protobuf';
import { FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Profile } from 'pprof-format';

import { PROTO_DIRS, freePort, readBody, runCheckoutApp, until } from './lib/common.mjs';
import { startStore } from './lib/store.mjs';

const SERVICE = 'grafana-pyro';
const big = (v) => (typeof v === 'bigint' ? v : BigInt(v ?? 0));

// ---- descriptors: protoc reads the project's .proto --------------------------
function querierService() {
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-desc-')), 'q.pb');
  execFileSync('protoc', [...PROTO_DIRS.flatMap((d) => ['-I', d]), '--include_imports',
    `--descriptor_set_out=${out}`, 'querier/v1/querier.proto']);
  const set = fromBinary(FileDescriptorSetSchema, fs.readFileSync(out));
  return createFileRegistry(set).getService('querier.v1.QuerierService');
}

// ---- Grafana's levelsToTree (pkg/tsdb/grafana-pyroscope-datasource/query.go) --
function levelsToTree(levels, names) {
  if (!levels.length) return null;
  const v0 = levels[0].values.map(Number);
  const tree = { start: 0, value: v0[1], self: v0[2], level: 0, name: names[v0[3]], nodes: [] };
  let parents = [tree];
  for (let level = 1; level < levels.length; level++) {
    if (!parents.length) break;
    const values = levels[level].values.map(Number);
    const next = [];
    let parent = parents.shift();
    let offset = 0;
    for (let i = 0; i < values.length;) {
      const start = values[i] + offset;
      const value = values[i + 1];
      const end = start + value;
      if (start >= parent.start && end <= parent.start + parent.value) {
        const node = { start, value, self: values[i + 2], level, name: names[values[i + 3]], nodes: [] };
        parent.nodes.push(node);
        next.push(node);
        i += 4;
        offset = end;
      } else {
        if (!parents.length) break;
        parent = parents.shift();
      }
    }
    parents = next;
  }
  return tree;
}

// Every child inside its parent, after the parent's self part; children
// never overlap; each node's total is its self plus its children's totals.
function checkTree(fg) {
  const tree = levelsToTree(fg.levels, fg.names);
  assert.ok(tree, 'a tree');
  assert.equal(tree.name, 'total');
  assert.equal(fg.names[0], 'total');
  let nodes = 0;
  const walk = (n) => {
    nodes++;
    let at = n.start + n.self;
    let sum = n.self;
    for (const c of n.nodes) {
      assert.ok(c.start >= at, `${c.name} starts inside its parent, after its left sibling`);
      assert.ok(c.start + c.value <= n.start + n.value, `${c.name} ends inside ${n.name}`);
      at = c.start + c.value;
      sum += c.value;
      walk(c);
    }
    assert.equal(sum, n.value, `${n.name}: self + children = total`);
  };
  walk(tree);
  const encoded = fg.levels.reduce((a, l) => a + l.values.length / 4, 0);
  assert.equal(nodes, encoded, 'levelsToTree placed every encoded node');
  return tree;
}

// ---- what the SDK sent ------------------------------------------------------
function multipartProfile(body, contentType) {
  const m = /boundary=("?)([^";]+)\1/.exec(contentType || '');
  if (!m) return body; // a raw pprof
  const parts = body.toString('latin1').split(`--${m[2]}`);
  for (const p of parts) {
    const head = p.slice(0, p.indexOf('\r\n\r\n'));
    if (!/name="profile"/.test(head)) continue;
    const data = p.slice(p.indexOf('\r\n\r\n') + 4, p.length - 2);
    return Buffer.from(data, 'latin1');
  }
  return null;
}

// What was sent: per sample type {unit, total}, per "type|span_id", and
// the period ("type:unit").
function sentTotals(uploads) {
  const byType = new Map();
  const bySpan = new Map();
  const byLabel = new Map(); // "type|key=value" of the pprof labels other than span_id
  let period = '';
  const add = (m, k, v) => m.set(k, (m.get(k) ?? 0n) + v);
  for (const u of uploads) {
    const buf = multipartProfile(u.body, u.headers['content-type']);
    if (!buf) continue;
    const raw = buf[0] === 0x1f && buf[1] === 0x8b ? zlib.gunzipSync(buf) : buf;
    const p = Profile.decode(raw);
    const str = (i) => p.stringTable.strings[Number(i)] ?? '';
    const types = p.sampleType.map((t) => str(t.type));
    p.sampleType.forEach((t, i) => {
      if (!byType.has(types[i])) byType.set(types[i], { unit: str(t.unit), total: 0n });
    });
    if (p.periodType) period = `${str(p.periodType.type)}:${str(p.periodType.unit)}`;
    for (const s of p.sample) {
      if (!s.locationId.length) continue;
      let span = '';
      const other = [];
      for (const l of s.label) {
        if (str(l.key) === 'span_id') span = str(l.str);
        else if (str(l.str)) other.push(`${str(l.key)}=${str(l.str)}`);
      }
      s.value.forEach((v, i) => {
        byType.get(types[i]).total += big(v);
        if (span) add(bySpan, `${types[i]}|${span}`, big(v));
        for (const kv of other) add(byLabel, `${types[i]}|${kv}`, big(v));
      });
    }
  }
  return { byType, bySpan, byLabel, period };
}

// The stacks sent of one sample type: function names, root first, with
// their values (a location's inlined lines leaf-most first, as pprof has them).
function sentStacks(type) {
  const out = [];
  for (const u of uploads) {
    const buf = multipartProfile(u.body, u.headers['content-type']);
    if (!buf) continue;
    const p = Profile.decode(buf[0] === 0x1f && buf[1] === 0x8b ? zlib.gunzipSync(buf) : buf);
    const str = (i) => p.stringTable.strings[Number(i)] ?? '';
    const at = p.sampleType.findIndex((t) => str(t.type) === type);
    if (at < 0) continue;
    const fns = new Map(p.function.map((f) => [String(f.id), str(f.name)]));
    const locs = new Map(p.location.map((l) => [String(l.id), l.line.map((ln) => fns.get(String(ln.functionId)) ?? '')]));
    for (const smp of p.sample) {
      if (!smp.locationId.length) continue;
      const leafFirst = smp.locationId.flatMap((id) => locs.get(String(id)) ?? []);
      out.push({ names: leafFirst.reverse(), value: big(smp.value[at]) });
    }
  }
  return out;
}

// A sent value in the unit the store keeps (the receiver may scale time
// units; what Pyroscope would keep is the ingestion's business).
const UNIT_NS = { nanoseconds: 1n, microseconds: 1000n, milliseconds: 1000000n, seconds: 1000000000n };
function scale(v, from, to) {
  if (from === to) return v;
  assert.ok(UNIT_NS[from] && UNIT_NS[to], `units ${from} -> ${to}`);
  return (v * UNIT_NS[from]) / UNIT_NS[to];
}

// ---- the run ----------------------------------------------------------------
let store, proxy, requests, provider, sent;
const uploads = [];
let binary, json; // Connect-ES clients
let teamA, teamB; // the same with X-Scope-OrgID
let types; // profile types the store serves

before(async () => {
  store = await startStore({ prefix: 'proflink-grafana-pyro-', correlation: ['window: 20s'] });
  const proxyPort = await freePort();
  proxy = http.createServer(async (req, res) => {
    const body = await readBody(req);
    uploads.push({ headers: req.headers, body });
    // the same upload for tenant team-a
    await fetch(`http://127.0.0.1:${store.pyroPort}${req.url}`, { method: req.method, body,
      headers: { ...req.headers, 'x-scope-orgid': 'team-a' } }).then((r) => r.arrayBuffer());
    const fwd = http.request({ host: '127.0.0.1', port: store.pyroPort, path: req.url,
      method: req.method, headers: req.headers, agent: false }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    fwd.on('error', () => { res.writeHead(502); res.end(); });
    fwd.end(body);
  });
  await new Promise((r) => proxy.listen(proxyPort, '127.0.0.1', r));
  ({ provider, requests } = await runCheckoutApp({
    service: SERVICE, otlpPort: store.otlpPort, pyroPort: proxyPort, tracerName: 'grafana-pyro',
    rootAttributes: { 'http.route': '/checkout/:id' },
    checkoutMs: (r) => 200 + 100 * r,
    tags: { region: 'eu' },
    labels: (r, which) => ({ step: which === 'root' ? 'checkout' : 'pricing' }),
  }));
  sent = sentTotals(uploads);
  const service = querierService();
  const baseUrl = `http://127.0.0.1:${store.apiPort}`;
  binary = createClient(service, createConnectTransport({ baseUrl, httpVersion: '1.1', useBinaryFormat: true }));
  json = createClient(service, createConnectTransport({ baseUrl, httpVersion: '1.1', useBinaryFormat: false }));
  const orgId = (tenant) => (next) => async (req) => {
    req.header.set('X-Scope-OrgID', tenant);
    return next(req);
  };
  teamA = createClient(service, createConnectTransport({ baseUrl, httpVersion: '1.1',
    useBinaryFormat: true, interceptors: [orgId('team-a')] }));
  teamB = createClient(service, createConnectTransport({ baseUrl, httpVersion: '1.1',
    useBinaryFormat: false, interceptors: [orgId('team-b')] }));

  // Stored once correlation lets spans and samples go: every span's own
  // samples, for every type, as sent.
  const wallId = () => types?.find((t) => t.sampleType === 'wall')?.ID;
  const span0 = requests[0].childId;
  let lastError;
  const ok = await until(async () => {
    try {
      ({ profileTypes: types } = await binary.profileTypes({ start: 0n, end: BigInt(Date.now() + 60000) }));
      if (!wallId()) return false;
      const r = await binary.selectMergeSpanProfile({ profileTypeID: wallId(),
        labelSelector: '{}', spanSelector: [span0], start: 0n, end: BigInt(Date.now() + 60000) });
      const all = await binary.selectMergeStacktraces({ profileTypeID: wallId(),
        labelSelector: `{service_name="${SERVICE}"}`, start: 0n, end: BigInt(Date.now() + 60000) });
      return r.flamegraph && big(r.flamegraph.total) === want('wall', span0)
        && big(all.flamegraph?.total) === want('wall');
    } catch (e) {
      lastError = e;
      return false;
    }
  }, 60000, 500);
  assert.ok(ok, `the store serves the uploaded samples (types ${JSON.stringify(types)}, ${lastError}); log: ${store.pl.log}`);
});

after(async () => {
  proxy?.close();
  await provider?.shutdown();
  if (store) {
    const { code } = await store.pl.stop();
    assert.equal(code, 0, store.pl.log);
    fs.rmSync(store.dir, { recursive: true, force: true });
  }
});

// The expected total of a type (of one span's own samples when given).
function want(type, span) {
  const t = types.find((x) => x.sampleType === type);
  const s = sent.byType.get(type);
  const v = span === undefined ? s.total : (sent.bySpan.get(`${type}|${span}`) ?? 0n);
  return scale(v, s.unit, t.sampleUnit);
}

const range = () => ({ start: BigInt(Date.now() - 3600000), end: BigInt(Date.now() + 60000) });
const typeId = (sampleType) => types.find((t) => t.sampleType === sampleType)?.ID;

test('ProfileTypes: Pyroscope ids from the uploaded types and period', () => {
  assert.ok(sent.byType.size >= 2, `the SDK uploaded several sample types: ${[...sent.byType.keys()]}`);
  const [ptype, punit] = sent.period.split(':');
  for (const [type, { unit }] of sent.byType) {
    const t = types.find((x) => x.sampleType === type);
    assert.ok(t, `type ${type} served: ${JSON.stringify(types)}`);
    assert.equal(scale(1000000n, unit, t.sampleUnit) > 0n, true);
    assert.equal(t.periodType, ptype);
    assert.equal(scale(1000000n, punit, t.periodUnit) > 0n, true);
    assert.equal(t.ID, `${t.name}:${t.sampleType}:${t.sampleUnit}:${t.periodType}:${t.periodUnit}`);
  }
  assert.equal(types.length, sent.byType.size, JSON.stringify(types));
  // Pyroscope's ids for a Node.js wall upload (grafana.md E) once the
  // ingestion keeps the SDK's microseconds
  const wall = types.find((t) => t.sampleType === 'wall');
  assert.equal(wall.name, 'wall');
  if (wall.sampleUnit === 'microseconds')
    assert.equal(wall.ID, 'wall:wall:microseconds:wall:microseconds');
  assert.equal(types.find((t) => t.sampleType === 'samples').ID,
    `wall:samples:count:wall:${wall.periodUnit}`);
});

test('a service flame graph: total = the samples sent, levels nest (binary and JSON)', async () => {
  for (const type of sent.byType.keys()) {
    const id = typeId(type);
    const total = want(type);
    for (const client of [binary, json]) {
      const r = await client.selectMergeStacktraces({ profileTypeID: id,
        labelSelector: `{service_name="${SERVICE}"}`, ...range(), maxNodes: 100000n });
      assert.equal(big(r.flamegraph.total), total, `${id}`);
      const tree = checkTree(r.flamegraph);
      assert.equal(big(tree.value), total);
      let maxSelf = 0n;
      for (const l of r.flamegraph.levels) for (let i = 2; i < l.values.length; i += 4)
        if (big(l.values[i]) > maxSelf) maxSelf = big(l.values[i]);
      assert.equal(big(r.flamegraph.maxSelf), maxSelf);
    }
  }
  // the work functions are in the wall flame graph
  const r = await json.selectMergeStacktraces({ profileTypeID: typeId('wall'),
    labelSelector: `{service_name="${SERVICE}"}`, ...range() });
  assert.ok(r.flamegraph.names.some((n) => /burnCpuInCheckout/.test(n)), r.flamegraph.names.join(','));
  assert.ok(r.flamegraph.names.some((n) => /burnCpuInPricing/.test(n)));
});

// Every node below the root with its parent, depth first.
function nodesOf(tree) {
  const out = [];
  const walk = (n, parent) => {
    if (parent) out.push({ n, parent });
    n.nodes.forEach((c) => walk(c, n));
  };
  walk(tree, null);
  return out;
}

test('max_nodes keeps the largest nodes and sums the rest into other', async () => {
  const id = typeId('wall');
  const ask = (maxNodes) => binary.selectMergeStacktraces({ profileTypeID: id, labelSelector: '{}',
    ...range(), maxNodes });
  const full = await ask(100000n);
  const fullNodes = nodesOf(checkTree(full.flamegraph));
  const max = 8;
  assert.ok(fullNodes.length > max, `enough nodes to cut: ${fullNodes.length}`);
  // Pyroscope's threshold: the max_nodes-th largest total
  const t = fullNodes.map(({ n }) => n.value).sort((x, y) => y - x)[max - 1];
  const cut = await ask(BigInt(max));
  assert.equal(cut.flamegraph.total, full.flamegraph.total);
  const cutNodes = nodesOf(checkTree(cut.flamegraph));
  for (const { n } of cutNodes)
    if (n.name !== 'other') assert.ok(n.value >= t, `${n.name} (${n.value}) reaches the threshold ${t}`);
  assert.equal(cutNodes.filter(({ n }) => n.name !== 'other').length,
    fullNodes.filter(({ n }) => n.value >= t).length, 'every node at the threshold is kept');
  const cutAway = fullNodes.filter(({ n, parent }) => n.value < t && (parent.level === 0 || parent.value >= t));
  assert.equal(cutNodes.some(({ n }) => n.name === 'other'), cutAway.length > 0,
    `other nodes exactly where children were cut (${cutAway.length})`);
});

test('span profiles: a span\'s own samples, with descendants on request', async () => {
  for (const type of sent.byType.keys()) {
    const id = typeId(type);
    for (const r of requests) {
      for (const span of [r.rootId, r.childId]) {
        const own = want(type, span);
        const a = await binary.selectMergeSpanProfile({ profileTypeID: id, labelSelector: '{}',
          spanSelector: [span], ...range() });
        assert.equal(big(a.flamegraph?.total), own, `${id} span ${span}`);
        if (own) checkTree(a.flamegraph);
        const b = await json.selectMergeStacktraces({ profileTypeID: id,
          labelSelector: `{service_name="${SERVICE}"}`, spanSelector: [span], ...range() });
        assert.equal(big(b.flamegraph?.total), own);
      }
      const both = want(type, r.rootId) + want(type, r.childId);
      const d = await json.selectMergeSpanProfile({ profileTypeID: id, labelSelector: '{}',
        spanSelector: [r.rootId], includeDescendants: true, ...range() });
      assert.equal(big(d.flamegraph?.total), both, 'root + child');
    }
  }
  const pricing = await binary.selectMergeSpanProfile({ profileTypeID: typeId('wall'),
    labelSelector: '{}', spanSelector: [requests[1].childId], ...range() });
  assert.ok(pricing.flamegraph.names.some((n) => /burnCpuInPricing/.test(n)));
  assert.ok(!pricing.flamegraph.names.some((n) => /burnCpuInCheckout/.test(n)), 'only that span');
});

test('a span selector entry that is not 16 hex characters is invalid_argument', async () => {
  for (const bad of ['abc', 'zzzzzzzzzzzzzzzz', `${requests[0].rootId}00`]) {
    for (const client of [binary, json]) {
      await assert.rejects(client.selectMergeSpanProfile({ profileTypeID: typeId('wall'),
        labelSelector: '{}', spanSelector: [bad], ...range() }), (e) => {
        assert.ok(e instanceof ConnectError);
        assert.equal(e.code, Code.InvalidArgument, e.message);
        assert.match(e.rawMessage, /span id/);
        return true;
      });
    }
  }
});

test('SelectSeries: per-step sums add up to the flame graph total', async () => {
  const id = typeId('wall');
  const total = want('wall');
  for (const client of [binary, json]) {
    const r = await client.selectSeries({ profileTypeID: id, labelSelector: `{service_name="${SERVICE}"}`,
      ...range(), step: 15 });
    assert.equal(r.series.length, 1);
    const pts = r.series[0].points;
    assert.equal(BigInt(Math.round(pts.reduce((a, p) => a + p.value, 0))), total);
    for (let i = 1; i < pts.length; i++) {
      assert.ok(pts[i].timestamp > pts[i - 1].timestamp);
      assert.equal((pts[i].timestamp - pts[0].timestamp) % 15000n, 0n, 'on the step grid');
    }
  }
  // by span name: each series is the sum of its spans' own samples
  const r = await json.selectSeries({ profileTypeID: id, labelSelector: '{}', ...range(), step: 60,
    groupBy: ['span_name'] });
  const byName = new Map(r.series.map((s) => [s.labels.find((l) => l.name === 'span_name').value,
    BigInt(Math.round(s.points.reduce((a, p) => a + p.value, 0)))]));
  const sum = (ids) => ids.reduce((a, sp) => a + want('wall', sp), 0n);
  assert.equal(byName.get('GET /checkout/:id'), sum(requests.map((q) => q.rootId)));
  assert.equal(byName.get('price items'), sum(requests.map((q) => q.childId)));
  const limited = await binary.selectSeries({ profileTypeID: id, labelSelector: '{}', ...range(), step: 60,
    groupBy: ['span_name'], limit: 1n });
  assert.equal(limited.series.length, 1);
});

test('selectors on span labels: one endpoint\'s spans added up, regex and negation', async () => {
  const id = typeId('wall');
  const sum = (ids) => ids.reduce((a, sp) => a + want('wall', sp), 0n);
  const total = async (sel) => big((await binary.selectMergeStacktraces({ profileTypeID: id,
    labelSelector: sel, ...range() })).flamegraph?.total);
  const roots = sum(requests.map((q) => q.rootId));
  const children = sum(requests.map((q) => q.childId));
  // http.route is a sample label the correlation processor gives every
  // sample of the request (from the span or its ancestors, span_attributes):
  // the endpoint's whole requests
  assert.equal(await total(`{service_name="${SERVICE}", "http.route"="/checkout/:id"}`), roots + children);
  assert.equal(await total('{span_name=~"GET .*"}'), roots);
  assert.equal(await total('{span_name="price items"}'), children);
  assert.equal(await total('{span_name!~"GET .*", span_name!=""}'), children);
  assert.equal(await total(`{service_name="${SERVICE}", span_name=""}`),
    want('wall') - roots - children, 'samples outside spans');
  assert.equal(await total('{service_name="nope"}'), 0n);
  // type labels in the selector must agree with the profile type
  assert.equal(await total(`{__profile_type__="${id}", __name__="wall"}`), want('wall'));
  assert.equal(await total('{__name__="memory"}'), 0n);
  assert.equal(await total('{__type__!="wall"}'), 0n);
  // the 6-part form with :delta names the same type
  const delta = await json.selectMergeStacktraces({ profileTypeID: `${id}:delta`, labelSelector: '{}', ...range() });
  assert.equal(big(delta.flamegraph.total), want('wall'));
  await assert.rejects(binary.selectMergeStacktraces({ profileTypeID: id, labelSelector: '{span_name=~"("}',
    ...range() }), (e) => e.code === Code.InvalidArgument && /regular expression/.test(e.rawMessage));
  await assert.rejects(json.selectMergeStacktraces({ profileTypeID: id, labelSelector: '{span_name="x"',
    ...range() }), (e) => e.code === Code.InvalidArgument);
});

test('LabelNames, LabelValues, Series, GetProfileStats', async () => {
  const sel = `{__profile_type__="${typeId('wall')}", service_name="${SERVICE}"}`;
  for (const client of [binary, json]) {
    const names = (await client.labelNames({ matchers: [sel], ...range() })).names;
    for (const n of ['service_name', '__profile_type__', 'span_name', 'http.route'])
      assert.ok(names.includes(n), `${n} in ${names}`);
    assert.deepEqual((await client.labelValues({ name: 'service_name', matchers: [], ...range() })).names, [SERVICE]);
    assert.deepEqual((await client.labelValues({ name: 'span_name', matchers: [sel], ...range() })).names,
      ['GET /checkout/:id', 'price items']);
    assert.deepEqual((await client.labelValues({ name: 'http.route', matchers: [sel], ...range() })).names,
      ['/checkout/:id']);
    const ptypes = (await client.labelValues({ name: '__profile_type__', matchers: [`{service_name="${SERVICE}"}`], ...range() })).names;
    assert.deepEqual(ptypes, types.map((t) => t.ID).sort());
    const series = await client.series({ matchers: [], labelNames: ['service_name', '__profile_type__'], ...range() });
    assert.equal(series.labelsSet.length, types.length);
    for (const s of series.labelsSet)
      assert.deepEqual(s.labels.map((l) => l.name), ['__profile_type__', 'service_name']);
    const stats = await client.getProfileStats({});
    assert.equal(stats.dataIngested, true);
    assert.ok(stats.oldestProfileTime <= stats.newestProfileTime && stats.newestProfileTime > 0n);
  }
  // Drilldown's Series call as it sends it (plain fetch, proto names mixed in)
  const r = await fetch(`http://127.0.0.1:${store.apiPort}/querier.v1.QuerierService/Series`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ matchers: [], labelNames: ['service_name', '__profile_type__'],
      start: Date.now() - 3600000, end: Date.now() }),
  });
  assert.equal(r.status, 200);
  const body = await r.json();
  assert.ok(Array.isArray(body.labelsSet) && body.labelsSet.length === types.length, JSON.stringify(body));
});

test('SelectMergeProfile (pprof) and /pyroscope/render have the same total', async () => {
  const id = typeId('wall');
  const total = want('wall');
  const url = `http://127.0.0.1:${store.apiPort}/querier.v1.QuerierService/SelectMergeProfile`;
  const service = querierService();
  // the request in binary, the pprof answer decoded by pprof-format
  const { create, toBinary } = await import('@bufbuild/protobuf');
  const reqDesc = service.method.selectMergeProfile.input;
  const reqBytes = toBinary(reqDesc, create(reqDesc, { profileTypeID: id,
    labelSelector: `{service_name="${SERVICE}"}`, ...range() }));
  const res = await fetch(url, { method: 'POST', body: reqBytes,
    headers: { 'content-type': 'application/proto', 'connect-protocol-version': '1' } });
  assert.equal(res.status, 200);
  const p = Profile.decode(Buffer.from(await res.arrayBuffer()));
  const str = (i) => p.stringTable.strings[Number(i)];
  assert.equal(str(p.sampleType[0].type), 'wall');
  assert.equal(p.sample.reduce((a, s) => a + big(s.value[0]), 0n), total);

  const q = encodeURIComponent(`${id}{service_name="${SERVICE}"}`);
  const render = await fetch(`http://127.0.0.1:${store.apiPort}/pyroscope/render?query=${q}`
    + `&from=now-1h&until=${Date.now() + 60000}&format=json`).then((x) => x.json());
  assert.equal(BigInt(render.flamebearer.numTicks), total);
  assert.equal(render.flamebearer.names[0], 'total');
  assert.equal(BigInt(render.flamebearer.levels[0][1]), total);
  assert.equal(BigInt(render.timeline.samples.reduce((a, v) => a + v, 0)), total);
  checkTree({ names: render.flamebearer.names,
    levels: render.flamebearer.levels.map((values) => ({ values })) });
});

test('Connect errors: unknown method, GET, bad bodies', async () => {
  const base = `http://127.0.0.1:${store.apiPort}/querier.v1.QuerierService`;
  let r = await fetch(`${base}/AnalyzeQuery`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.equal(r.status, 404);
  assert.equal((await r.json()).code, 'unimplemented');
  r = await fetch(`${base}/ProfileTypes`);
  assert.equal(r.status, 405);
  r = await fetch(`${base}/ProfileTypes`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' });
  assert.equal(r.status, 415);
  r = await fetch(`${base}/SelectMergeStacktraces`, { method: 'POST',
    headers: { 'content-type': 'application/json' }, body: '{"profile_typeID": 5' });
  assert.equal(r.status, 400);
  const e = await r.json();
  assert.equal(e.code, 'invalid_argument');
  r = await fetch(`${base}/SelectMergeStacktraces`, { method: 'POST',
    headers: { 'content-type': 'application/proto' }, body: Buffer.from([0x0a, 0x50, 0x41]) });
  assert.equal(r.status, 400);
  assert.equal((await r.json()).code, 'invalid_argument');
  r = await fetch(`${base}/SelectMergeStacktraces`, { method: 'POST',
    headers: { 'content-type': 'application/json' }, body: '{"labelSelector":"{}"}' });
  assert.equal((await r.json()).message, 'profile_typeID: required');
});

// The wall total of the samples sent with pprof label key=value.
const wantLabel = (kv) => {
  const s = sent.byType.get('wall');
  const t = types.find((x) => x.sampleType === 'wall');
  return scale(sent.byLabel.get(`wall|${kv}`) ?? 0n, s.unit, t.sampleUnit);
};

test('SDK labels: tags and pprof labels are labels, selectable and groupable', async () => {
  const id = typeId('wall');
  assert.ok(wantLabel('step=checkout') > 0n && wantLabel('step=pricing') > 0n, 'labelled samples sent');
  for (const client of [binary, json]) {
    const names = (await client.labelNames({ matchers: [`{service_name="${SERVICE}"}`], ...range() })).names;
    for (const n of ['region', 'step']) assert.ok(names.includes(n), `${n} in ${names}`);
    assert.ok(!names.includes('span_id') && !names.includes('service.name'), `${names}`);
    assert.deepEqual((await client.labelValues({ name: 'step', matchers: [], ...range() })).names,
      ['checkout', 'pricing']);
    assert.deepEqual((await client.labelValues({ name: 'region', matchers: [], ...range() })).names, ['eu']);
    const total = async (sel) => big((await client.selectMergeStacktraces({ profileTypeID: id,
      labelSelector: sel, ...range() })).flamegraph?.total);
    assert.equal(await total('{step="pricing"}'), wantLabel('step=pricing'));
    assert.equal(await total(`{service_name="${SERVICE}", step=~"check.*"}`), wantLabel('step=checkout'));
    assert.equal(await total('{step!="pricing"}'), want('wall') - wantLabel('step=pricing'));
    assert.equal(await total('{region="eu"}'), want('wall'), 'the tag is on every sample');
    assert.equal(await total('{region="us"}'), 0n);
    // with a span label: the pricing spans' own samples
    assert.equal(await total('{step="pricing", span_name="price items"}'),
      requests.reduce((a, q) => a + want('wall', q.childId), 0n));
  }
  const r = await json.selectSeries({ profileTypeID: id, labelSelector: `{service_name="${SERVICE}"}`,
    ...range(), step: 15, groupBy: ['step'] });
  const byStep = new Map(r.series.map((s) => [s.labels.find((l) => l.name === 'step').value,
    BigInt(Math.round(s.points.reduce((a, p) => a + p.value, 0)))]));
  assert.equal(byStep.get('checkout'), wantLabel('step=checkout'));
  assert.equal(byStep.get('pricing'), wantLabel('step=pricing'));
  assert.equal([...byStep.values()].reduce((a, v) => a + v, 0n), want('wall'));
});

test('profile_id_selector and trace_id_selector', async () => {
  const id = typeId('wall');
  for (const client of [binary, json]) {
    for (const q of requests) {
      const byProfile = await client.selectMergeStacktraces({ profileTypeID: id, labelSelector: '{}',
        profileIdSelector: [q.childId], ...range() });
      assert.equal(big(byProfile.flamegraph?.total), want('wall', q.childId));
      const byTrace = await client.selectMergeStacktraces({ profileTypeID: id, labelSelector: '{}',
        traceIdSelector: [q.traceId], ...range() });
      assert.equal(big(byTrace.flamegraph?.total), want('wall', q.rootId) + want('wall', q.childId));
    }
    await assert.rejects(client.selectMergeStacktraces({ profileTypeID: id, labelSelector: '{}',
      traceIdSelector: ['abc'], ...range() }), (e) => e.code === Code.InvalidArgument && /trace id/.test(e.rawMessage));
    await assert.rejects(client.selectMergeStacktraces({ profileTypeID: id, labelSelector: '{}',
      profileIdSelector: ['xyz'], ...range() }), (e) => e.code === Code.InvalidArgument && /profile id/.test(e.rawMessage));
  }
});

test('stackTraceSelector: a call site selects the stacks that start with it; go_pgo keeps leaf frames', async () => {
  const id = typeId('wall');
  const t = types.find((x) => x.sampleType === 'wall');
  const unit = sent.byType.get('wall').unit;
  const stacks = sentStacks('wall');
  const startsWith = (names, site) => site.length <= names.length && site.every((n, i) => names[i] === n);
  const wantSite = (site) => scale(stacks.filter((x) => startsWith(x.names, site))
    .reduce((a, x) => a + x.value, 0n), unit, t.sampleUnit);
  // the call site Grafana would send: the path from the root to a node of
  // the stored flame graph (here the pricing work)
  const full = await binary.selectMergeStacktraces({ profileTypeID: id, labelSelector: '{}', ...range(),
    maxNodes: 100000n });
  const path = [];
  const find = (n, above) => {
    if (/burnCpuInPricing/.test(n.name)) { path.push(...above, n.name); return true; }
    return n.nodes.some((c) => find(c, n.level === 0 ? [] : [...above, n.name]));
  };
  assert.ok(find(checkTree(full.flamegraph), []), 'burnCpuInPricing in the flame graph');
  const expected = wantSite(path);
  assert.ok(expected > 0n && expected < want('wall'), `a part of the samples: ${expected} of ${want('wall')}`);
  const callSite = path.map((name) => ({ name }));
  for (const client of [binary, json]) {
    const r = await client.selectMergeStacktraces({ profileTypeID: id, labelSelector: '{}', ...range(),
      maxNodes: 100000n, stackTraceSelector: { callSite } });
    assert.equal(big(r.flamegraph.total), expected, `call site ${path.join(';')}`);
    const tree = checkTree(r.flamegraph);
    // whole stacks, from the root: one chain down to the call site
    let n = tree;
    for (const name of path) {
      assert.equal(n.nodes.length, 1, `only ${name} below ${n.name}`);
      [n] = n.nodes;
      assert.equal(n.name, name);
    }
    assert.equal(big(n.value), expected);
    // a frame that is not at the root selects nothing; an empty list everything
    const none = await client.selectMergeStacktraces({ profileTypeID: id, labelSelector: '{}', ...range(),
      stackTraceSelector: { callSite: callSite.slice(1) } });
    assert.equal(big(none.flamegraph.total), wantSite(path.slice(1)));
    assert.equal(big(none.flamegraph.total), 0n);
    const all = await client.selectMergeStacktraces({ profileTypeID: id, labelSelector: '{}', ...range(),
      stackTraceSelector: { callSite: [] } });
    assert.equal(big(all.flamegraph.total), want('wall'));
    // SelectSeries: the points add up to the selected samples
    const series = await client.selectSeries({ profileTypeID: id, labelSelector: '{}', ...range(), step: 15,
      stackTraceSelector: { callSite } });
    assert.equal(series.series.length, 1);
    assert.equal(BigInt(Math.round(series.series[0].points.reduce((a, p) => a + p.value, 0))), expected);
  }
  // SelectMergeProfile (pprof for Go PGO): the call site, each stack cut to
  // its 2 leaf-most frames, the same stacks added up
  const { create, toBinary } = await import('@bufbuild/protobuf');
  const reqDesc = querierService().method.selectMergeProfile.input;
  const ask = async (keepLocations) => {
    const res = await fetch(`http://127.0.0.1:${store.apiPort}/querier.v1.QuerierService/SelectMergeProfile`, {
      method: 'POST', headers: { 'content-type': 'application/proto', 'connect-protocol-version': '1' },
      body: toBinary(reqDesc, create(reqDesc, { profileTypeID: id, labelSelector: '{}', ...range(),
        stackTraceSelector: { callSite, goPgo: { keepLocations, aggregateCallees: true } } })) });
    assert.equal(res.status, 200);
    const p = Profile.decode(Buffer.from(await res.arrayBuffer()));
    const str = (i) => p.stringTable.strings[Number(i)] ?? '';
    const fns = new Map(p.function.map((f) => [String(f.id), str(f.name)]));
    const locs = new Map(p.location.map((l) => [String(l.id), l.line.map((ln) => fns.get(String(ln.functionId)))]));
    const got = new Map();
    for (const smp of p.sample) {
      const key = smp.locationId.flatMap((l) => locs.get(String(l))).join(';');
      assert.ok(!got.has(key), `one sample per stack: ${key}`);
      got.set(key, big(smp.value[0]));
    }
    return got;
  };
  const cut = await ask(2);
  const wantCut = new Map();
  for (const x of stacks.filter((s) => startsWith(s.names, path))) {
    const key = x.names.slice(-2).reverse().join(';');
    wantCut.set(key, (wantCut.get(key) ?? 0n) + x.value);
  }
  for (const [k, v] of wantCut) wantCut.set(k, scale(v, unit, t.sampleUnit));
  for (const [k, v] of [...wantCut]) if (v === 0n) wantCut.delete(k);
  assert.deepEqual(cut, wantCut);
  const whole = await ask(0);
  assert.equal([...whole.values()].reduce((a, v) => a + v, 0n), expected);
  assert.ok([...whole.keys()].every((k) => k.split(';').reverse().slice(0, path.length).join(';') === path.join(';')));
});

test('tenants: each X-Scope-OrgID sees only its own profiles', async () => {
  // team-b: another profile of the same service name, through /ingest (a
  // type of its own: the store names a type by its last upload)
  const folded = 'main;teamBWork 70\nmain;teamBIdle 30\n';
  const res = await fetch(`http://127.0.0.1:${store.pyroPort}/ingest?name=${SERVICE}.goroutines&format=folded`
    + `&from=${Math.floor(Date.now() / 1000) - 5}&until=${Math.floor(Date.now() / 1000)}`,
  { method: 'POST', body: folded, headers: { 'x-scope-orgid': 'team-b' } });
  assert.equal(res.status, 200, await res.text());
  let bTypes = [];
  const ok = await until(async () => {
    bTypes = (await teamB.profileTypes(range())).profileTypes;
    return bTypes.length > 0;
  }, 30000, 300);
  assert.ok(ok, `team-b's profile is stored: ${store.pl.log}`);
  assert.equal(bTypes.length, 1, JSON.stringify(bTypes));
  const bTotal = await teamB.selectMergeStacktraces({ profileTypeID: bTypes[0].ID, labelSelector: '{}', ...range() });
  assert.ok(bTotal.flamegraph.names.includes('teamBWork'));
  assert.ok(!bTotal.flamegraph.names.some((n) => /burnCpu/.test(n)), 'no other tenant\'s stacks');
  const fb = bTotal.flamegraph;
  const work = fb.levels[2].values; // total > main > {teamBIdle, teamBWork}
  assert.equal(work.length, 8);
  assert.equal(Number(work[1]) * 70, Number(work[5]) * 30, 'the folded values, in proportion');
  assert.deepEqual((await teamB.labelValues({ name: 'service_name', matchers: [], ...range() })).names, [SERVICE]);
  // team-a: the SDK's uploads again (once correlation lets them go), nothing of team-b
  const aTotal = async (type) => big((await teamA.selectMergeStacktraces({ profileTypeID: typeId(type),
    labelSelector: `{service_name="${SERVICE}"}`, ...range() })).flamegraph.total);
  await until(async () => {
    for (const type of sent.byType.keys()) if (await aTotal(type) !== want(type)) return false;
    return true;
  }, 30000, 300);
  for (const type of sent.byType.keys()) {
    const a = await teamA.selectMergeStacktraces({ profileTypeID: typeId(type),
      labelSelector: `{service_name="${SERVICE}"}`, ...range() });
    assert.equal(big(a.flamegraph.total), want(type), `team-a ${type}`);
  }
  const aLabels = await teamA.labelValues({ name: 'step', matchers: [], ...range() });
  assert.deepEqual(aLabels.names, ['checkout', 'pricing']);
  const aSpan = await teamA.selectMergeSpanProfile({ profileTypeID: typeId('wall'), labelSelector: '{}',
    spanSelector: [requests[0].childId], ...range() });
  assert.equal(big(aSpan.flamegraph.total), want('wall', requests[0].childId));
  // no header: neither team-b's stacks nor team-a's copies
  for (const client of [binary, json]) {
    for (const t of (await client.profileTypes(range())).profileTypes) {
      const r = await client.selectMergeStacktraces({ profileTypeID: t.ID, labelSelector: '{}', ...range() });
      assert.ok(!r.flamegraph.names.includes('teamBWork'), `${t.ID}`);
      const sentT = sent.byType.get(t.sampleType);
      if (sentT) assert.equal(big(r.flamegraph.total), want(t.sampleType), `no header ${t.ID}`);
    }
  }
  // a tenant with nothing stored
  const teamC = await fetch(`http://127.0.0.1:${store.apiPort}/querier.v1.QuerierService/ProfileTypes`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-scope-orgid': 'team-c' }, body: '{}' });
  assert.equal(teamC.status, 200);
  assert.deepEqual((await teamC.json()).profileTypes ?? [], []);
  // the legacy render with the header
  const q = encodeURIComponent(`${bTypes[0].ID}{}`);
  const render = await fetch(`http://127.0.0.1:${store.apiPort}/pyroscope/render?query=${q}`
    + `&from=now-1h&until=${Date.now() + 60000}&format=json`, { headers: { 'x-scope-orgid': 'team-b' } })
    .then((x) => x.json());
  assert.equal(BigInt(render.flamebearer.numTicks), big(fb.total));
});
