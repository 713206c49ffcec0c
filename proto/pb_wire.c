/*
 * pb_wire.c: see pb_wire.h.
 */
#include "proto/pb_wire.h"

int pl_pb_read_varint(pl_pb_reader *r, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            return -1;
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

int pl_pb_next_field(pl_pb_reader *r, uint32_t *field, uint32_t *wt, uint64_t *v, pl_pb_reader *sub)
{
    uint64_t key;
    if (pl_pb_read_varint(r, &key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX)
        return -1;
    *field = (uint32_t)(key >> 3);
    *wt = (uint32_t)(key & 7);
    switch (*wt) {
    case PL_PB_VARINT:
        return pl_pb_read_varint(r, v);
    case PL_PB_I64:
        if (r->end - r->p < 8)
            return -1;
        r->p += 8;
        return 0;
    case PL_PB_LEN:
        if (pl_pb_read_varint(r, v) || *v > (uint64_t)(r->end - r->p))
            return -1;
        sub->p = r->p;
        sub->end = r->p + *v;
        r->p += *v;
        return 0;
    case PL_PB_I32:
        if (r->end - r->p < 4)
            return -1;
        r->p += 4;
        return 0;
    default:
        return -1;
    }
}

void pl_pb_put_varint(pl_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    pl_buf_append(b, tmp, n);
}

size_t pl_pb_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

void pl_pb_put_len(pl_buf *b, uint32_t field, size_t len)
{
    pl_pb_put_varint(b, (uint64_t)field << 3 | PL_PB_LEN);
    pl_pb_put_varint(b, len);
}

void pl_pb_put_bytes(pl_buf *b, uint32_t field, const void *data, size_t len)
{
    pl_pb_put_len(b, field, len);
    pl_buf_append(b, data, len);
}
