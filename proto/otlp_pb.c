/*
 * otlp_pb.c: see otlp_pb.h. Profile index validation, pass-through checks
 * for logs and metrics, and export responses; decoding into the model is
 * otlp_pb_dec.c, encoding otlp_pb_enc.c.
 */
#include "otlp_pb.h"

#include <stdarg.h>
#include <stdio.h>

#include "otlp_pb_internal.h"
#include "otlp_pb_write.h"

/* The export responses of all signals share one layout (partial_success = 1
 * holding rejected count = 1 and error_message = 2; the logs and metrics
 * services, which proflink only passes through, say the same in the OTLP
 * spec, so their service files are not compiled); the encoder relies on it. */
_Static_assert(CPR(ExportProfilesServiceResponse, partial_success) ==
                   CTR(ExportTraceServiceResponse, partial_success),
               "response layout");
_Static_assert(CPR(ExportProfilesPartialSuccess, error_message) ==
                   CTR(ExportTracePartialSuccess, error_message),
               "response layout");

/* Readers accept (NULL, 0); pointer arithmetic on NULL is undefined. */
static const uint8_t empty_input[1];

/* ---- profiles index validation ----------------------------------------- */

typedef struct vctx {
    const pl_dictionary *dict;
    pl_err *err;
} vctx;

/* Index 0 ("not set") is accepted even when a table is empty. */
static inline bool in_range(int32_t i, uint32_t n)
{
    return i == 0 || (i > 0 && (uint32_t)i < n);
}

#define VCHECK(idx, n, table, ...)                                                                 \
    do {                                                                                           \
        if (!in_range((idx), (n))) {                                                               \
            char where_[256];                                                                      \
            snprintf(where_, sizeof where_, __VA_ARGS__);                                          \
            return pl_errf(v->err, PL_ERR_INVALID,                                                 \
                           "%s: index %d out of range (%s has %u entries)", where_, (int)(idx),    \
                           table, (unsigned)(n));                                                  \
        }                                                                                          \
    } while (0)

static pl_status validate_value(const vctx *v, const pl_value *val, const char *where, int depth)
{
    if (depth > PL_OTLP_MAX_DEPTH)
        return pl_errf(v->err, PL_ERR_INVALID, "%s: values nested too deep", where);
    switch (val->type) {
    case PL_VALUE_STRINDEX:
        VCHECK(val->u.strindex, v->dict->n_strings, "string_table", "%s.string_value_strindex",
               where);
        break;
    case PL_VALUE_ARRAY:
        for (uint32_t i = 0; i < val->u.array.n; i++) {
            pl_status st = validate_value(v, &val->u.array.items[i], where, depth + 1);
            if (st)
                return st;
        }
        break;
    case PL_VALUE_KVLIST:
        for (uint32_t i = 0; i < val->u.kvlist.n; i++) {
            VCHECK(val->u.kvlist.items[i].key_strindex, v->dict->n_strings, "string_table",
                   "%s.kvlist_value.values[%u].key_strindex", where, i);
            pl_status st = validate_value(v, &val->u.kvlist.items[i].value, where, depth + 1);
            if (st)
                return st;
        }
        break;
    default:
        break;
    }
    return PL_OK;
}

static pl_status validate_attrs(const vctx *v, const pl_attrs *a, const char *where)
{
    for (uint32_t i = 0; i < a->n; i++) {
        VCHECK(a->items[i].key_strindex, v->dict->n_strings, "string_table",
               "%s.attributes[%u].key_strindex", where, i);
        char w[200];
        snprintf(w, sizeof w, "%s.attributes[%u].value", where, i);
        pl_status st = validate_value(v, &a->items[i].value, w, 0);
        if (st)
            return st;
    }
    return PL_OK;
}

static pl_status validate_indices(const vctx *v, const int32_t *idx, uint32_t n, uint32_t table_n,
                                  const char *table, const char *where)
{
    for (uint32_t i = 0; i < n; i++)
        VCHECK(idx[i], table_n, table, "%s[%u]", where, i);
    return PL_OK;
}

