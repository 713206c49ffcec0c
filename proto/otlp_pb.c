/*
 * otlp_pb.c: see otlp_pb.h.
 *
 * Why hand-written loops: nanopb's generic decoder fills fixed structs
 * through callbacks, one call per field, and would need a malloc or a copy
 * per string; spans arrive by the hundred thousand per second. Here each
 * message is walked directly over the input buffer. Field numbers still come
 * from the .proto files, through the *_tag macros nanopb generates.
 *
 * Every message with repeated children is walked twice: a first pass counts
 * the children (and the elements of packed scalars) so that each array is
 * allocated once, at its final size, from the batch arena; the second pass
 * fills them. The first pass only skips over children, so the extra cost is
 * small and there is no per-element allocation and no re-growing.
 *
 * The encoder writes each length-delimited field with a one-byte length
 * placeholder and, once the content is written and its length known, moves
 * the content up when the length needs more bytes. Only messages longer than
 * 127 bytes move, each once, so the work stays linear in the output size
 * (times the nesting depth) instead of re-encoding children to size them.
 */
#include "otlp_pb.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "any.pb.h"
#include "common.pb.h"
#include "duration.pb.h"
#include "error_details.pb.h"
#include "logs.pb.h"
#include "logs_service.pb.h"
#include "metrics.pb.h"
#include "metrics_service.pb.h"
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
#define CLG(m, f) opentelemetry_proto_collector_logs_v1_##m##_##f##_tag
#define CMT(m, f) opentelemetry_proto_collector_metrics_v1_##m##_##f##_tag

/* The export responses of all signals share one layout; the encoder relies on it. */
_Static_assert(CPR(ExportProfilesServiceResponse, partial_success) ==
                   CTR(ExportTraceServiceResponse, partial_success),
               "response layout");
_Static_assert(CLG(ExportLogsPartialSuccess, rejected_log_records) ==
                   CTR(ExportTracePartialSuccess, rejected_spans),
               "response layout");
_Static_assert(CMT(ExportMetricsPartialSuccess, error_message) ==
                   CTR(ExportTracePartialSuccess, error_message),
               "response layout");

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* ---- UTF-8 -------------------------------------------------------------- */

bool pl_utf8_valid(const uint8_t *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        /* ASCII fast path, 8 bytes at a time. */
        while (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull)
                break;
            i += 8;
        }
        if (i >= len)
            break;
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (len - i <= n) /* needs n continuation bytes after the lead byte */
            return false;
        for (size_t k = 1; k <= n; k++) {
            uint8_t cc = s[i + k];
            if ((cc & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (cc & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += n + 1;
    }
    return true;
}

/* ---- decoding context and errors ---------------------------------------- */

#define PATH_SLOTS 32

typedef struct dec {
    pl_arena *arena;
    pl_err *err;
    const uint8_t *base;
    pl_status status; /* PL_ERR_INVALID unless OOM or over budget */
    size_t budget;    /* decoded-memory budget (PL_OTLP_DECODE_BUDGET) */
    size_t used;      /* charged so far */
    unsigned depth;   /* path entries; beyond PATH_SLOTS they are counted only */
    struct {
        const char *name;
        int64_t index; /* -1: not a repeated field */
    } path[PATH_SLOTS];
} dec;

static inline void path_push(dec *d, const char *name, int64_t index)
{
    if (d->depth < PATH_SLOTS) {
        d->path[d->depth].name = name;
        d->path[d->depth].index = index;
    }
    d->depth++;
}

static inline void path_pop(dec *d)
{
    d->depth--;
}

static void path_format(const dec *d, const char *field, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    unsigned n = d->depth < PATH_SLOTS ? d->depth : PATH_SLOTS;
    for (unsigned i = 0; i < n && len < cap; i++) {
        int w;
        if (d->path[i].index >= 0)
            w = snprintf(out + len, cap - len, "%s%s[%" PRId64 "]", i ? "." : "", d->path[i].name,
                         d->path[i].index);
        else
            w = snprintf(out + len, cap - len, "%s%s", i ? "." : "", d->path[i].name);
        if (w < 0)
            return;
        len += (size_t)w;
    }
    if (d->depth > PATH_SLOTS && len < cap)
        len += (size_t)snprintf(out + len, cap - len, "...");
    if (field && len < cap)
        snprintf(out + len, cap - len, "%s%s", len ? "." : "", field);
    if (!out[0])
        snprintf(out, cap, "(request)");
}

__attribute__((format(printf, 3, 4))) static int fail(dec *d, const char *field, const char *fmt,
                                                      ...)
{
    if (d->err) {
        char where[320], what[192];
        path_format(d, field, where, sizeof where);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        snprintf(d->err->msg, sizeof d->err->msg, "%s: %s", where, what);
    }
    return -1;
}

static int oom(dec *d)
{
    d->status = PL_ERR_NOMEM;
    if (d->err)
        snprintf(d->err->msg, sizeof d->err->msg, "out of memory while decoding");
    return -1;
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

static int next_field(dec *d, const uint8_t **pp, const uint8_t *end, field *f)
{
    const uint8_t *p = *pp;
    uint64_t key;
    int rc = read_varint(&p, end, &key);
    if (rc)
        return fail(d, NULL, "%s tag at offset %zu", rc == -1 ? "truncated" : "overlong",
                    (size_t)(*pp - d->base));
    if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff)
        return fail(d, NULL, "invalid field number %" PRIu64 " at offset %zu", key >> 3,
                    (size_t)(*pp - d->base));
    f->num = (uint32_t)(key >> 3);
    f->wt = (int)(key & 7);
    switch (f->wt) {
    case WT_VARINT:
        rc = read_varint(&p, end, &f->v);
        if (rc)
            return fail(d, NULL, "field %u: %s varint at offset %zu", f->num,
                        rc == -1 ? "truncated" : "overflowing", (size_t)(p - d->base));
        break;
    case WT_I64:
        if (end - p < 8)
            return fail(d, NULL, "field %u: truncated fixed64 at offset %zu", f->num,
                        (size_t)(p - d->base));
        f->v = load64(p);
        p += 8;
        break;
    case WT_I32:
        if (end - p < 4)
            return fail(d, NULL, "field %u: truncated fixed32 at offset %zu", f->num,
                        (size_t)(p - d->base));
        f->v = load32(p);
        p += 4;
        break;
    case WT_LEN: {
        uint64_t len;
        rc = read_varint(&p, end, &len);
        if (rc)
            return fail(d, NULL, "field %u: %s length at offset %zu", f->num,
                        rc == -1 ? "truncated" : "overflowing", (size_t)(p - d->base));
        if (len > (uint64_t)(end - p))
            return fail(d, NULL,
                        "field %u: length %" PRIu64 " at offset %zu exceeds the %zu bytes left",
                        f->num, len, (size_t)(p - d->base), (size_t)(end - p));
        f->ptr = p;
        f->len = (size_t)len;
        p += len;
        break;
    }
    default:
        return fail(d, NULL, "field %u: unsupported wire type %d at offset %zu", f->num, f->wt,
                    (size_t)(*pp - d->base));
    }
    *pp = p;
    return 0;
}

static const char *const wt_names[8] = {
    "varint", "fixed64", "length-delimited", "group start", "group end", "fixed32", "6", "7"};

static int wrong_wt(dec *d, const char *name, const field *f, int want)
{
    return fail(d, name, "wire type %s, want %s", wt_names[f->wt & 7], wt_names[want]);
}

#define EXPECT(f, want, name)                                                                      \
    do {                                                                                           \
        if ((f)->wt != (want))                                                                     \
            return wrong_wt(d, (name), (f), (want));                                               \
    } while (0)

/* Decodes the sub-message in field f with fn(d, start, end, ...), naming it
 * `name` (and `index`, or -1) in error paths. Returns -1 from the caller on
 * a wrong wire type or a failure inside. */
#define DEC_SUB(fn, name, index, ...)                                                              \
    do {                                                                                           \
        EXPECT(&f, WT_LEN, name);                                                                  \
        path_push(d, name, index);                                                                 \
        if (fn(d, f.ptr, f.ptr + f.len, __VA_ARGS__))                                              \
            return -1;                                                                             \
        path_pop(d);                                                                               \
    } while (0)

static inline int get_string(dec *d, const field *f, const char *name, pl_bytes *out)
{
    EXPECT(f, WT_LEN, name);
    if (!pl_utf8_valid(f->ptr, f->len))
        return fail(d, name, "invalid UTF-8");
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
        return fail(d, name, "length %zu, want %zu", f->len, want);
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

/* Counts, per field number below 32, how many elements a message holds:
 * one per occurrence, or for fields in varint_mask / fixed64_mask, the number
 * of packed elements of a LEN occurrence. */
static int count_fields(dec *d, const uint8_t *p, const uint8_t *end, uint32_t counts[32],
                        uint32_t varint_mask, uint32_t fixed64_mask)
{
    memset(counts, 0, 32 * sizeof(uint32_t));
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        if (f.num >= 32)
            continue;
        uint32_t bit = 1u << f.num;
        uint64_t add = 1;
        if (f.wt == WT_LEN && (varint_mask & bit)) {
            add = 0;
            for (size_t i = 0; i < f.len; i++)
                add += f.ptr[i] < 0x80;
        } else if (f.wt == WT_LEN && (fixed64_mask & bit)) {
            add = f.len / 8;
        }
        if (counts[f.num] + add > UINT32_MAX / 2)
            return fail(d, NULL, "too many elements in field %u", f.num);
        counts[f.num] += (uint32_t)add;
    }
    return 0;
}

/* Every array of the model comes from here: its elements are charged to
 * the request's budget (messages with a fixed overhead each, so a body of
 * empty sub-messages costs what it would take) before the memory is taken.
 * NULL with d->status set when over budget or out of memory. */
static void *dec_calloc(dec *d, size_t n, size_t size)
{
    size_t cost = n * (size + (size > 8 ? 16 : 0));
    if (size && n > SIZE_MAX / 2 / size)
        cost = SIZE_MAX;
    d->used += cost < SIZE_MAX - d->used ? cost : SIZE_MAX - d->used;
    if (d->used > d->budget) {
        d->status = PL_ERR_TOO_LARGE;
        if (d->err)
            snprintf(d->err->msg, sizeof d->err->msg,
                     "decoded request larger than the limit of %zu bytes (every object counts)",
                     d->budget);
        return NULL;
    }
    void *p = pl_arena_calloc(d->arena, n, size);
    if (!p)
        oom(d);
    return p;
}

#define ALLOC_N(ptr, n)                                                                            \
    do {                                                                                           \
        (ptr) = NULL;                                                                              \
        if ((n) && !((ptr) = dec_calloc(d, (n), sizeof(*(ptr)))))                                  \
            return -1;                                                                             \
    } while (0)

/* Repeated int32 / int64 (varint, packed or not) and fixed64. `cap` comes
 * from count_fields, so running past it means the two passes disagree. */
static int get_rep_varint(dec *d, const field *f, const char *name, void *arr, int elem_size,
                          uint32_t *n, uint32_t cap)
{
    if (f->wt == WT_VARINT) {
        if (*n >= cap)
            return fail(d, name, "element count changed between passes");
        if (elem_size == 4)
            ((int32_t *)arr)[(*n)++] = (int32_t)(uint32_t)f->v;
        else
            ((int64_t *)arr)[(*n)++] = (int64_t)f->v;
        return 0;
    }
    EXPECT(f, WT_LEN, name);
    const uint8_t *p = f->ptr, *end = f->ptr + f->len;
    while (p < end) {
        uint64_t v;
        int rc = read_varint(&p, end, &v);
        if (rc)
            return fail(d, name, "%s packed varint", rc == -1 ? "truncated" : "overflowing");
        if (*n >= cap)
            return fail(d, name, "element count changed between passes");
        if (elem_size == 4)
            ((int32_t *)arr)[(*n)++] = (int32_t)(uint32_t)v;
        else
            ((int64_t *)arr)[(*n)++] = (int64_t)v;
    }
    return 0;
}

static int get_rep_fixed64(dec *d, const field *f, const char *name, uint64_t *arr, uint32_t *n,
                           uint32_t cap)
{
    if (f->wt == WT_I64) {
        if (*n >= cap)
            return fail(d, name, "element count changed between passes");
        arr[(*n)++] = f->v;
        return 0;
    }
    EXPECT(f, WT_LEN, name);
    if (f->len % 8)
        return fail(d, name, "packed fixed64 length %zu is not a multiple of 8", f->len);
    for (size_t i = 0; i < f->len; i += 8) {
        if (*n >= cap)
            return fail(d, name, "element count changed between passes");
        arr[(*n)++] = load64(f->ptr + i);
    }
    return 0;
}

/* ---- common.v1 ---------------------------------------------------------- */

static int dec_anyvalue(dec *d, const uint8_t *p, const uint8_t *end, pl_value *v, int depth);

static int dec_keyvalue(dec *d, const uint8_t *p, const uint8_t *end, pl_kv *kv, int depth)
{
    memset(kv, 0, sizeof(*kv));
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case CM(KeyValue, key):
            if (get_string(d, &f, "key", &kv->key))
                return -1;
            break;
        case CM(KeyValue, value):
            DEC_SUB(dec_anyvalue, "value", -1, &kv->value, depth + 1);
            break;
        case CM(KeyValue, key_strindex):
            GET_I32(&f, "key_strindex", kv->key_strindex);
            break;
        default:
            break;
        }
    }
    return 0;
}

