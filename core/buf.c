/*
 * buf.c: see buf.h. Capacity doubles, starting at 256 bytes.
 */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pl_buf_init(pl_buf *b)
{
    memset(b, 0, sizeof(*b));
}

void pl_buf_free(pl_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

void pl_buf_reset(pl_buf *b)
{
    b->len = 0;
    b->failed = false;
}

bool pl_buf_reserve(pl_buf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (extra <= b->cap - b->len)
        return true;
    size_t need = b->len + extra;
    if (need < b->len) {
        b->failed = true;
        return false;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    uint8_t *p = realloc(b->data, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void pl_buf_append(pl_buf *b, const void *data, size_t len)
{
    if (!len || !pl_buf_reserve(b, len))
        return;
    memcpy(b->data + b->len, data, len);
    b->len += len;
}

void pl_buf_append_byte(pl_buf *b, uint8_t byte)
{
    if (!pl_buf_reserve(b, 1))
        return;
    b->data[b->len++] = byte;
}

void pl_buf_append_str(pl_buf *b, const char *s)
{
    pl_buf_append(b, s, strlen(s));
}

void pl_buf_printf(pl_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t)n < sizeof(small)) {
        pl_buf_append(b, small, (size_t)n);
        return;
    }
    if (!pl_buf_reserve(b, (size_t)n + 1))
        return;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

uint8_t *pl_buf_steal(pl_buf *b, size_t *len)
{
    uint8_t *p = b->data;
    if (len)
        *len = b->len;
    memset(b, 0, sizeof(*b));
    return p;
}

void pl_buf_json_string(pl_buf *b, const void *s, size_t n)
{
    pl_buf_json_string_ex(b, s, n, false);
}

void pl_buf_json_string_ex(pl_buf *b, const void *s, size_t n, bool all_u)
{
    static const char hex[] = "0123456789abcdef";
    if (n == 0) { /* s may be NULL */
        pl_buf_append(b, "\"\"", 2);
        return;
    }
    if (!pl_buf_reserve(b, n + 2))
        return;
    const uint8_t *p = s;
    pl_buf_append_byte(b, '"');
    size_t run = 0; /* start of the bytes not yet copied */
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        pl_buf_append(b, p + run, i - run);
        run = i + 1;
        switch (all_u && c < 0x20 ? -1 : c) {
        case '"':
            pl_buf_append(b, "\\\"", 2);
            break;
        case '\\':
            pl_buf_append(b, "\\\\", 2);
            break;
        case '\n':
            pl_buf_append(b, "\\n", 2);
            break;
        case '\r':
            pl_buf_append(b, "\\r", 2);
            break;
        case '\t':
            pl_buf_append(b, "\\t", 2);
            break;
        default: {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            pl_buf_append(b, e, 6);
        }
        }
    }
    pl_buf_append(b, p + run, n - run);
    pl_buf_append_byte(b, '"');
}

int pl_array_reserve(void **items, size_t n, size_t *cap, size_t elem_size, size_t first)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : first;
    if (c <= n || c > SIZE_MAX / elem_size)
        return -1;
    void *p = realloc(*items, c * elem_size);
    if (!p)
        return -1;
    *items = p;
    *cap = c;
    return 0;
}
