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
 * The answering itself is in otlp_handler.c, shared with the pyroscope
 * receiver (which takes OTLP profiles on the Pyroscope port). Zero-copy: the
 * request body (or its decompressed copy) is adopted by the batch, and
 * decoded strings point into it.
 *
 * Config follows the Collector: protocols.grpc and protocols.http are each
 * enabled by being present, even empty (`grpc:` or `grpc: {}`). The loader
 * fills absent sections with defaults, so the protocols section's validate
 * hook looks at the YAML mapping itself to tell present from absent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/decode.h"
#include "core/component.h"
#include "core/log.h"
#include "extensions/auth.h"
#include "net/http_server.h"
#include "receivers/otlp_handler.h"

/* ---- configuration ------------------------------------------------------ */

#include "receivers/otlp.config.h"

static int validate_path(const char *path, pl_cfg_ctx *ctx, const char *key)
{
    if (path && path[0] && strpbrk(path, "?# \t")) {
        pl_cfg_errorf(ctx, key, "'%s' is not a URL path", path);
        return 1;
    }
    return 0;
}

/* The Collector's confignet transports: proflink listens on TCP only. */
static int validate_transport(const char *t, pl_cfg_ctx *ctx)
{
    if (!t || strcmp(t, "tcp") == 0 || strcmp(t, "tcp4") == 0 || strcmp(t, "tcp6") == 0)
        return 0;
    if (strcmp(t, "unix") == 0)
        pl_cfg_errorf(ctx, "transport",
                      "unix sockets are not supported by proflink; listen on tcp (host:port)");
    else
        pl_cfg_errorf(ctx, "transport", "unknown transport '%s' (tcp, tcp4 or tcp6)", t);
    return 1;
}

static int validate_grpc(void *cfg, pl_cfg_ctx *ctx)
{
    return validate_transport(((otlp_grpc_config *)cfg)->transport, ctx);
}

static int validate_http(void *cfg, pl_cfg_ctx *ctx)
{
    otlp_http_config *h = cfg;
    int errors = validate_transport(h->transport, ctx);
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
    /* A protocol that is not enabled listens nowhere: its default endpoint
     * must not take part in the address checks (two receivers with only
     * grpc would otherwise share the default HTTP port). */
    if (!p->grpc_enabled) {
        free(p->grpc.endpoint);
        p->grpc.endpoint = NULL;
    }
    if (!p->http_enabled) {
        free(p->http.endpoint);
        p->http.endpoint = NULL;
    }
    return 0;
}

#include "receivers/otlp.config.inc"

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
    /* with service.workers > 1: one server per worker loop (SO_REUSEPORT) */
    pl_http_server **worker_servers; /* [2 * workers]: gRPC ones, then HTTP ones */
    unsigned n_workers;
    const pl_host *host;        /* the worker pool (NULL: none) */
    uint64_t *refused_requests; /* refused before decoding: memory short, pushing back */
    uint64_t pushback_until[PL_SIGNAL_COUNT]; /* see pl_otlp_handler */
    pl_otlp_handler grpc_handler, http_handler;
    pl_listener_security grpc_sec, http_sec;
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
    r->host = settings->host;
    r->refused_requests =
        r->stats ? pl_stats_counter(r->stats, "refused_requests",
                                    "requests refused before decoding: memory is short, or the "
                                    "pipeline refused the one before")
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
    r->grpc_handler = (pl_otlp_handler){
        .id = r->id,
        .stats = r->stats,
        .max_recv_msg_size = r->max_recv_msg_size,
        .grpc_metadata = r->grpc_metadata,
        .refused_requests = r->refused_requests,
        .host = r->host,
        .pushback_until = r->pushback_until,
    };
    r->http_handler = (pl_otlp_handler){
        .id = r->id,
        .stats = r->stats,
        .max_request_body_size = r->max_request_body_size,
        .http_metadata = r->http_metadata,
        .refused_requests = r->refused_requests,
        .host = r->host,
        .pushback_until = r->pushback_until,
    };
    for (int s = 0; s < PL_SIGNAL_COUNT; s++) {
        r->grpc_handler.next[s] = r->http_handler.next[s] = r->next[s];
        /* adding 0 shows each transport's series, at zero, from the start */
        if (r->next[s] && r->grpc_enabled)
            pl_stats_add_via(r->stats, PL_TRANSPORT_GRPC, (pl_signal)s, PL_STAT_ACCEPTED, 0);
        if (r->next[s] && r->http_enabled)
            pl_stats_add_via(r->stats, PL_TRANSPORT_HTTP, (pl_signal)s, PL_STAT_ACCEPTED, 0);
    }
    r->grpc_opt = (pl_http_server_options){
        .max_body_size = pl_otlp_grpc_body_limit(r->max_recv_msg_size),
        .max_connections = g->max_connections > 0 ? (unsigned)g->max_connections : 0,
        .max_connections_per_client =
            g->max_connections_per_client > 0 ? (unsigned)g->max_connections_per_client : 0,
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
        .max_connections_per_client =
            h->max_connections_per_client > 0 ? (unsigned)h->max_connections_per_client : 0,
        .header_timeout_ms =
            h->read_header_timeout_ns > 0 ? (uint64_t)h->read_header_timeout_ns / 1000000 : 0,
        .idle_timeout_ms = h->idle_timeout_ns > 0 ? (uint64_t)h->idle_timeout_ns / 1000000 : 0,
        .http1 = true,
        .name = r->http_name,
        .deliver_too_large = true,
    };
    pl_status st = PL_OK;
    if (r->grpc_enabled)
        st = pl_listener_security_init(&r->grpc_sec, r->host, &g->tls, &g->auth, NULL, err);
    if (st == PL_OK && r->http_enabled)
        st = pl_listener_security_init(&r->http_sec, r->host, &h->tls, &h->auth, &h->cors, err);
    if (st != PL_OK) {
        pl_listener_security_free(&r->grpc_sec);
        free(r);
        return st;
    }
    pl_listener_security_apply(&r->grpc_sec, &r->grpc_opt);
    pl_listener_security_apply(&r->http_sec, &r->http_opt);
    *out_self = r;
    return PL_OK;
}

