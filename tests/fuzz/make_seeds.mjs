// make_seeds.mjs: writes the seed corpora of the fuzz targets that had none
// (tests/fuzz/corpus/<target>/). Run from the repository root:
//   node tests/fuzz/make_seeds.mjs
// Seeds are small valid (and a few nearly valid) inputs in each target's
// input layout, so libFuzzer starts from the interesting paths.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const root = path.join('tests', 'fuzz', 'corpus');

function put(target, name, bytes) {
  const dir = path.join(root, target);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, name), bytes);
}

function varint(v) {
  let x = BigInt(v);
  const out = [];
  while (x >= 0x80n) { out.push(Number((x & 0x7fn) | 0x80n)); x >>= 7n; }
  out.push(Number(x));
  return Buffer.from(out);
}
const tag = (f, wt) => varint((f << 3) | wt);
const fv = (f, v) => Buffer.concat([tag(f, 0), varint(v)]);
const fb = (f, b) => Buffer.concat([tag(f, 2), varint(b.length), Buffer.from(b)]);
const packed = (f, vals) => fb(f, Buffer.concat(vals.map(varint)));
const b = (...parts) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));

// A small pprof: two sample types, one mapping, two functions/locations.
const pprof = b(
  fb(6, ''), fb(6, 'samples'), fb(6, 'count'), fb(6, 'cpu'), fb(6, 'nanoseconds'),
  fb(6, 'main'), fb(6, 'work'), fb(6, 'span_id'), fb(6, '0123456789abcdef'),
  fb(1, b(fv(1, 1), fv(2, 2))), fb(1, b(fv(1, 3), fv(2, 4))),
  fb(3, b(fv(1, 1), fv(2, 0x1000), fv(3, 0x2000))),
  fb(5, b(fv(1, 10), fv(2, 5))), fb(5, b(fv(1, 11), fv(2, 6))),
  fb(4, b(fv(1, 100), fv(2, 1), fb(4, b(fv(1, 11), fv(2, 7))))),
  fb(4, b(fv(1, 101), fv(2, 1), fb(4, b(fv(1, 10), fv(2, 3))))),
  fb(2, b(packed(1, [100, 101]), packed(2, [2, 20000000]), fb(3, b(fv(1, 7), fv(2, 8))))),
  fv(9, 1700000000000000000n), fv(10, 10000000000n), fb(11, b(fv(1, 3), fv(2, 4))), fv(12, 10000000),
);

// ---- fuzz_ingest: query NUL content-type NUL sample_type_config ----
put('fuzz_ingest', 'plain', b('name=app.cpu&from=1700000000&until=1700000010&format=pprof&spyName=gospy&sampleRate=100', '\0', 'application/octet-stream', '\0'));
put('fuzz_ingest', 'labels', b('name=shop%7Bservice_name%3Dcheckout%2Cregion%3Deu%7D&from=now-1h&until=now', '\0', 'multipart/form-data; boundary=x', '\0',
  '{"cpu":{"units":"samples","aggregation":"sum","display-name":"cpu_time"},"samples":{"units":"samples"}}'));
put('fuzz_ingest', 'date', b('name=a.b.c%7Bk%3Dv%7D&from=20240102&until=1700000000000&format=lines', '\0', '', '\0', '{"samples":{"display-name":"x","units":"objects"}}'));
put('fuzz_ingest', 'bad', b('name=%7B%7D&from=now-99999999999999d&until=now+1&format=trie', '\0', 'binary/octet-stream+trie', '\0', '{"cpu": [1,2,'));

// ---- fuzz_pprof_scrape: [status selector][flags] body ----
put('fuzz_pprof_scrape', 'raw', b(Buffer.from([0, 0]), pprof));
put('fuzz_pprof_scrape', 'gzip', b(Buffer.from([1, 0]), zlib.gzipSync(pprof)));
put('fuzz_pprof_scrape', 'truncated', b(Buffer.from([2, 1]), pprof.subarray(0, 40)));
put('fuzz_pprof_scrape', 'status', b(Buffer.from([3, 0]), 'not found'));

