/*
 * otlp_json_scalars.c: the OTLP/JSON scalar readers and decoder errors (see
 * otlp_json_internal.h).
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_json.h"
#include "otlp_json_internal.h"
#include "otlp_pb.h"

void pl_json_dec_init(jdec *d, pl_arena *arena, const uint8_t *buf, size_t len, size_t budget,
                      pl_err *err)
{
    memset(d, 0, sizeof(*d));
    pl_jr_init(&d->r, buf, len, JSON_MAX_DEPTH);
    d->arena = arena;
    d->err = err;
    d->status = PL_ERR_INVALID;
    d->budget = budget;
    if (err)
        err->msg[0] = '\0';
}

/* A syntax error from the reader. */
int pl_json_dec_syntax(jdec *d)
{
    d->status = PL_ERR_INVALID;
    if (d->err)
        snprintf(d->err->msg, sizeof d->err->msg, "invalid JSON at offset %zu: %s", d->r.error_at,
                 d->r.error ? d->r.error : "unexpected input");
    return -1;
}

/* ---- scalars ------------------------------------------------------------ */

/* A short string's text, unescaped into buf (NUL-terminated). Longer ones
 * are cut (they never match a name or fit a number). */
int pl_json_dec_short_text(jdec *d, const pl_jstr *s, char *buf, size_t cap, size_t *len)
{
    if (!s->escaped) {
        size_t n = s->len < cap - 1 ? s->len : cap - 1;
        if (n) /* a null value has no text (ptr NULL) */
            memcpy(buf, s->ptr, n);
        buf[n] = '\0';
        *len = s->len;
        return 0;
    }
    uint8_t *tmp = malloc(s->len + 1);
    if (!tmp)
        return pl_json_dec_oom(d);
    long n = pl_jr_unescape(s, tmp);
    if (n < 0) {
        free(tmp);
        return pl_json_dec_fail(d, NULL, "invalid UTF-8");
    }
    size_t c = (size_t)n < cap - 1 ? (size_t)n : cap - 1;
    memcpy(buf, tmp, c);
    buf[c] = '\0';
    *len = (size_t)n;
    free(tmp);
    return 0;
}

int pl_json_dec_parse_decimal(const char *s, size_t len, bool is_signed, uint64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (i < len && (s[i] == '-' || s[i] == '+')) {
        if (!is_signed && s[i] == '-')
            return -1;
        neg = s[i] == '-';
        i++;
    }
    if (i == len)
        return -1;
    uint64_t v = 0;
    if (len - i <= 19) {
        /* 19 digits never overflow 64 bits (timestamps have 19) */
        for (; i < len; i++) {
            unsigned dgt = (unsigned)(uint8_t)s[i] - '0';
            if (dgt > 9)
                return -1;
            v = v * 10 + dgt;
        }
    }
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        unsigned dgt = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - dgt) / 10)
            return -1;
        v = v * 10 + dgt;
    }
    if (is_signed) {
        if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
            return -1;
        *out = neg ? (uint64_t)(-(int64_t)(v - 1) - 1) : v;
    } else {
        *out = v;
    }
    return 0;
}

/* A JSON number token as an integer: integral syntax exactly, or a
 * fraction/exponent whose value is integral. */
static int number_to_int(jdec *d, const char *name, const char *t, size_t n, bool is_signed,
                         uint64_t *u)
{
    bool integral = true;
    for (size_t i = 0; i < n; i++)
        if (t[i] == '.' || t[i] == 'e' || t[i] == 'E')
            integral = false;
    if (integral) {
        if (t[0] == '-' && !is_signed) {
            /* "-0" is zero */
            bool zero = true;
            for (size_t i = 1; i < n; i++)
                zero &= t[i] == '0';
            if (!zero)
                return pl_json_dec_fail(d, name, "negative value for an unsigned field");
            *u = 0;
            return 0;
        }
        if (pl_json_dec_parse_decimal(t, n, is_signed, u))
            return pl_json_dec_fail(d, name, "integer out of range");
        return 0;
    }
    char tmp[64];
    if (n >= sizeof tmp)
        return pl_json_dec_fail(d, name, "want an integer");
    memcpy(tmp, t, n);
    tmp[n] = '\0';
    double x = strtod(tmp, NULL);
    /* Exact powers of two bound the convertible range (2^63, 2^64). */
    if (!isfinite(x) || x != floor(x) || x < (is_signed ? -9223372036854775808.0 : 0) ||
        x >= (is_signed ? 9223372036854775808.0 : 18446744073709551616.0))
        return pl_json_dec_fail(d, name,
                                x < 0 && !is_signed ? "negative value for an unsigned field"
                                                    : "want an integer");
    *u = is_signed ? (uint64_t)(int64_t)x : (uint64_t)x;
    return 0;
}

