/*
 * sqlite_api.c: the read-only HTTP JSON query API (see sqlite_api.h) and
 * the JSON renderers shared with the command line.
 *
 * The store is opened read-only on the first request and kept; if it is
 * missing or broken the request gets a 503 and the next one tries again,
 * so the API works as soon as the exporter has created the file.
 */
#include "store/sqlite_api.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/component.h"
#include "core/log.h"
#include "net/http_server.h"
#include "store/querier.h"
#include "store/web_assets.h"

/* ---- parameters --------------------------------------------------------- */

int pl_query_parse_since(const char *text, uint64_t now_ns, uint64_t *out_ns)
{
    if (!text || !*text)
        return -1;
    if (strcmp(text, "0") == 0 || strcmp(text, "all") == 0) {
        *out_ns = 0;
        return 0;
    }
    int64_t d;
    size_t len = strlen(text);
    if (len > 1 && text[len - 1] == 'd') { /* days, for convenience */
        char tmp[32];
        if (len >= sizeof(tmp))
            return -1;
        memcpy(tmp, text, len - 1);
        tmp[len - 1] = 0;
        char *end;
        double days = strtod(tmp, &end);
        if (*end || days < 0 || days > 100000)
            return -1;
        d = (int64_t)(days * 86400e9);
    } else if (pl_parse_duration(text, &d) < 0 || d < 0) {
        return -1;
    }
    *out_ns = (uint64_t)d >= now_ns ? 0 : now_ns - (uint64_t)d;
    return 0;
}

int pl_query_parse_span_id(const char *text, uint8_t out[8])
{
    if (!text || strlen(text) != 16 || pl_hex_decode(text, 16, out, 8) < 0)
        return -1;
    for (int i = 0; i < 8; i++)
        if (out[i])
            return 0;
    return -1;
}

int pl_query_parse_trace_id(const char *text, uint8_t out[16])
{
    if (!text || strlen(text) != 32 || pl_hex_decode(text, 32, out, 16) < 0)
        return -1;
    for (int i = 0; i < 16; i++)
        if (out[i])
            return 0;
    return -1;
}

/* ---- JSON --------------------------------------------------------------- */

static void json_str(pl_buf *b, const char *s)
{
    pl_buf_json_string(b, s ? s : "", s ? strlen(s) : 0);
}

static void json_hex(pl_buf *b, const uint8_t *bytes, size_t n)
{
    char hex[33];
    pl_hex_encode(bytes, n, hex);
    pl_buf_printf(b, "\"%s\"", hex);
}

/* ,"time":{"kind":"cpu","value":N,"unit":"nanoseconds"} (null: no samples) */
static void json_time(pl_buf *b, pl_time_kind kind, int64_t value)
{
    if (kind == PL_TIME_NONE) {
        pl_buf_append_str(b, ",\"time\":null");
        return;
    }
    pl_buf_printf(b, ",\"time\":{\"kind\":\"%s\",\"value\":%" PRId64 ",\"unit\":\"%s\"}",
                  pl_time_kind_name(kind), value, pl_time_kind_unit(kind));
}

static void json_summary(pl_buf *b, const pl_trace_summary *t)
{
    pl_buf_append_str(b, "{\"trace_id\":");
    json_hex(b, t->trace_id, 16);
    pl_buf_append_str(b, ",\"root_name\":");
    json_str(b, t->root_name);
    pl_buf_append_str(b, ",\"root_service\":");
    json_str(b, t->root_service);
    pl_buf_append_str(b, ",\"tenant\":");
    json_str(b, t->tenant ? t->tenant : "");
    pl_buf_printf(b,
                  ",\"has_root\":%s,\"start_unix_nano\":\"%" PRIu64 "\",\"duration_ns\":%" PRIu64
                  ",\"cpu_ns\":",
                  t->has_root ? "true" : "false", t->start_ns, t->duration_ns);
    if (t->cpu_ns < 0)
        pl_buf_append_str(b, "null");
    else
        pl_buf_printf(b, "%" PRId64, t->cpu_ns);
    json_time(b, t->time_kind, t->time);
    pl_buf_printf(b, ",\"span_count\":%u,\"error_count\":%u}", t->span_count, t->error_count);
}

