/*
 * test_core.c: the ground floor's small mechanisms, each against what its
 * header promises: the arena (alignment, stability, zeroing, limits), the
 * byte buffer (growth, failure, JSON strings), base64 (both alphabets,
 * padding, the first bad character), pl_status (every protocol mapping) and
 * the counters (atomic adds from several threads, extras, the global list),
 * the reserved metadata prefix and the host's claims.
 */
#include <pthread.h>

#include "core/arena.h"
#include "core/base64.h"
#include "core/buf.h"
#include "core/component.h"
#include "core/model.h"
#include "core/stats.h"
#include "core/status.h"
#include "testlib.h"

/* ---- arena --------------------------------------------------------------- */

static void test_arena_alignment_and_stability(void)
{
    pl_arena a;
    pl_arena_init(&a);
    void *first = NULL;
    for (size_t i = 1; i < 5000; i++) {
        uint8_t *p = pl_arena_alloc(&a, i % 37 + 1);
        REQUIRE(p);
        CHECK_EQ_UINT((uintptr_t)p % 8, 0);
        memset(p, (int)(i & 0xff), i % 37 + 1);
        if (i == 1)
            first = p;
    }
    /* growing into new blocks never moved the first allocation */
    CHECK_EQ_UINT(*(uint8_t *)first, 1);
    CHECK(pl_arena_bytes(&a) >= 5000);
    pl_arena_free(&a);
    CHECK_EQ_UINT(pl_arena_bytes(&a), 0);
}

static void test_arena_calloc_memdup_grow(void)
{
    pl_arena a;
    pl_arena_init(&a);
    uint32_t *z = pl_arena_calloc(&a, 100, sizeof(uint32_t));
    REQUIRE(z);
    uint32_t sum = 0;
    for (int i = 0; i < 100; i++)
        sum |= z[i];
    CHECK_EQ_UINT(sum, 0);
    CHECK(pl_arena_calloc(&a, SIZE_MAX / 2, 4) == NULL); /* n * size overflows */

    char *s = pl_arena_memdup(&a, "abc\0def", 7);
    REQUIRE(s);
    CHECK(memcmp(s, "abc\0def", 7) == 0);
    CHECK_EQ_INT(s[7], 0);

    for (int i = 0; i < 100; i++)
        z[i] = (uint32_t)i + 1;
    uint32_t *g = pl_arena_grow(&a, z, 100, 300, sizeof(uint32_t));
    REQUIRE(g);
    CHECK_EQ_UINT(g[0], 1);
    CHECK_EQ_UINT(g[99], 100);
    uint32_t tail = 0;
    for (int i = 100; i < 300; i++)
        tail |= g[i];
    CHECK_EQ_UINT(tail, 0); /* the new tail is zeroed */

    uint32_t *r = pl_arena_grow_raw(&a, g, 300, 600, sizeof(uint32_t));
    REQUIRE(r);
    CHECK_EQ_UINT(r[99], 100); /* old elements copied; new ones left unwritten */
    CHECK_EQ_UINT(r[299], 0);

    uint64_t *items = NULL;
    uint32_t n = 0, cap = 0;
    for (uint32_t i = 0; i < 1000; i++) {
        REQUIRE(pl_arena_reserve(&a, (void **)&items, n, &cap, sizeof(*items), 4) == 0);
        items[n++] = i * 3u;
    }
    CHECK(cap >= 1000);
    CHECK_EQ_UINT(items[0], 0);
    CHECK_EQ_UINT(items[999], 2997);
    pl_arena_free(&a);
}

static void test_arena_limit(void)
{
    pl_arena a;
    pl_arena_init(&a);
    a.limit = 64 * 1024;
    size_t got = 0;
    void *p;
    while ((p = pl_arena_alloc(&a, 1000)) != NULL && got < (1u << 24))
        got += 1000;
    CHECK(p == NULL);         /* refused, not grown without end */
    CHECK(a.over_limit != 0); /* and the reason is the budget, not malloc */
    CHECK(a.allocated <= a.limit);
    CHECK(got > 0);
    pl_arena_free(&a);
}

