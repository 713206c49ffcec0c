/*
 * errpath.h: where a decoder is in a message, for error messages that name
 * the place ("resourceSpans[0].scopeSpans[1].spans[7].traceId: ..."); shared
 * by the protobuf and the JSON decoders (private to proto/).
 */
#ifndef PL_ERRPATH_H
#define PL_ERRPATH_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

#define PL_ERRPATH_SLOTS 32

typedef struct pl_errpath {
    unsigned depth; /* entries; beyond PL_ERRPATH_SLOTS they are counted only */
    struct {
        const char *name;
        int64_t index; /* -1: not a repeated field */
    } at[PL_ERRPATH_SLOTS];
} pl_errpath;

static inline void pl_errpath_push(pl_errpath *p, const char *name, int64_t index)
{
    if (p->depth < PL_ERRPATH_SLOTS) {
        p->at[p->depth].name = name;
        p->at[p->depth].index = index;
    }
    p->depth++;
}

static inline void pl_errpath_pop(pl_errpath *p)
{
    p->depth--;
}

/* Writes "<path>.<field>: <what>" into err (if not NULL). Names are
 * lowerCamelCase in the tables; `snake` writes them as the .proto names
 * ("startTimeUnixNano" -> "start_time_unix_nano"), for protobuf errors. */
void pl_errpath_vfail(const pl_errpath *p, pl_err *err, bool snake, const char *field,
                      const char *fmt, va_list ap);
/* The same with arguments; returns -1, the decoders' failure (their
 * pl_json_dec_fail / pl_pb_wire_fail are this with their path and naming). */
__attribute__((format(printf, 5, 6))) int pl_errpath_fail(const pl_errpath *p, pl_err *err,
                                                          bool snake, const char *field,
                                                          const char *fmt, ...);

/* Sets *status to PL_ERR_NOMEM and "out of memory while decoding" into err
 * (if not NULL); returns -1. */
int pl_errpath_oom(pl_status *status, pl_err *err);

#endif
