/*
 * errpath.c: see errpath.h.
 */
#include "errpath.h"

#include <inttypes.h>
#include <stdio.h>

static const char *name_of(const char *camel, bool snake, char *out, size_t cap)
{
    if (!snake)
        return camel;
    size_t n = 0;
    for (const char *c = camel; *c && n + 2 < cap; c++) {
        if (*c >= 'A' && *c <= 'Z') {
            out[n++] = '_';
            out[n++] = (char)(*c - 'A' + 'a');
        } else {
            out[n++] = *c;
        }
    }
    out[n] = '\0';
    return out;
}

void pl_errpath_vfail(const pl_errpath *p, pl_err *err, bool snake, const char *field,
                      const char *fmt, va_list ap)
{
    if (!err)
        return;
    char where[320], what[192], name[64];
    size_t len = 0, cap = sizeof where;
    where[0] = '\0';
    unsigned n = p->depth < PL_ERRPATH_SLOTS ? p->depth : PL_ERRPATH_SLOTS;
    for (unsigned i = 0; i < n && len < cap; i++) {
        const char *nm = name_of(p->at[i].name, snake, name, sizeof name);
        int w = p->at[i].index >= 0 ? snprintf(where + len, cap - len, "%s%s[%" PRId64 "]",
                                               i ? "." : "", nm, p->at[i].index)
                                    : snprintf(where + len, cap - len, "%s%s", i ? "." : "", nm);
        if (w < 0)
            break;
        len += (size_t)w;
    }
    if (p->depth > PL_ERRPATH_SLOTS && len < cap)
        len += (size_t)snprintf(where + len, cap - len, "...");
    if (field && len < cap)
        snprintf(where + len, cap - len, "%s%s", len ? "." : "",
                 name_of(field, snake, name, sizeof name));
    if (!where[0])
        snprintf(where, cap, "(request)");
    vsnprintf(what, sizeof what, fmt, ap);
    snprintf(err->msg, sizeof err->msg, "%s: %s", where, what);
}

int pl_errpath_fail(const pl_errpath *p, pl_err *err, bool snake, const char *field,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pl_errpath_vfail(p, err, snake, field, fmt, ap);
    va_end(ap);
    return -1;
}

int pl_errpath_oom(pl_status *status, pl_err *err)
{
    *status = PL_ERR_NOMEM;
    if (err)
        snprintf(err->msg, sizeof err->msg, "out of memory while decoding");
    return -1;
}
