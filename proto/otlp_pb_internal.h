/*
 * otlp_pb_internal.h: the protobuf reading toolkit shared inside proto/ (the
 * table-driven decoder otlp_pb_dec.c, the pass-through and response readers
 * in otlp_pb.c): the decoding context with its error path, wire
 * primitives, and field readers that check the wire type. Field readers and
 * walkers return 0, or -1 with d->status and d->err set.
 */
#ifndef PL_OTLP_PB_INTERNAL_H
#define PL_OTLP_PB_INTERNAL_H

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/model.h"
#include "core/status.h"
#include "errpath.h"
#include "otlp_pb.h"

#include "any.pb.h"
#include "common.pb.h"
#include "duration.pb.h"
#include "error_details.pb.h"
#include "logs.pb.h"
#include "metrics.pb.h"
#include "profiles.pb.h"
#include "profiles_service.pb.h"
#include "resource.pb.h"
#include "status.pb.h"
#include "trace.pb.h"
#include "trace_service.pb.h"

/* Field numbers, from the generated headers. */
#define CM(m, f)  opentelemetry_proto_common_v1_##m##_##f##_tag
#define RES(m, f) opentelemetry_proto_resource_v1_##m##_##f##_tag
#define TR(m, f)  opentelemetry_proto_trace_v1_##m##_##f##_tag
#define PR(m, f)  opentelemetry_proto_profiles_v1development_##m##_##f##_tag
#define LG(m, f)  opentelemetry_proto_logs_v1_##m##_##f##_tag
#define MT(m, f)  opentelemetry_proto_metrics_v1_##m##_##f##_tag
#define CTR(m, f) opentelemetry_proto_collector_trace_v1_##m##_##f##_tag
#define CPR(m, f) opentelemetry_proto_collector_profiles_v1development_##m##_##f##_tag
#define CLG(m, f) opentelemetry_proto_logs_v1_##m##_##f##_tag
#define CMT(m, f) opentelemetry_proto_metrics_v1_##m##_##f##_tag

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

typedef struct dec {
    pl_arena *arena;
    pl_err *err;
    const uint8_t *base;
    pl_status status; /* PL_ERR_INVALID unless OOM or over budget */
    size_t budget;    /* decoded-memory budget (PL_OTLP_DECODE_BUDGET) */
    size_t used;      /* charged so far */
    pl_errpath path;
} dec;

static inline void path_push(dec *d, const char *name, int64_t index)
{
    pl_errpath_push(&d->path, name, index);
}

static inline void path_pop(dec *d)
{
    pl_errpath_pop(&d->path);
}

/* ---- wire primitives ---------------------------------------------------- */

/* 0, -1 (truncated) or -2 (more than 10 bytes / over 64 bits). */
static inline int read_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) {
        *out = *p;
        *pp = p + 1;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (p >= end)
            return -1;
        uint8_t b = *p++;
        if (shift == 63 && (b & 0x7e))
            return -2;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            *pp = p;
            return 0;
        }
        if (shift == 63)
            return -2;
    }
    return -2;
}

static inline uint64_t load64(const uint8_t *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

static inline uint32_t load32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

typedef struct field {
    uint32_t num;
    int wt;
    uint64_t v;         /* VARINT, I64, I32 */
    const uint8_t *ptr; /* LEN */
    size_t len;
} field;

int pl_pb_wire_wrong_wt(dec *d, const char *name, const field *f, int want);
/* Error at the current path (+ field), names written in snake_case;
 * returns -1. */
#define pl_pb_wire_fail(d, field, ...)                                                             \
    pl_errpath_fail(&(d)->path, (d)->err, true, (field), __VA_ARGS__)
#define pl_pb_wire_oom(d) pl_errpath_oom(&(d)->status, (d)->err)
/* Counts, per field number below 32, the occurrences in a message (packed
 * elements for fields in varint_mask / fixed64_mask). */
int pl_pb_wire_count_fields(dec *d, const uint8_t *p, const uint8_t *end, uint32_t counts[32],
                            uint32_t varint_mask, uint32_t fixed64_mask);
/* Zeroed arena array, charged to the decode budget first. */
void *pl_pb_wire_calloc(dec *d, size_t n, size_t size);
/* Repeated int32/int64 (packed or not) and fixed64, into arrays of cap. */
int pl_pb_wire_rep_varint(dec *d, const field *f, const char *name, void *arr, int elem_size,
                          uint32_t *n, uint32_t cap);
int pl_pb_wire_rep_fixed64(dec *d, const field *f, const char *name, uint64_t *arr, uint32_t *n,
                           uint32_t cap);

/* pl_pb_wire_fail's -1, visible to the optimizer in inline readers. */
#define PBW_FAIL(...) (pl_pb_wire_fail(__VA_ARGS__), -1)

/* Reads the next field (tag and value) at *pp; inline: it runs once per
 * field of every message. */
static inline __attribute__((always_inline)) int pl_pb_wire_next_field(dec *d, const uint8_t **pp,
                                                                       const uint8_t *end, field *f)
{
    const uint8_t *p = *pp;
    uint64_t key;
    int rc = read_varint(&p, end, &key);
    if (rc)
        return PBW_FAIL(d, NULL, "%s tag at offset %zu", rc == -1 ? "truncated" : "overlong",
                        (size_t)(*pp - d->base));
    if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff)
        return PBW_FAIL(d, NULL, "invalid field number %" PRIu64 " at offset %zu", key >> 3,
                        (size_t)(*pp - d->base));
    f->num = (uint32_t)(key >> 3);
    f->wt = (int)(key & 7);
    switch (f->wt) {
    case WT_VARINT:
        rc = read_varint(&p, end, &f->v);
        if (rc)
            return PBW_FAIL(d, NULL, "field %u: %s varint at offset %zu", f->num,
                            rc == -1 ? "truncated" : "overflowing", (size_t)(p - d->base));
        break;
    case WT_I64:
        if (end - p < 8)
            return PBW_FAIL(d, NULL, "field %u: truncated fixed64 at offset %zu", f->num,
                            (size_t)(p - d->base));
        f->v = load64(p);
        p += 8;
        break;
    case WT_I32:
        if (end - p < 4)
            return PBW_FAIL(d, NULL, "field %u: truncated fixed32 at offset %zu", f->num,
                            (size_t)(p - d->base));
        f->v = load32(p);
        p += 4;
        break;
    case WT_LEN: {
        uint64_t len;
        rc = read_varint(&p, end, &len);
        if (rc)
            return PBW_FAIL(d, NULL, "field %u: %s length at offset %zu", f->num,
                            rc == -1 ? "truncated" : "overflowing", (size_t)(p - d->base));
        if (len > (uint64_t)(end - p))
            return PBW_FAIL(d, NULL,
                            "field %u: length %" PRIu64 " at offset %zu exceeds the %zu bytes left",
                            f->num, len, (size_t)(p - d->base), (size_t)(end - p));
        f->ptr = p;
        f->len = (size_t)len;
        p += len;
        break;
    }
    default:
        return PBW_FAIL(d, NULL, "field %u: unsupported wire type %d at offset %zu", f->num, f->wt,
                        (size_t)(*pp - d->base));
    }
    *pp = p;
    return 0;
}