/* ---- request handling (receivers/otlp_handler.c) ------------------------ */

static void grpc_handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    otlp_receiver *r = arg;
    pl_otlp_handle_grpc(&r->grpc_handler, req, res);
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
    pl_otlp_handle_http(&r->http_handler, signal, req, res);
}

/* ---- lifecycle ---------------------------------------------------------- */

/* ---- listening on the worker loops ------------------------------------- */

static void close_worker_servers(otlp_receiver *r)
{
    if (r->worker_servers) { /* each half holds one server per worker */
        pl_host_close(r->host, r->worker_servers, r->n_workers);
        pl_host_close(r->host, r->worker_servers + r->n_workers, r->n_workers);
    }
    free(r->worker_servers);
    r->worker_servers = NULL;
    r->n_workers = 0;
}

static pl_status otlp_start(void *self, pl_err *err)
{
    otlp_receiver *r = self;
    unsigned workers = pl_host_workers_count(r->host);
    /* Authenticators are thread-safe (extensions/auth.c): with or without
     * one, every worker listens. */
    if (workers > 1) {
        r->worker_servers = calloc(2 * workers, sizeof(*r->worker_servers));
        if (!r->worker_servers)
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        r->n_workers = workers;
        pl_status st = PL_OK;
        if (r->grpc_enabled)
            st = pl_host_listen(r->host, r->grpc_endpoint, &r->grpc_opt, grpc_handler, r,
                                r->worker_servers, err);
        if (st == PL_OK && r->http_enabled)
            st = pl_host_listen(r->host, r->http_endpoint, &r->http_opt, http_handler, r,
                                r->worker_servers + workers, err);
        if (st != PL_OK) {
            close_worker_servers(r);
            return st;
        }
        if (r->grpc_enabled)
            pl_info(r->id, "OTLP/gRPC listening on %s%s (%u workers)", r->grpc_endpoint,
                    r->grpc_opt.tls ? " (TLS)" : "", workers);
        if (r->http_enabled)
            pl_info(r->id, "OTLP/HTTP listening on %s://%s (%u workers)",
                    pl_listener_security_scheme(&r->http_sec), r->http_endpoint, workers);
        return PL_OK;
    }
    if (r->grpc_enabled) {
        r->grpc_server =
            pl_http_server_start(r->loop, r->grpc_endpoint, &r->grpc_opt, grpc_handler, r, err);
        if (!r->grpc_server)
            return PL_ERR_INTERNAL;
        pl_info(r->id, "OTLP/gRPC listening on %s%s", r->grpc_endpoint,
                r->grpc_opt.tls ? " (TLS)" : "");
    }
    if (r->http_enabled) {
        r->http_server =
            pl_http_server_start(r->loop, r->http_endpoint, &r->http_opt, http_handler, r, err);
        if (!r->http_server) {
            pl_http_server_close(r->grpc_server);
            r->grpc_server = NULL;
            return PL_ERR_INTERNAL;
        }
        pl_info(r->id, "OTLP/HTTP listening on %s://%s", pl_listener_security_scheme(&r->http_sec),
                r->http_endpoint);
    }
    return PL_OK;
}

static void otlp_shutdown(void *self)
{
    otlp_receiver *r = self;
    close_worker_servers(r);
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
    pl_listener_security_free(&r->grpc_sec);
    pl_listener_security_free(&r->http_sec);
    free(r);
}

const pl_component_type pl_receiver_otlp = {
    PL_COMPONENT_HEAD("otlp", PL_KIND_RECEIVER, PL_SIGNALS_ALL, &otlp_section),
    .description = "OTLP over gRPC and HTTP (protobuf, JSON; gzip, zstd, deflate): traces and "
                   "profiles decoded, logs and metrics passed through",
    PL_COMPONENT_LIFECYCLE(otlp_create, otlp_start, otlp_shutdown, otlp_destroy),
};