/* Decodes every KeyValue occurrence of field `num` into a list sized in advance. */
static int dec_kv_list(dec *d, const uint8_t *p, const uint8_t *end, uint32_t num, const char *name,
                       pl_kv **items, uint32_t *n, int depth)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, 0, 0))
        return -1;
    ALLOC_N(*items, counts[num]);
    *n = 0;
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        if (f.num != num)
            continue;
        EXPECT(&f, WT_LEN, name);
        path_push(d, name, *n);
        if (dec_keyvalue(d, f.ptr, f.ptr + f.len, &(*items)[*n], depth))
            return -1;
        path_pop(d);
        (*n)++;
    }
    return 0;
}

static int dec_anyvalue(dec *d, const uint8_t *p, const uint8_t *end, pl_value *v, int depth)
{
    if (depth > PL_OTLP_MAX_DEPTH)
        return fail(d, NULL, "values nested deeper than %d levels", PL_OTLP_MAX_DEPTH);
    memset(v, 0, sizeof(*v));
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case CM(AnyValue, string_value):
            if (get_string(d, &f, "string_value", &v->u.str))
                return -1;
            v->type = PL_VALUE_STRING;
            break;
        case CM(AnyValue, bool_value):
            EXPECT(&f, WT_VARINT, "bool_value");
            v->type = PL_VALUE_BOOL;
            v->u.b = f.v != 0;
            break;
        case CM(AnyValue, int_value):
            EXPECT(&f, WT_VARINT, "int_value");
            v->type = PL_VALUE_INT;
            v->u.i = (int64_t)f.v;
            break;
        case CM(AnyValue, double_value):
            EXPECT(&f, WT_I64, "double_value");
            v->type = PL_VALUE_DOUBLE;
            memcpy(&v->u.d, &f.v, sizeof(double));
            break;
        case CM(AnyValue, array_value): {
            EXPECT(&f, WT_LEN, "array_value");
            const uint8_t *q = f.ptr, *qend = f.ptr + f.len;
            uint32_t counts[32];
            if (count_fields(d, q, qend, counts, 0, 0))
                return -1;
            uint32_t cnt = counts[CM(ArrayValue, values)];
            pl_value *items;
            ALLOC_N(items, cnt);
            uint32_t n = 0;
            while (q < qend) {
                field g;
                if (next_field(d, &q, qend, &g))
                    return -1;
                if (g.num != CM(ArrayValue, values))
                    continue;
                EXPECT(&g, WT_LEN, "array_value.values");
                path_push(d, "array_value.values", n);
                if (dec_anyvalue(d, g.ptr, g.ptr + g.len, &items[n], depth + 1))
                    return -1;
                path_pop(d);
                n++;
            }
            v->type = PL_VALUE_ARRAY;
            v->u.array.items = items;
            v->u.array.n = n;
            break;
        }
        case CM(AnyValue, kvlist_value): {
            EXPECT(&f, WT_LEN, "kvlist_value");
            pl_kv *items;
            uint32_t n;
            if (dec_kv_list(d, f.ptr, f.ptr + f.len, CM(KeyValueList, values),
                            "kvlist_value.values", &items, &n, depth + 1))
                return -1;
            v->type = PL_VALUE_KVLIST;
            v->u.kvlist.items = items;
            v->u.kvlist.n = n;
            break;
        }
        case CM(AnyValue, bytes_value):
            if (get_bytes(d, &f, "bytes_value", &v->u.str))
                return -1;
            v->type = PL_VALUE_BYTES;
            break;
        case CM(AnyValue, string_value_strindex):
            EXPECT(&f, WT_VARINT, "string_value_strindex");
            v->type = PL_VALUE_STRINDEX;
            v->u.strindex = (int32_t)(uint32_t)f.v;
            break;
        default:
            break;
        }
    }
    return 0;
}

/* One KeyValue occurrence of an attributes field, into attrs sized in advance. */
static int add_attr(dec *d, const field *f, const char *name, pl_attrs *attrs)
{
    EXPECT(f, WT_LEN, name);
    if (attrs->n >= attrs->cap)
        return fail(d, name, "element count changed between passes");
    path_push(d, name, attrs->n);
    if (dec_keyvalue(d, f->ptr, f->ptr + f->len, &attrs->items[attrs->n], 0))
        return -1;
    path_pop(d);
    attrs->n++;
    return 0;
}

static int alloc_attrs(dec *d, pl_attrs *attrs, uint32_t n)
{
    attrs->n = 0;
    attrs->cap = n;
    ALLOC_N(attrs->items, n);
    return 0;
}

/* A singular sub-message that occurs more than once is merged, as protobuf
 * readers do: repeated fields are concatenated, later scalars win. The
 * arrays were sized for one occurrence, so each occurrence is decoded into
 * a fresh struct and then merged. */
static int concat(dec *d, void **dst, uint32_t *dst_n, const void *src, uint32_t src_n, size_t elem)
{
    if (!src_n)
        return 0;
    if (!*dst_n) {
        *dst = (void *)src;
        *dst_n = src_n;
        return 0;
    }
    if (*dst_n > UINT32_MAX / 2 - src_n)
        return fail(d, NULL, "too many elements");
    uint8_t *p = dec_calloc(d, (size_t)*dst_n + src_n, elem);
    if (!p)
        return -1;
    memcpy(p, *dst, (size_t)*dst_n * elem);
    memcpy(p + (size_t)*dst_n * elem, src, (size_t)src_n * elem);
    *dst = p;
    *dst_n += src_n;
    return 0;
}

static int merge_attrs(dec *d, pl_attrs *dst, const pl_attrs *src)
{
    if (concat(d, (void **)&dst->items, &dst->n, src->items, src->n, sizeof(pl_kv)))
        return -1;
    dst->cap = dst->n;
    return 0;
}

static int dec_scope_one(dec *d, const uint8_t *p, const uint8_t *end, pl_scope *s);

static int dec_scope(dec *d, const uint8_t *p, const uint8_t *end, pl_scope *s)
{
    pl_scope one;
    memset(&one, 0, sizeof(one));
    if (dec_scope_one(d, p, end, &one) || merge_attrs(d, &s->attrs, &one.attrs))
        return -1;
    if (one.name.len)
        s->name = one.name;
    if (one.version.len)
        s->version = one.version;
    if (one.dropped_attributes_count)
        s->dropped_attributes_count = one.dropped_attributes_count;
    return 0;
}

static int dec_scope_one(dec *d, const uint8_t *p, const uint8_t *end, pl_scope *s)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, 0, 0) ||
        alloc_attrs(d, &s->attrs, counts[CM(InstrumentationScope, attributes)]))
        return -1;
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case CM(InstrumentationScope, name):
            if (get_string(d, &f, "name", &s->name))
                return -1;
            break;
        case CM(InstrumentationScope, version):
            if (get_string(d, &f, "version", &s->version))
                return -1;
            break;
        case CM(InstrumentationScope, attributes):
            if (add_attr(d, &f, "attributes", &s->attrs))
                return -1;
            break;
        case CM(InstrumentationScope, dropped_attributes_count):
            GET_U32(&f, "dropped_attributes_count", s->dropped_attributes_count);
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_entity_ref(dec *d, const uint8_t *p, const uint8_t *end, pl_entity_ref *e)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, 0, 0))
        return -1;
    ALLOC_N(e->id_keys, counts[CM(EntityRef, id_keys)]);
    ALLOC_N(e->description_keys, counts[CM(EntityRef, description_keys)]);
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case CM(EntityRef, schema_url):
            if (get_string(d, &f, "schema_url", &e->schema_url))
                return -1;
            break;
        case CM(EntityRef, type):
            if (get_string(d, &f, "type", &e->type))
                return -1;
            break;
        case CM(EntityRef, id_keys):
            if (get_string(d, &f, "id_keys", &e->id_keys[e->n_id_keys]))
                return -1;
            e->n_id_keys++;
            break;
        case CM(EntityRef, description_keys):
            if (get_string(d, &f, "description_keys", &e->description_keys[e->n_description_keys]))
                return -1;
            e->n_description_keys++;
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_resource_one(dec *d, const uint8_t *p, const uint8_t *end, pl_resource *r);

