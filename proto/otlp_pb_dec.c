/*
 * otlp_pb_dec.c: OTLP protobuf -> core/model.h for traces and profiles,
 * walking the message tables of otlp_tables.h (the ones the JSON decoder
 * walks too) directly over the input buffer. Zero-copy: strings and bytes
 * point into the buffer. Only AnyValue, a oneof, is read by hand.
 *
 * Why not nanopb's decoder: it fills fixed structs through callbacks, one
 * call per field, and would need a malloc or a copy per string; spans arrive
 * by the hundred thousand per second. The tables give field numbers (from
 * nanopb's generated *_tag macros) and places in the model instead.
 *
 * Every message with repeated children is walked twice: a first pass counts
 * the children (and the elements of packed scalars) so that each array is
 * allocated once, at its final size, from the batch arena (and charged to
 * the request's budget before that); the second pass fills them. The first
 * pass only skips over children, so there is no per-element allocation and
 * no re-growing.
 *
 * A singular sub-message that occurs more than once merges, as protobuf
 * readers do: repeated fields are concatenated, later (non-zero) scalars
 * win. The dictionary is the exception (refused when it comes twice).
 */
#include <stdio.h>

#include "otlp_pb_internal.h"
#include "otlp_tables.h"

static int walk(dec *d, const jmsg *m, const uint8_t *p, const uint8_t *end, uint8_t *base,
                int depth);
static int dec_keyvalue(dec *d, const uint8_t *p, const uint8_t *end, pl_kv *kv, int depth);