pl_status pl_otlp_validate_profiles(const pl_profiles *ps, pl_err *err)
{
    const pl_dictionary *dict = &ps->dict;
    vctx vc = {dict, err}, *v = &vc;
    pl_status st;
    char w[256];
    for (uint32_t r = 0; r < ps->n_resources; r++) {
        const pl_resource_profiles *rp = &ps->resources[r];
        snprintf(w, sizeof w, "resource_profiles[%u].resource", r);
        if ((st = validate_attrs(v, &rp->resource.attrs, w)))
            return st;
        for (uint32_t s = 0; s < rp->n_scopes; s++) {
            const pl_scope_profiles *sp = &rp->scopes[s];
            snprintf(w, sizeof w, "resource_profiles[%u].scope_profiles[%u].scope", r, s);
            if ((st = validate_attrs(v, &sp->scope.attrs, w)))
                return st;
            for (uint32_t k = 0; k < sp->n_profiles; k++) {
                const pl_profile *pr = &sp->profiles[k];
                char pw[128];
                snprintf(pw, sizeof pw, "resource_profiles[%u].scope_profiles[%u].profiles[%u]", r,
                         s, k);
                VCHECK(pr->sample_type.type_strindex, dict->n_strings, "string_table",
                       "%s.sample_type.type_strindex", pw);
                VCHECK(pr->sample_type.unit_strindex, dict->n_strings, "string_table",
                       "%s.sample_type.unit_strindex", pw);
                VCHECK(pr->period_type.type_strindex, dict->n_strings, "string_table",
                       "%s.period_type.type_strindex", pw);
                VCHECK(pr->period_type.unit_strindex, dict->n_strings, "string_table",
                       "%s.period_type.unit_strindex", pw);
                snprintf(w, sizeof w, "%s.attribute_indices", pw);
                if ((st = validate_indices(v, pr->attribute_indices, pr->n_attribute_indices,
                                           dict->n_attributes, "attribute_table", w)))
                    return st;
                for (uint32_t i = 0; i < pr->n_samples; i++) {
                    const pl_sample *sm = &pr->samples[i];
                    VCHECK(sm->stack_index, dict->n_stacks, "stack_table",
                           "%s.samples[%u].stack_index", pw, i);
                    VCHECK(sm->link_index, dict->n_links, "link_table", "%s.samples[%u].link_index",
                           pw, i);
                    snprintf(w, sizeof w, "%s.samples[%u].attribute_indices", pw, i);
                    if ((st = validate_indices(v, sm->attribute_indices, sm->n_attribute_indices,
                                               dict->n_attributes, "attribute_table", w)))
                        return st;
                }
            }
        }
    }
    for (uint32_t i = 0; i < dict->n_mappings; i++) {
        const pl_mapping *m = &dict->mappings[i];
        VCHECK(m->filename_strindex, dict->n_strings, "string_table",
               "dictionary.mapping_table[%u].filename_strindex", i);
        snprintf(w, sizeof w, "dictionary.mapping_table[%u].attribute_indices", i);
        if ((st = validate_indices(v, m->attribute_indices, m->n_attribute_indices,
                                   dict->n_attributes, "attribute_table", w)))
            return st;
    }
    for (uint32_t i = 0; i < dict->n_locations; i++) {
        const pl_location *l = &dict->locations[i];
        VCHECK(l->mapping_index, dict->n_mappings, "mapping_table",
               "dictionary.location_table[%u].mapping_index", i);
        for (uint32_t k = 0; k < l->n_lines; k++)
            VCHECK(l->lines[k].function_index, dict->n_functions, "function_table",
                   "dictionary.location_table[%u].lines[%u].function_index", i, k);
        snprintf(w, sizeof w, "dictionary.location_table[%u].attribute_indices", i);
        if ((st = validate_indices(v, l->attribute_indices, l->n_attribute_indices,
                                   dict->n_attributes, "attribute_table", w)))
            return st;
    }
    for (uint32_t i = 0; i < dict->n_functions; i++) {
        const pl_function *f = &dict->functions[i];
        VCHECK(f->name_strindex, dict->n_strings, "string_table",
               "dictionary.function_table[%u].name_strindex", i);
        VCHECK(f->system_name_strindex, dict->n_strings, "string_table",
               "dictionary.function_table[%u].system_name_strindex", i);
        VCHECK(f->filename_strindex, dict->n_strings, "string_table",
               "dictionary.function_table[%u].filename_strindex", i);
    }
    for (uint32_t i = 0; i < dict->n_attributes; i++) {
        const pl_kvu *a = &dict->attributes[i];
        VCHECK(a->key_strindex, dict->n_strings, "string_table",
               "dictionary.attribute_table[%u].key_strindex", i);
        VCHECK(a->unit_strindex, dict->n_strings, "string_table",
               "dictionary.attribute_table[%u].unit_strindex", i);
        snprintf(w, sizeof w, "dictionary.attribute_table[%u].value", i);
        if ((st = validate_value(v, &a->value, w, 0)))
            return st;
    }
    for (uint32_t i = 0; i < dict->n_stacks; i++) {
        snprintf(w, sizeof w, "dictionary.stack_table[%u].location_indices", i);
        if ((st = validate_indices(v, dict->stacks[i].location_indices,
                                   dict->stacks[i].n_location_indices, dict->n_locations,
                                   "location_table", w)))
            return st;
    }
    for (uint32_t i = 0; i < dict->n_links; i++) {
        const pl_link *l = &dict->links[i];
        if ((l->trace_id_len != 0 && l->trace_id_len != 16) ||
            (l->span_id_len != 0 && l->span_id_len != 8))
            return pl_errf(err, PL_ERR_INVALID, "dictionary.link_table[%u]: bad id length", i);
    }
    return PL_OK;
}

