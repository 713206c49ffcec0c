/*
 * otlp_json_internal.h: what the OTLP/JSON readers share (private to proto/):
 * the decoder state over the streaming reader, error paths, the decoded-
 * memory budget and the scalar readers that apply the OTLP JSON mapping
 * (64-bit integers as numbers or strings, enums by name or number, special
 * doubles, hex ids, base64). Used by otlp_json_dec.c (JSON -> model) and
 * otlp_transcode.c (JSON -> protobuf). Every reader returns 0, or -1 with
 * d->status and the error message set.
 */
#ifndef PL_OTLP_JSON_INTERNAL_H
#define PL_OTLP_JSON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/arena.h"
#include "core/model.h"
#include "core/status.h"
#include "errpath.h"
#include "json_reader.h"

/* Reader nesting limit: each AnyValue level costs three JSON levels. */
#define JSON_MAX_DEPTH (3 * PL_OTLP_MAX_DEPTH + 32)

typedef struct jdec {
    pl_jr r;
    pl_arena *arena;
    pl_err *err;
    pl_status status;
    size_t budget, used;
    uint8_t *scratch;
    size_t scratch_len, scratch_cap;
    pl_errpath path;
} jdec;

static inline void path_push(jdec *d, const char *name, int64_t index)
{
    pl_errpath_push(&d->path, name, index);
}

static inline void path_pop(jdec *d)
{
    pl_errpath_pop(&d->path);
}

/* Charges decoded memory against the request's budget. */
static inline int pl_json_dec_charge(jdec *d, size_t n)
{
    d->used += n;
    if (d->used <= d->budget)
        return 0;
    d->status = PL_ERR_TOO_LARGE;
    if (d->err)
        snprintf(d->err->msg, sizeof d->err->msg,
                 "decoded request larger than the limit of %zu bytes (%s)", d->budget,
                 "every object counts");
    return -1;
}

/* Sets up d over buf (the arena may be NULL when nothing is allocated). */
void pl_json_dec_init(jdec *d, pl_arena *arena, const uint8_t *buf, size_t len, size_t budget,
                      pl_err *err);

/* Error at the current path (+ field); returns -1. */
#define pl_json_dec_fail(d, field, ...)                                                            \
    pl_errpath_fail(&(d)->path, (d)->err, false, (field), __VA_ARGS__)
#define pl_json_dec_oom(d) pl_errpath_oom(&(d)->status, (d)->err)
int pl_json_dec_syntax(jdec *d); /* the reader's error, as "invalid JSON at offset N: ..." */
/* A short string's text unescaped into buf (NUL-terminated, cut at cap - 1);
 * *len is the full length. */
int pl_json_dec_short_text(jdec *d, const pl_jstr *s, char *buf, size_t cap, size_t *len);
int pl_json_dec_parse_decimal(const char *s, size_t len, bool is_signed, uint64_t *out);
/* An integer (number, decimal string or null = 0) within [min, max_u]. */
int pl_json_dec_int(jdec *d, const char *name, bool is_signed, int64_t min, uint64_t max_u,
                    uint64_t *out);
/* An enum by name or number; values NULL: a name's value is its index. */
int pl_json_dec_enum(jdec *d, const char *name, const char *const *names, const int32_t *values,
                     int n_names, int32_t *out);
int pl_json_dec_double(jdec *d, const char *name, double *out);
/* A string or null (empty) as a raw view. */
int pl_json_dec_jstr(jdec *d, const char *name, const char *want, pl_jstr *s);
/* Into the model: zero-copy unless escaped (then copied to the arena). */
int pl_json_dec_string(jdec *d, const char *name, pl_bytes *out);
int pl_json_dec_base64(jdec *d, const char *name, pl_bytes *out);
int pl_json_dec_hex_id(jdec *d, const char *name, uint8_t *dst, uint8_t *dst_len, size_t want);

#endif
