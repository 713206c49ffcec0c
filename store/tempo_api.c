/*
 * tempo_api.c: the Grafana Tempo data source on the store's API listener
 * (rows of pl_store_tempo_routes, see store_routes.h and docs/grafana.md).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/component.h"
#include "core/model.h"
#include "proto/json_reader.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"
#include "store/store_routes.h"
#include "store/store_tempo.h"
#include "store/store_version.h"

static void tempo_echo(pl_store_call *c)
{
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_append_str(&b, "echo");
    pl_store_call_respond(c, 200, "text/plain; charset=utf-8", &b);
}

static void tempo_buildinfo(pl_store_call *c)
{
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_append_str(&b, "{\"version\":\"" PL_VERSION "\",\"revision\":\"\",\"branch\":\"\","
                          "\"buildDate\":\"\",\"buildUser\":\"\",\"goVersion\":\"\"}\n");
    pl_store_call_respond(c, 200, "application/json", &b);
}

/* ---- trace by id ----------------------------------------------------------- */

/* 1-32 hex digits, left-padded with zeros (Tempo strips leading zeros from
 * the ids it shows). -1 when not hex, too long or all zero. */
static int parse_tempo_trace_id(const char *text, uint8_t out[16])
{
    size_t n = strlen(text);
    if (n == 0 || n > 32)
        return -1;
    char hex[33];
    memset(hex, '0', 32);
    memcpy(hex + 32 - n, text, n);
    hex[32] = 0;
    return pl_query_parse_trace_id(hex, out);
}

#define JSON_MAX_DEPTH 16

static bool json_attrs(pl_jr *r, pl_arena *a, pl_attrs *out, int depth);

/* One stored JSON value (the store's plain attribute JSON) as an OTLP
 * AnyValue; strings point into the arena. */
static bool json_value(pl_jr *r, pl_arena *a, pl_value *v, int depth)
{
    memset(v, 0, sizeof(*v));
    switch (pl_jr_peek(r)) {
    case PL_JT_STRING: {
        pl_jstr js;
        if (!pl_jr_string(r, &js))
            return false;
        uint8_t *dst = pl_arena_alloc(a, js.len + 1);
        if (!dst)
            return false;
        long len = js.escaped ? pl_jr_unescape(&js, dst) : (long)js.len;
        if (len < 0)
            return false;
        if (!js.escaped)
            memcpy(dst, js.ptr, js.len);
        *v = pl_value_string((pl_bytes){dst, (uint32_t)len});
        return true;
    }
    case PL_JT_NUMBER: {
        const char *text;
        size_t len;
        if (!pl_jr_number(r, &text, &len))
            return false;
        char num[64];
        if (len >= sizeof(num))
            len = sizeof(num) - 1;
        memcpy(num, text, len);
        num[len] = 0;
        bool integer = !strpbrk(num, ".eE");
        if (integer) {
            errno = 0;
            long long i = strtoll(num, NULL, 10);
            if (errno != ERANGE) {
                *v = pl_value_int(i);
                return true;
            }
        }
        *v = pl_value_double(strtod(num, NULL));
        return true;
    }
    case PL_JT_TRUE:
    case PL_JT_FALSE: {
        bool b = pl_jr_peek(r) == PL_JT_TRUE;
        *v = pl_value_bool(b);
        return pl_jr_literal(r);
    }
    case PL_JT_NULL:
        return pl_jr_literal(r);
    case PL_JT_ARRAY: {
        if (depth >= JSON_MAX_DEPTH || !pl_jr_array_begin(r))
            return false;
        unsigned count = 0;
        int more;
        pl_value *items = NULL;
        uint32_t n = 0;
        while ((more = pl_jr_array_next(r, &count)) == 1) {
            items = pl_arena_grow(a, items, n, n + 1, sizeof(pl_value));
            if (!items || !json_value(r, a, &items[n], depth + 1))
                return false;
            n++;
        }
        v->type = PL_VALUE_ARRAY;
        v->u.array.items = items;
        v->u.array.n = n;
        return more == 0;
    }
    case PL_JT_OBJECT: {
        if (depth >= JSON_MAX_DEPTH)
            return false;
        pl_attrs attrs = {0};
        if (!json_attrs(r, a, &attrs, depth + 1))
            return false;
        v->type = PL_VALUE_KVLIST;
        v->u.kvlist.items = attrs.items;
        v->u.kvlist.n = attrs.n;
        return true;
    }
    default:
        return false;
    }
}

