/*
 * otlp_pb_write.h: protobuf writing primitives shared inside proto/ (the
 * table-driven encoder otlp_pb_enc.c, export responses and google.rpc.Status
 * in otlp_pb.c). Writers append to a pl_buf and do nothing once it failed.
 *
 * Length-delimited fields are written with a one-byte length placeholder
 * (w_begin) and, once the content is written and its length known (w_end),
 * the content moves up when the length needs more bytes. Only messages
 * longer than 127 bytes move, each once, so the work stays linear in the
 * output size (times the nesting depth) instead of re-encoding children to
 * size them.
 */
#ifndef PL_OTLP_PB_WRITE_H
#define PL_OTLP_PB_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/buf.h"
#include "core/model.h"

enum { PBW_VARINT = 0, PBW_I64 = 1, PBW_LEN = 2, PBW_I32 = 5 };

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
    w_tag(b, num, PBW_LEN);
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
        w_tag(b, num, PBW_VARINT);
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
        w_tag(b, num, PBW_I64);
        uint8_t *p = b->data + b->len;
        for (int i = 0; i < 8; i++)
            p[i] = (uint8_t)(v >> (8 * i));
        b->len += 8;
    }
}

static inline void w_fixed32_opt(pl_buf *b, uint32_t num, uint32_t v)
{
    if (v && w_room(b, 10)) {
        w_tag(b, num, PBW_I32);
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
    w_tag(b, num, PBW_LEN);
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

#endif
