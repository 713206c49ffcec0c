/*
 * test_pprof_delta.c: cumulative pprof columns turned into deltas between
 * scrapes (receivers/pprof_delta.c): priming, per-identity differences,
 * samples with nothing new left out, a restart primes again, labels are
 * part of the identity, duplicates summed, the heap/allocs/inuse modes.
 */
#include "proto/pprof.h"
#include "receivers/pprof_delta.h"
#include "pb_writer_fixture.h"
#include "testlib.h"

enum {
    X_EMPTY,
    X_AO,
    X_AS,
    X_IO,
    X_IS,
    X_COUNT,
    X_BYTES,
    X_A,
    X_B,
    X_MAIN,
    X_THREAD,
    X_T1,
    X_T2,
    X_CONT,
    X_DELAY,
    X_NS,
    X_N
};
static const char *const xs[X_N] = {
    "",      "alloc_objects", "alloc_space", "inuse_objects", "inuse_space", "count",
    "bytes", "allocA",        "allocB",      "main",          "thread",      "t1",
    "t2",    "contentions",   "delay",       "nanoseconds"};

typedef struct xsample {
    int leaf;  /* 1: allocA, 2: allocB */
    int label; /* 0: none, 1: thread=t1, 2: thread=t2 */
    int64_t v[4];
} xsample;

/* A heap-shaped pprof (4 columns) or, with mutex, contentions/delay. */
static pl_batch *make(bool mutex, const xsample *ss, int n)
{
    pl_buf b, m, sub;
    pl_buf_init(&b);
    pl_buf_init(&m);
    pl_buf_init(&sub);
    static const int heap_cols[][2] = {
        {X_AO, X_COUNT}, {X_AS, X_BYTES}, {X_IO, X_COUNT}, {X_IS, X_BYTES}};
    static const int mutex_cols[][2] = {{X_CONT, X_COUNT}, {X_DELAY, X_NS}};
    int cols = mutex ? 2 : 4;
    for (int c = 0; c < cols; c++) {
        w_uint(&m, 1, mutex ? mutex_cols[c][0] : heap_cols[c][0]);
        w_uint(&m, 2, mutex ? mutex_cols[c][1] : heap_cols[c][1]);
        w_msg(&b, 1, &m);
    }
    for (int i = 0; i < n; i++) {
        w_varint(&sub, (uint64_t)ss[i].leaf), w_varint(&sub, 3);
        w_msg(&m, 1, &sub);
        for (int c = 0; c < cols; c++)
            w_varint(&sub, (uint64_t)ss[i].v[c]);
        w_msg(&m, 2, &sub);
        if (ss[i].label) {
            w_uint(&sub, 1, X_THREAD), w_uint(&sub, 2, ss[i].label == 1 ? X_T1 : X_T2);
            w_msg(&m, 3, &sub);
        }
        w_msg(&b, 2, &m);
    }
    for (int l = 1; l <= 3; l++) {
        w_uint(&m, 1, (uint64_t)l);
        w_uint(&sub, 1, (uint64_t)l), w_uint(&sub, 2, (uint64_t)(10 * l));
        w_msg(&m, 4, &sub);
        w_msg(&b, 4, &m);
        w_uint(&m, 1, (uint64_t)l), w_uint(&m, 2, l == 1 ? X_A : l == 2 ? X_B : X_MAIN);
        w_msg(&b, 5, &m);
    }
    for (int s = 0; s < X_N; s++)
        w_bytes(&b, 6, xs[s], strlen(xs[s]));
    pl_err err = {{0}};
    pl_batch *batch = pl_pprof_decode(b.data, b.len, NULL, &err);
    if (!batch)
        fprintf(stderr, "  %s\n", err.msg);
    pl_buf_free(&b);
    pl_buf_free(&m);
    pl_buf_free(&sub);
    return batch;
}

/* Column `type`'s value for a leaf ("allocA") and label (NULL: any); -1 if
 * the column is absent. */