void pl_json_traces(const pl_trace_list *list, pl_buf *out)
{
    pl_buf_append_str(out, "{\"traces\":[");
    for (size_t i = 0; i < list->n; i++) {
        if (i)
            pl_buf_append_byte(out, ',');
        json_summary(out, &list->items[i]);
    }
    pl_buf_append_str(out, "]}");
}

static void json_functions(pl_buf *b, const pl_function_stat *fns, size_t n)
{
    pl_buf_append_byte(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i)
            pl_buf_append_byte(b, ',');
        pl_buf_append_str(b, "{\"name\":");
        json_str(b, fns[i].name);
        pl_buf_append_str(b, ",\"file\":");
        json_str(b, fns[i].file);
        pl_buf_printf(b, ",\"self\":%" PRId64 ",\"total\":%" PRId64 "}", fns[i].self, fns[i].total);
    }
    pl_buf_append_byte(b, ']');
}

void pl_json_trace(const pl_trace_detail *d, pl_buf *out)
{
    pl_buf_append_str(out, "{\"trace\":");
    json_summary(out, &d->summary);
    pl_buf_append_str(out, ",\"spans\":[");
    for (size_t i = 0; i < d->n; i++) {
        const pl_span_row *s = &d->spans[i];
        if (i)
            pl_buf_append_byte(out, ',');
        pl_buf_append_str(out, "{\"span_id\":");
        json_hex(out, s->span_id, 8);
        pl_buf_append_str(out, ",\"parent_span_id\":");
        if (s->has_parent)
            json_hex(out, s->parent_span_id, 8);
        else
            pl_buf_append_str(out, "null");
        pl_buf_printf(out, ",\"depth\":%d,\"name\":", s->depth);
        json_str(out, s->name);
        pl_buf_append_str(out, ",\"service\":");
        json_str(out, s->service);
        pl_buf_printf(out,
                      ",\"kind\":%d,\"start_unix_nano\":\"%" PRIu64
                      "\",\"end_unix_nano\":\"%" PRIu64 "\",\"duration_ns\":%" PRIu64
                      ",\"status_code\":%d,\"status_message\":",
                      s->kind, s->start_ns, s->end_ns, s->end_ns - s->start_ns, s->status_code);
        json_str(out, s->status_message);
        /* stored as JSON by the writer: embed as is */
        pl_buf_append_str(out, ",\"attributes\":");
        pl_buf_append_str(out,
                          s->attributes_json && *s->attributes_json ? s->attributes_json : "{}");
        pl_buf_append_str(out, ",\"resource\":");
        pl_buf_append_str(out, s->resource_json && *s->resource_json ? s->resource_json : "{}");
        pl_buf_append_str(out, ",\"events\":");
        pl_buf_append_str(out, s->events_json && *s->events_json ? s->events_json : "[]");
        pl_buf_append_str(out, ",\"profile_id\":");
        json_str(out, s->profile_id);
        pl_buf_append_str(out, ",\"cpu_ns\":");
        if (s->cpu_ns < 0)
            pl_buf_append_str(out, "null");
        else
            pl_buf_printf(out, "%" PRId64, s->cpu_ns);
        json_time(out, s->time_kind, s->time);
        pl_buf_printf(out, ",\"samples\":%" PRId64 ",\"top_functions\":", s->samples);
        json_functions(out, s->top, s->n_top);
        pl_buf_append_byte(out, '}');
    }
    pl_buf_append_str(out, "]}");
}

void pl_json_profile(const pl_profile_result *p, size_t top_limit, bool with_tree, pl_buf *out)
{
    pl_buf_append_str(out, "{\"type\":");
    json_str(out, p->type);
    pl_buf_append_str(out, ",\"unit\":");
    json_str(out, p->unit);
    pl_buf_printf(out, ",\"total\":%" PRId64 ",\"stacks\":%zu", p->total, p->n_stacks);
    pl_buf_append_str(out, ",\"types\":[");
    for (size_t i = 0; i < p->n_types; i++) {
        if (i)
            pl_buf_append_byte(out, ',');
        json_str(out, p->types[i]);
    }
    pl_buf_append_byte(out, ']');
    if (with_tree) {
        pl_buf_append_str(out, ",\"flamegraph\":");
        pl_buf tree;
        pl_buf_init(&tree);
        pl_flamegraph_json_tree(p, &tree);
        if (pl_buf_ok(&tree) && tree.len)
            pl_buf_append(out, tree.data, tree.len);
        else
            pl_buf_append_str(out, "null");
        pl_buf_free(&tree);
    } else {
        size_t n = top_limit && top_limit < p->n_functions ? top_limit : p->n_functions;
        pl_buf_append_str(out, ",\"functions\":");
        json_functions(out, p->functions, n);
    }
    pl_buf_append_byte(out, '}');
}

