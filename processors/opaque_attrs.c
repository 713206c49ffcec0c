/*
 * opaque_attrs.c: the attribute lists of log records and metric data points
 * inside opaque OTLP requests.
 *
 * The request is copied field by field; the messages on the path to a log
 * record or a data point are rebuilt (their length changes), everything
 * else is copied byte for byte. A record's KeyValue fields are wrapped as
 * the Resource of a one-resource traces request, decoded with the traces
 * codec, handed to the callback, encoded again and unwrapped, so the
 * callback sees them exactly as span attributes are seen.
 *
 * With `resources`, the attributes of each Resource (present) go through the
 * callback too. A log body, when asked for, travels the same way as the
 * value of a one-KeyValue list.
 *
 * Paths (field numbers, logs.proto / metrics.proto):
 *   logs:    request.1 ResourceLogs .2 ScopeLogs .2 LogRecord: attributes 6
 *   metrics: request.1 ResourceMetrics .2 ScopeMetrics .2 Metric
 *            .5 Gauge / .7 Sum (.1 NumberDataPoint: attributes 7)
 *            .9 Histogram (.1 HistogramDataPoint: attributes 9)
 *            .10 ExponentialHistogram (.1 data point: attributes 1)
 *            .11 Summary (.1 SummaryDataPoint: attributes 7)
 */
#include "processors/opaque_attrs.h"

#include <string.h>

#include "proto/otlp_pb.h"
#include "proto/pb_wire.h"

typedef struct walk {
    pl_batch *batch;
    pl_opaque_attrs_fn fn;
    pl_opaque_body_fn body;
    void *arg;
    bool resources;
    pl_bytes service;
} walk;

/* Levels of the walk. */
enum { L_REQUEST, L_RESOURCE, L_SCOPE, L_RECORD, L_METRIC, L_DATA, L_POINT, L_RES_MSG };

/* The service.name string of a Resource message's attributes (empty when
 * absent or not a string). */
static pl_bytes resource_service(pl_pb_reader res)
{
    uint32_t field, wt;
    uint64_t v;
    pl_pb_reader kv;
    while (res.p < res.end) {
        if (pl_pb_next_field(&res, &field, &wt, &v, &kv) != 0)
            break;
        if (field != 1 || wt != PL_PB_LEN)
            continue;
        pl_bytes key = {NULL, 0}, val = {NULL, 0};
        bool is_str = false;
        pl_pb_reader sub;
        while (kv.p < kv.end) {
            if (pl_pb_next_field(&kv, &field, &wt, &v, &sub) != 0)
                break;
            if (field == 1 && wt == PL_PB_LEN) {
                key = (pl_bytes){sub.p, (size_t)(sub.end - sub.p)};
            } else if (field == 2 && wt == PL_PB_LEN) {
                pl_pb_reader any = sub, s;
                while (any.p < any.end) {
                    if (pl_pb_next_field(&any, &field, &wt, &v, &s) != 0)
                        break;
                    if (field == 1 && wt == PL_PB_LEN) {
                        val = (pl_bytes){s.p, (size_t)(s.end - s.p)};
                        is_str = true;
                    }
                }
            }
        }
        if (is_str && pl_bytes_eq_cstr(key, "service.name"))
            return val;
    }
    return (pl_bytes){NULL, 0};
}

/* The KeyValue fields `kvs` (a Resource message body: each field 1) through
 * the callback; appends the resulting KeyValues to `out` as fields
 * `attr_field`. With `body`, `kvs` is one KeyValue holding a log body: its
 * value goes through the body callback and is appended as field
 * `attr_field` (an AnyValue). */