static int64_t value(const pl_batch *b, const char *type, const char *leaf)
{
    const pl_profiles *ps = &b->data.profiles;
    const pl_scope_profiles *sc = &ps->resources[0].scopes[0];
    for (uint32_t c = 0; c < sc->n_profiles; c++) {
        const pl_profile *p = &sc->profiles[c];
        if (!pl_bytes_eq_cstr(pl_dict_string(&ps->dict, p->sample_type.type_strindex), type))
            continue;
        int64_t sum = 0;
        for (uint32_t i = 0; i < p->n_samples; i++) {
            const pl_stack *st = &ps->dict.stacks[p->samples[i].stack_index];
            const pl_location *loc = &ps->dict.locations[st->location_indices[0]];
            pl_bytes fn = pl_dict_string(
                &ps->dict, ps->dict.functions[loc->lines[0].function_index].name_strindex);
            if (pl_bytes_eq_cstr(fn, leaf))
                sum += p->samples[i].values[0];
        }
        return sum;
    }
    return -1;
}

static uint32_t columns(const pl_batch *b)
{
    return b->data.profiles.resources[0].scopes[0].n_profiles;
}

static void test_heap_deltas(void)
{
    pl_pprof_delta *d = pl_pprof_delta_new(PL_DELTA_HEAP);
    pl_err err = {{0}};
    bool empty;
    xsample s1[] = {{1, 0, {10, 1000, 2, 200}}, {2, 0, {5, 500, 1, 100}}};
    pl_batch *b = make(false, s1, 2);
    REQUIRE(b);
    REQUIRE(pl_pprof_delta_apply(d, b, 1000, &empty, &err) == PL_OK);
    /* primed: alloc_* left out, inuse_* as they are */
    CHECK(!empty);
    CHECK_EQ_UINT(columns(b), 2);
    CHECK_EQ_INT(value(b, "alloc_objects", "allocA"), -1);
    CHECK_EQ_INT(value(b, "inuse_space", "allocA"), 200);
    CHECK_EQ_UINT(pl_pprof_delta_size(d), 2);
    pl_batch_free(b);

    /* A grew by 7 objects / 700 bytes; B did not: only A's delta */
    xsample s2[] = {{1, 0, {17, 1700, 3, 300}}, {2, 0, {5, 500, 0, 0}}};
    b = make(false, s2, 2);
    REQUIRE(pl_pprof_delta_apply(d, b, 3000, &empty, &err) == PL_OK);
    CHECK_EQ_INT(value(b, "alloc_objects", "allocA"), 7);
    CHECK_EQ_INT(value(b, "alloc_space", "allocA"), 700);
    CHECK_EQ_INT(value(b, "alloc_objects", "allocB"), 0);
    CHECK_EQ_UINT(b->data.profiles.resources[0].scopes[0].profiles[0].n_samples, 1);
    CHECK_EQ_INT(value(b, "inuse_space", "allocA"), 300);
    /* the delta covers the time since the previous scrape */
    CHECK_EQ_UINT(b->data.profiles.resources[0].scopes[0].profiles[0].time_unix_nano, 1000);
    CHECK_EQ_UINT(b->data.profiles.resources[0].scopes[0].profiles[0].duration_nano, 2000);
    pl_batch_free(b);

    /* a new identity (A with a label) counts from zero; the same stack
     * twice is summed into one */
    xsample s3[] = {{1, 0, {17, 1700, 3, 300}},
                    {2, 0, {6, 600, 0, 0}},
                    {2, 0, {1, 100, 0, 0}},
                    {1, 1, {4, 400, 0, 0}}};
    b = make(false, s3, 4);
    REQUIRE(pl_pprof_delta_apply(d, b, 4000, &empty, &err) == PL_OK);
    CHECK_EQ_INT(value(b, "alloc_objects", "allocA"), 4);
    CHECK_EQ_INT(value(b, "alloc_objects", "allocB"), 2);
    pl_batch_free(b);

    /* a total went down: the target restarted; prime again */
    xsample s4[] = {{1, 0, {3, 300, 3, 300}}};
    b = make(false, s4, 1);
    REQUIRE(pl_pprof_delta_apply(d, b, 5000, &empty, &err) == PL_OK);
    CHECK_EQ_INT(value(b, "alloc_objects", "allocA"), -1);
    CHECK_EQ_INT(value(b, "inuse_objects", "allocA"), 3);
    pl_batch_free(b);
    xsample s5[] = {{1, 0, {5, 500, 3, 300}}};
    b = make(false, s5, 1);
    REQUIRE(pl_pprof_delta_apply(d, b, 6000, &empty, &err) == PL_OK);
    CHECK_EQ_INT(value(b, "alloc_objects", "allocA"), 2);
    pl_batch_free(b);
    pl_pprof_delta_free(d);
}