/* {"k":v,...} -> attributes. */
static bool json_attrs(pl_jr *r, pl_arena *a, pl_attrs *out, int depth)
{
    if (!pl_jr_object_begin(r))
        return false;
    unsigned count = 0;
    pl_jstr key;
    int more;
    while ((more = pl_jr_object_next(r, &count, &key)) == 1) {
        uint8_t *k = pl_arena_alloc(a, key.len + 1);
        if (!k)
            return false;
        long klen = key.escaped ? pl_jr_unescape(&key, k) : (long)key.len;
        if (klen < 0)
            return false;
        if (!key.escaped)
            memcpy(k, key.ptr, key.len);
        pl_value v;
        if (!json_value(r, a, &v, depth))
            return false;
        pl_attrs_put(a, out, (pl_bytes){k, (uint32_t)klen}, v);
    }
    return more == 0;
}

static bool parse_attrs(const char *json, pl_arena *a, pl_attrs *out)
{
    if (!json || !*json)
        return true;
    pl_jr r;
    pl_jr_init(&r, (const uint8_t *)json, strlen(json), JSON_MAX_DEPTH + 2);
    return json_attrs(&r, a, out, 0);
}

/* [{name, time_unix_nano, attributes}] -> events. */
static bool parse_events(const char *json, pl_arena *a, pl_span *sp)
{
    if (!json || !*json || strcmp(json, "[]") == 0)
        return true;
    pl_jr r;
    pl_jr_init(&r, (const uint8_t *)json, strlen(json), JSON_MAX_DEPTH + 2);
    if (!pl_jr_array_begin(&r))
        return false;
    unsigned count = 0;
    int more;
    while ((more = pl_jr_array_next(&r, &count)) == 1) {
        sp->events =
            pl_arena_grow(a, sp->events, sp->n_events, sp->n_events + 1, sizeof(pl_span_event));
        if (!sp->events || !pl_jr_object_begin(&r))
            return false;
        pl_span_event *ev = &sp->events[sp->n_events++];
        unsigned c2 = 0;
        pl_jstr key;
        int m;
        while ((m = pl_jr_object_next(&r, &c2, &key)) == 1) {
            pl_value v;
            if (key.len == 10 && memcmp(key.ptr, "attributes", 10) == 0) {
                if (!json_attrs(&r, a, &ev->attrs, 1))
                    return false;
                continue;
            }
            if (!json_value(&r, a, &v, 1))
                return false;
            if (key.len == 4 && memcmp(key.ptr, "name", 4) == 0 && v.type == PL_VALUE_STRING)
                ev->name = v.u.str;
            else if (key.len == 14 && memcmp(key.ptr, "time_unix_nano", 14) == 0 &&
                     v.type == PL_VALUE_STRING && v.u.str.len < 24) {
                char num[24];
                memcpy(num, v.u.str.ptr, v.u.str.len);
                num[v.u.str.len] = 0;
                ev->time_unix_nano = strtoull(num, NULL, 10);
            }
        }
        if (m < 0)
            return false;
    }
    return more == 0;
}

/* The stored spans of a trace as OTLP traces: one resource per distinct
 * resource, one scope each (the store keeps no scope). */
