/*
 * testlib.h: a tiny assertion library for proflink's C tests.
 *
 * A test file defines functions `static void test_xxx(void)` and runs them
 * from main() with PL_RUN(test_xxx). Each prints a TAP-like line, "ok N name"
 * or "not ok N name", and main() ends with `return pl_test_done();`, which
 * is non-zero when any check failed. A failing CHECK prints the file, line
 * and expression and lets the test continue (so one run reports every
 * failure); use REQUIRE to stop the current test instead (e.g. before
 * dereferencing a pointer that must not be NULL).
 */
#ifndef PL_TESTLIB_H
#define PL_TESTLIB_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int pl_test_failures;      /* checks failed in the whole run */
static int pl_test_case_failures; /* checks failed in the current test */
static int pl_test_count;         /* tests run */
static int pl_test_failed_tests;  /* tests with at least one failure */

#define PL_FAIL_(...)                                                                              \
    do {                                                                                           \
        fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);                                          \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        pl_test_failures++;                                                                        \
        pl_test_case_failures++;                                                                   \
    } while (0)

/* Checks a condition; on failure reports it and continues. */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            PL_FAIL_("CHECK(%s) failed", #cond);                                                   \
    } while (0)

/* Checks a condition; on failure reports it and returns from the test. */
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            PL_FAIL_("REQUIRE(%s) failed", #cond);                                                 \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long pl_a_ = (long long)(a), pl_b_ = (long long)(b);                                  \
        if (pl_a_ != pl_b_)                                                                        \
            PL_FAIL_("CHECK_EQ_INT(%s, %s): %lld != %lld", #a, #b, pl_a_, pl_b_);                  \
    } while (0)

#define CHECK_EQ_UINT(a, b)                                                                        \
    do {                                                                                           \
        unsigned long long pl_a_ = (unsigned long long)(a), pl_b_ = (unsigned long long)(b);       \
        if (pl_a_ != pl_b_)                                                                        \
            PL_FAIL_("CHECK_EQ_UINT(%s, %s): %llu != %llu", #a, #b, pl_a_, pl_b_);                 \
    } while (0)

/* NUL-terminated strings; NULL compares equal only to NULL. */
#define CHECK_EQ_STR(a, b)                                                                         \
    do {                                                                                           \
        const char *pl_a_ = (a), *pl_b_ = (b);                                                     \
        if (!(pl_a_ == pl_b_ || (pl_a_ && pl_b_ && strcmp(pl_a_, pl_b_) == 0)))                    \
            PL_FAIL_("CHECK_EQ_STR(%s, %s): \"%s\" != \"%s\"", #a, #b, pl_a_ ? pl_a_ : "(null)",   \
                     pl_b_ ? pl_b_ : "(null)");                                                    \
    } while (0)

/* Byte ranges (pointer + length each). */
#define CHECK_EQ_BYTES(pa, la, pb, lb)                                                             \
    do {                                                                                           \
        size_t pl_la_ = (size_t)(la), pl_lb_ = (size_t)(lb);                                       \
        if (pl_la_ != pl_lb_ || (pl_la_ && memcmp((pa), (pb), pl_la_) != 0)) {                     \
            PL_FAIL_("CHECK_EQ_BYTES(%s, %s): lengths %zu / %zu, first difference at %zu", #pa,    \
                     #pb, pl_la_, pl_lb_, pl_test_first_diff_((pa), pl_la_, (pb), pl_lb_));        \
        }                                                                                          \
    } while (0)

/* A pl_bytes against a C string (needs core/model.h). */
#define CHECK_BYTES_STR(bytes, cstr)                                                               \
    do {                                                                                           \
        const char *pl_s_ = (cstr);                                                                \
        if ((bytes).len != strlen(pl_s_) ||                                                        \
            ((bytes).len && memcmp((bytes).ptr, pl_s_, (bytes).len)))                              \
            PL_FAIL_("CHECK_BYTES_STR(%s, %s): \"%.*s\" != \"%s\"", #bytes, #cstr,                 \
                     (int)(bytes).len, (const char *)(bytes).ptr, pl_s_);                          \
    } while (0)

static inline size_t pl_test_first_diff_(const void *a, size_t la, const void *b, size_t lb)
{
    const unsigned char *x = a, *y = b;
    size_t n = la < lb ? la : lb, i = 0;
    while (i < n && x[i] == y[i])
        i++;
    return i;
}

/* Runs one test function and prints its TAP-like result line. */
#define PL_RUN(fn)                                                                                 \
    do {                                                                                           \
        pl_test_case_failures = 0;                                                                 \
        pl_test_count++;                                                                           \
        fn();                                                                                      \
        if (pl_test_case_failures) {                                                               \
            pl_test_failed_tests++;                                                                \
            printf("not ok %d %s\n", pl_test_count, #fn);                                          \
        } else {                                                                                   \
            printf("ok %d %s\n", pl_test_count, #fn);                                              \
        }                                                                                          \
        fflush(stdout);                                                                            \
    } while (0)

/* Prints the plan line and returns the process exit status. */
static inline int pl_test_done(void)
{
    printf("1..%d\n", pl_test_count);
    if (pl_test_failed_tests)
        fprintf(stderr, "%d of %d tests failed (%d checks)\n", pl_test_failed_tests, pl_test_count,
                pl_test_failures);
    return pl_test_failures ? 1 : 0;
}

#endif
