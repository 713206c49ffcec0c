/*
 * base64.h: the one base64 codec (RFC 4648). Encoding uses the standard
 * alphabet; decoding accepts the standard and the URL-safe alphabets, with
 * or without '=' padding (padding only at the end).
 */
#ifndef PL_CORE_BASE64_H
#define PL_CORE_BASE64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* Appends the encoding of in[0..len) to out; `pad` adds '=' padding. */
void pl_base64_encode(const uint8_t *in, size_t len, pl_buf *out, bool pad);

/* Decodes n characters into out, which holds at least n * 3 / 4 + 1 bytes.
 * Returns 0 with *out_len set, or -1 with *bad_at set to the first bad
 * character (outside the alphabet, padding before the end, or a lone
 * trailing character). */
int pl_base64_decode_into(const char *in, size_t n, uint8_t *out, size_t *out_len, size_t *bad_at);

/* Same; the decoded length, or -1. */
long pl_base64_decode(const char *in, size_t len, uint8_t *out);

#endif