static bool detail_to_traces(const pl_trace_detail *d, pl_batch *b)
{
    pl_arena *a = &b->arena;
    pl_traces *t = &b->data.traces;
    const char **keys = pl_arena_calloc(a, d->n ? d->n : 1, sizeof(char *));
    uint32_t *counts = pl_arena_calloc(a, d->n ? d->n : 1, sizeof(uint32_t));
    uint32_t *which = pl_arena_calloc(a, d->n ? d->n : 1, sizeof(uint32_t));
    t->resources = pl_arena_calloc(a, d->n ? d->n : 1, sizeof(pl_resource_spans));
    if (!keys || !counts || !which || !t->resources)
        return false;
    for (size_t i = 0; i < d->n; i++) { /* group by resource (few per trace) */
        const char *rj = d->spans[i].resource_json;
        uint32_t k = 0;
        while (k < t->n_resources && strcmp(keys[k], rj) != 0)
            k++;
        if (k == t->n_resources) {
            keys[k] = rj;
            pl_resource_spans *rs = &t->resources[t->n_resources++];
            rs->has_resource = true;
            if (!parse_attrs(rj, a, &rs->resource.attrs))
                return false;
            if (!pl_attrs_find(&rs->resource.attrs, "service.name", 12) && *d->spans[i].service)
                pl_attrs_put(a, &rs->resource.attrs, PL_BYTES_LIT("service.name"),
                             pl_value_string(pl_bytes_from_cstr(d->spans[i].service)));
        }
        which[i] = k;
        counts[k]++;
    }
    for (uint32_t k = 0; k < t->n_resources; k++) {
        pl_resource_spans *rs = &t->resources[k];
        rs->scopes = pl_arena_calloc(a, 1, sizeof(pl_scope_spans));
        if (!rs->scopes || !(rs->scopes[0].spans = pl_arena_calloc(a, counts[k], sizeof(pl_span))))
            return false;
        rs->n_scopes = 1;
    }
    for (size_t i = 0; i < d->n; i++) {
        const pl_span_row *r = &d->spans[i];
        pl_scope_spans *ss = &t->resources[which[i]].scopes[0];
        pl_span *sp = &ss->spans[ss->n_spans++];
        memcpy(sp->trace_id, r->trace_id, 16);
        sp->trace_id_len = 16;
        memcpy(sp->span_id, r->span_id, 8);
        sp->span_id_len = 8;
        if (r->has_parent) {
            memcpy(sp->parent_span_id, r->parent_span_id, 8);
            sp->parent_span_id_len = 8;
        }
        sp->name = pl_bytes_from_cstr(r->name);
        sp->kind = r->kind;
        sp->start_time_unix_nano = r->start_ns;
        sp->end_time_unix_nano = r->end_ns;
        sp->has_status = r->status_code != 0 || (r->status_message && *r->status_message);
        sp->status.code = r->status_code;
        sp->status.message = pl_bytes_from_cstr(r->status_message ? r->status_message : "");
        if (!parse_attrs(r->attributes_json, a, &sp->attrs) || !parse_events(r->events_json, a, sp))
            return false;
        /* linked samples: Grafana's "Profiles for this span" keys on this */
        if (r->profile_id && *r->profile_id &&
            !pl_attrs_put(a, &sp->attrs, PL_BYTES_LIT("pyroscope.profile.id"),
                          pl_value_string(pl_bytes_from_cstr(r->profile_id))))
            return false;
    }
    return true;
}

