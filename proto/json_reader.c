/*
 * json_reader.c: see json_reader.h.
 *
 * Strings are scanned eight bytes at a time for the only bytes that need a
 * closer look (quote, backslash, control characters, non-ASCII); UTF-8 is
 * checked once per string that has non-ASCII bytes. Escapes are ASCII, so
 * checking the raw bytes is enough for everything but \u escapes, which
 * pl_jr_unescape checks when it decodes them.
 */
#include "json_reader.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "otlp_pb.h"

void pl_jr_init(pl_jr *r, const uint8_t *buf, size_t len, unsigned max_depth)
{
    static const uint8_t empty[1];
    r->start = r->p = buf ? buf : empty;
    r->end = r->p + (buf ? len : 0);
    r->error = NULL;
    r->error_at = 0;
    r->depth = 0;
    r->max_depth = max_depth;
}

bool pl_jr_fail(pl_jr *r, const char *what)
{
    if (!r->error) {
        r->error = what;
        r->error_at = (size_t)(r->p - r->start);
    }
    r->p = r->end;
    return false;
}

static inline void skip_ws(pl_jr *r)
{
    const uint8_t *p = r->p, *e = r->end;
    while (p < e && *p <= ' ' && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    r->p = p;
}

pl_jtype pl_jr_peek(pl_jr *r)
{
    if (r->error)
        return PL_JT_NONE;
    skip_ws(r);
    if (r->p >= r->end)
        return PL_JT_NONE;
    switch (*r->p) {
    case '{':
        return PL_JT_OBJECT;
    case '[':
        return PL_JT_ARRAY;
    case '"':
        return PL_JT_STRING;
    case 't':
        return PL_JT_TRUE;
    case 'f':
        return PL_JT_FALSE;
    case 'n':
        return PL_JT_NULL;
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        return PL_JT_NUMBER;
    default:
        return PL_JT_BAD;
    }
}

static inline int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* High bit set in each byte of w that is '"', '\\', < 0x20 or >= 0x80. The
 * lowest flagged byte is exact (borrows only run upwards from a flagged
 * byte), which is the one the scanner needs. */
static inline uint64_t special_mask(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    uint64_t zero_q = (q - ones) & ~q, zero_b = (b - ones) & ~b;
    uint64_t ctl = (w - ones * 0x20) & ~w;
    return (zero_q | zero_b | ctl | w) & high;
}

#if defined(__SSE2__)
/* Bit i set when byte i of the 16 at p is '"', '\\', < 0x20 or >= 0x80 (the
 * signed compare takes both of the last two). */
static inline unsigned special16(const uint8_t *p)
{
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i q = _mm_cmpeq_epi8(x, _mm_set1_epi8('"'));
    __m128i b = _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'));
    __m128i c = _mm_cmplt_epi8(x, _mm_set1_epi8(0x20));
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(q, b), c));
}
#endif

size_t pl_jr_plain_len(const uint8_t *p, const uint8_t *end)
{
    const uint8_t *q = p;
#if defined(__SSE2__)
    while (end - q >= 16) {
        unsigned m = special16(q);
        if (m)
            return (size_t)(q - p) + (size_t)__builtin_ctz(m);
        q += 16;
    }
#endif
    while (q < end && *q >= 0x20 && *q < 0x80 && *q != '"' && *q != '\\')
        q++;
    return (size_t)(q - p);
}

static bool string_slow(pl_jr *r, pl_jstr *out);

bool pl_jr_string(pl_jr *r, pl_jstr *out)
{
#if defined(__SSE2__)
    /* Most strings: no white space before, plain ASCII without escapes,
     * the closing quote in a 16-byte window. */
    const uint8_t *p = r->p, *e = r->end;
    if (p < e && *p == '"') {
        const uint8_t *s = p + 1, *q = s;
        while (e - q >= 16) {
            unsigned m = special16(q);
            if (m) {
                q += __builtin_ctz(m);
                if (*q != '"')
                    break;
                out->ptr = s;
                out->len = (size_t)(q - s);
                out->escaped = false;
                r->p = q + 1;
                return true;
            }
            q += 16;
        }
    }
#endif
    return string_slow(r, out);
}

