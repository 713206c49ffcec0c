/*
 * otlp.c: the `otlp` receiver: OTLP over gRPC (default 127.0.0.1:4317) and
 * OTLP over HTTP (default 127.0.0.1:4318, protobuf or JSON), for traces and
 * profiles decoded into the model, and logs and metrics passed through as
 * their encoded Export request.
 *
 * It answers exactly like the OpenTelemetry Collector's receiver, so the
 * SDK exporters' retry logic behaves the same:
 *   - a signal with no pipeline is not served: 404 / UNIMPLEMENTED;
 *   - the method is checked before the content type (405, then 415);
 *   - success is an Export*ServiceResponse with an empty partial_success
 *     (`0A 00`, `{"partialSuccess":{}}`), in the request's encoding;
 *   - errors carry a google.rpc.Status body encoded like the request;
 *   - back-pressure from the pipeline (memory limit, full queue) is 503 /
 *     UNAVAILABLE, a rate limit 429 / RESOURCE_EXHAUSTED, both with
 *     Retry-After / RetryInfo, so clients retry instead of losing data.
 * Where the Collector departs from the OTLP spec on a size limit (it answers
 * 400) proflink follows the spec: 413.
 *
 * Zero-copy: the request body (or its decompressed copy) is adopted by the
 * batch, and decoded strings point into it.
 *
 * Config follows the Collector: protocols.grpc and protocols.http are each
 * enabled by being present, even empty (`grpc:` or `grpc: {}`). The loader
 * fills absent sections with defaults, so the protocols section's validate
 * hook looks at the YAML mapping itself to tell present from absent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/decode.h"
#include "core/component.h"
#include "core/log.h"
#include "core/model.h"
#include "net/compress.h"
#include "net/grpc.h"
#include "net/http_server.h"
#include "otlp_json.h"
#include "otlp_pb.h"

/* ---- configuration ------------------------------------------------------ */

typedef struct otlp_grpc_config {
    char *endpoint;
    double max_recv_msg_size_mib;
    int64_t max_concurrent_streams;
    bool include_metadata;
    int64_t max_connections;
    int64_t idle_timeout_ns;
} otlp_grpc_config;

typedef struct otlp_http_config {
    char *endpoint;
    uint64_t max_request_body_size;
    bool include_metadata;
    char *traces_url_path;
    char *logs_url_path;
    char *metrics_url_path;
    int64_t max_connections;
    int64_t read_header_timeout_ns;
    int64_t idle_timeout_ns;
} otlp_http_config;

typedef struct otlp_protocols_config {
    otlp_grpc_config grpc;
    otlp_http_config http;
    /* Set by the validate hook: the key was present in the YAML. */
    bool grpc_enabled;
    bool http_enabled;
} otlp_protocols_config;

typedef struct otlp_config {
    otlp_protocols_config protocols;
} otlp_config;

static int validate_path(const char *path, pl_cfg_ctx *ctx, const char *key)
{
    if (path && path[0] && strpbrk(path, "?# \t")) {
        pl_cfg_errorf(ctx, key, "'%s' is not a URL path", path);
        return 1;
    }
    return 0;
}

static int validate_grpc(void *cfg, pl_cfg_ctx *ctx)
{
    otlp_grpc_config *g = cfg;
    int errors = 0;
    if (g->max_recv_msg_size_mib <= 0 || g->max_recv_msg_size_mib > 2047) {
        pl_cfg_errorf(ctx, "max_recv_msg_size_mib", "must be between 0 and 2047 MiB");
        errors++;
    }
    if (g->max_concurrent_streams < 1 || g->max_concurrent_streams > 1000000) {
        pl_cfg_errorf(ctx, "max_concurrent_streams", "must be between 1 and 1000000");
        errors++;
    }
    return errors;
}

static int validate_http(void *cfg, pl_cfg_ctx *ctx)
{
    otlp_http_config *h = cfg;
    int errors = 0;
    if (h->max_request_body_size == 0) {
        pl_cfg_errorf(ctx, "max_request_body_size", "must be positive");
        errors++;
    }
    errors += validate_path(h->traces_url_path, ctx, "traces_url_path");
    errors += validate_path(h->logs_url_path, ctx, "logs_url_path");
    errors += validate_path(h->metrics_url_path, ctx, "metrics_url_path");
    return errors;
}