static void put_varint(pl_buf *b, uint64_t v)
{
    while (v >= 0x80) {
        pl_buf_append_byte(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    pl_buf_append_byte(b, (uint8_t)v);
}

/* Tempo's not-found answers: v1 404 (text), v2 200 with an empty
 * TraceByIDResponse (Grafana then says the trace is not found). */
static void trace_missing(pl_store_call *c, bool v2, bool proto)
{
    if (!v2) {
        pl_store_call_text(c, 404, "trace not found");
        return;
    }
    pl_buf b;
    pl_buf_init(&b);
    if (!proto)
        pl_buf_append_str(&b, "{}\n");
    pl_store_call_respond(c, 200, proto ? "application/protobuf" : "application/json", &b);
}

void pl_store_tempo_trace(pl_store_call *c, bool v2)
{
    bool proto = pl_store_call_wants_protobuf(c);
    uint8_t trace_id[16];
    if (parse_tempo_trace_id(c->rest, trace_id) < 0) {
        pl_store_call_text(c, 400, "invalid trace id: expected 1 to 32 hex digits");
        return;
    }
    pl_store *s = pl_store_call_store(c);
    if (!s)
        return;
    pl_err err = {{0}};
    pl_trace_detail d;
    pl_status st = pl_store_query_trace(s, trace_id, 0, &d, &err);
    if (st == PL_ERR_NOT_FOUND) {
        trace_missing(c, v2, proto);
        return;
    }
    if (pl_store_call_failed(c, st, &err))
        return;
    if (c->tenant && strcmp(d.summary.tenant ? d.summary.tenant : "", c->tenant) != 0) {
        pl_trace_detail_free(&d);
        trace_missing(c, v2, proto);
        return;
    }
    pl_batch *batch = pl_batch_new(PL_SIGNAL_TRACES);
    bool ok = batch && detail_to_traces(&d, batch); /* points into d: free d after */
    pl_buf body, out;
    pl_buf_init(&body);
    pl_buf_init(&out);
    if (ok && proto) {
        /* OTLP TracesData is wire-identical to tempopb.Trace (field 1:
         * resource spans); v2 wraps it as TraceByIDResponse.trace (1) */
        ok = pl_otlp_encode_traces(&batch->data.traces, &body);
        if (ok && v2) {
            pl_buf_append_byte(&out, 0x0a);
            put_varint(&out, body.len);
        }
        pl_buf_append(&out, body.data, body.len);
    } else if (ok) {
        pl_buf_append_str(&out, v2 ? "{\"trace\":" : "");
        ok = pl_otlp_json_encode_traces(&batch->data.traces, &out);
        pl_buf_append_str(&out, v2 ? "}\n" : "\n");
    }
    pl_batch_free(batch);
    pl_trace_detail_free(&d);
    pl_buf_free(&body);
    if (!ok)
        out.failed = true;
    pl_store_call_respond(c, 200, proto ? "application/protobuf" : "application/json", &out);
}

/* ---- search --------------------------------------------------------------- */

/* Unix seconds (Grafana's start/end); false after answering 400. */
static bool seconds_param(pl_store_call *c, const char *key, uint64_t *out_ns)
{
    const char *v = pl_store_param(c->params, key);
    if (!v)
        return true;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || *v == '-' || errno == ERANGE || x > 9000000000ull) {
        char msg[120];
        snprintf(msg, sizeof(msg), "invalid %s: expected unix seconds", key);
        pl_store_call_text(c, 400, msg);
        return false;
    }
    *out_ns = (uint64_t)x * 1000000000ull;
    return true;
}

/* A positive count with a default; Tempo's errors are plain text. */
static bool count_param(pl_store_call *c, const char *key, uint64_t max, uint64_t *out)
{
    const char *v = pl_store_param(c->params, key);
    if (!v)
        return true;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || *v == '-' || errno == ERANGE || x == 0) {
        char msg[120];
        snprintf(msg, sizeof(msg), "invalid %s: expected a positive number", key);
        pl_store_call_text(c, 400, msg);
        return false;
    }
    *out = x < max ? x : max;
    return true;
}

static void tempo_search(pl_store_call *c)
{
    uint64_t limit = 20, spss = 3, start = 0, end = 0;
    if (!count_param(c, "limit", 10000, &limit) || !count_param(c, "spss", 1000, &spss) ||
        !seconds_param(c, "start", &start) || !seconds_param(c, "end", &end))
        return;
    if (end && start > end) {
        pl_store_call_text(c, 400, "invalid start: after end");
        return;
    }
    if (end)
        end += 999999999ull; /* the whole last second */
    const char *q = pl_store_param(c->params, "q");
    if (!q)
        q = "{}";
    pl_tql *t = malloc(sizeof(*t));
    if (!t) {
        pl_store_call_text(c, 503, "out of memory");
        return;
    }
    if (pl_tql_parse(t, q, strlen(q)) < 0) {
        char msg[220];
        snprintf(msg, sizeof(msg), "invalid TraceQL query: %s", t->error);
        pl_tql_free(t);
        free(t);
        pl_store_call_text(c, 400, msg);
        return;
    }
    pl_store *s = pl_store_call_store(c);
    if (s) {
        pl_tempo_search opt = {start, end, (uint32_t)limit, (uint32_t)spss, c->tenant};
        pl_err err = {{0}};
        pl_buf b;
        pl_buf_init(&b);
        pl_status st = pl_store_tempo_search(s, t, &opt, &b, &err);
        if (st == PL_ERR_INVALID) {
            pl_buf_free(&b);
            pl_store_call_text(c, 400, err.msg);
        } else if (pl_store_call_failed(c, st, &err)) {
            pl_buf_free(&b);
        } else {
            pl_store_call_respond(c, 200, "application/json", &b);
        }
    }
    pl_tql_free(t);
    free(t);
}

/* A tag list (v2 scoped, or v1's names) under `limit`, as JSON. */
typedef pl_status (*tag_list_fn)(pl_store *s, const char *tenant, uint32_t limit, pl_buf *out,
                                 pl_err *err);

