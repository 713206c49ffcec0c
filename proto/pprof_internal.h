/*
 * pprof_internal.h: what the pprof files share (private to proto/):
 * pprof_decode.c (the wire reader, id maps, decoding into a builder, the
 * per-request budget), pprof_convert.c (the builder: the batch it fills
 * through the dictionary builder of core/dict.h; gzip; profile names) and pprof_encode.c (the model
 * to pprof, and the writer for named stacks). See pprof.h for the mapping rules.
 */
#ifndef PL_PPROF_INTERNAL_H
#define PL_PPROF_INTERNAL_H

#include "pprof.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* ---- hashing ----------------------------------------------------------- */

/* Every index below is keyed by ids and bytes the client chose, so all of
 * them hash under the per-process key (core/hash.h): a pprof cannot be
 * crafted offline whose ids or strings all land in one probe chain. The
 * seed separates the tables' hash families. */
static inline uint64_t hash_bytes(const void *data, size_t len, uint64_t seed)
{
    return pl_hash_bytes_with(seed, data, len);
}

typedef struct raw_label {
    int64_t key, str, num, num_unit;
} raw_label;

struct pl_pprof_builder {
    pl_batch *batch;
    size_t samples;
    /* The request's budget (pl_pprof_builder_set_budget); 0 = none. */
    size_t budget_bytes, budget_objects;
    size_t objects; /* objects decoded so far, against budget_objects */
    /* The profiles (one per column) of the pprof added last. */
    pl_profile *last_profiles;
    uint32_t n_last;
    bool bad_strings; /* the last refusal was for the string table */
    /* scratch, grown as needed, reused for every sample */
    int32_t *scratch_locs;
    size_t cap_locs;
    int64_t *scratch_vals;
    size_t cap_vals;
    raw_label *scratch_labels;
    size_t cap_labels;
    int32_t *scratch_attrs;
    size_t cap_attrs;
};

static inline pl_dictionary *bdict(pl_pprof_builder *b)
{
    return &b->batch->data.profiles.dict;
}

/* The batch arena, where the builder's dictionary grows. */
#define BARENA(b) (&(b)->batch->arena)

/* ---- pprof_convert.c ---------------------------------------------------- */

/* Adds the attribute PL_PPROF_NAME_ATTRIBUTE = name (copied into the
 * batch) to each of the n profiles. -1 on OOM. */
int pl_pprof_name_profiles(pl_pprof_builder *b, pl_profile *profiles, uint32_t n, pl_bytes name);

/* Grows a malloc'd scratch array to hold `need` elements. -1 on OOM. */
int pl_pprof_grow_scratch(void **p, size_t *cap, size_t need, size_t elem);

#endif
