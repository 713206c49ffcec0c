/*
 * pprof_delta.h: cumulative pprof profiles turned into per-interval deltas,
 * for the pprof_scrape receiver (as Grafana Alloy's pyroscope.scrape does).
 *
 * Go's allocs and heap profiles (their alloc_* columns), block and mutex
 * profiles count since the process started: forwarding them as they are
 * repeats the whole history in every scrape. One pl_pprof_delta per
 * (target, profile type) remembers the previous scrape's totals per sample
 * identity (the stack's functions, lines and addresses, and the sample's
 * labels) and rewrites each new scrape's cumulative columns into what was
 * added since: samples with nothing new are left out. The first scrape only
 * primes (its cumulative columns are not passed on), and so does a scrape
 * whose totals went down (the process restarted). Identities are keyed-hash
 * fingerprints (128 bits, core/hash.h) of data the target chose.
 */
#ifndef PL_PPROF_DELTA_H
#define PL_PPROF_DELTA_H

#include <stdbool.h>
#include <stdint.h>

#include "core/model.h"
#include "core/status.h"

typedef enum pl_delta_mode {
    PL_DELTA_HEAP,   /* heap: alloc_* become deltas, inuse_* pass as they are */
    PL_DELTA_ALLOCS, /* allocs when heap is scraped too: alloc_* become deltas, inuse_* are
                        left out (heap has them); allocs alone is PL_DELTA_HEAP */
    PL_DELTA_ALL,    /* block, mutex: every column becomes a delta */
    PL_DELTA_INUSE,  /* heap when allocs is scraped too: inuse_* only (allocs has alloc_*) */
} pl_delta_mode;

typedef struct pl_pprof_delta pl_pprof_delta;

pl_pprof_delta *pl_pprof_delta_new(pl_delta_mode mode);
void pl_pprof_delta_free(pl_pprof_delta *d);

/* Rewrites `batch` (one decoded pprof: one resource, one scope, one
 * profile per column) in place, at time `now_ns` (the delta's duration is
 * the time since the previous scrape). Profiles left with no samples are
 * removed; *empty is set when none remain (the caller then drops the batch).
 * PL_ERR_INVALID if the batch is not one pprof's shape, PL_ERR_NOMEM. */
pl_status pl_pprof_delta_apply(pl_pprof_delta *d, pl_batch *batch, uint64_t now_ns, bool *empty,
                               pl_err *err);

/* Identities remembered (for tests). */
size_t pl_pprof_delta_size(const pl_pprof_delta *d);

#endif
