/*
 * otlp_pb_enc.c: model -> OTLP protobuf, one walker over the message tables
 * of otlp_tables.c (the decoder, otlp_pb_dec.c, walks the same ones).
 * Members are written by ascending field number, each only when it differs
 * from its default (proto3), except where a row's ENC_* flags say otherwise;
 * AnyValue, a oneof, is written by hand.
 */
#include "otlp_pb.h"

#include "otlp_pb_internal.h"
#include "otlp_pb_write.h"
#include "otlp_tables.h"

static void enc_msg(pl_buf *b, const jmsg *m, const uint8_t *src);

static void enc_anyvalue(pl_buf *b, const pl_value *v)
{
    switch (v->type) {
    case PL_VALUE_EMPTY:
        break;
    case PL_VALUE_STRING:
        w_len_field(b, CM(AnyValue, string_value), v->u.str.ptr, v->u.str.len);
        break;
    case PL_VALUE_BOOL:
        w_tag(b, CM(AnyValue, bool_value), PBW_VARINT);
        w_varint(b, v->u.b ? 1 : 0);
        break;
    case PL_VALUE_INT:
        w_tag(b, CM(AnyValue, int_value), PBW_VARINT);
        w_varint(b, (uint64_t)v->u.i);
        break;
    case PL_VALUE_DOUBLE: {
        uint64_t bits;
        memcpy(&bits, &v->u.d, 8);
        w_tag(b, CM(AnyValue, double_value), PBW_I64);
        uint8_t le[8];
        for (int i = 0; i < 8; i++)
            le[i] = (uint8_t)(bits >> (8 * i));
        w_raw(b, le, 8);
        break;
    }
    case PL_VALUE_ARRAY: {
        size_t s = w_begin(b, CM(AnyValue, array_value));
        enc_msg(b, &pl_tm_arrayvalue, (const uint8_t *)&v->u.array.items);
        w_end(b, s);
        break;
    }
    case PL_VALUE_KVLIST: {
        size_t s = w_begin(b, CM(AnyValue, kvlist_value));
        enc_msg(b, &pl_tm_kvlist, (const uint8_t *)&v->u.kvlist.items);
        w_end(b, s);
        break;
    }
    case PL_VALUE_BYTES:
        w_len_field(b, CM(AnyValue, bytes_value), v->u.str.ptr, v->u.str.len);
        break;
    case PL_VALUE_STRINDEX:
        w_tag(b, CM(AnyValue, string_value_strindex), PBW_VARINT);
        w_varint(b, (uint64_t)(int64_t)v->u.strindex);
        break;
    }
}

/* A packed repeated varint (int32 elements sign-extended, as on the wire). */
static void enc_packed_varint(pl_buf *b, uint32_t num, const void *items, uint32_t n, bool wide)
{
    size_t s = w_begin(b, num);
    if (wide)
        for (uint32_t i = 0; i < n; i++)
            w_varint(b, (uint64_t)((const int64_t *)items)[i]);
    else
        for (uint32_t i = 0; i < n; i++)
            w_varint(b, (uint64_t)(int64_t)((const int32_t *)items)[i]);
    w_end(b, s);
}

