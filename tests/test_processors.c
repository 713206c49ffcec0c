/*
 * test_processors.c: the batch, memory_limiter, attributes, resource and
 * redaction processors, driven through their descriptors (config decoded
 * from YAML by the real loader tables, create/start/consume/shutdown/
 * destroy) with capture consumers and hand-built batches; and a pipeline
 * of several of them in order.
 */
#include <math.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <uv.h>

#include "core/strlist.h"
#include "core/pattern.h"
#include "proto/otlp_pb.h"
#include "proto/pb_wire.h"
#include "processors_fixtures.h"
#include "testlib.h"

/* ---- small accessors ----------------------------------------------------- */

static pl_kv *attr(pl_attrs *a, const char *key)
{
    return pl_attrs_find(a, key, strlen(key));
}

static bool attr_is_str(pl_attrs *a, const char *key, const char *want)
{
    pl_kv *kv = attr(a, key);
    return kv && kv->value.type == PL_VALUE_STRING && pl_bytes_eq_cstr(kv->value.u.str, want);
}

/* The codec's own index check, plus an encode/decode round trip that keeps
 * every sample the same. */
static bool profiles_encode_ok(const pl_batch *b)
{
    pl_err err;
    if (pl_otlp_validate_profiles(&b->data.profiles, &err) != PL_OK) {
        fprintf(stderr, "  validate: %s\n", err.msg);
        return false;
    }
    pl_buf buf;
    pl_buf_init(&buf);
    bool ok = pl_otlp_encode_profiles(&b->data.profiles, &buf);
    pl_batch *d = pl_batch_new(PL_SIGNAL_PROFILES);
    if (ok && pl_otlp_decode_profiles(d, buf.data, buf.len, &err) != PL_OK) {
        fprintf(stderr, "  decode: %s\n", err.msg);
        ok = false;
    }
    pl_batch_free(d);
    pl_buf_free(&buf);
    return ok;
}

/* Runs `yaml` as an attributes processor over one span whose attributes the
 * caller set up through `setup`; returns the output batch (caller frees). */
typedef void (*setup_fn)(pl_batch *b, pl_attrs *a);

static pl_batch *run_attributes(const char *yaml, setup_fn setup)
{
    px_proc p;
    if (px_open(&p, &pl_processor_attributes, yaml, NULL) != PL_OK) {
        fprintf(stderr, "  open failed: %s\n", p.err.msg);
        px_close(&p);
        return NULL;
    }
    px_capture cap;
    px_capture_init(&cap);
    pl_batch *b = px_traces(1, 1);
    if (setup)
        setup(b, &px_span(b, 0, 0)->attrs);
    pl_status st = px_consume(&p, b, &cap.consumer);
    px_close(&p);
    if (st != PL_OK || cap.n != 1) {
        px_capture_clear(&cap);
        return NULL;
    }
    return cap.batches[0];
}

static void setup_common(pl_batch *b, pl_attrs *a)
{
    px_put_str(b, a, "user.email", "alice@example.com");
    px_put(b, a, "count", pl_value_int(42));
    px_put(b, a, "ratio", pl_value_double(1.5));
    px_put(b, a, "ok", pl_value_bool(true));
    px_put_str(b, a, "num.text", "123");
    px_put_str(b, a, "float.text", "2.25");
    px_put_str(b, a, "url", "https://shop.example.com:8443/cart?id=7");
    px_put_str(b, a, "empty", "");
}

/* ---- attributes: each action --------------------------------------------- */

static void test_attributes_insert(void)
{
    pl_batch *b = run_attributes("actions:\n"
                                 "  - {key: env, action: insert, value: prod}\n"
                                 "  - {key: http.route, action: insert, value: /other}\n",
                                 NULL);
    REQUIRE(b);
    pl_attrs *a = &px_span(b, 0, 0)->attrs;
    CHECK(attr_is_str(a, "env", "prod"));
    CHECK(attr_is_str(a, "http.route", "/api/items")); /* present: not replaced */
    CHECK_EQ_UINT(a->n, 2);
    pl_batch_free(b);
}

static void setup_metadata(pl_batch *b, pl_attrs *a)
{
    (void)a;
    b->metadata.n = 2;
    b->metadata.items = pl_batch_alloc(b, 2 * sizeof(pl_kv));
    b->metadata.items[0].key = px_str(b, "x-tenant");
    b->metadata.items[0].value = pl_value_string(px_str(b, "acme"));
    b->metadata.items[1].key = px_str(b, "auth.user");
    b->metadata.items[1].value = pl_value_string(px_str(b, "ann"));
}

/* from_context: the request's metadata (metadata.<key>) and the
 * authenticated user (auth.username); an absent key leaves attrs alone. */
static void test_attributes_from_context(void)
{
    pl_batch *b =
        run_attributes("actions:\n"
                       "  - {key: tenant, action: insert, from_context: metadata.x-tenant}\n"
                       "  - {key: user, action: upsert, from_context: auth.username}\n"
                       "  - {key: gone, action: insert, from_context: metadata.nope}\n",
                       setup_metadata);
    REQUIRE(b);
    pl_attrs *a = &px_span(b, 0, 0)->attrs;
    CHECK(attr_is_str(a, "tenant", "acme"));
    CHECK(attr_is_str(a, "user", "ann"));
    CHECK(attr(a, "gone") == NULL);
    pl_batch_free(b);
}

static void test_attributes_update(void)
{
    pl_batch *b = run_attributes("actions:\n"
                                 "  - {key: http.route, action: update, value: /x}\n"
                                 "  - {key: missing, action: update, value: y}\n",
                                 NULL);
    REQUIRE(b);
    pl_attrs *a = &px_span(b, 0, 0)->attrs;
    CHECK(attr_is_str(a, "http.route", "/x"));
    CHECK(attr(a, "missing") == NULL);
    pl_batch_free(b);
}

static void test_attributes_upsert_and_types(void)
{
    pl_batch *b =
        run_attributes("actions:\n"
                       "  - {key: http.route, action: upsert, value: /y}\n"
                       "  - {key: n, action: upsert, value: '7', value_type: int}\n"
                       "  - {key: d, action: upsert, value: '0.5', value_type: double}\n"
                       "  - {key: flag, action: upsert, value: 'true', value_type: bool}\n",
                       NULL);
    REQUIRE(b);
    pl_attrs *a = &px_span(b, 0, 0)->attrs;
    CHECK(attr_is_str(a, "http.route", "/y"));
    pl_kv *kv = attr(a, "n");
    REQUIRE(kv);
    CHECK(kv->value.type == PL_VALUE_INT && kv->value.u.i == 7);
    kv = attr(a, "d");
    REQUIRE(kv);
    CHECK(kv->value.type == PL_VALUE_DOUBLE && kv->value.u.d == 0.5);
    kv = attr(a, "flag");
    REQUIRE(kv);
    CHECK(kv->value.type == PL_VALUE_BOOL && kv->value.u.b);
    pl_batch_free(b);
}

static void setup_every_type(pl_batch *b, pl_attrs *a)
{
    pl_value arr;
    memset(&arr, 0, sizeof(arr));
    arr.type = PL_VALUE_ARRAY;
    arr.u.array.n = 2;
    arr.u.array.items = pl_batch_alloc(b, 2 * sizeof(pl_value));
    arr.u.array.items[0] = pl_value_int(1);
    arr.u.array.items[1] = pl_value_string(px_str(b, "x\"y"));
    pl_value map;
    memset(&map, 0, sizeof(map));
    map.type = PL_VALUE_KVLIST;
    map.u.kvlist.n = 2;
    map.u.kvlist.items = pl_batch_alloc(b, 2 * sizeof(pl_kv));
    map.u.kvlist.items[0].key = px_str(b, "a");
    map.u.kvlist.items[0].value = pl_value_bool(false);
    map.u.kvlist.items[1].key = px_str(b, "b");
    map.u.kvlist.items[1].value = pl_value_double(0.25);
    pl_value bytes;
    memset(&bytes, 0, sizeof(bytes));
    bytes.type = PL_VALUE_BYTES;
    bytes.u.str = px_str(b, "hi!");
    pl_value empty;
    memset(&empty, 0, sizeof(empty));
    px_put(b, a, "v.arr", arr);
    px_put(b, a, "v.map", map);
    px_put(b, a, "v.bytes", bytes);
    px_put(b, a, "v.empty", empty);
    px_put(b, a, "v.int", pl_value_int(-3));
    px_put(b, a, "v.double", pl_value_double(3.0));
    px_put(b, a, "v.bool", pl_value_bool(false));
    px_put_str(b, a, "v.str", "s");
}

static void test_attributes_from_attribute_every_type(void)
{
    static const char *keys[] = {"v.arr", "v.map",    "v.bytes", "v.empty",
                                 "v.int", "v.double", "v.bool",  "v.str"};
    char yaml[2048];
    size_t o = (size_t)snprintf(yaml, sizeof(yaml), "actions:\n");
    for (int i = 0; i < 8; i++)
        o += (size_t)snprintf(yaml + o, sizeof(yaml) - o,
                              "  - {key: copy.%s, action: insert, from_attribute: %s}\n", keys[i],
                              keys[i]);
    o += (size_t)snprintf(yaml + o, sizeof(yaml) - o,
                          "  - {key: copy.none, action: upsert, from_attribute: nope}\n");
    pl_batch *b = run_attributes(yaml, setup_every_type);
    REQUIRE(b);
    pl_attrs *a = &px_span(b, 0, 0)->attrs;
    for (int i = 0; i < 8; i++) {
        char k[64];
        snprintf(k, sizeof(k), "copy.%s", keys[i]);
        pl_kv *src = attr(a, keys[i]), *dst = attr(a, k);
        CHECK(src && dst);
        if (src && dst)
            CHECK(pl_value_eq(&src->value, &dst->value));
    }
    CHECK(attr(a, "copy.none") == NULL); /* missing source: nothing */
    pl_batch_free(b);
}

static void test_attributes_delete(void)
{
    pl_batch *b = run_attributes("actions:\n"
                                 "  - {key: user.email, action: delete}\n"
                                 "  - {pattern: '^(num|float)\\.', action: delete}\n"
                                 "  - {key: not.there, action: delete}\n",
                                 setup_common);
    REQUIRE(b);
    pl_attrs *a = &px_span(b, 0, 0)->attrs;
    CHECK(attr(a, "user.email") == NULL);
    CHECK(attr(a, "num.text") == NULL);
    CHECK(attr(a, "float.text") == NULL);
    CHECK(attr(a, "count") != NULL);
    CHECK(attr(a, "http.route") != NULL);
    CHECK_EQ_UINT(a->n, 6);
    pl_batch_free(b);
}

