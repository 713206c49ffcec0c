/*
 * test_otlp_json.c: the OTLP/JSON codec. The fact sheet's example request,
 * JSON <-> model <-> protobuf equivalence, snake_case keys, numbers vs
 * strings, enum names, special doubles, and errors that say where.
 */
#include <math.h>

#include "core/buf.h"
#include "core/model.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"
#include "testlib.h"

static const char sheet_example[] =
    "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{"
    "\"stringValue\":\"checkout\"}}]},\n"
    "  \"scopeSpans\":[{\"scope\":{\"name\":\"demo\"},\"spans\":[{\n"
    "    \"traceId\":\"0af7651916cd43dd8448eb211c80319c\",\"spanId\":\"b7ad6b7169203331\",\n"
    "    \"name\":\"GET /cart\",\"kind\":2,\n"
    "    \"startTimeUnixNano\":\"1700000000000000000\",\"endTimeUnixNano\":"
    "\"1700000000250000000\",\n"
    "    \"attributes\":[{\"key\":\"http.route\",\"value\":{\"stringValue\":\"/cart\"}}],\n"
    "    \"status\":{\"code\":1}}]}]}]}";

static pl_batch *decode_traces_json(const char *json, pl_status want)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_err err = {{0}};
    pl_status st = pl_otlp_json_decode_traces(b, (const uint8_t *)json, strlen(json), &err);
    if (st != want)
        PL_FAIL_("decode: got %s, want %s: %s", pl_status_name(st), pl_status_name(want), err.msg);
    return b;
}

static void test_sheet_example(void)
{
    pl_batch *b = decode_traces_json(sheet_example, PL_OK);
    const pl_traces *t = &b->data.traces;
    REQUIRE(t->n_resources == 1 && t->resources[0].n_scopes == 1);
    CHECK(t->resources[0].has_resource);
    CHECK_BYTES_STR(t->resources[0].resource.attrs.items[0].value.u.str, "checkout");
    CHECK(t->resources[0].scopes[0].has_scope);
    CHECK_BYTES_STR(t->resources[0].scopes[0].scope.name, "demo");
    REQUIRE(t->resources[0].scopes[0].n_spans == 1);
    const pl_span *sp = &t->resources[0].scopes[0].spans[0];
    CHECK_EQ_INT(sp->trace_id_len, 16);
    CHECK_EQ_INT(sp->trace_id[0], 0x0a);
    CHECK_EQ_INT(sp->trace_id[15], 0x9c);
    CHECK_EQ_INT(sp->span_id_len, 8);
    CHECK_EQ_INT(sp->span_id[7], 0x31);
    CHECK_EQ_INT(sp->parent_span_id_len, 0);
    CHECK_BYTES_STR(sp->name, "GET /cart");
    CHECK_EQ_INT(sp->kind, 2);
    CHECK_EQ_UINT(sp->start_time_unix_nano, 1700000000000000000ull);
    CHECK_EQ_UINT(sp->end_time_unix_nano, 1700000000250000000ull);
    CHECK(sp->has_status);
    CHECK_EQ_INT(sp->status.code, 1);
    CHECK_BYTES_STR(sp->attrs.items[0].key, "http.route");

    /* encode -> decode -> encode is stable, and equals the protobuf path */
    pl_buf j1, j2, p1, p2;
    pl_buf_init(&j1);
    pl_buf_init(&j2);
    pl_buf_init(&p1);
    pl_buf_init(&p2);
    REQUIRE(pl_otlp_json_encode_traces(t, &j1));
    pl_buf_append_byte(&j1, 0);
    pl_batch *b2 = decode_traces_json((const char *)j1.data, PL_OK);
    REQUIRE(pl_otlp_json_encode_traces(&b2->data.traces, &j2));
    CHECK_EQ_BYTES(j1.data, j1.len - 1, j2.data, j2.len);
    REQUIRE(pl_otlp_encode_traces(t, &p1));
    REQUIRE(pl_otlp_encode_traces(&b2->data.traces, &p2));
    CHECK_EQ_BYTES(p1.data, p1.len, p2.data, p2.len);
    /* Spot-check the text: 64-bit as strings, enums and 32-bit as numbers. */
    CHECK(strstr((char *)j1.data, "\"startTimeUnixNano\":\"1700000000000000000\"") != NULL);
    CHECK(strstr((char *)j1.data, "\"kind\":2") != NULL);
    CHECK(strstr((char *)j1.data, "\"traceId\":\"0af7651916cd43dd8448eb211c80319c\"") != NULL);
    CHECK(strstr((char *)j1.data, "\"status\":{\"code\":1}") != NULL);
    pl_buf_free(&j1);
    pl_buf_free(&j2);
    pl_buf_free(&p1);
    pl_buf_free(&p2);
    pl_batch_free(b2);
    pl_batch_free(b);
}

