/*
 * value_json.c: see value_json.h.
 */
#include "value_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base64.h"

/* shape, bytes, doubles, non-finite, strindex, escape_all_u, int_string,
 * max_depth, too_deep: the table in value_json.h. The store stops at 16
 * levels rather than recurse as far as hostile nesting goes. */
#define PRESET(sh, by, db, nf, si, esc, is, depth, deep)                                           \
    {                                                                                              \
        PL_VJ_##sh, PL_VJ_BYTES_##by, PL_VJ_DOUBLE_##db, PL_VJ_NONFINITE_##nf,                     \
            PL_VJ_STRINDEX_##si, esc, is, depth, deep, NULL                                        \
    }
const pl_value_json_opts pl_vj_otlp =
    PRESET(OTLP, BASE64, ROUNDTRIP, OTLP, NUMBER, false, true, 0, NULL);
const pl_value_json_opts pl_vj_store =
    PRESET(PLAIN, HEX, G17, NULL, NULL, false, false, 16, "null");
const pl_value_json_opts pl_vj_attributes =
    PRESET(PLAIN, BASE64, SHORTEST, PROM, NUMBER, true, false, 0, NULL);
const pl_value_json_opts pl_vj_debug = PRESET(TEXT, SIZE, G, FORMAT, DICT, false, false, 8, "...");

void pl_json_uint(pl_buf *b, uint64_t v, bool quoted)
{
    char tmp[24], *end = tmp + sizeof tmp, *p = end;
    if (quoted)
        *--p = '"';
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (quoted)
        *--p = '"';
    pl_buf_append(b, p, (size_t)(end - p));
}

void pl_json_int(pl_buf *b, int64_t v, bool quoted)
{
    if (v >= 0) {
        pl_json_uint(b, (uint64_t)v, quoted);
        return;
    }
    char tmp[24], *end = tmp + sizeof tmp, *p = end;
    uint64_t mag = 0 - (uint64_t)v;
    if (quoted)
        *--p = '"';
    do {
        *--p = (char)('0' + mag % 10);
        mag /= 10;
    } while (mag);
    *--p = '-';
    if (quoted)
        *--p = '"';
    pl_buf_append(b, p, (size_t)(end - p));
}

void pl_vj_string(pl_buf *b, const uint8_t *s, size_t n, const pl_value_json_opts *o)
{
    if (o->shape == PL_VJ_TEXT) {
        pl_buf_append_byte(b, '"');
        pl_buf_append(b, s, n);
        pl_buf_append_byte(b, '"');
        return;
    }
    pl_buf_json_string_ex(b, s, n, o->escape_all_u);
}

static void write_double(pl_buf *b, double x, const pl_value_json_opts *o)
{
    if (!isfinite(x) && o->nonfinite != PL_VJ_NONFINITE_FORMAT) {
        switch (o->nonfinite) {
        case PL_VJ_NONFINITE_NULL:
            pl_buf_append_str(b, "null");
            return;
        case PL_VJ_NONFINITE_OTLP:
            pl_buf_append_str(b, isnan(x) ? "\"NaN\"" : x > 0 ? "\"Infinity\"" : "\"-Infinity\"");
            return;
        default:
            pl_buf_append_str(b, isnan(x) ? "\"NaN\"" : x > 0 ? "\"+Inf\"" : "\"-Inf\"");
            return;
        }
    }
    char tmp[40];
    switch (o->doubles) {
    case PL_VJ_DOUBLE_ROUNDTRIP:
        snprintf(tmp, sizeof tmp, "%.15g", x);
        if (strtod(tmp, NULL) != x)
            snprintf(tmp, sizeof tmp, "%.17g", x);
        break;
    case PL_VJ_DOUBLE_SHORTEST:
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(tmp, sizeof tmp, "%.*g", prec, x);
            if (strtod(tmp, NULL) == x)
                break;
        }
        break;
    case PL_VJ_DOUBLE_G17:
        snprintf(tmp, sizeof tmp, "%.17g", x);
        break;
    default:
        snprintf(tmp, sizeof tmp, "%g", x);
        break;
    }
    pl_buf_append_str(b, tmp);
}

static void write_bytes(pl_buf *b, pl_bytes s, const pl_value_json_opts *o)
{
    static const char hex[] = "0123456789abcdef";
    switch (o->bytes) {
    case PL_VJ_BYTES_SIZE:
        pl_buf_printf(b, "<%u bytes>", s.len);
        return;
    case PL_VJ_BYTES_HEX:
        pl_buf_append_byte(b, '"');
        for (uint32_t i = 0; i < s.len; i++) {
            char e[2] = {hex[s.ptr[i] >> 4], hex[s.ptr[i] & 15]};
            pl_buf_append(b, e, 2);
        }
        pl_buf_append_byte(b, '"');
        return;
    default:
        pl_buf_append_byte(b, '"');
        pl_base64_encode(s.ptr, s.len, b, true);
        pl_buf_append_byte(b, '"');
    }
}

static void write_strindex(pl_buf *b, int32_t i, const pl_value_json_opts *o)
{
    switch (o->strindex) {
    case PL_VJ_STRINDEX_NULL:
        pl_buf_append_str(b, "null");
        break;
    case PL_VJ_STRINDEX_DICT: {
        pl_bytes s = o->dict ? pl_dict_string(o->dict, i) : (pl_bytes){NULL, 0};
        pl_vj_string(b, s.ptr, s.len, o);
        break;
    }
    default:
        pl_json_int(b, i, false);
    }
}