static bool rewrite_list(walk *w, const pl_buf *kvs, uint32_t attr_field, bool body, pl_buf *out)
{
    pl_buf rs, req, enc;
    pl_buf_init(&rs);
    pl_buf_init(&req);
    pl_buf_init(&enc);
    pl_pb_put_bytes(&rs, 1, kvs->data ? kvs->data : (const uint8_t *)"", kvs->len);
    pl_pb_put_bytes(&req, 1, rs.data ? rs.data : (const uint8_t *)"", rs.len);
    pl_batch *tmp = pl_batch_new(PL_SIGNAL_TRACES);
    pl_err err = {{0}};
    bool ok = tmp && pl_buf_ok(&rs) && pl_buf_ok(&req) &&
              pl_otlp_decode_traces(tmp, req.data, req.len, &err) == PL_OK &&
              tmp->data.traces.n_resources == 1;
    if (ok) {
        tmp->metadata = w->batch->metadata; /* from_context reads it; it outlives tmp */
        pl_resource_spans *r = &tmp->data.traces.resources[0];
        if (!body)
            ok = w->fn(w->arg, tmp, &r->resource.attrs, w->service);
        else
            ok =
                r->resource.attrs.n == 1 && w->body(w->arg, tmp, &r->resource.attrs.items[0].value);
        r->has_resource = r->resource.attrs.n > 0;
        ok = ok && pl_otlp_encode_traces(&tmp->data.traces, &enc) && pl_buf_ok(&enc);
        tmp->metadata = (pl_metadata){0};
    }
    /* request.1 ResourceSpans .1 Resource .1 KeyValue */
    /* an empty encoding has no buffer: no arithmetic on NULL */
    pl_pb_reader r = {enc.data, enc.data ? enc.data + enc.len : NULL};
    uint32_t field, wt;
    uint64_t v;
    for (int depth = 0; ok && depth < 2; depth++) {
        pl_pb_reader sub, found = {NULL, NULL};
        while (ok && r.p < r.end) {
            if (pl_pb_next_field(&r, &field, &wt, &v, &sub) != 0)
                ok = false;
            else if (field == 1 && wt == PL_PB_LEN)
                found = sub;
        }
        r = found;
    }
    while (ok && r.p && r.p < r.end) {
        pl_pb_reader sub;
        if (pl_pb_next_field(&r, &field, &wt, &v, &sub) != 0)
            ok = false;
        else if (field == 1 && wt == PL_PB_LEN && !body)
            pl_pb_put_bytes(out, attr_field, sub.p, (size_t)(sub.end - sub.p));
        else if (field == 1 && wt == PL_PB_LEN) {
            /* KeyValue.value */
            pl_pb_reader any = {NULL, NULL}, sv;
            while (ok && sub.p < sub.end) {
                if (pl_pb_next_field(&sub, &field, &wt, &v, &sv) != 0)
                    ok = false;
                else if (field == 2 && wt == PL_PB_LEN)
                    any = sv;
            }
            if (ok && any.p)
                pl_pb_put_bytes(out, attr_field, any.p, (size_t)(any.end - any.p));
        }
    }
    pl_batch_free(tmp);
    pl_buf_free(&rs);
    pl_buf_free(&req);
    pl_buf_free(&enc);
    return ok;
}

/* The level a LEN field of a message at `level` leads to (-1: copied as
 * is); for a metric's data container, *attr_field is the attribute field
 * of its data points. */
static int child_level(const walk *w, int level, uint32_t field, uint32_t *attr_field)
{
    switch (level) {
    case L_REQUEST:
        return field == 1 ? L_RESOURCE : -1;
    case L_RESOURCE:
        if (field == 1 && w->resources) {
            *attr_field = 1; /* Resource.attributes */
            return L_RES_MSG;
        }
        return field == 2 ? L_SCOPE : -1;
    case L_SCOPE:
        if (field != 2)
            return -1;
        return w->batch->signal == PL_SIGNAL_LOGS ? L_RECORD : L_METRIC;
    case L_METRIC:
        switch (field) {
        case 5:
        case 7:
        case 11:
            *attr_field = 7;
            return L_DATA;
        case 9:
            *attr_field = 9;
            return L_DATA;
        case 10:
            *attr_field = 1;
            return L_DATA;
        default:
            return -1;
        }
    case L_DATA:
        return field == 1 ? L_POINT : -1;
    default:
        return -1;
    }
}