void pl_json_services(char **names, size_t n, pl_buf *out)
{
    pl_buf_append_str(out, "{\"services\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            pl_buf_append_byte(out, ',');
        json_str(out, names[i]);
    }
    pl_buf_append_str(out, "]}");
}

void pl_json_links(const pl_link_stats *ls, pl_buf *out)
{
    pl_buf_printf(out, "{\"traces\":%" PRIu64 ",\"services\":[", ls->traces);
    for (size_t i = 0; i < ls->n; i++) {
        pl_buf_append_str(out, i ? ",{\"service\":" : "{\"service\":");
        json_str(out, ls->items[i].service);
        pl_buf_printf(out, ",\"spans\":%" PRIu64 ",\"linked\":%" PRIu64 "}", ls->items[i].spans,
                      ls->items[i].linked);
    }
    pl_buf_append_str(out, "]}");
}

void pl_folded_text(const pl_profile_result *p, pl_buf *out)
{
    for (size_t i = 0; i < p->n_stacks; i++)
        pl_buf_printf(out, "%s %" PRId64 "\n", p->stacks[i].frames, p->stacks[i].value);
}

/* ---- HTTP --------------------------------------------------------------- */

/* Rates for the status strip: the live counters sampled once a second,
 * kept for RATE_SLOTS seconds. */
#define RATE_SLOTS 11

struct pl_sqlite_api {
    pl_http_server *server;
    char *db_path;
    pl_store *store;
    const pl_store_live *live; /* the writer's counters, or NULL */
    /* the API's own thread and loop: queries never run on the pipeline's */
    uv_thread_t thread;
    bool thread_started;
    uv_loop_t loop;
    bool loop_open;
    uv_async_t stop;
    uv_timer_t tick;
    uv_sem_t started;
    char *endpoint;
    const struct pl_tls_server_config *tls; /* read by the thread while starting */
    pl_err start_err;
    bool start_ok;
    uint64_t rate_t[RATE_SLOTS], rate_spans[RATE_SLOTS], rate_samples[RATE_SLOTS];
    unsigned rate_n, rate_at;
};

#define MAX_PARAMS 12

typedef struct params {
    char *buf;
    const char *keys[MAX_PARAMS];
    const char *values[MAX_PARAMS];
    int n;
} params;

static void url_decode(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (*r == '+') {
            *w++ = ' ';
        } else if (*r == '%' && pl_hex_digit(r[1]) >= 0 && pl_hex_digit(r[2]) >= 0) {
            *w++ = (char)(pl_hex_digit(r[1]) * 16 + pl_hex_digit(r[2]));
            r += 2;
        } else {
            *w++ = *r;
        }
    }
    *w = 0;
}

static void params_parse(params *p, const char *query)
{
    memset(p, 0, sizeof(*p));
    p->buf = strdup(query ? query : "");
    if (!p->buf)
        return;
    char *save = NULL;
    for (char *tok = strtok_r(p->buf, "&", &save); tok && p->n < MAX_PARAMS;
         tok = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(tok, '=');
        if (eq)
            *eq = 0;
        url_decode(tok);
        if (eq)
            url_decode(eq + 1);
        p->keys[p->n] = tok;
        p->values[p->n++] = eq ? eq + 1 : "";
    }
}

static const char *param(const params *p, const char *key)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->keys[i], key) == 0)
            return *p->values[i] ? p->values[i] : NULL;
    return NULL;
}

static void respond(pl_http_response *res, int status, const char *type, const pl_buf *body)
{
    pl_http_header h[2] = {
        {"Content-Type", 12, type, strlen(type)},
        {"Cache-Control", 13, "no-store", 8},
    };
    pl_http_respond(res, status, h, 2, body->data ? (const char *)body->data : "", body->len);
}