static void test_snake_case_numbers_enums(void)
{
    const char *json =
        "{\"resource_spans\":[{\"scope_spans\":[{\"spans\":[{"
        "\"trace_id\":\"0AF7651916CD43DD8448EB211C80319C\",\"span_id\":\"B7AD6B7169203331\","
        "\"parent_span_id\":\"\",\"name\":\"x\",\"kind\":\"SPAN_KIND_CLIENT\","
        "\"start_time_unix_nano\":1700000000000000001,\"end_time_unix_nano\":\"5\","
        "\"flags\":\"257\",\"dropped_attributes_count\":3,\"unknownKey\":{\"a\":[1,2]},"
        "\"attributes\":["
        "{\"key\":\"i\",\"value\":{\"intValue\":-7}},"
        "{\"key\":\"i2\",\"value\":{\"int_value\":\"-9223372036854775808\"}},"
        "{\"key\":\"d\",\"value\":{\"doubleValue\":\"NaN\"}},"
        "{\"key\":\"d2\",\"value\":{\"double_value\":\"-Infinity\"}},"
        "{\"key\":\"d3\",\"value\":{\"doubleValue\":1.5}},"
        "{\"key\":\"d4\",\"value\":{\"doubleValue\":2}},"
        "{\"key\":\"b\",\"value\":{\"bytesValue\":\"AP8Q\"}},"
        "{\"key\":\"b2\",\"value\":{\"bytes_value\":\"AP8\"}},"
        "{\"key\":\"t\",\"value\":{\"boolValue\":true}},"
        "{\"key\":\"e\",\"value\":{}},"
        "{\"key\":\"a\",\"value\":{\"arrayValue\":{\"values\":[{\"stringValue\":\"s\"},"
        "{\"kvlistValue\":{\"values\":[{\"key\":\"k\",\"value\":{\"intValue\":\"1\"}}]}}]}}}],"
        "\"status\":{\"code\":\"STATUS_CODE_ERROR\",\"message\":\"m\"}}]}]}]}";
    pl_batch *b = decode_traces_json(json, PL_OK);
    REQUIRE(b->data.traces.n_resources == 1);
    CHECK(!b->data.traces.resources[0].has_resource);
    const pl_span *sp = &b->data.traces.resources[0].scopes[0].spans[0];
    CHECK_EQ_INT(sp->trace_id[0], 0x0a);
    CHECK_EQ_INT(sp->parent_span_id_len, 0);
    CHECK_EQ_INT(sp->kind, 3);
    CHECK_EQ_UINT(sp->start_time_unix_nano, 1700000000000000001ull);
    CHECK_EQ_UINT(sp->end_time_unix_nano, 5);
    CHECK_EQ_UINT(sp->flags, 257);
    CHECK_EQ_INT(sp->dropped_attributes_count, 3);
    CHECK_EQ_INT(sp->status.code, 2);
    REQUIRE(sp->attrs.n == 11);
    CHECK_EQ_INT(sp->attrs.items[0].value.u.i, -7);
    CHECK(sp->attrs.items[1].value.u.i == INT64_MIN);
    CHECK(isnan(sp->attrs.items[2].value.u.d));
    CHECK(isinf(sp->attrs.items[3].value.u.d) && sp->attrs.items[3].value.u.d < 0);
    CHECK(sp->attrs.items[4].value.u.d == 1.5);
    CHECK_EQ_INT(sp->attrs.items[5].value.type, PL_VALUE_DOUBLE);
    CHECK_EQ_BYTES(sp->attrs.items[6].value.u.str.ptr, sp->attrs.items[6].value.u.str.len,
                   "\x00\xff\x10", 3);
    CHECK_EQ_INT(sp->attrs.items[7].value.u.str.len, 2); /* unpadded base64 */
    CHECK_EQ_INT(sp->attrs.items[8].value.type, PL_VALUE_BOOL);
    CHECK_EQ_INT(sp->attrs.items[9].value.type, PL_VALUE_EMPTY);
    const pl_value *a = &sp->attrs.items[10].value;
    REQUIRE(a->type == PL_VALUE_ARRAY && a->u.array.n == 2);
    CHECK_EQ_INT(a->u.array.items[1].u.kvlist.items[0].value.u.i, 1);

    /* JSON round trip keeps every value, including NaN and infinities. */
    pl_buf j;
    pl_buf_init(&j);
    REQUIRE(pl_otlp_json_encode_traces(&b->data.traces, &j));
    pl_buf_append_byte(&j, 0);
    CHECK(strstr((char *)j.data, "\"doubleValue\":\"NaN\"") != NULL);
    CHECK(strstr((char *)j.data, "\"doubleValue\":\"-Infinity\"") != NULL);
    CHECK(strstr((char *)j.data, "\"bytesValue\":\"AP8Q\"") != NULL);
    CHECK(strstr((char *)j.data, "\"intValue\":\"-9223372036854775808\"") != NULL);
    CHECK(strstr((char *)j.data, "\"flags\":257") != NULL);
    pl_batch *b2 = decode_traces_json((const char *)j.data, PL_OK);
    pl_buf p1, p2;
    pl_buf_init(&p1);
    pl_buf_init(&p2);
    REQUIRE(pl_otlp_encode_traces(&b->data.traces, &p1));
    REQUIRE(pl_otlp_encode_traces(&b2->data.traces, &p2));
    CHECK_EQ_BYTES(p1.data, p1.len, p2.data, p2.len);
    pl_buf_free(&p1);
    pl_buf_free(&p2);
    pl_buf_free(&j);
    pl_batch_free(b2);
    pl_batch_free(b);
}

