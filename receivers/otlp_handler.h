/*
 * otlp_handler.h: answering one OTLP request (gRPC or HTTP), for every
 * receiver that takes OTLP on its listener: the `otlp` receiver, and the
 * `pyroscope` receiver, which takes OTLP profiles on the Pyroscope port as a
 * Pyroscope server does.
 *
 * The caller owns the listener and the routing; these functions do the
 * rest (content type and encoding checks, decompression, size limits,
 * decoding, X-Scope-OrgID / include_metadata, handing the batch on,
 * counting, and the answer in the protocol's own format) and always answer.
 */
#ifndef PL_OTLP_HANDLER_H
#define PL_OTLP_HANDLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/component.h"
#include "net/http_server.h"

/* What a receiver serves OTLP with. Filled by the receiver once (create);
 * read-only while requests are handled. */
typedef struct pl_otlp_handler {
    const char *id;                     /* log source: the receiver's id */
    pl_stats *stats;                    /* accepted / refused counts; may be NULL */
    pl_consumer *next[PL_SIGNAL_COUNT]; /* NULL: signal not served (404 / UNIMPLEMENTED) */
    size_t max_recv_msg_size;           /* gRPC: message size limit after decompression */
    size_t max_request_body_size;       /* HTTP: body limit (the listener's max_body_size) */
    size_t max_decompressed_size;       /* HTTP: after decompression; 0: max_request_body_size */
    size_t max_decoded_memory;          /* decoded model of one request; 0: PL_OTLP_DECODE_BUDGET */
    bool grpc_metadata, http_metadata;  /* include_metadata: attach every header */
    uint64_t *refused_requests;         /* refused before decoding (memory short); may be NULL */
    /* [PL_SIGNAL_COUNT]: until when (pl_time_mono_ns) requests of a signal
     * are refused before decoding, because the pipeline refused the last
     * one (PL_OTLP_PUSHBACK_NS); shared by the receiver's listeners and
     * written from any worker. NULL: always decode. */
    uint64_t *pushback_until;
    const pl_host *host; /* its memory state (may be NULL) */
} pl_otlp_handler;

/* After the pipeline refused a request (503 / UNAVAILABLE), the requests of
 * that signal arriving within this time are refused before they are
 * decompressed or decoded: the pipeline would most likely refuse them too,
 * and overload should cost the receiver little CPU. The first request after
 * it probes the pipeline again. Far below the one second clients are told
 * to wait, so a pipeline that recovers loses at most this much intake; at
 * thousands of requests a second it still spares nearly every decoding. */
#define PL_OTLP_PUSHBACK_NS (25ull * 1000 * 1000)

/* The OTLP gRPC method paths: "/opentelemetry.proto.collector.<signal>...
 * Service/Export" (and spellings seen in the wild). False if `path` is not one. */
bool pl_otlp_grpc_signal(const char *path, pl_signal *signal);

/* Answers an OTLP/gRPC call (any path: unknown ones get UNIMPLEMENTED, a
 * non-gRPC content type 415). Listener: h2c, deliver_too_large, and a
 * max_body_size a little over max_recv_msg_size (see pl_otlp_grpc_body_limit). */
void pl_otlp_handle_grpc(const pl_otlp_handler *h, pl_http_request *req, pl_http_response *res);

/* Answers an OTLP/HTTP request for `signal` (-1: the path is not an OTLP
 * one, answered 404). Listener: deliver_too_large with max_body_size =
 * max_request_body_size. */
void pl_otlp_handle_http(const pl_otlp_handler *h, int signal, pl_http_request *req,
                         pl_http_response *res);

/* Raw body limit for a gRPC listener taking messages of up to max_msg bytes
 * (a compressed message can be slightly larger than its content). */
size_t pl_otlp_grpc_body_limit(size_t max_msg);

#endif