/* ---- logs / metrics pass-through ---------------------------------------- */

/* Walks the LEN occurrences of field `num` in [p, end) and calls fn on each. */
typedef int (*walk_fn)(dec *d, const uint8_t *p, const uint8_t *end, size_t *count);

static int walk_children(dec *d, const uint8_t *p, const uint8_t *end, uint32_t num,
                         const char *name, walk_fn fn, size_t *count)
{
    uint32_t idx = 0;
    while (p < end) {
        field f;
        if (pl_pb_wire_next_field(d, &p, end, &f))
            return -1;
        if (f.num != num)
            continue;
        EXPECT(&f, WT_LEN, name);
        path_push(d, name, idx++);
        int rc = fn(d, f.ptr, f.ptr + f.len, count);
        path_pop(d);
        if (rc)
            return -1;
    }
    return 0;
}

static int walk_count_only(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    (*count)++;
    /* Check the record's own framing too. */
    while (p < end) {
        field f;
        if (pl_pb_wire_next_field(d, &p, end, &f))
            return -1;
    }
    return 0;
}

static int walk_scope_logs(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    return walk_children(d, p, end, LG(ScopeLogs, log_records), "log_records", walk_count_only,
                         count);
}

static int walk_resource_logs(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    return walk_children(d, p, end, LG(ResourceLogs, scope_logs), "scope_logs", walk_scope_logs,
                         count);
}

static int walk_metric(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    while (p < end) {
        field f;
        if (pl_pb_wire_next_field(d, &p, end, &f))
            return -1;
        const char *name = NULL;
        switch (f.num) {
        case MT(Metric, gauge):
            name = "gauge";
            break;
        case MT(Metric, sum):
            name = "sum";
            break;
        case MT(Metric, histogram):
            name = "histogram";
            break;
        case MT(Metric, exponential_histogram):
            name = "exponential_histogram";
            break;
        case MT(Metric, summary):
            name = "summary";
            break;
        default:
            continue;
        }
        _Static_assert(MT(Gauge, data_points) == MT(Sum, data_points) &&
                           MT(Sum, data_points) == MT(Histogram, data_points) &&
                           MT(Histogram, data_points) == MT(ExponentialHistogram, data_points) &&
                           MT(ExponentialHistogram, data_points) == MT(Summary, data_points),
                       "data_points share one field number");
        EXPECT(&f, WT_LEN, name);
        path_push(d, name, -1);
        int rc = walk_children(d, f.ptr, f.ptr + f.len, MT(Gauge, data_points), "data_points",
                               walk_count_only, count);
        path_pop(d);
        if (rc)
            return -1;
    }
    return 0;
}

static int walk_scope_metrics(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    return walk_children(d, p, end, MT(ScopeMetrics, metrics), "metrics", walk_metric, count);
}

static int walk_resource_metrics(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    return walk_children(d, p, end, MT(ResourceMetrics, scope_metrics), "scope_metrics",
                         walk_scope_metrics, count);
}

static pl_status count_request(const uint8_t *buf, size_t len, uint32_t num, const char *name,
                               walk_fn fn, size_t *count, pl_err *err)
{
    if (!buf)
        buf = empty_input, len = 0;
    dec dd = {.err = err, .base = buf, .status = PL_ERR_INVALID};
    size_t n = 0;
    if (err)
        err->msg[0] = '\0';
    if (walk_children(&dd, buf, buf + len, num, name, fn, &n))
        return dd.status;
    if (count)
        *count = n;
    return PL_OK;
}

pl_status pl_otlp_count_logs(const uint8_t *buf, size_t len, size_t *count, pl_err *err)
{
    return count_request(buf, len, CLG(LogsData, resource_logs), "resource_logs",
                         walk_resource_logs, count, err);
}

pl_status pl_otlp_count_metrics(const uint8_t *buf, size_t len, size_t *count, pl_err *err)
{
    return count_request(buf, len, CMT(MetricsData, resource_metrics), "resource_metrics",
                         walk_resource_metrics, count, err);
}