static void respond_error(pl_http_response *res, int status, const char *msg)
{
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_append_str(&b, "{\"error\":");
    json_str(&b, msg);
    pl_buf_append_str(&b, "}\n");
    if (pl_buf_ok(&b))
        respond(res, status, "application/json", &b);
    else
        pl_http_respond(res, 503, NULL, 0, "out of memory\n", 14);
    pl_buf_free(&b);
}

static int http_status_for(pl_status st)
{
    switch (st) {
    case PL_ERR_NOT_FOUND:
        return 404;
    case PL_ERR_INVALID:
        return 400;
    default:
        return 503;
    }
}

static pl_store *api_store(pl_sqlite_api *api, pl_err *err)
{
    if (api->store)
        return api->store;
    pl_store_options opt = {.read_only = true, .busy_timeout_ms = 1000};
    if (pl_store_open(api->db_path, &opt, &api->store, NULL, err) != PL_OK)
        return NULL;
    return api->store;
}

/* After a failed query, drop a connection that may be broken. */
static void api_store_check(pl_sqlite_api *api)
{
    if (api->store && pl_store_last_error(api->store) == PL_STORE_ERR_CORRUPT) {
        pl_store_close(api->store);
        api->store = NULL;
    }
}

/* Answers a failed query (and drops a broken connection); false when st is
 * PL_OK. */
static bool query_failed(pl_sqlite_api *api, pl_http_response *res, pl_status st, const pl_err *err)
{
    if (st == PL_OK)
        return false;
    respond_error(res, http_status_for(st), err->msg);
    api_store_check(api);
    return true;
}

/* Answers 200 with the body built in b, or 503 when building it ran out of
 * memory; frees b. */
static void respond_buf(pl_http_response *res, const char *type, pl_buf *b)
{
    if (pl_buf_ok(b))
        respond(res, 200, type, b);
    else
        respond_error(res, 503, "out of memory");
    pl_buf_free(b);
}

static bool since_param(const params *p, pl_http_response *res, const char *key, uint64_t now,
                        uint64_t dflt, uint64_t *out)
{
    const char *v = param(p, key);
    if (!v) {
        *out = dflt;
        return true;
    }
    if (pl_query_parse_since(v, now, out) < 0) {
        char msg[160];
        snprintf(msg, sizeof(msg), "%s: not a duration (e.g. 15m, 2h, 0 for all): %.60s", key, v);
        respond_error(res, 400, msg);
        return false;
    }
    return true;
}

static bool uint_param(const params *p, pl_http_response *res, const char *key, uint64_t max,
                       uint64_t *out)
{
    const char *v = param(p, key);
    if (!v)
        return true;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || x == 0 || x > max || *v == '-') {
        char msg[160];
        snprintf(msg, sizeof(msg), "%s: expected a number from 1 to %" PRIu64, key, max);
        respond_error(res, 400, msg);
        return false;
    }
    *out = x;
    return true;
}

static void handle_traces(pl_sqlite_api *api, const params *p, pl_http_response *res)
{
    uint64_t now = pl_time_now_ns();
    pl_trace_query q = {0};
    uint64_t limit = 20;
    q.service = param(p, "service");
    if (!since_param(p, res, "since", now, now - PL_QUERY_DEFAULT_SINCE_NS, &q.since_ns) ||
        !uint_param(p, res, "limit", 1000, &limit))
        return;
    const char *md = param(p, "min_duration");
    if (md) {
        int64_t d;
        if (pl_parse_duration(md, &d) < 0 || d < 0) {
            respond_error(res, 400, "min_duration: not a duration (e.g. 100ms)");
            return;
        }
        q.min_duration_ns = (uint64_t)d;
    }
    q.limit = (uint32_t)limit;
    q.root_name = param(p, "root");
    q.tenant = param(p, "tenant");
    const char *errs = param(p, "errors");
    q.errors_only = errs && strcmp(errs, "0") != 0 && strcmp(errs, "false") != 0;
    if (param(p, "until") && !since_param(p, res, "until", now, 0, &q.until_ns))
        return;
    const char *mc = param(p, "min_cpu");
    if (mc) {
        int64_t d;
        if (pl_parse_duration(mc, &d) < 0 || d < 0) {
            respond_error(res, 400, "min_cpu: not a duration (e.g. 10ms)");
            return;
        }
        q.min_time = d;
    }
    const char *sort = param(p, "sort");
    if (sort && strcmp(sort, "duration") != 0 && strcmp(sort, "cpu") != 0 &&
        strcmp(sort, "time") != 0) {
        respond_error(res, 400, "sort: duration or cpu");
        return;
    }
    q.by_time = sort && strcmp(sort, "duration") != 0;
    pl_err err = {{0}};
    pl_store *s = api_store(api, &err);
    pl_trace_list list;
    pl_status st = s ? pl_store_query_traces(s, &q, &list, &err) : PL_ERR_INTERNAL;
    if (query_failed(api, res, st, &err))
        return;
    pl_buf b;
    pl_buf_init(&b);
    pl_json_traces(&list, &b);
    pl_buf_append_byte(&b, '\n');
    pl_trace_list_free(&list);
    respond_buf(res, "application/json", &b);
}