/* The whole grammar: escapes, control characters, UTF-8, the end of input. */
static __attribute__((noinline)) bool string_slow(pl_jr *r, pl_jstr *out)
{
    skip_ws(r);
    const uint8_t *p = r->p, *e = r->end;
    if (p >= e || *p != '"')
        return pl_jr_fail(r, "expected a string");
    p++;
    const uint8_t *s = p;
    bool escaped = false, high = false;
    for (;;) {
#if defined(__SSE2__)
        while (e - p >= 16) {
            unsigned m = special16(p);
            if (m) {
                p += __builtin_ctz(m); /* straight to the first special byte */
                goto special;
            }
            p += 16;
        }
#endif
        while (e - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            uint64_t m = special_mask(w);
            if (m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                p += __builtin_ctzll(m) >> 3; /* straight to the first special byte */
#endif
                break;
            }
            p += 8;
        }
#if defined(__SSE2__)
    special:
#endif
        if (p >= e) {
            r->p = p;
            return pl_jr_fail(r, "unterminated string");
        }
        uint8_t c = *p;
        if (c == '"')
            break;
        if (c == '\\') {
            escaped = true;
            if (e - p < 2) {
                r->p = p;
                return pl_jr_fail(r, "unterminated string");
            }
            uint8_t x = p[1];
            if (x == 'u') {
                if (e - p < 6 || hexval(p[2]) < 0 || hexval(p[3]) < 0 || hexval(p[4]) < 0 ||
                    hexval(p[5]) < 0) {
                    r->p = p;
                    return pl_jr_fail(r, "bad \\u escape");
                }
                p += 6;
            } else if (x == '"' || x == '\\' || x == '/' || x == 'b' || x == 'f' || x == 'n' ||
                       x == 'r' || x == 't') {
                p += 2;
            } else {
                r->p = p;
                return pl_jr_fail(r, "bad escape");
            }
            continue;
        }
        if (c < 0x20) {
            r->p = p;
            return pl_jr_fail(r, "control character in a string");
        }
        if (c >= 0x80)
            high = true;
        p++;
    }
    if (high && !pl_utf8_valid(s, (size_t)(p - s))) {
        r->p = s;
        return pl_jr_fail(r, "invalid UTF-8 in a string");
    }
    out->ptr = s;
    out->len = (size_t)(p - s);
    out->escaped = escaped;
    r->p = p + 1;
    return true;
}

static inline bool is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

bool pl_jr_number(pl_jr *r, const char **text, size_t *len)
{
    skip_ws(r);
    const uint8_t *p = r->p, *e = r->end, *s = p;
    if (p < e && *p == '-')
        p++;
    if (p >= e || !is_digit(*p))
        return pl_jr_fail(r, "bad number");
    if (*p == '0')
        p++;
    else
        while (p < e && is_digit(*p))
            p++;
    if (p < e && *p == '.') {
        p++;
        if (p >= e || !is_digit(*p)) {
            r->p = p;
            return pl_jr_fail(r, "bad number");
        }
        while (p < e && is_digit(*p))
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || !is_digit(*p)) {
            r->p = p;
            return pl_jr_fail(r, "bad number");
        }
        while (p < e && is_digit(*p))
            p++;
    }
    *text = (const char *)s;
    *len = (size_t)(p - s);
    r->p = p;
    return true;
}

bool pl_jr_literal(pl_jr *r)
{
    skip_ws(r);
    size_t left = (size_t)(r->end - r->p);
    if (left >= 4 && memcmp(r->p, "true", 4) == 0)
        r->p += 4;
    else if (left >= 4 && memcmp(r->p, "null", 4) == 0)
        r->p += 4;
    else if (left >= 5 && memcmp(r->p, "false", 5) == 0)
        r->p += 5;
    else
        return pl_jr_fail(r, "bad literal");
    return true;
}

static bool open(pl_jr *r, uint8_t c)
{
    if (r->error)
        return false;
    skip_ws(r);
    if (r->p >= r->end || *r->p != c)
        return pl_jr_fail(r, c == '{' ? "expected an object" : "expected an array");
    if (++r->depth > r->max_depth)
        return pl_jr_fail(r, "nested too deep");
    r->p++;
    return true;
}

bool pl_jr_object_begin(pl_jr *r)
{
    return open(r, '{');
}

bool pl_jr_array_begin(pl_jr *r)
{
    return open(r, '[');
}

/* Before the next member or element: the closing bracket (returns 0), or a
 * comma unless it is the first (returns 1). */
