/*
 * pprof_fixture.h: a hand-built pprof for tests (a tiny protobuf writer and
 * one CPU profile with sparse ids, packed and unpacked fields, span links).
 * Header-only: included by test_pprof.c and test_pyroscope_receiver.c.
 */
#ifndef PL_TEST_PPROF_FIXTURE_H
#define PL_TEST_PPROF_FIXTURE_H

#include <stdbool.h>
#include <string.h>

#include "core/buf.h"

#include "pb_writer_fixture.h"

/* Strings of the hand-built profile. */
enum {
    S_EMPTY,
    S_SAMPLES,
    S_COUNT,
    S_CPU,
    S_NS,
    S_MAIN,
    S_WORK,
    S_LEAF,
    S_FILE,
    S_SPAN_ID,
    S_SPAN,
    S_THREAD,
    S_T1,
    S_BYTES,
    S_TRACE_ID,
    S_TRACE,
    S_BIN,
    S_BUILD,
    S_PROFILE_ID,
    S_N
};
static const char *const strs[S_N] = {"",
                                      "samples",
                                      "count",
                                      "cpu",
                                      "nanoseconds",
                                      "main",
                                      "work",
                                      "leaf",
                                      "app.go",
                                      "span_id",
                                      "00f067aa0ba902b7",
                                      "thread",
                                      "t1",
                                      "bytes",
                                      "trace_id",
                                      "4bf92f3577b34da6a3ce929d0e0e4736",
                                      "/bin/app",
                                      "abc123",
                                      "profile_id"};

/* Options that break one thing in the hand-built profile. */
typedef struct breakage {
    bool bad_location_id, bad_function_id, bad_mapping_id, bad_string, first_string_nonempty,
        value_count, duplicate_location_id, bad_label_key;
} breakage;

/* A CPU profile: sample types samples/count and cpu/nanoseconds; functions
 * main(id 11) -> work(id 12) -> leaf(id 13); locations with sparse ids 100
 * (leaf), 7 (work), 42 (main, inside mapping 5). Sample A (packed): leaf,work,
 * main = [3, 30ms] with span_id, trace_id, thread=t1, bytes=512 (numeric).
 * Sample B (unpacked): work,main = [2, 20ms] with profile_id, thread twice.
 * The tables come after the samples to check order independence. */
static inline void build_profile(pl_buf *out, const breakage *br)
{
    pl_buf m, sub;
    pl_buf_init(&m);
    pl_buf_init(&sub);
    breakage none = {0};
    if (!br)
        br = &none;

    /* sample types */
    w_uint(&m, 1, S_SAMPLES), w_uint(&m, 2, S_COUNT), w_msg(out, 1, &m);
    w_uint(&m, 1, S_CPU), w_uint(&m, 2, S_NS), w_msg(out, 1, &m);

    /* sample A: packed */
    uint64_t locs_a[] = {100, 7, br->bad_location_id ? 999 : 42};
    uint64_t vals_a[] = {3, 30000000, 5};
    w_packed(&m, 1, locs_a, 3);
    w_packed(&m, 2, vals_a, br->value_count ? 3 : 2);
    w_uint(&sub, 1, S_SPAN_ID), w_uint(&sub, 2, S_SPAN), w_msg(&m, 3, &sub);
    w_uint(&sub, 1, S_TRACE_ID), w_uint(&sub, 2, S_TRACE), w_msg(&m, 3, &sub);
    w_uint(&sub, 1, br->bad_label_key ? 5000 : S_THREAD), w_uint(&sub, 2, S_T1), w_msg(&m, 3, &sub);
    w_uint(&sub, 1, S_BYTES), w_uint(&sub, 3, 512), w_uint(&sub, 4, S_BYTES), w_msg(&m, 3, &sub);
    w_msg(out, 2, &m);

    /* sample B: unpacked, a profile_id link and a repeated key */
    w_uint(&m, 1, 7), w_uint(&m, 1, 42);
    w_uint(&m, 2, 2), w_uint(&m, 2, 20000000);
    w_uint(&sub, 1, S_PROFILE_ID), w_uint(&sub, 2, S_SPAN), w_msg(&m, 3, &sub);
    w_uint(&sub, 1, S_THREAD), w_uint(&sub, 2, S_T1), w_msg(&m, 3, &sub);
    w_uint(&sub, 1, S_THREAD), w_uint(&sub, 2, S_MAIN), w_msg(&m, 3, &sub);
    w_msg(out, 2, &m);

    /* mapping 5 */
    w_uint(&m, 1, 5), w_uint(&m, 2, 0x400000), w_uint(&m, 3, 0x500000), w_uint(&m, 5, S_BIN),
        w_uint(&m, 6, S_BUILD), w_uint(&m, 7, 1);
    w_msg(out, 3, &m);

    /* locations */
    w_uint(&m, 1, 100), w_uint(&m, 3, 0x1234);
    w_uint(&sub, 1, br->bad_function_id ? 77 : 13), w_uint(&sub, 2, 30), w_msg(&m, 4, &sub);
    w_msg(out, 4, &m);
    w_uint(&m, 1, br->duplicate_location_id ? 100 : 7);
    w_uint(&sub, 1, 12), w_uint(&sub, 2, 20), w_msg(&m, 4, &sub);
    w_msg(out, 4, &m);
    w_uint(&m, 1, 42), w_uint(&m, 2, br->bad_mapping_id ? 6 : 5);
    w_uint(&sub, 1, 11), w_uint(&sub, 2, 10), w_msg(&m, 4, &sub);
    w_msg(out, 4, &m);

    /* functions */
    w_uint(&m, 1, 11), w_uint(&m, 2, S_MAIN), w_uint(&m, 4, S_FILE), w_msg(out, 5, &m);
    w_uint(&m, 1, 12), w_uint(&m, 2, S_WORK), w_uint(&m, 4, S_FILE), w_msg(out, 5, &m);
    w_uint(&m, 1, 13), w_uint(&m, 2, br->bad_string ? 9999 : S_LEAF), w_uint(&m, 4, S_FILE),
        w_msg(out, 5, &m);

    /* string table */
    for (int i = 0; i < S_N; i++) {
        const char *s = (i == 0 && br->first_string_nonempty) ? "x" : strs[i];
        w_bytes(out, 6, s, strlen(s));
    }
    w_uint(out, 9, 1700000000000000000ull);
    w_uint(out, 10, 10000000000ull);
    w_uint(&m, 1, S_CPU), w_uint(&m, 2, S_NS), w_msg(out, 11, &m);
    w_uint(out, 12, 10000000);
    w_uint(out, 14, S_CPU);
    pl_buf_free(&m);
    pl_buf_free(&sub);
}

#endif
