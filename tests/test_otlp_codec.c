/*
 * test_otlp_codec.c: the streaming JSON reader and the OTLP decoders' edges:
 * malformed JSON, nesting, bad UTF-8 and escapes, numbers as strings, hex
 * ids, enums by name or number, unknown members skipped, zero-copy strings,
 * and the decoded-memory budget for protobuf and JSON (a million empty
 * spans refused before their memory is spent).
 */
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/model.h"
#include "proto/json_reader.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"
#include "testlib.h"

/* ---- reader ------------------------------------------------------------- */

static bool skip_all(const char *text, unsigned max_depth)
{
    pl_jr r;
    pl_jr_init(&r, (const uint8_t *)text, strlen(text), max_depth);
    return pl_jr_skip(&r) && pl_jr_finish(&r);
}

static void test_reader_accepts(void)
{
    static const char *const good[] = {
        "{}",
        "[]",
        "0",
        "-0",
        "1.5e-3",
        "-12E+2",
        "\"\"",
        "true",
        "false",
        "null",
        " { \"a\" : [ 1 , { \"b\" : null } ] , \"c\" : \"\\u00e9\\ud83d\\ude00\\n\" } ",
        "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
        "[[[[]]]]",
        "\"\\/\\\\\\\"\\b\\f\\r\\t\"",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        if (!skip_all(good[i], 16))
            PL_FAIL_("rejected valid JSON %s", good[i]);
}

static void test_reader_rejects(void)
{
    static const char *const bad[] = {
        "",
        "{",
        "[1,]",
        "{\"a\":1,}",
        "{\"a\" 1}",
        "{a:1}",
        "01",
        "1.",
        ".5",
        "1e",
        "-",
        "+1",
        "tru",
        "nul",
        "[1 2]",
        "\"abc",
        "\"\\x\"",
        "\"\\u12g4\"",
        "\"a\tb\"",
        "\"\xc3\x28\"",
        "\"\xed\xa0\x80\"",
        "\"\xf5\x80\x80\x80\"",
        "{} {}",
        "[\"a\",]",
        "NaN",
        "'a'",
        "{\"a\":1}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (skip_all(bad[i], 16))
            PL_FAIL_("accepted invalid JSON #%zu %s", i, bad[i]);
}

static void test_reader_depth(void)
{
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    pl_jr r;
    pl_jr_init(&r, (const uint8_t *)deep, sizeof deep, 99);
    CHECK(!pl_jr_skip(&r));
    CHECK(r.error && strstr(r.error, "deep"));
    pl_jr_init(&r, (const uint8_t *)deep, sizeof deep, 100);
    CHECK(pl_jr_skip(&r) && pl_jr_finish(&r));
}

static void test_reader_unescape(void)
{
    pl_jr r;
    const char *t = "\"a\\u00e9\\ud83d\\ude00\\n\\\"z\"";
    pl_jr_init(&r, (const uint8_t *)t, strlen(t), 4);
    pl_jstr s;
    REQUIRE(pl_jr_string(&r, &s));
    CHECK(s.escaped);
    uint8_t out[64];
    long n = pl_jr_unescape(&s, out);
    CHECK_EQ_BYTES(out, (size_t)n, "a\xc3\xa9\xf0\x9f\x98\x80\n\"z", 10);
    /* A lone surrogate does not make UTF-8. */
    const char *lone = "\"\\ud83d x\"";
    pl_jr_init(&r, (const uint8_t *)lone, strlen(lone), 4);
    REQUIRE(pl_jr_string(&r, &s));
    CHECK_EQ_INT(pl_jr_unescape(&s, out), -1);
    CHECK(pl_jr_key_folded_eq((const uint8_t *)"start_time_unix_nano", 20, "startTimeUnixNano"));
    CHECK(!pl_jr_key_folded_eq((const uint8_t *)"start_time", 10, "startTimeUnixNano"));
}

/* ---- OTLP/JSON ---------------------------------------------------------- */

static pl_status decode_json(pl_batch *b, const char *json, pl_err *err)
{
    return b->signal == PL_SIGNAL_TRACES
               ? pl_otlp_json_decode_traces(b, (const uint8_t *)json, strlen(json), err)
               : pl_otlp_json_decode_profiles(b, (const uint8_t *)json, strlen(json), err);
}

static void expect_json_error(const char *json, pl_status want, const char *needle)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_err err = {{0}};
    pl_status st = decode_json(b, json, &err);
    if (st != want || !strstr(err.msg, needle))
        PL_FAIL_("%s: want %s with \"%s\", got %s: \"%s\"", json, pl_status_name(want), needle,
                 pl_status_name(st), err.msg);
    pl_batch_free(b);
}

#define SPAN_JSON(body) "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[" body "]}]}]}"

static void test_json_values(void)
{
    const char *json = SPAN_JSON(
        "{\"traceId\":\"0AF7651916CD43DD8448EB211C80319C\",\"span_id\":\"b7ad6b7169203331\","
        "\"kind\":\"SPAN_KIND_CLIENT\",\"flags\":\"257\",\"start_time_unix_nano\":1.7e18,"
        "\"endTimeUnixNano\":\"18446744073709551615\",\"droppedEventsCount\":null,"
        "\"unknownObject\":{\"a\":[1,{\"b\":[true,false,null]}],\"c\":\"\\u0000\"},"
        "\"unknownNumber\":-1.5e300,"
        "\"status\":{\"code\":\"STATUS_CODE_ERROR\",\"message\":\"d\\u00e9j\\u00e0\"},"
        "\"name\":\"plain\","
        "\"attributes\":[{\"key\":\"i\",\"value\":{\"intValue\":-42}},"
        "{\"key\":\"d\",\"value\":{\"doubleValue\":\"Infinity\"}},"
        "{\"key\":\"n\",\"value\":null},"
        "{\"key\":\"e\",\"value\":{\"stringValue\":\"x\",\"unknown\":[1]}}]},"
        "{\"kind\":3,\"status\":null}");
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_err err = {{0}};
    pl_status st = decode_json(b, json, &err);
    if (st)
        fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == PL_OK);
    const pl_scope_spans *ss = &b->data.traces.resources[0].scopes[0];
    REQUIRE(ss->n_spans == 2);
    const pl_span *sp = &ss->spans[0];
    CHECK_EQ_INT(sp->trace_id_len, 16);
    CHECK_EQ_INT(sp->trace_id[0], 0x0a);
    CHECK_EQ_INT(sp->span_id[7], 0x31);
    CHECK_EQ_INT(sp->kind, 3);
    CHECK_EQ_UINT(sp->flags, 257);
    CHECK_EQ_UINT(sp->start_time_unix_nano, 1700000000000000000ull);
    CHECK_EQ_UINT(sp->end_time_unix_nano, UINT64_MAX);
    CHECK(sp->has_status);
    CHECK_EQ_INT(sp->status.code, 2);
    CHECK_BYTES_STR(sp->status.message, "d\xc3\xa9j\xc3\xa0");
    /* Zero-copy: a string without escapes points into the request. */
    CHECK_BYTES_STR(sp->name, "plain");
    CHECK(sp->name.ptr > (const uint8_t *)json &&
          sp->name.ptr < (const uint8_t *)json + strlen(json));
    REQUIRE(sp->attrs.n == 4);
    CHECK_EQ_INT(sp->attrs.items[0].value.u.i, -42);
    CHECK(sp->attrs.items[1].value.u.d > 1e308);
    CHECK_EQ_INT(sp->attrs.items[2].value.type, PL_VALUE_EMPTY);
    CHECK_BYTES_STR(sp->attrs.items[3].value.u.str, "x");
    CHECK_EQ_INT(ss->spans[1].kind, 3);
    CHECK(!ss->spans[1].has_status);
    pl_batch_free(b);
}