static void handle_trace(pl_sqlite_api *api, const char *id, const params *p, pl_http_response *res)
{
    uint8_t trace_id[16];
    if (pl_query_parse_trace_id(id, trace_id) < 0) {
        respond_error(res, 400, "trace id: expected 32 hex characters");
        return;
    }
    uint64_t top = 5;
    if (!uint_param(p, res, "top", 100, &top))
        return;
    pl_err err = {{0}};
    pl_store *s = api_store(api, &err);
    pl_trace_detail d;
    pl_status st = s ? pl_store_query_trace(s, trace_id, (size_t)top, &d, &err) : PL_ERR_INTERNAL;
    if (query_failed(api, res, st, &err))
        return;
    pl_buf b;
    pl_buf_init(&b);
    pl_json_trace(&d, &b);
    pl_buf_append_byte(&b, '\n');
    pl_trace_detail_free(&d);
    respond_buf(res, "application/json", &b);
}

/* Fills a profile query from span= | trace= | service= (+ since/until). */
static bool profile_params(const params *p, pl_http_response *res, bool service_optional,
                           pl_profile_query *q)
{
    memset(q, 0, sizeof(*q));
    const char *span = param(p, "span"), *trace = param(p, "trace"), *service = param(p, "service");
    int n = !!span + !!trace + !!service;
    if (n > 1 || (n == 0 && !service_optional)) {
        respond_error(res, 400, "give exactly one of span=, trace= or service=");
        return false;
    }
    q->type = param(p, "type");
    const char *desc = param(p, "descendants");
    q->descendants = desc && strcmp(desc, "0") != 0 && strcmp(desc, "false") != 0;
    if (span) {
        q->scope = PL_PROFILE_SPAN;
        if (pl_query_parse_span_id(span, q->span_id) < 0) {
            respond_error(res, 400, "span: expected 16 hex characters");
            return false;
        }
        return true;
    }
    if (trace) {
        q->scope = PL_PROFILE_TRACE;
        if (pl_query_parse_trace_id(trace, q->trace_id) < 0) {
            respond_error(res, 400, "trace: expected 32 hex characters");
            return false;
        }
        return true;
    }
    uint64_t now = pl_time_now_ns();
    q->scope = PL_PROFILE_SERVICE;
    q->service = service;
    return since_param(p, res, "since", now, now - PL_QUERY_DEFAULT_SINCE_NS, &q->since_ns) &&
           since_param(p, res, "until", now, 0, &q->until_ns);
}