static int dec_resource(dec *d, const uint8_t *p, const uint8_t *end, pl_resource *r)
{
    pl_resource one;
    memset(&one, 0, sizeof(one));
    if (dec_resource_one(d, p, end, &one) || merge_attrs(d, &r->attrs, &one.attrs) ||
        concat(d, (void **)&r->entity_refs, &r->n_entity_refs, one.entity_refs, one.n_entity_refs,
               sizeof(pl_entity_ref)))
        return -1;
    if (one.dropped_attributes_count)
        r->dropped_attributes_count = one.dropped_attributes_count;
    return 0;
}

static int dec_resource_one(dec *d, const uint8_t *p, const uint8_t *end, pl_resource *r)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, 0, 0) ||
        alloc_attrs(d, &r->attrs, counts[RES(Resource, attributes)]))
        return -1;
    ALLOC_N(r->entity_refs, counts[RES(Resource, entity_refs)]);
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case RES(Resource, attributes):
            if (add_attr(d, &f, "attributes", &r->attrs))
                return -1;
            break;
        case RES(Resource, dropped_attributes_count):
            GET_U32(&f, "dropped_attributes_count", r->dropped_attributes_count);
            break;
        case RES(Resource, entity_refs):
            DEC_SUB(dec_entity_ref, "entity_refs", r->n_entity_refs,
                    &r->entity_refs[r->n_entity_refs]);
            r->n_entity_refs++;
            break;
        default:
            break;
        }
    }
    return 0;
}

/* ---- trace.v1 ----------------------------------------------------------- */

static int dec_event(dec *d, const uint8_t *p, const uint8_t *end, pl_span_event *ev)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, 0, 0) ||
        alloc_attrs(d, &ev->attrs, counts[TR(Span_Event, attributes)]))
        return -1;
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case TR(Span_Event, time_unix_nano):
            GET_FIXED64(&f, "time_unix_nano", ev->time_unix_nano);
            break;
        case TR(Span_Event, name):
            if (get_string(d, &f, "name", &ev->name))
                return -1;
            break;
        case TR(Span_Event, attributes):
            if (add_attr(d, &f, "attributes", &ev->attrs))
                return -1;
            break;
        case TR(Span_Event, dropped_attributes_count):
            GET_U32(&f, "dropped_attributes_count", ev->dropped_attributes_count);
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_span_link(dec *d, const uint8_t *p, const uint8_t *end, pl_span_link *l)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, 0, 0) ||
        alloc_attrs(d, &l->attrs, counts[TR(Span_Link, attributes)]))
        return -1;
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case TR(Span_Link, trace_id):
            if (get_id(d, &f, "trace_id", l->trace_id, &l->trace_id_len, 16))
                return -1;
            break;
        case TR(Span_Link, span_id):
            if (get_id(d, &f, "span_id", l->span_id, &l->span_id_len, 8))
                return -1;
            break;
        case TR(Span_Link, trace_state):
            if (get_string(d, &f, "trace_state", &l->trace_state))
                return -1;
            break;
        case TR(Span_Link, attributes):
            if (add_attr(d, &f, "attributes", &l->attrs))
                return -1;
            break;
        case TR(Span_Link, dropped_attributes_count):
            GET_U32(&f, "dropped_attributes_count", l->dropped_attributes_count);
            break;
        case TR(Span_Link, flags):
            GET_FIXED32(&f, "flags", l->flags);
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_status(dec *d, const uint8_t *p, const uint8_t *end, pl_span *sp)
{
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case TR(Status, message):
            if (get_string(d, &f, "message", &sp->status.message))
                return -1;
            break;
        case TR(Status, code):
            GET_I32(&f, "code", sp->status.code);
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_span(dec *d, const uint8_t *p, const uint8_t *end, pl_span *sp)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, 0, 0) ||
        alloc_attrs(d, &sp->attrs, counts[TR(Span, attributes)]))
        return -1;
    ALLOC_N(sp->events, counts[TR(Span, events)]);
    ALLOC_N(sp->links, counts[TR(Span, links)]);
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case TR(Span, trace_id):
            if (get_id(d, &f, "trace_id", sp->trace_id, &sp->trace_id_len, 16))
                return -1;
            break;
        case TR(Span, span_id):
            if (get_id(d, &f, "span_id", sp->span_id, &sp->span_id_len, 8))
                return -1;
            break;
        case TR(Span, trace_state):
            if (get_string(d, &f, "trace_state", &sp->trace_state))
                return -1;
            break;
        case TR(Span, parent_span_id):
            if (get_id(d, &f, "parent_span_id", sp->parent_span_id, &sp->parent_span_id_len, 8))
                return -1;
            break;
        case TR(Span, flags):
            GET_FIXED32(&f, "flags", sp->flags);
            break;
        case TR(Span, name):
            if (get_string(d, &f, "name", &sp->name))
                return -1;
            break;
        case TR(Span, kind):
            GET_I32(&f, "kind", sp->kind);
            break;
        case TR(Span, start_time_unix_nano):
            GET_FIXED64(&f, "start_time_unix_nano", sp->start_time_unix_nano);
            break;
        case TR(Span, end_time_unix_nano):
            GET_FIXED64(&f, "end_time_unix_nano", sp->end_time_unix_nano);
            break;
        case TR(Span, attributes):
            if (add_attr(d, &f, "attributes", &sp->attrs))
                return -1;
            break;
        case TR(Span, dropped_attributes_count):
            GET_U32(&f, "dropped_attributes_count", sp->dropped_attributes_count);
            break;
        case TR(Span, events):
            DEC_SUB(dec_event, "events", sp->n_events, &sp->events[sp->n_events]);
            sp->n_events++;
            break;
        case TR(Span, dropped_events_count):
            GET_U32(&f, "dropped_events_count", sp->dropped_events_count);
            break;
        case TR(Span, links):
            DEC_SUB(dec_span_link, "links", sp->n_links, &sp->links[sp->n_links]);
            sp->n_links++;
            break;
        case TR(Span, dropped_links_count):
            GET_U32(&f, "dropped_links_count", sp->dropped_links_count);
            break;
        case TR(Span, status):
            EXPECT(&f, WT_LEN, "status");
            path_push(d, "status", -1);
            /* A repeated sub-message merges; proto3 readers do the same. */
            if (dec_status(d, f.ptr, f.ptr + f.len, sp))
                return -1;
            path_pop(d);
            sp->has_status = true;
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_scope_spans(dec *d, const uint8_t *p, const uint8_t *end, pl_scope_spans *ss)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, 0, 0))
        return -1;
    ALLOC_N(ss->spans, counts[TR(ScopeSpans, spans)]);
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case TR(ScopeSpans, scope):
            DEC_SUB(dec_scope, "scope", -1, &ss->scope);
            ss->has_scope = true;
            break;
        case TR(ScopeSpans, spans):
            DEC_SUB(dec_span, "spans", ss->n_spans, &ss->spans[ss->n_spans]);
            ss->n_spans++;
            break;
        case TR(ScopeSpans, schema_url):
            if (get_string(d, &f, "schema_url", &ss->schema_url))
                return -1;
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_resource_spans(dec *d, const uint8_t *p, const uint8_t *end, pl_resource_spans *rs)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, 0, 0))
        return -1;
    ALLOC_N(rs->scopes, counts[TR(ResourceSpans, scope_spans)]);
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case TR(ResourceSpans, resource):
            DEC_SUB(dec_resource, "resource", -1, &rs->resource);
            rs->has_resource = true;
            break;
        case TR(ResourceSpans, scope_spans):
            DEC_SUB(dec_scope_spans, "scope_spans", rs->n_scopes, &rs->scopes[rs->n_scopes]);
            rs->n_scopes++;
            break;
        case TR(ResourceSpans, schema_url):
            if (get_string(d, &f, "schema_url", &rs->schema_url))
                return -1;
            break;
        default: /* including 1000, the old instrumentation_library_spans */
            break;
        }
    }
    return 0;
}

/* Decoders accept (NULL, 0); pointer arithmetic on NULL is undefined. */
static const uint8_t empty_input[1];

static void dec_init(dec *d, pl_batch *b, const uint8_t *buf, size_t budget, pl_err *err)
{
    d->budget = budget;
    d->used = 0;
    d->arena = &b->arena;
    d->err = err;
    d->base = buf;
    d->status = PL_ERR_INVALID;
    d->depth = 0;
    if (err)
        err->msg[0] = '\0';
}

static pl_status decode_traces(pl_batch *b, const uint8_t *buf, size_t len, size_t budget,
                               pl_err *err)
{
    if (!buf)
        buf = empty_input, len = 0;
    dec dd, *d = &dd;
    dec_init(d, b, buf, budget, err);
    if (len > UINT32_MAX)
        return pl_errf(err, PL_ERR_TOO_LARGE, "request of %zu bytes is too large", len);
    pl_traces *t = &b->data.traces;
    memset(t, 0, sizeof(*t));
    const uint8_t *p = buf, *end = buf + len;
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, 0, 0))
        return d->status;
    t->resources = NULL;
    if (counts[CTR(ExportTraceServiceRequest, resource_spans)] &&
        !(t->resources = dec_calloc(d, counts[CTR(ExportTraceServiceRequest, resource_spans)],
                                    sizeof(pl_resource_spans))))
        return d->status;
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return d->status;
        if (f.num != CTR(ExportTraceServiceRequest, resource_spans))
            continue;
        if (f.wt != WT_LEN) {
            wrong_wt(d, "resource_spans", &f, WT_LEN);
            return d->status;
        }
        path_push(d, "resource_spans", t->n_resources);
        if (dec_resource_spans(d, f.ptr, f.ptr + f.len, &t->resources[t->n_resources]))
            return d->status;
        path_pop(d);
        t->n_resources++;
    }
    return PL_OK;
}

/* ---- profiles.v1development --------------------------------------------- */

#define BIT(n) (1u << (n))