/* ---- responses and google.rpc.Status ------------------------------------ */

bool pl_otlp_encode_export_response(pl_buf *b, int64_t rejected, const char *message)
{
    size_t s = w_begin(b, CTR(ExportTraceServiceResponse, partial_success));
    w_uvarint_opt(b, CTR(ExportTracePartialSuccess, rejected_spans), (uint64_t)rejected);
    if (message && *message)
        w_len_field(b, CTR(ExportTracePartialSuccess, error_message), message, strlen(message));
    w_end(b, s);
    return pl_buf_ok(b);
}

bool pl_otlp_encode_export_response_json(pl_buf *b, pl_signal signal, int64_t rejected,
                                         const char *message)
{
    static const char *const keys[PL_SIGNAL_COUNT] = {"rejectedSpans", "rejectedProfiles",
                                                      "rejectedLogRecords", "rejectedDataPoints"};
    pl_buf_append_str(b, "{\"partialSuccess\":{");
    bool comma = false;
    if (rejected) {
        pl_buf_printf(b, "\"%s\":\"%" PRId64 "\"",
                      keys[(unsigned)signal < PL_SIGNAL_COUNT ? signal : 0], rejected);
        comma = true;
    }
    if (message && *message) {
        pl_buf_append_str(b, comma ? ",\"errorMessage\":" : "\"errorMessage\":");
        pl_buf_json_string(b, message, strlen(message));
    }
    pl_buf_append_str(b, "}}");
    return pl_buf_ok(b);
}

pl_status pl_otlp_decode_export_response(const uint8_t *buf, size_t len, int64_t *rejected,
                                         pl_bytes *message, pl_err *err)
{
    if (!buf)
        buf = empty_input, len = 0;
    dec dd = {.err = err, .base = buf, .status = PL_ERR_INVALID}, *d = &dd;
    if (rejected)
        *rejected = 0;
    if (message)
        *message = (pl_bytes){NULL, 0};
    const uint8_t *p = buf, *end = buf + len;
    while (p < end) {
        field f;
        if (pl_pb_wire_next_field(d, &p, end, &f))
            return d->status;
        if (f.num != CTR(ExportTraceServiceResponse, partial_success))
            continue;
        if (f.wt != WT_LEN) {
            pl_pb_wire_wrong_wt(d, "partial_success", &f, WT_LEN);
            return d->status;
        }
        const uint8_t *q = f.ptr, *qend = f.ptr + f.len;
        path_push(d, "partial_success", -1);
        while (q < qend) {
            field g = {0};
            if (pl_pb_wire_next_field(d, &q, qend, &g))
                return d->status;
            if (g.num == CTR(ExportTracePartialSuccess, rejected_spans)) {
                if (g.wt != WT_VARINT) {
                    pl_pb_wire_wrong_wt(d, "rejected", &g, WT_VARINT);
                    return d->status;
                }
                if (rejected)
                    *rejected = (int64_t)g.v;
            } else if (g.num == CTR(ExportTracePartialSuccess, error_message)) {
                pl_bytes m;
                if (get_string(d, &g, "error_message", &m))
                    return d->status;
                if (message)
                    *message = m;
            }
        }
        path_pop(d);
    }
    return PL_OK;
}

#define RETRY_INFO_URL "type.googleapis.com/google.rpc.RetryInfo"

bool pl_rpc_status_encode(pl_buf *b, int32_t code, const char *message, int64_t retry_delay_ns)
{
    w_i32_opt(b, google_rpc_Status_code_tag, code);
    if (message && *message)
        w_len_field(b, google_rpc_Status_message_tag, message, strlen(message));
    if (retry_delay_ns >= 0) {
        size_t any = w_begin(b, google_rpc_Status_details_tag);
        w_len_field(b, google_protobuf_Any_type_url_tag, RETRY_INFO_URL,
                    sizeof(RETRY_INFO_URL) - 1);
        size_t val = w_begin(b, google_protobuf_Any_value_tag);
        size_t dur = w_begin(b, google_rpc_RetryInfo_retry_delay_tag);
        w_uvarint_opt(b, google_protobuf_Duration_seconds_tag,
                      (uint64_t)(retry_delay_ns / 1000000000));
        w_i32_opt(b, google_protobuf_Duration_nanos_tag, (int32_t)(retry_delay_ns % 1000000000));
        w_end(b, dur);
        w_end(b, val);
        w_end(b, any);
    }
    return pl_buf_ok(b);
}