static void handle_profile(pl_sqlite_api *api, const params *p, pl_http_response *res,
                           bool top_only)
{
    pl_profile_query q;
    if (!profile_params(p, res, top_only, &q))
        return;
    q.time_only = top_only; /* top: CPU, else wall, else counts; heap only when asked */
    uint64_t limit = 20;
    if (!uint_param(p, res, "limit", 10000, &limit))
        return;
    const char *format = param(p, "format");
    if (!format)
        format = "json";
    if (!top_only && strcmp(format, "folded") && strcmp(format, "json") && strcmp(format, "svg") &&
        strcmp(format, "pprof") && strcmp(format, "speedscope")) {
        respond_error(res, 400, "format: folded, json, svg, pprof or speedscope");
        return;
    }
    pl_err err = {{0}};
    pl_store *s = api_store(api, &err);
    pl_profile_result r;
    pl_status st = s ? pl_store_query_profile(s, &q, &r, &err) : PL_ERR_INTERNAL;
    if (query_failed(api, res, st, &err))
        return;
    pl_buf b;
    pl_buf_init(&b);
    const char *ctype = "application/json";
    if (top_only) {
        pl_json_profile(&r, (size_t)limit, false, &b);
        pl_buf_append_byte(&b, '\n');
    } else if (strcmp(format, "folded") == 0) {
        pl_folded_text(&r, &b);
        ctype = "text/plain; charset=utf-8";
    } else if (strcmp(format, "svg") == 0) {
        pl_flamegraph_svg(&r, "proflink flame graph", &b);
        ctype = "image/svg+xml";
    } else if (strcmp(format, "pprof") == 0) {
        if (pl_flamegraph_pprof(&r, pl_time_now_ns(), &b) < 0)
            b.failed = true;
        ctype = "application/octet-stream";
    } else if (strcmp(format, "speedscope") == 0) {
        if (pl_flamegraph_speedscope(&r, "proflink", &b) < 0)
            b.failed = true;
    } else {
        pl_json_profile(&r, 0, true, &b);
        pl_buf_append_byte(&b, '\n');
    }
    pl_profile_result_free(&r);
    respond_buf(res, ctype, &b);
}

static void handle_services(pl_sqlite_api *api, pl_http_response *res)
{
    pl_err err = {{0}};
    pl_store *s = api_store(api, &err);
    char **names = NULL;
    size_t n = 0;
    pl_status st = s ? pl_store_query_services(s, &names, &n, &err) : PL_ERR_INTERNAL;
    if (query_failed(api, res, st, &err))
        return;
    pl_buf b;
    pl_buf_init(&b);
    pl_json_services(names, n, &b);
    pl_buf_append_byte(&b, '\n');
    pl_store_free_names(names, n);
    respond(res, pl_buf_ok(&b) ? 200 : 503, "application/json", &b);
    pl_buf_free(&b);
}

static void handle_links(pl_sqlite_api *api, const params *p, pl_http_response *res)
{
    uint64_t now = pl_time_now_ns(), since;
    if (!since_param(p, res, "since", now, now - PL_QUERY_DEFAULT_SINCE_NS, &since))
        return;
    pl_err err = {{0}};
    pl_store *s = api_store(api, &err);
    pl_link_stats ls;
    pl_status st = s ? pl_store_query_links(s, since, &ls, &err) : PL_ERR_INTERNAL;
    if (query_failed(api, res, st, &err))
        return;
    pl_buf b;
    pl_buf_init(&b);
    pl_json_links(&ls, &b);
    pl_buf_append_byte(&b, '\n');
    pl_link_stats_free(&ls);
    respond_buf(res, "application/json", &b);
}

/* Spans and samples stored per second over the last RATE_SLOTS - 1 seconds. */
static void rates(const pl_sqlite_api *api, double *spans, double *samples)
{
    *spans = *samples = 0;
    if (api->rate_n < 2)
        return;
    unsigned newest = (api->rate_at + RATE_SLOTS - 1) % RATE_SLOTS;
    unsigned oldest = api->rate_n < RATE_SLOTS ? 0 : api->rate_at;
    uint64_t dt = api->rate_t[newest] - api->rate_t[oldest];
    if (!dt)
        return;
    *spans = (double)(api->rate_spans[newest] - api->rate_spans[oldest]) * 1e9 / (double)dt;
    *samples = (double)(api->rate_samples[newest] - api->rate_samples[oldest]) * 1e9 / (double)dt;
}