static int dec_value_type(dec *d, const uint8_t *p, const uint8_t *end, pl_vtype *vt)
{
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case PR(ValueType, type_strindex):
            GET_I32(&f, "type_strindex", vt->type_strindex);
            break;
        case PR(ValueType, unit_strindex):
            GET_I32(&f, "unit_strindex", vt->unit_strindex);
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_sample(dec *d, const uint8_t *p, const uint8_t *end, pl_sample *s)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts,
                     BIT(PR(Sample, attribute_indices)) | BIT(PR(Sample, values)),
                     BIT(PR(Sample, timestamps_unix_nano))))
        return -1;
    uint32_t cap_attr = counts[PR(Sample, attribute_indices)], cap_val = counts[PR(Sample, values)],
             cap_ts = counts[PR(Sample, timestamps_unix_nano)];
    ALLOC_N(s->attribute_indices, cap_attr);
    ALLOC_N(s->values, cap_val);
    ALLOC_N(s->timestamps_unix_nano, cap_ts);
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case PR(Sample, stack_index):
            GET_I32(&f, "stack_index", s->stack_index);
            break;
        case PR(Sample, attribute_indices):
            if (get_rep_varint(d, &f, "attribute_indices", s->attribute_indices, 4,
                               &s->n_attribute_indices, cap_attr))
                return -1;
            break;
        case PR(Sample, link_index):
            GET_I32(&f, "link_index", s->link_index);
            break;
        case PR(Sample, values):
            if (get_rep_varint(d, &f, "values", s->values, 8, &s->n_values, cap_val))
                return -1;
            break;
        case PR(Sample, timestamps_unix_nano):
            if (get_rep_fixed64(d, &f, "timestamps_unix_nano", s->timestamps_unix_nano,
                                &s->n_timestamps, cap_ts))
                return -1;
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_profile(dec *d, const uint8_t *p, const uint8_t *end, pl_profile *pr)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, BIT(PR(Profile, attribute_indices)), 0))
        return -1;
    uint32_t cap_attr = counts[PR(Profile, attribute_indices)];
    ALLOC_N(pr->samples, counts[PR(Profile, samples)]);
    ALLOC_N(pr->attribute_indices, cap_attr);
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case PR(Profile, sample_type):
            DEC_SUB(dec_value_type, "sample_type", -1, &pr->sample_type);
            pr->has_sample_type = true;
            break;
        case PR(Profile, samples):
            DEC_SUB(dec_sample, "samples", pr->n_samples, &pr->samples[pr->n_samples]);
            pr->n_samples++;
            break;
        case PR(Profile, time_unix_nano):
            GET_FIXED64(&f, "time_unix_nano", pr->time_unix_nano);
            break;
        case PR(Profile, duration_nano):
            GET_U64(&f, "duration_nano", pr->duration_nano);
            break;
        case PR(Profile, period_type):
            DEC_SUB(dec_value_type, "period_type", -1, &pr->period_type);
            pr->has_period_type = true;
            break;
        case PR(Profile, period):
            GET_I64(&f, "period", pr->period);
            break;
        case PR(Profile, profile_id):
            if (get_id(d, &f, "profile_id", pr->profile_id, &pr->profile_id_len, 16))
                return -1;
            break;
        case PR(Profile, dropped_attributes_count):
            GET_U32(&f, "dropped_attributes_count", pr->dropped_attributes_count);
            break;
        case PR(Profile, original_payload_format):
            if (get_string(d, &f, "original_payload_format", &pr->original_payload_format))
                return -1;
            break;
        case PR(Profile, original_payload):
            if (get_bytes(d, &f, "original_payload", &pr->original_payload))
                return -1;
            break;
        case PR(Profile, attribute_indices):
            if (get_rep_varint(d, &f, "attribute_indices", pr->attribute_indices, 4,
                               &pr->n_attribute_indices, cap_attr))
                return -1;
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_scope_profiles(dec *d, const uint8_t *p, const uint8_t *end, pl_scope_profiles *sp)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, 0, 0))
        return -1;
    ALLOC_N(sp->profiles, counts[PR(ScopeProfiles, profiles)]);
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case PR(ScopeProfiles, scope):
            DEC_SUB(dec_scope, "scope", -1, &sp->scope);
            sp->has_scope = true;
            break;
        case PR(ScopeProfiles, profiles):
            DEC_SUB(dec_profile, "profiles", sp->n_profiles, &sp->profiles[sp->n_profiles]);
            sp->n_profiles++;
            break;
        case PR(ScopeProfiles, schema_url):
            if (get_string(d, &f, "schema_url", &sp->schema_url))
                return -1;
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_resource_profiles(dec *d, const uint8_t *p, const uint8_t *end,
                                 pl_resource_profiles *rp)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, 0, 0))
        return -1;
    ALLOC_N(rp->scopes, counts[PR(ResourceProfiles, scope_profiles)]);
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case PR(ResourceProfiles, resource):
            DEC_SUB(dec_resource, "resource", -1, &rp->resource);
            rp->has_resource = true;
            break;
        case PR(ResourceProfiles, scope_profiles):
            DEC_SUB(dec_scope_profiles, "scope_profiles", rp->n_scopes, &rp->scopes[rp->n_scopes]);
            rp->n_scopes++;
            break;
        case PR(ResourceProfiles, schema_url):
            if (get_string(d, &f, "schema_url", &rp->schema_url))
                return -1;
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_mapping(dec *d, const uint8_t *p, const uint8_t *end, pl_mapping *m)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, BIT(PR(Mapping, attribute_indices)), 0))
        return -1;
    uint32_t cap = counts[PR(Mapping, attribute_indices)];
    ALLOC_N(m->attribute_indices, cap);
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case PR(Mapping, memory_start):
            GET_U64(&f, "memory_start", m->memory_start);
            break;
        case PR(Mapping, memory_limit):
            GET_U64(&f, "memory_limit", m->memory_limit);
            break;
        case PR(Mapping, file_offset):
            GET_U64(&f, "file_offset", m->file_offset);
            break;
        case PR(Mapping, filename_strindex):
            GET_I32(&f, "filename_strindex", m->filename_strindex);
            break;
        case PR(Mapping, attribute_indices):
            if (get_rep_varint(d, &f, "attribute_indices", m->attribute_indices, 4,
                               &m->n_attribute_indices, cap))
                return -1;
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_line(dec *d, const uint8_t *p, const uint8_t *end, pl_line *l)
{
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case PR(Line, function_index):
            GET_I32(&f, "function_index", l->function_index);
            break;
        case PR(Line, line):
            GET_I64(&f, "line", l->line);
            break;
        case PR(Line, column):
            GET_I64(&f, "column", l->column);
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_location(dec *d, const uint8_t *p, const uint8_t *end, pl_location *l)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, BIT(PR(Location, attribute_indices)), 0))
        return -1;
    uint32_t cap = counts[PR(Location, attribute_indices)];
    ALLOC_N(l->attribute_indices, cap);
    ALLOC_N(l->lines, counts[PR(Location, lines)]);
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case PR(Location, mapping_index):
            GET_I32(&f, "mapping_index", l->mapping_index);
            break;
        case PR(Location, address):
            GET_U64(&f, "address", l->address);
            break;
        case PR(Location, lines):
            DEC_SUB(dec_line, "lines", l->n_lines, &l->lines[l->n_lines]);
            l->n_lines++;
            break;
        case PR(Location, attribute_indices):
            if (get_rep_varint(d, &f, "attribute_indices", l->attribute_indices, 4,
                               &l->n_attribute_indices, cap))
                return -1;
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_function(dec *d, const uint8_t *p, const uint8_t *end, pl_function *fn)
{
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case PR(Function, name_strindex):
            GET_I32(&f, "name_strindex", fn->name_strindex);
            break;
        case PR(Function, system_name_strindex):
            GET_I32(&f, "system_name_strindex", fn->system_name_strindex);
            break;
        case PR(Function, filename_strindex):
            GET_I32(&f, "filename_strindex", fn->filename_strindex);
            break;
        case PR(Function, start_line):
            GET_I64(&f, "start_line", fn->start_line);
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_link(dec *d, const uint8_t *p, const uint8_t *end, pl_link *l)
{
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case PR(Link, trace_id):
            if (get_id(d, &f, "trace_id", l->trace_id, &l->trace_id_len, 16))
                return -1;
            break;
        case PR(Link, span_id):
            if (get_id(d, &f, "span_id", l->span_id, &l->span_id_len, 8))
                return -1;
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_kvu(dec *d, const uint8_t *p, const uint8_t *end, pl_kvu *a)
{
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        switch (f.num) {
        case PR(KeyValueAndUnit, key_strindex):
            GET_I32(&f, "key_strindex", a->key_strindex);
            break;
        case PR(KeyValueAndUnit, value):
            DEC_SUB(dec_anyvalue, "value", -1, &a->value, 1);
            break;
        case PR(KeyValueAndUnit, unit_strindex):
            GET_I32(&f, "unit_strindex", a->unit_strindex);
            break;
        default:
            break;
        }
    }
    return 0;
}

static int dec_stack(dec *d, const uint8_t *p, const uint8_t *end, pl_stack *s)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, BIT(PR(Stack, location_indices)), 0))
        return -1;
    uint32_t cap = counts[PR(Stack, location_indices)];
    ALLOC_N(s->location_indices, cap);
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        if (f.num == PR(Stack, location_indices) &&
            get_rep_varint(d, &f, "location_indices", s->location_indices, 4,
                           &s->n_location_indices, cap))
            return -1;
    }
    return 0;
}

static int dec_dictionary(dec *d, const uint8_t *p, const uint8_t *end, pl_dictionary *dict)
{
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, 0, 0))
        return -1;
#define TABLE(field, num)                                                                          \
    do {                                                                                           \
        ALLOC_N(dict->field, counts[num]);                                                         \
        dict->cap_##field = counts[num];                                                           \
    } while (0)
    TABLE(mappings, PR(ProfilesDictionary, mapping_table));
    TABLE(locations, PR(ProfilesDictionary, location_table));
    TABLE(functions, PR(ProfilesDictionary, function_table));
    TABLE(links, PR(ProfilesDictionary, link_table));
    TABLE(strings, PR(ProfilesDictionary, string_table));
    TABLE(attributes, PR(ProfilesDictionary, attribute_table));
    TABLE(stacks, PR(ProfilesDictionary, stack_table));
#undef TABLE
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        int rc = 0;
        switch (f.num) {
#define ENTRY(num, name, fn, arr, n)                                                               \
    case num:                                                                                      \
        EXPECT(&f, WT_LEN, name);                                                                  \
        path_push(d, name, dict->n);                                                               \
        rc = fn(d, f.ptr, f.ptr + f.len, &dict->arr[dict->n]);                                     \
        path_pop(d);                                                                               \
        dict->n++;                                                                                 \
        break;
            ENTRY(PR(ProfilesDictionary, mapping_table), "mapping_table", dec_mapping, mappings,
                  n_mappings)
            ENTRY(PR(ProfilesDictionary, location_table), "location_table", dec_location, locations,
                  n_locations)
            ENTRY(PR(ProfilesDictionary, function_table), "function_table", dec_function, functions,
                  n_functions)
            ENTRY(PR(ProfilesDictionary, link_table), "link_table", dec_link, links, n_links)
            ENTRY(PR(ProfilesDictionary, attribute_table), "attribute_table", dec_kvu, attributes,
                  n_attributes)
            ENTRY(PR(ProfilesDictionary, stack_table), "stack_table", dec_stack, stacks, n_stacks)
#undef ENTRY
        case PR(ProfilesDictionary, string_table):
            path_push(d, "string_table", dict->n_strings);
            rc = get_string(d, &f, NULL, &dict->strings[dict->n_strings]);
            path_pop(d);
            dict->n_strings++;
            break;
        default:
            break;
        }
        if (rc)
            return -1;
    }
    return 0;
}