static void tag_list(pl_store_call *c, tag_list_fn list)
{
    uint64_t limit = 5000;
    if (!count_param(c, "limit", 100000, &limit))
        return;
    pl_store *s = pl_store_call_store(c);
    if (!s)
        return;
    pl_err err = {{0}};
    pl_buf b;
    pl_buf_init(&b);
    if (pl_store_call_failed(c, list(s, c->tenant, (uint32_t)limit, &b, &err), &err)) {
        pl_buf_free(&b);
        return;
    }
    pl_store_call_respond(c, 200, "application/json", &b);
}

static void tempo_tags(pl_store_call *c)
{
    tag_list(c, pl_store_tempo_tags);
}

/* /api/v2/search/tag/<tag>/values, or v1's /api/search/tag/<tag>/values
 * (unscoped names: "service.name" is ".service.name"). */
static void tag_values(pl_store_call *c, bool v1)
{
    size_t n = strlen(c->rest);
    if (n <= 7 || strcmp(c->rest + n - 7, "/values") != 0 || n - 7 > 256) {
        pl_store_call_text(c, 404,
                           v1 ? "expected /api/search/tag/<tag>/values"
                              : "expected /api/v2/search/tag/<tag>/values");
        return;
    }
    char tag[258];
    size_t at = 0;
    static const char *const intrinsic[] = {"name", "status", "kind", "rootName",
                                            "rootServiceName"};
    bool scoped = !v1;
    for (size_t i = 0; v1 && i < sizeof(intrinsic) / sizeof(intrinsic[0]); i++)
        scoped =
            scoped || (strlen(intrinsic[i]) == n - 7 && memcmp(intrinsic[i], c->rest, n - 7) == 0);
    if (!scoped)
        tag[at++] = '.';
    memcpy(tag + at, c->rest, n - 7);
    tag[at + n - 7] = 0;
    uint64_t limit = 5000;
    if (!count_param(c, "limit", 100000, &limit))
        return;
    pl_store *s = pl_store_call_store(c);
    if (!s)
        return;
    pl_err err = {{0}};
    pl_buf b;
    pl_buf_init(&b);
    pl_status st = pl_store_tempo_tag_values(s, tag, c->tenant, (uint32_t)limit, v1, &b, &err);
    if (st == PL_ERR_INVALID) {
        pl_buf_free(&b);
        pl_store_call_text(c, 400, err.msg);
        return;
    }
    if (pl_store_call_failed(c, st, &err)) {
        pl_buf_free(&b);
        return;
    }
    pl_store_call_respond(c, 200, "application/json", &b);
}

static void tempo_tag_values(pl_store_call *c)
{
    tag_values(c, false);
}

static void tempo_tag_values_v1(pl_store_call *c)
{
    tag_values(c, true);
}

static void tempo_tag_names_v1(pl_store_call *c)
{
    tag_list(c, pl_store_tempo_tag_names);
}

static void tempo_trace_v2(pl_store_call *c)
{
    pl_store_tempo_trace(c, true);
}

static const pl_store_route tempo_rows[] = {
    {"GET", "/api/echo", "", tempo_echo, "Tempo: the data source's test (body `echo`)"},
    {"GET", "/api/status/buildinfo", "", tempo_buildinfo, "Tempo: version as JSON"},
    {"GET", "/api/v2/traces/*", "start=&end=", tempo_trace_v2,
     "Tempo: a trace as `TraceByIDResponse` (protobuf with Accept: application/protobuf, else "
     "JSON); id of 1-32 hex digits"},
    {"GET", "/api/search", "q=&limit=&spss=&start=&end=", tempo_search,
     "Tempo: TraceQL search (one spanset; see docs/grafana.md)"},
    {"GET", "/api/v2/search/tags", "limit=", tempo_tags,
     "Tempo: attribute names by scope (recent spans)"},
    {"GET", "/api/v2/search/tag/*", "limit=", tempo_tag_values,
     "Tempo: `/api/v2/search/tag/<tag>/values`, the values of one tag (recent spans)"},
    {"GET", "/api/search/tags", "limit=", tempo_tag_names_v1,
     "Tempo v1: attribute names, unscoped (recent spans)"},
    {"GET", "/api/search/tag/*", "limit=", tempo_tag_values_v1,
     "Tempo v1: `/api/search/tag/<tag>/values`, values as strings (recent spans)"},
};

const pl_store_route_table pl_store_tempo_routes = {tempo_rows,
                                                    sizeof(tempo_rows) / sizeof(tempo_rows[0])};
