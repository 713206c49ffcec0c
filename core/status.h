/*
 * status.h: the result of handing data on, and an error text buffer.
 *
 * Every consume/export hook returns a pl_status. Receivers map it to the
 * answer their protocol gives (see pl_status_http / pl_status_grpc), so the
 * meaning of each value is fixed here, once.
 */
#ifndef PL_STATUS_H
#define PL_STATUS_H

#include <stdarg.h>
#include <stddef.h>

typedef enum pl_status {
    PL_OK = 0,
    PL_ERR_INVALID,         /* bad data or request: 400 / INVALID_ARGUMENT, not retryable */
    PL_ERR_TOO_LARGE,       /* over a size limit: 413 (400 for OTLP/HTTP) / RESOURCE_EXHAUSTED */
    PL_ERR_UNSUPPORTED,     /* content type / encoding not supported: 415 / UNIMPLEMENTED */
    PL_ERR_REFUSED,         /* back-pressure (memory limit, full queue): 503 / UNAVAILABLE, retry */
    PL_ERR_THROTTLED,       /* rate limit: 429 / RESOURCE_EXHAUSTED with RetryInfo, retry */
    PL_ERR_UNAUTHENTICATED, /* 401 / UNAUTHENTICATED */
    PL_ERR_NOT_FOUND,       /* unknown path or method: 404 / UNIMPLEMENTED */
    PL_ERR_INTERNAL,        /* a bug or an I/O failure: 500 / INTERNAL */
    PL_ERR_NOMEM,           /* malloc failed: treated as REFUSED by receivers */
} pl_status;

const char *pl_status_name(pl_status s);
int pl_status_http(pl_status s);      /* HTTP status code for an OTLP receiver */
int pl_status_grpc(pl_status s);      /* gRPC status code */
int pl_status_retryable(pl_status s); /* 1 if a client should retry */

/* Seconds a client is told to wait (Retry-After / RetryInfo) after a refusal. */
#define PL_RETRY_AFTER_SECONDS 1

/* An error message buffer passed down by callers that want to know why. */
typedef struct pl_err {
    char msg[512];
} pl_err;

/* Formats into err (if not NULL) and returns `status`, so error paths read
 * `return pl_errf(err, PL_ERR_INVALID, "span %u: bad trace_id", i);` */
pl_status pl_errf(pl_err *err, pl_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