static int validate_protocols(void *cfg, pl_cfg_ctx *ctx)
{
    otlp_protocols_config *p = cfg;
    if (ctx->map) {
        p->grpc_enabled = pl_cfg_node_key(ctx->map, "grpc") != NULL;
        p->http_enabled = pl_cfg_node_key(ctx->map, "http") != NULL;
    }
    if (!p->grpc_enabled && !p->http_enabled) {
        pl_cfg_errorf(ctx, NULL, "must specify at least one protocol (grpc or http)");
        return 1;
    }
    return 0;
}

static const pl_cfg_field grpc_fields[] = {
    {"endpoint", PL_CFG_STRING, "127.0.0.1:4317", offsetof(otlp_grpc_config, endpoint),
     "host:port to listen on for OTLP/gRPC (HTTP/2 cleartext)", NULL},
    {"max_recv_msg_size_mib", PL_CFG_DOUBLE, "4", offsetof(otlp_grpc_config, max_recv_msg_size_mib),
     "largest request message in MiB, after decompression (RESOURCE_EXHAUSTED above it)", NULL},
    {"max_concurrent_streams", PL_CFG_INT, "128",
     offsetof(otlp_grpc_config, max_concurrent_streams),
     "concurrent RPCs per connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS)", NULL},
    {"include_metadata", PL_CFG_BOOL, "false", offsetof(otlp_grpc_config, include_metadata),
     "attach the request's metadata (headers) to the data", NULL},
    {"max_connections", PL_CFG_INT, "1024", offsetof(otlp_grpc_config, max_connections),
     "open connections at most; more are closed at once", NULL},
    {"keepalive", PL_CFG_IGNORED, NULL, 0,
     "accepted for Collector configs; proflink's own idle_timeout applies", NULL},
    {"read_buffer_size", PL_CFG_IGNORED, NULL, 0, "accepted for Collector configs; no effect",
     NULL},
    {"write_buffer_size", PL_CFG_IGNORED, NULL, 0, "accepted for Collector configs; no effect",
     NULL},
    {"idle_timeout", PL_CFG_DURATION, "2m", offsetof(otlp_grpc_config, idle_timeout_ns),
     "close a connection with no open stream after this long", NULL},
    {NULL, 0, NULL, 0, NULL, NULL},
};

static const pl_cfg_section grpc_section = {sizeof(otlp_grpc_config), grpc_fields, validate_grpc};

static const pl_cfg_field http_fields[] = {
    {"endpoint", PL_CFG_STRING, "127.0.0.1:4318", offsetof(otlp_http_config, endpoint),
     "host:port to listen on for OTLP/HTTP (HTTP/1.1)", NULL},
    {"max_request_body_size", PL_CFG_SIZE, "20MiB",
     offsetof(otlp_http_config, max_request_body_size),
     "largest request body, checked before and after decompression (413 above it)", NULL},
    {"include_metadata", PL_CFG_BOOL, "false", offsetof(otlp_http_config, include_metadata),
     "attach the request's headers to the data", NULL},
    {"cors", PL_CFG_IGNORED, NULL, 0,
     "accepted for Collector configs; no CORS headers are sent (OPTIONS gets 405)", NULL},
    {"traces_url_path", PL_CFG_STRING, "/v1/traces", offsetof(otlp_http_config, traces_url_path),
     "path for traces (the profiles path is fixed: /v1development/profiles)", NULL},
    {"logs_url_path", PL_CFG_STRING, "/v1/logs", offsetof(otlp_http_config, logs_url_path),
     "path for logs", NULL},
    {"metrics_url_path", PL_CFG_STRING, "/v1/metrics", offsetof(otlp_http_config, metrics_url_path),
     "path for metrics", NULL},
    {"max_connections", PL_CFG_INT, "1024", offsetof(otlp_http_config, max_connections),
     "open connections at most; more are closed at once", NULL},
    {"read_header_timeout", PL_CFG_DURATION, "30s",
     offsetof(otlp_http_config, read_header_timeout_ns),
     "time a client has to send a whole request (408 after it)", NULL},
    {"idle_timeout", PL_CFG_DURATION, "2m", offsetof(otlp_http_config, idle_timeout_ns),
     "close a keep-alive connection idle for this long", NULL},
    {NULL, 0, NULL, 0, NULL, NULL},
};

