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

/* Writers for a member whose field number comes from a row, not a
 * constant: one room check per member, and the tag (field numbers are below
 * 32) as one or two bytes without a loop. */
static inline uint8_t *put_tag(uint8_t *p, unsigned num, unsigned wt)
{
    unsigned k = num << 3 | wt;
    if (k < 0x80) {
        *p++ = (uint8_t)k;
    } else {
        *p++ = (uint8_t)(k | 0x80);
        *p++ = (uint8_t)(k >> 7);
    }
    return p;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline void put_varint_member(pl_buf *b, unsigned num, uint64_t v)
{
    if (!v || !w_room(b, 12))
        return;
    uint8_t *p = put_tag(b->data + b->len, num, PBW_VARINT);
    b->len = (size_t)(put_varint(p, v) - b->data);
}

static inline void put_fixed_member(pl_buf *b, unsigned num, uint64_t v, unsigned size)
{
    if (!v || !w_room(b, 10))
        return;
    uint8_t *p = put_tag(b->data + b->len, num, size == 8 ? PBW_I64 : PBW_I32);
    for (unsigned i = 0; i < size; i++)
        p[i] = (uint8_t)(v >> (8 * i));
    b->len = (size_t)(p + size - b->data);
}

static inline void put_len_member(pl_buf *b, unsigned num, const void *data, uint32_t n)
{
    if (!w_room(b, 7 + (size_t)n))
        return;
    uint8_t *p = put_varint(put_tag(b->data + b->len, num, PBW_LEN), n);
    if (n)
        memcpy(p, data, n);
    b->len = (size_t)(p + n - b->data);
}

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

/* A packed repeated varint (int32 elements sign-extended, as on the wire):
 * one room check for the tag, the length placeholder and every element. */
static void enc_packed_varint(pl_buf *b, uint32_t num, const void *items, uint32_t n, bool wide)
{
    if (!w_room(b, 3 + (size_t)n * 10))
        return;
    uint8_t *p = put_tag(b->data + b->len, num, PBW_LEN);
    *p++ = 0; /* length placeholder, fixed by w_end */
    size_t start = (size_t)(p - b->data);
    if (wide)
        for (uint32_t i = 0; i < n; i++)
            p = put_varint(p, (uint64_t)((const int64_t *)items)[i]);
    else
        for (uint32_t i = 0; i < n; i++)
            p = put_varint(p, (uint64_t)(int64_t)((const int32_t *)items)[i]);
    b->len = (size_t)(p - b->data);
    w_end(b, start);
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

static void enc_msg_list(pl_buf *b, const jfield *f, const void *items, uint32_t n);

/* The members of one message, by field number. Inlined into enc_msg and
 * into the loop over a list's elements (enc_msg_list), so that an element
 * costs no call: profiles are thousands of small messages. */
static inline __attribute__((always_inline)) void enc_fields(pl_buf *b, const jmsg *m,
                                                             const uint8_t *src)
{
    const uint8_t *order = m->ix->pb_order;
    for (unsigned k = 0; k < m->n_fields; k++) {
        const jfield *f = &m->fields[order[k]];
        const void *p = src + f->off;
        /* The commonest kinds first, as direct branches: one indirect jump
         * per member mispredicts often when messages alternate. */
        if (f->kind == FK_I32) {
            put_varint_member(b, f->num, (uint64_t)(int64_t) * (const int32_t *)p);
            continue;
        }
        if (FK_IS_LIST(f->kind)) {
            const void *items = *(const void *const *)p;
            uint32_t n = *(const uint32_t *)(src + f->aux);
            if (!n)
                continue;
            if (f->kind == FK_I32S || f->kind == FK_I64S)
                enc_packed_varint(b, f->num, items, n, f->kind == FK_I64S);
            else if (f->kind == FK_U64S)
                enc_packed_fixed64(b, f->num, items, n);
            else if (f->kind == FK_STRS)
                for (uint32_t i = 0; i < n; i++) {
                    const pl_bytes *s = (const pl_bytes *)items + i;
                    put_len_member(b, f->num, s->ptr, s->len);
                }
            else
                enc_msg_list(b, f, items, n);
            continue;
        }
        switch ((fkind)f->kind) {
        case FK_STR:
        case FK_B64: {
            const pl_bytes *s = p;
            if (s->len)
                put_len_member(b, f->num, s->ptr, s->len);
            break;
        }
        case FK_ID:
            if (src[f->aux])
                put_len_member(b, f->num, p, src[f->aux]);
            break;
        case FK_U32:
            put_varint_member(b, f->num, *(const uint32_t *)p);
            break;
        case FK_ENUM: /* int32: sign-extended to 64 bits on the wire (no zigzag) */
            put_varint_member(b, f->num, (uint64_t)(int64_t) * (const int32_t *)p);
            break;
        case FK_U64:
        case FK_I64:
            put_varint_member(b, f->num, *(const uint64_t *)p);
            break;
        case FK_FX32:
            put_fixed_member(b, f->num, *(const uint32_t *)p, 4);
            break;
        case FK_FX64:
            put_fixed_member(b, f->num, *(const uint64_t *)p, 8);
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
            break;
        }
    }
}

static void enc_msg(pl_buf *b, const jmsg *m, const uint8_t *src)
{
    enc_fields(b, m, src);
}

/* ---- hand-written messages ---------------------------------------------
 * The walker costs about ten instructions per member, written or not; for
 * the messages a request holds thousands of, that made it 17 % slower than
 * the per-message encoders on spans (their attributes) and 40 % slower on
 * profiles (samples and the dictionary's tables). These keep their direct
 * loops, chosen by table (docs/PERFORMANCE.md, "OTLP encoders"); their
 * output is the walker's (test_otlp_encoders compares). */

static void enc_packed_opt(pl_buf *b, uint32_t num, const void *items, uint32_t n, bool wide)
{
    if (n)
        enc_packed_varint(b, num, items, n, wide);
}

static void hand_kv(pl_buf *b, const void *elem)
{
    const pl_kv *kv = elem;
    w_bytes_opt(b, CM(KeyValue, key), kv->key);
    size_t vs = w_begin(b, CM(KeyValue, value));
    enc_anyvalue(b, &kv->value);
    w_end(b, vs);
    w_i32_opt(b, CM(KeyValue, key_strindex), kv->key_strindex);
}

static void hand_sample(pl_buf *b, const void *elem)
{
    const pl_sample *sm = elem;
    w_i32_opt(b, PR(Sample, stack_index), sm->stack_index);
    enc_packed_opt(b, PR(Sample, attribute_indices), sm->attribute_indices, sm->n_attribute_indices,
                   false);
    w_i32_opt(b, PR(Sample, link_index), sm->link_index);
    enc_packed_opt(b, PR(Sample, values), sm->values, sm->n_values, true);
    if (sm->n_timestamps)
        enc_packed_fixed64(b, PR(Sample, timestamps_unix_nano), sm->timestamps_unix_nano,
                           sm->n_timestamps);
}

static void hand_location(pl_buf *b, const void *elem)
{
    const pl_location *l = elem;
    w_i32_opt(b, PR(Location, mapping_index), l->mapping_index);
    w_uvarint_opt(b, PR(Location, address), l->address);
    for (uint32_t k = 0; k < l->n_lines; k++) {
        size_t s = w_begin(b, PR(Location, lines));
        w_i32_opt(b, PR(Line, function_index), l->lines[k].function_index);
        w_uvarint_opt(b, PR(Line, line), (uint64_t)l->lines[k].line);
        w_uvarint_opt(b, PR(Line, column), (uint64_t)l->lines[k].column);
        w_end(b, s);
    }
    enc_packed_opt(b, PR(Location, attribute_indices), l->attribute_indices, l->n_attribute_indices,
                   false);
}

static void hand_stack(pl_buf *b, const void *elem)
{
    const pl_stack *st = elem;
    enc_packed_opt(b, PR(Stack, location_indices), st->location_indices, st->n_location_indices,
                   false);
}

static void hand_function(pl_buf *b, const void *elem)
{
    const pl_function *f = elem;
    w_i32_opt(b, PR(Function, name_strindex), f->name_strindex);
    w_i32_opt(b, PR(Function, system_name_strindex), f->system_name_strindex);
    w_i32_opt(b, PR(Function, filename_strindex), f->filename_strindex);
    w_uvarint_opt(b, PR(Function, start_line), (uint64_t)f->start_line);
}

/* A repeated message (FK_LIST) or AnyValue (FK_ANYS), n > 0. */
static void enc_msg_list(pl_buf *b, const jfield *f, const void *items, uint32_t n)
{
    if (f->kind == FK_ANYS) {
        for (uint32_t i = 0; i < n; i++) {
            size_t s = w_begin(b, f->num);
            enc_anyvalue(b, (const pl_value *)items + i);
            w_end(b, s);
        }
        return;
    }
    const jmsg *sub = f->sub;
    /* One loop per hand-written message, so that its encoder is inlined. */
#define ELEMENTS(encode)                                                                           \
    do {                                                                                           \
        for (uint32_t i = 0; i < n; i++) {                                                         \
            size_t s = w_begin(b, f->num);                                                         \
            encode;                                                                                \
            w_end(b, s);                                                                           \
        }                                                                                          \
    } while (0)
#define ELEM ((const uint8_t *)items + (size_t)i * sub->size)
    if (sub == &pl_tm_keyvalue)
        ELEMENTS(hand_kv(b, ELEM));
    else if (sub == &pl_tm_sample)
        ELEMENTS(hand_sample(b, ELEM));
    else if (sub == &pl_tm_location)
        ELEMENTS(hand_location(b, ELEM));
    else if (sub == &pl_tm_stack)
        ELEMENTS(hand_stack(b, ELEM));
    else if (sub == &pl_tm_function)
        ELEMENTS(hand_function(b, ELEM));
    else
        ELEMENTS(enc_fields(b, sub, ELEM));
#undef ELEM
#undef ELEMENTS
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
