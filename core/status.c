/*
 * status.c: names and protocol mappings of pl_status (see status.h).
 */
#include "status.h"

#include <stdio.h>

const char *pl_status_name(pl_status s)
{
    switch (s) {
    case PL_OK:
        return "ok";
    case PL_ERR_INVALID:
        return "invalid";
    case PL_ERR_TOO_LARGE:
        return "too large";
    case PL_ERR_UNSUPPORTED:
        return "unsupported";
    case PL_ERR_REFUSED:
        return "refused";
    case PL_ERR_THROTTLED:
        return "throttled";
    case PL_ERR_UNAUTHENTICATED:
        return "unauthenticated";
    case PL_ERR_NOT_FOUND:
        return "not found";
    case PL_ERR_INTERNAL:
        return "internal";
    case PL_ERR_NOMEM:
        return "out of memory";
    }
    return "unknown";
}

int pl_status_http(pl_status s)
{
    switch (s) {
    case PL_OK:
        return 200;
    case PL_ERR_INVALID:
        return 400;
    case PL_ERR_TOO_LARGE:
        return 413;
    case PL_ERR_UNSUPPORTED:
        return 415;
    case PL_ERR_REFUSED:
        return 503;
    case PL_ERR_THROTTLED:
        return 429;
    case PL_ERR_UNAUTHENTICATED:
        return 401;
    case PL_ERR_NOT_FOUND:
        return 404;
    case PL_ERR_INTERNAL:
        return 500;
    case PL_ERR_NOMEM:
        return 503;
    }
    return 500;
}

int pl_status_grpc(pl_status s)
{
    switch (s) {
    case PL_OK:
        return 0;
    case PL_ERR_INVALID:
        return 3; /* INVALID_ARGUMENT */
    case PL_ERR_TOO_LARGE:
        return 8; /* RESOURCE_EXHAUSTED, no RetryInfo */
    case PL_ERR_UNSUPPORTED:
        return 12; /* UNIMPLEMENTED */
    case PL_ERR_REFUSED:
        return 14; /* UNAVAILABLE */
    case PL_ERR_THROTTLED:
        return 8; /* RESOURCE_EXHAUSTED, with RetryInfo */
    case PL_ERR_UNAUTHENTICATED:
        return 16;
    case PL_ERR_NOT_FOUND:
        return 12;
    case PL_ERR_INTERNAL:
        return 13;
    case PL_ERR_NOMEM:
        return 14;
    }
    return 2;
}

int pl_status_retryable(pl_status s)
{
    return s == PL_ERR_REFUSED || s == PL_ERR_THROTTLED || s == PL_ERR_NOMEM;
}

pl_status pl_errf(pl_err *err, pl_status status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return status;
}