static void test_sha256_vectors(void)
{
    char hex[65];
    pl_sha256_hex("abc", 3, hex);
    CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    pl_sha256_hex("", 0, hex);
    CHECK_EQ_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 56 bytes */
    pl_sha256_hex(m, strlen(m), hex);
    CHECK_EQ_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char big[1000];
    memset(big, 'a', sizeof(big));
    pl_sha256_hex(big, sizeof(big), hex);
    CHECK_EQ_STR(hex, "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

static void test_attributes_hash(void)
{
    pl_batch *b;
    /* Two setups in one span: common values and every type. */
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_attributes,
                    "actions:\n"
                    "  - {key: user.email, action: hash}\n"
                    "  - {key: count, action: hash}\n"
                    "  - {key: ok, action: hash}\n"
                    "  - {key: ratio, action: hash}\n"
                    "  - {key: empty, action: hash}\n"
                    "  - {key: missing, action: hash}\n"
                    "  - {pattern: '^v\\.(arr|map)$', action: hash}\n",
                    NULL) == PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    b = px_traces(1, 1);
    pl_attrs *a = &px_span(b, 0, 0)->attrs;
    setup_common(b, a);
    setup_every_type(b, a);
    CHECK_EQ_INT(px_consume(&p, b, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 1);
    a = &px_span(cap.batches[0], 0, 0)->attrs;
    char hex[65];
    pl_sha256_hex("alice@example.com", 17, hex);
    CHECK(attr_is_str(a, "user.email", hex));
    /* Collector: int as 8 little-endian bytes, bool as one byte, double as
     * its IEEE bits little-endian. */
    CHECK(attr_is_str(a, "count",
                      "ed049108bc18f2c64369e8d0ea42850bdd1a7d1dd340cfde716315579702a76c"));
    CHECK(attr_is_str(a, "ok", "4bf5122f344554c53bde2ebb8cd2b7e3d1600ad631c385a5d7cce23c7785459a"));
    CHECK(attr_is_str(a, "ratio",
                      "e163f8cb0f7067a7fc78ca859a77f849aea3214f38fb75b884e4a16be725c905"));
    CHECK(attr_is_str(a, "empty", ""));
    CHECK(attr(a, "missing") == NULL);
    CHECK(attr_is_str(a, "v.arr", "")); /* arrays and maps hash to "" as in the Collector */
    CHECK(attr_is_str(a, "v.map", ""));
    CHECK(attr(a, "v.int")->value.type == PL_VALUE_INT); /* not matched: untouched */
    px_capture_clear(&cap);
    px_close(&p);
}

static void test_attributes_extract(void)
{
    pl_batch *b = run_attributes(
        "actions:\n"
        "  - key: url\n"
        "    action: extract\n"
        "    pattern: '^(?P<scheme>[a-z]+)://(?<host>[^:/]+)(:(?P<port>[0-9]+))?(?:/.*)?$'\n"
        "  - {key: count, action: extract, pattern: '(?P<digit>[0-9])'}\n"
        "  - {key: user.email, action: extract, pattern: '^(?P<never>zzz)'}\n"
        "  - {key: missing, action: extract, pattern: '(?P<x>.)'}\n",
        setup_common);
    REQUIRE(b);
    pl_attrs *a = &px_span(b, 0, 0)->attrs;
    CHECK(attr_is_str(a, "scheme", "https"));
    CHECK(attr_is_str(a, "host", "shop.example.com"));
    CHECK(attr_is_str(a, "port", "8443"));
    CHECK(attr(a, "digit") == NULL); /* int value: extract needs a string */
    CHECK(attr(a, "never") == NULL); /* no match: nothing */
    CHECK(attr(a, "x") == NULL);
    CHECK(attr_is_str(a, "url", "https://shop.example.com:8443/cart?id=7"));
    pl_batch_free(b);
}

static void test_attributes_convert(void)
{
    pl_batch *b = run_attributes("actions:\n"
                                 "  - {key: num.text, action: convert, converted_type: int}\n"
                                 "  - {key: user.email, action: convert, converted_type: int}\n"
                                 "  - {key: ratio, action: convert, converted_type: int}\n"
                                 "  - {key: ok, action: convert, converted_type: double}\n"
                                 "  - {key: float.text, action: convert, converted_type: double}\n"
                                 "  - {key: count, action: convert, converted_type: string}\n"
                                 "  - {key: missing, action: convert, converted_type: string}\n",
                                 setup_common);
    REQUIRE(b);
    pl_attrs *a = &px_span(b, 0, 0)->attrs;
    CHECK(attr(a, "num.text")->value.type == PL_VALUE_INT && attr(a, "num.text")->value.u.i == 123);
    CHECK(attr_is_str(a, "user.email", "alice@example.com")); /* not a number: unchanged */
    CHECK(attr(a, "ratio")->value.type == PL_VALUE_INT && attr(a, "ratio")->value.u.i == 1);
    CHECK(attr(a, "ok")->value.type == PL_VALUE_DOUBLE && attr(a, "ok")->value.u.d == 1.0);
    CHECK(attr(a, "float.text")->value.type == PL_VALUE_DOUBLE &&
          attr(a, "float.text")->value.u.d == 2.25);
    CHECK(attr_is_str(a, "count", "42"));
    CHECK(attr(a, "missing") == NULL);
    pl_batch_free(b);
}

static void test_attributes_convert_every_type_to_string(void)
{
    pl_batch *b;
    char yaml[1024];
    static const char *keys[] = {"v.arr", "v.map",    "v.bytes", "v.empty",
                                 "v.int", "v.double", "v.bool",  "v.str"};
    size_t o = (size_t)snprintf(yaml, sizeof(yaml), "actions:\n");
    for (int i = 0; i < 8; i++)
        o += (size_t)snprintf(yaml + o, sizeof(yaml) - o,
                              "  - {key: %s, action: convert, converted_type: string}\n", keys[i]);
    b = run_attributes(yaml, setup_every_type);
    REQUIRE(b);
    pl_attrs *a = &px_span(b, 0, 0)->attrs;
    CHECK(attr_is_str(a, "v.arr", "[1,\"x\\\"y\"]"));
    CHECK(attr_is_str(a, "v.map", "{\"a\":false,\"b\":0.25}"));
    CHECK(attr_is_str(a, "v.bytes", "aGkh"));
    CHECK(attr(a, "v.empty")->value.type == PL_VALUE_EMPTY); /* empty stays empty */
    CHECK(attr_is_str(a, "v.int", "-3"));
    CHECK(attr_is_str(a, "v.double", "3"));
    CHECK(attr_is_str(a, "v.bool", "false"));
    CHECK(attr_is_str(a, "v.str", "s"));
    pl_batch_free(b);
    /* and to int/double: types that cannot convert stay as they are */
    b = run_attributes("actions:\n"
                       "  - {key: v.arr, action: convert, converted_type: int}\n"
                       "  - {key: v.map, action: convert, converted_type: double}\n"
                       "  - {key: v.bytes, action: convert, converted_type: int}\n"
                       "  - {key: v.int, action: convert, converted_type: double}\n"
                       "  - {key: v.double, action: convert, converted_type: int}\n"
                       "  - {key: v.bool, action: convert, converted_type: int}\n",
                       setup_every_type);
    REQUIRE(b);
    a = &px_span(b, 0, 0)->attrs;
    CHECK(attr(a, "v.arr")->value.type == PL_VALUE_ARRAY);
    CHECK(attr(a, "v.map")->value.type == PL_VALUE_KVLIST);
    CHECK(attr(a, "v.bytes")->value.type == PL_VALUE_BYTES);
    CHECK(attr(a, "v.int")->value.type == PL_VALUE_DOUBLE && attr(a, "v.int")->value.u.d == -3.0);
    CHECK(attr(a, "v.double")->value.type == PL_VALUE_INT && attr(a, "v.double")->value.u.i == 3);
    CHECK(attr(a, "v.bool")->value.type == PL_VALUE_INT && attr(a, "v.bool")->value.u.i == 0);
    pl_batch_free(b);
}

static void test_attributes_actions_run_in_order(void)
{
    pl_batch *b = run_attributes("actions:\n"
                                 "  - {key: a, action: insert, value: '1'}\n"
                                 "  - {key: b, action: insert, from_attribute: a}\n"
                                 "  - {key: a, action: delete}\n"
                                 "  - {key: b, action: convert, converted_type: int}\n",
                                 NULL);
    REQUIRE(b);
    pl_attrs *a = &px_span(b, 0, 0)->attrs;
    CHECK(attr(a, "a") == NULL);
    CHECK(attr(a, "b") && attr(a, "b")->value.type == PL_VALUE_INT && attr(a, "b")->value.u.i == 1);
    pl_batch_free(b);
}

static void test_attributes_inserted_strings_live_in_the_batch(void)
{
    pl_batch *b = run_attributes("actions:\n  - {key: env, action: insert, value: prod}\n", NULL);
    REQUIRE(b);
    /* The processor is destroyed by now; its strings must not be used. */
    pl_kv *kv = attr(&px_span(b, 0, 0)->attrs, "env");
    REQUIRE(kv);
    CHECK_EQ_BYTES(kv->key.ptr, kv->key.len, "env", 3);
    CHECK_EQ_BYTES(kv->value.u.str.ptr, kv->value.u.str.len, "prod", 4);
    pl_batch_free(b);
}

/* A protobuf length-delimited field (small: one-byte lengths). */
static size_t pb_field(uint8_t *out, unsigned field, const void *data, size_t len)
{
    out[0] = (uint8_t)(field << 3 | 2);
    out[1] = (uint8_t)len;
    memcpy(out + 2, data, len);
    return len + 2;
}

/* The resource processor on opaque logs and metrics: each ResourceLogs'
 * Resource gets the actions, every other byte (scope_logs, schema_url) is
 * kept as it came; a ResourceMetrics without a resource gets one. */
static void test_resource_on_logs_and_metrics(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_resource,
                    "attributes:\n"
                    "  - {key: deployment.environment, value: prod, action: upsert}\n"
                    "  - {key: secret, action: delete}\n",
                    NULL) == PL_OK);
    /* ExportLogsServiceRequest { resource_logs { resource { attributes {
     * secret: "x" } } scope_logs { log_records { body "hi" } } schema_url "s" } } */
    uint8_t any[16], kv[32], res[40], body[16], rec[24], scope[32], rl[128], req[160];
    size_t n_any = pb_field(any, 1, "x", 1); /* AnyValue.string_value */
    size_t n_kv = pb_field(kv, 1, "secret", 6);
    n_kv += pb_field(kv + n_kv, 2, any, n_any);
    size_t n_res = pb_field(res, 1, kv, n_kv);
    size_t n_body = pb_field(body, 1, "hi", 2);
    size_t n_rec = pb_field(rec, 5, body, n_body);   /* LogRecord.body */
    size_t n_scope = pb_field(scope, 2, rec, n_rec); /* ScopeLogs.log_records */
    size_t n_rl = pb_field(rl, 1, res, n_res);
    n_rl += pb_field(rl + n_rl, 2, scope, n_scope);
    n_rl += pb_field(rl + n_rl, 3, "s", 1);
    size_t n_req = pb_field(req, 1, rl, n_rl);
    px_capture cap;
    px_capture_init(&cap);
    pl_batch *logs = pl_batch_new(PL_SIGNAL_LOGS);
    logs->data.raw = (pl_bytes){req, n_req};
    CHECK_EQ_INT(px_consume(&p, logs, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 1);
    pl_bytes out = cap.batches[0]->data.raw;
    size_t count = 0;
    CHECK(pl_otlp_count_logs(out.ptr, out.len, &count, NULL) == PL_OK && count == 1);
    CHECK(memmem(out.ptr, out.len, "deployment.environment", 22) != NULL);
    CHECK(memmem(out.ptr, out.len, "prod", 4) != NULL);
    CHECK(memmem(out.ptr, out.len, "secret", 6) == NULL);
    CHECK(memmem(out.ptr, out.len, scope, n_scope) != NULL); /* kept byte for byte */
    px_capture_clear(&cap);

    /* ExportMetricsServiceRequest { resource_metrics { scope_metrics {} } } */
    uint8_t rm[8], mreq[16];
    size_t n_rm = pb_field(rm, 2, "", 0);
    size_t n_mreq = pb_field(mreq, 1, rm, n_rm);
    pl_batch *metrics = pl_batch_new(PL_SIGNAL_METRICS);
    metrics->data.raw = (pl_bytes){mreq, n_mreq};
    CHECK_EQ_INT(px_consume(&p, metrics, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 1);
    out = cap.batches[0]->data.raw;
    CHECK(memmem(out.ptr, out.len, "deployment.environment", 22) != NULL);
    CHECK(out.len > n_mreq);
    px_capture_clear(&cap);
    px_close(&p);
}

/* ---- attributes and redaction on opaque logs and metrics ----------------- */

/* A KeyValue {key: string value} as protobuf. */
static void lm_kv(pl_buf *b, uint32_t field, const char *key, const char *val)
{
    pl_buf any, kv;
    pl_buf_init(&any);
    pl_buf_init(&kv);
    pl_pb_put_bytes(&any, 1, val, strlen(val));
    pl_pb_put_bytes(&kv, 1, key, strlen(key));
    pl_pb_put_bytes(&kv, 2, any.data, any.len);
    pl_pb_put_bytes(b, field, kv.data, kv.len);
    pl_buf_free(&any);
    pl_buf_free(&kv);
}

/* Appends `inner` to `b` as field `field` and frees it. */
static void lm_wrap(pl_buf *b, uint32_t field, pl_buf *inner)
{
    pl_pb_put_bytes(b, field, inner->data ? inner->data : (const uint8_t *)"", inner->len);
    pl_buf_free(inner);
}

/* Every message at the end of `path` (field numbers) inside `m`. */
static size_t lm_collect(pl_bytes m, const uint32_t *path, size_t depth, pl_bytes *out, size_t n,
                         size_t max)
{
    if (depth == 0) {
        if (n < max)
            out[n] = m;
        return n + 1;
    }
    pl_pb_reader r = {m.ptr, m.ptr + m.len}, sub;
    uint32_t field, wt;
    uint64_t v;
    while (r.p < r.end && pl_pb_next_field(&r, &field, &wt, &v, &sub) == 0)
        if (field == path[0] && wt == PL_PB_LEN)
            n = lm_collect((pl_bytes){sub.p, (size_t)(sub.end - sub.p)}, path + 1, depth - 1, out,
                           n, max);
    return n;
}

/* How many attributes (fields `attr_field`) `m` has; the string value of
 * `key` in *val (empty when absent or not a string). */
static size_t lm_attr(pl_bytes m, uint32_t attr_field, const char *key, pl_bytes *val)
{
    size_t count = 0;
    *val = (pl_bytes){NULL, 0};
    pl_pb_reader r = {m.ptr, m.ptr + m.len}, kv;
    uint32_t field, wt;
    uint64_t v;
    while (r.p < r.end && pl_pb_next_field(&r, &field, &wt, &v, &kv) == 0) {
        if (field != attr_field || wt != PL_PB_LEN)
            continue;
        count++;
        pl_bytes k = {NULL, 0}, s = {NULL, 0};
        pl_pb_reader sub;
        while (kv.p < kv.end && pl_pb_next_field(&kv, &field, &wt, &v, &sub) == 0) {
            if (field == 1 && wt == PL_PB_LEN)
                k = (pl_bytes){sub.p, (size_t)(sub.end - sub.p)};
            if (field == 2 && wt == PL_PB_LEN) {
                pl_pb_reader any = sub, str;
                while (any.p < any.end && pl_pb_next_field(&any, &field, &wt, &v, &str) == 0)
                    if (field == 1 && wt == PL_PB_LEN)
                        s = (pl_bytes){str.p, (size_t)(str.end - str.p)};
            }
        }
        if (pl_bytes_eq_cstr(k, key))
            *val = s;
    }
    return count;
}

/* ExportLogsServiceRequest: one ResourceLogs per service (NULL: none); each
 * with records {user.email, keep} + body "hi", then a record without
 * attributes. */
static void lm_logs(pl_buf *req, const char *const *services, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        pl_buf res, rl, scope, rec, rec2, body;
        pl_buf_init(&res);
        pl_buf_init(&rl);
        pl_buf_init(&scope);
        pl_buf_init(&rec);
        pl_buf_init(&rec2);
        pl_buf_init(&body);
        if (services[i])
            lm_kv(&res, 1, "service.name", services[i]);
        lm_kv(&res, 1, "host.name", "card-4111-1111-1111-1111");
        pl_pb_put_bytes(&body, 1, "hi", 2);
        pl_pb_put_bytes(&rec, 3, "INFO", 4); /* severity_text */
        lm_wrap(&rec, 5, &body);
        lm_kv(&rec, 6, "user.email", "a@example.com");
        lm_kv(&rec, 6, "keep", "card 4111 1111 1111 1111");
        pl_pb_put_varint(&rec, 7 << 3); /* dropped_attributes_count */
        pl_pb_put_varint(&rec, 3);
        pl_pb_put_bytes(&rec2, 3, "WARN", 4);
        lm_wrap(&scope, 2, &rec);
        lm_wrap(&scope, 2, &rec2);
        lm_wrap(&rl, 1, &res);
        lm_wrap(&rl, 2, &scope);
        pl_pb_put_bytes(&rl, 3, "schema", 6);
        lm_wrap(req, 1, &rl);
    }
}

static pl_bytes lm_run(const pl_component_type *type, const char *yaml, pl_signal signal,
                       const pl_buf *req, px_capture *cap)
{
    px_proc p;
    px_capture_init(cap);
    if (px_open(&p, type, yaml, NULL) != PL_OK)
        return (pl_bytes){NULL, 0};
    pl_batch *b = pl_batch_new(signal);
    b->data.raw = (pl_bytes){req->data, req->len};
    pl_status st = px_consume(&p, b, &cap->consumer);
    px_close(&p);
    if (st != PL_OK || cap->n != 1)
        return (pl_bytes){NULL, 0};
    return cap->batches[0]->data.raw;
}

static void test_attributes_on_log_records(void)
{
    static const char *const services[] = {"checkout"};
    pl_buf req;
    pl_buf_init(&req);
    lm_logs(&req, services, 1);
    px_capture cap;
    pl_bytes out = lm_run(&pl_processor_attributes,
                          "actions:\n"
                          "  - {key: env, action: insert, value: prod}\n"
                          "  - {key: user.email, action: hash}\n"
                          "  - {key: keep, action: update, value: changed}\n"
                          "  - {key: absent, action: update, value: x}\n",
                          PL_SIGNAL_LOGS, &req, &cap);
    REQUIRE(out.len);
    size_t count = 0;
    CHECK(pl_otlp_count_logs(out.ptr, out.len, &count, NULL) == PL_OK && count == 2);
    static const uint32_t rec_path[] = {1, 2, 2};
    pl_bytes recs[4], v;
    REQUIRE(lm_collect(out, rec_path, 3, recs, 0, 4) == 2);
    CHECK_EQ_UINT(lm_attr(recs[0], 6, "env", &v), 3);
    CHECK(pl_bytes_eq_cstr(v, "prod"));
    lm_attr(recs[0], 6, "user.email", &v);
    CHECK_EQ_UINT(v.len, 64); /* SHA-256 hex */
    lm_attr(recs[0], 6, "keep", &v);
    CHECK(pl_bytes_eq_cstr(v, "changed"));
    lm_attr(recs[0], 6, "absent", &v);
    CHECK(v.len == 0);
    CHECK(memmem(recs[0].ptr, recs[0].len, "\x2a\x04\x0a\x02hi", 6) != NULL); /* body kept */
    CHECK(memmem(recs[0].ptr, recs[0].len, "\x38\x03", 2) != NULL); /* dropped count kept */
    CHECK(memmem(recs[0].ptr, recs[0].len, "\x1a\x04INFO", 6) != NULL);
    CHECK_EQ_UINT(lm_attr(recs[1], 6, "env", &v), 1); /* inserted on a record with none */
    CHECK(pl_bytes_eq_cstr(v, "prod"));
    /* the resource and schema_url are untouched */
    static const uint32_t res_path[] = {1, 1};
    pl_bytes res[2];
    REQUIRE(lm_collect(out, res_path, 2, res, 0, 2) == 1);
    CHECK_EQ_UINT(lm_attr(res[0], 1, "env", &v), 2);
    CHECK(memmem(out.ptr, out.len, "\x1a\x06schema", 8) != NULL);
    px_capture_clear(&cap);
    pl_buf_free(&req);
}

static void test_attributes_on_logs_include_exclude(void)
{
    static const char *const services[] = {"checkout", "cart", NULL};
    pl_buf req;
    pl_buf_init(&req);
    lm_logs(&req, services, 3);
    px_capture cap;
    pl_bytes out = lm_run(&pl_processor_attributes,
                          "include: {match_type: regexp, services: ['^check']}\n"
                          "actions:\n  - {key: env, action: insert, value: prod}\n",
                          PL_SIGNAL_LOGS, &req, &cap);
    REQUIRE(out.len);
    static const uint32_t rec_path[] = {1, 2, 2};
    pl_bytes recs[8], v;
    REQUIRE(lm_collect(out, rec_path, 3, recs, 0, 8) == 6);
    for (int i = 0; i < 6; i++) {
        lm_attr(recs[i], 6, "env", &v);
        CHECK(pl_bytes_eq_cstr(v, "prod") == (i < 2));
    }
    px_capture_clear(&cap);
    /* span_names never match a log record */
    out = lm_run(&pl_processor_attributes,
                 "include: {match_type: strict, span_names: [x]}\n"
                 "actions:\n  - {key: env, action: insert, value: prod}\n",
                 PL_SIGNAL_LOGS, &req, &cap);
    REQUIRE(out.len);
    CHECK(memmem(out.ptr, out.len, "prod", 4) == NULL);
    px_capture_clear(&cap);
    /* bytes that do not parse: handed on unchanged */
    pl_buf bad;
    pl_buf_init(&bad);
    pl_buf_append(&bad, req.data, req.len - 1);
    out = lm_run(&pl_processor_attributes, "actions:\n  - {key: env, action: insert, value: p}\n",
                 PL_SIGNAL_LOGS, &bad, &cap);
    CHECK(out.ptr == bad.data && out.len == bad.len);
    px_capture_clear(&cap);
    pl_buf_free(&bad);
    pl_buf_free(&req);
}

static void test_attributes_on_metric_data_points(void)
{
    /* Metric kinds and the attribute field of their data points. */
    static const uint32_t kinds[][2] = {{5, 7}, {7, 7}, {9, 9}, {10, 1}, {11, 7}};
    pl_buf req, sm, rm;
    pl_buf_init(&req);
    pl_buf_init(&sm);
    pl_buf_init(&rm);
    for (size_t k = 0; k < 5; k++) {
        pl_buf metric, data, point;
        pl_buf_init(&metric);
        pl_buf_init(&data);
        pl_buf_init(&point);
        pl_pb_put_varint(&point, 3 << 3 | 1); /* a fixed64 time */
        for (int i = 0; i < 8; i++)
            pl_buf_append(&point, "\x11", 1);
        lm_kv(&point, kinds[k][1], "host", "h1");
        pl_pb_put_bytes(&metric, 1, "m", 1);
        lm_wrap(&data, 1, &point);
        lm_wrap(&metric, kinds[k][0], &data);
        lm_wrap(&sm, 2, &metric);
    }
    lm_wrap(&rm, 2, &sm);
    lm_wrap(&req, 1, &rm);
    px_capture cap;
    pl_bytes out = lm_run(&pl_processor_attributes,
                          "actions:\n"
                          "  - {key: env, action: upsert, value: prod}\n"
                          "  - {key: host, action: update, value: h2}\n",
                          PL_SIGNAL_METRICS, &req, &cap);
    REQUIRE(out.len);
    for (size_t k = 0; k < 5; k++) {
        uint32_t path[] = {1, 2, 2, kinds[k][0], 1};
        pl_bytes pts[2], v;
        REQUIRE(lm_collect(out, path, 5, pts, 0, 2) == 1);
        CHECK_EQ_UINT(lm_attr(pts[0], kinds[k][1], "env", &v), 2);
        CHECK(pl_bytes_eq_cstr(v, "prod"));
        lm_attr(pts[0], kinds[k][1], "host", &v);
        CHECK(pl_bytes_eq_cstr(v, "h2"));
        CHECK(memmem(pts[0].ptr, pts[0].len, "\x19\x11\x11\x11\x11\x11\x11\x11\x11", 9) != NULL);
    }
    px_capture_clear(&cap);
    pl_buf_free(&req);
}

static void test_redaction_on_logs(void)
{
    static const char *const services[] = {"checkout"};
    pl_buf req;
    pl_buf_init(&req);
    lm_logs(&req, services, 1);
    px_capture cap;
    pl_bytes out = lm_run(&pl_processor_redaction,
                          "allow_all_keys: true\n"
                          "blocked_values: ['4111[ -]?1111[ -]?1111[ -]?1111', '^hi$']\n"
                          "blocked_key_patterns: ['.*email.*']\n",
                          PL_SIGNAL_LOGS, &req, &cap);
    REQUIRE(out.len);
    CHECK(memmem(out.ptr, out.len, "\x2a\x06\x0a\x04****", 8) != NULL); /* the body */
    CHECK(memmem(out.ptr, out.len, "\x2a\x04\x0a\x02hi", 6) == NULL);
    CHECK(memmem(out.ptr, out.len, "4111", 4) == NULL);
    CHECK(memmem(out.ptr, out.len, "a@example.com", 13) == NULL);
    static const uint32_t rec_path[] = {1, 2, 2}, res_path[] = {1, 1};
    pl_bytes recs[2], res[1], v;
    REQUIRE(lm_collect(out, rec_path, 3, recs, 0, 2) == 2);
    lm_attr(recs[0], 6, "keep", &v);
    CHECK(pl_bytes_eq_cstr(v, "card ****"));
    lm_attr(recs[0], 6, "user.email", &v);
    CHECK(pl_bytes_eq_cstr(v, "****"));
    REQUIRE(lm_collect(out, res_path, 2, res, 0, 1) == 1);
    lm_attr(res[0], 1, "host.name", &v);
    CHECK(pl_bytes_eq_cstr(v, "card-****"));
    px_capture_clear(&cap);
    /* the default allow list (empty, allow_all_keys false) removes every attribute */
    out = lm_run(&pl_processor_redaction, "summary: info\n", PL_SIGNAL_LOGS, &req, &cap);
    REQUIRE(out.len);
    REQUIRE(lm_collect(out, rec_path, 3, recs, 0, 2) == 2);
    CHECK_EQ_UINT(lm_attr(recs[0], 6, "redaction.redacted.count", &v), 1);
    CHECK(memmem(out.ptr, out.len, "\x2a\x04\x0a\x02hi", 6) != NULL);
    px_capture_clear(&cap);
    /* bytes that do not parse are refused, never passed unredacted */
    pl_buf bad;
    pl_buf_init(&bad);
    pl_buf_append(&bad, req.data, req.len - 1);
    px_proc p;
    px_capture_init(&cap);
    REQUIRE(px_open(&p, &pl_processor_redaction, "allow_all_keys: true\n", NULL) == PL_OK);
    pl_batch *b = pl_batch_new(PL_SIGNAL_LOGS);
    b->data.raw = (pl_bytes){bad.data, bad.len};
    CHECK(px_consume(&p, b, &cap.consumer) != PL_OK);
    CHECK_EQ_UINT(cap.n, 0);
    px_close(&p);
    px_capture_clear(&cap);
    pl_buf_free(&bad);
    pl_buf_free(&req);
}

static void test_attributes_empty_batches_and_other_signals(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_attributes,
                    "actions:\n  - {key: env, action: insert, value: prod}\n", NULL) == PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    CHECK_EQ_INT(px_consume(&p, pl_batch_new(PL_SIGNAL_TRACES), &cap.consumer), PL_OK);
    CHECK_EQ_INT(px_consume(&p, pl_batch_new(PL_SIGNAL_PROFILES), &cap.consumer), PL_OK);
    pl_batch *logs = pl_batch_new(PL_SIGNAL_LOGS);
    logs->data.raw = PL_BYTES_LIT("opaque");
    CHECK_EQ_INT(px_consume(&p, logs, &cap.consumer), PL_OK);
    pl_batch *nospans = px_traces(2, 0);
    CHECK_EQ_INT(px_consume(&p, nospans, &cap.consumer), PL_OK);
    CHECK_EQ_UINT(cap.n, 4);
    CHECK(cap.batches[2] == logs && pl_bytes_eq_cstr(logs->data.raw, "opaque"));
    CHECK_EQ_UINT(cap.batches[3]->data.traces.n_resources, 2);
    px_capture_clear(&cap);
    /* Downstream status is passed back. */
    cap.answer = PL_ERR_REFUSED;
    CHECK_EQ_INT(px_consume(&p, px_traces(1, 1), &cap.consumer), PL_ERR_REFUSED);
    px_capture_clear(&cap);
    px_close(&p);
}