static void handle_status(pl_sqlite_api *api, pl_http_response *res)
{
    pl_err err = {{0}};
    pl_store *s = api_store(api, &err);
    if (!s) {
        respond_error(res, 503, err.msg);
        return;
    }
    uint64_t now = pl_time_now_ns();
    pl_link_stats ls;
    pl_status st = pl_store_query_links(s, now - 900ull * 1000000000ull, &ls, &err);
    if (query_failed(api, res, st, &err))
        return;
    uint64_t spans = 0, linked = 0;
    for (size_t i = 0; i < ls.n; i++) {
        spans += ls.items[i].spans;
        linked += ls.items[i].linked;
    }
    pl_link_stats_free(&ls);
    double sps, smps;
    rates(api, &sps, &smps);
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_printf(&b,
                  "{\"spans_per_second\":%.1f,\"samples_per_second\":%.1f,\"spans_stored\":%" PRIu64
                  ",\"samples_stored\":%" PRIu64 ",\"store_bytes\":%" PRIu64
                  ",\"link\":{\"window\":\"15m\",\"spans\":%" PRIu64 ",\"linked\":%" PRIu64 "}}\n",
                  sps, smps, api->live ? __atomic_load_n(&api->live->spans, __ATOMIC_RELAXED) : 0,
                  api->live ? __atomic_load_n(&api->live->samples, __ATOMIC_RELAXED) : 0,
                  pl_store_size(s), spans, linked);
    respond_buf(res, "application/json", &b);
}

/* The web view's files, compiled into the binary (web_assets.c). */
static bool serve_asset(const char *path, pl_http_response *res)
{
    const pl_web_asset *a = pl_web_asset_find(strcmp(path, "/") == 0 ? "/index.html" : path);
    if (!a)
        return false;
    pl_http_header h[3] = {
        {"Content-Type", 12, a->content_type, strlen(a->content_type)},
        {"Cache-Control", 13, "no-cache", 8},
        /* everything is served from here: no other origin, no inline code */
        {"Content-Security-Policy", 23,
         "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'",
         strlen("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'")},
    };
    pl_http_respond(res, 200, h, 3, a->data, a->len);
    return true;
}

static void api_handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    pl_sqlite_api *api = arg;
    if (pl_store_querier_owns(req->path)) { /* Grafana's Pyroscope data source */
        pl_err err = {{0}};
        pl_store_querier_handle(api_store(api, &err), &err, req, res);
        api_store_check(api);
        return;
    }
    if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
        pl_http_header allow = {"Allow", 5, "GET", 3};
        pl_http_respond(res, 405, &allow, 1, "{\"error\":\"method not allowed\"}\n", 31);
        return;
    }
    params p;
    params_parse(&p, req->query);
    if (!p.buf) {
        respond_error(res, 503, "out of memory");
        return;
    }
    const char *path = req->path;
    if (strcmp(path, "/api/traces") == 0 || strcmp(path, "/api/traces/") == 0)
        handle_traces(api, &p, res);
    else if (strncmp(path, "/api/traces/", 12) == 0)
        handle_trace(api, path + 12, &p, res);
    else if (strcmp(path, "/api/flamegraph") == 0)
        handle_profile(api, &p, res, false);
    else if (strcmp(path, "/api/top") == 0)
        handle_profile(api, &p, res, true);
    else if (strcmp(path, "/api/services") == 0)
        handle_services(api, res);
    else if (strcmp(path, "/api/links") == 0)
        handle_links(api, &p, res);
    else if (strcmp(path, "/api/status") == 0)
        handle_status(api, res);
    else if (strncmp(path, "/api/", 5) != 0 && serve_asset(path, res))
        ;
    else
        respond_error(res, 404,
                      "unknown path; see /, /api/traces, /api/traces/{id}, /api/flamegraph, "
                      "/api/top, /api/services, /api/links, /api/status");
    free(p.buf);
}

pl_sqlite_api *pl_sqlite_api_new(const char *db_path)
{
    pl_sqlite_api *api = calloc(1, sizeof(*api));
    if (!api || !(api->db_path = strdup(db_path))) {
        free(api);
        return NULL;
    }
    return api;
}

void pl_sqlite_api_handle(pl_sqlite_api *api, pl_http_request *req, pl_http_response *res)
{
    api_handler(api, req, res);
}

void pl_sqlite_api_server_options(pl_http_server_options *opt)
{
    memset(opt, 0, sizeof(*opt));
    opt->max_body_size = 64 * 1024; /* GET only: bodies are not read */
    opt->max_connections = 64;
    opt->http1 = true;
    opt->name = "sqlite/api";
}

