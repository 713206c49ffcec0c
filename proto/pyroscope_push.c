/*
 * pyroscope_push.c: see pyroscope_push.h.
 */
#include "pyroscope_push.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <string.h>

#include "push.pb.h"
#include "types.pb.h"
#include "proto/pb_wire.h"

/* ---- protobuf ------------------------------------------------------------ */

static pl_bytes rd_bytes(const pl_pb_reader *payload)
{
    return (pl_bytes){payload->p, (uint32_t)(payload->end - payload->p)};
}

/* Reads a message of two length-delimited fields (a label's name and value,
 * a sample's profile and id); other fields are skipped. -1 when corrupt. */
static int rd_two_bytes(pl_pb_reader *m, uint32_t tag_a, pl_bytes *a, uint32_t tag_b, pl_bytes *b)
{
    pl_pb_reader inner;
    while (m->p < m->end) {
        uint32_t g, w;
        uint64_t v;
        if (pl_pb_next_field(m, &g, &w, &v, &inner))
            return -1;
        if (w == PL_PB_LEN && g == tag_a)
            *a = rd_bytes(&inner);
        else if (w == PL_PB_LEN && g == tag_b)
            *b = rd_bytes(&inner);
    }
    return 0;
}

#define BAD(...) pl_errf(err, PL_ERR_INVALID, __VA_ARGS__)

static pl_status decode_series(pl_pb_reader *m, pl_push_series *s, pl_arena *arena, uint32_t si,
                               pl_err *err)
{
    pl_pb_reader scan = *m, sub;
    uint32_t f, wt, nl = 0, ns = 0;
    uint64_t v;
    while (scan.p < scan.end) {
        if (pl_pb_next_field(&scan, &f, &wt, &v, &sub))
            return BAD("push: series %u: corrupt protobuf", si);
        if (wt == PL_PB_LEN && f == push_v1_RawProfileSeries_labels_tag)
            nl++;
        else if (wt == PL_PB_LEN && f == push_v1_RawProfileSeries_samples_tag)
            ns++;
    }
    s->labels = nl ? pl_arena_calloc(arena, nl, sizeof(pl_push_label)) : NULL;
    s->samples = ns ? pl_arena_calloc(arena, ns, sizeof(pl_push_sample)) : NULL;
    if ((nl && !s->labels) || (ns && !s->samples))
        return pl_errf(err, PL_ERR_NOMEM, "push: out of memory");
    while (m->p < m->end) {
        pl_pb_next_field(m, &f, &wt, &v, &sub); /* checked above */
        if (wt != PL_PB_LEN)
            continue;
        if (f == push_v1_RawProfileSeries_labels_tag) {
            pl_push_label *l = &s->labels[s->n_labels++];
            if (rd_two_bytes(&sub, types_v1_LabelPair_name_tag, &l->name,
                             types_v1_LabelPair_value_tag, &l->value))
                return BAD("push: series %u label %u: corrupt protobuf", si, s->n_labels - 1);
        } else if (f == push_v1_RawProfileSeries_samples_tag) {
            pl_push_sample *smp = &s->samples[s->n_samples++];
            if (rd_two_bytes(&sub, push_v1_RawSample_raw_profile_tag, &smp->raw_profile,
                             push_v1_RawSample_ID_tag, &smp->id))
                return BAD("push: series %u sample %u: corrupt protobuf", si, s->n_samples - 1);
        }
    }
    return PL_OK;
}

pl_status pl_push_decode_proto(const uint8_t *data, size_t len, pl_push_request *out, pl_err *err)
{
    pl_arena_init(&out->arena);
    if (len == 0)
        return PL_OK; /* an empty request: no series */
    pl_pb_reader r = {data, data + len}, scan = r, sub;
    uint32_t f, wt, n = 0;
    uint64_t v;
    while (scan.p < scan.end) {
        if (pl_pb_next_field(&scan, &f, &wt, &v, &sub))
            return BAD("push: corrupt protobuf at byte %zu", (size_t)(scan.p - data));
        if (f == push_v1_PushRequest_series_tag) {
            if (wt != PL_PB_LEN)
                return BAD("push: series: wrong wire type %u", wt);
            n++;
        }
    }
    if (n) {
        out->series = pl_arena_calloc(&out->arena, n, sizeof(pl_push_series));
        if (!out->series)
            return pl_errf(err, PL_ERR_NOMEM, "push: out of memory");
    }
    while (r.p < r.end) {
        pl_pb_next_field(&r, &f, &wt, &v, &sub);
        if (f != push_v1_PushRequest_series_tag)
            continue;
        pl_status st =
            decode_series(&sub, &out->series[out->n_series], &out->arena, out->n_series, err);
        out->n_series++;
        if (st != PL_OK)
            return st;
    }
    return PL_OK;
}

