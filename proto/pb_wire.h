/*
 * pb_wire.h: the protobuf wire format for the small hand-written readers
 * and writers outside the OTLP codec (the Pyroscope push request, the JFR
 * labels snapshot, pprof output): varints, the next field of a message,
 * length-delimited fields. Readers never read past `end` and reject keys
 * with field number 0, lengths past the end and unknown wire types.
 */
#ifndef PL_PROTO_PB_WIRE_H
#define PL_PROTO_PB_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

enum { PL_PB_VARINT = 0, PL_PB_I64 = 1, PL_PB_LEN = 2, PL_PB_I32 = 5 };

/* The unread part of a message. */
typedef struct pl_pb_reader {
    const uint8_t *p, *end;
} pl_pb_reader;

/* 0, or -1 when truncated or longer than 10 bytes. */
int pl_pb_read_varint(pl_pb_reader *r, uint64_t *out);

/* Reads the next field: its number and wire type; a varint's value, or a
 * length-delimited field's length in *v with its payload in *sub (fixed
 * 32/64-bit values are skipped). 0, or -1 when corrupt. */
int pl_pb_next_field(pl_pb_reader *r, uint32_t *field, uint32_t *wt, uint64_t *v,
                     pl_pb_reader *sub);

void pl_pb_put_varint(pl_buf *b, uint64_t v);
size_t pl_pb_varint_len(uint64_t v);
/* Key and length of a length-delimited field. */
void pl_pb_put_len(pl_buf *b, uint32_t field, size_t len);
/* A whole length-delimited field. */
void pl_pb_put_bytes(pl_buf *b, uint32_t field, const void *data, size_t len);

#endif