static const pl_cfg_section http_section = {sizeof(otlp_http_config), http_fields, validate_http};

static const pl_cfg_field protocols_fields[] = {
    {"grpc", PL_CFG_SECTION, NULL, offsetof(otlp_protocols_config, grpc),
     "OTLP/gRPC; present (even empty) = enabled", &grpc_section},
    {"http", PL_CFG_SECTION, NULL, offsetof(otlp_protocols_config, http),
     "OTLP/HTTP; present (even empty) = enabled", &http_section},
    {NULL, 0, NULL, 0, NULL, NULL},
};

static const pl_cfg_section protocols_section = {sizeof(otlp_protocols_config), protocols_fields,
                                                 validate_protocols};

static const pl_cfg_field otlp_fields[] = {
    {"protocols", PL_CFG_SECTION, NULL, offsetof(otlp_config, protocols),
     "which transports to serve: grpc, http or both", &protocols_section},
    {NULL, 0, NULL, 0, NULL, NULL},
};

static const pl_cfg_section otlp_section = {sizeof(otlp_config), otlp_fields, NULL};

/* ---- the instance ------------------------------------------------------- */

typedef struct otlp_receiver {
    char id[128];
    uv_loop_t *loop;
    pl_stats *stats;
    pl_consumer *next[PL_SIGNAL_COUNT];
    bool grpc_enabled, http_enabled;
    /* copies of the config strings */
    char grpc_endpoint[256], http_endpoint[256];
    char http_paths[PL_SIGNAL_COUNT][256];
    size_t max_recv_msg_size;
    size_t max_request_body_size;
    bool grpc_metadata, http_metadata;
    pl_http_server_options grpc_opt, http_opt;
    char grpc_name[160], http_name[160];
    pl_http_server *grpc_server, *http_server;
    uint64_t *refused_requests; /* refused before decoding: memory short */
} otlp_receiver;

static void normalize_path(char *dst, size_t cap, const char *src)
{
    if (!src || !*src)
        src = "/";
    snprintf(dst, cap, "%s%s", src[0] == '/' ? "" : "/", src);
}