/* Copies message `m` (at `level`) to `out`, rewritten. */
static bool walk_msg(walk *w, pl_pb_reader m, int level, uint32_t attr_field, pl_buf *out)
{
    if (level == L_RECORD)
        attr_field = 6;
    bool leaf = level == L_RECORD || level == L_POINT || level == L_RES_MSG;
    if (level == L_RESOURCE) {
        w->service = (pl_bytes){NULL, 0};
        pl_pb_reader scan = m, sub;
        uint32_t field, wt;
        uint64_t v;
        while (scan.p < scan.end) {
            if (pl_pb_next_field(&scan, &field, &wt, &v, &sub) != 0)
                return false;
            if (field == 1 && wt == PL_PB_LEN)
                w->service = resource_service(sub);
        }
    }
    pl_buf kvs;
    pl_buf_init(&kvs);
    bool ok = true;
    while (ok && m.p < m.end) {
        const uint8_t *start = m.p;
        uint32_t field, wt;
        uint64_t v;
        pl_pb_reader sub;
        if (pl_pb_next_field(&m, &field, &wt, &v, &sub) != 0) {
            ok = false;
            break;
        }
        if (leaf && field == attr_field && wt == PL_PB_LEN) {
            pl_pb_put_bytes(&kvs, 1, sub.p, (size_t)(sub.end - sub.p));
            continue;
        }
        if (level == L_RECORD && field == 5 && wt == PL_PB_LEN && w->body) {
            /* LogRecord.body: as the value of a KeyValue "body" */
            pl_buf kv, one;
            pl_buf_init(&kv);
            pl_buf_init(&one);
            pl_pb_put_bytes(&kv, 1, "body", 4);
            pl_pb_put_bytes(&kv, 2, sub.p, (size_t)(sub.end - sub.p));
            pl_pb_put_bytes(&one, 1, kv.data ? kv.data : (const uint8_t *)"", kv.len);
            ok = pl_buf_ok(&kv) && pl_buf_ok(&one) && rewrite_list(w, &one, 5, true, out);
            pl_buf_free(&kv);
            pl_buf_free(&one);
            continue;
        }
        uint32_t child_attr = attr_field;
        int child = wt == PL_PB_LEN ? child_level(w, level, field, &child_attr) : -1;
        if (child < 0) {
            pl_buf_append(out, start, (size_t)(m.p - start));
            continue;
        }
        pl_buf body;
        pl_buf_init(&body);
        ok = walk_msg(w, sub, child, child_attr, &body) && pl_buf_ok(&body);
        if (ok)
            pl_pb_put_bytes(out, field, body.data ? body.data : (const uint8_t *)"", body.len);
        pl_buf_free(&body);
    }
    if (ok && leaf)
        ok = pl_buf_ok(&kvs) && rewrite_list(w, &kvs, attr_field, false, out);
    pl_buf_free(&kvs);
    return ok && pl_buf_ok(out);
}

bool pl_opaque_rewrite_attrs(pl_batch *batch, bool resources, pl_opaque_attrs_fn fn, void *arg)
{
    return pl_opaque_rewrite(batch, resources, fn, NULL, arg);
}

bool pl_opaque_rewrite(pl_batch *batch, bool resources, pl_opaque_attrs_fn fn,
                       pl_opaque_body_fn body, void *arg)
{
    if (batch->signal != PL_SIGNAL_LOGS && batch->signal != PL_SIGNAL_METRICS)
        return false;
    walk w = {.batch = batch, .fn = fn, .body = body, .arg = arg, .resources = resources};
    pl_buf out;
    pl_buf_init(&out);
    pl_pb_reader req = {batch->data.raw.ptr, batch->data.raw.ptr + batch->data.raw.len};
    bool ok = walk_msg(&w, req, L_REQUEST, 0, &out);
    if (ok && out.len && pl_batch_adopt(batch, out.data, out.cap) == 0) {
        batch->data.raw = (pl_bytes){out.data, out.len};
        return true;
    }
    pl_buf_free(&out);
    if (ok && !batch->data.raw.len)
        return true;
    return false;
}