static void on_tick(uv_timer_t *t)
{
    pl_sqlite_api *api = t->data;
    unsigned i = api->rate_at;
    api->rate_t[i] = pl_time_now_ns();
    api->rate_spans[i] = api->live ? __atomic_load_n(&api->live->spans, __ATOMIC_RELAXED) : 0;
    api->rate_samples[i] = api->live ? __atomic_load_n(&api->live->samples, __ATOMIC_RELAXED) : 0;
    api->rate_at = (i + 1) % RATE_SLOTS;
    if (api->rate_n < RATE_SLOTS)
        api->rate_n++;
}

static void on_stop(uv_async_t *a)
{
    pl_sqlite_api *api = a->data;
    if (api->server)
        pl_http_server_close(api->server);
    api->server = NULL;
    uv_close((uv_handle_t *)&api->stop, NULL);
    uv_close((uv_handle_t *)&api->tick, NULL);
}

/* The API thread: its own loop, so a slow query (a large flame graph)
 * delays only other API requests, never ingestion on the pipeline's loop. */
static void api_thread(void *arg)
{
    pl_sqlite_api *api = arg;
    pl_http_server_options opt;
    pl_sqlite_api_server_options(&opt);
    opt.tls = api->tls;
    api->server =
        pl_http_server_start(&api->loop, api->endpoint, &opt, api_handler, api, &api->start_err);
    api->start_ok = api->server != NULL;
    if (api->start_ok) {
        uv_async_init(&api->loop, &api->stop, on_stop);
        api->stop.data = api;
        uv_timer_init(&api->loop, &api->tick);
        api->tick.data = api;
        uv_timer_start(&api->tick, on_tick, 0, 1000);
    }
    uv_sem_post(&api->started);
    if (!api->start_ok) {
        uv_run(&api->loop, UV_RUN_DEFAULT); /* let a failed listener close */
        return;
    }
    uv_run(&api->loop, UV_RUN_DEFAULT);
    pl_store_close(api->store); /* opened on this thread: closed here */
    api->store = NULL;
}

pl_sqlite_api *pl_sqlite_api_start(const char *endpoint, const char *db_path,
                                   const pl_store_live *live, pl_err *err)
{
    return pl_sqlite_api_start_tls(endpoint, db_path, live, NULL, err);
}

pl_sqlite_api *pl_sqlite_api_start_tls(const char *endpoint, const char *db_path,
                                       const pl_store_live *live,
                                       const struct pl_tls_server_config *tls, pl_err *err)
{
    pl_sqlite_api *api = pl_sqlite_api_new(db_path);
    if (!api || !(api->endpoint = strdup(endpoint))) {
        if (api)
            pl_sqlite_api_close(api);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    api->live = live;
    api->tls = tls;
    if (uv_loop_init(&api->loop) != 0 || uv_sem_init(&api->started, 0) != 0) {
        pl_errf(err, PL_ERR_INTERNAL, "query API: cannot create its event loop");
        pl_sqlite_api_close(api);
        return NULL;
    }
    api->loop_open = true;
    if (uv_thread_create(&api->thread, api_thread, api) != 0) {
        uv_sem_destroy(&api->started);
        pl_errf(err, PL_ERR_INTERNAL, "query API: cannot start its thread");
        pl_sqlite_api_close(api);
        return NULL;
    }
    api->thread_started = true;
    uv_sem_wait(&api->started);
    uv_sem_destroy(&api->started);
    if (!api->start_ok) {
        *err = api->start_err;
        pl_sqlite_api_close(api);
        return NULL;
    }
    return api;
}

int pl_sqlite_api_port(const pl_sqlite_api *api)
{
    return pl_http_server_port(api->server);
}

void pl_sqlite_api_close(pl_sqlite_api *api)
{
    if (!api)
        return;
    if (api->thread_started) {
        if (api->start_ok)
            uv_async_send(&api->stop);
        uv_thread_join(&api->thread);
    } else if (api->server) {
        pl_http_server_close(api->server);
    }
    if (api->loop_open) {
        uv_run(&api->loop, UV_RUN_DEFAULT);
        uv_loop_close(&api->loop);
    }
    pl_store_close(api->store);
    free(api->endpoint);
    free(api->db_path);
    free(api);
}