static pl_status otlp_create(const pl_create_settings *settings, const void *config,
                             void **out_self, pl_err *err)
{
    const otlp_config *cfg = config;
    otlp_receiver *r = calloc(1, sizeof(*r));
    if (!r)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    snprintf(r->id, sizeof(r->id), "%s", settings->id ? settings->id : "otlp");
    r->loop = settings->loop;
    r->stats = settings->stats;
    r->refused_requests =
        r->stats ? pl_stats_counter(r->stats, "refused_requests",
                                    "requests refused before decoding because memory is short")
                 : NULL;
    for (int s = 0; s < PL_SIGNAL_COUNT; s++)
        r->next[s] = settings->next[s];
    const otlp_grpc_config *g = &cfg->protocols.grpc;
    const otlp_http_config *h = &cfg->protocols.http;
    r->grpc_enabled = cfg->protocols.grpc_enabled;
    r->http_enabled = cfg->protocols.http_enabled;
    snprintf(r->grpc_endpoint, sizeof(r->grpc_endpoint), "%s",
             g->endpoint ? g->endpoint : "127.0.0.1:4317");
    snprintf(r->http_endpoint, sizeof(r->http_endpoint), "%s",
             h->endpoint ? h->endpoint : "127.0.0.1:4318");
    normalize_path(r->http_paths[PL_SIGNAL_TRACES], 256,
                   h->traces_url_path ? h->traces_url_path : "/v1/traces");
    normalize_path(r->http_paths[PL_SIGNAL_PROFILES], 256, "/v1development/profiles");
    normalize_path(r->http_paths[PL_SIGNAL_LOGS], 256,
                   h->logs_url_path ? h->logs_url_path : "/v1/logs");
    normalize_path(r->http_paths[PL_SIGNAL_METRICS], 256,
                   h->metrics_url_path ? h->metrics_url_path : "/v1/metrics");
    double mib = g->max_recv_msg_size_mib > 0 ? g->max_recv_msg_size_mib : 4;
    r->max_recv_msg_size = (size_t)(mib * 1024 * 1024);
    r->max_request_body_size =
        h->max_request_body_size ? (size_t)h->max_request_body_size : 20u * 1024 * 1024;
    r->grpc_metadata = g->include_metadata;
    r->http_metadata = h->include_metadata;

    snprintf(r->grpc_name, sizeof(r->grpc_name), "%s/grpc", r->id);
    snprintf(r->http_name, sizeof(r->http_name), "%s/http", r->id);
    /* A compressed message can be slightly larger than its content. */
    r->grpc_opt = (pl_http_server_options){
        .max_body_size = r->max_recv_msg_size + r->max_recv_msg_size / 64 + 1024,
        .max_connections = g->max_connections > 0 ? (unsigned)g->max_connections : 0,
        .idle_timeout_ms = g->idle_timeout_ns > 0 ? (uint64_t)g->idle_timeout_ns / 1000000 : 0,
        .h2c = true,
        .http1 = false,
        .name = r->grpc_name,
        .deliver_too_large = true,
        .max_concurrent_streams =
            g->max_concurrent_streams > 0 ? (unsigned)g->max_concurrent_streams : 0,
    };
    r->http_opt = (pl_http_server_options){
        .max_body_size = r->max_request_body_size,
        .max_connections = h->max_connections > 0 ? (unsigned)h->max_connections : 0,
        .header_timeout_ms =
            h->read_header_timeout_ns > 0 ? (uint64_t)h->read_header_timeout_ns / 1000000 : 0,
        .idle_timeout_ms = h->idle_timeout_ns > 0 ? (uint64_t)h->idle_timeout_ns / 1000000 : 0,
        .http1 = true,
        .name = r->http_name,
        .deliver_too_large = true,
    };
    *out_self = r;
    return PL_OK;
}

/* ---- shared request processing ----------------------------------------- */

typedef enum body_format { FORMAT_PROTOBUF, FORMAT_JSON } body_format;

static void add_metadata(pl_batch *b, const pl_http_request *req, bool all)
{
    size_t n = 0;
    for (size_t i = 0; i < req->n_headers; i++) {
        const pl_http_header *h = &req->headers[i];
        bool org = h->name_len == 13 && strncasecmp(h->name, "x-scope-orgid", 13) == 0;
        if (all || org)
            n += 1 + org;
    }
    if (n == 0)
        return;
    pl_kv *items = pl_batch_alloc(b, n * sizeof(*items));
    if (!items)
        return;
    uint32_t k = 0;
    for (size_t i = 0; i < req->n_headers; i++) {
        const pl_http_header *h = &req->headers[i];
        bool org = h->name_len == 13 && strncasecmp(h->name, "x-scope-orgid", 13) == 0;
        if (org) {
            items[k].key = PL_BYTES_LIT("tenant");
            items[k].value = pl_value_string(pl_batch_bytes(b, h->value, h->value_len));
            k++;
        }
        if (all) {
            char lower[128];
            size_t len = h->name_len < sizeof(lower) ? h->name_len : sizeof(lower);
            for (size_t j = 0; j < len; j++) {
                char ch = h->name[j];
                lower[j] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
            }
            items[k].key = pl_batch_bytes(b, lower, len);
            items[k].value = pl_value_string(pl_batch_bytes(b, h->value, h->value_len));
            k++;
        }
    }
    b->metadata.items = items;
    b->metadata.n = k;
}

/* Records / data points counted while checking a pass-through request, for
 * the accepted/refused counters (one loop thread: a plain static is safe). */
static size_t pass_through_items;

/* Decodes `data` (inside `owner`, which is taken in every case) into a new
 * batch of `signal`. */