static void test_attributes_profiles_sample_attributes(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_attributes,
                    "actions:\n"
                    "  - {key: env, action: insert, value: prod}\n"
                    "  - {key: thread, action: update, value: main, }\n"
                    "  - {key: thread.hash, action: insert, from_attribute: thread}\n"
                    "  - {key: thread.hash, action: hash}\n",
                    NULL) == PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    pl_batch *b = px_profiles("svc", "", 6);
    pl_dictionary *d = &b->data.profiles.dict;
    /* Make one sample's label a string-table value and keep a copy of the
     * original attribute entries to prove they are not edited in place. */
    int32_t t1 = pl_dict_intern_attribute(&b->arena, d, px_s(b, "thread"), pl_value_int(0), 0);
    (void)t1;
    uint32_t n_attr_before = d->n_attributes;
    pl_kvu before[16];
    memcpy(before, d->attributes, n_attr_before * sizeof(pl_kvu));
    CHECK_EQ_INT(px_consume(&p, b, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 1);
    CHECK(profiles_encode_ok(cap.batches[0]));
    pl_profiles *ps = &cap.batches[0]->data.profiles;
    d = &ps->dict;
    for (uint32_t i = 0; i < n_attr_before; i++)
        CHECK(pl_value_eq(&before[i].value, &d->attributes[i].value));
    char hex[65];
    pl_sha256_hex("main", 4, hex);
    pl_profile *prof = &ps->resources[0].scopes[0].profiles[0];
    for (uint32_t i = 0; i < prof->n_samples; i++) {
        char want[512], got[1024];
        snprintf(want, sizeof(want), "thread=main,env=prod,thread.hash=%s,", hex);
        px_render_sample(got, sizeof(got), ps, "svc", &prof->samples[i]);
        CHECK(strstr(got, want) != NULL);
    }
    /* Samples with the same label set share one rewritten list. */
    CHECK(prof->samples[0].attribute_indices == prof->samples[2].attribute_indices);
    px_capture_clear(&cap);
    px_close(&p);
}

