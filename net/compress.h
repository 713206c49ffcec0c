/*
 * compress.h: request bodies in the codings HTTP and gRPC peers use; the
 * codings themselves (pl_decompress, pl_compress: gzip, deflate, zstd) are
 * proto/coding.h, included here for the receivers and exporters that use
 * both.
 */
#ifndef PL_COMPRESS_H
#define PL_COMPRESS_H

#include "core/status.h"
#include "proto/coding.h"

/* ---- request bodies, for receivers ------------------------------------ */

struct pl_http_request;

/* The request's Content-Encoding (absent: IDENTITY); false for a coding
 * proflink does not take (receivers answer 415). */
bool pl_request_encoding(const struct pl_http_request *req, pl_encoding *out);

/* The request body decoded as `enc` says, into a malloc'd buffer the
 * caller frees: IDENTITY takes the request's own body (no copy), others
 * inflate with at most max_out bytes out (pl_decompress's errors). */
pl_status pl_request_body(struct pl_http_request *req, pl_encoding enc, size_t max_out,
                          uint8_t **out, size_t *out_len, pl_err *err);

#endif