static pl_status decode_request(pl_signal signal, body_format format, uint8_t *owner,
                                size_t owner_size, const uint8_t *data, size_t len, pl_batch **out,
                                pl_err *err)
{
    *out = NULL;
    pl_batch *b = pl_batch_new(signal);
    if (!b) {
        free(owner);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    if (pl_batch_adopt(b, owner, owner_size) != 0) {
        free(owner);
        pl_batch_free(b);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    pl_status st = PL_OK;
    if (format == FORMAT_JSON) {
        switch (signal) {
        case PL_SIGNAL_TRACES:
            st = pl_otlp_json_decode_traces(b, data, len, err);
            break;
        case PL_SIGNAL_PROFILES:
            st = pl_otlp_json_decode_profiles(b, data, len, err);
            break;
        default:
            st = pl_errf(err, PL_ERR_UNSUPPORTED, "JSON is not supported for %s",
                         pl_signal_name(signal));
        }
    } else {
        switch (signal) {
        case PL_SIGNAL_TRACES:
            st = pl_otlp_decode_traces(b, data, len, err);
            break;
        case PL_SIGNAL_PROFILES:
            st = pl_otlp_decode_profiles(b, data, len, err);
            break;
        case PL_SIGNAL_LOGS:
            st = pl_otlp_count_logs(data, len, &pass_through_items, err);
            b->data.raw = (pl_bytes){data, (uint32_t)len};
            break;
        case PL_SIGNAL_METRICS:
            st = pl_otlp_count_metrics(data, len, &pass_through_items, err);
            b->data.raw = (pl_bytes){data, (uint32_t)len};
            break;
        }
    }
    if (st != PL_OK) {
        pl_batch_free(b);
        return st;
    }
    *out = b;
    return PL_OK;
}

/* Hands the batch to the pipeline and counts the outcome. */
static pl_status deliver(otlp_receiver *r, pl_signal signal, pl_batch *b, pl_err *err)
{
    /* logs and metrics count their records / data points, not requests */
    size_t items = (signal == PL_SIGNAL_LOGS || signal == PL_SIGNAL_METRICS) ? pass_through_items
                                                                             : pl_batch_items(b);
    bool empty =
        (signal == PL_SIGNAL_TRACES && b->data.traces.n_resources == 0) ||
        (signal == PL_SIGNAL_PROFILES && b->data.profiles.n_resources == 0) ||
        ((signal == PL_SIGNAL_LOGS || signal == PL_SIGNAL_METRICS) && b->data.raw.len == 0);
    if (empty) {
        /* like the Collector: nothing to hand on, success */
        pl_batch_free(b);
        return PL_OK;
    }
    b->received_unix_nano = pl_time_now_ns();
    pl_status st = pl_consumer_consume(r->next[signal], b);
    if (st == PL_OK) {
        pl_stats_add(r->stats, signal, PL_STAT_ACCEPTED, items);
        return PL_OK;
    }
    pl_stats_add(r->stats, signal, PL_STAT_REFUSED, items);
    switch (st) {
    case PL_ERR_REFUSED:
    case PL_ERR_NOMEM:
        return pl_errf(err, st, "data refused, the pipeline is under pressure");
    case PL_ERR_THROTTLED:
        return pl_errf(err, st, "data refused, rate limited");
    default:
        return pl_errf(err, st, "data refused: %s", pl_status_name(st));
    }
}

static pl_signal grpc_signal_of(const char *path, bool *known)
{
    static const struct {
        const char *path;
        pl_signal signal;
    } paths[] = {
        {"/opentelemetry.proto.collector.trace.v1.TraceService/Export", PL_SIGNAL_TRACES},
        {"/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export",
         PL_SIGNAL_PROFILES},
        {"/opentelemetry.proto.collector.logs.v1.LogsService/Export", PL_SIGNAL_LOGS},
        {"/opentelemetry.proto.collector.metrics.v1.MetricsService/Export", PL_SIGNAL_METRICS},
        /* spellings seen in the wild (Fluent Bit accepts them too) */
        {"/opentelemetry.proto.collector.traces.v1.TracesService/Export", PL_SIGNAL_TRACES},
        {"/opentelemetry.proto.collector.log.v1.LogService/Export", PL_SIGNAL_LOGS},
        {"/opentelemetry.proto.collector.metric.v1.MetricService/Export", PL_SIGNAL_METRICS},
    };
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        if (strcmp(path, paths[i].path) == 0) {
            *known = true;
            return paths[i].signal;
        }
    }
    *known = false;
    return PL_SIGNAL_TRACES;
}

/* While the memory_limiter says memory is short, refuse before spending
 * CPU and memory on decompressing and decoding: the pipeline would refuse
 * the batch anyway. Clients are told to retry. */
static bool memory_short(otlp_receiver *r)
{
    if (pl_memory_state_get() == PL_MEMORY_OK)
        return false;
    if (r->refused_requests)
        (*r->refused_requests)++;
    return true;
}

static const char memory_short_message[] = "memory limit reached, retry later";

/* ---- gRPC --------------------------------------------------------------- */

static void grpc_handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    otlp_receiver *r = arg;
    if (!pl_grpc_is_grpc(req)) {
        pl_grpc_respond_415(res);
        return;
    }
    bool known;
    pl_signal signal = grpc_signal_of(req->path, &known);
    if (!known || strcmp(req->method, "POST") != 0) {
        char msg[300];
        snprintf(msg, sizeof(msg), "unknown service or method %.200s", req->path);
        pl_grpc_respond_error(res, PL_GRPC_UNIMPLEMENTED, msg, -1);
        return;
    }
    if (!r->next[signal]) {
        char msg[200];
        snprintf(msg, sizeof(msg), "unknown service: no %s pipeline takes this receiver",
                 pl_signal_name(signal));
        pl_grpc_respond_error(res, PL_GRPC_UNIMPLEMENTED, msg, -1);
        return;
    }
    if (memory_short(r)) {
        pl_grpc_respond_error(res, PL_GRPC_UNAVAILABLE, memory_short_message,
                              (int64_t)PL_RETRY_AFTER_SECONDS * 1000000000);
        return;
    }
    pl_err err = {{0}};
    pl_grpc_message m;
    pl_status st = pl_grpc_read_message(req, r->max_recv_msg_size, &m, &err);
    pl_batch *b = NULL;
    if (st == PL_OK)
        st =
            decode_request(signal, FORMAT_PROTOBUF, m.owner, m.owner_size, m.data, m.len, &b, &err);
    if (st == PL_OK) {
        add_metadata(b, req, r->grpc_metadata);
        st = deliver(r, signal, b, &err);
    }
    if (st == PL_OK) {
        /* an empty Export*ServiceResponse (full success) */
        pl_grpc_respond(res, NULL, 0);
        return;
    }
    if (st == PL_ERR_INVALID || st == PL_ERR_TOO_LARGE)
        pl_debug(r->id, "%s: %s", req->peer, err.msg);
    int64_t retry = pl_status_retryable(st) ? (int64_t)PL_RETRY_AFTER_SECONDS * 1000000000 : -1;
    pl_grpc_respond_error(res, pl_status_grpc(st), err.msg, retry);
}

