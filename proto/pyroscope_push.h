/*
 * pyroscope_push.h: the Pyroscope push API message (push.v1.PushRequest)
 * in protobuf and proto3 JSON, for the pyroscope receiver (decode) and the
 * pyroscope exporter (encode).
 *
 *   PushRequest      { repeated RawProfileSeries series = 1; }
 *   RawProfileSeries { repeated types.v1.LabelPair labels = 1;
 *                      repeated RawSample samples = 2; annotations = 3 (ignored) }
 *   RawSample        { bytes raw_profile = 1; string ID = 2; }
 *   LabelPair        { string name = 1; string value = 2; }
 *
 * Decoding keeps views into the request body (protobuf) or copies into the
 * request's arena (JSON, where rawProfile is base64). Field numbers come from
 * the nanopb-generated headers (push.pb.h, types.pb.h); the messages are
 * three levels of length-delimited fields, read in place by a few lines of
 * wire reading so raw profiles stay zero-copy views.
 */
#ifndef PL_PYROSCOPE_PUSH_H
#define PL_PYROSCOPE_PUSH_H

#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/model.h"
#include "core/status.h"
#include "core/base64.h"

typedef struct pl_push_label {
    pl_bytes name, value;
} pl_push_label;

typedef struct pl_push_sample {
    pl_bytes raw_profile; /* pprof, usually gzipped */
    pl_bytes id;          /* UUID string; may be empty */
} pl_push_sample;

typedef struct pl_push_series {
    pl_push_label *labels;
    uint32_t n_labels;
    pl_push_sample *samples;
    uint32_t n_samples;
} pl_push_series;

typedef struct pl_push_request {
    pl_push_series *series;
    uint32_t n_series;
    pl_arena arena; /* everything above lives here */
} pl_push_request;

/* Both fill a zeroed `out`; free it with pl_push_request_free even on error. */
pl_status pl_push_decode_proto(const uint8_t *data, size_t len, pl_push_request *out, pl_err *err);
pl_status pl_push_decode_json(const uint8_t *data, size_t len, pl_push_request *out, pl_err *err);
void pl_push_request_free(pl_push_request *req);

/* Appends the protobuf encoding of `req` to `out`. False on OOM. */
bool pl_push_encode_proto(const pl_push_request *req, pl_buf *out);

#endif