static pl_status decode_profiles(pl_batch *b, const uint8_t *buf, size_t len, size_t budget,
                                 pl_err *err)
{
    if (!buf)
        buf = empty_input, len = 0;
    dec dd, *d = &dd;
    dec_init(d, b, buf, budget, err);
    if (len > UINT32_MAX)
        return pl_errf(err, PL_ERR_TOO_LARGE, "request of %zu bytes is too large", len);
    pl_profiles *ps = &b->data.profiles;
    memset(ps, 0, sizeof(*ps));
    const uint8_t *p = buf, *end = buf + len;
    uint32_t counts[32];
    if (count_fields(d, p, end, counts, 0, 0))
        return d->status;
    uint32_t n_res = counts[CPR(ExportProfilesServiceRequest, resource_profiles)];
    if (n_res && !(ps->resources = dec_calloc(d, n_res, sizeof(pl_resource_profiles))))
        return d->status;
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return d->status;
        if (f.num == CPR(ExportProfilesServiceRequest, resource_profiles)) {
            if (f.wt != WT_LEN) {
                wrong_wt(d, "resource_profiles", &f, WT_LEN);
                return d->status;
            }
            path_push(d, "resource_profiles", ps->n_resources);
            if (dec_resource_profiles(d, f.ptr, f.ptr + f.len, &ps->resources[ps->n_resources]))
                return d->status;
            path_pop(d);
            ps->n_resources++;
        } else if (f.num == CPR(ExportProfilesServiceRequest, dictionary)) {
            if (f.wt != WT_LEN) {
                wrong_wt(d, "dictionary", &f, WT_LEN);
                return d->status;
            }
            if (ps->has_dictionary) {
                /* Two dictionary records would merge (append) in protobuf;
                 * nobody sends that, and merging tables is not worth it. */
                fail(d, "dictionary", "appears twice");
                return d->status;
            }
            path_push(d, "dictionary", -1);
            if (dec_dictionary(d, f.ptr, f.ptr + f.len, &ps->dict))
                return d->status;
            path_pop(d);
            ps->has_dictionary = true;
        }
    }
    return pl_otlp_validate_profiles(ps, err);
}

pl_status pl_otlp_decode_traces(pl_batch *b, const uint8_t *buf, size_t len, pl_err *err)
{
    return decode_traces(b, buf, len, PL_OTLP_DECODE_BUDGET, err);
}

pl_status pl_otlp_decode_profiles(pl_batch *b, const uint8_t *buf, size_t len, pl_err *err)
{
    return decode_profiles(b, buf, len, PL_OTLP_DECODE_BUDGET, err);
}

pl_status pl_otlp_decode_ex(pl_batch *b, const uint8_t *buf, size_t len, size_t budget, pl_err *err)
{
    switch (b->signal) {
    case PL_SIGNAL_TRACES:
        return decode_traces(b, buf, len, budget, err);
    case PL_SIGNAL_PROFILES:
        return decode_profiles(b, buf, len, budget, err);
    default:
        return pl_errf(err, PL_ERR_UNSUPPORTED, "only traces and profiles are decoded");
    }
}

/* ---- profiles index validation ----------------------------------------- */

typedef struct vctx {
    const pl_dictionary *dict;
    pl_err *err;
} vctx;

/* Index 0 ("not set") is accepted even when a table is empty. */
static inline bool in_range(int32_t i, uint32_t n)
{
    return i == 0 || (i > 0 && (uint32_t)i < n);
}

#define VCHECK(idx, n, table, ...)                                                                 \
    do {                                                                                           \
        if (!in_range((idx), (n))) {                                                               \
            char where_[256];                                                                      \
            snprintf(where_, sizeof where_, __VA_ARGS__);                                          \
            return pl_errf(v->err, PL_ERR_INVALID,                                                 \
                           "%s: index %d out of range (%s has %u entries)", where_, (int)(idx),    \
                           table, (unsigned)(n));                                                  \
        }                                                                                          \
    } while (0)

static pl_status validate_value(const vctx *v, const pl_value *val, const char *where, int depth)
{
    if (depth > PL_OTLP_MAX_DEPTH)
        return pl_errf(v->err, PL_ERR_INVALID, "%s: values nested too deep", where);
    switch (val->type) {
    case PL_VALUE_STRINDEX:
        VCHECK(val->u.strindex, v->dict->n_strings, "string_table", "%s.string_value_strindex",
               where);
        break;
    case PL_VALUE_ARRAY:
        for (uint32_t i = 0; i < val->u.array.n; i++) {
            pl_status st = validate_value(v, &val->u.array.items[i], where, depth + 1);
            if (st)
                return st;
        }
        break;
    case PL_VALUE_KVLIST:
        for (uint32_t i = 0; i < val->u.kvlist.n; i++) {
            VCHECK(val->u.kvlist.items[i].key_strindex, v->dict->n_strings, "string_table",
                   "%s.kvlist_value.values[%u].key_strindex", where, i);
            pl_status st = validate_value(v, &val->u.kvlist.items[i].value, where, depth + 1);
            if (st)
                return st;
        }
        break;
    default:
        break;
    }
    return PL_OK;
}

static pl_status validate_attrs(const vctx *v, const pl_attrs *a, const char *where)
{
    for (uint32_t i = 0; i < a->n; i++) {
        VCHECK(a->items[i].key_strindex, v->dict->n_strings, "string_table",
               "%s.attributes[%u].key_strindex", where, i);
        char w[200];
        snprintf(w, sizeof w, "%s.attributes[%u].value", where, i);
        pl_status st = validate_value(v, &a->items[i].value, w, 0);
        if (st)
            return st;
    }
    return PL_OK;
}

static pl_status validate_indices(const vctx *v, const int32_t *idx, uint32_t n, uint32_t table_n,
                                  const char *table, const char *where)
{
    for (uint32_t i = 0; i < n; i++)
        VCHECK(idx[i], table_n, table, "%s[%u]", where, i);
    return PL_OK;
}

pl_status pl_otlp_validate_profiles(const pl_profiles *ps, pl_err *err)
{
    const pl_dictionary *dict = &ps->dict;
    vctx vc = {dict, err}, *v = &vc;
    pl_status st;
    char w[256];
    for (uint32_t r = 0; r < ps->n_resources; r++) {
        const pl_resource_profiles *rp = &ps->resources[r];
        snprintf(w, sizeof w, "resource_profiles[%u].resource", r);
        if ((st = validate_attrs(v, &rp->resource.attrs, w)))
            return st;
        for (uint32_t s = 0; s < rp->n_scopes; s++) {
            const pl_scope_profiles *sp = &rp->scopes[s];
            snprintf(w, sizeof w, "resource_profiles[%u].scope_profiles[%u].scope", r, s);
            if ((st = validate_attrs(v, &sp->scope.attrs, w)))
                return st;
            for (uint32_t k = 0; k < sp->n_profiles; k++) {
                const pl_profile *pr = &sp->profiles[k];
                char pw[128];
                snprintf(pw, sizeof pw, "resource_profiles[%u].scope_profiles[%u].profiles[%u]", r,
                         s, k);
                VCHECK(pr->sample_type.type_strindex, dict->n_strings, "string_table",
                       "%s.sample_type.type_strindex", pw);
                VCHECK(pr->sample_type.unit_strindex, dict->n_strings, "string_table",
                       "%s.sample_type.unit_strindex", pw);
                VCHECK(pr->period_type.type_strindex, dict->n_strings, "string_table",
                       "%s.period_type.type_strindex", pw);
                VCHECK(pr->period_type.unit_strindex, dict->n_strings, "string_table",
                       "%s.period_type.unit_strindex", pw);
                snprintf(w, sizeof w, "%s.attribute_indices", pw);
                if ((st = validate_indices(v, pr->attribute_indices, pr->n_attribute_indices,
                                           dict->n_attributes, "attribute_table", w)))
                    return st;
                for (uint32_t i = 0; i < pr->n_samples; i++) {
                    const pl_sample *sm = &pr->samples[i];
                    VCHECK(sm->stack_index, dict->n_stacks, "stack_table",
                           "%s.samples[%u].stack_index", pw, i);
                    VCHECK(sm->link_index, dict->n_links, "link_table", "%s.samples[%u].link_index",
                           pw, i);
                    snprintf(w, sizeof w, "%s.samples[%u].attribute_indices", pw, i);
                    if ((st = validate_indices(v, sm->attribute_indices, sm->n_attribute_indices,
                                               dict->n_attributes, "attribute_table", w)))
                        return st;
                }
            }
        }
    }
    for (uint32_t i = 0; i < dict->n_mappings; i++) {
        const pl_mapping *m = &dict->mappings[i];
        VCHECK(m->filename_strindex, dict->n_strings, "string_table",
               "dictionary.mapping_table[%u].filename_strindex", i);
        snprintf(w, sizeof w, "dictionary.mapping_table[%u].attribute_indices", i);
        if ((st = validate_indices(v, m->attribute_indices, m->n_attribute_indices,
                                   dict->n_attributes, "attribute_table", w)))
            return st;
    }
    for (uint32_t i = 0; i < dict->n_locations; i++) {
        const pl_location *l = &dict->locations[i];
        VCHECK(l->mapping_index, dict->n_mappings, "mapping_table",
               "dictionary.location_table[%u].mapping_index", i);
        for (uint32_t k = 0; k < l->n_lines; k++)
            VCHECK(l->lines[k].function_index, dict->n_functions, "function_table",
                   "dictionary.location_table[%u].lines[%u].function_index", i, k);
        snprintf(w, sizeof w, "dictionary.location_table[%u].attribute_indices", i);
        if ((st = validate_indices(v, l->attribute_indices, l->n_attribute_indices,
                                   dict->n_attributes, "attribute_table", w)))
            return st;
    }
    for (uint32_t i = 0; i < dict->n_functions; i++) {
        const pl_function *f = &dict->functions[i];
        VCHECK(f->name_strindex, dict->n_strings, "string_table",
               "dictionary.function_table[%u].name_strindex", i);
        VCHECK(f->system_name_strindex, dict->n_strings, "string_table",
               "dictionary.function_table[%u].system_name_strindex", i);
        VCHECK(f->filename_strindex, dict->n_strings, "string_table",
               "dictionary.function_table[%u].filename_strindex", i);
    }
    for (uint32_t i = 0; i < dict->n_attributes; i++) {
        const pl_kvu *a = &dict->attributes[i];
        VCHECK(a->key_strindex, dict->n_strings, "string_table",
               "dictionary.attribute_table[%u].key_strindex", i);
        VCHECK(a->unit_strindex, dict->n_strings, "string_table",
               "dictionary.attribute_table[%u].unit_strindex", i);
        snprintf(w, sizeof w, "dictionary.attribute_table[%u].value", i);
        if ((st = validate_value(v, &a->value, w, 0)))
            return st;
    }
    for (uint32_t i = 0; i < dict->n_stacks; i++) {
        snprintf(w, sizeof w, "dictionary.stack_table[%u].location_indices", i);
        if ((st = validate_indices(v, dict->stacks[i].location_indices,
                                   dict->stacks[i].n_location_indices, dict->n_locations,
                                   "location_table", w)))
            return st;
    }
    for (uint32_t i = 0; i < dict->n_links; i++) {
        const pl_link *l = &dict->links[i];
        if ((l->trace_id_len != 0 && l->trace_id_len != 16) ||
            (l->span_id_len != 0 && l->span_id_len != 8))
            return pl_errf(err, PL_ERR_INVALID, "dictionary.link_table[%u]: bad id length", i);
    }
    return PL_OK;
}

