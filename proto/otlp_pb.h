/*
 * otlp_pb.h: OTLP protobuf codec between the wire and core/model.h, for
 * traces and profiles; framing checks and counters for pass-through logs and
 * metrics; encoders for Export*ServiceResponse and google.rpc.Status.
 *
 * Decoding is zero-copy: strings and bytes in the decoded model point into
 * `buf`, so the caller keeps `buf` alive as long as the batch (normally by
 * handing it to pl_batch_adopt). Every other object comes from the batch
 * arena. Decoders validate like the OpenTelemetry Collector: ids of a wrong
 * length, wrong wire types, truncation, invalid UTF-8 in string fields,
 * nesting deeper than PL_OTLP_MAX_DEPTH and, for profiles, indices out of
 * range of the request dictionary are PL_ERR_INVALID, with a message that
 * names the place ("resource_spans[0].scope_spans[1].spans[7].trace_id:
 * length 5, want 16").
 *
 * Encoders write canonical proto3: fields in field-number order, zero scalars
 * left out, sub-messages written when the model says they were present
 * (has_resource, has_scope, has_status, ...). Decoding canonical input and
 * encoding it again gives the same bytes, with one exception: a KeyValue
 * whose `value` was absent is written with an empty `value` (as the Collector
 * does), while KeyValueAndUnit.value is left out when empty.
 */
#ifndef PL_OTLP_PB_H
#define PL_OTLP_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/model.h"
#include "core/status.h"

/* AnyValue / KeyValueList / ArrayValue nesting limit. */
#define PL_OTLP_MAX_DEPTH 64

/* Decoded-memory budget of one request: every decoded object is charged its
 * struct size plus a fixed overhead (so a million empty spans cost what they
 * would take), and bytes copied into the arena count too. Over it, decoding
 * stops with PL_ERR_TOO_LARGE before the memory is spent. The default keeps
 * one request's model under 40 MiB whatever its body compresses to, so a
 * request at the default 20 MiB body limit stays within 64 MiB. */
#define PL_OTLP_DECODE_BUDGET ((size_t)40 << 20)

/* Decode an ExportTraceServiceRequest (or TracesData, same layout) into
 * b->data.traces. `b` must be a traces batch; on error its content is
 * unspecified (free the batch). */
pl_status pl_otlp_decode_traces(pl_batch *b, const uint8_t *buf, size_t len, pl_err *err);
/* Decode an ExportProfilesServiceRequest (or ProfilesData) into
 * b->data.profiles, then check every dictionary index. */
pl_status pl_otlp_decode_profiles(pl_batch *b, const uint8_t *buf, size_t len, pl_err *err);
/* Either signal (by b->signal) with an explicit decoded-memory budget; the
 * two above use PL_OTLP_DECODE_BUDGET. */
pl_status pl_otlp_decode_ex(pl_batch *b, const uint8_t *buf, size_t len, size_t budget,
                            pl_err *err);

/* Append the encoded request to `out`; false on OOM. */
bool pl_otlp_encode_traces(const pl_traces *t, pl_buf *out);
bool pl_otlp_encode_profiles(const pl_profiles *p, pl_buf *out);

/* Checks that a profiles model only uses indices inside its dictionary
 * (what the decoders check after decoding). For processors' tests and the
 * JSON decoder. */
pl_status pl_otlp_validate_profiles(const pl_profiles *p, pl_err *err);

/* Pass-through logs and metrics: walks the request down to the log records /
 * metrics (checking the framing of every level on the way) and counts log
 * records, resp. data points (over gauge, sum, histogram, exponential
 * histogram and summary). PL_ERR_INVALID on bad framing. `count` may be NULL. */
pl_status pl_otlp_count_logs(const uint8_t *buf, size_t len, size_t *count, pl_err *err);
pl_status pl_otlp_count_metrics(const uint8_t *buf, size_t len, size_t *count, pl_err *err);

/* Export*ServiceResponse. With rejected == 0 and no message (NULL or ""),
 * writes an empty partial_success (`0A 00`, resp. {"partialSuccess":{}}).
 * Otherwise partial_success carries rejected_<items> and error_message. The
 * JSON key for the count depends on the signal (rejectedSpans,
 * rejectedProfiles, rejectedLogRecords, rejectedDataPoints). */
bool pl_otlp_encode_export_response(pl_buf *out, int64_t rejected, const char *message);
bool pl_otlp_encode_export_response_json(pl_buf *out, pl_signal signal, int64_t rejected,
                                         const char *message);
/* Reads partial_success from a response (protobuf); absent fields read as
 * 0 / empty. `message` points into buf. */
pl_status pl_otlp_decode_export_response(const uint8_t *buf, size_t len, int64_t *rejected,
                                         pl_bytes *message, pl_err *err);

/* google.rpc.Status {code, message, details}. When retry_delay_ns >= 0 a
 * google.rpc.RetryInfo detail (packed in google.protobuf.Any, type URL
 * type.googleapis.com/google.rpc.RetryInfo) is added. JSON form:
 * {"code":8,"message":"...","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo",
 * "retryDelay":"1s"}]}. */
bool pl_rpc_status_encode(pl_buf *out, int32_t code, const char *message, int64_t retry_delay_ns);
bool pl_rpc_status_encode_json(pl_buf *out, int32_t code, const char *message,
                               int64_t retry_delay_ns);
/* Parses a google.rpc.Status; *retry_delay_ns = -1 when there is no
 * RetryInfo detail. `message` points into buf. Any pointer may be NULL. */
pl_status pl_rpc_status_decode(const uint8_t *buf, size_t len, int32_t *code, pl_bytes *message,
                               int64_t *retry_delay_ns, pl_err *err);

/* UTF-8 validity (no overlongs, no surrogates, <= U+10FFFF). */
bool pl_utf8_valid(const uint8_t *s, size_t len);

#endif
