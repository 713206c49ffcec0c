/*
 * ref_enc.h: the hand-written reference encoders (see ref_pb_enc.c) and
 * value writers (ref_value_json.c).
 */
#ifndef PL_TEST_REF_ENC_H
#define PL_TEST_REF_ENC_H

#include <stdbool.h>

#include "core/buf.h"
#include "core/model.h"

bool ref_pb_encode_traces(const pl_traces *t, pl_buf *b);
bool ref_pb_encode_profiles(const pl_profiles *ps, pl_buf *b);
bool ref_json_encode_traces(const pl_traces *t, pl_buf *out);
bool ref_json_encode_profiles(const pl_profiles *p, pl_buf *out);

/* ref_value_json.c */
void ref_store_json(pl_buf *b, const pl_value *v);
void ref_attributes_text(pl_buf *b, const pl_value *v);
void ref_debug_text(pl_buf *b, const pl_value *v, const pl_dictionary *dict);

#endif
