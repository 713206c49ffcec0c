/*
 * test_value_json.c: core/value_json, the one value writer. Each preset
 * writes what its place wrote before (literal expectations below), and on
 * random values, nested past the depth limits, exactly what the replaced
 * writers write (kept as references in tests/tools/ref_value_json.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/model.h"
#include "core/value_json.h"
#include "testlib.h"
#include "tools/ref_enc.h"
#include "xorshift.h"

static char out[4096];

static const char *show(const pl_value *v, const pl_value_json_opts *o)
{
    pl_buf b;
    pl_buf_init(&b);
    pl_value_json(&b, v, o);
    snprintf(out, sizeof out, "%.*s", (int)b.len, b.data ? (const char *)b.data : "");
    pl_buf_free(&b);
    return out;
}

#define CHECK_SHOWS(v, o, want)                                                                    \
    do {                                                                                           \
        const char *got_ = show((v), (o));                                                         \
        if (strcmp(got_, (want)) != 0)                                                             \
            PL_FAIL_("%s: got %s, want %s", #o, got_, (want));                                     \
    } while (0)

/* {"s":"a\n\"b","n":[-7,NaN,bytes 01ff,{},strindex 2,0.1]} */
static pl_value sample(pl_kv *kvs, pl_value *items)
{
    static const uint8_t raw[] = {0x01, 0xff};
    items[0] = pl_value_int(-7);
    items[1] = pl_value_double(NAN);
    items[2] = (pl_value){.type = PL_VALUE_BYTES, .u.str = {raw, 2}};
    items[3] = (pl_value){.type = PL_VALUE_EMPTY};
    items[4] = (pl_value){.type = PL_VALUE_STRINDEX, .u.strindex = 2};
    items[5] = pl_value_double(0.1);
    kvs[0] = (pl_kv){.key = PL_BYTES_LIT("s"), .value = pl_value_string(PL_BYTES_LIT("a\n\"b"))};
    kvs[1] = (pl_kv){.key = PL_BYTES_LIT("n"), .value = {.type = PL_VALUE_ARRAY}};
    kvs[1].value.u.array.items = items;
    kvs[1].value.u.array.n = 6;
    pl_value v = {.type = PL_VALUE_KVLIST};
    v.u.kvlist.items = kvs;
    v.u.kvlist.n = 2;
    return v;
}

static void test_presets(void)
{
    pl_kv kvs[2];
    pl_value items[6];
    pl_value v = sample(kvs, items);
    CHECK_SHOWS(&v, &pl_vj_store,
                "{\"s\":\"a\\n\\\"b\",\"n\":[-7,null,\"01ff\",null,null,"
                "0.10000000000000001]}");
    CHECK_SHOWS(&v, &pl_vj_attributes,
                "{\"s\":\"a\\u000a\\\"b\",\"n\":[-7,\"NaN\",\"Af8=\","
                "null,2,0.1]}");
    CHECK_SHOWS(&v, &pl_vj_debug, "{s: \"a\n\"b\", n: [-7, nan, <2 bytes>, (empty), \"\", 0.1]}");
    CHECK_SHOWS(&v, &pl_vj_otlp,
                "{\"kvlistValue\":{\"values\":[{\"key\":\"s\",\"value\":{\"stringValue\":"
                "\"a\\n\\\"b\"}},{\"key\":\"n\",\"value\":{\"arrayValue\":{\"values\":["
                "{\"intValue\":\"-7\"},{\"doubleValue\":\"NaN\"},{\"bytesValue\":\"Af8=\"},{},"
                "{\"stringValueStrindex\":2},{\"doubleValue\":0.1}]}}}]}}");
    pl_value inf = pl_value_double(-INFINITY), big = pl_value_int(INT64_MIN);
    CHECK_SHOWS(&inf, &pl_vj_otlp, "{\"doubleValue\":\"-Infinity\"}");
    CHECK_SHOWS(&inf, &pl_vj_attributes, "\"-Inf\"");
    CHECK_SHOWS(&inf, &pl_vj_store, "null");
    CHECK_SHOWS(&big, &pl_vj_otlp, "{\"intValue\":\"-9223372036854775808\"}");
    CHECK_SHOWS(&big, &pl_vj_store, "-9223372036854775808");
    /* the debug exporter resolves string_value_strindex through a dictionary */
    pl_bytes strings[3] = {{NULL, 0}, PL_BYTES_LIT("cpu"), PL_BYTES_LIT("main")};
    pl_dictionary dict = {.strings = strings, .n_strings = 3, .cap_strings = 3};
    pl_value_json_opts o = pl_vj_debug;
    o.dict = &dict;
    CHECK_SHOWS(&items[4], &o, "\"main\"");
}

static void test_integers(void)
{
    static const int64_t ints[] = {0, 1, -1, 9, 10, -10, 123456789, INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        char want[96];
        pl_buf b;
        pl_buf_init(&b);
        pl_json_int(&b, ints[i], false);
        pl_json_int(&b, ints[i], true);
        pl_json_uint(&b, (uint64_t)ints[i], true);
        snprintf(want, sizeof want, "%" PRId64 "\"%" PRId64 "\"\"%" PRIu64 "\"", ints[i], ints[i],
                 (uint64_t)ints[i]);
        CHECK(b.len == strlen(want) && memcmp(b.data, want, b.len) == 0);
        pl_buf_free(&b);
    }
}