static void test_json_errors(void)
{
    expect_json_error(SPAN_JSON("{\"kind\":\"SPAN_KIND_NOPE\"}"), PL_ERR_INVALID,
                      "spans[0].kind: unknown enum value \"SPAN_KIND_NOPE\"");
    expect_json_error(SPAN_JSON("{\"kind\":2.5}"), PL_ERR_INVALID, "kind: want an integer");
    expect_json_error(SPAN_JSON("{\"flags\":4294967296}"), PL_ERR_INVALID,
                      "flags: 4294967296 out of range");
    expect_json_error(SPAN_JSON("{\"startTimeUnixNano\":\"-5\"}"), PL_ERR_INVALID,
                      "is not a decimal integer");
    expect_json_error(SPAN_JSON("{\"startTimeUnixNano\":18446744073709551616}"), PL_ERR_INVALID,
                      "startTimeUnixNano: integer out of range");
    expect_json_error(SPAN_JSON("{\"startTimeUnixNano\":true}"), PL_ERR_INVALID,
                      "startTimeUnixNano: want an integer");
    expect_json_error(SPAN_JSON("{\"parentSpanId\":\"b7ad6b716920333\"}"), PL_ERR_INVALID,
                      "parentSpanId: 15 hex chars, want 16");
    expect_json_error(SPAN_JSON("{\"spanId\":7}"), PL_ERR_INVALID, "spanId: want a hex string");
    expect_json_error(SPAN_JSON("{\"status\":[]}"), PL_ERR_INVALID, "status: want an object");
    expect_json_error(SPAN_JSON("7"), PL_ERR_INVALID, "spans[0]: want an object");
    expect_json_error(SPAN_JSON("{\"attributes\":[{\"key\":\"k\",\"value\":{\"boolValue\":1}}]}"),
                      PL_ERR_INVALID, "attributes[0].value.boolValue: want true or false");
    expect_json_error(
        SPAN_JSON("{\"attributes\":[{\"key\":\"k\",\"value\":{\"doubleValue\":\"fast\"}}]}"),
        PL_ERR_INVALID, "doubleValue: \"fast\" is not a number");
    expect_json_error(SPAN_JSON("{\"name\":\"\xff\"}"), PL_ERR_INVALID, "invalid JSON at offset");
    expect_json_error(SPAN_JSON("{\"name\":\"\\udc00\"}"), PL_ERR_INVALID, "name: invalid UTF-8");
    expect_json_error(SPAN_JSON("{\"unknown\":[1,]}"), PL_ERR_INVALID, "invalid JSON");
    expect_json_error("", PL_ERR_INVALID, "invalid JSON");
    expect_json_error("\"x\"", PL_ERR_INVALID, "must be a JSON object");
    /* Deep nesting inside an unknown member stops at the reader's limit. */
    pl_buf deep;
    pl_buf_init(&deep);
    pl_buf_append_str(&deep, "{\"x\":");
    for (int i = 0; i < 1000; i++)
        pl_buf_append_byte(&deep, '[');
    for (int i = 0; i < 1000; i++)
        pl_buf_append_byte(&deep, ']');
    pl_buf_append_str(&deep, "}");
    pl_buf_append_byte(&deep, 0);
    expect_json_error((const char *)deep.data, PL_ERR_INVALID, "nested too deep");
    pl_buf_free(&deep);
}