/* ---- HTTP --------------------------------------------------------------- */

static bool media_type_is(const char *ct, size_t len, const char *want)
{
    size_t n = strlen(want);
    while (len && (*ct == ' ' || *ct == '\t')) {
        ct++;
        len--;
    }
    if (len < n || strncasecmp(ct, want, n) != 0)
        return false;
    const char *rest = ct + n;
    size_t left = len - n;
    while (left && (*rest == ' ' || *rest == '\t')) {
        rest++;
        left--;
    }
    return left == 0 || *rest == ';';
}

static void http_text(pl_http_response *res, int status, const char *text)
{
    static const pl_http_header h[] = {{"Content-Type", 12, "text/plain; charset=utf-8", 25}};
    pl_http_respond(res, status, h, 1, text, strlen(text));
}

static int grpc_code_for_http(int status)
{
    switch (status) {
    case 400:
        return PL_GRPC_INVALID_ARGUMENT;
    case 401:
        return PL_GRPC_UNAUTHENTICATED;
    case 403:
        return 7;
    case 404:
        return PL_GRPC_UNIMPLEMENTED;
    case 413:
        return PL_GRPC_RESOURCE_EXHAUSTED;
    case 415:
        return PL_GRPC_UNIMPLEMENTED;
    case 429:
        return PL_GRPC_RESOURCE_EXHAUSTED;
    case 502:
    case 503:
    case 504:
        return PL_GRPC_UNAVAILABLE;
    case 500:
        return PL_GRPC_INTERNAL;
    }
    return PL_GRPC_UNKNOWN;
}

