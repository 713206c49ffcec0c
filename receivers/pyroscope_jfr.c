/*
 * pyroscope_jfr.c: see pyroscope_jfr.h.
 */
#include "receivers/pyroscope_jfr.h"

#include <stdlib.h>
#include <string.h>

#include "proto/jfr.h"
#include "receivers/multipart.h"

#define MAX_PARTS 16

/* The part's bytes, gunzipped when they carry the gzip magic (*owned is
 * then the malloc'd copy). */
static pl_status maybe_gunzip(pl_bytes in, size_t limit, const char *what, pl_bytes *out,
                              uint8_t **owned, pl_err *err)
{
    *owned = NULL;
    if (!pl_is_gzip(in.ptr, in.len)) {
        if (in.len > limit)
            return pl_errf(err, PL_ERR_TOO_LARGE, "%s: %u bytes, over the %zu-byte limit", what,
                           in.len, limit);
        *out = in;
        return PL_OK;
    }
    size_t n = 0;
    pl_err inner = {{0}};
    pl_status st = pl_gunzip(in.ptr, in.len, limit, owned, &n, &inner);
    if (st != PL_OK)
        return pl_errf(err, st, "%s: %s", what, inner.msg);
    if (n > UINT32_MAX) {
        free(*owned);
        *owned = NULL;
        return pl_errf(err, PL_ERR_TOO_LARGE, "%s: too large", what);
    }
    *out = (pl_bytes){*owned, (uint32_t)n};
    return PL_OK;
}

pl_status pl_pyroscope_ingest_jfr(pl_pprof_builder *b, const pl_jfr_upload *up,
                                  const pl_pprof_meta *meta, uint32_t *profiles, pl_err *err)
{
    *profiles = 0;
    pl_bytes jfr = {up->body, (uint32_t)up->body_len}, labels = {NULL, 0};
    if (up->body_len > UINT32_MAX)
        return pl_errf(err, PL_ERR_TOO_LARGE, "body too large");
    bool multipart = up->content_type && up->content_type_len >= 19 &&
                     memmem(up->content_type, up->content_type_len, "multipart/form-data", 19);
    if (multipart) {
        pl_bytes boundary;
        if (pl_multipart_boundary(up->content_type, up->content_type_len, &boundary))
            return pl_errf(err, PL_ERR_INVALID, "multipart: Content-Type has no boundary");
        pl_multipart_part parts[MAX_PARTS];
        size_t n = 0;
        pl_status st =
            pl_multipart_parse(boundary, up->body, up->body_len, parts, MAX_PARTS, &n, err);
        if (st != PL_OK)
            return st;
        const pl_multipart_part *p = pl_multipart_find(parts, n, "jfr");
        if (!p)
            return pl_errf(err, PL_ERR_INVALID, "multipart: no \"jfr\" part");
        jfr = p->data;
        const pl_multipart_part *l = pl_multipart_find(parts, n, "labels");
        if (l)
            labels = l->data;
    }
    if (jfr.len == 0)
        return pl_errf(err, PL_ERR_INVALID, "empty body: expected a JFR recording");
    uint8_t *jfr_owned = NULL, *labels_owned = NULL;
    pl_jfr_labels *snapshot = NULL;
    pl_jfr_result res;
    memset(&res, 0, sizeof(res));
    pl_status st = maybe_gunzip(jfr, up->max_decompressed, "jfr", &jfr, &jfr_owned, err);
    if (st == PL_OK && labels.len)
        st = maybe_gunzip(labels, up->max_decompressed, "labels", &labels, &labels_owned, err);
    if (st == PL_OK && labels.len) {
        pl_err inner = {{0}};
        snapshot = pl_jfr_labels_decode(labels.ptr, labels.len, &inner);
        if (!snapshot)
            st = pl_errf(err, PL_ERR_INVALID, "labels part: %s", inner.msg);
    }
    if (st == PL_OK) {
        long rate = up->sample_rate ? strtol(up->sample_rate, NULL, 10) : 100;
        pl_jfr_options o = {
            .sample_rate = rate > 0 ? rate : 100,
            .time_unix_nano = meta->default_time_unix_nano,
            .duration_nano = meta->default_duration_nano,
            .labels = snapshot,
            .max_memory = up->max_memory,
            .max_objects = up->max_objects,
        };
        st = pl_jfr_to_pprof(jfr.ptr, jfr.len, &o, &res, err);
    }
    /* the async-profiler mode as a resource attribute (javaspy_event) */
    pl_kv *attrs = NULL;
    pl_pprof_meta m = *meta;
    if (st == PL_OK && res.event_setting[0]) {
        attrs = calloc(meta->n_resource_attrs + 1, sizeof(pl_kv));
        if (!attrs) {
            st = pl_errf(err, PL_ERR_NOMEM, "out of memory");
        } else {
            if (meta->n_resource_attrs)
                memcpy(attrs, meta->resource_attrs, meta->n_resource_attrs * sizeof(pl_kv));
            attrs[meta->n_resource_attrs].key = PL_BYTES_LIT("javaspy_event");
            attrs[meta->n_resource_attrs].value =
                pl_value_string(pl_bytes_from_cstr(res.event_setting));
            m.resource_attrs = attrs;
            m.n_resource_attrs = meta->n_resource_attrs + 1;
        }
    }
    for (uint32_t i = 0; st == PL_OK && i < res.n_profiles; i++) {
        pl_err inner = {{0}};
        m.profile_name = pl_bytes_from_cstr(res.profiles[i].name);
        st = pl_pprof_builder_add(b, res.profiles[i].pprof.data, res.profiles[i].pprof.len, &m,
                                  &inner);
        if (st != PL_OK)
            pl_errf(err, st, "jfr: %s profile: %s", res.profiles[i].name, inner.msg);
        else
            (*profiles)++;
    }
    free(attrs);
    pl_jfr_result_free(&res);
    pl_jfr_labels_free(snapshot);
    free(jfr_owned);
    free(labels_owned);
    return st;
}
