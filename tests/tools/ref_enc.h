/*
 * ref_enc.h: the hand-written reference encoders (see ref_pb_enc.c) and
 * value writers (ref_value_json.c).
 */
#ifndef PL_TEST_REF_ENC_H
#define PL_TEST_REF_ENC_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/model.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"

bool ref_pb_encode_traces(const pl_traces *t, pl_buf *b);
bool ref_pb_encode_profiles(const pl_profiles *ps, pl_buf *b);
bool ref_json_encode_traces(const pl_traces *t, pl_buf *out);
bool ref_json_encode_profiles(const pl_profiles *p, pl_buf *out);

/* Aborts unless the library's encoders write exactly what the references
 * write for b (for the fuzz targets). */
static inline void ref_check_encoders(const pl_batch *b)
{
    bool prof = b->signal == PL_SIGNAL_PROFILES;
    pl_buf x[4];
    for (int i = 0; i < 4; i++)
        pl_buf_init(&x[i]);
    bool ok = prof ? pl_otlp_encode_profiles(&b->data.profiles, &x[0]) &&
                         ref_pb_encode_profiles(&b->data.profiles, &x[1]) &&
                         pl_otlp_json_encode_profiles(&b->data.profiles, &x[2]) &&
                         ref_json_encode_profiles(&b->data.profiles, &x[3])
                   : pl_otlp_encode_traces(&b->data.traces, &x[0]) &&
                         ref_pb_encode_traces(&b->data.traces, &x[1]) &&
                         pl_otlp_json_encode_traces(&b->data.traces, &x[2]) &&
                         ref_json_encode_traces(&b->data.traces, &x[3]);
    if (ok && (x[0].len != x[1].len || x[2].len != x[3].len ||
               (x[0].len && memcmp(x[0].data, x[1].data, x[0].len) != 0) ||
               (x[2].len && memcmp(x[2].data, x[3].data, x[2].len) != 0)))
        abort();
    for (int i = 0; i < 4; i++)
        pl_buf_free(&x[i]);
}

/* ref_value_json.c */
void ref_store_json(pl_buf *b, const pl_value *v);
void ref_attributes_text(pl_buf *b, const pl_value *v);
void ref_debug_text(pl_buf *b, const pl_value *v, const pl_dictionary *dict);

#endif