#define EXPECT(f, want, name)                                                                      \
    do {                                                                                           \
        if ((f)->wt != (want))                                                                     \
            return (pl_pb_wire_wrong_wt(d, (name), (f), (want)), -1);                              \
    } while (0)

/* True when none of the len bytes at s has its high bit set (plain ASCII,
 * so valid UTF-8): word loads, overlapping at the end, one test at the end.
 * Most OTLP strings are ASCII; the others go on to pl_utf8_valid. */
static inline bool pl_pb_wire_ascii(const uint8_t *s, size_t len)
{
    if (len >= 8) {
        uint64_t acc = 0, w;
        for (size_t i = 0; i + 8 < len; i += 8) {
            memcpy(&w, s + i, 8);
            acc |= w;
        }
        memcpy(&w, s + len - 8, 8);
        return !((acc | w) & 0x8080808080808080ull);
    }
    if (len >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + len - 4, 4);
        return !((a | b) & 0x80808080u);
    }
    return !len || !((s[0] | s[len / 2] | s[len - 1]) & 0x80);
}

static inline int get_string(dec *d, const field *f, const char *name, pl_bytes *out)
{
    EXPECT(f, WT_LEN, name);
    if (!pl_pb_wire_ascii(f->ptr, f->len) && !pl_utf8_valid(f->ptr, f->len))
        return PBW_FAIL(d, name, "invalid UTF-8");
    out->ptr = f->len ? f->ptr : NULL;
    out->len = (uint32_t)f->len;
    return 0;
}

static inline int get_bytes(dec *d, const field *f, const char *name, pl_bytes *out)
{
    EXPECT(f, WT_LEN, name);
    out->ptr = f->len ? f->ptr : NULL;
    out->len = (uint32_t)f->len;
    return 0;
}

static inline int get_id(dec *d, const field *f, const char *name, uint8_t *dst, uint8_t *dst_len,
                         size_t want)
{
    EXPECT(f, WT_LEN, name);
    if (f->len != 0 && f->len != want)
        return PBW_FAIL(d, name, "length %zu, want %zu", f->len, want);
    if (f->len)
        memcpy(dst, f->ptr, f->len);
    *dst_len = (uint8_t)f->len;
    return 0;
}

static inline int get_varint(dec *d, const field *f, const char *name, uint64_t *out)
{
    EXPECT(f, WT_VARINT, name);
    *out = f->v;
    return 0;
}

#define GET_U32(f, name, dst)                                                                      \
    do {                                                                                           \
        EXPECT(f, WT_VARINT, name);                                                                \
        (dst) = (uint32_t)(f)->v;                                                                  \
    } while (0)
#define GET_I32(f, name, dst)                                                                      \
    do {                                                                                           \
        EXPECT(f, WT_VARINT, name);                                                                \
        (dst) = (int32_t)(uint32_t)(f)->v;                                                         \
    } while (0)
#define GET_I64(f, name, dst)                                                                      \
    do {                                                                                           \
        EXPECT(f, WT_VARINT, name);                                                                \
        (dst) = (int64_t)(f)->v;                                                                   \
    } while (0)
#define GET_U64(f, name, dst)                                                                      \
    do {                                                                                           \
        EXPECT(f, WT_VARINT, name);                                                                \
        (dst) = (f)->v;                                                                            \
    } while (0)
#define GET_FIXED64(f, name, dst)                                                                  \
    do {                                                                                           \
        EXPECT(f, WT_I64, name);                                                                   \
        (dst) = (f)->v;                                                                            \
    } while (0)
#define GET_FIXED32(f, name, dst)                                                                  \
    do {                                                                                           \
        EXPECT(f, WT_I32, name);                                                                   \
        (dst) = (uint32_t)(f)->v;                                                                  \
    } while (0)

#endif