static void expect_error(const char *json, const char *needle)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_err err = {{0}};
    pl_status st = pl_otlp_json_decode_traces(b, (const uint8_t *)json, strlen(json), &err);
    if (st != PL_ERR_INVALID || !strstr(err.msg, needle))
        PL_FAIL_("want INVALID with \"%s\", got %s: \"%s\"", needle, pl_status_name(st), err.msg);
    pl_batch_free(b);
}

static void test_errors(void)
{
    expect_error(
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{},{\"traceId\":\"0af765\"}]}]}]}",
        "resourceSpans[0].scopeSpans[0].spans[1].traceId: 6 hex chars, want 32");
    expect_error("{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"spanId\":"
                 "\"zzad6b7169203331\"}]}]}]}",
                 "spans[0].spanId: invalid hex");
    /* A base64 id, as protojson would write it, is not accepted. */
    expect_error("{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":"
                 "\"CvdlGRbNQ92ESOshHIAxnA==\"}]}]}]}",
                 "traceId: 24 hex chars, want 32");
    expect_error("{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"startTimeUnixNano\":"
                 "\"12x\"}]}]}]}",
                 "spans[0].startTimeUnixNano: \"12x\" is not a decimal integer");
    expect_error("{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"kind\":\"SERVER\"}]}]}]}",
                 "spans[0].kind: unknown enum value");
    expect_error("{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"droppedAttributesCount\":"
                 "-1}]}]}]}",
                 "droppedAttributesCount: negative value");
    expect_error("{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"attributes\":[{\"key\":"
                 "\"k\",\"value\":{\"bytesValue\":\"@@@@\"}}]}]}]}]}",
                 "attributes[0].value.bytesValue: invalid base64");
    expect_error("{\"resourceSpans\":{}}", "resourceSpans: want an array");
    expect_error("{\"resourceSpans\":[", "invalid JSON");
    expect_error("{\"resourceSpans\":[]} x", "invalid JSON");
    expect_error("[1]", "must be a JSON object");
    expect_error("{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"name\":5}]}]}]}",
                 "spans[0].name: want a string");
    /* Deep nesting: 70 levels of arrayValue. */
    pl_buf deep;
    pl_buf_init(&deep);
    pl_buf_append_str(&deep, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"attributes\":"
                             "[{\"key\":\"k\",\"value\":");
    for (int i = 0; i < 70; i++)
        pl_buf_append_str(&deep, "{\"arrayValue\":{\"values\":[");
    pl_buf_append_str(&deep, "{}");
    for (int i = 0; i < 70; i++)
        pl_buf_append_str(&deep, "]}}");
    pl_buf_append_str(&deep, "}]}]}]}]}");
    pl_buf_append_byte(&deep, 0);
    expect_error((const char *)deep.data, "nested deeper than 64");
    pl_buf_free(&deep);
}

static const char profiles_json[] =
    "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":"
    "{\"stringValue\":\"api\"}}]},\"scopeProfiles\":[{\"scope\":{\"name\":\"ebpf\"},"
    "\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
    "\"samples\":[{\"stackIndex\":1,\"attributeIndices\":[1],\"linkIndex\":1,"
    "\"values\":[\"10\",\"-3\"],\"timestampsUnixNano\":[\"1700000000000000000\","
    "1700000000000000001]}],"
    "\"timeUnixNano\":\"1700000000000000000\",\"durationNano\":\"10000000000\","
    "\"periodType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"period\":\"10000000\","
    "\"profileId\":\"42424242424242424242424242424242\",\"originalPayloadFormat\":\"pprof\","
    "\"originalPayload\":\"H4sA\",\"attributeIndices\":[1]}]}]}],"
    "\"dictionary\":{\"mappingTable\":[{},{\"memoryStart\":\"4194304\",\"memoryLimit\":"
    "\"5242880\",\"filenameStrindex\":3}],"
    "\"locationTable\":[{},{\"mappingIndex\":1,\"address\":\"4198964\",\"lines\":[{"
    "\"functionIndex\":1,\"line\":\"42\",\"column\":\"7\"}]}],"
    "\"functionTable\":[{},{\"nameStrindex\":4,\"filenameStrindex\":3,\"startLine\":\"10\"}],"
    "\"linkTable\":[{},{\"traceId\":\"0af7651916cd43dd8448eb211c80319c\",\"spanId\":"
    "\"b7ad6b7169203331\"}],"
    "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"/app/bin\",\"main\",\"thread.name\"],"
    "\"attributeTable\":[{},{\"keyStrindex\":5,\"value\":{\"stringValue\":\"w-1\"}}],"
    "\"stackTable\":[{},{\"locationIndices\":[1]}]}}";

static void test_profiles(void)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_err err = {{0}};
    pl_status st = pl_otlp_json_decode_profiles(b, (const uint8_t *)profiles_json,
                                                strlen(profiles_json), &err);
    if (st)
        fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == PL_OK);
    const pl_profiles *p = &b->data.profiles;
    CHECK(p->has_dictionary);
    CHECK_EQ_INT(p->dict.n_strings, 6);
    CHECK_BYTES_STR(p->dict.strings[4], "main");
    CHECK_EQ_UINT(p->dict.mappings[1].memory_limit, 5242880);
    CHECK_EQ_INT(p->dict.locations[1].lines[0].line, 42);
    CHECK_EQ_INT(p->dict.links[1].span_id[0], 0xb7);
    CHECK_EQ_INT(p->dict.links[0].trace_id_len, 0);
    const pl_profile *pr = &p->resources[0].scopes[0].profiles[0];
    CHECK_EQ_INT(pr->n_samples, 1);
    CHECK_EQ_INT(pr->samples[0].values[1], -3);
    CHECK_EQ_UINT(pr->samples[0].timestamps_unix_nano[1], 1700000000000000001ull);
    CHECK_EQ_INT(pr->profile_id[0], 0x42);
    CHECK_EQ_INT(pr->original_payload.len, 3);
    CHECK_EQ_INT(pr->period, 10000000);

    /* JSON -> model -> JSON -> model: same protobuf encoding both times. */
    pl_buf j, p1, p2;
    pl_buf_init(&j);
    pl_buf_init(&p1);
    pl_buf_init(&p2);
    REQUIRE(pl_otlp_json_encode_profiles(p, &j));
    pl_batch *b2 = pl_batch_new(PL_SIGNAL_PROFILES);
    st = pl_otlp_json_decode_profiles(b2, j.data, j.len, &err);
    if (st)
        fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == PL_OK);
    REQUIRE(pl_otlp_encode_profiles(p, &p1));
    REQUIRE(pl_otlp_encode_profiles(&b2->data.profiles, &p2));
    CHECK_EQ_BYTES(p1.data, p1.len, p2.data, p2.len);
    /* And the protobuf decodes back to the same JSON. */
    pl_batch *b3 = pl_batch_new(PL_SIGNAL_PROFILES);
    REQUIRE(pl_otlp_decode_profiles(b3, p1.data, p1.len, &err) == PL_OK);
    pl_buf j3;
    pl_buf_init(&j3);
    REQUIRE(pl_otlp_json_encode_profiles(&b3->data.profiles, &j3));
    CHECK_EQ_BYTES(j.data, j.len, j3.data, j3.len);
    pl_buf_free(&j3);
    pl_batch_free(b3);

    pl_buf_free(&j);
    pl_buf_free(&p1);
    pl_buf_free(&p2);
    pl_batch_free(b2);
    pl_batch_free(b);

    /* An out-of-range index is rejected with its place. */
    char bad[sizeof profiles_json];
    memcpy(bad, profiles_json, sizeof bad);
    char *at = strstr(bad, "\"stackIndex\":1");
    REQUIRE(at);
    at[13] = '7';
    b = pl_batch_new(PL_SIGNAL_PROFILES);
    st = pl_otlp_json_decode_profiles(b, (const uint8_t *)bad, strlen(bad), &err);
    CHECK_EQ_INT(st, PL_ERR_INVALID);
    CHECK(strstr(err.msg, "profiles[0].samples[0].stack_index: index 7 out of range") != NULL);
    pl_batch_free(b);
}

