/*
 * otlp_transcode.c: OTLP/JSON -> protobuf for signals proflink passes
 * through without a model (logs, metrics), driven by the message tables
 * generated from the .proto files (otlp_schema.h). One walker serves every
 * message: it reads the JSON with the streaming reader and writes each
 * member it knows as its protobuf field, applying the OTLP JSON mapping
 * (hex ids, base64 bytes, 64-bit integers as strings, enums by name).
 * Unknown members are skipped; null members are left out.
 *
 * Length-delimited fields are written with a one-byte length placeholder
 * and the content moved up once its length is known (only sub-messages of
 * 128 bytes or more move). The output counts against the request's budget,
 * so a small JSON body cannot expand into unbounded protobuf.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_json.h"
#include "otlp_json_internal.h"
#include "otlp_pb.h"
#include "otlp_schema.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

static void put_varint(pl_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pl_buf_append(b, tmp, n);
}

static void put_tag(pl_buf *b, uint32_t num, int wt)
{
    put_varint(b, (uint64_t)num << 3 | (uint64_t)wt);
}

static void put_fixed(pl_buf *b, uint64_t v, size_t n)
{
    uint8_t tmp[8];
    for (size_t i = 0; i < n; i++)
        tmp[i] = (uint8_t)(v >> (8 * i));
    pl_buf_append(b, tmp, n);
}

static size_t open_len(pl_buf *b, uint32_t num)
{
    put_tag(b, num, WT_LEN);
    size_t at = b->len;
    pl_buf_append_byte(b, 0);
    return at;
}

static void close_len(pl_buf *b, size_t at)
{
    if (!pl_buf_ok(b))
        return;
    size_t n = b->len - at - 1, vs = 1;
    for (size_t v = n; v >= 0x80; v >>= 7)
        vs++;
    if (vs > 1) {
        if (!pl_buf_reserve(b, vs - 1))
            return;
        memmove(b->data + at + vs, b->data + at + 1, n);
        b->len += vs - 1;
    }
    for (size_t i = 0, v = n; i < vs; i++, v >>= 7)
        b->data[at + i] = (uint8_t)((v & 0x7f) | (i + 1 < vs ? 0x80 : 0));
}

static const pl_pbfield *find(const pl_pbmsg *m, const pl_jstr *key)
{
    for (unsigned i = 0; i < m->n_fields; i++) {
        const pl_pbfield *f = &m->fields[i];
        if (f->json_len == key->len && memcmp(f->json, key->ptr, key->len) == 0)
            return f;
    }
    if (key->escaped || key->len > 64)
        return NULL;
    for (unsigned i = 0; i < m->n_fields; i++)
        if (pl_jr_key_folded_eq(key->ptr, key->len, m->fields[i].json))
            return &m->fields[i];
    return NULL;
}

static int over_budget(jdec *d, const pl_buf *out)
{
    if (!pl_buf_ok(out))
        return pl_json_dec_oom(d);
    if (out->len <= d->budget)
        return 0;
    d->status = PL_ERR_TOO_LARGE;
    if (d->err)
        snprintf(d->err->msg, sizeof d->err->msg,
                 "transcoded request larger than the limit of %zu bytes", d->budget);
    return -1;
}

static int tc_msg(jdec *d, const pl_pbmsg *m, pl_buf *out);

/* Bytes: hex for ids (16 or 8 bytes), base64 otherwise. */
static int tc_bytes(jdec *d, const pl_pbfield *f, pl_buf *out, bool tag)
{
    pl_jstr s;
    if (pl_json_dec_jstr(d, f->json, f->hex_id ? "want a hex string" : "want a base64 string", &s))
        return -1;
    uint8_t *tmp = malloc(s.len + 1);
    if (!tmp)
        return pl_json_dec_oom(d);
    long n = s.escaped ? pl_jr_unescape(&s, tmp) : (long)s.len;
    if (!s.escaped && s.len)
        memcpy(tmp, s.ptr, s.len);
    int rc = 0;
    size_t o = 0;
    if (n < 0) {
        rc = pl_json_dec_fail(d, f->json, "invalid UTF-8");
    } else if (f->hex_id) {
        size_t want = strcmp(f->json, "traceId") == 0 ? 16 : 8;
        if (n != 0 && (size_t)n != 2 * want)
            rc = pl_json_dec_fail(d, f->json, "%ld hex chars, want %zu", n, 2 * want);
        else if (n && pl_hex_decode((const char *)tmp, (size_t)n, tmp, want))
            rc = pl_json_dec_fail(d, f->json, "invalid hex");
        o = n ? want : 0;
    } else {
        while (n && tmp[n - 1] == '=')
            n--;
        size_t bad = 0;
        if (n % 4 == 1)
            rc = pl_json_dec_fail(d, f->json, "bad base64 length");
        else if (!pl_otlp_base64_decode_into((const char *)tmp, (size_t)n, tmp, &o, &bad))
            rc = pl_json_dec_fail(d, f->json, "invalid base64 character at %zu", bad);
    }
    if (rc == 0) {
        if (tag)
            put_tag(out, f->number, WT_LEN);
        put_varint(out, o);
        pl_buf_append(out, tmp, o);
    }
    free(tmp);
    return rc;
}

