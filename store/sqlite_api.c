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
#include <strings.h>

#include "core/component.h"
#include "core/log.h"
#include "extensions/auth.h"
#include "net/http_server.h"
#include "store/querier.h"
#include "store/store_routes.h"
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
    const pl_listener_security *sec;        /* TLS and authenticator, or NULL */
    pl_err start_err;
    bool start_ok;
    uint64_t rate_t[RATE_SLOTS], rate_spans[RATE_SLOTS], rate_samples[RATE_SLOTS];
    unsigned rate_n, rate_at;
};

/* ---- parameters and answers (store_routes.h) ----------------------------- */

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

void pl_store_params_parse(pl_store_params *p, const char *query)
{
    memset(p, 0, sizeof(*p));
    p->buf = strdup(query ? query : "");
    if (!p->buf)
        return;
    char *save = NULL;
    for (char *tok = strtok_r(p->buf, "&", &save); tok && p->n < PL_STORE_MAX_PARAMS;
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

void pl_store_params_free(pl_store_params *p)
{
    free(p->buf);
    p->buf = NULL;
}

const char *pl_store_param(const pl_store_params *p, const char *key)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->keys[i], key) == 0)
            return *p->values[i] ? p->values[i] : NULL;
    return NULL;
}

static const char *param(const pl_store_call *c, const char *key)
{
    return pl_store_param(c->params, key);
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

void pl_store_call_error(pl_store_call *c, int status, const char *msg)
{
    respond_error(c->res, status, msg);
    c->answered = true;
}

void pl_store_call_text(pl_store_call *c, int status, const char *msg)
{
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_append_str(&b, msg);
    pl_buf_append_byte(&b, '\n');
    pl_store_call_respond(c, status, "text/plain; charset=utf-8", &b);
}

void pl_store_call_respond(pl_store_call *c, int status, const char *type, pl_buf *b)
{
    if (pl_buf_ok(b))
        respond(c->res, status, type, b);
    else
        respond_error(c->res, 503, "out of memory");
    pl_buf_free(b);
    c->answered = true;
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

pl_store *pl_store_call_store(pl_store_call *c)
{
    pl_sqlite_api *api = c->api;
    if (api->store)
        return api->store;
    pl_store_options opt = {.read_only = true, .busy_timeout_ms = 1000};
    pl_err err = {{0}};
    if (pl_store_open(api->db_path, &opt, &api->store, NULL, &err) != PL_OK) {
        pl_store_call_error(c, 503, err.msg);
        return NULL;
    }
    return api->store;
}

bool pl_store_call_failed(pl_store_call *c, pl_status st, const pl_err *err)
{
    if (st == PL_OK)
        return false;
    pl_store_call_error(c, http_status_for(st), err->msg);
    /* drop a connection that may be broken: the next request reopens */
    pl_sqlite_api *api = c->api;
    if (api->store && pl_store_last_error(api->store) == PL_STORE_ERR_CORRUPT) {
        pl_store_close(api->store);
        api->store = NULL;
    }
    return true;
}

bool pl_store_call_since(pl_store_call *c, const char *key, uint64_t now, uint64_t dflt,
                         uint64_t *out)
{
    const char *v = param(c, key);
    if (!v) {
        *out = dflt;
        return true;
    }
    if (pl_query_parse_since(v, now, out) < 0) {
        char msg[160];
        snprintf(msg, sizeof(msg), "%s: not a duration (e.g. 15m, 2h, 0 for all): %.60s", key, v);
        pl_store_call_error(c, 400, msg);
        return false;
    }
    return true;
}

bool pl_store_call_uint(pl_store_call *c, const char *key, uint64_t max, uint64_t *out)
{
    const char *v = param(c, key);
    if (!v)
        return true;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || x == 0 || x > max || *v == '-') {
        char msg[160];
        snprintf(msg, sizeof(msg), "%s: expected a number from 1 to %" PRIu64, key, max);
        pl_store_call_error(c, 400, msg);
        return false;
    }
    *out = x;
    return true;
}

bool pl_store_call_wants_protobuf(const pl_store_call *c)
{
    size_t len = 0;
    const char *v = pl_http_header_get(c->req, "Accept", &len);
    static const char want[] = "application/protobuf";
    for (size_t i = 0; v && i + sizeof(want) - 1 <= len; i++)
        if (strncasecmp(v + i, want, sizeof(want) - 1) == 0)
            return true;
    return false;
}

/* Duration parameter (e.g. "100ms"); false after answering 400. */
static bool duration_param(pl_store_call *c, const char *key, int64_t *out)
{
    const char *v = param(c, key);
    if (!v)
        return true;
    int64_t d;
    if (pl_parse_duration(v, &d) < 0 || d < 0) {
        char msg[120];
        snprintf(msg, sizeof(msg), "%s: not a duration (e.g. 100ms)", key);
        pl_store_call_error(c, 400, msg);
        return false;
    }
    *out = d;
    return true;
}

static bool flag_param(const pl_store_call *c, const char *key)
{
    const char *v = param(c, key);
    return v && strcmp(v, "0") != 0 && strcmp(v, "false") != 0;
}

/* ---- the store's JSON endpoints ------------------------------------------ */

static void handle_traces(pl_store_call *c)
{
    uint64_t now = pl_time_now_ns();
    pl_trace_query q = {0};
    uint64_t limit = 20;
    int64_t min_duration = 0;
    q.service = param(c, "service");
    if (!pl_store_call_since(c, "since", now, now - PL_QUERY_DEFAULT_SINCE_NS, &q.since_ns) ||
        !pl_store_call_uint(c, "limit", 1000, &limit) ||
        !duration_param(c, "min_duration", &min_duration) ||
        !duration_param(c, "min_cpu", &q.min_time))
        return;
    q.min_duration_ns = (uint64_t)min_duration;
    q.limit = (uint32_t)limit;
    q.root_name = param(c, "root");
    q.tenant = param(c, "tenant");
    if (c->tenant)
        q.tenant = c->tenant; /* the header wins over the parameter */
    q.errors_only = flag_param(c, "errors");
    if (param(c, "until") && !pl_store_call_since(c, "until", now, 0, &q.until_ns))
        return;
    const char *sort = param(c, "sort");
    if (sort && strcmp(sort, "duration") != 0 && strcmp(sort, "cpu") != 0 &&
        strcmp(sort, "time") != 0) {
        pl_store_call_error(c, 400, "sort: duration or cpu");
        return;
    }
    q.by_time = sort && strcmp(sort, "duration") != 0;
    pl_err err = {{0}};
    pl_store *s = pl_store_call_store(c);
    if (!s)
        return;
    pl_trace_list list;
    if (pl_store_call_failed(c, pl_store_query_traces(s, &q, &list, &err), &err))
        return;
    pl_buf b;
    pl_buf_init(&b);
    pl_json_traces(&list, &b);
    pl_buf_append_byte(&b, '\n');
    pl_trace_list_free(&list);
    pl_store_call_respond(c, 200, "application/json", &b);
}

static void handle_trace(pl_store_call *c)
{
    if (pl_store_call_wants_protobuf(c)) { /* Tempo's v1 path: same URL */
        pl_store_tempo_trace(c, false);
        return;
    }
    uint8_t trace_id[16];
    if (pl_query_parse_trace_id(c->rest, trace_id) < 0) {
        pl_store_call_error(c, 400, "trace id: expected 32 hex characters");
        return;
    }
    uint64_t top = 5;
    if (!pl_store_call_uint(c, "top", 100, &top))
        return;
    pl_err err = {{0}};
    pl_store *s = pl_store_call_store(c);
    if (!s)
        return;
    pl_trace_detail d;
    if (pl_store_call_failed(c, pl_store_query_trace(s, trace_id, (size_t)top, &d, &err), &err))
        return;
    if (c->tenant && strcmp(d.summary.tenant ? d.summary.tenant : "", c->tenant) != 0) {
        pl_trace_detail_free(&d);
        pl_store_call_error(c, 404, "trace not found");
        return;
    }
    pl_buf b;
    pl_buf_init(&b);
    pl_json_trace(&d, &b);
    pl_buf_append_byte(&b, '\n');
    pl_trace_detail_free(&d);
    pl_store_call_respond(c, 200, "application/json", &b);
}

/* Fills a profile query from span= | trace= | service= (+ since/until). */
static bool profile_params(pl_store_call *c, bool service_optional, pl_profile_query *q)
{
    memset(q, 0, sizeof(*q));
    const char *span = param(c, "span"), *trace = param(c, "trace"), *service = param(c, "service");
    int n = !!span + !!trace + !!service;
    if (n > 1 || (n == 0 && !service_optional)) {
        pl_store_call_error(c, 400, "give exactly one of span=, trace= or service=");
        return false;
    }
    q->type = param(c, "type");
    q->descendants = flag_param(c, "descendants");
    if (span) {
        q->scope = PL_PROFILE_SPAN;
        if (pl_query_parse_span_id(span, q->span_id) < 0) {
            pl_store_call_error(c, 400, "span: expected 16 hex characters");
            return false;
        }
        return true;
    }
    if (trace) {
        q->scope = PL_PROFILE_TRACE;
        if (pl_query_parse_trace_id(trace, q->trace_id) < 0) {
            pl_store_call_error(c, 400, "trace: expected 32 hex characters");
            return false;
        }
        return true;
    }
    uint64_t now = pl_time_now_ns();
    q->scope = PL_PROFILE_SERVICE;
    q->service = service;
    return pl_store_call_since(c, "since", now, now - PL_QUERY_DEFAULT_SINCE_NS, &q->since_ns) &&
           pl_store_call_since(c, "until", now, 0, &q->until_ns);
}

static void answer_profile(pl_store_call *c, bool top_only)
{
    pl_profile_query q;
    if (!profile_params(c, top_only, &q))
        return;
    q.time_only = top_only; /* top: CPU, else wall, else counts; heap only when asked */
    q.tenant = c->tenant;   /* the header's tenant only; none: every tenant */
    uint64_t limit = 20;
    if (!pl_store_call_uint(c, "limit", 10000, &limit))
        return;
    const char *format = param(c, "format");
    if (!format)
        format = "json";
    if (!top_only && strcmp(format, "folded") && strcmp(format, "json") && strcmp(format, "svg") &&
        strcmp(format, "pprof") && strcmp(format, "speedscope")) {
        pl_store_call_error(c, 400, "format: folded, json, svg, pprof or speedscope");
        return;
    }
    pl_err err = {{0}};
    pl_store *s = pl_store_call_store(c);
    if (!s)
        return;
    pl_profile_result r;
    if (pl_store_call_failed(c, pl_store_query_profile(s, &q, &r, &err), &err))
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
    pl_store_call_respond(c, 200, ctype, &b);
}

static void handle_flamegraph(pl_store_call *c)
{
    answer_profile(c, false);
}

static void handle_top(pl_store_call *c)
{
    answer_profile(c, true);
}

static void handle_services(pl_store_call *c)
{
    pl_err err = {{0}};
    pl_store *s = pl_store_call_store(c);
    if (!s)
        return;
    char **names = NULL;
    size_t n = 0;
    if (pl_store_call_failed(c, pl_store_query_services(s, c->tenant, &names, &n, &err), &err))
        return;
    pl_buf b;
    pl_buf_init(&b);
    pl_json_services(names, n, &b);
    pl_buf_append_byte(&b, '\n');
    pl_store_free_names(names, n);
    pl_store_call_respond(c, 200, "application/json", &b);
}

static void handle_links(pl_store_call *c)
{
    uint64_t now = pl_time_now_ns(), since;
    if (!pl_store_call_since(c, "since", now, now - PL_QUERY_DEFAULT_SINCE_NS, &since))
        return;
    pl_err err = {{0}};
    pl_store *s = pl_store_call_store(c);
    if (!s)
        return;
    pl_link_stats ls;
    if (pl_store_call_failed(c, pl_store_query_links(s, since, c->tenant, &ls, &err), &err))
        return;
    pl_buf b;
    pl_buf_init(&b);
    pl_json_links(&ls, &b);
    pl_buf_append_byte(&b, '\n');
    pl_link_stats_free(&ls);
    pl_store_call_respond(c, 200, "application/json", &b);
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

static void handle_status(pl_store_call *c)
{
    pl_sqlite_api *api = c->api;
    pl_err err = {{0}};
    pl_store *s = pl_store_call_store(c);
    if (!s)
        return;
    uint64_t now = pl_time_now_ns();
    pl_link_stats ls;
    if (pl_store_call_failed(
            c, pl_store_query_links(s, now - 900ull * 1000000000ull, c->tenant, &ls, &err), &err))
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
    pl_store_call_respond(c, 200, "application/json", &b);
}

static void not_found(pl_store_call *c);

/* The web view's files, compiled into the binary (web_assets.c). */
static void handle_asset(pl_store_call *c)
{
    const char *path = c->req->path;
    const pl_web_asset *a = strncmp(path, "/api/", 5) == 0
                                ? NULL
                                : pl_web_asset_find(strcmp(path, "/") == 0 ? "/index.html" : path);
    if (!a) {
        not_found(c);
        return;
    }
    static const char csp[] =
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'";
    pl_http_header h[3] = {
        {"Content-Type", 12, a->content_type, strlen(a->content_type)},
        {"Cache-Control", 13, "no-cache", 8},
        /* everything is served from here: no other origin, no inline code */
        {"Content-Security-Policy", 23, csp, sizeof(csp) - 1},
    };
    pl_http_respond(c->res, 200, h, 3, a->data, a->len);
    c->answered = true;
}

/* ---- the route table ------------------------------------------------------ */

static const pl_store_route api_rows[] = {
    {"GET", "/api/services", "", handle_services, "service names seen, sorted"},
    {"GET", "/api/traces",
     "service=&since=&until=&min_duration=&min_cpu=&root=&errors=&sort=&limit=&tenant=",
     handle_traces, "recent traces, slowest first (sort=cpu: by profiled time)"},
    {"GET", "/api/traces/", "", handle_traces, "the same as /api/traces"},
    {"GET", "/api/traces/*", "top=", handle_trace,
     "one trace's spans as a tree with their profile times (JSON); with Accept: "
     "application/protobuf Tempo's v1 `Trace`"},
    {"GET", "/api/flamegraph", "span=|trace=|service=&since=&until=&type=&descendants=&format=",
     handle_flamegraph, "a flame graph: json, folded, svg, pprof or speedscope"},
    {"GET", "/api/top", "span=|trace=|service=&since=&until=&type=&limit=", handle_top,
     "hottest functions (self and total)"},
    {"GET", "/api/links", "since=", handle_links, "spans with profiles per service"},
    {"GET", "/api/status", "", handle_status,
     "spans/s, samples/s, link ratio of the last 15 minutes, store size"},
};

const pl_store_route_table pl_store_api_routes = {api_rows, sizeof(api_rows) / sizeof(api_rows[0])};

/* Grafana's Pyroscope data source (store/querier.c): the Connect API and
 * Pyroscope's render endpoint. Its errors are Connect's JSON, so it opens
 * the store itself instead of through pl_store_call_store's 503. */
static void handle_querier(pl_store_call *c)
{
    pl_sqlite_api *api = c->api;
    pl_err err = {{0}};
    if (!api->store) {
        pl_store_options opt = {.read_only = true, .busy_timeout_ms = 1000};
        if (pl_store_open(api->db_path, &opt, &api->store, NULL, &err) != PL_OK)
            api->store = NULL;
    }
    pl_store_querier_handle(api->store, &err, c->tenant, c->req, c->res);
    c->answered = true;
    /* drop a connection that may be broken: the next request reopens */
    if (api->store && pl_store_last_error(api->store) == PL_STORE_ERR_CORRUPT) {
        pl_store_close(api->store);
        api->store = NULL;
    }
}

static const pl_store_route querier_rows[] = {
    {"POST", "/querier.v1.QuerierService/*",
     "(Connect: application/proto or application/json body)", handle_querier,
     "Grafana's Pyroscope data source: ProfileTypes, LabelNames, LabelValues, Series, "
     "SelectMergeStacktraces, SelectSeries, SelectMergeSpanProfile, SelectMergeProfile, "
     "GetProfileStats"},
    {"GET", "/pyroscope/*", "query=&from=&until=&max-nodes=&format=", handle_querier,
     "Pyroscope's render API (/pyroscope/render, flamebearer JSON) for Profiles Drilldown"},
};
static const pl_store_route_table querier_routes = {querier_rows, 2};

/* The web view: any other GET outside /api/ (a prefix row tried last). */
static const pl_store_route web_rows[] = {
    {"GET", "/*", "", handle_asset, "the web view: /, /app.js, /app.css"},
};
static const pl_store_route_table web_routes = {web_rows, 1};

/* Every table the API dispatches on, in matching order. A family of
 * endpoints in a file of its own adds one line here. */
static const pl_store_route_table *const route_tables[] = {
    &pl_store_api_routes,
    &pl_store_tempo_routes,
    &querier_routes,
    &web_routes,
};
#define N_ROUTE_TABLES (sizeof(route_tables) / sizeof(route_tables[0]))

const pl_store_route_table *const *pl_store_route_tables(size_t *n)
{
    *n = N_ROUTE_TABLES;
    return route_tables;
}

/* Does `path` match the row's path? *rest gets what a prefix row leaves. */
static bool route_matches(const char *pattern, const char *path, const char **rest)
{
    size_t n = strlen(pattern);
    if (n && pattern[n - 1] == '*') {
        if (strncmp(path, pattern, n - 1) != 0)
            return false;
        *rest = path + n - 1;
        return true;
    }
    *rest = "";
    return strcmp(pattern, path) == 0;
}

const pl_store_route *pl_store_route_find(const pl_store_route_table *const *tables,
                                          size_t n_tables, const char *method, const char *path,
                                          const char **rest, bool *path_known)
{
    *path_known = false;
    bool head = strcmp(method, "HEAD") == 0;
    for (size_t t = 0; t < n_tables; t++)
        for (size_t i = 0; i < tables[t]->n; i++) {
            const pl_store_route *r = &tables[t]->rows[i];
            if (!route_matches(r->path, path, rest))
                continue;
            /* a path an endpoint owns, asked with another method: 405,
             * not the catch-all web view's 404 */
            if (*path_known && strcmp(r->path, "/*") == 0)
                goto not_found;
            if (strcmp(r->method, method) == 0 || (head && strcmp(r->method, "GET") == 0))
                return r;
            *path_known = true;
        }
not_found:
    *rest = "";
    return NULL;
}

/* 404 with every path the API serves, from the rows. */
static void not_found(pl_store_call *c)
{
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_append_str(&b, "unknown path; see /");
    for (size_t t = 0; t < N_ROUTE_TABLES; t++)
        for (size_t i = 0; i < route_tables[t]->n; i++) {
            const char *p = route_tables[t]->rows[i].path;
            size_t n = strlen(p);
            if (strncmp(p, "/api/", 5) != 0 && strncmp(p, "/pyroscope/", 11) != 0 &&
                strncmp(p, "/querier.", 9) != 0)
                continue; /* the web view's files: "/" stands for them */
            if (n && p[n - 1] == '/')
                continue; /* "/api/traces/": the same as "/api/traces" */
            pl_buf_append_str(&b, ", ");
            if (n && p[n - 1] == '*') {
                pl_buf_append(&b, p, n - 1);
                pl_buf_append_str(&b, "{id}");
            } else {
                pl_buf_append_str(&b, p);
            }
        }
    pl_buf_append_byte(&b, 0);
    if (pl_buf_ok(&b))
        pl_store_call_error(c, 404, (const char *)b.data);
    else
        pl_store_call_error(c, 503, "out of memory");
    pl_buf_free(&b);
}

static void md_cell(pl_buf *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            pl_buf_append_str(out, "\\|");
        else
            pl_buf_append_byte(out, (uint8_t)*s);
    }
}

void pl_store_routes_markdown(pl_buf *out)
{
    pl_buf_append_str(out, "| method | path | parameters | what |\n|---|---|---|---|\n");
    for (size_t t = 0; t < N_ROUTE_TABLES; t++)
        for (size_t i = 0; i < route_tables[t]->n; i++) {
            const pl_store_route *r = &route_tables[t]->rows[i];
            size_t n = strlen(r->path);
            pl_buf_printf(out, "| %s | `", r->method);
            if (n && r->path[n - 1] == '*') { /* a prefix: "/api/traces/{...}" */
                pl_buf_append(out, r->path, n - 1);
                pl_buf_append_str(out, "{...}");
            } else {
                md_cell(out, r->path);
            }
            pl_buf_append_str(out, "` | ");
            if (*r->params) {
                pl_buf_append_byte(out, '`');
                md_cell(out, r->params);
                pl_buf_append_byte(out, '`');
            }
            pl_buf_append_str(out, " | ");
            md_cell(out, r->doc);
            pl_buf_append_str(out, " |\n");
        }
}

/* X-Scope-OrgID, copied NUL-terminated into buf; NULL when absent or
 * empty. *bad when it is too long or holds a NUL (never "every tenant"). */
static const char *tenant_header(const pl_http_request *req, char *buf, size_t cap, bool *bad)
{
    size_t len = 0;
    const char *v = pl_http_header_get(req, "X-Scope-OrgID", &len);
    *bad = v && (len >= cap || memchr(v, 0, len));
    if (!v || len == 0 || *bad)
        return NULL;
    memcpy(buf, v, len);
    buf[len] = 0;
    return buf;
}

static void api_handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    pl_sqlite_api *api = arg;
    pl_store_params p;
    pl_store_params_parse(&p, req->query);
    if (!p.buf) {
        respond_error(res, 503, "out of memory");
        return;
    }
    char tenant[256];
    bool bad_tenant;
    pl_store_call c = {
        .api = api,
        .req = req,
        .res = res,
        .params = &p,
        .tenant = tenant_header(req, tenant, sizeof(tenant), &bad_tenant),
    };
    if (bad_tenant) {
        respond_error(res, 400, "X-Scope-OrgID: at most 255 bytes");
        pl_store_params_free(&p);
        return;
    }
    bool path_known;
    const pl_store_route *r = pl_store_route_find(route_tables, N_ROUTE_TABLES, req->method,
                                                  req->path, &c.rest, &path_known);
    if (r) {
        r->handler(&c);
        if (!c.answered) /* a handler must answer; never leave the client waiting */
            pl_store_call_error(&c, 500, "no answer");
    } else if (path_known) {
        pl_http_header allow = {"Allow", 5, "GET", 3};
        for (size_t t = 0; t < N_ROUTE_TABLES; t++) /* the path's own method */
            for (size_t i = 0; i < route_tables[t]->n; i++) {
                const char *rest;
                if (route_matches(route_tables[t]->rows[i].path, req->path, &rest) &&
                    strcmp(route_tables[t]->rows[i].path, "/*") != 0) {
                    allow.value = route_tables[t]->rows[i].method;
                    allow.value_len = strlen(allow.value);
                }
            }
        pl_http_respond(res, 405, &allow, 1, "{\"error\":\"method not allowed\"}\n", 31);
    } else {
        not_found(&c);
    }
    pl_store_params_free(&p);
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
    opt->max_body_size = 64 * 1024; /* GET, and the querier's small Connect requests */
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
    if (api->sec)
        pl_listener_security_apply(api->sec, &opt); /* TLS, authenticator */
    else
        opt.tls = api->tls;
    opt.name = "sqlite/api";
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

static pl_sqlite_api *api_start(const char *endpoint, const char *db_path,
                                const pl_store_live *live, const pl_tls_server_config *tls,
                                const pl_listener_security *sec, pl_err *err);

pl_sqlite_api *pl_sqlite_api_start(const char *endpoint, const char *db_path,
                                   const pl_store_live *live, pl_err *err)
{
    return pl_sqlite_api_start_tls(endpoint, db_path, live, NULL, err);
}

pl_sqlite_api *pl_sqlite_api_start_tls(const char *endpoint, const char *db_path,
                                       const pl_store_live *live,
                                       const struct pl_tls_server_config *tls, pl_err *err)
{
    return api_start(endpoint, db_path, live, tls, NULL, err);
}

pl_sqlite_api *pl_sqlite_api_start_secure(const char *endpoint, const char *db_path,
                                          const pl_store_live *live,
                                          const pl_listener_security *sec, pl_err *err)
{
    return api_start(endpoint, db_path, live, NULL, sec, err);
}

static pl_sqlite_api *api_start(const char *endpoint, const char *db_path,
                                const pl_store_live *live, const pl_tls_server_config *tls,
                                const pl_listener_security *sec, pl_err *err)
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
    api->sec = sec;
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
