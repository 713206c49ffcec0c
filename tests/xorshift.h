/*
 * xorshift.h: the tests' and benchmarks' pseudo-random numbers (Marsaglia's
 * xorshift64, 13/7/17): fast, and the same sequence on every run for a
 * given seed, so a failing random test fails again.
 */
#ifndef PL_TESTS_XORSHIFT_H
#define PL_TESTS_XORSHIFT_H

#include <stdint.h>

/* Advances *state (never 0) and returns it. */
static inline uint64_t xorshift64(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

#endif