/* ---- resource ------------------------------------------------------------ */

static void test_resource_traces_and_profiles(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_resource,
                    "attributes:\n"
                    "  - {key: deployment.environment, action: upsert, value: prod}\n"
                    "  - {key: service.name, action: update, value: renamed}\n"
                    "  - {key: host.name, action: insert, value: h1}\n",
                    NULL) == PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    pl_batch *t = px_traces(2, 1);
    t->data.traces.resources[1].has_resource = false;
    t->data.traces.resources[1].resource.attrs.n = 0;
    CHECK_EQ_INT(px_consume(&p, t, &cap.consumer), PL_OK);
    pl_batch *pb = px_profiles("svc", "", 2);
    /* A resource key given by string index (profiles may do that). */
    pl_kv *kv = &pb->data.profiles.resources[0].resource.attrs.items[0];
    kv->key = (pl_bytes){NULL, 0};
    kv->key_strindex = px_s(pb, "service.name");
    CHECK_EQ_INT(px_consume(&p, pb, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 2);
    pl_resource_spans *r0 = &cap.batches[0]->data.traces.resources[0];
    pl_resource_spans *r1 = &cap.batches[0]->data.traces.resources[1];
    CHECK(attr_is_str(&r0->resource.attrs, "service.name", "renamed"));
    CHECK(attr_is_str(&r0->resource.attrs, "deployment.environment", "prod"));
    CHECK(attr_is_str(&r1->resource.attrs, "host.name", "h1"));
    CHECK(r1->has_resource);
    CHECK(attr(&r1->resource.attrs, "service.name") == NULL);
    /* span attributes untouched */
    CHECK_EQ_UINT(px_span(cap.batches[0], 0, 0)->attrs.n, 1);
    pl_attrs *pa = &cap.batches[1]->data.profiles.resources[0].resource.attrs;
    CHECK(attr_is_str(pa, "service.name", "renamed"));
    CHECK(attr_is_str(pa, "host.name", "h1"));
    CHECK_EQ_UINT(pa->n, 3);
    px_capture_clear(&cap);
    px_close(&p);
}

/* ---- invalid configuration ----------------------------------------------- */

static bool has_error(const px_proc *p, const char *pos, const char *text)
{
    const char *line = p->errors;
    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof(buf), "%.*s", (int)n, line);
        if (strstr(buf, pos) && strstr(buf, text))
            return true;
        line = end ? end + 1 : NULL;
    }
    return false;
}

static void test_attributes_invalid_config(void)
{
    px_proc p;
    int n = px_decode(&p, &pl_processor_attributes,
                      "actions:\n"
                      "  - {key: a, action: frobnicate}\n"                          /* line 2 */
                      "  - {key: b, action: insert}\n"                              /* line 3 */
                      "  - key: c\n"                                                /* line 4 */
                      "    action: extract\n"                                       /* line 5 */
                      "    pattern: 'x(?P<ok>a'\n"                                  /* line 6 */
                      "  - {key: d, action: extract, pattern: '(a)'}\n"             /* line 7 */
                      "  - {key: e, action: convert}\n"                             /* line 8 */
                      "  - {key: f, action: upsert, value: x1, value_type: int}\n"  /* 9 */
                      "  - {action: delete}\n"                                      /* line 10 */
                      "  - {key: g, action: delete, pattern: 'a{2,1}'}\n"           /* line 11 */
                      "  - {key: h, action: insert, value: v, from_attribute: w}\n" /* 12 */
                      "  - {key: i, action: hash, pattern: '[a-'}\n"                /* line 13 */
    );
    fprintf(stderr, "%s", p.errors);
    CHECK(n >= 10);
    CHECK(has_error(&p, "test.yaml:2:", "unknown action \"frobnicate\""));
    CHECK(has_error(
        &p, "test.yaml:3:", "exactly one of \"value\", \"from_attribute\" or \"from_context\""));
    CHECK(has_error(
        &p, "test.yaml:6:5",
        "invalid regular expression \"x(?P<ok>a\": missing closing parenthesis at offset 9"));
    CHECK(has_error(&p, "test.yaml:7:", "no named group"));
    CHECK(has_error(&p, "test.yaml:8:", "converted_type"));
    CHECK(has_error(&p, "test.yaml:9:", "not a valid int"));
    CHECK(has_error(&p, "test.yaml:10:", "needs a \"key\" or a \"pattern\""));
    CHECK(has_error(&p, "test.yaml:11:", "invalid regular expression \"a{2,1}\""));
    CHECK(has_error(&p, "test.yaml:12:", "exactly one of"));
    CHECK(has_error(&p, "test.yaml:13:", "missing terminating ] for character class at offset 3"));
    px_close(&p);

    n = px_decode(&p, &pl_processor_attributes, "actions: []\n");
    CHECK(n == 1 && has_error(&p, "test.yaml:1:", "at least one action"));
    px_close(&p);
    n = px_decode(&p, &pl_processor_resource, "attributes:\n  - {key: a, action: upsert}\n");
    CHECK(n == 1 && has_error(&p, "test.yaml:2:", "exactly one of"));
    px_close(&p);
    /* create refuses a config that skipped validation */
    n = px_decode(&p, &pl_processor_attributes,
                  "actions:\n  - {key: a, action: delete, pattern: 'x('}\n");
    CHECK_EQ_INT(n, 1);
    void *self = NULL;
    pl_err err;
    CHECK_EQ_INT(pl_processor_attributes.create(NULL, p.cfg, &self, &err), PL_ERR_INVALID);
    CHECK(strstr(err.msg, "invalid pattern") != NULL);
    px_close(&p);
}

static void test_attributes_include_exclude(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_attributes,
                    "include:\n"
                    "  match_type: strict\n"
                    "  services: [svc1]\n"
                    "exclude:\n"
                    "  match_type: regexp\n"
                    "  span_names: ['\\.1$']\n"
                    "actions:\n  - {key: touched, action: insert, value: 'yes'}\n",
                    NULL) == PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    pl_batch *b = px_traces(2, 3); /* svc0 and svc1, spans spanR.0..2 */
    CHECK_EQ_INT(px_consume(&p, b, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 1);
    for (uint32_t r = 0; r < 2; r++)
        for (uint32_t i = 0; i < 3; i++) {
            bool want = r == 1 && i != 1;
            CHECK((attr(&px_span(b, r, i)->attrs, "touched") != NULL) == want);
        }
    px_capture_clear(&cap);
    /* profiles: matched on the resource's service only */
    pl_batch *pa = px_profiles("svc1", "", 2), *pb = px_profiles("other", "", 2);
    CHECK_EQ_INT(px_consume(&p, pa, &cap.consumer), PL_OK);
    CHECK_EQ_INT(px_consume(&p, pb, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 2);
    char line[1024];
    px_render_sample(line, sizeof(line), &pa->data.profiles, "svc1",
                     &pa->data.profiles.resources[0].scopes[0].profiles[0].samples[0]);
    CHECK(strstr(line, "touched=yes") != NULL);
    px_render_sample(line, sizeof(line), &pb->data.profiles, "other",
                     &pb->data.profiles.resources[0].scopes[0].profiles[0].samples[0]);
    CHECK(strstr(line, "touched") == NULL);
    px_capture_clear(&cap);
    px_close(&p);

    CHECK_EQ_INT(px_decode(&p, &pl_processor_attributes,
                           "include:\n  services: [a]\n"
                           "exclude:\n  match_type: regexp\n  span_names: ['(']\n"
                           "actions:\n  - {key: k, action: delete}\n"),
                 2);
    CHECK(has_error(&p, "test.yaml:2:", "match_type must be"));
    CHECK(has_error(&p, "test.yaml:5:3", "entry 0: invalid regular expression \"(\""));
    px_close(&p);
}

static void test_pattern_named_groups(void)
{
    pl_pattern pt;
    char err[256];
    /* Go/RE2-style syntax users copy from Collector configs. */
    REQUIRE(pl_pattern_compile(&pt, "(?:x)(?P<a>\\d+)-(?<b>[(]+)\\((?P<c>z)?", err, sizeof(err)) ==
            0);
    CHECK_EQ_UINT(pt.n_groups, 3);
    CHECK_EQ_UINT(pt.n_named, 3);
    CHECK_EQ_STR(pt.group_names[1], "a");
    CHECK_EQ_STR(pt.group_names[2], "b");
    CHECK_EQ_STR(pt.group_names[3], "c");
    pl_match m[4];
    CHECK(pl_pattern_exec(&pt, PL_BYTES_LIT("x12-(((("), m, 4));
    CHECK_EQ_INT(m[1].so, 1);
    CHECK_EQ_INT(m[1].eo, 3);
    CHECK_EQ_INT(m[3].so, -1);
    pl_pattern_free(&pt);
    REQUIRE(pl_pattern_compile(&pt, "(?i)bearer\\s+\\w+", err, sizeof(err)) == 0);
    CHECK(pl_pattern_exec(&pt, PL_BYTES_LIT("x BEARER abc_1"), NULL, 0));
    pl_pattern_free(&pt);
    /* errors name their offset */
    CHECK(pl_pattern_compile(&pt, "(?P<a>x)(?P<a>y)", err, sizeof(err)) == -1);
    CHECK(strstr(err, "same name") != NULL && strstr(err, "at offset 14") != NULL);
    CHECK(pl_pattern_compile(&pt, "abc(", err, sizeof(err)) == -1);
    CHECK(strstr(err, "at offset 4") != NULL);
    CHECK(pl_pattern_compile(&pt, "ab[c", err, sizeof(err)) == -1);
    CHECK(strstr(err, "missing terminating ]") != NULL && strstr(err, "at offset 4") != NULL);
    CHECK(pl_pattern_compile(&pt, "abc\\", err, sizeof(err)) == -1);
    CHECK(strstr(err, "at offset 4") != NULL);
    CHECK(pl_pattern_compile(&pt, "a{2,1}", err, sizeof(err)) == -1);
    CHECK(strstr(err, "at offset") != NULL);
    /* Matching works on views that are not NUL-terminated. */
    REQUIRE(pl_pattern_compile(&pt, "^abc$", err, sizeof(err)) == 0);
    pl_bytes view = {(const uint8_t *)"abcdef", 3};
    CHECK(pl_pattern_exec(&pt, view, NULL, 0));
    pl_pattern_free(&pt);
    /* replace_all: several matches, empty matches, none */
    pl_arena arena;
    pl_arena_init(&arena);
    REQUIRE(pl_pattern_compile(&pt, "[0-9]+", err, sizeof(err)) == 0);
    pl_bytes out;
    CHECK_EQ_INT(
        pl_pattern_replace_all(&pt, &arena, PL_BYTES_LIT("a1b22c333"), PL_BYTES_LIT("#"), &out), 3);
    CHECK_BYTES_STR(out, "a#b#c#");
    CHECK_EQ_INT(pl_pattern_replace_all(&pt, &arena, PL_BYTES_LIT("none"), PL_BYTES_LIT("#"), &out),
                 0);
    CHECK_BYTES_STR(out, "none");
    pl_pattern_free(&pt);
    REQUIRE(pl_pattern_compile(&pt, "^x", err, sizeof(err)) == 0);
    CHECK_EQ_INT(pl_pattern_replace_all(&pt, &arena, PL_BYTES_LIT("xxx"), PL_BYTES_LIT("_"), &out),
                 1); /* ^ anchors at the start only */
    CHECK_BYTES_STR(out, "_xx");
    pl_pattern_free(&pt);
    pl_arena_free(&arena);
}

/* The lists the processors keep: string copies and compiled regex lists. */
static void test_strlist_and_pattern_list(void)
{
    char *items[] = {"alpha", "beta", "(unclosed"};
    pl_strlist src = {items, 2}, copy;
    REQUIRE(pl_strlist_copy(&copy, &src) == 0);
    CHECK_EQ_UINT(copy.n, 2);
    CHECK(copy.items[0] != items[0]);
    CHECK(pl_strlist_contains(&copy, PL_BYTES_LIT("beta")));
    CHECK(!pl_strlist_contains(&copy, PL_BYTES_LIT("bet")));
    pl_strlist_free(&copy);
    CHECK(copy.n == 0 && copy.items == NULL);
    pl_strlist empty = {NULL, 0};
    REQUIRE(pl_strlist_copy(&copy, &empty) == 0);
    CHECK(copy.items == NULL && !pl_strlist_contains(&copy, PL_BYTES_LIT("")));

    pl_pattern_list pl;
    pl_err err = {0};
    REQUIRE(pl_pattern_list_build(&pl, &src, "files", &err) == 0);
    CHECK_EQ_UINT(pl.n, 2);
    CHECK(pl_pattern_list_any(&pl, PL_BYTES_LIT("x-beta-y")));
    CHECK(!pl_pattern_list_any(&pl, PL_BYTES_LIT("gamma")));
    pl_pattern_list_free(&pl);
    CHECK(pl.n == 0 && pl.items == NULL);
    pl_strlist bad = {items, 3};
    CHECK(pl_pattern_list_build(&pl, &bad, "files", &err) == -1);
    CHECK(strstr(err.msg, "files entry 2: invalid regular expression \"(unclosed\": ") == err.msg);
    CHECK(pl.n == 0 && pl.items == NULL);
    memset(&err, 0, sizeof(err));
    CHECK(pl_pattern_list_build(&pl, &bad, NULL, &err) == -1);
    CHECK(strstr(err.msg, "invalid regular expression \"(unclosed\": ") == err.msg);
}

/* ---- memory_limiter ------------------------------------------------------ */

static uint64_t rss_mib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return (uint64_t)res * 4096 >> 20;
}