bool pl_rpc_status_encode_json(pl_buf *b, int32_t code, const char *message, int64_t retry_delay_ns)
{
    pl_buf_printf(b, "{\"code\":%d,\"message\":", (int)code);
    pl_buf_json_string(b, message ? message : "", message ? strlen(message) : 0);
    if (retry_delay_ns >= 0) {
        int64_t sec = retry_delay_ns / 1000000000, ns = retry_delay_ns % 1000000000;
        pl_buf_append_str(b, ",\"details\":[{\"@type\":\"" RETRY_INFO_URL "\",\"retryDelay\":\"");
        if (ns == 0)
            pl_buf_printf(b, "%" PRId64 "s", sec);
        else if (ns % 1000000 == 0)
            pl_buf_printf(b, "%" PRId64 ".%03ds", sec, (int)(ns / 1000000));
        else if (ns % 1000 == 0)
            pl_buf_printf(b, "%" PRId64 ".%06ds", sec, (int)(ns / 1000));
        else
            pl_buf_printf(b, "%" PRId64 ".%09ds", sec, (int)ns);
        pl_buf_append_str(b, "\"}]");
    }
    pl_buf_append_byte(b, '}');
    return pl_buf_ok(b);
}

static int parse_retry_info(dec *d, const uint8_t *p, const uint8_t *end, int64_t *delay)
{
    int64_t sec = 0, nanos = 0;
    while (p < end) {
        field f;
        if (pl_pb_wire_next_field(d, &p, end, &f))
            return -1;
        if (f.num != google_rpc_RetryInfo_retry_delay_tag)
            continue;
        EXPECT(&f, WT_LEN, "retry_delay");
        const uint8_t *q = f.ptr, *qend = f.ptr + f.len;
        while (q < qend) {
            field g = {0};
            if (pl_pb_wire_next_field(d, &q, qend, &g))
                return -1;
            if (g.num == google_protobuf_Duration_seconds_tag)
                GET_I64(&g, "seconds", sec);
            else if (g.num == google_protobuf_Duration_nanos_tag)
                GET_I32(&g, "nanos", nanos);
        }
    }
    if (sec < 0 || sec > INT64_MAX / 1000000000 - 1)
        sec = sec < 0 ? 0 : INT64_MAX / 1000000000 - 1;
    if (nanos < 0)
        nanos = 0;
    *delay = sec * 1000000000 + nanos;
    return 0;
}

pl_status pl_rpc_status_decode(const uint8_t *buf, size_t len, int32_t *code, pl_bytes *message,
                               int64_t *retry_delay_ns, pl_err *err)
{
    if (!buf)
        buf = empty_input, len = 0;
    dec dd = {.err = err, .base = buf, .status = PL_ERR_INVALID}, *d = &dd;
    int32_t c = 0;
    pl_bytes msg = {NULL, 0};
    int64_t delay = -1;
    const uint8_t *p = buf, *end = buf + len;
    while (p < end) {
        field f;
        if (pl_pb_wire_next_field(d, &p, end, &f))
            return d->status;
        if (f.num == google_rpc_Status_code_tag) {
            if (f.wt != WT_VARINT) {
                pl_pb_wire_wrong_wt(d, "code", &f, WT_VARINT);
                return d->status;
            }
            c = (int32_t)(uint32_t)f.v;
        } else if (f.num == google_rpc_Status_message_tag) {
            if (get_bytes(d, &f, "message", &msg))
                return d->status;
        } else if (f.num == google_rpc_Status_details_tag) {
            if (f.wt != WT_LEN) {
                pl_pb_wire_wrong_wt(d, "details", &f, WT_LEN);
                return d->status;
            }
            pl_bytes url = {NULL, 0}, value = {empty_input, 0};
            const uint8_t *q = f.ptr, *qend = f.ptr + f.len;
            while (q < qend) {
                field g = {0};
                if (pl_pb_wire_next_field(d, &q, qend, &g))
                    return d->status;
                if (g.num == google_protobuf_Any_type_url_tag && g.wt == WT_LEN)
                    url = (pl_bytes){g.ptr, (uint32_t)g.len};
                else if (g.num == google_protobuf_Any_value_tag && g.wt == WT_LEN)
                    value = (pl_bytes){g.ptr, (uint32_t)g.len};
            }
            if (pl_bytes_eq_cstr(url, RETRY_INFO_URL) &&
                parse_retry_info(d, value.ptr, value.ptr + value.len, &delay))
                return d->status;
        }
    }
    if (code)
        *code = c;
    if (message)
        *message = msg;
    if (retry_delay_ns)
        *retry_delay_ns = delay;
    return PL_OK;
}