/* ---- encoder ------------------------------------------------------------ */

static inline bool w_room(pl_buf *b, size_t n)
{
    return !b->failed && (b->cap - b->len >= n || pl_buf_reserve(b, n));
}

static inline void w_varint(pl_buf *b, uint64_t v)
{
    if (!w_room(b, 10))
        return;
    uint8_t *p = b->data + b->len;
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    b->len = (size_t)(p - b->data);
}

static inline void w_tag(pl_buf *b, uint32_t num, int wt)
{
    w_varint(b, (uint64_t)num << 3 | (uint64_t)wt);
}

static inline void w_raw(pl_buf *b, const void *p, size_t n)
{
    if (n && w_room(b, n)) {
        memcpy(b->data + b->len, p, n);
        b->len += n;
    }
}

static inline void w_len_field(pl_buf *b, uint32_t num, const void *p, size_t n)
{
    w_tag(b, num, WT_LEN);
    w_varint(b, n);
    w_raw(b, p, n);
}

static inline void w_bytes_opt(pl_buf *b, uint32_t num, pl_bytes s)
{
    if (s.len)
        w_len_field(b, num, s.ptr, s.len);
}

static inline void w_uvarint_opt(pl_buf *b, uint32_t num, uint64_t v)
{
    if (v) {
        w_tag(b, num, WT_VARINT);
        w_varint(b, v);
    }
}

/* int32 is sign-extended to 64 bits on the wire (no zigzag). */
static inline void w_i32_opt(pl_buf *b, uint32_t num, int32_t v)
{
    w_uvarint_opt(b, num, (uint64_t)(int64_t)v);
}

static inline void w_fixed64_opt(pl_buf *b, uint32_t num, uint64_t v)
{
    if (v && w_room(b, 15)) {
        w_tag(b, num, WT_I64);
        uint8_t *p = b->data + b->len;
        for (int i = 0; i < 8; i++)
            p[i] = (uint8_t)(v >> (8 * i));
        b->len += 8;
    }
}

static inline void w_fixed32_opt(pl_buf *b, uint32_t num, uint32_t v)
{
    if (v && w_room(b, 10)) {
        w_tag(b, num, WT_I32);
        uint8_t *p = b->data + b->len;
        for (int i = 0; i < 4; i++)
            p[i] = (uint8_t)(v >> (8 * i));
        b->len += 4;
    }
}

/* Starts a length-delimited field with a one-byte length placeholder;
 * returns the offset where its content starts. */
static inline size_t w_begin(pl_buf *b, uint32_t num)
{
    w_tag(b, num, WT_LEN);
    if (w_room(b, 1))
        b->data[b->len++] = 0;
    return b->len;
}

static inline void w_end(pl_buf *b, size_t start)
{
    if (b->failed)
        return;
    size_t len = b->len - start;
    if (len < 0x80) {
        b->data[start - 1] = (uint8_t)len;
        return;
    }
    size_t extra = 0;
    for (size_t v = len >> 7; v; v >>= 7)
        extra++;
    if (!w_room(b, extra))
        return;
    memmove(b->data + start + extra, b->data + start, len);
    uint8_t *p = b->data + start - 1;
    size_t v = len;
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p = (uint8_t)v;
    b->len += extra;
}

static void enc_kv(pl_buf *b, const pl_kv *kv);

static void enc_anyvalue(pl_buf *b, const pl_value *v)
{
    switch (v->type) {
    case PL_VALUE_EMPTY:
        break;
    case PL_VALUE_STRING:
        w_len_field(b, CM(AnyValue, string_value), v->u.str.ptr, v->u.str.len);
        break;
    case PL_VALUE_BOOL:
        w_tag(b, CM(AnyValue, bool_value), WT_VARINT);
        w_varint(b, v->u.b ? 1 : 0);
        break;
    case PL_VALUE_INT:
        w_tag(b, CM(AnyValue, int_value), WT_VARINT);
        w_varint(b, (uint64_t)v->u.i);
        break;
    case PL_VALUE_DOUBLE: {
        uint64_t bits;
        memcpy(&bits, &v->u.d, 8);
        w_tag(b, CM(AnyValue, double_value), WT_I64);
        uint8_t le[8];
        for (int i = 0; i < 8; i++)
            le[i] = (uint8_t)(bits >> (8 * i));
        w_raw(b, le, 8);
        break;
    }
    case PL_VALUE_ARRAY: {
        size_t s = w_begin(b, CM(AnyValue, array_value));
        for (uint32_t i = 0; i < v->u.array.n; i++) {
            size_t e = w_begin(b, CM(ArrayValue, values));
            enc_anyvalue(b, &v->u.array.items[i]);
            w_end(b, e);
        }
        w_end(b, s);
        break;
    }
    case PL_VALUE_KVLIST: {
        size_t s = w_begin(b, CM(AnyValue, kvlist_value));
        for (uint32_t i = 0; i < v->u.kvlist.n; i++) {
            size_t e = w_begin(b, CM(KeyValueList, values));
            enc_kv(b, &v->u.kvlist.items[i]);
            w_end(b, e);
        }
        w_end(b, s);
        break;
    }
    case PL_VALUE_BYTES:
        w_len_field(b, CM(AnyValue, bytes_value), v->u.str.ptr, v->u.str.len);
        break;
    case PL_VALUE_STRINDEX:
        w_tag(b, CM(AnyValue, string_value_strindex), WT_VARINT);
        w_varint(b, (uint64_t)(int64_t)v->u.strindex);
        break;
    }
}

static void enc_kv(pl_buf *b, const pl_kv *kv)
{
    w_bytes_opt(b, CM(KeyValue, key), kv->key);
    size_t s = w_begin(b, CM(KeyValue, value));
    enc_anyvalue(b, &kv->value);
    w_end(b, s);
    w_i32_opt(b, CM(KeyValue, key_strindex), kv->key_strindex);
}

static void enc_attrs(pl_buf *b, uint32_t num, const pl_attrs *a)
{
    for (uint32_t i = 0; i < a->n; i++) {
        size_t s = w_begin(b, num);
        enc_kv(b, &a->items[i]);
        w_end(b, s);
    }
}

static void enc_resource(pl_buf *b, uint32_t num, const pl_resource *r)
{
    size_t s = w_begin(b, num);
    enc_attrs(b, RES(Resource, attributes), &r->attrs);
    w_uvarint_opt(b, RES(Resource, dropped_attributes_count), r->dropped_attributes_count);
    for (uint32_t i = 0; i < r->n_entity_refs; i++) {
        const pl_entity_ref *e = &r->entity_refs[i];
        size_t es = w_begin(b, RES(Resource, entity_refs));
        w_bytes_opt(b, CM(EntityRef, schema_url), e->schema_url);
        w_bytes_opt(b, CM(EntityRef, type), e->type);
        for (uint32_t k = 0; k < e->n_id_keys; k++)
            w_len_field(b, CM(EntityRef, id_keys), e->id_keys[k].ptr, e->id_keys[k].len);
        for (uint32_t k = 0; k < e->n_description_keys; k++)
            w_len_field(b, CM(EntityRef, description_keys), e->description_keys[k].ptr,
                        e->description_keys[k].len);
        w_end(b, es);
    }
    w_end(b, s);
}

static void enc_scope(pl_buf *b, uint32_t num, const pl_scope *sc)
{
    size_t s = w_begin(b, num);
    w_bytes_opt(b, CM(InstrumentationScope, name), sc->name);
    w_bytes_opt(b, CM(InstrumentationScope, version), sc->version);
    enc_attrs(b, CM(InstrumentationScope, attributes), &sc->attrs);
    w_uvarint_opt(b, CM(InstrumentationScope, dropped_attributes_count),
                  sc->dropped_attributes_count);
    w_end(b, s);
}

static void enc_id(pl_buf *b, uint32_t num, const uint8_t *id, uint8_t len)
{
    if (len)
        w_len_field(b, num, id, len);
}

static void enc_span(pl_buf *b, const pl_span *sp)
{
    enc_id(b, TR(Span, trace_id), sp->trace_id, sp->trace_id_len);
    enc_id(b, TR(Span, span_id), sp->span_id, sp->span_id_len);
    w_bytes_opt(b, TR(Span, trace_state), sp->trace_state);
    enc_id(b, TR(Span, parent_span_id), sp->parent_span_id, sp->parent_span_id_len);
    w_bytes_opt(b, TR(Span, name), sp->name);
    w_i32_opt(b, TR(Span, kind), sp->kind);
    w_fixed64_opt(b, TR(Span, start_time_unix_nano), sp->start_time_unix_nano);
    w_fixed64_opt(b, TR(Span, end_time_unix_nano), sp->end_time_unix_nano);
    enc_attrs(b, TR(Span, attributes), &sp->attrs);
    w_uvarint_opt(b, TR(Span, dropped_attributes_count), sp->dropped_attributes_count);
    for (uint32_t i = 0; i < sp->n_events; i++) {
        const pl_span_event *ev = &sp->events[i];
        size_t s = w_begin(b, TR(Span, events));
        w_fixed64_opt(b, TR(Span_Event, time_unix_nano), ev->time_unix_nano);
        w_bytes_opt(b, TR(Span_Event, name), ev->name);
        enc_attrs(b, TR(Span_Event, attributes), &ev->attrs);
        w_uvarint_opt(b, TR(Span_Event, dropped_attributes_count), ev->dropped_attributes_count);
        w_end(b, s);
    }
    w_uvarint_opt(b, TR(Span, dropped_events_count), sp->dropped_events_count);
    for (uint32_t i = 0; i < sp->n_links; i++) {
        const pl_span_link *l = &sp->links[i];
        size_t s = w_begin(b, TR(Span, links));
        enc_id(b, TR(Span_Link, trace_id), l->trace_id, l->trace_id_len);
        enc_id(b, TR(Span_Link, span_id), l->span_id, l->span_id_len);
        w_bytes_opt(b, TR(Span_Link, trace_state), l->trace_state);
        enc_attrs(b, TR(Span_Link, attributes), &l->attrs);
        w_uvarint_opt(b, TR(Span_Link, dropped_attributes_count), l->dropped_attributes_count);
        w_fixed32_opt(b, TR(Span_Link, flags), l->flags);
        w_end(b, s);
    }
    w_uvarint_opt(b, TR(Span, dropped_links_count), sp->dropped_links_count);
    if (sp->has_status || sp->status.code || sp->status.message.len) {
        size_t s = w_begin(b, TR(Span, status));
        w_bytes_opt(b, TR(Status, message), sp->status.message);
        w_i32_opt(b, TR(Status, code), sp->status.code);
        w_end(b, s);
    }
    w_fixed32_opt(b, TR(Span, flags), sp->flags);
}