static void test_memory_limiter_under_limit_passes(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_memory_limiter, "limit_mib: 1000000\n", NULL) == PL_OK);
    CHECK_EQ_INT(pl_memory_state_get(), PL_MEMORY_OK);
    px_capture cap;
    px_capture_init(&cap);
    CHECK_EQ_INT(px_consume(&p, px_traces(1, 3), &cap.consumer), PL_OK);
    CHECK_EQ_INT(px_consume(&p, px_profiles("s", "", 4), &cap.consumer), PL_OK);
    CHECK_EQ_UINT(cap.n, 2);
    CHECK_EQ_UINT(px_counter(&p, "soft_limit_refusals") + px_counter(&p, "hard_limit_refusals"), 0);
    CHECK(*pl_stats_gauge(p.stats, "memory_rss_bytes", "") > 0);
    px_capture_clear(&cap);
    px_close(&p);
}

static void test_memory_limiter_hard_limit_refuses_and_sets_state(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_memory_limiter, "limit_mib: 1\nspike_limit_mib: 0\n", NULL) ==
            PL_OK);
    CHECK_EQ_INT(pl_memory_state_get(), PL_MEMORY_HARD);
    px_capture cap;
    px_capture_init(&cap);
    CHECK_EQ_INT(px_consume(&p, px_traces(1, 3), &cap.consumer), PL_ERR_REFUSED);
    CHECK_EQ_INT(px_consume(&p, px_profiles("s", "", 5), &cap.consumer), PL_ERR_REFUSED);
    CHECK_EQ_UINT(cap.n, 0);
    CHECK_EQ_UINT(px_counter(&p, "hard_limit_refusals"), 8);
    CHECK_EQ_UINT(px_counter(&p, "soft_limit_refusals"), 0);
    CHECK(pl_status_retryable(PL_ERR_REFUSED));
    px_close(&p);
    CHECK_EQ_INT(pl_memory_state_get(), PL_MEMORY_OK); /* reset when the limiter goes */
}

static void test_memory_limiter_soft_limit_refuses(void)
{
    uint64_t rss = rss_mib();
    char yaml[128];
    /* hard limit well above RSS, soft limit (limit - spike) below it */
    snprintf(yaml, sizeof(yaml), "limit_mib: %llu\nspike_limit_mib: %llu\n",
             (unsigned long long)(rss + 200), (unsigned long long)(rss + 199));
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_memory_limiter, yaml, NULL) == PL_OK);
    CHECK_EQ_INT(pl_memory_state_get(), PL_MEMORY_SOFT);
    px_capture cap;
    px_capture_init(&cap);
    CHECK_EQ_INT(px_consume(&p, px_traces(2, 2), &cap.consumer), PL_ERR_REFUSED);
    CHECK_EQ_UINT(px_counter(&p, "soft_limit_refusals"), 4);
    CHECK_EQ_UINT(cap.n, 0);
    px_close(&p);
}

static void stop_loop(uv_timer_t *t)
{
    uv_stop(t->loop);
}