/* Integers: a JSON number (integral) or a decimal string; null is 0. */
int pl_json_dec_int(jdec *d, const char *name, bool is_signed, int64_t min, uint64_t max_u,
                    uint64_t *out)
{
    uint64_t u = 0;
    switch (pl_jr_peek(&d->r)) {
    case PL_JT_NUMBER: {
        const char *t;
        size_t n;
        if (!pl_jr_number(&d->r, &t, &n))
            return pl_json_dec_syntax(d);
        if (number_to_int(d, name, t, n, is_signed, &u))
            return -1;
        break;
    }
    case PL_JT_STRING: {
        pl_jstr s;
        char buf[48];
        size_t n;
        if (!pl_jr_string(&d->r, &s))
            return pl_json_dec_syntax(d);
        if (pl_json_dec_short_text(d, &s, buf, sizeof buf, &n))
            return -1;
        if (n >= sizeof buf || pl_json_dec_parse_decimal(buf, n, is_signed, &u))
            return pl_json_dec_fail(d, name, "\"%.40s\" is not a decimal integer", buf);
        break;
    }
    case PL_JT_NULL:
        if (!pl_jr_literal(&d->r))
            return pl_json_dec_syntax(d);
        break;
    case PL_JT_NONE:
        return pl_json_dec_syntax(d);
    default:
        if (!pl_jr_skip(&d->r))
            return pl_json_dec_syntax(d);
        return pl_json_dec_fail(d, name, "want an integer");
    }
    if (is_signed) {
        int64_t s = (int64_t)u;
        if (s < min || (s > 0 && (uint64_t)s > max_u))
            return pl_json_dec_fail(d, name, "%" PRId64 " out of range", s);
    } else if (u > max_u) {
        return pl_json_dec_fail(d, name, "%" PRIu64 " out of range", u);
    }
    *out = u;
    return 0;
}

/* An enum: an integer, or one of `names` (index = value). */
int pl_json_dec_enum(jdec *d, const char *name, const char *const *names, const int32_t *values,
                     int n_names, int32_t *out)
{
    if (pl_jr_peek(&d->r) == PL_JT_STRING) {
        pl_jstr s;
        char buf[48];
        size_t n;
        if (!pl_jr_string(&d->r, &s))
            return pl_json_dec_syntax(d);
        if (pl_json_dec_short_text(d, &s, buf, sizeof buf, &n))
            return -1;
        if (n < sizeof buf) {
            for (int i = 0; i < n_names; i++) {
                if (strcmp(buf, names[i]) == 0) {
                    *out = values ? values[i] : i;
                    return 0;
                }
            }
            uint64_t u;
            if (pl_json_dec_parse_decimal(buf, n, true, &u) == 0 && (int64_t)u >= INT32_MIN &&
                (int64_t)u <= INT32_MAX) {
                *out = (int32_t)(int64_t)u;
                return 0;
            }
        }
        return pl_json_dec_fail(d, name, "unknown enum value \"%.40s\"", buf);
    }
    uint64_t u;
    if (pl_json_dec_int(d, name, true, INT32_MIN, INT32_MAX, &u))
        return -1;
    *out = (int32_t)(int64_t)u;
    return 0;
}

int pl_json_dec_double(jdec *d, const char *name, double *out)
{
    const char *t;
    size_t n;
    char buf[72];
    switch (pl_jr_peek(&d->r)) {
    case PL_JT_NUMBER:
        if (!pl_jr_number(&d->r, &t, &n))
            return pl_json_dec_syntax(d);
        if (n >= sizeof buf) {
            /* Many digits: strtod needs them all to round correctly. */
            char *big = malloc(n + 1);
            if (!big)
                return pl_json_dec_oom(d);
            memcpy(big, t, n);
            big[n] = '\0';
            *out = strtod(big, NULL);
            free(big);
            return 0;
        }
        memcpy(buf, t, n);
        buf[n] = '\0';
        *out = strtod(buf, NULL);
        return 0;
    case PL_JT_STRING: {
        pl_jstr s;
        if (!pl_jr_string(&d->r, &s))
            return pl_json_dec_syntax(d);
        if (pl_json_dec_short_text(d, &s, buf, sizeof buf, &n))
            return -1;
        if (n < sizeof buf) {
            if (strcmp(buf, "NaN") == 0) {
                *out = NAN;
                return 0;
            }
            if (strcmp(buf, "Infinity") == 0) {
                *out = INFINITY;
                return 0;
            }
            if (strcmp(buf, "-Infinity") == 0) {
                *out = -INFINITY;
                return 0;
            }
            char *end;
            double x = strtod(buf, &end);
            if (*buf && !*end && isfinite(x)) {
                *out = x;
                return 0;
            }
        }
        return pl_json_dec_fail(d, name, "\"%.40s\" is not a number", buf);
    }
    case PL_JT_NONE:
        return pl_json_dec_syntax(d);
    default:
        if (!pl_jr_skip(&d->r))
            return pl_json_dec_syntax(d);
        return pl_json_dec_fail(d, name, "want a number");
    }
}

/* A string (or null: empty) as raw view; -1 with the error set otherwise. */
int pl_json_dec_jstr(jdec *d, const char *name, const char *want, pl_jstr *s)
{
    pl_jtype t = pl_jr_peek(&d->r);
    if (t == PL_JT_STRING)
        return pl_jr_string(&d->r, s) ? 0 : pl_json_dec_syntax(d);
    if (t == PL_JT_NULL) {
        *s = (pl_jstr){NULL, 0, false};
        return pl_jr_literal(&d->r) ? 0 : pl_json_dec_syntax(d);
    }
    if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
        return pl_json_dec_syntax(d);
    return pl_json_dec_fail(d, name, "%s", want);
}