static void enc_packed_fixed64(pl_buf *b, uint32_t num, const uint64_t *v, uint32_t n)
{
    w_tag(b, num, PBW_LEN);
    w_varint(b, (uint64_t)n * 8);
    if (!w_room(b, (size_t)n * 8))
        return;
    uint8_t *p = b->data + b->len;
    for (uint32_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            *p++ = (uint8_t)(v[i] >> (8 * k));
    b->len += (size_t)n * 8;
}

static void enc_list(pl_buf *b, const jfield *f, const uint8_t *src)
{
    const void *items = *(const void *const *)(src + f->off);
    uint32_t n = *(const uint32_t *)(src + f->aux);
    if (!n)
        return;
    switch ((fkind)f->kind) {
    case FK_LIST: {
        const jmsg *sub = f->sub;
        if (sub == &pl_tm_keyvalue) {
            for (uint32_t i = 0; i < n; i++) {
                const pl_kv *kv = (const pl_kv *)items + i;
                size_t s = w_begin(b, f->num);
                w_bytes_opt(b, CM(KeyValue, key), kv->key);
                size_t vs = w_begin(b, CM(KeyValue, value));
                enc_anyvalue(b, &kv->value);
                w_end(b, vs);
                w_i32_opt(b, CM(KeyValue, key_strindex), kv->key_strindex);
                w_end(b, s);
            }
            break;
        }
        for (uint32_t i = 0; i < n; i++) {
            size_t s = w_begin(b, f->num);
            enc_msg(b, sub, (const uint8_t *)items + (size_t)i * sub->size);
            w_end(b, s);
        }
        break;
    }
    case FK_ANYS:
        for (uint32_t i = 0; i < n; i++) {
            size_t s = w_begin(b, f->num);
            enc_anyvalue(b, (const pl_value *)items + i);
            w_end(b, s);
        }
        break;
    case FK_STRS:
        for (uint32_t i = 0; i < n; i++) {
            const pl_bytes *s = (const pl_bytes *)items + i;
            w_len_field(b, f->num, s->ptr, s->len);
        }
        break;
    case FK_I32S:
    case FK_I64S:
        enc_packed_varint(b, f->num, items, n, f->kind == FK_I64S);
        break;
    case FK_U64S:
        enc_packed_fixed64(b, f->num, items, n);
        break;
    default:
        break;
    }
}

static void enc_msg(pl_buf *b, const jmsg *m, const uint8_t *src)
{
    const uint8_t *order = m->ix->pb_order;
    for (unsigned k = 0; k < m->n_fields; k++) {
        const jfield *f = &m->fields[order[k]];
        const void *p = src + f->off;
        switch ((fkind)f->kind) {
        case FK_STR:
        case FK_B64:
            w_bytes_opt(b, f->num, *(const pl_bytes *)p);
            break;
        case FK_ID:
            if (src[f->aux])
                w_len_field(b, f->num, p, src[f->aux]);
            break;
        case FK_U32:
            w_uvarint_opt(b, f->num, *(const uint32_t *)p);
            break;
        case FK_I32:
        case FK_ENUM:
            w_i32_opt(b, f->num, *(const int32_t *)p);
            break;
        case FK_U64:
        case FK_I64:
            w_uvarint_opt(b, f->num, *(const uint64_t *)p);
            break;
        case FK_FX32:
            w_fixed32_opt(b, f->num, *(const uint32_t *)p);
            break;
        case FK_FX64:
            w_fixed64_opt(b, f->num, *(const uint64_t *)p);
            break;
        case FK_MSG: {
            bool has = src[f->aux];
            if (!has && !(f->enc & ENC_NONEMPTY))
                break;
            size_t mark = b->len, s = w_begin(b, f->num);
            enc_msg(b, f->sub, p);
            if (!has && !b->failed && b->len == s)
                b->len = mark; /* ENC_NONEMPTY and nothing in it */
            else
                w_end(b, s);
            break;
        }
        case FK_ANY: {
            const pl_value *v = p;
            if (v->type != PL_VALUE_EMPTY || (f->enc & ENC_PB_ALWAYS)) {
                size_t s = w_begin(b, f->num);
                enc_anyvalue(b, v);
                w_end(b, s);
            }
            break;
        }
        default:
            enc_list(b, f, src);
        }
    }
}

bool pl_otlp_encode_traces(const pl_traces *t, pl_buf *b)
{
    enc_msg(b, &pl_tm_traces, (const uint8_t *)t);
    return pl_buf_ok(b);
}

bool pl_otlp_encode_profiles(const pl_profiles *ps, pl_buf *b)
{
    enc_msg(b, &pl_tm_profiles, (const uint8_t *)ps);
    return pl_buf_ok(b);
}
