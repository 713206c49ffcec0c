/*
 * telemetry.c: /metrics and /health on the shared HTTP server (see
 * telemetry.h).
 *
 * The metrics text itself (names, labels, families) is rendered by
 * telemetry_metrics.c on each scrape, straight from the live pl_stats list.
 */
#include "telemetry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/component.h"
#include "core/stats.h"
#include "net/http_server.h"
#include "pipeline/version.h"

struct pl_telemetry {
    pl_http_server *server;
    pl_telemetry_info_fn info;
    void *arg;
};

static void handle(void *arg, pl_http_request *req, pl_http_response *res)
{
    pl_telemetry *t = arg;
    bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
    if (get && strcmp(req->path, "/metrics") == 0) {
        size_t len = 0;
        char *text = pl_telemetry_render_metrics(&len);
        pl_telemetry_info info = {"running", 0, 0};
        if (t->info)
            t->info(t->arg, &info);
        pl_buf b;
        pl_buf_init(&b);
        if (text)
            pl_buf_append(&b, text, len);
        free(text);
        pl_buf_printf(&b,
                      "# HELP proflink_build_info The running proflink's version.\n"
                      "# TYPE proflink_build_info gauge\n"
                      "proflink_build_info{version=\"%s\"} 1\n"
                      "# HELP proflink_up 1 while every pipeline runs, 0 while starting, "
                      "reloading or draining.\n"
                      "# TYPE proflink_up gauge\n"
                      "proflink_up %d\n"
                      "# HELP proflink_config_reloads_total Configuration reloads (SIGHUP) by "
                      "result.\n"
                      "# TYPE proflink_config_reloads_total counter\n"
                      "proflink_config_reloads_total{result=\"success\"} %llu\n"
                      "proflink_config_reloads_total{result=\"failure\"} %llu\n",
                      PL_VERSION, strcmp(info.state, "running") == 0,
                      (unsigned long long)info.reloads_ok, (unsigned long long)info.reloads_failed);
        if (!text || !pl_buf_ok(&b)) {
            pl_buf_free(&b);
            pl_http_respond(res, 500, NULL, 0, "out of memory\n", 14);
            return;
        }
        pl_http_header h = {"Content-Type", 12, "text/plain; version=0.0.4; charset=utf-8", 40};
        pl_http_respond(res, 200, &h, 1, b.data, b.len);
        pl_buf_free(&b);
        return;
    }
    if (get && (strcmp(req->path, "/health") == 0 || strcmp(req->path, "/") == 0)) {
        pl_telemetry_info info = {"running", 0, 0};
        if (t->info)
            t->info(t->arg, &info);
        const char *state = info.state;
        bool ok = strcmp(state, "running") == 0;
        /* Running but a store or queue cannot write: 503 and why, so a
         * load balancer's readiness check sends traffic elsewhere (this
         * instance refuses it anyway, with Retry-After). */
        char reason[1024];
        size_t degraded = ok ? pl_stats_degraded(reason, sizeof(reason)) : 0;
        pl_buf b;
        pl_buf_init(&b);
        pl_buf_printf(&b, "{\"status\":\"%s\"", !ok ? state : degraded ? "degraded" : "ok");
        if (degraded) {
            pl_buf_printf(&b, ",\"reason\":");
            pl_buf_json_string(&b, reason, strlen(reason));
        }
        pl_buf_printf(&b, "}\n");
        pl_http_header h = {"Content-Type", 12, "application/json", 16};
        if (pl_buf_ok(&b))
            pl_http_respond(res, ok && !degraded ? 200 : 503, &h, 1, b.data, b.len);
        else
            pl_http_respond(res, 500, NULL, 0, "out of memory\n", 14);
        pl_buf_free(&b);
        return;
    }
    static const char nf[] = "not found: try /metrics or /health\n";
    pl_http_respond(res, get ? 404 : 405, NULL, 0, nf, sizeof(nf) - 1);
}

pl_telemetry *pl_telemetry_start(uv_loop_t *loop, const char *address, pl_telemetry_info_fn info,
                                 void *arg, pl_err *err)
{
    return pl_telemetry_start_tls(loop, address, NULL, info, arg, err);
}

pl_telemetry *pl_telemetry_start_tls(uv_loop_t *loop, const char *address,
                                     const struct pl_tls_server_config *tls,
                                     pl_telemetry_info_fn info, void *arg, pl_err *err)
{
    pl_telemetry *t = calloc(1, sizeof(*t));
    if (!t) {
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    t->info = info;
    t->arg = arg;
    pl_http_server_options opts = {0};
    opts.max_body_size = 64 * 1024;
    opts.max_connections = 64;
    opts.http1 = true;
    opts.name = "telemetry";
    opts.tls = tls;
    t->server = pl_http_server_start(loop, address, &opts, handle, t, err);
    if (!t->server) {
        free(t);
        return NULL;
    }
    return t;
}

int pl_telemetry_port(const pl_telemetry *t)
{
    return t && t->server ? pl_http_server_port(t->server) : -1;
}

void pl_telemetry_stop(pl_telemetry *t)
{
    if (!t)
        return;
    pl_http_server_close(t->server);
    free(t);
}
