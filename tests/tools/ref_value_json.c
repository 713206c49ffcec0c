/*
 * ref_value_json.c: the four value writers proflink had before
 * core/value_json.c replaced them (the store's JSON columns, the attributes
 * processor's string conversion, the debug exporter's text; the OTLP/JSON
 * AnyValue is in ref_json_enc.c), kept verbatim as references for
 * tests/test_value_json.c.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"
#include "core/buf.h"
#include "core/model.h"
#include "ref_enc.h"

static void store_json_value(pl_buf *b, const pl_value *v, int depth);

static void store_json_kvs(pl_buf *b, const pl_kv *items, uint32_t n, int depth)
{
    pl_buf_append_byte(b, '{');
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            pl_buf_append_byte(b, ',');
        pl_buf_json_string(b, items[i].key.ptr, items[i].key.len);
        pl_buf_append_byte(b, ':');
        store_json_value(b, &items[i].value, depth + 1);
    }
    pl_buf_append_byte(b, '}');
}

static void store_json_value(pl_buf *b, const pl_value *v, int depth)
{
    if (depth > 16) { /* hostile nesting: stop rather than recurse forever */
        pl_buf_append_str(b, "null");
        return;
    }
    switch (v->type) {
    case PL_VALUE_STRING:
        pl_buf_json_string(b, v->u.str.ptr, v->u.str.len);
        break;
    case PL_VALUE_BOOL:
        pl_buf_append_str(b, v->u.b ? "true" : "false");
        break;
    case PL_VALUE_INT:
        pl_buf_printf(b, "%" PRId64, v->u.i);
        break;
    case PL_VALUE_DOUBLE:
        if (isfinite(v->u.d))
            pl_buf_printf(b, "%.17g", v->u.d);
        else
            pl_buf_append_str(b, "null");
        break;
    case PL_VALUE_ARRAY:
        pl_buf_append_byte(b, '[');
        for (uint32_t i = 0; i < v->u.array.n; i++) {
            if (i)
                pl_buf_append_byte(b, ',');
            store_json_value(b, &v->u.array.items[i], depth + 1);
        }
        pl_buf_append_byte(b, ']');
        break;
    case PL_VALUE_KVLIST:
        store_json_kvs(b, v->u.kvlist.items, v->u.kvlist.n, depth);
        break;
    case PL_VALUE_BYTES: {
        pl_buf_append_byte(b, '"');
        for (uint32_t i = 0; i < v->u.str.len; i++)
            pl_buf_printf(b, "%02x", v->u.str.ptr[i]);
        pl_buf_append_byte(b, '"');
        break;
    }
    default:
        pl_buf_append_str(b, "null");
        break;
    }
}

typedef struct strbuf {
    char *p;
    size_t n, cap;
    bool oom;
} strbuf;

static void sb_put(strbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2 + 32;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_puts(strbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static void format_double(double d, char *out, size_t n)
{
    if (isnan(d)) {
        snprintf(out, n, "NaN");
        return;
    }
    if (isinf(d)) {
        snprintf(out, n, d > 0 ? "+Inf" : "-Inf");
        return;
    }
    /* Shortest form that reads back as the same double. */
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, n, "%.*g", prec, d);
        if (strtod(out, NULL) == d)
            return;
    }
}

