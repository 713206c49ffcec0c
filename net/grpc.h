/*
 * grpc.h: server-side gRPC (unary calls) on top of http_server.
 *
 * gRPC is HTTP/2 with a 5-byte prefix per message (compressed flag and a
 * big-endian length), the message's compression named by `grpc-encoding`,
 * and the outcome in trailers (`grpc-status`, percent-encoded
 * `grpc-message`, and `grpc-status-details-bin`: a base64 google.rpc.Status
 * whose details may carry RetryInfo). These helpers read one request
 * message, checking every rule a client can break, and write answers;
 * a service handler stays a few lines.
 */
#ifndef PL_GRPC_H
#define PL_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/buf.h"
#include "net/http_server.h"
#include "core/base64.h"

/* gRPC status codes used by proflink. */
enum {
    PL_GRPC_OK = 0,
    PL_GRPC_CANCELLED = 1,
    PL_GRPC_UNKNOWN = 2,
    PL_GRPC_INVALID_ARGUMENT = 3,
    PL_GRPC_DEADLINE_EXCEEDED = 4,
    PL_GRPC_RESOURCE_EXHAUSTED = 8,
    PL_GRPC_UNIMPLEMENTED = 12,
    PL_GRPC_INTERNAL = 13,
    PL_GRPC_UNAVAILABLE = 14,
    PL_GRPC_UNAUTHENTICATED = 16,
};

/* True if the request's content-type starts with "application/grpc"; if
 * not, the server should answer plain HTTP 415 (see pl_grpc_respond_415). */
bool pl_grpc_is_grpc(const pl_http_request *req);
void pl_grpc_respond_415(pl_http_response *res);

/* One decoded request message. `owner` is a malloc'd buffer holding `data`
 * (the request body, or the decompressed copy): free() it, or adopt it
 * into the batch whose strings point into it. */
typedef struct pl_grpc_message {
    uint8_t *owner;
    size_t owner_size;
    const uint8_t *data;
    size_t len;
} pl_grpc_message;

/* Reads the single message of a unary call from req's body (taking the
 * body when it can be used in place). Errors, as the status to answer with
 * (map with pl_status_grpc):
 *   PL_ERR_INVALID     bad framing (short prefix, length mismatch, extra
 *                      messages), compressed flag without grpc-encoding,
 *                      corrupt compressed data
 *   PL_ERR_UNSUPPORTED grpc-encoding we cannot decode (-> UNIMPLEMENTED)
 *   PL_ERR_TOO_LARGE   message (after decompression) over max_msg_size,
 *                      or req->too_large (-> RESOURCE_EXHAUSTED)
 *   PL_ERR_NOMEM */
pl_status pl_grpc_read_message(pl_http_request *req, size_t max_msg_size, pl_grpc_message *out,
                               pl_err *err);

/* Answers OK with one (uncompressed) message. */
void pl_grpc_respond(pl_http_response *res, const void *msg, size_t len);
/* Answers with an error status (Trailers-Only). With retry_delay_ns >= 0,
 * grpc-status-details-bin carries a Status with RetryInfo, so clients know
 * they may retry (RESOURCE_EXHAUSTED is only retryable that way). */
void pl_grpc_respond_error(pl_http_response *res, int code, const char *message,
                           int64_t retry_delay_ns);

/* Helpers, exposed for tests and other gRPC users. */
/* Percent-encodes per the gRPC spec (bytes outside 0x20-0x7E, and '%'). */
void pl_grpc_percent_encode(const char *in, pl_buf *out);
/* Parses the 5-byte prefix: 0 and fills *compressed / *len, -1 if short. */
int pl_grpc_parse_prefix(const uint8_t *p, size_t avail, bool *compressed, uint32_t *len);

#endif