static void test_base64(void)
{
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        pl_buf b;
        pl_buf_init(&b);
        pl_otlp_base64_encode(&b, (const uint8_t *)in[i], strlen(in[i]));
        CHECK_EQ_BYTES(b.data, b.len, out[i], strlen(out[i]));
        pl_buf_free(&b);
        /* and back, padding stripped */
        size_t n = strlen(out[i]), got = 99, bad = 99;
        while (n && out[i][n - 1] == '=')
            n--;
        uint8_t dec[8];
        CHECK(pl_otlp_base64_decode_into(out[i], n, dec, &got, &bad));
        CHECK_EQ_BYTES(dec, got, in[i], strlen(in[i]));
    }
    /* the URL-safe alphabet too; the first bad character is named */
    uint8_t dec[8];
    size_t got = 0, bad = 0;
    CHECK(pl_otlp_base64_decode_into("-_-_", 4, dec, &got, &bad));
    CHECK_EQ_BYTES(dec, got, "\xfb\xff\xbf", 3);
    CHECK(!pl_otlp_base64_decode_into("Zm9v*mFy", 8, dec, &got, &bad));
    CHECK_EQ_UINT(bad, 4);
}

/* The JSON string writer shared by the OTLP/JSON encoder, the export
 * responses and the store: named escapes, \u00XX for other control bytes,
 * UTF-8 as it is, and a NULL empty string. */