static void sb_json_string(strbuf *b, pl_bytes s)
{
    sb_put(b, "\"", 1);
    for (uint32_t i = 0; i < s.len; i++) {
        unsigned char ch = s.ptr[i];
        char esc[8];
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char)ch;
            sb_put(b, esc, 2);
        } else if (ch < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", ch);
            sb_put(b, esc, 6);
        } else {
            sb_put(b, (const char *)&ch, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static void sb_base64(strbuf *b, pl_bytes s)
{
    pl_buf tmp;
    pl_buf_init(&tmp);
    pl_base64_encode(s.ptr, s.len, &tmp, true);
    sb_put(b, (const char *)tmp.data, tmp.len);
    pl_buf_free(&tmp);
}

/* `json`: inside an array/map, where strings are quoted. */
static void value_to_text(strbuf *b, const pl_value *v, bool json)
{
    char num[64];
    switch (v->type) {
    case PL_VALUE_EMPTY:
        if (json)
            sb_puts(b, "null");
        break;
    case PL_VALUE_STRING:
        if (json)
            sb_json_string(b, v->u.str);
        else
            sb_put(b, (const char *)v->u.str.ptr, v->u.str.len);
        break;
    case PL_VALUE_BOOL:
        sb_puts(b, v->u.b ? "true" : "false");
        break;
    case PL_VALUE_INT:
        snprintf(num, sizeof(num), "%lld", (long long)v->u.i);
        sb_puts(b, num);
        break;
    case PL_VALUE_DOUBLE:
        format_double(v->u.d, num, sizeof(num));
        if (json && (isnan(v->u.d) || isinf(v->u.d)))
            sb_json_string(b, pl_bytes_from_cstr(num));
        else
            sb_puts(b, num);
        break;
    case PL_VALUE_BYTES:
        if (json)
            sb_put(b, "\"", 1);
        sb_base64(b, v->u.str);
        if (json)
            sb_put(b, "\"", 1);
        break;
    case PL_VALUE_ARRAY:
        sb_put(b, "[", 1);
        for (uint32_t i = 0; i < v->u.array.n; i++) {
            if (i)
                sb_put(b, ",", 1);
            value_to_text(b, &v->u.array.items[i], true);
        }
        sb_put(b, "]", 1);
        break;
    case PL_VALUE_KVLIST:
        sb_put(b, "{", 1);
        for (uint32_t i = 0; i < v->u.kvlist.n; i++) {
            if (i)
                sb_put(b, ",", 1);
            sb_json_string(b, v->u.kvlist.items[i].key);
            sb_put(b, ":", 1);
            value_to_text(b, &v->u.kvlist.items[i].value, true);
        }
        sb_put(b, "}", 1);
        break;
    case PL_VALUE_STRINDEX:
        snprintf(num, sizeof(num), "%d", v->u.strindex);
        sb_puts(b, num);
        break;
    }
}

static void append_bytes(pl_buf *b, pl_bytes s)
{
    pl_buf_append(b, s.ptr, s.len);
}

static void append_value(pl_buf *b, const pl_value *v, const pl_dictionary *dict, int depth)
{
    if (depth > 8) {
        pl_buf_append_str(b, "...");
        return;
    }
    switch (v->type) {
    case PL_VALUE_EMPTY:
        pl_buf_append_str(b, "(empty)");
        break;
    case PL_VALUE_STRING:
        pl_buf_append_byte(b, '"');
        append_bytes(b, v->u.str);
        pl_buf_append_byte(b, '"');
        break;
    case PL_VALUE_BOOL:
        pl_buf_append_str(b, v->u.b ? "true" : "false");
        break;
    case PL_VALUE_INT:
        pl_buf_printf(b, "%" PRId64, v->u.i);
        break;
    case PL_VALUE_DOUBLE:
        pl_buf_printf(b, "%g", v->u.d);
        break;
    case PL_VALUE_BYTES:
        pl_buf_printf(b, "<%u bytes>", v->u.str.len);
        break;
    case PL_VALUE_STRINDEX:
        pl_buf_append_byte(b, '"');
        if (dict)
            append_bytes(b, pl_dict_string(dict, v->u.strindex));
        pl_buf_append_byte(b, '"');
        break;
    case PL_VALUE_ARRAY:
        pl_buf_append_byte(b, '[');
        for (uint32_t i = 0; i < v->u.array.n; i++) {
            if (i)
                pl_buf_append_str(b, ", ");
            append_value(b, &v->u.array.items[i], dict, depth + 1);
        }
        pl_buf_append_byte(b, ']');
        break;
    case PL_VALUE_KVLIST:
        pl_buf_append_byte(b, '{');
        for (uint32_t i = 0; i < v->u.kvlist.n; i++) {
            if (i)
                pl_buf_append_str(b, ", ");
            append_bytes(b, v->u.kvlist.items[i].key);
            pl_buf_append_str(b, ": ");
            append_value(b, &v->u.kvlist.items[i].value, dict, depth + 1);
        }
        pl_buf_append_byte(b, '}');
        break;
    }
}

void ref_store_json(pl_buf *b, const pl_value *v)
{
    store_json_value(b, v, 0);
}

void ref_attributes_text(pl_buf *b, const pl_value *v)
{
    strbuf s = {0};
    value_to_text(&s, v, false);
    if (s.n)
        pl_buf_append(b, s.p, s.n);
    free(s.p);
}

void ref_debug_text(pl_buf *b, const pl_value *v, const pl_dictionary *dict)
{
    append_value(b, v, dict, 0);
}