bool pl_otlp_encode_traces(const pl_traces *t, pl_buf *b)
{
    for (uint32_t r = 0; r < t->n_resources; r++) {
        const pl_resource_spans *rs = &t->resources[r];
        size_t rstart = w_begin(b, CTR(ExportTraceServiceRequest, resource_spans));
        if (rs->has_resource)
            enc_resource(b, TR(ResourceSpans, resource), &rs->resource);
        for (uint32_t s = 0; s < rs->n_scopes; s++) {
            const pl_scope_spans *ss = &rs->scopes[s];
            size_t sstart = w_begin(b, TR(ResourceSpans, scope_spans));
            if (ss->has_scope)
                enc_scope(b, TR(ScopeSpans, scope), &ss->scope);
            for (uint32_t i = 0; i < ss->n_spans; i++) {
                size_t spstart = w_begin(b, TR(ScopeSpans, spans));
                enc_span(b, &ss->spans[i]);
                w_end(b, spstart);
            }
            w_bytes_opt(b, TR(ScopeSpans, schema_url), ss->schema_url);
            w_end(b, sstart);
        }
        w_bytes_opt(b, TR(ResourceSpans, schema_url), rs->schema_url);
        w_end(b, rstart);
    }
    return pl_buf_ok(b);
}

static void enc_packed_i32(pl_buf *b, uint32_t num, const int32_t *v, uint32_t n)
{
    if (!n)
        return;
    size_t s = w_begin(b, num);
    for (uint32_t i = 0; i < n; i++)
        w_varint(b, (uint64_t)(int64_t)v[i]);
    w_end(b, s);
}

static void enc_packed_i64(pl_buf *b, uint32_t num, const int64_t *v, uint32_t n)
{
    if (!n)
        return;
    size_t s = w_begin(b, num);
    for (uint32_t i = 0; i < n; i++)
        w_varint(b, (uint64_t)v[i]);
    w_end(b, s);
}

static void enc_packed_fixed64(pl_buf *b, uint32_t num, const uint64_t *v, uint32_t n)
{
    if (!n)
        return;
    w_tag(b, num, WT_LEN);
    w_varint(b, (uint64_t)n * 8);
    if (!w_room(b, (size_t)n * 8))
        return;
    uint8_t *p = b->data + b->len;
    for (uint32_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            *p++ = (uint8_t)(v[i] >> (8 * k));
    b->len += (size_t)n * 8;
}

static void enc_value_type(pl_buf *b, uint32_t num, const pl_vtype *vt)
{
    size_t s = w_begin(b, num);
    w_i32_opt(b, PR(ValueType, type_strindex), vt->type_strindex);
    w_i32_opt(b, PR(ValueType, unit_strindex), vt->unit_strindex);
    w_end(b, s);
}

static void enc_profile(pl_buf *b, const pl_profile *pr)
{
    if (pr->has_sample_type)
        enc_value_type(b, PR(Profile, sample_type), &pr->sample_type);
    for (uint32_t i = 0; i < pr->n_samples; i++) {
        const pl_sample *sm = &pr->samples[i];
        size_t s = w_begin(b, PR(Profile, samples));
        w_i32_opt(b, PR(Sample, stack_index), sm->stack_index);
        enc_packed_i32(b, PR(Sample, attribute_indices), sm->attribute_indices,
                       sm->n_attribute_indices);
        w_i32_opt(b, PR(Sample, link_index), sm->link_index);
        enc_packed_i64(b, PR(Sample, values), sm->values, sm->n_values);
        enc_packed_fixed64(b, PR(Sample, timestamps_unix_nano), sm->timestamps_unix_nano,
                           sm->n_timestamps);
        w_end(b, s);
    }
    w_fixed64_opt(b, PR(Profile, time_unix_nano), pr->time_unix_nano);
    w_uvarint_opt(b, PR(Profile, duration_nano), pr->duration_nano);
    if (pr->has_period_type)
        enc_value_type(b, PR(Profile, period_type), &pr->period_type);
    w_uvarint_opt(b, PR(Profile, period), (uint64_t)pr->period);
    enc_id(b, PR(Profile, profile_id), pr->profile_id, pr->profile_id_len);
    w_uvarint_opt(b, PR(Profile, dropped_attributes_count), pr->dropped_attributes_count);
    w_bytes_opt(b, PR(Profile, original_payload_format), pr->original_payload_format);
    w_bytes_opt(b, PR(Profile, original_payload), pr->original_payload);
    enc_packed_i32(b, PR(Profile, attribute_indices), pr->attribute_indices,
                   pr->n_attribute_indices);
}

static void enc_dictionary(pl_buf *b, uint32_t num, const pl_dictionary *d)
{
    size_t ds = w_begin(b, num);
    for (uint32_t i = 0; i < d->n_mappings; i++) {
        const pl_mapping *m = &d->mappings[i];
        size_t s = w_begin(b, PR(ProfilesDictionary, mapping_table));
        w_uvarint_opt(b, PR(Mapping, memory_start), m->memory_start);
        w_uvarint_opt(b, PR(Mapping, memory_limit), m->memory_limit);
        w_uvarint_opt(b, PR(Mapping, file_offset), m->file_offset);
        w_i32_opt(b, PR(Mapping, filename_strindex), m->filename_strindex);
        enc_packed_i32(b, PR(Mapping, attribute_indices), m->attribute_indices,
                       m->n_attribute_indices);
        w_end(b, s);
    }
    for (uint32_t i = 0; i < d->n_locations; i++) {
        const pl_location *l = &d->locations[i];
        size_t s = w_begin(b, PR(ProfilesDictionary, location_table));
        w_i32_opt(b, PR(Location, mapping_index), l->mapping_index);
        w_uvarint_opt(b, PR(Location, address), l->address);
        for (uint32_t k = 0; k < l->n_lines; k++) {
            size_t ls = w_begin(b, PR(Location, lines));
            w_i32_opt(b, PR(Line, function_index), l->lines[k].function_index);
            w_uvarint_opt(b, PR(Line, line), (uint64_t)l->lines[k].line);
            w_uvarint_opt(b, PR(Line, column), (uint64_t)l->lines[k].column);
            w_end(b, ls);
        }
        enc_packed_i32(b, PR(Location, attribute_indices), l->attribute_indices,
                       l->n_attribute_indices);
        w_end(b, s);
    }
    for (uint32_t i = 0; i < d->n_functions; i++) {
        const pl_function *f = &d->functions[i];
        size_t s = w_begin(b, PR(ProfilesDictionary, function_table));
        w_i32_opt(b, PR(Function, name_strindex), f->name_strindex);
        w_i32_opt(b, PR(Function, system_name_strindex), f->system_name_strindex);
        w_i32_opt(b, PR(Function, filename_strindex), f->filename_strindex);
        w_uvarint_opt(b, PR(Function, start_line), (uint64_t)f->start_line);
        w_end(b, s);
    }
    for (uint32_t i = 0; i < d->n_links; i++) {
        const pl_link *l = &d->links[i];
        size_t s = w_begin(b, PR(ProfilesDictionary, link_table));
        enc_id(b, PR(Link, trace_id), l->trace_id, l->trace_id_len);
        enc_id(b, PR(Link, span_id), l->span_id, l->span_id_len);
        w_end(b, s);
    }
    for (uint32_t i = 0; i < d->n_strings; i++)
        w_len_field(b, PR(ProfilesDictionary, string_table), d->strings[i].ptr, d->strings[i].len);
    for (uint32_t i = 0; i < d->n_attributes; i++) {
        const pl_kvu *a = &d->attributes[i];
        size_t s = w_begin(b, PR(ProfilesDictionary, attribute_table));
        w_i32_opt(b, PR(KeyValueAndUnit, key_strindex), a->key_strindex);
        if (a->value.type != PL_VALUE_EMPTY) {
            size_t vs = w_begin(b, PR(KeyValueAndUnit, value));
            enc_anyvalue(b, &a->value);
            w_end(b, vs);
        }
        w_i32_opt(b, PR(KeyValueAndUnit, unit_strindex), a->unit_strindex);
        w_end(b, s);
    }
    for (uint32_t i = 0; i < d->n_stacks; i++) {
        size_t s = w_begin(b, PR(ProfilesDictionary, stack_table));
        enc_packed_i32(b, PR(Stack, location_indices), d->stacks[i].location_indices,
                       d->stacks[i].n_location_indices);
        w_end(b, s);
    }
    w_end(b, ds);
}

bool pl_otlp_encode_profiles(const pl_profiles *ps, pl_buf *b)
{
    for (uint32_t r = 0; r < ps->n_resources; r++) {
        const pl_resource_profiles *rp = &ps->resources[r];
        size_t rstart = w_begin(b, CPR(ExportProfilesServiceRequest, resource_profiles));
        if (rp->has_resource)
            enc_resource(b, PR(ResourceProfiles, resource), &rp->resource);
        for (uint32_t s = 0; s < rp->n_scopes; s++) {
            const pl_scope_profiles *sp = &rp->scopes[s];
            size_t sstart = w_begin(b, PR(ResourceProfiles, scope_profiles));
            if (sp->has_scope)
                enc_scope(b, PR(ScopeProfiles, scope), &sp->scope);
            for (uint32_t i = 0; i < sp->n_profiles; i++) {
                size_t pstart = w_begin(b, PR(ScopeProfiles, profiles));
                enc_profile(b, &sp->profiles[i]);
                w_end(b, pstart);
            }
            w_bytes_opt(b, PR(ScopeProfiles, schema_url), sp->schema_url);
            w_end(b, sstart);
        }
        w_bytes_opt(b, PR(ResourceProfiles, schema_url), rp->schema_url);
        w_end(b, rstart);
    }
    if (ps->has_dictionary)
        enc_dictionary(b, CPR(ExportProfilesServiceRequest, dictionary), &ps->dict);
    return pl_buf_ok(b);
}

/* ---- logs / metrics pass-through ---------------------------------------- */

/* Walks the LEN occurrences of field `num` in [p, end) and calls fn on each. */
typedef int (*walk_fn)(dec *d, const uint8_t *p, const uint8_t *end, size_t *count);

static int walk_children(dec *d, const uint8_t *p, const uint8_t *end, uint32_t num,
                         const char *name, walk_fn fn, size_t *count)
{
    uint32_t idx = 0;
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        if (f.num != num)
            continue;
        EXPECT(&f, WT_LEN, name);
        path_push(d, name, idx++);
        int rc = fn(d, f.ptr, f.ptr + f.len, count);
        path_pop(d);
        if (rc)
            return -1;
    }
    return 0;
}

static int walk_count_only(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    (*count)++;
    /* Check the record's own framing too. */
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
    }
    return 0;
}

static int walk_scope_logs(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    return walk_children(d, p, end, LG(ScopeLogs, log_records), "log_records", walk_count_only,
                         count);
}

static int walk_resource_logs(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    return walk_children(d, p, end, LG(ResourceLogs, scope_logs), "scope_logs", walk_scope_logs,
                         count);
}