/* ---- against the replaced writers -------------------------------------- */

static uint64_t rng = 88172645463325252ull;

static unsigned below(unsigned n)
{
    return (unsigned)(xorshift64(&rng) % n);
}

static void rvalue(pl_batch *b, pl_value *v, int depth)
{
    static const char *const strs[] = {"", "x", "tab\there", "q\"\\", "\x7f\xc3\xa9", "\x1f"};
    static const double dbl[] = {0.0, -0.0, 0.1, 1.0 / 3, 1e21, 5e-324, 2.5, 100.0};
    memset(v, 0, sizeof *v);
    /* mostly containers near the top, so some values nest past 16 levels */
    v->type = depth < 18 && below(3) == 0 ? (below(2) ? PL_VALUE_ARRAY : PL_VALUE_KVLIST)
                                          : (pl_value_type)below(9);
    if (depth >= 20 && (v->type == PL_VALUE_ARRAY || v->type == PL_VALUE_KVLIST))
        v->type = PL_VALUE_INT;
    switch (v->type) {
    case PL_VALUE_STRING:
    case PL_VALUE_BYTES: {
        const char *s = strs[below(6)];
        v->u.str = pl_batch_bytes(b, s, strlen(s));
        break;
    }
    case PL_VALUE_BOOL:
        v->u.b = below(2);
        break;
    case PL_VALUE_INT:
        v->u.i = below(2) ? (int64_t)below(1000) - 500 : INT64_MIN + below(3);
        break;
    case PL_VALUE_DOUBLE: {
        unsigned k = below(11);
        v->u.d = k < 8 ? dbl[k] : k == 8 ? NAN : k == 9 ? INFINITY : -INFINITY;
        break;
    }
    case PL_VALUE_ARRAY:
        v->u.array.n = below(4);
        v->u.array.items = pl_batch_alloc(b, (v->u.array.n + 1) * sizeof(pl_value));
        for (uint32_t i = 0; i < v->u.array.n; i++)
            rvalue(b, &v->u.array.items[i], depth + 1);
        break;
    case PL_VALUE_KVLIST:
        v->u.kvlist.n = below(4);
        v->u.kvlist.items = pl_batch_alloc(b, (v->u.kvlist.n + 1) * sizeof(pl_kv));
        for (uint32_t i = 0; i < v->u.kvlist.n; i++) {
            const char *s = strs[below(6)];
            v->u.kvlist.items[i].key = pl_batch_bytes(b, s, strlen(s));
            rvalue(b, &v->u.kvlist.items[i].value, depth + 1);
        }
        break;
    case PL_VALUE_STRINDEX:
        v->u.strindex = (int32_t)below(4);
        break;
    default:
        break;
    }
}

static bool same(const pl_buf *a, const pl_buf *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

static void test_against_replaced(void)
{
    pl_bytes strings[4] = {{NULL, 0}, PL_BYTES_LIT("a"), PL_BYTES_LIT("b\""), PL_BYTES_LIT("")};
    pl_dictionary dict = {.strings = strings, .n_strings = 4, .cap_strings = 4};
    pl_value_json_opts dbg = pl_vj_debug;
    dbg.dict = &dict;
    int deep = 0;
    for (int i = 0; i < 3000; i++) {
        pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
        pl_value v, wrap = {.type = PL_VALUE_ARRAY};
        rvalue(b, &v, 0);
        wrap.u.array.items = &v;
        wrap.u.array.n = 1;
        pl_buf got, want;
        pl_buf_init(&got);
        pl_buf_init(&want);
        pl_value_json(&got, &v, &pl_vj_store);
        ref_store_json(&want, &v);
        if (!same(&got, &want))
            PL_FAIL_("store #%d: %.*s vs %.*s", i, (int)got.len, got.data, (int)want.len,
                     want.data);
        deep += memmem(want.data, want.len, "null", 4) != NULL;
        pl_buf_reset(&got);
        pl_buf_reset(&want);
        /* inside an array: the attributes processor's JSON for every type */
        pl_value_json(&got, &wrap, &pl_vj_attributes);
        ref_attributes_text(&want, &wrap);
        if (!same(&got, &want))
            PL_FAIL_("attributes #%d: %.*s vs %.*s", i, (int)got.len, got.data, (int)want.len,
                     want.data);
        pl_buf_reset(&got);
        pl_buf_reset(&want);
        pl_value_json(&got, &v, &dbg);
        ref_debug_text(&want, &v, &dict);
        if (!same(&got, &want))
            PL_FAIL_("debug #%d: %.*s vs %.*s", i, (int)got.len, got.data, (int)want.len,
                     want.data);
        pl_buf_free(&got);
        pl_buf_free(&want);
        pl_batch_free(b);
    }
    CHECK(deep > 100); /* the depth limits and null cases were reached */
}

int main(void)
{
    PL_RUN(test_presets);
    PL_RUN(test_integers);
    PL_RUN(test_against_replaced);
    return pl_test_done();
}