/* ---- buf --------------------------------------------------------------- */

static void test_buf_growth_and_steal(void)
{
    pl_buf b;
    pl_buf_init(&b);
    for (int i = 0; i < 10000; i++)
        pl_buf_append_byte(&b, (uint8_t)(i & 0xff));
    CHECK(pl_buf_ok(&b));
    CHECK_EQ_UINT(b.len, 10000);
    CHECK_EQ_UINT(b.data[9999], 9999 & 0xff);
    pl_buf_reset(&b);
    CHECK_EQ_UINT(b.len, 0);
    CHECK(b.cap >= 10000); /* memory kept */
    pl_buf_append_str(&b, "x=");
    pl_buf_printf(&b, "%d/%s", 42, "y");
    size_t len = 0;
    uint8_t *data = pl_buf_steal(&b, &len);
    REQUIRE(data);
    CHECK_EQ_BYTES(data, len, "x=42/y", 6);
    free(data);
    CHECK_EQ_UINT(b.len, 0);
    CHECK(b.data == NULL);
    pl_buf_free(&b);
}

static void test_buf_failed_is_sticky(void)
{
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_append_str(&b, "abc");
    CHECK(!pl_buf_reserve(&b, SIZE_MAX - 2)); /* cannot be satisfied */
    CHECK(!pl_buf_ok(&b));
    size_t before = b.len;
    pl_buf_append_str(&b, "more");
    CHECK_EQ_UINT(b.len, before); /* appends after a failure are no-ops */
    pl_buf_reset(&b);
    CHECK(pl_buf_ok(&b));
    pl_buf_free(&b);
}

static void test_buf_json_string(void)
{
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_json_string(&b, "a\"b\\c\n\t\x01\xc3\xa9", 10);
    const char *want = "\"a\\\"b\\\\c\\n\\t\\u0001\xc3\xa9\"";
    CHECK_EQ_BYTES(b.data, b.len, want, strlen(want));
    pl_buf_reset(&b);
    pl_buf_json_string_ex(&b, "\n", 1, true);
    CHECK_EQ_BYTES(b.data, b.len, "\"\\u000a\"", 8);
    pl_buf_reset(&b);
    pl_buf_json_string(&b, NULL, 0);
    CHECK_EQ_BYTES(b.data, b.len, "\"\"", 2);
    pl_buf_free(&b);
}

static void test_array_reserve(void)
{
    int *items = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < 777; i++) {
        REQUIRE(pl_array_reserve((void **)&items, n, &cap, sizeof(*items), 8) == 0);
        items[n++] = i;
    }
    CHECK(cap >= 777);
    CHECK_EQ_INT(items[776], 776);
    free(items);
}

/* ---- base64 -------------------------------------------------------------- */

static void test_base64_round_trip(void)
{
    /* RFC 4648 section 10 vectors */
    static const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < sizeof(plain) / sizeof(*plain); i++) {
        pl_buf b;
        pl_buf_init(&b);
        pl_base64_encode((const uint8_t *)plain[i], strlen(plain[i]), &b, true);
        CHECK_EQ_BYTES(b.data, b.len, enc[i], strlen(enc[i]));
        uint8_t out[16];
        long n = pl_base64_decode(enc[i], strlen(enc[i]), out);
        CHECK_EQ_INT(n, (long)strlen(plain[i]));
        if (n > 0)
            CHECK_EQ_BYTES(out, (size_t)n, plain[i], strlen(plain[i]));
        /* unpadded decodes the same */
        size_t unpadded = strlen(enc[i]);
        while (unpadded && enc[i][unpadded - 1] == '=')
            unpadded--;
        CHECK_EQ_INT(pl_base64_decode(enc[i], unpadded, out), (long)strlen(plain[i]));
        pl_buf_free(&b);
    }
}