static int next_item(pl_jr *r, unsigned *count, uint8_t close)
{
    if (r->error)
        return -1;
    skip_ws(r);
    if (r->p >= r->end) {
        pl_jr_fail(r, "unexpected end of input");
        return -1;
    }
    if (*r->p == close) {
        r->p++;
        r->depth--;
        return 0;
    }
    if (*count) {
        if (*r->p != ',') {
            pl_jr_fail(r, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
            return -1;
        }
        r->p++;
        skip_ws(r);
    }
    ++*count;
    return 1;
}

int pl_jr_object_next(pl_jr *r, unsigned *count, pl_jstr *key)
{
    int rc = next_item(r, count, '}');
    if (rc <= 0)
        return rc;
    if (r->p >= r->end || *r->p != '"') {
        pl_jr_fail(r, "expected a key");
        return -1;
    }
    if (!pl_jr_string(r, key))
        return -1;
    skip_ws(r);
    if (r->p >= r->end || *r->p != ':') {
        pl_jr_fail(r, "expected ':'");
        return -1;
    }
    r->p++;
    return 1;
}

int pl_jr_array_next(pl_jr *r, unsigned *count)
{
    int rc = next_item(r, count, ']');
    if (rc == 1 && r->p < r->end && *r->p == ']') {
        pl_jr_fail(r, "expected a value");
        return -1;
    }
    return rc;
}

bool pl_jr_skip(pl_jr *r)
{
    pl_jstr s;
    const char *t;
    size_t n;
    unsigned count = 0;
    int rc;
    switch (pl_jr_peek(r)) {
    case PL_JT_OBJECT:
        if (!pl_jr_object_begin(r))
            return false;
        while ((rc = pl_jr_object_next(r, &count, &s)) == 1)
            if (!pl_jr_skip(r))
                return false;
        return rc == 0;
    case PL_JT_ARRAY:
        if (!pl_jr_array_begin(r))
            return false;
        while ((rc = pl_jr_array_next(r, &count)) == 1)
            if (!pl_jr_skip(r))
                return false;
        return rc == 0;
    case PL_JT_STRING:
        return pl_jr_string(r, &s);
    case PL_JT_NUMBER:
        return pl_jr_number(r, &t, &n);
    case PL_JT_TRUE:
    case PL_JT_FALSE:
    case PL_JT_NULL:
        return pl_jr_literal(r);
    case PL_JT_NONE:
        return r->error ? false : pl_jr_fail(r, "unexpected end of input");
    default:
        return pl_jr_fail(r, "unexpected character");
    }
}

bool pl_jr_finish(pl_jr *r)
{
    if (r->error)
        return false;
    skip_ws(r);
    if (r->p != r->end)
        return pl_jr_fail(r, "trailing data");
    return true;
}

static uint8_t *put_utf8(uint8_t *o, uint32_t cp)
{
    if (cp < 0x80) {
        *o++ = (uint8_t)cp;
    } else if (cp < 0x800) {
        *o++ = (uint8_t)(0xc0 | cp >> 6);
        *o++ = (uint8_t)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *o++ = (uint8_t)(0xe0 | cp >> 12);
        *o++ = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
        *o++ = (uint8_t)(0x80 | (cp & 0x3f));
    } else {
        *o++ = (uint8_t)(0xf0 | cp >> 18);
        *o++ = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
        *o++ = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
        *o++ = (uint8_t)(0x80 | (cp & 0x3f));
    }
    return o;
}

static uint32_t hex4(const uint8_t *p)
{
    return (uint32_t)(hexval(p[0]) << 12 | hexval(p[1]) << 8 | hexval(p[2]) << 4 | hexval(p[3]));
}

long pl_jr_unescape(const pl_jstr *s, uint8_t *out)
{
    const uint8_t *p = s->ptr, *e = p + s->len;
    uint8_t *o = out;
    while (p < e) {
        const uint8_t *bs = memchr(p, '\\', (size_t)(e - p));
        if (!bs) {
            memmove(o, p, (size_t)(e - p));
            o += e - p;
            break;
        }
        memmove(o, p, (size_t)(bs - p));
        o += bs - p;
        p = bs + 1; /* the reader checked that an escape follows */
        uint8_t c = *p++;
        switch (c) {
        case 'b':
            *o++ = '\b';
            break;
        case 'f':
            *o++ = '\f';
            break;
        case 'n':
            *o++ = '\n';
            break;
        case 'r':
            *o++ = '\r';
            break;
        case 't':
            *o++ = '\t';
            break;
        case 'u': {
            uint32_t cp = hex4(p);
            p += 4;
            if (cp >= 0xdc00 && cp <= 0xdfff)
                return -1;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (e - p < 6 || p[0] != '\\' || p[1] != 'u')
                    return -1;
                uint32_t lo = hex4(p + 2);
                if (lo < 0xdc00 || lo > 0xdfff)
                    return -1;
                p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            o = put_utf8(o, cp);
            break;
        }
        default: /* '"', '\\', '/' */
            *o++ = c;
        }
    }
    return (long)(o - out);
}

bool pl_jr_key_folded_eq(const uint8_t *key, size_t key_len, const char *name)
{
    size_t i = 0;
    const char *n = name;
    for (;;) {
        while (i < key_len && key[i] == '_')
            i++;
        while (*n == '_')
            n++;
        if (i == key_len || !*n)
            return i == key_len && !*n;
        uint8_t a = key[i], b = (uint8_t)*n;
        if (a >= 'A' && a <= 'Z')
            a = (uint8_t)(a + 32);
        if (b >= 'A' && b <= 'Z')
            b = (uint8_t)(b + 32);
        if (a != b)
            return false;
        i++;
        n++;
    }
}