static void test_mutex_and_modes(void)
{
    pl_err err = {{0}};
    bool empty;
    pl_pprof_delta *d = pl_pprof_delta_new(PL_DELTA_ALL);
    xsample m1[] = {{1, 2, {3, 3000}}};
    pl_batch *b = make(true, m1, 1);
    REQUIRE(b);
    REQUIRE(pl_pprof_delta_apply(d, b, 1, &empty, &err) == PL_OK);
    CHECK(empty); /* every column is cumulative: nothing to send the first time */
    pl_batch_free(b);
    xsample m2[] = {{1, 2, {5, 9000}}};
    b = make(true, m2, 1);
    REQUIRE(pl_pprof_delta_apply(d, b, 2, &empty, &err) == PL_OK);
    CHECK(!empty);
    CHECK_EQ_INT(value(b, "contentions", "allocA"), 2);
    CHECK_EQ_INT(value(b, "delay", "allocA"), 6000);
    pl_batch_free(b);
    b = make(true, m2, 1);
    REQUIRE(pl_pprof_delta_apply(d, b, 3, &empty, &err) == PL_OK);
    CHECK(empty); /* nothing new */
    pl_batch_free(b);
    pl_pprof_delta_free(d);

    /* allocs: alloc_* as deltas, inuse_* left to heap */
    d = pl_pprof_delta_new(PL_DELTA_ALLOCS);
    xsample a1[] = {{1, 0, {1, 10, 1, 10}}}, a2[] = {{1, 0, {4, 40, 1, 10}}};
    b = make(false, a1, 1);
    REQUIRE(pl_pprof_delta_apply(d, b, 1, &empty, &err) == PL_OK);
    CHECK(empty);
    pl_batch_free(b);
    b = make(false, a2, 1);
    REQUIRE(pl_pprof_delta_apply(d, b, 2, &empty, &err) == PL_OK);
    CHECK_EQ_UINT(columns(b), 2);
    CHECK_EQ_INT(value(b, "alloc_objects", "allocA"), 3);
    CHECK_EQ_INT(value(b, "inuse_objects", "allocA"), -1);
    pl_batch_free(b);
    pl_pprof_delta_free(d);

    /* heap next to allocs: inuse_* only, every time */
    d = pl_pprof_delta_new(PL_DELTA_INUSE);
    for (int i = 0; i < 2; i++) {
        b = make(false, i ? a2 : a1, 1);
        REQUIRE(pl_pprof_delta_apply(d, b, 1, &empty, &err) == PL_OK);
        CHECK_EQ_UINT(columns(b), 2);
        CHECK_EQ_INT(value(b, "alloc_objects", "allocA"), -1);
        CHECK_EQ_INT(value(b, "inuse_space", "allocA"), 10);
        pl_batch_free(b);
    }
    pl_pprof_delta_free(d);
}

int main(void)
{
    PL_RUN(test_heap_deltas);
    PL_RUN(test_mutex_and_modes);
    return pl_test_done();
}
