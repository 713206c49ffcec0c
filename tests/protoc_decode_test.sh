#!/bin/sh
# protoc_decode_test.sh: checks proflink's OTLP codec against protoc, an
# independent implementation, using the project's .proto files.
#
#   1. protoc --encode turns text-format requests into canonical protobuf;
#   2. otlp_roundtrip decodes and re-encodes them: the bytes must be identical;
#   3. protoc --decode reads proflink's output: key values must appear;
#   4. the same through OTLP/JSON (protobuf -> JSON -> protobuf) must again
#      give identical bytes.
#
# usage: protoc_decode_test.sh PATH/TO/otlp_roundtrip BUILD/proto SOURCE/proto
# (the build's proto/ holds the OTLP signal files with their envelope stamped
# in, see proto/otlp_envelope.py; it is searched first, like protoc's -I)
set -eu
tool=$1
build_protos=$2
src_protos=$3
command -v protoc >/dev/null || { echo "protoc not found (it is a build dependency)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0

TRACE_MSG=opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest
TRACE_PROTO=opentelemetry/proto/collector/trace/v1/trace_service.proto
PROF_MSG=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest
PROF_PROTO=opentelemetry/proto/collector/profiles/v1development/profiles_service.proto

check() { # name, condition-result
    n=$((n + 1))
    if [ "$2" = 0 ]; then echo "ok $n $1"; else echo "not ok $n $1"; fails=$((fails + 1)); fi
}

cat >"$tmp/traces.txt" <<'TXT'
resource_spans {
  resource {
    attributes { key: "service.name" value { string_value: "checkout" } }
    attributes { key: "empty" value { } }
    dropped_attributes_count: 2
    entity_refs { schema_url: "u" type: "service" id_keys: "service.name" description_keys: "service.version" }
  }
  scope_spans {
    scope { name: "demo" version: "1.0" attributes { key: "s" value { bool_value: false } } dropped_attributes_count: 1 }
    spans {
      trace_id: "\x0a\xf7\x65\x19\x16\xcd\x43\xdd\x84\x48\xeb\x21\x1c\x80\x31\x9c"
      span_id: "\xb7\xad\x6b\x71\x69\x20\x33\x31"
      trace_state: "vendor=1"
      parent_span_id: "\x01\x02\x03\x04\x05\x06\x07\x08"
      flags: 769
      name: "GET /cart"
      kind: SPAN_KIND_SERVER
      start_time_unix_nano: 1700000000000000000
      end_time_unix_nano: 1700000000250000000
      attributes { key: "http.route" value { string_value: "/cart" } }
      attributes { key: "int" value { int_value: -42 } }
      attributes { key: "zero" value { int_value: 0 } }
      attributes { key: "dbl" value { double_value: 3.25 } }
      attributes { key: "bytes" value { bytes_value: "\x00\xff" } }
      attributes { key: "arr" value { array_value { values { string_value: "a" } values { kvlist_value { values { key: "n" value { double_value: -0.5 } } } } } } }
      attributes { key: "utf8" value { string_value: "caf\303\251 \342\202\254" } }
      dropped_attributes_count: 3
      events { time_unix_nano: 1700000000100000000 name: "exception" attributes { key: "exception.message" value { string_value: "boom" } } dropped_attributes_count: 1 }
      dropped_events_count: 4
      links { trace_id: "\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11" span_id: "\x22\x22\x22\x22\x22\x22\x22\x22" trace_state: "k=v" attributes { key: "l" value { int_value: 1 } } dropped_attributes_count: 2 flags: 256 }
      dropped_links_count: 5
      status { message: "failed" code: STATUS_CODE_ERROR }
    }
    spans { name: "no-ids" status { } }
    schema_url: "https://opentelemetry.io/schemas/1.30.0"
  }
  schema_url: "https://opentelemetry.io/schemas/1.30.0"
}
resource_spans { scope_spans { } }
TXT

cat >"$tmp/profiles.txt" <<'TXT'
resource_profiles {
  resource { attributes { key: "service.name" value { string_value: "api" } } }
  scope_profiles {
    scope { name: "ebpf" }
    profiles {
      sample_type { type_strindex: 1 unit_strindex: 2 }
      samples { stack_index: 1 attribute_indices: 1 link_index: 1 values: 10000000 values: -1 timestamps_unix_nano: 1700000000000000000 timestamps_unix_nano: 1700000000000001000 }
      samples { stack_index: 1 values: 5 }
      samples { timestamps_unix_nano: 42 }
      time_unix_nano: 1700000000000000000
      duration_nano: 10000000000
      period_type { type_strindex: 1 unit_strindex: 2 }
      period: 10000000
      profile_id: "\x42\x42\x42\x42\x42\x42\x42\x42\x42\x42\x42\x42\x42\x42\x42\x42"
      dropped_attributes_count: 1
      original_payload_format: "pprof"
      original_payload: "\x1f\x8b\x08"
      attribute_indices: 1
    }
    schema_url: "s"
  }
}
dictionary {
  mapping_table { }
  mapping_table { memory_start: 4194304 memory_limit: 5242880 file_offset: 4096 filename_strindex: 3 attribute_indices: 1 }
  location_table { }
  location_table { mapping_index: 1 address: 4198964 lines { function_index: 1 line: 42 column: 7 } lines { function_index: 2 line: 12 } attribute_indices: 2 }
  function_table { }
  function_table { name_strindex: 4 system_name_strindex: 4 filename_strindex: 5 start_line: 10 }
  function_table { name_strindex: 6 }
  link_table { trace_id: "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0" span_id: "\0\0\0\0\0\0\0\0" }
  link_table { trace_id: "\x0a\xf7\x65\x19\x16\xcd\x43\xdd\x84\x48\xeb\x21\x1c\x80\x31\x9c" span_id: "\xb7\xad\x6b\x71\x69\x20\x33\x31" }
  string_table: ""
  string_table: "cpu"
  string_table: "nanoseconds"
  string_table: "/app/bin"
  string_table: "main"
  string_table: "/app/main.go"
  string_table: "runtime.mcall"
  string_table: "thread.name"
  attribute_table { }
  attribute_table { key_strindex: 7 value { string_value: "worker-1" } }
  attribute_table { key_strindex: 7 value { string_value_strindex: 4 } unit_strindex: 2 }
  stack_table { }
  stack_table { location_indices: 1 location_indices: 1 }
}
TXT

roundtrip() { # signal, msg, proto, name
    sig=$1 msg=$2 proto=$3 name=$4
    protoc -I "$build_protos" -I "$src_protos" --encode="$msg" "$proto" <"$tmp/$name.txt" >"$tmp/$name.pb"
    rc=0
    "$tool" "$sig" <"$tmp/$name.pb" >"$tmp/$name.out" || rc=$?
    check "$name: decode+encode succeeds" $rc
    rc=0
    cmp -s "$tmp/$name.pb" "$tmp/$name.out" || rc=1
    check "$name: re-encoded bytes equal protoc's" $rc
    rc=0
    protoc -I "$build_protos" -I "$src_protos" --decode="$msg" "$proto" <"$tmp/$name.out" >"$tmp/$name.dec" || rc=$?
    check "$name: protoc decodes proflink's output" $rc
    rc=0
    "$tool" "$sig" --to-json <"$tmp/$name.pb" >"$tmp/$name.json" &&
        "$tool" "$sig" --from-json <"$tmp/$name.json" >"$tmp/$name.fromjson" || rc=$?
    check "$name: protobuf -> JSON -> protobuf succeeds" $rc
    rc=0
    cmp -s "$tmp/$name.pb" "$tmp/$name.fromjson" || rc=1
    check "$name: protobuf -> JSON -> protobuf gives the same bytes" $rc
}

expect() { # name, file, fixed string
    rc=0
    grep -qF -- "$3" "$2" || rc=1
    check "$1: has $3" $rc
}

roundtrip traces "$TRACE_MSG" "$TRACE_PROTO" traces
for s in 'span_id: "\267\255kqi 31"' 'name: "GET /cart"' 'kind: SPAN_KIND_SERVER' \
    'start_time_unix_nano: 1700000000000000000' 'flags: 769' 'int_value: -42' \
    'double_value: 3.25' 'code: STATUS_CODE_ERROR' 'dropped_links_count: 5' \
    'string_value: "caf\303\251 \342\202\254"' 'description_keys: "service.version"'; do
    expect traces "$tmp/traces.dec" "$s"
done
expect traces-json "$tmp/traces.json" '"traceId":"0af7651916cd43dd8448eb211c80319c"'
expect traces-json "$tmp/traces.json" '"startTimeUnixNano":"1700000000000000000"'

roundtrip profiles "$PROF_MSG" "$PROF_PROTO" profiles
for s in 'values: -1' 'timestamps_unix_nano: 1700000000000001000' 'link_index: 1' \
    'string_table: "runtime.mcall"' 'string_value_strindex: 4' 'memory_limit: 5242880' \
    'column: 7' 'period: 10000000' 'original_payload_format: "pprof"'; do
    expect profiles "$tmp/profiles.dec" "$s"
done
expect profiles-json "$tmp/profiles.json" '"spanId":"b7ad6b7169203331"'

# A request protoc encodes with a bad id length must be rejected with its place.
printf 'resource_spans { scope_spans { spans { trace_id: "abc" } } }' |
    protoc -I "$build_protos" -I "$src_protos" --encode="$TRACE_MSG" "$TRACE_PROTO" >"$tmp/bad.pb"
rc=0
"$tool" traces <"$tmp/bad.pb" >/dev/null 2>"$tmp/bad.err" && rc=1
grep -q 'resource_spans\[0\].scope_spans\[0\].spans\[0\].trace_id: length 3, want 16' "$tmp/bad.err" || rc=1
check "bad trace_id rejected with its place" $rc

echo "1..$n"
[ "$fails" = 0 ]
