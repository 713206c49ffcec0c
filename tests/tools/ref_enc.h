/*
 * ref_enc.h: the hand-written reference encoders (see ref_pb_enc.c).
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

#endif