static void test_base64_url_alphabet_and_errors(void)
{
    uint8_t bytes[] = {0xfb, 0xff, 0xbf};
    pl_buf b;
    pl_buf_init(&b);
    pl_base64_encode(bytes, 3, &b, false);
    CHECK_EQ_BYTES(b.data, b.len, "+/+/", 4);
    pl_buf_free(&b);
    uint8_t out[8];
    CHECK_EQ_INT(pl_base64_decode("-_-_", 4, out), 3); /* URL-safe alphabet */
    CHECK_EQ_BYTES(out, 3, bytes, 3);

    size_t len = 0, bad = 99;
    CHECK_EQ_INT(pl_base64_decode_into("Zm9v!m9v", 8, out, &len, &bad), -1);
    CHECK_EQ_UINT(bad, 4); /* the first bad character */
    bad = 99;
    CHECK_EQ_INT(pl_base64_decode_into("Zg==Zg==", 8, out, &len, &bad), -1); /* padding inside */
    CHECK(bad < 8);
    CHECK_EQ_INT(pl_base64_decode("Zm9vY", 5, out), -1); /* a lone trailing character */
}

/* ---- status -------------------------------------------------------------- */

static void test_status_mappings(void)
{
    struct {
        pl_status s;
        int http, grpc, retry;
    } want[] = {
        {PL_OK, 200, 0, 0},
        {PL_ERR_INVALID, 400, 3, 0},
        {PL_ERR_TOO_LARGE, 413, 8, 0},
        {PL_ERR_UNSUPPORTED, 415, 12, 0},
        {PL_ERR_REFUSED, 503, 14, 1},
        {PL_ERR_THROTTLED, 429, 8, 1},
        {PL_ERR_UNAUTHENTICATED, 401, 16, 0},
        {PL_ERR_NOT_FOUND, 404, 12, 0},
        {PL_ERR_INTERNAL, 500, 13, 0},
        {PL_ERR_NOMEM, 503, 14, 1},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++) {
        CHECK_EQ_INT(pl_status_http(want[i].s), want[i].http);
        CHECK_EQ_INT(pl_status_grpc(want[i].s), want[i].grpc);
        CHECK_EQ_INT(pl_status_retryable(want[i].s) != 0, want[i].retry);
        CHECK(strcmp(pl_status_name(want[i].s), "unknown") != 0);
    }
    pl_err err;
    CHECK_EQ_INT(pl_errf(&err, PL_ERR_INVALID, "span %u: %s", 3u, "bad"), PL_ERR_INVALID);
    CHECK_EQ_STR(err.msg, "span 3: bad");
    CHECK_EQ_INT(pl_errf(NULL, PL_ERR_REFUSED, "ignored"), PL_ERR_REFUSED);
    /* a long message is cut, never overflowed */
    char big[2000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    pl_errf(&err, PL_ERR_INTERNAL, "%s", big);
    CHECK_EQ_UINT(strlen(err.msg), sizeof(err.msg) - 1);
}

/* ---- stats --------------------------------------------------------------- */

typedef struct {
    pl_stats *stats;
    uint64_t *extra;
} adder_arg;

static void *adder(void *arg)
{
    adder_arg *a = arg;
    for (int i = 0; i < 100000; i++) {
        pl_stats_add(a->stats, PL_SIGNAL_TRACES, PL_STAT_ACCEPTED, 1);
        __atomic_fetch_add(a->extra, 2, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void find_extra(void *arg, const pl_stats_extra *e)
{
    const pl_stats_extra **out = arg;
    if (strcmp(e->name, "test_extra_total") == 0)
        *out = e;
}

static void test_stats_concurrent_and_extras(void)
{
    pl_stats *s = pl_stats_new("exporter/test_core", PL_KIND_EXPORTER);
    REQUIRE(s);
    uint64_t *extra = pl_stats_counter(s, "test_extra_total", "a counter of the test");
    REQUIRE(extra);
    int64_t *gauge = pl_stats_gauge(s, "test_gauge", "a gauge of the test");
    REQUIRE(gauge);
    *gauge = -5;
    /* asking again for the same name gives the same counter */
    CHECK(pl_stats_counter(s, "test_extra_total", "again") == extra);

    adder_arg arg = {s, extra};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        REQUIRE(pthread_create(&t[i], NULL, adder, &arg) == 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ_UINT(pl_stats_get(s, PL_SIGNAL_TRACES, PL_STAT_ACCEPTED), 400000);
    CHECK_EQ_UINT(pl_stats_get(s, PL_SIGNAL_PROFILES, PL_STAT_ACCEPTED), 0);

    const pl_stats_extra *found = NULL;
    pl_stats_each_extra(s, find_extra, &found);
    REQUIRE(found);
    CHECK_EQ_UINT(pl_stats_extra_counter(found), 800000);

    bool listed = false;
    pl_stats_lock();
    for (pl_stats *p = pl_stats_list(); p; p = p->next_registered)
        listed |= p == s;
    pl_stats_unlock();
    CHECK(listed);
    pl_stats_free(s);
    listed = false;
    pl_stats_lock();
    for (pl_stats *p = pl_stats_list(); p; p = p->next_registered)
        listed |= p == s;
    pl_stats_unlock();
    CHECK(!listed);
}

/* ---- reserved metadata keys and the host's claims ------------------------ */

static void test_meta_key_reserved(void)
{
    CHECK(pl_meta_key_reserved(PL_META_BUS_PARTITION, strlen(PL_META_BUS_PARTITION)));
    CHECK(pl_meta_key_reserved(PL_META_BUS_SPANS_LAG, strlen(PL_META_BUS_SPANS_LAG)));
    CHECK(pl_meta_key_reserved("Proflink.Bus.Spans_lag", 22)); /* an HTTP header's case */
    CHECK(pl_meta_key_reserved("proflink.", 9));
    CHECK(!pl_meta_key_reserved("proflink", 8));
    CHECK(!pl_meta_key_reserved("proflink.x", 8)); /* only the first len bytes count */
    CHECK(!pl_meta_key_reserved("x-proflink.bus", 14));
    CHECK(!pl_meta_key_reserved("tenant", 6));
    CHECK(!pl_meta_key_reserved("", 0));
}

static void test_host_claims(void)
{
    char holder[16];
    /* no host, or a host without claims: every claim is granted */
    CHECK(pl_host_claim(NULL, "/q.db", "a", holder, sizeof(holder)));
    pl_host bare = {0};
    CHECK(pl_host_claim(&bare, "/q.db", "a", holder, sizeof(holder)));
    pl_host one = {.claims = pl_claims_new()}, two = {.claims = pl_claims_new()};
    REQUIRE(one.claims && two.claims);
    CHECK(pl_host_claim(&one, "/q.db", "otlp/a", holder, sizeof(holder)));
    CHECK(!pl_host_claim(&one, "/q.db", "otlp/b", holder, sizeof(holder)));
    CHECK_EQ_STR(holder, "otlp/a");
    CHECK(pl_host_claim(&one, "/other.db", "otlp/b", holder, sizeof(holder)));
    CHECK(pl_host_claim(&two, "/q.db", "otlp/b", holder, sizeof(holder))); /* its own list */
    pl_host_unclaim(&one, "/q.db", "otlp/b"); /* not its claim: nothing happens */
    CHECK(!pl_host_claim(&one, "/q.db", "otlp/c", holder, sizeof(holder)));
    pl_host_unclaim(&one, "/q.db", "otlp/a");
    CHECK(pl_host_claim(&one, "/q.db", "otlp/c", holder, sizeof(holder)));
    pl_claims_free(one.claims); /* frees what is still claimed */
    pl_claims_free(two.claims);
}

int main(void)
{
    PL_RUN(test_arena_alignment_and_stability);
    PL_RUN(test_arena_calloc_memdup_grow);
    PL_RUN(test_arena_limit);
    PL_RUN(test_buf_growth_and_steal);
    PL_RUN(test_buf_failed_is_sticky);
    PL_RUN(test_buf_json_string);
    PL_RUN(test_array_reserve);
    PL_RUN(test_base64_round_trip);
    PL_RUN(test_base64_url_alphabet_and_errors);
    PL_RUN(test_status_mappings);
    PL_RUN(test_stats_concurrent_and_extras);
    PL_RUN(test_meta_key_reserved);
    PL_RUN(test_host_claims);
    return pl_test_done();
}