static void test_memory_limiter_checks_periodically(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_memory_limiter, "check_interval: 10ms\nlimit_mib: 1000000\n",
                    &loop) == PL_OK);
    uv_timer_t stop;
    uv_timer_init(&loop, &stop);
    uv_timer_start(&stop, stop_loop, 80, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(px_counter(&p, "memory_checks") >= 4);
    uv_close((uv_handle_t *)&stop, NULL);
    px_close(&p);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

static void test_memory_limiter_invalid_config(void)
{
    px_proc p;
    CHECK(px_decode(&p, &pl_processor_memory_limiter, "check_interval: 1s\n") == 1);
    CHECK(has_error(&p, "test.yaml:1:1", "one of limit_mib or limit_percentage"));
    px_close(&p);
    CHECK(px_decode(&p, &pl_processor_memory_limiter,
                    "limit_mib: 100\nspike_limit_mib: 100\ncheck_interval: 0s\n") == 2);
    CHECK(has_error(&p, "test.yaml:2:1", "spike_limit_mib (100) must be below limit_mib"));
    CHECK(has_error(&p, "test.yaml:3:1", "check_interval must be greater than zero"));
    px_close(&p);
    CHECK(px_decode(&p, &pl_processor_memory_limiter, "limit_percentage: 120\n") == 1);
    CHECK(has_error(&p, "test.yaml:1:1", "between 1 and 100"));
    px_close(&p);
    CHECK(px_decode(&p, &pl_processor_memory_limiter, "limit_mib: lots\n") >= 1);
    px_close(&p);
    /* percentage form works */
    CHECK_EQ_INT(px_open(&p, &pl_processor_memory_limiter,
                         "limit_percentage: 100\nspike_limit_percentage: 1\n", NULL),
                 PL_OK);
    px_close(&p);
}

/* ---- redaction ----------------------------------------------------------- */

static const char *redaction_yaml =
    "allow_all_keys: true\n"
    "blocked_values:\n"
    "  - '\\b\\d{4}[ -]?\\d{4}[ -]?\\d{4}[ -]?\\d{4}\\b'\n" /* RE2/Go syntax */
    "  - 'Bearer [A-Za-z0-9._-]+'\n"
    "blocked_key_patterns: ['.*secret.*']\n"
    "ignored_keys: [safe.card]\n"
    "functions: ['^secret_', 'billing::']\n"
    "files: ['^/home/[^/]+/']\n";

static void test_redaction_span_values(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_redaction, redaction_yaml, NULL) == PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    pl_batch *b = px_traces(1, 1);
    pl_span *sp = px_span(b, 0, 0);
    px_put_str(b, &sp->attrs, "card", "paid with 4111 1111 1111 1111 and 5500-0000-0000-0004.");
    px_put_str(b, &sp->attrs, "auth", "Bearer abc.def-123");
    px_put_str(b, &sp->attrs, "safe.card", "4111111111111111");
    px_put_str(b, &sp->attrs, "my.secret.key", "hunter2");
    px_put(b, &sp->attrs, "count", pl_value_int(4111111111111111ll));
    pl_value arr;
    memset(&arr, 0, sizeof(arr));
    arr.type = PL_VALUE_ARRAY;
    arr.u.array.n = 2;
    arr.u.array.items = pl_batch_alloc(b, 2 * sizeof(pl_value));
    arr.u.array.items[0] = pl_value_string(px_str(b, "ok"));
    arr.u.array.items[1] = pl_value_string(px_str(b, "Bearer zzz"));
    pl_value *orig_items = arr.u.array.items;
    px_put(b, &sp->attrs, "list", arr);
    sp->n_events = 1;
    sp->events = pl_batch_alloc(b, sizeof(pl_span_event));
    px_put_str(b, &sp->events[0].attrs, "msg", "card 1234123412341234");
    px_put_str(b, &b->data.traces.resources[0].resource.attrs, "token", "Bearer t0k3n");
    CHECK_EQ_INT(px_consume(&p, b, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 1);
    pl_attrs *a = &px_span(cap.batches[0], 0, 0)->attrs;
    CHECK(attr_is_str(a, "card", "paid with **** and ****."));
    CHECK(attr_is_str(a, "auth", "****"));
    CHECK(attr_is_str(a, "safe.card", "4111111111111111"));
    CHECK(attr_is_str(a, "my.secret.key", "****"));
    CHECK(attr(a, "count")->value.type == PL_VALUE_INT); /* only strings are masked */
    pl_kv *list = attr(a, "list");
    REQUIRE(list && list->value.type == PL_VALUE_ARRAY);
    CHECK(pl_bytes_eq_cstr(list->value.u.array.items[1].u.str, "****"));
    CHECK(pl_bytes_eq_cstr(orig_items[1].u.str, "Bearer zzz")); /* copied, not edited */
    CHECK(attr_is_str(&px_span(cap.batches[0], 0, 0)->events[0].attrs, "msg", "card ****"));
    CHECK(attr_is_str(&cap.batches[0]->data.traces.resources[0].resource.attrs, "token", "****"));
    CHECK(attr_is_str(a, "http.route", "/api/items"));
    CHECK_EQ_UINT(px_counter(&p, "masked_values"), 6); /* safe.card is ignored */
    px_capture_clear(&cap);
    px_close(&p);
}

/* Opens the redaction processor with `yaml` and runs one span of
 * px_traces(1, 1) carrying the string attributes `kv` (key, value, ...,
 * NULL) through it: the span's attributes as they came out, or NULL when
 * the processor did not open, failed or did not pass one batch on. The
 * caller clears `cap` and closes `p`. */
static pl_attrs *redact_one_span(px_proc *p, px_capture *cap, const char *yaml,
                                 const char *const *kv)
{
    px_capture_init(cap);
    if (px_open(p, &pl_processor_redaction, yaml, NULL) != PL_OK)
        return NULL;
    pl_batch *b = px_traces(1, 1);
    pl_span *sp = px_span(b, 0, 0);
    for (; kv[0]; kv += 2)
        px_put_str(b, &sp->attrs, kv[0], kv[1]);
    if (px_consume(p, b, &cap->consumer) != PL_OK || cap->n != 1)
        return NULL;
    return &px_span(cap->batches[0], 0, 0)->attrs;
}

static void test_redaction_allow_list(void)
{
    px_proc p;
    px_capture cap;
    const char *const kv[] = {"user.id", "42", "note", "xxx kept", "http.route", "/xx", NULL};
    pl_attrs *a =
        redact_one_span(&p, &cap,
                        "allow_all_keys: false\nallowed_keys: [http.route, service.name]\n"
                        "ignored_keys: [note]\nblocked_values: ['x+']\n",
                        kv);
    REQUIRE(a != NULL);
    CHECK(attr(a, "user.id") == NULL);
    CHECK(attr_is_str(a, "note", "xxx kept"));
    CHECK(attr_is_str(a, "http.route", "/****"));
    CHECK_EQ_UINT(a->n, 2);
    CHECK_EQ_UINT(px_counter(&p, "removed_keys"), 1);
    px_capture_clear(&cap);
    px_close(&p);
}

/* ignored_key_patterns: keys matching one are kept as they are, like
 * ignored_keys (neither removed by the allow list nor masked). */
static void test_redaction_ignored_key_patterns(void)
{
    px_proc p;
    px_capture cap;
    const char *const kv[] = {"debug.note", "xxx kept", "nodebug.note", "dropped", "http.route",
                              "/xx",        NULL};
    pl_attrs *a =
        redact_one_span(&p, &cap,
                        "allowed_keys: [http.route]\nignored_key_patterns: ['^debug\\.']\n"
                        "blocked_values: ['x+']\n",
                        kv);
    REQUIRE(a != NULL);
    CHECK(attr_is_str(a, "debug.note", "xxx kept"));
    CHECK(attr(a, "nodebug.note") == NULL);
    CHECK(attr_is_str(a, "http.route", "/****"));
    px_capture_clear(&cap);
    px_close(&p);
}

static void test_redaction_profiles(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_redaction, redaction_yaml, NULL) == PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    pl_batch *b = px_profiles("svc", "secret_", 3);
    pl_dictionary *d = &b->data.profiles.dict;
    /* One more function not to redact, a home-dir mapping, a label value
     * by string index, and a string used both as a function name and as a
     * label value (must survive as the label). */
    int32_t keep = px_func(b, "public_fn", "/home/alice/src/x.go");
    (void)keep;
    int32_t m2 = px_mapping(b, "/home/alice/bin/tool");
    (void)m2;
    int32_t tok = pl_dict_intern_attribute(&b->arena, d, px_s(b, "auth"), (pl_value){0}, 0);
    d->attributes[tok].value.type = PL_VALUE_STRINDEX;
    d->attributes[tok].value.u.strindex = px_s(b, "Bearer abc");
    int32_t shared =
        pl_dict_intern_attribute(&b->arena, d, px_s(b, "fn"), pl_value_string(px_str(b, "x")), 0);
    d->attributes[shared].value.type = PL_VALUE_STRINDEX;
    d->attributes[shared].value.u.strindex = px_s(b, "secret_main");
    pl_sample *s0 = &b->data.profiles.resources[0].scopes[0].profiles[0].samples[0];
    int32_t *ai = pl_batch_alloc(b, 3 * sizeof(int32_t));
    ai[0] = s0->attribute_indices[0];
    ai[1] = tok;
    ai[2] = shared;
    s0->attribute_indices = ai;
    s0->n_attribute_indices = 3;
    pl_profile *prof = &b->data.profiles.resources[0].scopes[0].profiles[0];
    prof->original_payload_format = PL_BYTES_LIT("pprof");
    prof->original_payload = PL_BYTES_LIT("raw secret_main bytes");
    int32_t secret_work = px_s(b, "secret_work");
    const uint8_t *orig_ptr = d->strings[secret_work].ptr;

    CHECK_EQ_INT(px_consume(&p, b, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 1);
    CHECK(profiles_encode_ok(cap.batches[0]));
    pl_profiles *ps = &cap.batches[0]->data.profiles;
    d = &ps->dict;
    prof = &ps->resources[0].scopes[0].profiles[0];
    char got[1024];
    px_render_sample(got, sizeof(got), ps, "svc", &prof->samples[0]);
    CHECK(strstr(got, "[REDACTED]@leaf.go:30[/usr/bin/app];[REDACTED]@work.go:20[/usr/bin/app];"
                      "[REDACTED]@main.go:10[/usr/bin/app];") != NULL);
    CHECK(strstr(got, "auth=****,") != NULL);
    CHECK(strstr(got, "fn=secret_main,") != NULL); /* a label value, not a function name */
    CHECK(strstr(got, "thread=t0,") != NULL);
    /* public function kept, its home-dir file name and the mapping redacted */
    bool saw_public = false;
    for (uint32_t i = 1; i < d->n_functions; i++) {
        pl_bytes n = pl_dict_string(d, d->functions[i].name_strindex);
        if (pl_bytes_eq_cstr(n, "public_fn")) {
            saw_public = true;
            CHECK_BYTES_STR(pl_dict_string(d, d->functions[i].filename_strindex), "[REDACTED]");
        }
    }
    CHECK(saw_public);
    CHECK_BYTES_STR(pl_dict_string(d, d->mappings[d->n_mappings - 1].filename_strindex),
                    "[REDACTED]");
    /* No string-table entry still holds a redacted name, except the one a
     * label uses. */
    for (uint32_t i = 0; i < d->n_strings; i++) {
        CHECK(!pl_bytes_eq_cstr(d->strings[i], "secret_work"));
        CHECK(!pl_bytes_eq_cstr(d->strings[i], "secret_leaf0"));
        CHECK(!pl_bytes_eq_cstr(d->strings[i], "/home/alice/bin/tool"));
    }
    CHECK(pl_bytes_eq_cstr((pl_bytes){orig_ptr, 11}, "secret_work")); /* source bytes untouched */
    CHECK_EQ_UINT(prof->original_payload.len, 0);
    CHECK_EQ_UINT(prof->original_payload_format.len, 0);
    CHECK_EQ_UINT(px_counter(&p, "redacted_functions"), 5);
    CHECK_EQ_UINT(px_counter(&p, "redacted_files"), 2);
    CHECK_EQ_UINT(px_counter(&p, "dropped_original_payloads"), 1);
    px_capture_clear(&cap);

    /* Nothing sensitive: batch unchanged, payload kept. */
    b = px_profiles("svc", "ok_", 2);
    prof = &b->data.profiles.resources[0].scopes[0].profiles[0];
    prof->original_payload = PL_BYTES_LIT("raw");
    uint32_t n_strings = b->data.profiles.dict.n_strings;
    CHECK_EQ_INT(px_consume(&p, b, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 1);
    CHECK_EQ_UINT(prof->original_payload.len, 3);
    CHECK_EQ_UINT(cap.batches[0]->data.profiles.dict.n_strings, n_strings + 1);
    px_capture_clear(&cap);
    px_close(&p);
}

/* The Collector's semantics for its keys: allow_all_keys defaults to false,
 * allowed_values exempts values, summary records what was done. */
static void test_redaction_collector_semantics(void)
{
    px_proc p;
    /* a copied Collector config: only allowed_keys and blocked_values */
    px_capture cap;
    const char *const kv[] = {"card",    "1234567812345678",
                              "mail",    "ops@example.com",
                              "note",    "1234567812345678",
                              "user.id", "42",
                              "session", "abc",
                              NULL};
    pl_attrs *a = redact_one_span(&p, &cap,
                                  "allowed_keys: [card, mail, note]\n"
                                  "ignored_keys: [note]\n"
                                  "blocked_values: ['[0-9]{16}', '.+@.+']\n"
                                  "allowed_values: ['.+@example\\.com']\n"
                                  "summary: debug\n",
                                  kv);
    REQUIRE(a != NULL);
    CHECK(attr(a, "user.id") == NULL); /* not allowed: removed by default */
    CHECK(attr(a, "session") == NULL);
    CHECK(attr_is_str(a, "card", "****"));
    CHECK(attr_is_str(a, "mail", "ops@example.com"));  /* an allowed value */
    CHECK(attr_is_str(a, "note", "1234567812345678")); /* ignored */
    /* px_traces gives every span an http.route, not allowed here either */
    CHECK(attr_is_str(a, "redaction.redacted.keys", "http.route,user.id,session"));
    CHECK(attr_is_str(a, "redaction.masked.keys", "card"));
    pl_kv *cnt = attr(a, "redaction.redacted.count");
    CHECK(cnt && cnt->value.type == PL_VALUE_INT && cnt->value.u.i == 3);
    cnt = attr(a, "redaction.masked.count");
    CHECK(cnt && cnt->value.type == PL_VALUE_INT && cnt->value.u.i == 1);
    cnt = attr(a, "redaction.ignored.count");
    CHECK(cnt && cnt->value.type == PL_VALUE_INT && cnt->value.u.i == 1);
    px_capture_clear(&cap);
    px_close(&p);

    /* summary info: counts, no key names; default silent: nothing */
    const char *const kv2[] = {"a", "1", "b", "2", NULL};
    a = redact_one_span(&p, &cap, "allowed_keys: [a]\nsummary: info\n", kv2);
    REQUIRE(a != NULL);
    CHECK(attr(a, "redaction.redacted.keys") == NULL);
    cnt = attr(a, "redaction.redacted.count");
    CHECK(cnt && cnt->value.u.i == 2); /* b and http.route */
    px_capture_clear(&cap);
    px_close(&p);

    const char *const kv3[] = {"b", "2", NULL};
    a = redact_one_span(&p, &cap, "", kv3);
    REQUIRE(a != NULL);
    CHECK_EQ_UINT(a->n, 0); /* removed, no summary */
    px_capture_clear(&cap);
    px_close(&p);
}

static void test_redaction_invalid_config(void)
{
    px_proc p;
    int n = px_decode(&p, &pl_processor_redaction,
                      "blocked_values: ['ok', '(unclosed']\n"
                      "functions:\n"
                      "  - 'a(?<bad'\n"
                      "summary: loud\n");
    CHECK_EQ_INT(n, 3);
    CHECK(has_error(&p, "test.yaml:1:1", "entry 1: invalid regular expression \"(unclosed\""));
    CHECK(has_error(&p, "test.yaml:2:1", "entry 0: invalid regular expression \"a(?<bad\": "));
    CHECK(has_error(&p, "test.yaml:2:1", "at offset 7"));
    CHECK(has_error(&p, "test.yaml:4:1", "must be debug, info or silent"));
    px_close(&p);
}

/* ---- batch --------------------------------------------------------------- */

static void test_batch_merges_at_size(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_batch, "send_batch_size: 10\ntimeout: 10s\n", NULL) == PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    pl_batch *in[3];
    for (int i = 0; i < 3; i++) {
        in[i] = px_traces(1, 4);
        px_put_str(in[i], &px_span(in[i], 0, 0)->attrs, "req",
                   i == 0   ? "r0"
                   : i == 1 ? "r1"
                            : "r2");
    }
    CHECK_EQ_INT(px_consume(&p, in[0], &cap.consumer), PL_OK);
    CHECK_EQ_INT(px_consume(&p, in[1], &cap.consumer), PL_OK);
    CHECK_EQ_UINT(cap.n, 0);
    CHECK_EQ_UINT(p.type->pending(p.self), 8);
    CHECK_EQ_INT(px_consume(&p, in[2], &cap.consumer), PL_OK);
    REQUIRE(cap.n == 1);
    CHECK_EQ_UINT(p.type->pending(p.self), 0);
    pl_batch *out = cap.batches[0];
    CHECK_EQ_UINT(pl_batch_items(out), 12);
    CHECK_EQ_UINT(out->data.traces.n_resources, 3);
    for (uint32_t r = 0; r < 3; r++) {
        pl_resource_spans *rs = &out->data.traces.resources[r];
        CHECK(attr_is_str(&rs->resource.attrs, "service.name", "svc0"));
        CHECK_BYTES_STR(rs->scopes[0].scope.name, "lib");
        CHECK_EQ_UINT(rs->scopes[0].n_spans, 4);
        char want[8];
        snprintf(want, sizeof(want), "r%u", r);
        CHECK(attr_is_str(&rs->scopes[0].spans[0].attrs, "req", want));
        CHECK_BYTES_STR(rs->scopes[0].spans[3].name, "span0.3");
        CHECK_EQ_UINT(rs->scopes[0].spans[3].span_id[0], 4);
    }
    CHECK_EQ_UINT(px_counter(&p, "batch_size_trigger_send"), 1);
    px_capture_clear(&cap);
    px_close(&p);
}

static void test_batch_splits_oversized(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_batch,
                    "send_batch_size: 5\nsend_batch_max_size: 5\ntimeout: 10s\n", NULL) == PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    pl_batch *b = px_traces(2, 6); /* 12 spans over two resources */
    CHECK_EQ_INT(px_consume(&p, b, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 3);
    CHECK_EQ_UINT(pl_batch_items(cap.batches[0]), 5);
    CHECK_EQ_UINT(pl_batch_items(cap.batches[1]), 5);
    CHECK_EQ_UINT(pl_batch_items(cap.batches[2]), 2);
    /* second output: 1 span of svc0 then 4 of svc1 */
    pl_traces *t = &cap.batches[1]->data.traces;
    REQUIRE(t->n_resources == 2);
    CHECK(attr_is_str(&t->resources[0].resource.attrs, "service.name", "svc0"));
    CHECK_BYTES_STR(t->resources[0].scopes[0].spans[0].name, "span0.5");
    CHECK(attr_is_str(&t->resources[1].resource.attrs, "service.name", "svc1"));
    CHECK_BYTES_STR(t->resources[1].scopes[0].spans[3].name, "span1.3");
    px_capture_clear(&cap);
    px_close(&p);
}

static void test_batch_timeout_sends(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_batch, "send_batch_size: 1000\ntimeout: 20ms\n", &loop) ==
            PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    uint64_t t0 = pl_time_mono_ns();
    CHECK_EQ_INT(px_consume(&p, px_traces(1, 2), &cap.consumer), PL_OK);
    CHECK_EQ_INT(px_consume(&p, px_traces(1, 3), &cap.consumer), PL_OK);
    CHECK_EQ_UINT(cap.n, 0);
    uv_run(&loop, UV_RUN_DEFAULT); /* returns once the timer fired and nothing is held */
    uint64_t waited = pl_time_mono_ns() - t0;
    REQUIRE(cap.n == 1);
    CHECK_EQ_UINT(pl_batch_items(cap.batches[0]), 5);
    CHECK(waited >= 19000000ull);
    CHECK(waited < 1000000000ull);
    CHECK_EQ_UINT(px_counter(&p, "timeout_trigger_send"), 1);
    px_capture_clear(&cap);
    px_close(&p);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

static void test_batch_timeout_zero_and_single_batch_not_copied(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_batch, "timeout: 0s\n", NULL) == PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    pl_batch *b = px_traces(1, 3);
    CHECK_EQ_INT(px_consume(&p, b, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 1);
    CHECK(cap.batches[0] == b); /* passed as is */
    px_capture_clear(&cap);
    /* empty batch: nothing sent */
    CHECK_EQ_INT(px_consume(&p, pl_batch_new(PL_SIGNAL_TRACES), &cap.consumer), PL_OK);
    CHECK_EQ_UINT(cap.n, 0);
    /* logs pass through untouched */
    pl_batch *logs = pl_batch_new(PL_SIGNAL_LOGS);
    CHECK_EQ_INT(px_consume(&p, logs, &cap.consumer), PL_OK);
    CHECK(cap.n == 1 && cap.batches[0] == logs);
    px_capture_clear(&cap);
    px_close(&p);
}

static void set_tenant(pl_batch *b, const char *tenant)
{
    b->metadata.n = 1;
    b->metadata.items = pl_batch_alloc(b, sizeof(pl_kv));
    b->metadata.items[0].key = px_str(b, "tenant");
    b->metadata.items[0].value = pl_value_string(px_str(b, tenant));
}

static void test_batch_per_tenant_and_signal(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_batch,
                    "send_batch_size: 4\ntimeout: 10s\nmetadata_keys: [tenant]\n"
                    "metadata_cardinality_limit: 2\n",
                    NULL) == PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    pl_batch *a1 = px_traces(1, 2), *b1 = px_traces(1, 2), *a2 = px_traces(1, 2);
    set_tenant(a1, "a");
    set_tenant(b1, "b");
    set_tenant(a2, "a");
    CHECK_EQ_INT(px_consume(&p, a1, &cap.consumer), PL_OK);
    CHECK_EQ_INT(px_consume(&p, b1, &cap.consumer), PL_OK);
    /* a third tenant while two are held: refused (retryable) */
    pl_batch *c1 = px_traces(1, 1);
    set_tenant(c1, "c");
    CHECK_EQ_INT(px_consume(&p, c1, &cap.consumer), PL_ERR_REFUSED);
    CHECK_EQ_UINT(px_counter(&p, "metadata_cardinality_refusals"), 1);
    /* profiles of tenant a are held apart from its traces */
    pl_batch *pa = px_profiles("s", "", 2);
    set_tenant(pa, "a");
    CHECK_EQ_INT(px_consume(&p, pa, &cap.consumer), PL_OK);
    CHECK_EQ_UINT(cap.n, 0);
    CHECK_EQ_INT(px_consume(&p, a2, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 1);
    CHECK_EQ_UINT(pl_batch_items(cap.batches[0]), 4);
    CHECK(cap.batches[0]->signal == PL_SIGNAL_TRACES);
    pl_bytes v;
    CHECK(pl_batch_metadata_get(cap.batches[0], "tenant", &v) && pl_bytes_eq_cstr(v, "a"));
    px_capture_clear(&cap);
    /* shutdown flushes the rest: tenant b traces and tenant a profiles */
    p.type->shutdown(p.self);
    CHECK_EQ_UINT(cap.n, 2);
    CHECK_EQ_UINT(cap.items, 4);
    px_capture_clear(&cap);
    px_close(&p);
}

static void test_batch_hard_memory_releases_held_data(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_batch, "send_batch_size: 100\ntimeout: 10s\n", NULL) ==
            PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    CHECK_EQ_INT(px_consume(&p, px_traces(1, 2), &cap.consumer), PL_OK);
    CHECK_EQ_UINT(cap.n, 0);
    pl_memory_state_set(PL_MEMORY_HARD);
    CHECK_EQ_INT(px_consume(&p, px_traces(1, 3), &cap.consumer), PL_OK);
    pl_memory_state_set(PL_MEMORY_OK);
    CHECK_EQ_UINT(cap.n, 2);
    CHECK_EQ_UINT(cap.items, 5);
    CHECK_EQ_UINT(p.type->pending(p.self), 0);
    px_capture_clear(&cap);
    px_close(&p);
}