static int dec_anyvalue(dec *d, const uint8_t *p, const uint8_t *end, pl_value *v, int depth)
{
    if (depth > PL_OTLP_MAX_DEPTH)
        return pl_pb_wire_fail(d, NULL, "values nested deeper than %d levels", PL_OTLP_MAX_DEPTH);
    memset(v, 0, sizeof(*v));
    while (p < end) {
        field f;
        if (pl_pb_wire_next_field(d, &p, end, &f))
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
        case CM(AnyValue, array_value):
        case CM(AnyValue, kvlist_value): {
            bool array = f.num == CM(AnyValue, array_value);
            const char *name = array ? "array_value" : "kvlist_value";
            EXPECT(&f, WT_LEN, name);
            /* Array items sit one level down, as do a kvlist's key-values. */
            path_push(d, name, -1);
            if (walk(d, array ? &pl_tm_arrayvalue : &pl_tm_kvlist, f.ptr, f.ptr + f.len,
                     array ? (uint8_t *)&v->u.array : (uint8_t *)&v->u.kvlist,
                     array ? depth : depth + 1))
                return -1;
            path_pop(d);
            v->type = array ? PL_VALUE_ARRAY : PL_VALUE_KVLIST;
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

static size_t scalar_size(const jfield *f)
{
    switch (f->kind) {
    case FK_STR:
    case FK_B64:
        return sizeof(pl_bytes);
    case FK_U64:
    case FK_I64:
    case FK_FX64:
        return 8;
    default:
        return 4;
    }
}

/* Merges a second occurrence `src` of a singular sub-message into `dst`. */
static int merge(dec *d, const jmsg *m, uint8_t *dst, const uint8_t *src)
{
    for (unsigned i = 0; i < m->n_fields; i++) {
        const jfield *f = &m->fields[i];
        if (FK_IS_LIST(f->kind)) {
            void **items = (void **)(dst + f->off);
            uint32_t *n = (uint32_t *)(dst + f->aux);
            void *const *s_items = (void *const *)(src + f->off);
            uint32_t s_n = *(const uint32_t *)(src + f->aux);
            size_t elem = pl_tm_elem_size(f);
            if (s_n && !*n) {
                *items = *s_items;
                *n = s_n;
            } else if (s_n) {
                if (*n > UINT32_MAX / 2 - s_n)
                    return pl_pb_wire_fail(d, NULL, "too many elements");
                uint8_t *p = pl_pb_wire_calloc(d, (size_t)*n + s_n, elem);
                if (!p)
                    return -1;
                memcpy(p, *items, (size_t)*n * elem);
                memcpy(p + (size_t)*n * elem, *s_items, (size_t)s_n * elem);
                *items = p;
                *n += s_n;
            }
            if (f->aux2 != NO_OFF)
                *(uint32_t *)(dst + f->aux2) = *n;
        } else if (f->kind == FK_ID) {
            if (src[f->aux]) {
                memcpy(dst + f->off, src + f->off, src[f->aux]);
                dst[f->aux] = src[f->aux];
            }
        } else if (f->kind == FK_STR || f->kind == FK_B64) {
            if (((const pl_bytes *)(src + f->off))->len)
                memcpy(dst + f->off, src + f->off, sizeof(pl_bytes));
        } else if (f->kind != FK_MSG && f->kind != FK_ANY) {
            size_t n = scalar_size(f);
            static const uint8_t zero[8];
            if (memcmp(src + f->off, zero, n) != 0)
                memcpy(dst + f->off, src + f->off, n);
        }
    }
    return 0;
}

static int sub_message(dec *d, const jfield *f, const field *fl, uint8_t *base, int depth)
{
    const jmsg *sub = f->sub;
    bool *has = (bool *)(base + f->aux);
    EXPECT(fl, WT_LEN, f->name);
    if (*has && (f->arg & ARG_NO_MERGE))
        return pl_pb_wire_fail(d, f->name, "appears twice");
    path_push(d, f->name, -1);
    if (*has && sub->ix->has_lists) {
        /* Arrays were sized for one occurrence: decode apart, then merge. */
        _Alignas(16) uint8_t one[sizeof(pl_dictionary)];
        _Static_assert(sizeof(pl_dictionary) >= sizeof(pl_resource) &&
                           sizeof(pl_dictionary) >= sizeof(pl_scope),
                       "merge buffer");
        memset(one, 0, sub->size);
        if (walk(d, sub, fl->ptr, fl->ptr + fl->len, one, depth) ||
            merge(d, sub, base + f->off, one))
            return -1;
    } else if (walk(d, sub, fl->ptr, fl->ptr + fl->len, base + f->off, depth)) {
        return -1;
    }
    path_pop(d);
    *has = true;
    return 0;
}

/* One occurrence of a repeated field; the array was sized by the count pass. */
static int list_item(dec *d, const jfield *f, const field *fl, uint8_t *base, uint32_t cap,
                     int depth)
{
    void *items = *(void **)(base + f->off);
    uint32_t *n = (uint32_t *)(base + f->aux);
    switch (f->kind) {
    case FK_I32S:
        return pl_pb_wire_rep_varint(d, fl, f->name, items, 4, n, cap);
    case FK_I64S:
        return pl_pb_wire_rep_varint(d, fl, f->name, items, 8, n, cap);
    case FK_U64S:
        return pl_pb_wire_rep_fixed64(d, fl, f->name, items, n, cap);
    default:
        break;
    }
    EXPECT(fl, WT_LEN, f->name);
    if (*n >= cap)
        return pl_pb_wire_fail(d, f->name, "element count changed between passes");
    size_t size = pl_tm_elem_size(f);
    uint8_t *elem = (uint8_t *)items + (size_t)*n * size;
    path_push(d, f->name, *n);
    int rc;
    if (f->kind == FK_STRS)
        rc = get_string(d, fl, NULL, (pl_bytes *)elem);
    else if (f->kind == FK_ANYS)
        rc = dec_anyvalue(d, fl->ptr, fl->ptr + fl->len, (pl_value *)elem, depth + 1);
    else if (f->sub == &pl_tm_keyvalue)
        rc = dec_keyvalue(d, fl->ptr, fl->ptr + fl->len, (pl_kv *)elem, depth);
    else
        rc = walk(d, f->sub, fl->ptr, fl->ptr + fl->len, elem, depth);
    if (rc)
        return -1;
    path_pop(d);
    (*n)++;
    return 0;
}

/* What SDKs send nearly always as a KeyValue: key (1) then value (2)
 * holding only one string_value (1, ASCII), int_value (3), bool_value (2)
 * or double_value (4), with one-byte lengths and an ASCII key. Read in place
 * into the zeroed kv, as dec_keyvalue would; false (nothing written) for
 * anything else, which dec_keyvalue then reads, checks and names the errors
 * of. */
static inline __attribute__((always_inline)) bool
keyvalue_plain(const uint8_t *p, const uint8_t *end, pl_kv *kv, int depth)
{
    size_t left = (size_t)(end - p);
    if (left < 6 || p[0] != 0x0a || p[1] >= 0x80 || (size_t)p[1] + 6 > left ||
        depth >= PL_OTLP_MAX_DEPTH)
        return false;
    const uint8_t *key = p + 2, *v = key + p[1];
    size_t klen = p[1], vlen = v[1];
    if (v[0] != 0x12 || vlen >= 0x80 || v + 2 + vlen != end || vlen < 2 ||
        !pl_pb_wire_ascii(key, klen))
        return false;
    const uint8_t *q = v + 3;
    uint64_t x;
    switch (v[2]) {
    case 0x0a: /* string_value */
        if ((size_t)v[3] + 2 != vlen || !pl_pb_wire_ascii(v + 4, v[3]))
            return false;
        kv->value.type = PL_VALUE_STRING;
        kv->value.u.str.ptr = v[3] ? v + 4 : NULL;
        kv->value.u.str.len = v[3];
        break;
    case 0x18: /* int_value */
        if (read_varint(&q, end, &x) || q != end)
            return false;
        kv->value.type = PL_VALUE_INT;
        kv->value.u.i = (int64_t)x;
        break;
    case 0x10: /* bool_value */
        if (read_varint(&q, end, &x) || q != end)
            return false;
        kv->value.type = PL_VALUE_BOOL;
        kv->value.u.b = x != 0;
        break;
    case 0x21: /* double_value */
        if (vlen != 9)
            return false;
        x = load64(q);
        kv->value.type = PL_VALUE_DOUBLE;
        memcpy(&kv->value.u.d, &x, sizeof(double));
        break;
    default:
        return false;
    }
    kv->key.ptr = klen ? key : NULL;
    kv->key.len = (uint32_t)klen;
    return true;
}
_Static_assert(CM(AnyValue, string_value) == 1 && CM(AnyValue, bool_value) == 2 &&
                   CM(AnyValue, int_value) == 3 && CM(AnyValue, double_value) == 4,
               "AnyValue field numbers");

/* A KeyValue (a list element, zeroed): the walker's rows for it, by hand;
 * attributes are most of what a request holds. Same checks, errors and
 * merging of repeated members as walk(). */
static int dec_keyvalue(dec *d, const uint8_t *p, const uint8_t *end, pl_kv *kv, int depth)
{
    /* the value sits one level down whether it is sent or not (encoders
     * write an empty one), so a pair past the limit is refused either way */
    if (depth + 1 > PL_OTLP_MAX_DEPTH)
        return pl_pb_wire_fail(d, NULL, "values nested deeper than %d levels", PL_OTLP_MAX_DEPTH);
    const jfield *rows = pl_tm_keyvalue.fields;
    while (p < end) {
        field fl;
        if (pl_pb_wire_next_field(d, &p, end, &fl))
            return -1;
        switch (fl.num) {
        case CM(KeyValue, key):
            if (get_string(d, &fl, rows[0].name, &kv->key))
                return -1;
            break;
        case CM(KeyValue, value):
            EXPECT(&fl, WT_LEN, rows[1].name);
            path_push(d, rows[1].name, -1);
            if (dec_anyvalue(d, fl.ptr, fl.ptr + fl.len, &kv->value, depth + 1))
                return -1;
            path_pop(d);
            break;
        case CM(KeyValue, key_strindex):
            GET_I32(&fl, rows[2].name, kv->key_strindex);
            break;
        default:
            break;
        }
    }
    return 0;
}
_Static_assert(CM(KeyValue, key) == 1 && CM(KeyValue, value) == 2 &&
                   CM(AnyValue, string_value) == 1 && CM(KeyValue, key_strindex) == 3,
               "KeyValue field numbers");

/* One field of message m read from the wire into base. */
static inline __attribute__((always_inline)) int
walk_field(dec *d, const jmsg *m, const field *fl, uint8_t *base, const uint32_t *counts, int depth)
{
    const jfield *f = pl_tm_by_num(m, fl->num);
    if (!f)
        return 0; /* unknown, including 1000 (old instrumentation_library_*) */
    void *dst = base + f->off;
    switch ((fkind)f->kind) {
    case FK_STR:
        return get_string(d, fl, f->name, dst);
    case FK_B64:
        return get_bytes(d, fl, f->name, dst);
    case FK_ID:
        return get_id(d, fl, f->name, dst, base + f->aux, f->arg);
    case FK_U32:
        GET_U32(fl, f->name, *(uint32_t *)dst);
        return 0;
    case FK_I32:
    case FK_ENUM:
        GET_I32(fl, f->name, *(int32_t *)dst);
        return 0;
    case FK_U64:
        GET_U64(fl, f->name, *(uint64_t *)dst);
        return 0;
    case FK_I64:
        GET_I64(fl, f->name, *(int64_t *)dst);
        return 0;
    case FK_FX32:
        GET_FIXED32(fl, f->name, *(uint32_t *)dst);
        return 0;
    case FK_FX64:
        GET_FIXED64(fl, f->name, *(uint64_t *)dst);
        return 0;
    case FK_MSG:
        return sub_message(d, f, fl, base, depth);
    case FK_ANY:
        EXPECT(fl, WT_LEN, f->name);
        path_push(d, f->name, -1);
        if (dec_anyvalue(d, fl->ptr, fl->ptr + fl->len, dst, depth + 1))
            return -1;
        path_pop(d);
        return 0;
    default:
        if (f->sub == &pl_tm_keyvalue && fl->wt == WT_LEN) {
            /* attributes: the plain ones without list_item's bookkeeping */
            uint32_t *n = (uint32_t *)(base + f->aux);
            if (*n < counts[fl->num] &&
                keyvalue_plain(fl->ptr, fl->ptr + fl->len, *(pl_kv **)dst + *n, depth)) {
                (*n)++;
                return 0;
            }
        }
        return list_item(d, f, fl, base, counts[fl->num], depth);
    }
}

/* Fields a message with lists keeps from its counting pass, so the filling
 * pass does not read them from the wire again (a span with 20 attributes
 * has about 30); a message with more is read twice. */
#define KEPT_FIELDS 40

static int walk(dec *d, const jmsg *m, const uint8_t *p, const uint8_t *end, uint8_t *base,
                int depth)
{
    const jindex *ix = m->ix;
    uint32_t counts[32];
    if (ix->has_lists) {
        /* The counting pass (pl_pb_wire_count_fields, the fields kept). */
        field kept[KEPT_FIELDS];
        unsigned n_kept = 0;
        bool all_kept = true;
        memset(counts, 0, sizeof counts);
        for (const uint8_t *q = p; q < end;) {
            field fl;
            if (pl_pb_wire_next_field(d, &q, end, &fl))
                return -1;
            if (n_kept < KEPT_FIELDS)
                kept[n_kept++] = fl;
            else
                all_kept = false;
            if (fl.num >= 32)
                continue;
            uint32_t bit = 1u << fl.num;
            uint64_t add = 1;
            if (__builtin_expect(fl.wt == WT_LEN && ((ix->varint_mask | ix->fixed64_mask) & bit),
                                 0)) {
                if (ix->varint_mask & bit) {
                    add = 0;
                    for (size_t i = 0; i < fl.len; i++)
                        add += fl.ptr[i] < 0x80;
                } else {
                    add = fl.len / 8;
                }
            }
            if (counts[fl.num] + add > UINT32_MAX / 2)
                return pl_pb_wire_fail(d, NULL, "too many elements in field %u", fl.num);
            counts[fl.num] += (uint32_t)add;
        }
        for (unsigned i = 0; i < ix->n_lists; i++) {
            const jfield *f = &m->fields[ix->lists[i]];
            uint32_t n = counts[f->num];
            void *items = NULL;
            if (n && !(items = pl_pb_wire_calloc(d, n, pl_tm_elem_size(f))))
                return -1;
            *(void **)(base + f->off) = items;
            *(uint32_t *)(base + f->aux) = 0;
            if (f->aux2 != NO_OFF)
                *(uint32_t *)(base + f->aux2) = n;
        }
        if (all_kept) {
            for (unsigned i = 0; i < n_kept; i++)
                if (walk_field(d, m, &kept[i], base, counts, depth))
                    return -1;
            return 0;
        }
    }
    while (p < end) {
        field fl;
        if (pl_pb_wire_next_field(d, &p, end, &fl))
            return -1;
        if (walk_field(d, m, &fl, base, counts, depth))
            return -1;
    }
    return 0;
}

/* Decoders accept (NULL, 0); pointer arithmetic on NULL is undefined. */
static const uint8_t empty_input[1];

static pl_status decode(pl_batch *b, const jmsg *root, void *dst, const uint8_t *buf, size_t len,
                        size_t budget, pl_err *err)
{
    if (!buf)
        buf = empty_input, len = 0;
    if (err)
        err->msg[0] = '\0';
    if (len > UINT32_MAX)
        return pl_errf(err, PL_ERR_TOO_LARGE, "request of %zu bytes is too large", len);
    dec dd = {.arena = &b->arena,
              .err = err,
              .base = buf,
              .status = PL_ERR_INVALID,
              .budget = budget},
        *d = &dd;
    memset(dst, 0, root->size);
    return walk(d, root, buf, buf + len, dst, 0) ? d->status : PL_OK;
}

static pl_status decode_traces(pl_batch *b, const uint8_t *buf, size_t len, size_t budget,
                               pl_err *err)
{
    return decode(b, &pl_tm_traces, &b->data.traces, buf, len, budget, err);
}

static pl_status decode_profiles(pl_batch *b, const uint8_t *buf, size_t len, size_t budget,
                                 pl_err *err)
{
    pl_status st = decode(b, &pl_tm_profiles, &b->data.profiles, buf, len, budget, err);
    return st ? st : pl_otlp_validate_profiles(&b->data.profiles, err);
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