// ---- fuzz_queue_storage: [kind][signal][raw_size u32le][stored_as][len u16le] bytes ----
function row(kind, signal, raw, storedAs, bytes) {
  const h = Buffer.alloc(9);
  h[0] = kind; h[1] = signal; h.writeUInt32LE(raw, 2); h[6] = storedAs; h.writeUInt16LE(bytes.length, 7);
  return b(h, bytes);
}
const traces = fb(1, fb(2, fb(2, b(fb(1, Buffer.alloc(16, 1)), fb(2, Buffer.alloc(8, 2)), fb(5, 'op')))));
const meta = (items) => {
  const parts = [Buffer.from([0, 0, 0, items.length])];
  for (const [k, v] of items) {
    const kl = Buffer.alloc(4); kl.writeUInt32BE(k.length);
    const vl = Buffer.alloc(4); vl.writeUInt32BE(v.length);
    parts.push(kl, Buffer.from(k), vl, Buffer.from(v));
  }
  return Buffer.concat(parts);
};
put('fuzz_queue_storage', 'raw_rows', b(row(0, 0, 5, 1, Buffer.from('hello')), row(0, 1, 3, 1, Buffer.from('abc'))));
put('fuzz_queue_storage', 'wal_traces', b(row(1, 0, 0, 0, b(meta([['tenant', 'a']]), traces)), row(1, 0, 0, 0, b(meta([]), traces))));
put('fuzz_queue_storage', 'wal_logs', row(1, 2, 0, 0, b(meta([]), fb(1, fb(2, fb(2, fv(1, 5)))))));
put('fuzz_queue_storage', 'bad_sizes', b(row(0, 0, 0x7fffffff, 0x81, Buffer.from('x')), row(0, 5, 1, 0, Buffer.from('y')), row(1, 0, 0, 0, Buffer.from([0, 0, 0, 9]))));

// ---- fuzz_otlp_pb: byte 0 picks the decoder ----
put('fuzz_otlp_pb', 'traces', b(Buffer.from([0]), traces));
put('fuzz_otlp_pb', 'traces_attrs', b(Buffer.from([0]), fb(1, b(fb(1, fb(1, b(fb(1, 'service.name'), fb(2, fb(1, 'svc'))))), fb(2, fb(2, b(fb(1, Buffer.alloc(16, 3)), fb(2, Buffer.alloc(8, 4)), fb(5, 'GET /'), fv(6, 2),
  fb(9, b(fb(1, 'k'), fb(2, fv(3, 42)))))))))));
put('fuzz_otlp_pb', 'logs', b(Buffer.from([2]), fb(1, fb(2, fb(2, fv(1, 5))))));
put('fuzz_otlp_pb', 'profiles_empty', b(Buffer.from([1]), fb(1, fb(2, ''))));

// ---- fuzz_config: collector.yaml ----
put('fuzz_config', 'minimal', `receivers:
  otlp:
    protocols:
      grpc: { endpoint: 127.0.0.1:4317 }
      http: { endpoint: 127.0.0.1:4318 }
processors:
  batch: { timeout: 1s, send_batch_size: 512 }
exporters:
  debug: { verbosity: basic }
service:
  pipelines:
    traces: { receivers: [otlp], processors: [batch], exporters: [debug] }
`);
put('fuzz_config', 'pyroscope_queue', `receivers:
  pyroscope: { endpoint: 127.0.0.1:4040, max_decoded_memory: 40MiB }
processors:
  correlation: { window: 30s }
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:4318
    sending_queue: { storage: /tmp/q, num_consumers: 2 }
    retry_on_failure: { initial_interval: 1s }
service:
  pipelines:
    profiles: { receivers: [pyroscope], processors: [correlation], exporters: [otlphttp] }
`);
put('fuzz_config', 'env', 'receivers:\n  otlp:\n    protocols:\n      http: { endpoint: "${env:HOST:-127.0.0.1}:4318" }\nexporters:\n  debug: {}\nservice:\n  pipelines:\n    logs: { receivers: [otlp], exporters: [debug] }\n');

// ---- fuzz_exporter_response: mode, then 5 fields split by 0xFF ----
const FF = Buffer.from([0xff]);
const st = (code, msg) => b(fv(1, code), fb(2, msg));
put('fuzz_exporter_response', 'ok', b(Buffer.from([0]), FF, FF, FF, FF, fb(1, b(fv(1, 0), fb(2, '')))));
put('fuzz_exporter_response', 'retry', b(Buffer.from([2 | (3 << 3)]), '5', FF, FF, FF, FF, 'slow down'));
put('fuzz_exporter_response', 'grpc', b(Buffer.from([1 | (1 << 3)]), FF, '14', FF, 'unavailable%20now', FF,
  Buffer.from(st(14, 'down')).toString('base64'), FF, Buffer.from([0, 0, 0, 0, 2, 0x0a, 0x00])));
put('fuzz_exporter_response', 'partial', b(Buffer.from([0]), FF, FF, FF, FF, fb(1, b(fv(1, 3), fb(2, 'three rejected')))));

// ---- fuzz_query_api: request targets ----
put('fuzz_query_api', 'traces', '/api/traces?since=1h&limit=20&service=checkout');
put('fuzz_query_api', 'trace', '/api/traces/0102030405060708090a0b0c0d0e0f10');
put('fuzz_query_api', 'flame', '/api/flamegraph?service=checkout&since=15m&format=json&type=cpu');
put('fuzz_query_api', 'bad', '/api/traces?since=-1x&limit=99999999999999999999&service=%zz');