static int walk_metric(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        const char *name = NULL;
        switch (f.num) {
        case MT(Metric, gauge):
            name = "gauge";
            break;
        case MT(Metric, sum):
            name = "sum";
            break;
        case MT(Metric, histogram):
            name = "histogram";
            break;
        case MT(Metric, exponential_histogram):
            name = "exponential_histogram";
            break;
        case MT(Metric, summary):
            name = "summary";
            break;
        default:
            continue;
        }
        _Static_assert(MT(Gauge, data_points) == MT(Sum, data_points) &&
                           MT(Sum, data_points) == MT(Histogram, data_points) &&
                           MT(Histogram, data_points) == MT(ExponentialHistogram, data_points) &&
                           MT(ExponentialHistogram, data_points) == MT(Summary, data_points),
                       "data_points share one field number");
        EXPECT(&f, WT_LEN, name);
        path_push(d, name, -1);
        int rc = walk_children(d, f.ptr, f.ptr + f.len, MT(Gauge, data_points), "data_points",
                               walk_count_only, count);
        path_pop(d);
        if (rc)
            return -1;
    }
    return 0;
}

static int walk_scope_metrics(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    return walk_children(d, p, end, MT(ScopeMetrics, metrics), "metrics", walk_metric, count);
}

static int walk_resource_metrics(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    return walk_children(d, p, end, MT(ResourceMetrics, scope_metrics), "scope_metrics",
                         walk_scope_metrics, count);
}

static pl_status count_request(const uint8_t *buf, size_t len, uint32_t num, const char *name,
                               walk_fn fn, size_t *count, pl_err *err)
{
    if (!buf)
        buf = empty_input, len = 0;
    dec dd = {.err = err, .base = buf, .status = PL_ERR_INVALID};
    size_t n = 0;
    if (err)
        err->msg[0] = '\0';
    if (walk_children(&dd, buf, buf + len, num, name, fn, &n))
        return dd.status;
    if (count)
        *count = n;
    return PL_OK;
}

pl_status pl_otlp_count_logs(const uint8_t *buf, size_t len, size_t *count, pl_err *err)
{
    return count_request(buf, len, CLG(ExportLogsServiceRequest, resource_logs), "resource_logs",
                         walk_resource_logs, count, err);
}

pl_status pl_otlp_count_metrics(const uint8_t *buf, size_t len, size_t *count, pl_err *err)
{
    return count_request(buf, len, CMT(ExportMetricsServiceRequest, resource_metrics),
                         "resource_metrics", walk_resource_metrics, count, err);
}

/* ---- responses and google.rpc.Status ------------------------------------ */

bool pl_otlp_encode_export_response(pl_buf *b, int64_t rejected, const char *message)
{
    size_t s = w_begin(b, CTR(ExportTraceServiceResponse, partial_success));
    w_uvarint_opt(b, CTR(ExportTracePartialSuccess, rejected_spans), (uint64_t)rejected);
    if (message && *message)
        w_len_field(b, CTR(ExportTracePartialSuccess, error_message), message, strlen(message));
    w_end(b, s);
    return pl_buf_ok(b);
}

bool pl_otlp_encode_export_response_json(pl_buf *b, pl_signal signal, int64_t rejected,
                                         const char *message)
{
    static const char *const keys[PL_SIGNAL_COUNT] = {"rejectedSpans", "rejectedProfiles",
                                                      "rejectedLogRecords", "rejectedDataPoints"};
    pl_buf_append_str(b, "{\"partialSuccess\":{");
    bool comma = false;
    if (rejected) {
        pl_buf_printf(b, "\"%s\":\"%" PRId64 "\"",
                      keys[(unsigned)signal < PL_SIGNAL_COUNT ? signal : 0], rejected);
        comma = true;
    }
    if (message && *message) {
        pl_buf_append_str(b, comma ? ",\"errorMessage\":" : "\"errorMessage\":");
        pl_buf_json_string(b, message, strlen(message));
    }
    pl_buf_append_str(b, "}}");
    return pl_buf_ok(b);
}

pl_status pl_otlp_decode_export_response(const uint8_t *buf, size_t len, int64_t *rejected,
                                         pl_bytes *message, pl_err *err)
{
    if (!buf)
        buf = empty_input, len = 0;
    dec dd = {.err = err, .base = buf, .status = PL_ERR_INVALID}, *d = &dd;
    if (rejected)
        *rejected = 0;
    if (message)
        *message = (pl_bytes){NULL, 0};
    const uint8_t *p = buf, *end = buf + len;
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return d->status;
        if (f.num != CTR(ExportTraceServiceResponse, partial_success))
            continue;
        if (f.wt != WT_LEN) {
            wrong_wt(d, "partial_success", &f, WT_LEN);
            return d->status;
        }
        const uint8_t *q = f.ptr, *qend = f.ptr + f.len;
        path_push(d, "partial_success", -1);
        while (q < qend) {
            field g;
            if (next_field(d, &q, qend, &g))
                return d->status;
            if (g.num == CTR(ExportTracePartialSuccess, rejected_spans)) {
                if (g.wt != WT_VARINT) {
                    wrong_wt(d, "rejected", &g, WT_VARINT);
                    return d->status;
                }
                if (rejected)
                    *rejected = (int64_t)g.v;
            } else if (g.num == CTR(ExportTracePartialSuccess, error_message)) {
                pl_bytes m;
                if (get_string(d, &g, "error_message", &m))
                    return d->status;
                if (message)
                    *message = m;
            }
        }
        path_pop(d);
    }
    return PL_OK;
}

#define RETRY_INFO_URL "type.googleapis.com/google.rpc.RetryInfo"

bool pl_rpc_status_encode(pl_buf *b, int32_t code, const char *message, int64_t retry_delay_ns)
{
    w_i32_opt(b, google_rpc_Status_code_tag, code);
    if (message && *message)
        w_len_field(b, google_rpc_Status_message_tag, message, strlen(message));
    if (retry_delay_ns >= 0) {
        size_t any = w_begin(b, google_rpc_Status_details_tag);
        w_len_field(b, google_protobuf_Any_type_url_tag, RETRY_INFO_URL,
                    sizeof(RETRY_INFO_URL) - 1);
        size_t val = w_begin(b, google_protobuf_Any_value_tag);
        size_t dur = w_begin(b, google_rpc_RetryInfo_retry_delay_tag);
        w_uvarint_opt(b, google_protobuf_Duration_seconds_tag,
                      (uint64_t)(retry_delay_ns / 1000000000));
        w_i32_opt(b, google_protobuf_Duration_nanos_tag, (int32_t)(retry_delay_ns % 1000000000));
        w_end(b, dur);
        w_end(b, val);
        w_end(b, any);
    }
    return pl_buf_ok(b);
}

bool pl_rpc_status_encode_json(pl_buf *b, int32_t code, const char *message, int64_t retry_delay_ns)
{
    pl_buf_printf(b, "{\"code\":%d,\"message\":", (int)code);
    pl_buf_json_string(b, message ? message : "", message ? strlen(message) : 0);
    if (retry_delay_ns >= 0) {
        int64_t sec = retry_delay_ns / 1000000000, ns = retry_delay_ns % 1000000000;
        pl_buf_append_str(b, ",\"details\":[{\"@type\":\"" RETRY_INFO_URL "\",\"retryDelay\":\"");
        if (ns == 0)
            pl_buf_printf(b, "%" PRId64 "s", sec);
        else if (ns % 1000000 == 0)
            pl_buf_printf(b, "%" PRId64 ".%03ds", sec, (int)(ns / 1000000));
        else if (ns % 1000 == 0)
            pl_buf_printf(b, "%" PRId64 ".%06ds", sec, (int)(ns / 1000));
        else
            pl_buf_printf(b, "%" PRId64 ".%09ds", sec, (int)ns);
        pl_buf_append_str(b, "\"}]");
    }
    pl_buf_append_byte(b, '}');
    return pl_buf_ok(b);
}

static int parse_retry_info(dec *d, const uint8_t *p, const uint8_t *end, int64_t *delay)
{
    int64_t sec = 0, nanos = 0;
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return -1;
        if (f.num != google_rpc_RetryInfo_retry_delay_tag)
            continue;
        EXPECT(&f, WT_LEN, "retry_delay");
        const uint8_t *q = f.ptr, *qend = f.ptr + f.len;
        while (q < qend) {
            field g;
            if (next_field(d, &q, qend, &g))
                return -1;
            if (g.num == google_protobuf_Duration_seconds_tag)
                GET_I64(&g, "seconds", sec);
            else if (g.num == google_protobuf_Duration_nanos_tag)
                GET_I32(&g, "nanos", nanos);
        }
    }
    if (sec < 0 || sec > INT64_MAX / 1000000000 - 1)
        sec = sec < 0 ? 0 : INT64_MAX / 1000000000 - 1;
    if (nanos < 0)
        nanos = 0;
    *delay = sec * 1000000000 + nanos;
    return 0;
}

pl_status pl_rpc_status_decode(const uint8_t *buf, size_t len, int32_t *code, pl_bytes *message,
                               int64_t *retry_delay_ns, pl_err *err)
{
    if (!buf)
        buf = empty_input, len = 0;
    dec dd = {.err = err, .base = buf, .status = PL_ERR_INVALID}, *d = &dd;
    int32_t c = 0;
    pl_bytes msg = {NULL, 0};
    int64_t delay = -1;
    const uint8_t *p = buf, *end = buf + len;
    while (p < end) {
        field f;
        if (next_field(d, &p, end, &f))
            return d->status;
        if (f.num == google_rpc_Status_code_tag) {
            if (f.wt != WT_VARINT) {
                wrong_wt(d, "code", &f, WT_VARINT);
                return d->status;
            }
            c = (int32_t)(uint32_t)f.v;
        } else if (f.num == google_rpc_Status_message_tag) {
            if (get_bytes(d, &f, "message", &msg))
                return d->status;
        } else if (f.num == google_rpc_Status_details_tag) {
            if (f.wt != WT_LEN) {
                wrong_wt(d, "details", &f, WT_LEN);
                return d->status;
            }
            pl_bytes url = {NULL, 0}, value = {empty_input, 0};
            const uint8_t *q = f.ptr, *qend = f.ptr + f.len;
            while (q < qend) {
                field g;
                if (next_field(d, &q, qend, &g))
                    return d->status;
                if (g.num == google_protobuf_Any_type_url_tag && g.wt == WT_LEN)
                    url = (pl_bytes){g.ptr, (uint32_t)g.len};
                else if (g.num == google_protobuf_Any_value_tag && g.wt == WT_LEN)
                    value = (pl_bytes){g.ptr, (uint32_t)g.len};
            }
            if (pl_bytes_eq_cstr(url, RETRY_INFO_URL) &&
                parse_retry_info(d, value.ptr, value.ptr + value.len, &delay))
                return d->status;
        }
    }
    if (code)
        *code = c;
    if (message)
        *message = msg;
    if (retry_delay_ns)
        *retry_delay_ns = delay;
    return PL_OK;
}