static void test_batch_downstream_refusal_is_returned(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_batch, "send_batch_size: 3\ntimeout: 10s\n", NULL) == PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    cap.answer = PL_ERR_REFUSED;
    CHECK_EQ_INT(px_consume(&p, px_traces(1, 1), &cap.consumer), PL_OK);
    CHECK_EQ_INT(px_consume(&p, px_traces(1, 2), &cap.consumer), PL_ERR_REFUSED);
    CHECK_EQ_UINT(px_counter(&p, "send_failed_items"), 3);
    px_capture_clear(&cap);
    px_close(&p);
}

/* Every index of a profiles batch is in range and tables start with their
 * zero entry. */
static bool profiles_valid(const pl_profiles *ps)
{
    const pl_dictionary *d = &ps->dict;
    if (!ps->has_dictionary || d->n_strings < 1 || d->strings[0].len || d->n_functions < 1 ||
        d->n_stacks < 1 || d->n_locations < 1 || d->n_mappings < 1 || d->n_links < 1 ||
        d->n_attributes < 1)
        return false;
#define IN(i, n) ((i) >= 0 && (uint32_t)(i) < (n))
    for (uint32_t i = 0; i < d->n_functions; i++)
        if (!IN(d->functions[i].name_strindex, d->n_strings) ||
            !IN(d->functions[i].filename_strindex, d->n_strings))
            return false;
    for (uint32_t i = 0; i < d->n_locations; i++) {
        if (!IN(d->locations[i].mapping_index, d->n_mappings))
            return false;
        for (uint32_t j = 0; j < d->locations[i].n_lines; j++)
            if (!IN(d->locations[i].lines[j].function_index, d->n_functions))
                return false;
    }
    for (uint32_t i = 0; i < d->n_stacks; i++)
        for (uint32_t j = 0; j < d->stacks[i].n_location_indices; j++)
            if (!IN(d->stacks[i].location_indices[j], d->n_locations))
                return false;
    for (uint32_t i = 0; i < d->n_attributes; i++)
        if (!IN(d->attributes[i].key_strindex, d->n_strings))
            return false;
    for (uint32_t r = 0; r < ps->n_resources; r++)
        for (uint32_t s = 0; s < ps->resources[r].n_scopes; s++)
            for (uint32_t p = 0; p < ps->resources[r].scopes[s].n_profiles; p++) {
                const pl_profile *pr = &ps->resources[r].scopes[s].profiles[p];
                if (!IN(pr->sample_type.type_strindex, d->n_strings))
                    return false;
                for (uint32_t k = 0; k < pr->n_samples; k++) {
                    const pl_sample *sm = &pr->samples[k];
                    if (!IN(sm->stack_index, d->n_stacks) || !IN(sm->link_index, d->n_links))
                        return false;
                    for (uint32_t j = 0; j < sm->n_attribute_indices; j++)
                        if (!IN(sm->attribute_indices[j], d->n_attributes))
                            return false;
                }
            }
#undef IN
    return true;
}

/* Appends the rendering of every sample of a batch to out (one per line). */
static size_t render_all(const pl_batch *b, char *out, size_t n)
{
    size_t o = 0;
    const pl_profiles *ps = &b->data.profiles;
    for (uint32_t r = 0; r < ps->n_resources; r++) {
        pl_kv *svc = pl_attrs_find(&ps->resources[r].resource.attrs, "service.name", 12);
        char name[64];
        snprintf(name, sizeof(name), "%.*s", svc ? (int)svc->value.u.str.len : 0,
                 svc ? (const char *)svc->value.u.str.ptr : "");
        for (uint32_t s = 0; s < ps->resources[r].n_scopes; s++)
            for (uint32_t p = 0; p < ps->resources[r].scopes[s].n_profiles; p++) {
                const pl_profile *pr = &ps->resources[r].scopes[s].profiles[p];
                for (uint32_t k = 0; k < pr->n_samples; k++) {
                    char line[1024];
                    px_render_sample(line, sizeof(line), ps, name, &pr->samples[k]);
                    o += (size_t)snprintf(out + o, n - o, "%s\n", line);
                }
            }
    }
    return o;
}

static void test_batch_merges_profiles_into_one_dictionary(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_batch, "send_batch_size: 12\ntimeout: 10s\n", NULL) == PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    /* Two requests of the same service share every name; a third differs. */
    pl_batch *in[3] = {px_profiles("svcA", "", 4), px_profiles("svcA", "", 4),
                       px_profiles("svcB", "b_", 4)};
    static char want[16384], got[16384];
    size_t o = 0;
    uint32_t in_functions = 0;
    for (int i = 0; i < 3; i++) {
        o += render_all(in[i], want + o, sizeof(want) - o);
        in_functions += in[i]->data.profiles.dict.n_functions - 1;
    }
    /* Orphans are left behind: an unused string and function. */
    px_func(in[0], "orphan_fn", "orphan.go");
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(px_consume(&p, in[i], &cap.consumer), PL_OK);
    REQUIRE(cap.n == 1);
    pl_batch *out = cap.batches[0];
    CHECK(profiles_valid(&out->data.profiles));
    CHECK(profiles_encode_ok(out));
    render_all(out, got, sizeof(got));
    CHECK_EQ_STR(got, want);
    const pl_dictionary *d = &out->data.profiles.dict;
    /* 5 functions per service, shared between the two svcA requests */
    CHECK_EQ_UINT(in_functions, 15);
    CHECK_EQ_UINT(d->n_functions - 1, 10);
    for (uint32_t i = 0; i < d->n_strings; i++)
        CHECK(!pl_bytes_eq_cstr(d->strings[i], "orphan_fn"));
    CHECK_EQ_UINT(d->n_links - 1, 1); /* the same link in all three */
    CHECK_EQ_UINT(out->data.profiles.n_resources, 3);
    px_capture_clear(&cap);
    px_close(&p);
}

/* An empty scope (no profiles) is kept as it came, with its schema URLs
 * copied into the output batch: the inputs are freed once merged. */
static void test_batch_keeps_empty_profile_scopes(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_batch, "send_batch_size: 100\ntimeout: 10s\n", NULL) ==
            PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    pl_batch *in[2] = {px_profiles("svcA", "", 4), px_profiles("svcB", "b_", 4)};
    pl_profiles *ps = &in[1]->data.profiles;
    ps->resources = pl_arena_grow(&in[1]->arena, ps->resources, ps->n_resources,
                                  ps->n_resources + 1, sizeof(pl_resource_profiles));
    REQUIRE(ps->resources);
    pl_resource_profiles *rp = &ps->resources[ps->n_resources++];
    rp->has_resource = true;
    rp->schema_url = pl_batch_bytes(in[1], "https://example.com/resource", 28);
    rp->scopes = pl_batch_alloc(in[1], sizeof(pl_scope_profiles));
    REQUIRE(rp->scopes);
    rp->n_scopes = 1;
    rp->scopes[0].has_scope = true;
    rp->scopes[0].scope.name = pl_batch_bytes(in[1], "empty-scope", 11);
    rp->scopes[0].schema_url = pl_batch_bytes(in[1], "https://example.com/scope", 25);
    for (int i = 0; i < 2; i++)
        CHECK_EQ_INT(px_consume(&p, in[i], &cap.consumer), PL_OK);
    px_close(&p); /* flushes, and frees what it held */
    REQUIRE(cap.n == 1);
    const pl_profiles *out = &cap.batches[0]->data.profiles;
    REQUIRE(out->n_resources == 3);
    const pl_resource_profiles *last = &out->resources[2];
    CHECK_BYTES_STR(last->schema_url, "https://example.com/resource");
    REQUIRE(last->n_scopes == 1);
    CHECK_BYTES_STR(last->scopes[0].schema_url, "https://example.com/scope");
    CHECK_BYTES_STR(last->scopes[0].scope.name, "empty-scope");
    CHECK_EQ_UINT(last->scopes[0].n_profiles, 0);
    CHECK(profiles_encode_ok(cap.batches[0]));
    px_capture_clear(&cap);
}

static void test_batch_splits_profiles(void)
{
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_batch,
                    "send_batch_size: 3\nsend_batch_max_size: 3\ntimeout: 10s\n", NULL) == PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    pl_batch *b = px_profiles("svc", "", 7);
    pl_profile *prof = &b->data.profiles.resources[0].scopes[0].profiles[0];
    prof->original_payload = PL_BYTES_LIT("whole-profile");
    static char want[8192], got[8192];
    render_all(b, want, sizeof(want));
    CHECK_EQ_INT(px_consume(&p, b, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 3);
    size_t o = 0;
    for (size_t i = 0; i < 3; i++) {
        CHECK(profiles_valid(&cap.batches[i]->data.profiles));
        CHECK(profiles_encode_ok(cap.batches[i]));
        o += render_all(cap.batches[i], got + o, sizeof(got) - o);
        pl_profile *op = &cap.batches[i]->data.profiles.resources[0].scopes[0].profiles[0];
        CHECK_EQ_UINT(op->original_payload.len, i == 0 ? 13 : 0);
        CHECK(op->sample_type.type_strindex > 0);
        CHECK_BYTES_STR(
            pl_dict_string(&cap.batches[i]->data.profiles.dict, op->sample_type.type_strindex),
            "cpu");
        CHECK_EQ_UINT(op->time_unix_nano, 1700000000000000000ull);
    }
    CHECK_EQ_UINT(pl_batch_items(cap.batches[2]), 1);
    CHECK_EQ_STR(got, want);
    px_capture_clear(&cap);
    px_close(&p);
}

