/*
 * otlp_json.h: OTLP/JSON codec for traces and profiles, following
 * the OTLP JSON mapping and the Collector's leniencies
 * (docs: shared spec otlp-transport.md §6):
 *
 *   - keys in lowerCamelCase; snake_case accepted on input; unknown keys ignored
 *   - traceId / spanId / parentSpanId, profile Link ids and profileId as hex
 *     (exactly 32 / 16 chars, or "" for absent); other bytes as base64
 *     (standard or URL-safe alphabet, padding optional on input)
 *   - 64-bit integers written as decimal strings; numbers or strings accepted
 *   - enums written as integers; names (SPAN_KIND_SERVER, STATUS_CODE_ERROR)
 *     accepted
 *   - doubles as numbers, "NaN" / "Infinity" / "-Infinity" as strings
 *   - zero scalars and empty lists left out; singular sub-messages written
 *     when the model says they were present; ids written whenever they have
 *     a length (all-zero ones too: the model keeps the wire length)
 *
 * Decoding streams over the text (no document tree) and is zero-copy like
 * the protobuf decoder: strings without escapes point into `buf`, so the
 * caller keeps `buf` alive as long as the batch (pl_batch_adopt). Errors are
 * PL_ERR_INVALID with a message that says where
 * ("resourceSpans[0].scopeSpans[0].spans[2].traceId: 30 hex chars, want 32"),
 * PL_ERR_TOO_LARGE when the decoded request would pass its budget (see
 * PL_OTLP_DECODE_BUDGET in otlp_pb.h).
 */
#ifndef PL_OTLP_JSON_H
#define PL_OTLP_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/model.h"
#include "core/status.h"

pl_status pl_otlp_json_decode_traces(pl_batch *b, const uint8_t *buf, size_t len, pl_err *err);
pl_status pl_otlp_json_decode_profiles(pl_batch *b, const uint8_t *buf, size_t len, pl_err *err);
/* Either signal (by b->signal), with an explicit decoded-memory budget. */
pl_status pl_otlp_json_decode_ex(pl_batch *b, const uint8_t *buf, size_t len, size_t budget,
                                 pl_err *err);

/* OTLP/JSON logs or metrics (signals passed through without a model) to
 * the protobuf Export request, appended to out; tables generated from the
 * .proto files drive it (otlp_schema.h). PL_ERR_TOO_LARGE when the output
 * would pass `budget` bytes. */
pl_status pl_otlp_json_transcode(pl_signal signal, const uint8_t *buf, size_t len, size_t budget,
                                 pl_buf *out, pl_err *err);

/* Append one JSON object (no trailing newline); false on OOM. */
bool pl_otlp_json_encode_traces(const pl_traces *t, pl_buf *out);
bool pl_otlp_json_encode_profiles(const pl_profiles *p, pl_buf *out);

/* Standard base64 with padding; appends to out. */
void pl_otlp_base64_encode(pl_buf *out, const uint8_t *data, size_t len);
/* Decodes n base64 characters (standard or URL-safe alphabet, padding
 * already stripped) into out, which holds at least n * 3 / 4 bytes. True
 * with *out_len set, or false with *bad_at set to the first character
 * outside the alphabet. */
bool pl_otlp_base64_decode_into(const char *in, size_t n, uint8_t *out, size_t *out_len,
                                size_t *bad_at);

#endif