/* {"resourceSpans":[{"scopeSpans":[{"spans":[{},{},...]}]}]} with n spans. */
static void empty_spans_json(pl_buf *out, size_t n)
{
    pl_buf_append_str(out, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[");
    for (size_t i = 0; i < n; i++)
        pl_buf_append_str(out, i ? ",{}" : "{}");
    pl_buf_append_str(out, "]}]}]}");
}

static void test_json_budget(void)
{
    pl_buf j;
    pl_buf_init(&j);
    empty_spans_json(&j, 1000000);
    REQUIRE(pl_buf_ok(&j));
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_err err = {{0}};
    pl_status st = pl_otlp_json_decode_ex(b, j.data, j.len, (size_t)8 << 20, &err);
    CHECK_EQ_INT(st, PL_ERR_TOO_LARGE);
    CHECK(strstr(err.msg, "decoded request larger than the limit") != NULL);
    /* Refused before the memory was spent: the arena stays near empty. */
    CHECK(pl_batch_memory(b) < ((size_t)1 << 20) + j.len);
    pl_batch_free(b);
    /* Nor under the default budget (40 MiB): a million spans are over it. */
    b = pl_batch_new(PL_SIGNAL_TRACES);
    CHECK_EQ_INT(pl_otlp_json_decode_traces(b, j.data, j.len, &err), PL_ERR_TOO_LARGE);
    pl_batch_free(b);
    /* A thousand fit. */
    pl_buf_reset(&j);
    empty_spans_json(&j, 1000);
    b = pl_batch_new(PL_SIGNAL_TRACES);
    CHECK_EQ_INT(pl_otlp_json_decode_traces(b, j.data, j.len, &err), PL_OK);
    CHECK_EQ_INT(b->data.traces.resources[0].scopes[0].n_spans, 1000);
    pl_batch_free(b);
    pl_buf_free(&j);
}

/* ExportTraceServiceRequest { resource_spans { scope_spans { n empty spans } } }:
 * each span is two bytes (12 00). */
static void empty_spans_pb(pl_buf *p, size_t n)
{
    uint8_t hdr[24];
    size_t h = 0, ss_len = 2 * n;
    size_t ss_hdr_len = 1, rs_len;
    for (size_t v = ss_len; v >= 0x80; v >>= 7)
        ss_hdr_len++;
    rs_len = 1 + ss_hdr_len + ss_len;
    hdr[h++] = 0x0a; /* resource_spans */
    for (size_t v = rs_len;; v >>= 7) {
        hdr[h++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80)
            break;
    }
    hdr[h++] = 0x12; /* scope_spans */
    for (size_t v = ss_len;; v >>= 7) {
        hdr[h++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80)
            break;
    }
    pl_buf_append(p, hdr, h);
    if (!pl_buf_reserve(p, ss_len))
        return;
    for (size_t i = 0; i < n; i++) {
        p->data[p->len++] = 0x12; /* spans */
        p->data[p->len++] = 0x00;
    }
}

static void test_pb_budget(void)
{
    /* 8 MiB of empty spans (the 7 KiB gzip bomb, inflated): refused
     * under the default budget before the span array is allocated. */
    pl_buf p;
    pl_buf_init(&p);
    empty_spans_pb(&p, (size_t)4 << 20);
    REQUIRE(pl_buf_ok(&p));
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_err err = {{0}};
    pl_status st = pl_otlp_decode_traces(b, p.data, p.len, &err);
    CHECK_EQ_INT(st, PL_ERR_TOO_LARGE);
    CHECK(strstr(err.msg, "decoded request larger than the limit") != NULL);
    CHECK(pl_batch_memory(b) < ((size_t)1 << 20));
    pl_batch_free(b);
    /* 64k empty spans: over a 4 MiB budget, inside a 64 MiB one. */
    pl_buf_reset(&p);
    empty_spans_pb(&p, 65536);
    b = pl_batch_new(PL_SIGNAL_TRACES);
    CHECK_EQ_INT(pl_otlp_decode_ex(b, p.data, p.len, (size_t)4 << 20, &err), PL_ERR_TOO_LARGE);
    pl_batch_free(b);
    b = pl_batch_new(PL_SIGNAL_TRACES);
    st = pl_otlp_decode_ex(b, p.data, p.len, (size_t)64 << 20, &err);
    CHECK_EQ_INT(st, PL_OK);
    if (st == PL_OK)
        CHECK_EQ_UINT(b->data.traces.resources[0].scopes[0].n_spans, 65536);
    pl_batch_free(b);
    pl_buf_free(&p);
}

/* ---- JSON -> protobuf for pass-through signals ------------------------ */

static void test_transcode_logs(void)
{
    const char *json =
        "{\"resourceLogs\":[{\"scopeLogs\":[{\"logRecords\":[{\"timeUnixNano\":\"1\","
        "\"severityNumber\":\"SEVERITY_NUMBER_INFO\",\"body\":{\"stringValue\":\"hi\"},"
        "\"flags\":1,\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"unknown\":[{}],"
        "\"spanId\":null}]}]}]}";
    static const uint8_t want[] = {
        0x0a, 0x2c, 0x12, 0x2a, 0x12, 0x28,            /* envelopes */
        0x09, 1,    0,    0,    0,    0,    0,  0,  0, /* time_unix_nano */
        0x10, 9,                                       /* severity_number */
        0x2a, 0x04, 0x0a, 0x02, 'h',  'i',             /* body */
        0x45, 1,    0,    0,    0,                     /* flags */
        0x4a, 0x10, 1,    2,    3,    4,    5,  6,  7,
        8,    9,    10,   11,   12,   13,   14, 15, 16, /* trace_id */
    };
    pl_buf out;
    pl_buf_init(&out);
    pl_err err = {{0}};
    pl_status st = pl_otlp_json_transcode(PL_SIGNAL_LOGS, (const uint8_t *)json, strlen(json),
                                          PL_OTLP_DECODE_BUDGET, &out, &err);
    if (st)
        fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == PL_OK);
    CHECK_EQ_BYTES(out.data, out.len, want, sizeof want);
    size_t n = 0;
    CHECK_EQ_INT(pl_otlp_count_logs(out.data, out.len, &n, &err), PL_OK);
    CHECK_EQ_UINT(n, 1);
    pl_buf_free(&out);
}

static void test_transcode_metrics(void)
{
    /* snake_case keys, numbers as strings, enums by name and number, a
     * long attribute list (sub-messages over 127 bytes move their content). */
    pl_buf j;
    pl_buf_init(&j);
    pl_buf_append_str(&j, "{\"resource_metrics\":[{\"resource\":{\"attributes\":[");
    for (int i = 0; i < 20; i++)
        pl_buf_printf(&j, "%s{\"key\":\"k%02d\",\"value\":{\"intValue\":\"%d\"}}", i ? "," : "", i,
                      i);
    pl_buf_append_str(
        &j,
        "]},\"scopeMetrics\":[{\"metrics\":["
        "{\"name\":\"a\",\"sum\":{\"dataPoints\":[{\"asInt\":\"5\"},{\"as_double\":1.5}],"
        "\"aggregationTemporality\":\"AGGREGATION_TEMPORALITY_CUMULATIVE\",\"isMonotonic\":true}},"
        "{\"name\":\"b\",\"histogram\":{\"dataPoints\":[{\"count\":\"3\","
        "\"bucketCounts\":[\"1\",2],\"explicitBounds\":[1.5],\"exemplars\":[{\"spanId\":"
        "\"b7ad6b7169203331\",\"asDouble\":\"NaN\"}]}],\"aggregationTemporality\":1}},"
        "{\"name\":\"c\",\"exponentialHistogram\":{\"dataPoints\":[{\"scale\":-3,"
        "\"positive\":{\"offset\":-1,\"bucketCounts\":[\"4\"]}}]}},"
        "{\"name\":\"d\",\"summary\":{\"dataPoints\":[{\"quantileValues\":[{\"quantile\":"
        "0.5,\"value\":2}]},{}]}},"
        "{\"name\":\"e\",\"gauge\":{\"dataPoints\":[]}}]}]}]}");
    pl_buf out;
    pl_buf_init(&out);
    pl_err err = {{0}};
    pl_status st =
        pl_otlp_json_transcode(PL_SIGNAL_METRICS, j.data, j.len, PL_OTLP_DECODE_BUDGET, &out, &err);
    if (st)
        fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == PL_OK);
    size_t n = 0;
    CHECK_EQ_INT(pl_otlp_count_metrics(out.data, out.len, &n, &err), PL_OK);
    CHECK_EQ_UINT(n, 6);
    /* The resource (20 attributes, > 127 bytes) came through whole. */
    CHECK(out.len > 20 * 12);
    pl_buf_free(&out);
    pl_buf_free(&j);
}

