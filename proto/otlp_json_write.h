/*
 * otlp_json_write.h: the JSON writer of the OTLP/JSON encoder (private to
 * proto/): members and elements appended to a pl_buf, with the separator
 * bookkeeping in one place.
 */
#ifndef PL_OTLP_JSON_WRITE_H
#define PL_OTLP_JSON_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/buf.h"

/* The writer tracks whether the current object already has a member, so
 * that optional members can be left out without comma bookkeeping at each
 * call site. */
typedef struct jw {
    pl_buf *b;
    bool first; /* no member written yet in the current object/array */
} jw;

/* `,"key":` (no comma for the first member). */
static inline void w_keyn(jw *w, const char *key, size_t n)
{
    if (!pl_buf_reserve(w->b, n + 4))
        return;
    uint8_t *p = w->b->data + w->b->len;
    if (!w->first)
        *p++ = ',';
    *p++ = '"';
    memcpy(p, key, n);
    p += n;
    *p++ = '"';
    *p++ = ':';
    w->b->len = (size_t)(p - w->b->data);
    w->first = false;
}

static inline void w_key(jw *w, const char *key)
{
    w_keyn(w, key, strlen(key));
}

static inline void w_open(jw *w, char c)
{
    pl_buf_append_byte(w->b, (uint8_t)c);
    w->first = true;
}

static inline void w_close(jw *w, char c)
{
    pl_buf_append_byte(w->b, (uint8_t)c);
    w->first = false;
}

static inline void w_elem(jw *w)
{
    if (!w->first)
        pl_buf_append_byte(w->b, ',');
    w->first = false;
}

/* A member whose value is an array or object: `"key":[` or `"key":{`. */
static inline void w_key_open(jw *w, const char *key, char c)
{
    w_key(w, key);
    w_open(w, c);
}

#endif