/* One value of field f; `tag` false inside a packed array. */
static int tc_value(jdec *d, const pl_pbfield *f, pl_buf *out, bool tag)
{
    uint64_t u = 0;
    double x;
    int32_t e;
    switch ((pl_pbtype)f->type) {
    case PL_PB_DOUBLE:
    case PL_PB_FLOAT:
        if (pl_json_dec_double(d, f->json, &x))
            return -1;
        if (f->type == PL_PB_FLOAT) {
            float fl = (float)x;
            uint32_t bits;
            memcpy(&bits, &fl, 4);
            if (tag)
                put_tag(out, f->number, WT_I32);
            put_fixed(out, bits, 4);
        } else {
            memcpy(&u, &x, 8);
            if (tag)
                put_tag(out, f->number, WT_I64);
            put_fixed(out, u, 8);
        }
        return 0;
    case PL_PB_INT32:
    case PL_PB_SINT32:
    case PL_PB_SFIXED32:
        if (pl_json_dec_int(d, f->json, true, INT32_MIN, INT32_MAX, &u))
            return -1;
        break;
    case PL_PB_INT64:
    case PL_PB_SINT64:
    case PL_PB_SFIXED64:
        if (pl_json_dec_int(d, f->json, true, INT64_MIN, INT64_MAX, &u))
            return -1;
        break;
    case PL_PB_UINT32:
    case PL_PB_FIXED32:
        if (pl_json_dec_int(d, f->json, false, 0, UINT32_MAX, &u))
            return -1;
        break;
    case PL_PB_UINT64:
    case PL_PB_FIXED64:
        if (pl_json_dec_int(d, f->json, false, 0, UINT64_MAX, &u))
            return -1;
        break;
    case PL_PB_BOOL: {
        pl_jtype t = pl_jr_peek(&d->r);
        if (t != PL_JT_TRUE && t != PL_JT_FALSE) {
            if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
                return pl_json_dec_syntax(d);
            return pl_json_dec_fail(d, f->json, "want true or false");
        }
        if (!pl_jr_literal(&d->r))
            return pl_json_dec_syntax(d);
        u = t == PL_JT_TRUE;
        break;
    }
    case PL_PB_ENUM:
        if (pl_json_dec_enum(d, f->json, f->en->names, f->en->values, f->en->n, &e))
            return -1;
        u = (uint64_t)(int64_t)e;
        break;
    case PL_PB_STRING: {
        pl_jstr s;
        if (pl_json_dec_jstr(d, f->json, "want a string", &s))
            return -1;
        if (tag)
            put_tag(out, f->number, WT_LEN);
        if (!s.escaped) {
            put_varint(out, s.len);
            pl_buf_append(out, s.ptr, s.len);
            return 0;
        }
        size_t at = out->len;
        put_varint(out, s.len); /* room for the longest length */
        size_t vs = out->len - at;
        if (!pl_buf_reserve(out, s.len))
            return pl_json_dec_oom(d);
        long n = pl_jr_unescape(&s, out->data + out->len);
        if (n < 0)
            return pl_json_dec_fail(d, f->json, "invalid UTF-8");
        /* Rewrite the length, which can only have shrunk. */
        uint8_t lv[10];
        size_t ln = 0;
        for (uint64_t v = (uint64_t)n;; v >>= 7) {
            lv[ln++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
            if (v < 0x80)
                break;
        }
        memmove(out->data + at + ln, out->data + at + vs, (size_t)n);
        memcpy(out->data + at, lv, ln);
        out->len = at + ln + (size_t)n;
        return 0;
    }
    case PL_PB_BYTES:
        return tc_bytes(d, f, out, tag);
    case PL_PB_MESSAGE: {
        pl_jtype t = pl_jr_peek(&d->r);
        if (t != PL_JT_OBJECT) {
            if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
                return pl_json_dec_syntax(d);
            return pl_json_dec_fail(d, NULL, "want an object");
        }
        size_t at = open_len(out, f->number);
        if (tc_msg(d, f->msg, out))
            return -1;
        close_len(out, at);
        return over_budget(d, out);
    }
    }
    /* Integers and enums. */
    switch ((pl_pbtype)f->type) {
    case PL_PB_SINT32:
    case PL_PB_SINT64: {
        int64_t s = (int64_t)u;
        u = ((uint64_t)s << 1) ^ (uint64_t)(s >> 63);
        if (tag)
            put_tag(out, f->number, WT_VARINT);
        put_varint(out, u);
        break;
    }
    case PL_PB_FIXED32:
    case PL_PB_SFIXED32:
        if (tag)
            put_tag(out, f->number, WT_I32);
        put_fixed(out, u, 4);
        break;
    case PL_PB_FIXED64:
    case PL_PB_SFIXED64:
        if (tag)
            put_tag(out, f->number, WT_I64);
        put_fixed(out, u, 8);
        break;
    default:
        if (tag)
            put_tag(out, f->number, WT_VARINT);
        put_varint(out, u);
    }
    return 0;
}

static bool packable(const pl_pbfield *f)
{
    return f->type != PL_PB_STRING && f->type != PL_PB_BYTES && f->type != PL_PB_MESSAGE;
}

static int tc_repeated(jdec *d, const pl_pbfield *f, pl_buf *out)
{
    pl_jtype t = pl_jr_peek(&d->r);
    if (t == PL_JT_NULL)
        return pl_jr_literal(&d->r) ? 0 : pl_json_dec_syntax(d);
    if (t != PL_JT_ARRAY) {
        if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
            return pl_json_dec_syntax(d);
        return pl_json_dec_fail(d, f->json, "want an array");
    }
    if (!pl_jr_array_begin(&d->r))
        return pl_json_dec_syntax(d);
    bool packed = packable(f);
    size_t before = out->len;
    size_t at = packed ? open_len(out, f->number) : 0, start = out->len;
    unsigned k = 0;
    int rc;
    uint32_t i = 0;
    while ((rc = pl_jr_array_next(&d->r, &k)) == 1) {
        path_push(d, f->json, i++);
        if (tc_value(d, f, out, !packed) || over_budget(d, out))
            return -1;
        path_pop(d);
    }
    if (rc < 0)
        return pl_json_dec_syntax(d);
    if (packed) {
        if (out->len == start)
            out->len = before; /* empty: leave the field out */
        else
            close_len(out, at);
    }
    return 0;
}

static int tc_msg(jdec *d, const pl_pbmsg *m, pl_buf *out)
{
    if (!pl_jr_object_begin(&d->r))
        return pl_json_dec_syntax(d);
    unsigned k = 0;
    pl_jstr key;
    int rc;
    while ((rc = pl_jr_object_next(&d->r, &k, &key)) == 1) {
        const pl_pbfield *f = find(m, &key);
        pl_jtype t = pl_jr_peek(&d->r);
        if (!f || t == PL_JT_NULL) {
            if (!pl_jr_skip(&d->r))
                return pl_json_dec_syntax(d);
            continue;
        }
        if (f->repeated) {
            if (tc_repeated(d, f, out))
                return -1;
            continue;
        }
        if (f->type == PL_PB_MESSAGE)
            path_push(d, f->json, -1);
        if (tc_value(d, f, out, true))
            return -1;
        if (f->type == PL_PB_MESSAGE)
            path_pop(d);
    }
    return rc < 0 ? pl_json_dec_syntax(d) : over_budget(d, out);
}

pl_status pl_otlp_json_transcode(pl_signal signal, const uint8_t *buf, size_t len, size_t budget,
                                 pl_buf *out, pl_err *err)
{
    const pl_pbmsg *root = signal == PL_SIGNAL_LOGS      ? pl_pb_LogsData
                           : signal == PL_SIGNAL_METRICS ? pl_pb_MetricsData
                                                         : NULL;
    if (!root)
        return pl_errf(err, PL_ERR_UNSUPPORTED, "no JSON transcoder for %s",
                       pl_signal_name(signal));
    jdec *d = malloc(sizeof(*d));
    if (!d)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory while decoding");
    pl_json_dec_init(d, NULL, buf, len, budget, err);
    int rc;
    pl_jtype t = pl_jr_peek(&d->r);
    if (t == PL_JT_OBJECT) {
        rc = tc_msg(d, root, out);
        if (rc == 0 && !pl_jr_finish(&d->r))
            rc = pl_json_dec_syntax(d);
    } else if (t == PL_JT_NONE || t == PL_JT_BAD) {
        pl_jr_fail(&d->r, t == PL_JT_NONE ? "unexpected end of input" : "unexpected character");
        rc = pl_json_dec_syntax(d);
    } else {
        pl_errf(err, PL_ERR_INVALID, "the request must be a JSON object");
        rc = -1;
    }
    pl_status st = rc ? d->status : PL_OK;
    free(d);
    return st;
}