static void expect_transcode_error(pl_signal sig, const char *json, pl_status want,
                                   const char *needle, size_t budget)
{
    pl_buf out;
    pl_buf_init(&out);
    pl_err err = {{0}};
    pl_status st =
        pl_otlp_json_transcode(sig, (const uint8_t *)json, strlen(json), budget, &out, &err);
    if (st != want || !strstr(err.msg, needle))
        PL_FAIL_("%s: want %s with \"%s\", got %s: \"%s\"", json, pl_status_name(want), needle,
                 pl_status_name(st), err.msg);
    pl_buf_free(&out);
}

static void test_transcode_errors(void)
{
    size_t b = PL_OTLP_DECODE_BUDGET;
    expect_transcode_error(
        PL_SIGNAL_LOGS,
        "{\"resourceLogs\":[{\"scopeLogs\":[{\"logRecords\":[{\"traceId\":\"01\"}]}]}]}",
        PL_ERR_INVALID, "resourceLogs[0].scopeLogs[0].logRecords[0].traceId: 2 hex chars, want 32",
        b);
    expect_transcode_error(PL_SIGNAL_LOGS,
                           "{\"resourceLogs\":[{\"scopeLogs\":[{\"logRecords\":[{"
                           "\"severityNumber\":\"LOUD\"}]}]}]}",
                           PL_ERR_INVALID, "severityNumber: unknown enum value", b);
    expect_transcode_error(PL_SIGNAL_METRICS, "{\"resourceMetrics\":{}}", PL_ERR_INVALID,
                           "resourceMetrics: want an array", b);
    expect_transcode_error(PL_SIGNAL_METRICS, "{\"resourceMetrics\":[", PL_ERR_INVALID,
                           "invalid JSON", b);
    expect_transcode_error(PL_SIGNAL_TRACES, "{}", PL_ERR_UNSUPPORTED, "no JSON transcoder", b);
    /* A million empty log records against a 1 MiB budget. */
    pl_buf j;
    pl_buf_init(&j);
    pl_buf_append_str(&j, "{\"resourceLogs\":[{\"scopeLogs\":[{\"logRecords\":[");
    for (int i = 0; i < 1000000; i++)
        pl_buf_append_str(&j, i ? ",{}" : "{}");
    pl_buf_append_str(&j, "]}]}]}");
    pl_buf_append_byte(&j, 0);
    expect_transcode_error(PL_SIGNAL_LOGS, (const char *)j.data, PL_ERR_TOO_LARGE,
                           "larger than the limit", (size_t)1 << 20);
    pl_buf_free(&j);
}

int main(void)
{
    PL_RUN(test_reader_accepts);
    PL_RUN(test_reader_rejects);
    PL_RUN(test_reader_depth);
    PL_RUN(test_reader_unescape);
    PL_RUN(test_json_values);
    PL_RUN(test_json_errors);
    PL_RUN(test_json_budget);
    PL_RUN(test_pb_budget);
    PL_RUN(test_transcode_logs);
    PL_RUN(test_transcode_metrics);
    PL_RUN(test_transcode_errors);
    return pl_test_done();
}