static void write_value(pl_buf *b, const pl_value *v, const pl_value_json_opts *o, int depth);

/* An OTLP KeyValue: {"key":"k","value":{...}[,"keyStrindex":N]}. */
static void write_otlp_kv(pl_buf *b, const pl_kv *kv, const pl_value_json_opts *o, int depth)
{
    pl_buf_append_str(b, "{\"key\":");
    pl_buf_json_string(b, kv->key.ptr, kv->key.len);
    pl_buf_append_str(b, ",\"value\":");
    write_value(b, &kv->value, o, depth);
    if (kv->key_strindex) {
        pl_buf_append_str(b, ",\"keyStrindex\":");
        pl_json_int(b, kv->key_strindex, false);
    }
    pl_buf_append_byte(b, '}');
}

/* OTLP: {"arrayValue":{"values":[...]}} and {"kvlistValue":{...}}, the
 * "values" member left out when empty. */
static void write_otlp_list(pl_buf *b, const pl_value *v, const pl_value_json_opts *o, int depth)
{
    bool array = v->type == PL_VALUE_ARRAY;
    uint32_t n = array ? v->u.array.n : v->u.kvlist.n;
    pl_buf_append_str(b, array ? "\"arrayValue\":{" : "\"kvlistValue\":{");
    if (n) {
        pl_buf_append_str(b, "\"values\":[");
        for (uint32_t i = 0; i < n; i++) {
            if (i)
                pl_buf_append_byte(b, ',');
            if (array)
                write_value(b, &v->u.array.items[i], o, depth + 1);
            else
                write_otlp_kv(b, &v->u.kvlist.items[i], o, depth + 1);
        }
        pl_buf_append_byte(b, ']');
    }
    pl_buf_append_byte(b, '}');
}

static const char *const otlp_member[] = {
    [PL_VALUE_STRING] = "\"stringValue\":", [PL_VALUE_BOOL] = "\"boolValue\":",
    [PL_VALUE_INT] = "\"intValue\":",       [PL_VALUE_DOUBLE] = "\"doubleValue\":",
    [PL_VALUE_BYTES] = "\"bytesValue\":",   [PL_VALUE_STRINDEX] = "\"stringValueStrindex\":",
};

static void write_value(pl_buf *b, const pl_value *v, const pl_value_json_opts *o, int depth)
{
    bool otlp = o->shape == PL_VJ_OTLP, text = o->shape == PL_VJ_TEXT;
    if (o->max_depth > 0 && depth > o->max_depth) {
        pl_buf_append_str(b, o->too_deep);
        return;
    }
    if (otlp) {
        pl_buf_append_byte(b, '{');
        if (v->type != PL_VALUE_EMPTY && v->type != PL_VALUE_ARRAY && v->type != PL_VALUE_KVLIST &&
            (unsigned)v->type <= PL_VALUE_STRINDEX)
            pl_buf_append_str(b, otlp_member[v->type]);
    }
    switch (v->type) {
    case PL_VALUE_EMPTY:
        if (!otlp)
            pl_buf_append_str(b, text ? "(empty)" : "null");
        break;
    case PL_VALUE_STRING:
        pl_vj_string(b, v->u.str.ptr, v->u.str.len, o);
        break;
    case PL_VALUE_BOOL:
        pl_buf_append_str(b, v->u.b ? "true" : "false");
        break;
    case PL_VALUE_INT:
        pl_json_int(b, v->u.i, o->int_string);
        break;
    case PL_VALUE_DOUBLE:
        write_double(b, v->u.d, o);
        break;
    case PL_VALUE_BYTES:
        write_bytes(b, v->u.str, o);
        break;
    case PL_VALUE_STRINDEX:
        write_strindex(b, v->u.strindex, o);
        break;
    case PL_VALUE_ARRAY:
        if (otlp) {
            write_otlp_list(b, v, o, depth);
            break;
        }
        pl_buf_append_byte(b, '[');
        for (uint32_t i = 0; i < v->u.array.n; i++) {
            if (i)
                pl_buf_append_str(b, text ? ", " : ",");
            write_value(b, &v->u.array.items[i], o, depth + 1);
        }
        pl_buf_append_byte(b, ']');
        break;
    case PL_VALUE_KVLIST:
        if (otlp) {
            write_otlp_list(b, v, o, depth);
            break;
        }
        pl_buf_append_byte(b, '{');
        for (uint32_t i = 0; i < v->u.kvlist.n; i++) {
            const pl_kv *kv = &v->u.kvlist.items[i];
            if (i)
                pl_buf_append_str(b, text ? ", " : ",");
            if (text)
                pl_buf_append(b, kv->key.ptr, kv->key.len);
            else
                pl_vj_string(b, kv->key.ptr, kv->key.len, o);
            pl_buf_append_str(b, text ? ": " : ":");
            write_value(b, &kv->value, o, depth + 1);
        }
        pl_buf_append_byte(b, '}');
        break;
    default:
        if (!otlp)
            pl_buf_append_str(b, "null");
        break;
    }
    if (otlp)
        pl_buf_append_byte(b, '}');
}

void pl_value_json(pl_buf *b, const pl_value *v, const pl_value_json_opts *o)
{
    write_value(b, v, o, 0);
}

void pl_kvs_json(pl_buf *b, const pl_kv *items, uint32_t n, const pl_value_json_opts *o)
{
    pl_value v = {.type = PL_VALUE_KVLIST};
    v.u.kvlist.items = (pl_kv *)items; /* only read */
    v.u.kvlist.n = n;
    write_value(b, &v, o, 0);
}