void pl_push_request_free(pl_push_request *req)
{
    pl_arena_free(&req->arena);
    memset(req, 0, sizeof(*req));
}

/* ---- JSON ---------------------------------------------------------------- */

static pl_bytes json_str(pl_arena *arena, json_object *o)
{
    if (!o || !json_object_is_type(o, json_type_string))
        return (pl_bytes){NULL, 0};
    int len = json_object_get_string_len(o);
    char *copy = pl_arena_memdup(arena, json_object_get_string(o), (size_t)len);
    return (pl_bytes){(const uint8_t *)copy, copy ? (uint32_t)len : 0};
}

/* proto3 JSON accepts the lowerCamelCase name and the original name. */
static json_object *get2(json_object *o, const char *a, const char *b)
{
    json_object *v = NULL;
    if (json_object_object_get_ex(o, a, &v))
        return v;
    if (b && json_object_object_get_ex(o, b, &v))
        return v;
    return NULL;
}

static bool is_array_or_absent(json_object *o)
{
    return !o || json_object_is_type(o, json_type_array) || json_object_is_type(o, json_type_null);
}

static size_t arr_len(json_object *o)
{
    return o && json_object_is_type(o, json_type_array) ? json_object_array_length(o) : 0;
}

pl_status pl_push_decode_json(const uint8_t *data, size_t len, pl_push_request *out, pl_err *err)
{
    pl_arena_init(&out->arena);
    json_tokener *tok = json_tokener_new_ex(64);
    if (!tok)
        return pl_errf(err, PL_ERR_NOMEM, "push: out of memory");
    json_object *root = json_tokener_parse_ex(tok, (const char *)data, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    if (len > INT32_MAX || !root || jerr != json_tokener_success ||
        json_tokener_get_parse_end(tok) < len) {
        /* trailing whitespace is fine */
        size_t end = root ? json_tokener_get_parse_end(tok) : 0;
        bool only_space = root && jerr == json_tokener_success;
        for (size_t i = end; only_space && i < len; i++)
            only_space = data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t';
        if (!only_space) {
            pl_status st =
                BAD("push: invalid JSON: %s",
                    jerr != json_tokener_success ? json_tokener_error_desc(jerr) : "trailing data");
            json_object_put(root);
            json_tokener_free(tok);
            return st;
        }
    }
    json_tokener_free(tok);
    pl_status st = PL_OK;
    if (!json_object_is_type(root, json_type_object)) {
        st = BAD("push: JSON body is not an object");
        goto done;
    }
    json_object *series = get2(root, "series", NULL);
    if (!is_array_or_absent(series)) {
        st = BAD("push: \"series\" is not an array");
        goto done;
    }
    size_t n = arr_len(series);
    if (n) {
        out->series = pl_arena_calloc(&out->arena, n, sizeof(pl_push_series));
        if (!out->series) {
            st = pl_errf(err, PL_ERR_NOMEM, "push: out of memory");
            goto done;
        }
    }
    for (size_t i = 0; i < n && st == PL_OK; i++) {
        json_object *so = json_object_array_get_idx(series, i);
        pl_push_series *s = &out->series[out->n_series++];
        if (!json_object_is_type(so, json_type_object)) {
            st = BAD("push: series %zu is not an object", i);
            break;
        }
        json_object *labels = get2(so, "labels", NULL), *samples = get2(so, "samples", NULL);
        if (!is_array_or_absent(labels) || !is_array_or_absent(samples)) {
            st = BAD("push: series %zu: labels/samples must be arrays", i);
            break;
        }
        size_t nl = arr_len(labels), ns = arr_len(samples);
        s->labels = nl ? pl_arena_calloc(&out->arena, nl, sizeof(pl_push_label)) : NULL;
        s->samples = ns ? pl_arena_calloc(&out->arena, ns, sizeof(pl_push_sample)) : NULL;
        if ((nl && !s->labels) || (ns && !s->samples)) {
            st = pl_errf(err, PL_ERR_NOMEM, "push: out of memory");
            break;
        }
        for (size_t k = 0; k < nl; k++) {
            json_object *lo = json_object_array_get_idx(labels, k);
            if (!json_object_is_type(lo, json_type_object)) {
                st = BAD("push: series %zu label %zu is not an object", i, k);
                break;
            }
            s->labels[s->n_labels].name = json_str(&out->arena, get2(lo, "name", NULL));
            s->labels[s->n_labels].value = json_str(&out->arena, get2(lo, "value", NULL));
            s->n_labels++;
        }
        for (size_t k = 0; k < ns && st == PL_OK; k++) {
            json_object *po = json_object_array_get_idx(samples, k);
            if (!json_object_is_type(po, json_type_object)) {
                st = BAD("push: series %zu sample %zu is not an object", i, k);
                break;
            }
            pl_push_sample *smp = &s->samples[s->n_samples++];
            json_object *raw = get2(po, "rawProfile", "raw_profile");
            if (raw && json_object_is_type(raw, json_type_string)) {
                size_t rl = (size_t)json_object_get_string_len(raw);
                uint8_t *buf = pl_arena_alloc(&out->arena, rl * 3 / 4 + 3);
                if (!buf) {
                    st = pl_errf(err, PL_ERR_NOMEM, "push: out of memory");
                    break;
                }
                long dl = pl_base64_decode(json_object_get_string(raw), rl, buf);
                if (dl < 0) {
                    st = BAD("push: series %zu sample %zu: rawProfile is not base64", i, k);
                    break;
                }
                smp->raw_profile = (pl_bytes){buf, (uint32_t)dl};
            } else if (raw && !json_object_is_type(raw, json_type_null)) {
                st = BAD("push: series %zu sample %zu: rawProfile is not a string", i, k);
                break;
            }
            smp->id = json_str(&out->arena, get2(po, "ID", "id"));
        }
    }
done:
    json_object_put(root);
    return st;
}

/* ---- encoding ------------------------------------------------------------ */

static size_t field_size(size_t len)
{
    return 1 + pl_pb_varint_len(len) + len; /* field numbers here are < 16 */
}

bool pl_push_encode_proto(const pl_push_request *req, pl_buf *out)
{
    for (uint32_t i = 0; i < req->n_series; i++) {
        const pl_push_series *s = &req->series[i];
        size_t series_len = 0;
        for (uint32_t k = 0; k < s->n_labels; k++) {
            size_t l = field_size(s->labels[k].name.len) + field_size(s->labels[k].value.len);
            series_len += field_size(l);
        }
        for (uint32_t k = 0; k < s->n_samples; k++) {
            size_t l = field_size(s->samples[k].raw_profile.len);
            if (s->samples[k].id.len)
                l += field_size(s->samples[k].id.len);
            series_len += field_size(l);
        }
        pl_pb_put_len(out, push_v1_PushRequest_series_tag, series_len);
        for (uint32_t k = 0; k < s->n_labels; k++) {
            const pl_push_label *lb = &s->labels[k];
            pl_pb_put_len(out, push_v1_RawProfileSeries_labels_tag,
                          field_size(lb->name.len) + field_size(lb->value.len));
            pl_pb_put_len(out, types_v1_LabelPair_name_tag, lb->name.len);
            pl_buf_append(out, lb->name.ptr, lb->name.len);
            pl_pb_put_len(out, types_v1_LabelPair_value_tag, lb->value.len);
            pl_buf_append(out, lb->value.ptr, lb->value.len);
        }
        for (uint32_t k = 0; k < s->n_samples; k++) {
            const pl_push_sample *smp = &s->samples[k];
            size_t l = field_size(smp->raw_profile.len);
            if (smp->id.len)
                l += field_size(smp->id.len);
            pl_pb_put_len(out, push_v1_RawProfileSeries_samples_tag, l);
            pl_pb_put_len(out, push_v1_RawSample_raw_profile_tag, smp->raw_profile.len);
            pl_buf_append(out, smp->raw_profile.ptr, smp->raw_profile.len);
            if (smp->id.len) {
                pl_pb_put_len(out, push_v1_RawSample_ID_tag, smp->id.len);
                pl_buf_append(out, smp->id.ptr, smp->id.len);
            }
        }
    }
    return pl_buf_ok(out);
}
