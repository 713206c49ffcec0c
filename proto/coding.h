/*
 * coding.h: the body codings HTTP and gRPC peers use (gzip, deflate, zstd),
 * for receivers (decompress) and exporters (compress), and for formats that
 * carry compressed payloads (gzipped pprof).
 *
 * Decompression always runs with an output limit: a 20 KiB gzip bomb can
 * expand to gigabytes, so the limit is enforced while inflating, never after.
 * Going over it returns PL_ERR_TOO_LARGE; corrupt input returns
 * PL_ERR_INVALID with a message saying which coding failed and where.
 */
#ifndef PL_PROTO_CODING_H
#define PL_PROTO_CODING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/status.h"

typedef enum pl_encoding {
    PL_ENCODING_IDENTITY = 0,
    PL_ENCODING_GZIP,
    PL_ENCODING_DEFLATE, /* zlib-wrapped (RFC 1950); raw deflate accepted as a fallback */
    PL_ENCODING_ZSTD,
} pl_encoding;

/* Parses a Content-Encoding / grpc-encoding token (case-insensitive, spaces
 * trimmed): "", "identity", "gzip", "x-gzip", "deflate", "zlib", "zstd".
 * False for anything else. */
bool pl_encoding_parse(const char *name, size_t len, pl_encoding *out);
const char *pl_encoding_name(pl_encoding enc); /* "identity", "gzip", ... */

/* Decompresses `in` into a malloc'd buffer (*out, *out_len; free() it) of at
 * most max_out bytes. IDENTITY copies. On error *out is NULL and err says why:
 * PL_ERR_INVALID (corrupt or truncated data), PL_ERR_TOO_LARGE (over
 * max_out), PL_ERR_NOMEM. */
pl_status pl_decompress(pl_encoding enc, const uint8_t *in, size_t in_len, size_t max_out,
                        uint8_t **out, size_t *out_len, pl_err *err);

/* Appends the compressed form of `in` to `out` (gzip, deflate = zlib-wrapped,
 * zstd; IDENTITY copies). level 0 = the coding's default. */
pl_status pl_compress(pl_encoding enc, const uint8_t *in, size_t in_len, int level, pl_buf *out,
                      pl_err *err);

#endif
