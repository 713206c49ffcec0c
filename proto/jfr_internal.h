/*
 * jfr_internal.h: what the JFR reader (jfr.c: chunks, metadata, constant
 * pools, events) and the profile side (jfr_pprof.c: interned strings,
 * functions, locations, stacks, summed samples, the pprof encoder, the
 * LabelsSnapshot decoder) share. Private to proto/jfr*.c.
 */
#ifndef PL_JFR_INTERNAL_H
#define PL_JFR_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/hash.h"
#include "core/model.h"
#include "proto/jfr.h"

/* ---- the profiles being built (jfr_pprof.c) -------------------------------- */

/* What an event says about where it ran besides its stack: the labels
 * context (LabelsSnapshot context id) and async-profiler's OpenTelemetry
 * span (span id, span name's string id in the LabelsSnapshot); 0 = none. */
typedef struct jfr_corr {
    uint64_t context, span_id, span_name;
} jfr_corr;

typedef struct jfr_sample {
    uint32_t stack;
    jfr_corr corr;
    int64_t v[2];
} jfr_sample;

typedef struct jfr_kind_state {
    jfr_sample *samples;
    uint32_t n, cap;
    pl_htab index; /* (stack, correlation) -> samples position + 1 */
    uint64_t events;
} jfr_kind_state;

typedef struct jfr_out {
    pl_arena arena; /* the dictionary's tables; strings built here */
    /* Strings, functions, locations and stacks shared by every kind of
     * profile of the body, built through the dictionary builder
     * (core/dict.h): a function is its name, a location one line. */
    pl_dictionary dict;
    jfr_kind_state kinds[PL_JFR_KINDS];
} jfr_out;

/* Each returns the index, or -1 on OOM. */
int32_t pl_jfr_out_string(jfr_out *o, pl_bytes s);
int32_t pl_jfr_out_function(jfr_out *o, uint32_t name_string);
int32_t pl_jfr_out_location(jfr_out *o, uint32_t function, int32_t line);
int32_t pl_jfr_out_stack(jfr_out *o, const uint32_t *locs, uint32_t n);
/* Adds values to the (stack, correlation) sample of `kind`; 1 if a new
 * sample was made, 0 if summed into one, -1 on OOM. */
int pl_jfr_out_sample(jfr_out *o, pl_jfr_kind kind, uint32_t stack, const jfr_corr *corr,
                      int64_t v0, int64_t v1);
/* Memory the tables hold (for the budget). */
size_t pl_jfr_out_memory(const jfr_out *o);
void pl_jfr_out_init(jfr_out *o);
void pl_jfr_out_free(jfr_out *o);

typedef struct jfr_encode_info {
    int64_t period; /* CPU / wall sampling period, ns */
    uint64_t time_unix_nano, duration_nano;
    const pl_jfr_labels *labels;
} jfr_encode_info;

/* Appends the pprof of `kind` to `out`. -1 on OOM. */
int pl_jfr_out_encode(const jfr_out *o, pl_jfr_kind kind, const jfr_encode_info *info, pl_buf *out);
/* Pyroscope's __name__ of a kind. */
const char *pl_jfr_kind_name(pl_jfr_kind kind);

#endif