static void test_json_string(void)
{
    static const char in[] = "a\"b\\c\n\r\t\x01\x1f \xc3\xa9\x7f";
    static const char want[] = "\"a\\\"b\\\\c\\n\\r\\t\\u0001\\u001f \xc3\xa9\x7f\"";
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_json_string(&b, in, sizeof(in) - 1);
    CHECK_EQ_BYTES(b.data, b.len, want, sizeof(want) - 1);
    pl_buf_reset(&b);
    pl_buf_json_string(&b, NULL, 0);
    CHECK_EQ_BYTES(b.data, b.len, "\"\"", 2);
    pl_buf_reset(&b);
    pl_buf_json_string(&b, "plain", 5);
    CHECK_EQ_BYTES(b.data, b.len, "\"plain\"", 7);
    CHECK(pl_buf_ok(&b));
    pl_buf_free(&b);
}

/* An attribute as SDKs write it, {"key":"K","value":{"stringValue":"V"}},
 * with K and V of every length up to past a 16-byte block and one special
 * byte at every position of one of them: the in-place reading of such
 * attributes must give what the full reader gives (escapes unescaped,
 * "é" kept) and refuse what it refuses (a raw control byte, a byte that is
 * not UTF-8), and take the plain ones as sent. */
static void test_attribute_strings_checked(void)
{
    static const char *const specials[] = {"", "\\n", "\xc3\xa9", "\x01", "\x80", "\\\""};
    static const char *const want[] = {"", "\n", "\xc3\xa9", NULL, NULL, "\""};
    for (size_t len = 0; len <= 36; len++) {
        for (size_t at = 0; at <= len; at++) {
            for (int where = 0; where < 2; where++) {
                for (size_t sp = 0; sp < sizeof specials / sizeof specials[0]; sp++) {
                    if (sp && at == len)
                        continue;
                    char k[64], v[64], expect[96];
                    memset(k, 'k', len), memset(v, 'v', len);
                    k[len] = v[len] = '\0';
                    char *t = where ? v : k;
                    /* the special replaces the byte at `at` */
                    snprintf(expect, sizeof expect, "%.*s%s%s", (int)at, t,
                             want[sp] ? want[sp] : "", sp ? t + at + 1 : t + at);
                    char with[96];
                    snprintf(with, sizeof with, "%.*s%s%s", (int)at, t, specials[sp],
                             sp ? t + at + 1 : t + at);
                    char doc[512];
                    snprintf(doc, sizeof doc,
                             "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"name\":\"n\","
                             "\"attributes\":[{\"key\":\"%s\",\"value\":{\"stringValue\":\"%s\"}}]}"
                             "]}]}]}",
                             where ? k : with, where ? with : v);
                    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
                    pl_err err;
                    pl_status st =
                        pl_otlp_json_decode_traces(b, (const uint8_t *)doc, strlen(doc), &err);
                    if (!want[sp]) {
                        CHECK_EQ_INT(st, PL_ERR_INVALID);
                    } else {
                        REQUIRE(st == PL_OK);
                        const pl_span *span = &b->data.traces.resources[0].scopes[0].spans[0];
                        REQUIRE(span->attrs.n == 1);
                        const pl_kv *kv = &span->attrs.items[0];
                        CHECK_EQ_INT(kv->value.type, PL_VALUE_STRING);
                        const char *wk = where ? k : expect, *wv = where ? expect : v;
                        CHECK_EQ_BYTES(kv->key.ptr, kv->key.len, wk, strlen(wk));
                        CHECK_EQ_BYTES(kv->value.u.str.ptr, kv->value.u.str.len, wv, strlen(wv));
                    }
                    pl_batch_free(b);
                }
            }
        }
    }
}

int main(void)
{
    PL_RUN(test_sheet_example);
    PL_RUN(test_snake_case_numbers_enums);
    PL_RUN(test_errors);
    PL_RUN(test_profiles);
    PL_RUN(test_base64);
    PL_RUN(test_json_string);
    PL_RUN(test_attribute_strings_checked);
    return pl_test_done();
}