/* An error answer: a google.rpc.Status encoded like the request. */
static void http_status_answer(pl_http_response *res, body_format format, int status,
                               const char *message, bool retry)
{
    pl_buf body;
    pl_buf_init(&body);
    int64_t delay = retry ? (int64_t)PL_RETRY_AFTER_SECONDS * 1000000000 : -1;
    bool ok = format == FORMAT_JSON
                  ? pl_rpc_status_encode_json(&body, grpc_code_for_http(status), message, delay)
                  : pl_rpc_status_encode(&body, grpc_code_for_http(status), message, delay);
    if (!ok || !pl_buf_ok(&body)) {
        pl_buf_free(&body);
        static const char fallback[] =
            "{\"code\": 13, \"message\": \"failed to marshal error message\"}";
        static const pl_http_header h[] = {{"Content-Type", 12, "application/json", 16}};
        pl_http_respond(res, 500, h, 1, fallback, sizeof(fallback) - 1);
        return;
    }
    char after[16];
    snprintf(after, sizeof(after), "%d", PL_RETRY_AFTER_SECONDS);
    pl_http_header h[2] = {
        {"Content-Type", 12, format == FORMAT_JSON ? "application/json" : "application/x-protobuf",
         format == FORMAT_JSON ? 16u : 22u},
        {"Retry-After", 11, after, strlen(after)},
    };
    pl_http_respond(res, status, h, retry ? 2 : 1, body.data, body.len);
    pl_buf_free(&body);
}

static void http_handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    otlp_receiver *r = arg;
    int signal = -1;
    for (int s = 0; s < PL_SIGNAL_COUNT; s++) {
        if (strcmp(req->path, r->http_paths[s]) == 0) {
            signal = s;
            break;
        }
    }
    if (signal < 0 || !r->next[signal]) {
        http_text(res, 404, "404 page not found\n");
        return;
    }
    if (strcmp(req->method, "POST") != 0) {
        http_text(res, 405, "405 method not allowed, supported: [POST]");
        return;
    }
    size_t ct_len = 0, ce_len = 0;
    const char *ct = pl_http_header_get(req, "content-type", &ct_len);
    const char *ce = pl_http_header_get(req, "content-encoding", &ce_len);
    body_format format;
    bool ct_known = true;
    if (ct && media_type_is(ct, ct_len, "application/x-protobuf"))
        format = FORMAT_PROTOBUF;
    else if (ct && media_type_is(ct, ct_len, "application/json"))
        format = FORMAT_JSON;
    else {
        format = FORMAT_JSON;
        ct_known = false;
    }
    pl_encoding enc = PL_ENCODING_IDENTITY;
    if (ce && pl_encoding_parse(ce, ce_len, &enc) != 0) {
        char msg[160];
        snprintf(msg, sizeof(msg), "unsupported Content-Encoding: %.*s",
                 (int)(ce_len > 64 ? 64 : ce_len), ce);
        /* 415: the status for an unsupported encoding (the
         * Collector says 400, which clients treat the same: no retry). */
        http_status_answer(res, format, 415, msg, false);
        return;
    }
    if (!ct_known) {
        http_text(res, 415,
                  "415 unsupported media type, supported: [application/json, "
                  "application/x-protobuf]");
        return;
    }
    if (format == FORMAT_JSON && (signal == PL_SIGNAL_LOGS || signal == PL_SIGNAL_METRICS)) {
        http_status_answer(res, format, 415,
                           "OTLP/JSON is not supported for logs and metrics pass-through; "
                           "send application/x-protobuf",
                           false);
        return;
    }
    pl_err err = {{0}};
    if (req->too_large) {
        snprintf(err.msg, sizeof(err.msg), "request body larger than %zu bytes",
                 r->max_request_body_size);
        http_status_answer(res, format, 413, err.msg, false);
        return;
    }
    if (memory_short(r)) {
        http_status_answer(res, format, 503, memory_short_message, true);
        return;
    }
    uint8_t *owner;
    size_t owner_size;
    pl_status st;
    if (enc == PL_ENCODING_IDENTITY) {
        owner_size = req->body_len;
        owner = pl_http_request_take_body(req);
        if (!owner)
            owner = calloc(1, 1);
        st = owner ? PL_OK : pl_errf(&err, PL_ERR_NOMEM, "out of memory");
    } else {
        st = pl_decompress(enc, req->body ? req->body : (const uint8_t *)"", req->body_len,
                           r->max_request_body_size, &owner, &owner_size, &err);
        if (st == PL_ERR_TOO_LARGE)
            snprintf(err.msg, sizeof(err.msg), "decompressed request body larger than %zu bytes",
                     r->max_request_body_size);
    }
    pl_batch *b = NULL;
    if (st == PL_OK)
        st = decode_request((pl_signal)signal, format, owner, owner_size, owner, owner_size, &b,
                            &err);
    if (st == PL_OK) {
        add_metadata(b, req, r->http_metadata);
        st = deliver(r, (pl_signal)signal, b, &err);
    }
    if (st == PL_OK) {
        pl_buf body;
        pl_buf_init(&body);
        bool ok = format == FORMAT_JSON
                      ? pl_otlp_encode_export_response_json(&body, (pl_signal)signal, 0, NULL)
                      : pl_otlp_encode_export_response(&body, 0, NULL);
        pl_http_header h = {"Content-Type", 12,
                            format == FORMAT_JSON ? "application/json" : "application/x-protobuf",
                            format == FORMAT_JSON ? 16u : 22u};
        if (ok && pl_buf_ok(&body))
            pl_http_respond(res, 200, &h, 1, body.data, body.len);
        else
            http_status_answer(res, format, 503, "out of memory", true);
        pl_buf_free(&body);
        return;
    }
    if (st == PL_ERR_INVALID || st == PL_ERR_TOO_LARGE)
        pl_debug(r->id, "%s %s: %s", req->peer, req->path, err.msg);
    int status = pl_status_http(st);
    http_status_answer(res, format, status, err.msg, status == 429 || status == 503);
}

