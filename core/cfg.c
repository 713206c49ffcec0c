/*
 * cfg.c: the parts of the config SDK (component.h) that components call:
 * the duration and size parsers, and the reports of validate hooks, which
 * the loader (config/decode.c) points at the key's position through the
 * context's report hook.
 */
#include "component.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- duration and size -------------------------------------------------- */

static const char *skip_spaces(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Reads a non-negative decimal number (digits, optional fraction). */
static int read_number(const char **pp, double *out)
{
    const char *p = *pp;
    if (!((*p >= '0' && *p <= '9') || (*p == '.' && p[1] >= '0' && p[1] <= '9')))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(p, &end);
    if (errno || end == p || !isfinite(v) || v < 0)
        return -1;
    /* strtod accepts exponents and hex; keep to plain decimals */
    for (const char *q = p; q < end; q++)
        if (!((*q >= '0' && *q <= '9') || *q == '.'))
            return -1;
    *pp = end;
    *out = v;
    return 0;
}

int pl_parse_duration(const char *text, int64_t *out_ns)
{
    if (!text)
        return -1;
    const char *p = skip_spaces(text);
    if (!*p)
        return -1;
    double total = 0;
    bool first = true;
    while (*p) {
        double v;
        if (read_number(&p, &v) < 0)
            return -1;
        double unit;
        if (strncmp(p, "ns", 2) == 0) {
            unit = 1;
            p += 2;
        } else if (strncmp(p, "us", 2) == 0) {
            unit = 1e3;
            p += 2;
        } else if (strncmp(p, "\xc2\xb5s", 3) == 0) { /* µs */
            unit = 1e3;
            p += 3;
        } else if (strncmp(p, "ms", 2) == 0) {
            unit = 1e6;
            p += 2;
        } else if (*p == 's') {
            unit = 1e9;
            p += 1;
        } else if (*p == 'm') {
            unit = 60e9;
            p += 1;
        } else if (*p == 'h') {
            unit = 3600e9;
            p += 1;
        } else if (first && *skip_spaces(p) == '\0') {
            unit = 1e9; /* a bare number is seconds */
            p = skip_spaces(p);
        } else {
            return -1;
        }
        total += v * unit;
        first = false;
        p = skip_spaces(p);
    }
    if (total > 9.2e18)
        return -1;
    *out_ns = (int64_t)llround(total);
    return 0;
}

int pl_parse_size(const char *text, uint64_t *out_bytes)
{
    if (!text)
        return -1;
    const char *p = skip_spaces(text);
    double v;
    if (read_number(&p, &v) < 0)
        return -1;
    p = skip_spaces(p);
    static const struct {
        const char *suffix;
        double mult;
    } units[] = {
        {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
        {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},           {"TB", 1e12},
        {"K", 1024.0},   {"M", 1048576.0},   {"G", 1073741824.0},   {"B", 1},
    };
    double mult = 1;
    if (*p) {
        size_t i, n = sizeof(units) / sizeof(units[0]);
        for (i = 0; i < n; i++) {
            size_t len = strlen(units[i].suffix);
            if (strncasecmp(p, units[i].suffix, len) == 0 && *skip_spaces(p + len) == '\0') {
                mult = units[i].mult;
                break;
            }
        }
        if (i == n)
            return -1;
    }
    double bytes = v * mult;
    if (bytes > 1.8e19)
        return -1;
    *out_bytes = (uint64_t)llround(bytes);
    return 0;
}

/* ---- reports from validate hooks ---------------------------------------- */

static void cfg_vreport(pl_cfg_ctx *ctx, bool warning, const char *key, const char *fmt, va_list ap)
{
    pl_cfg_reporter *r = (pl_cfg_reporter *)ctx;
    if (!r || !r->report)
        return;
    char msg[900];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    r->report(ctx, warning, key, msg);
}

void pl_cfg_errorf(pl_cfg_ctx *ctx, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cfg_vreport(ctx, false, key, fmt, ap);
    va_end(ap);
}

void pl_cfg_warnf(pl_cfg_ctx *ctx, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cfg_vreport(ctx, true, key, fmt, ap);
    va_end(ap);
}

int pl_cfg_check(pl_cfg_ctx *ctx, bool ok, const char *key, const char *fmt, ...)
{
    if (ok)
        return 0;
    va_list ap;
    va_start(ap, fmt);
    cfg_vreport(ctx, false, key, fmt, ap);
    va_end(ap);
    return 1;
}