static void test_batch_invalid_config(void)
{
    px_proc p;
    CHECK_EQ_INT(px_decode(&p, &pl_processor_batch,
                           "send_batch_size: 100\nsend_batch_max_size: 10\ntimeout: -1s\n"),
                 2);
    CHECK(has_error(&p, "test.yaml:2:1", "must be 0 or at least send_batch_size"));
    CHECK(has_error(&p, "test.yaml:3:", "timeout"));
    px_close(&p);
    CHECK(px_decode(&p, &pl_processor_batch, "send_batch_sizes: 1\n") >= 1); /* unknown key */
    px_close(&p);
    CHECK_EQ_INT(px_decode(&p, &pl_processor_batch, ""), 0); /* defaults */
    px_close(&p);
}

/* ---- a pipeline ---------------------------------------------------------- */

/* Chains processors: stage i's `next` calls stage i+1's consume. */
typedef struct stage {
    px_proc *proc;
    pl_consumer next; /* the rest of the chain */
    pl_consumer *after;
} stage;

static pl_status stage_fn(void *arg, pl_batch *b)
{
    stage *s = arg;
    return px_consume(s->proc, b, s->after);
}

static void test_pipeline_in_order(void)
{
    px_proc ml, res, at, red, bat;
    REQUIRE(px_open(&ml, &pl_processor_memory_limiter, "limit_mib: 1000000\n", NULL) == PL_OK);
    REQUIRE(px_open(&res, &pl_processor_resource,
                    "attributes:\n  - {key: deployment.environment, action: insert, value: prod}\n",
                    NULL) == PL_OK);
    REQUIRE(px_open(&at, &pl_processor_attributes,
                    "actions:\n"
                    "  - {key: user.email, action: hash}\n"
                    "  - {key: card.copy, action: insert, from_attribute: card}\n",
                    NULL) == PL_OK);
    REQUIRE(px_open(&red, &pl_processor_redaction,
                    "allow_all_keys: true\nblocked_values: ['[0-9]{16}']\n"
                    "functions: ['^secret_']\n",
                    NULL) == PL_OK);
    REQUIRE(px_open(&bat, &pl_processor_batch, "send_batch_size: 6\ntimeout: 10s\n", NULL) ==
            PL_OK);
    px_capture cap;
    px_capture_init(&cap);
    /* memory_limiter -> resource -> attributes -> redaction -> batch -> capture */
    stage st[4] = {{&res, {0}, NULL}, {&at, {0}, NULL}, {&red, {0}, NULL}, {&bat, {0}, NULL}};
    for (int i = 3; i >= 0; i--) {
        st[i].after = i == 3 ? &cap.consumer : &st[i + 1].next;
        pl_consumer_init_func(&st[i].next, stage_fn, &st[i]);
    }
    for (int i = 0; i < 2; i++) {
        pl_batch *b = px_traces(1, 3);
        for (uint32_t k = 0; k < 3; k++) {
            px_put_str(b, &px_span(b, 0, k)->attrs, "user.email", "bob@example.com");
            px_put_str(b, &px_span(b, 0, k)->attrs, "card", "4111111111111111");
        }
        CHECK_EQ_INT(px_consume(&ml, b, &st[0].next), PL_OK);
    }
    CHECK_EQ_INT(px_consume(&ml, px_profiles("svc", "secret_", 6), &st[0].next), PL_OK);
    REQUIRE(cap.n == 2); /* traces merged at 6 spans; profiles 6 samples */
    pl_batch *t = cap.batches[0];
    CHECK_EQ_UINT(pl_batch_items(t), 6);
    char hex[65];
    pl_sha256_hex("bob@example.com", 15, hex);
    for (uint32_t r = 0; r < t->data.traces.n_resources; r++) {
        pl_resource_spans *rs = &t->data.traces.resources[r];
        CHECK(attr_is_str(&rs->resource.attrs, "deployment.environment", "prod"));
        for (uint32_t k = 0; k < rs->scopes[0].n_spans; k++) {
            pl_attrs *a = &rs->scopes[0].spans[k].attrs;
            CHECK(attr_is_str(a, "user.email", hex));
            CHECK(attr_is_str(a, "card", "****"));
            CHECK(attr_is_str(a, "card.copy", "****")); /* redaction ran after the copy */
        }
    }
    pl_batch *pb = cap.batches[1];
    CHECK(pb->signal == PL_SIGNAL_PROFILES);
    CHECK(profiles_encode_ok(pb));
    CHECK(attr_is_str(&pb->data.profiles.resources[0].resource.attrs, "deployment.environment",
                      "prod"));
    char line[1024];
    px_render_sample(line, sizeof(line), &pb->data.profiles, "svc",
                     &pb->data.profiles.resources[0].scopes[0].profiles[0].samples[0]);
    CHECK(strstr(line, "[REDACTED]@") != NULL && strstr(line, "secret_") == NULL);
    px_capture_clear(&cap);
    px_close(&bat);
    px_close(&red);
    px_close(&at);
    px_close(&res);
    px_close(&ml);
}

static void test_processors_are_registered(void)
{
    static const char *types[] = {"batch", "memory_limiter", "attributes", "resource", "redaction"};
    for (int i = 0; i < 5; i++) {
        const pl_component_type *t =
            pl_component_type_find(PL_KIND_PROCESSOR, types[i], strlen(types[i]));
        CHECK(t != NULL);
        if (t) {
            void *cfg = calloc(1, t->config->size);
            CHECK_EQ_INT(pl_cfg_defaults(t->config, cfg), 0);
            pl_cfg_free(t->config, cfg);
            free(cfg);
        }
    }
}

/* ---- resourcedetection --------------------------------------------------- */

extern const pl_component_type pl_processor_resourcedetection;

static void test_resourcedetection(void)
{
    /* env: percent-decoded, spaces trimmed, a bare word skipped; host.name
     * from env wins over system's (the earlier detector) */
    setenv("OTEL_RESOURCE_ATTRIBUTES",
           "service.name=from-env, deployment.environment=prod%2Cblue,bad, team = a%20b,"
           "host.name=envhost",
           1);
    px_proc p;
    REQUIRE(px_open(&p, &pl_processor_resourcedetection,
                    "detectors: [env, system]\n"
                    "timeout: 5s\n"
                    "system:\n"
                    "  hostname_sources: [os]\n"
                    "  resource_attributes:\n"
                    "    host.arch: {enabled: true}\n",
                    NULL) == PL_OK);
    struct utsname u;
    REQUIRE(uname(&u) == 0);
    const char *arch = strcmp(u.machine, "x86_64") == 0    ? "amd64"
                       : strcmp(u.machine, "aarch64") == 0 ? "arm64"
                                                           : u.machine;
    px_capture cap;
    px_capture_init(&cap);
    CHECK_EQ_INT(px_consume(&p, px_traces(2, 1), &cap.consumer), PL_OK);
    CHECK_EQ_INT(px_consume(&p, px_profiles("svc", "", 1), &cap.consumer), PL_OK);
    REQUIRE(cap.n == 2);
    for (uint32_t r = 0; r < 2; r++) {
        pl_attrs *a = &cap.batches[0]->data.traces.resources[r].resource.attrs;
        CHECK(attr_is_str(a, "service.name", "from-env")); /* override: true */
        CHECK(attr_is_str(a, "deployment.environment", "prod,blue"));
        CHECK(attr_is_str(a, "team", "a b"));
        CHECK(attr_is_str(a, "host.name", "envhost"));
        CHECK(attr_is_str(a, "os.type", "linux"));
        CHECK(attr_is_str(a, "host.arch", arch));
        CHECK(attr(a, "bad") == NULL);
    }
    pl_attrs *pa = &cap.batches[1]->data.profiles.resources[0].resource.attrs;
    CHECK(attr_is_str(pa, "service.name", "from-env"));
    CHECK(attr_is_str(pa, "os.type", "linux"));
    px_capture_clear(&cap);
    /* opaque logs: the resource gets the attributes */
    uint8_t rm[8], req[16];
    size_t n_rm = pb_field(rm, 2, "", 0);
    size_t n_req = pb_field(req, 1, rm, n_rm);
    pl_batch *logs = pl_batch_new(PL_SIGNAL_LOGS);
    logs->data.raw = (pl_bytes){req, n_req};
    CHECK_EQ_INT(px_consume(&p, logs, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 1);
    pl_bytes out = cap.batches[0]->data.raw;
    CHECK(memmem(out.ptr, out.len, "os.type", 7) != NULL);
    CHECK(memmem(out.ptr, out.len, "envhost", 7) != NULL);
    px_capture_clear(&cap);
    px_close(&p);

    /* override: false keeps what the data carries; system alone: host.name
     * is gethostname, host.arch off by default */
    unsetenv("OTEL_RESOURCE_ATTRIBUTES");
    REQUIRE(px_open(&p, &pl_processor_resourcedetection,
                    "detectors: [system, env]\n"
                    "override: false\n"
                    "system: {hostname_sources: [os]}\n",
                    NULL) == PL_OK);
    char host[256] = "";
    REQUIRE(gethostname(host, sizeof(host) - 1) == 0);
    pl_batch *t = px_traces(1, 1);
    px_put_str(t, &t->data.traces.resources[0].resource.attrs, "os.type", "kept");
    CHECK_EQ_INT(px_consume(&p, t, &cap.consumer), PL_OK);
    REQUIRE(cap.n == 1);
    pl_attrs *a = &cap.batches[0]->data.traces.resources[0].resource.attrs;
    CHECK(attr_is_str(a, "service.name", "svc0"));
    CHECK(attr_is_str(a, "os.type", "kept"));
    CHECK(attr_is_str(a, "host.name", host));
    CHECK(attr(a, "host.arch") == NULL);
    px_capture_clear(&cap);
    px_close(&p);

    /* detectors and hostname sources proflink lacks are refused */
    int n = px_decode(&p, &pl_processor_resourcedetection,
                      "detectors: [env, ec2]\n"
                      "system: {hostname_sources: [cname]}\n");
    CHECK(n == 2);
    CHECK(has_error(&p, "test.yaml:1:", "detector 'ec2' is not supported"));
    CHECK(has_error(&p, "test.yaml:2:", "hostname source 'cname' is not supported"));
    px_close(&p);
}

int main(void)
{
    PL_RUN(test_sha256_vectors);
    PL_RUN(test_pattern_named_groups);
    PL_RUN(test_strlist_and_pattern_list);
    PL_RUN(test_attributes_insert);
    PL_RUN(test_attributes_update);
    PL_RUN(test_attributes_from_context);
    PL_RUN(test_resource_on_logs_and_metrics);
    PL_RUN(test_resourcedetection);
    PL_RUN(test_attributes_on_log_records);
    PL_RUN(test_attributes_on_logs_include_exclude);
    PL_RUN(test_attributes_on_metric_data_points);
    PL_RUN(test_redaction_on_logs);
    PL_RUN(test_attributes_upsert_and_types);
    PL_RUN(test_attributes_from_attribute_every_type);
    PL_RUN(test_attributes_delete);
    PL_RUN(test_attributes_hash);
    PL_RUN(test_attributes_extract);
    PL_RUN(test_attributes_convert);
    PL_RUN(test_attributes_convert_every_type_to_string);
    PL_RUN(test_attributes_actions_run_in_order);
    PL_RUN(test_attributes_inserted_strings_live_in_the_batch);
    PL_RUN(test_attributes_empty_batches_and_other_signals);
    PL_RUN(test_attributes_profiles_sample_attributes);
    PL_RUN(test_resource_traces_and_profiles);
    PL_RUN(test_attributes_invalid_config);
    PL_RUN(test_attributes_include_exclude);
    PL_RUN(test_memory_limiter_under_limit_passes);
    PL_RUN(test_memory_limiter_hard_limit_refuses_and_sets_state);
    PL_RUN(test_memory_limiter_soft_limit_refuses);
    PL_RUN(test_memory_limiter_checks_periodically);
    PL_RUN(test_memory_limiter_invalid_config);
    PL_RUN(test_redaction_span_values);
    PL_RUN(test_redaction_allow_list);
    PL_RUN(test_redaction_ignored_key_patterns);
    PL_RUN(test_redaction_profiles);
    PL_RUN(test_redaction_invalid_config);
    PL_RUN(test_redaction_collector_semantics);
    PL_RUN(test_batch_merges_at_size);
    PL_RUN(test_batch_splits_oversized);
    PL_RUN(test_batch_timeout_sends);
    PL_RUN(test_batch_timeout_zero_and_single_batch_not_copied);
    PL_RUN(test_batch_per_tenant_and_signal);
    PL_RUN(test_batch_hard_memory_releases_held_data);
    PL_RUN(test_batch_downstream_refusal_is_returned);
    PL_RUN(test_batch_merges_profiles_into_one_dictionary);
    PL_RUN(test_batch_keeps_empty_profile_scopes);
    PL_RUN(test_batch_splits_profiles);
    PL_RUN(test_batch_invalid_config);
    PL_RUN(test_pipeline_in_order);
    PL_RUN(test_processors_are_registered);
    return pl_test_done();
}
