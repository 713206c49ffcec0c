/*
 * otlp_json.c: model -> OTLP/JSON (see otlp_json.h; the decoder is
 * otlp_json_dec.c). One walker over the message tables of otlp_tables.c
 * writes members in row order, each only when it differs from its default,
 * except where a row's ENC_* flags say otherwise; AnyValue, a oneof, is
 * written by core/value_json (pl_vj_otlp). No tree is built: the JSON text
 * goes directly into the output buffer (otlp_json_write.h).
 */
#include "otlp_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/base64.h"
#include "core/value_json.h"
#include "otlp_pb.h"
#include "otlp_json_write.h"
#include "otlp_tables.h"

void pl_otlp_base64_encode(pl_buf *b, const uint8_t *s, size_t n)
{
    pl_base64_encode(s, n, b, true);
}

bool pl_otlp_base64_decode_into(const char *in, size_t n, uint8_t *out, size_t *out_len,
                                size_t *bad_at)
{
    return pl_base64_decode_into(in, n, out, out_len, bad_at) == 0;
}

static void w_hex_id(jw *w, const jfield *f, const uint8_t *id, uint8_t len)
{
    /* Unlike the Collector (whose model cannot tell an all-zero id from an
     * absent one), an all-zero id of full length is written, so that
     * link_table[0] = {16 zero bytes, 8 zero bytes} survives a round trip. */
    char hex[2 * 255 + 1];
    pl_hex_encode(id, len, hex);
    w_keyn(w, f->name, f->name_len);
    pl_buf_append_byte(w->b, '"');
    pl_buf_append(w->b, hex, 2u * len);
    pl_buf_append_byte(w->b, '"');
}

static void enc_msg(jw *w, const jmsg *m, const uint8_t *src);

/* A repeated member, left out when empty. */
static void enc_list(jw *w, const jfield *f, const uint8_t *src)
{
    const void *items = *(const void *const *)(src + f->off);
    uint32_t n = *(const uint32_t *)(src + f->aux);
    if (!n)
        return;
    w_keyn(w, f->name, f->name_len);
    w_open(w, '[');
    for (uint32_t i = 0; i < n; i++) {
        w_elem(w);
        switch ((fkind)f->kind) {
        case FK_LIST:
            enc_msg(w, f->sub, (const uint8_t *)items + (size_t)i * ((const jmsg *)f->sub)->size);
            break;
        case FK_ANYS:
            pl_value_json(w->b, (const pl_value *)items + i, &pl_vj_otlp);
            break;
        case FK_STRS: {
            const pl_bytes *s = (const pl_bytes *)items + i;
            pl_buf_json_string(w->b, s->ptr, s->len);
            break;
        }
        case FK_I32S:
            pl_json_int(w->b, ((const int32_t *)items)[i], false);
            break;
        case FK_I64S:
            pl_json_int(w->b, ((const int64_t *)items)[i], true);
            break;
        case FK_U64S:
            pl_json_uint(w->b, ((const uint64_t *)items)[i], true);
            break;
        default:
            break;
        }
    }
    w_close(w, ']');
}

/* One message as an object: `{...}`. */
static void enc_msg(jw *w, const jmsg *m, const uint8_t *src)
{
    w_open(w, '{');
    for (unsigned k = 0; k < m->n_fields; k++) {
        const jfield *f = &m->fields[k];
        const void *p = src + f->off;
        switch ((fkind)f->kind) {
        case FK_STR: {
            pl_bytes s = *(const pl_bytes *)p;
            if (s.len || (f->enc & ENC_JSON_ALWAYS)) {
                w_keyn(w, f->name, f->name_len);
                pl_buf_json_string(w->b, s.ptr, s.len);
            }
            break;
        }
        case FK_B64: {
            pl_bytes s = *(const pl_bytes *)p;
            if (s.len) {
                w_keyn(w, f->name, f->name_len);
                pl_buf_append_byte(w->b, '"');
                pl_otlp_base64_encode(w->b, s.ptr, s.len);
                pl_buf_append_byte(w->b, '"');
            }
            break;
        }
        case FK_ID:
            if (src[f->aux])
                w_hex_id(w, f, p, src[f->aux]);
            break;
        case FK_U32:
        case FK_FX32:
            if (*(const uint32_t *)p) {
                w_keyn(w, f->name, f->name_len);
                pl_json_uint(w->b, *(const uint32_t *)p, false);
            }
            break;
        case FK_I32:
        case FK_ENUM:
            if (*(const int32_t *)p) {
                w_keyn(w, f->name, f->name_len);
                pl_json_int(w->b, *(const int32_t *)p, false);
            }
            break;
        case FK_U64:
        case FK_FX64:
            if (*(const uint64_t *)p) {
                w_keyn(w, f->name, f->name_len);
                pl_json_uint(w->b, *(const uint64_t *)p, true);
            }
            break;
        case FK_I64:
            if (*(const int64_t *)p) {
                w_keyn(w, f->name, f->name_len);
                pl_json_int(w->b, *(const int64_t *)p, true);
            }
            break;
        case FK_MSG: {
            bool has = src[f->aux];
            if (!has && !(f->enc & ENC_NONEMPTY))
                break;
            size_t mark = w->b->len;
            bool first = w->first;
            w_keyn(w, f->name, f->name_len);
            size_t body = w->b->len;
            enc_msg(w, f->sub, p);
            if (!has && !w->b->failed && w->b->len == body + 2) {
                w->b->len = mark; /* ENC_NONEMPTY and nothing in it */
                w->first = first;
            }
            break;
        }
        case FK_ANY: {
            const pl_value *v = p;
            if (v->type != PL_VALUE_EMPTY || (f->enc & ENC_JSON_ALWAYS)) {
                w_keyn(w, f->name, f->name_len);
                pl_value_json(w->b, v, &pl_vj_otlp);
            }
            break;
        }
        default:
            enc_list(w, f, src);
        }
    }
    w_close(w, '}');
}

bool pl_otlp_json_encode_traces(const pl_traces *t, pl_buf *out)
{
    jw w = {out, true};
    enc_msg(&w, &pl_tm_traces, (const uint8_t *)t);
    return pl_buf_ok(out);
}

bool pl_otlp_json_encode_profiles(const pl_profiles *p, pl_buf *out)
{
    jw w = {out, true};
    enc_msg(&w, &pl_tm_profiles, (const uint8_t *)p);
    return pl_buf_ok(out);
}
