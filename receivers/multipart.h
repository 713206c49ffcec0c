/*
 * multipart.h: a multipart/form-data body parser (RFC 7578), for the
 * Pyroscope /ingest uploads (form fields `profile`, `prev_profile`,
 * `sample_type_config`).
 *
 * The whole body is in memory (the HTTP server hands over complete bodies),
 * so the parser only finds boundaries and returns views into the body: no
 * copy, no allocation. Part headers are read for Content-Disposition (name,
 * filename) and Content-Type; other headers are ignored. Anything malformed
 * (no boundary parameter, a missing delimiter, a part without a blank line
 * after its headers, more parts than the caller allows) is PL_ERR_INVALID
 * with a message saying what.
 */
#ifndef PL_MULTIPART_H
#define PL_MULTIPART_H

#include <stddef.h>
#include <stdint.h>

#include "core/model.h"
#include "core/status.h"

typedef struct pl_multipart_part {
    pl_bytes name;         /* form field name (Content-Disposition name=) */
    pl_bytes filename;     /* filename=, empty if absent */
    pl_bytes content_type; /* the part's Content-Type, empty if absent */
    pl_bytes data;         /* the part's body */
} pl_multipart_part;

/* Extracts the boundary from a Content-Type value ("multipart/form-data;
 * boundary=..." with or without quotes). -1 if it has none. */
int pl_multipart_boundary(const char *content_type, size_t len, pl_bytes *boundary);

/* Splits `body` into at most max_parts parts. */
pl_status pl_multipart_parse(pl_bytes boundary, const uint8_t *body, size_t len,
                             pl_multipart_part *parts, size_t max_parts, size_t *n_parts,
                             pl_err *err);

/* The first part named `name`, or NULL. */
const pl_multipart_part *pl_multipart_find(const pl_multipart_part *parts, size_t n,
                                           const char *name);

#endif
