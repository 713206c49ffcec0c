/*
 * pb_writer_fixture.h: a tiny protobuf writer for tests that build encoded
 * messages by hand (pprof profiles, malformed inputs): varints, fields by
 * number, length-delimited bytes and sub-messages, packed varints. Written
 * apart from proto/ so the decoders are checked against an independent
 * encoder.
 */
#ifndef PL_TESTS_PB_WRITER_FIXTURE_H
#define PL_TESTS_PB_WRITER_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

static inline void w_varint(pl_buf *b, uint64_t v)
{
    while (v >= 0x80) {
        pl_buf_append_byte(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    pl_buf_append_byte(b, (uint8_t)v);
}
static inline void w_uint(pl_buf *b, uint32_t f, uint64_t v)
{
    w_varint(b, (uint64_t)f << 3);
    w_varint(b, v);
}
static inline void w_bytes(pl_buf *b, uint32_t f, const void *p, size_t n)
{
    w_varint(b, (uint64_t)f << 3 | 2);
    w_varint(b, n);
    pl_buf_append(b, p, n);
}
static inline void w_msg(pl_buf *b, uint32_t f, pl_buf *m)
{
    w_bytes(b, f, m->data, m->len);
    pl_buf_reset(m);
}
static inline void w_packed(pl_buf *b, uint32_t f, const uint64_t *v, size_t n)
{
    pl_buf t;
    pl_buf_init(&t);
    for (size_t i = 0; i < n; i++)
        w_varint(&t, v[i]);
    w_bytes(b, f, t.data, t.len);
    pl_buf_free(&t);
}

#endif