/* Text fields point into the request unless they hold escapes. */
int pl_json_dec_string(jdec *d, const char *name, pl_bytes *out)
{
    pl_jstr s;
    if (pl_json_dec_jstr(d, name, "want a string", &s))
        return -1;
    if (s.len == 0) {
        *out = (pl_bytes){NULL, 0};
        return 0;
    }
    if (s.len > UINT32_MAX)
        return pl_json_dec_fail(d, name, "string too long");
    if (!s.escaped) {
        *out = (pl_bytes){s.ptr, (uint32_t)s.len};
        return 0;
    }
    if (pl_json_dec_charge(d, s.len))
        return -1;
    uint8_t *p = pl_arena_alloc(d->arena, s.len);
    if (!p)
        return pl_json_dec_oom(d);
    long n = pl_jr_unescape(&s, p);
    if (n < 0)
        return pl_json_dec_fail(d, name, "invalid UTF-8");
    *out = (pl_bytes){n ? p : NULL, (uint32_t)n};
    return 0;
}

int pl_json_dec_base64(jdec *d, const char *name, pl_bytes *out)
{
    pl_jstr s;
    if (pl_json_dec_jstr(d, name, "want a base64 string", &s))
        return -1;
    const char *text = (const char *)s.ptr;
    size_t n = s.len;
    if (pl_json_dec_charge(d, n))
        return -1;
    if (s.escaped) {
        uint8_t *u = pl_arena_alloc(d->arena, n + 1);
        if (!u)
            return pl_json_dec_oom(d);
        long m = pl_jr_unescape(&s, u);
        if (m < 0)
            return pl_json_dec_fail(d, name, "invalid base64 character");
        text = (const char *)u;
        n = (size_t)m;
    }
    while (n && text[n - 1] == '=')
        n--;
    if (n % 4 == 1)
        return pl_json_dec_fail(d, name, "bad base64 length");
    uint8_t *p = pl_arena_alloc(d->arena, n * 3 / 4 + 1);
    if (!p)
        return pl_json_dec_oom(d);
    size_t o = 0, bad = 0;
    if (!pl_otlp_base64_decode_into(text, n, p, &o, &bad))
        return pl_json_dec_fail(d, name, "invalid base64 character at %zu", bad);
    *out = (pl_bytes){o ? p : NULL, (uint32_t)o};
    return 0;
}

/* Hex digit values (-1: not a digit), for ids: every span has two or three. */
#define HEXV(c)                                                                                    \
    ((c) >= '0' && (c) <= '9'   ? (c) - '0'                                                        \
     : (c) >= 'a' && (c) <= 'f' ? (c) - 'a' + 10                                                   \
     : (c) >= 'A' && (c) <= 'F' ? (c) - 'A' + 10                                                   \
                                : -1)
#define HEXV4(c)  HEXV(c), HEXV((c) + 1), HEXV((c) + 2), HEXV((c) + 3)
#define HEXV16(c) HEXV4(c), HEXV4((c) + 4), HEXV4((c) + 8), HEXV4((c) + 12)
#define HEXV64(c) HEXV16(c), HEXV16((c) + 16), HEXV16((c) + 32), HEXV16((c) + 48)
static const int8_t hex_values[256] = {HEXV64(0), HEXV64(64), HEXV64(128), HEXV64(192)};

/* pl_hex_decode of the 2 * n digits at hex into out: 0, or -1 for a byte
 * that is no hex digit. */
static inline int hex_id(const uint8_t *hex, uint8_t *out, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        int hi = hex_values[hex[2 * i]], lo = hex_values[hex[2 * i + 1]];
        bad |= hi | lo;
        out[i] = (uint8_t)((unsigned)hi << 4 | (unsigned)lo);
    }
    return bad < 0 ? -1 : 0;
}

int pl_json_dec_hex_id(jdec *d, const char *name, uint8_t *dst, uint8_t *dst_len, size_t want)
{
    pl_jstr s;
    if (pl_json_dec_jstr(d, name, "want a hex string", &s))
        return -1;
    char buf[40];
    size_t n;
    const uint8_t *text = s.ptr; /* the digits, in the request unless escaped */
    if (s.escaped) {
        if (pl_json_dec_short_text(d, &s, buf, sizeof buf, &n))
            return -1;
        text = (const uint8_t *)buf;
    } else {
        n = s.len;
    }
    if (n == 0) {
        *dst_len = 0;
        return 0;
    }
    if (n != 2 * want)
        return pl_json_dec_fail(d, name, "%zu hex chars, want %zu", n, 2 * want);
    uint8_t id[sizeof buf / 2];
    if (want > sizeof id || hex_id(text, id, want))
        return pl_json_dec_fail(d, name, "invalid hex");
    memcpy(dst, id, want);
    *dst_len = (uint8_t)want;
    return 0;
}