/* ---- lifecycle ---------------------------------------------------------- */

static pl_status otlp_start(void *self, pl_err *err)
{
    otlp_receiver *r = self;
    if (r->grpc_enabled) {
        r->grpc_server =
            pl_http_server_start(r->loop, r->grpc_endpoint, &r->grpc_opt, grpc_handler, r, err);
        if (!r->grpc_server)
            return PL_ERR_INTERNAL;
        pl_info(r->id, "OTLP/gRPC listening on %s", r->grpc_endpoint);
    }
    if (r->http_enabled) {
        r->http_server =
            pl_http_server_start(r->loop, r->http_endpoint, &r->http_opt, http_handler, r, err);
        if (!r->http_server) {
            pl_http_server_close(r->grpc_server);
            r->grpc_server = NULL;
            return PL_ERR_INTERNAL;
        }
        pl_info(r->id, "OTLP/HTTP listening on %s", r->http_endpoint);
    }
    return PL_OK;
}

static void otlp_shutdown(void *self)
{
    otlp_receiver *r = self;
    pl_http_server_close(r->grpc_server);
    pl_http_server_close(r->http_server);
    r->grpc_server = r->http_server = NULL;
}

static void otlp_destroy(void *self)
{
    otlp_receiver *r = self;
    if (!r)
        return;
    otlp_shutdown(r);
    free(r);
}

const pl_component_type pl_receiver_otlp = {
    .type = "otlp",
    .kind = PL_KIND_RECEIVER,
    .signals = PL_SIGNALS_ALL,
    .description = "OTLP over gRPC and HTTP (protobuf, JSON; gzip, zstd, deflate): traces and "
                   "profiles decoded, logs and metrics passed through",
    .config = &otlp_section,
    .create = otlp_create,
    .start = otlp_start,
    .shutdown = otlp_shutdown,
    .destroy = otlp_destroy,
};
