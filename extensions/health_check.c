/*
 * health_check.c: the `health_check` extension, as in the OpenTelemetry
 * Collector. Most Collector configuration files people copy define it and
 * list it under service.extensions, and Kubernetes probes point at its port;
 * without it such a file would not load. It answers GET (and HEAD) on
 * `endpoint` + `path` with 200 and {"status":"Server available",...} while
 * the service runs, 503 {"status":"Server not available"} once it is
 * shutting down, and 503 {"status":"degraded","reason":...} while a
 * component cannot do its work (a store or queue that cannot write: it
 * refuses data meanwhile, so a readiness probe should send traffic
 * elsewhere; see docs/RELIABILITY.md). The same information is on the telemetry address's
 * /health; this is only the Collector-compatible front door.
 *
 * It answers from a thread of its own, with its own libuv loop, like the
 * telemetry endpoint (pipeline/telemetry_thread.c): a probe must not wait
 * behind a heavy request on the pipeline loop or on a worker. What the two
 * threads share: `available` and `up_since_ns` (atomic), the path and id
 * (fixed before the thread starts); the server lives on the thread's loop.
 *
 * Trade-off: the Collector's optional per-pipeline checks
 * (check_collector_pipeline, deprecated there) are not offered: an unknown
 * key is still an error, so nothing is silently ignored.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/component.h"
#include "core/stats.h"
#include "core/log.h"
#include "extensions/auth.h"
#include "net/http_server.h"

#include "extensions/health_check.config.h"

static int hc_validate(void *cfg, pl_cfg_ctx *ctx)
{
    hc_cfg *c = cfg;
    if (!c->path || c->path[0] != '/') {
        pl_cfg_errorf(ctx, "path", "must start with '/'");
        return 1;
    }
    return 0;
}

#include "extensions/health_check.config.inc"

typedef struct health_check {
    char *id;
    char *endpoint;
    char *path;
    pl_listener_security sec;
    bool available;       /* atomic: set on the pipeline loop, read by the handler */
    uint64_t up_since_ns; /* atomic */
    /* the health thread: its loop, the server on it, the async that stops it */
    bool running;
    uv_thread_t thread;
    uv_loop_t loop;
    uv_async_t stop;
    uv_sem_t ready;
    pl_http_server *server; /* health thread only (and before `ready`) */
    pl_err err;
} health_check;

static void hc_handle(void *arg, pl_http_request *req, pl_http_response *res)
{
    health_check *h = arg;
    bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
    pl_http_header ct = {"Content-Type", 12, "application/json", 16};
    if (!get || strcmp(req->path, h->path) != 0) {
        static const char nf[] = "{\"status\":\"not found\"}\n";
        pl_http_respond(res, 404, &ct, 1, nf, sizeof(nf) - 1);
        return;
    }
    if (!__atomic_load_n(&h->available, __ATOMIC_ACQUIRE)) {
        static const char na[] = "{\"status\":\"Server not available\"}\n";
        pl_http_respond(res, 503, &ct, 1, na, sizeof(na) - 1);
        return;
    }
    char since[40] = "";
    uint64_t up_since = __atomic_load_n(&h->up_since_ns, __ATOMIC_RELAXED);
    time_t secs = (time_t)(up_since / 1000000000ull);
    struct tm tm;
    if (gmtime_r(&secs, &tm))
        strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &tm);
    uint64_t now = pl_time_now_ns();
    double uptime = now > up_since ? (double)(now - up_since) / 1e9 : 0;
    char reason[1024];
    size_t degraded = pl_stats_degraded(reason, sizeof(reason));
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_printf(&b, "{\"status\":\"%s\",\"upSince\":\"%s\",\"uptime\":\"%.3fs\"",
                  degraded ? "degraded" : "Server available", since, uptime);
    if (degraded) {
        pl_buf_printf(&b, ",\"reason\":");
        pl_buf_json_string(&b, reason, strlen(reason));
    }
    pl_buf_printf(&b, "}\n");
    if (pl_buf_ok(&b))
        pl_http_respond(res, degraded ? 503 : 200, &ct, 1, b.data, b.len);
    else
        pl_http_respond(res, 500, NULL, 0, "out of memory\n", 14);
    pl_buf_free(&b);
}

static pl_status hc_create(const pl_create_settings *settings, const void *config, void **out,
                           pl_err *err)
{
    const hc_cfg *c = config;
    health_check *h = calloc(1, sizeof(*h));
    if (!h)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    h->id = strdup(settings->id ? settings->id : "health_check");
    h->endpoint = strdup(c->endpoint ? c->endpoint : "127.0.0.1:13133");
    h->path = strdup(c->path ? c->path : "/");
    if (!h->id || !h->endpoint || !h->path ||
        pl_listener_security_init(&h->sec, settings->host, &c->tls, NULL, NULL, err) != PL_OK) {
        free(h->id);
        free(h->endpoint);
        free(h->path);
        free(h);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    *out = h;
    return PL_OK;
}

/* ---- the health thread --------------------------------------------------- */

static void on_stop(uv_async_t *a)
{
    health_check *h = a->data;
    if (h->server) {
        pl_http_server_close(h->server);
        h->server = NULL;
    }
    uv_close((uv_handle_t *)&h->stop, NULL);
}

static void hc_thread(void *arg)
{
    health_check *h = arg;
    pl_http_server_options opts = {0};
    opts.max_body_size = 4096;
    opts.max_connections = 64;
    opts.http1 = true;
    opts.name = h->id;
    pl_listener_security_apply(&h->sec, &opts);
    h->server = pl_http_server_start(&h->loop, h->endpoint, &opts, hc_handle, h, &h->err);
    bool ok = h->server != NULL;
    uv_sem_post(&h->ready); /* h->server and h->err are read by hc_start after this */
    if (!ok) {
        uv_close((uv_handle_t *)&h->stop, NULL);
        uv_run(&h->loop, UV_RUN_DEFAULT);
        return;
    }
    uv_run(&h->loop, UV_RUN_DEFAULT); /* until on_stop closed the server and itself */
}

static pl_status hc_start(void *self, pl_err *err)
{
    health_check *h = self;
    if (uv_loop_init(&h->loop) != 0)
        return pl_errf(err, PL_ERR_INTERNAL, "cannot create the health check loop");
    uv_async_init(&h->loop, &h->stop, on_stop);
    h->stop.data = h;
    if (uv_sem_init(&h->ready, 0) != 0) {
        uv_close((uv_handle_t *)&h->stop, NULL);
        uv_run(&h->loop, UV_RUN_DEFAULT);
        uv_loop_close(&h->loop);
        return pl_errf(err, PL_ERR_INTERNAL, "cannot create a semaphore");
    }
    __atomic_store_n(&h->up_since_ns, pl_time_now_ns(), __ATOMIC_RELAXED);
    __atomic_store_n(&h->available, true, __ATOMIC_RELEASE);
    if (uv_thread_create(&h->thread, hc_thread, h) != 0) {
        uv_sem_destroy(&h->ready);
        uv_close((uv_handle_t *)&h->stop, NULL);
        uv_run(&h->loop, UV_RUN_DEFAULT);
        uv_loop_close(&h->loop);
        __atomic_store_n(&h->available, false, __ATOMIC_RELEASE);
        return pl_errf(err, PL_ERR_INTERNAL, "cannot start the health check thread");
    }
    uv_sem_wait(&h->ready);
    uv_sem_destroy(&h->ready);
    if (!h->server) { /* the thread has finished: err says why (address in use, ...) */
        uv_thread_join(&h->thread);
        uv_loop_close(&h->loop);
        __atomic_store_n(&h->available, false, __ATOMIC_RELEASE);
        *err = h->err;
        return PL_ERR_INTERNAL;
    }
    h->running = true;
    pl_info(h->id, "health check on %s://%s%s", pl_listener_security_scheme(&h->sec), h->endpoint,
            h->path);
    return PL_OK;
}

static void hc_shutdown(void *self)
{
    health_check *h = self;
    __atomic_store_n(&h->available, false, __ATOMIC_RELEASE);
    if (h->running) {
        h->running = false;
        uv_async_send(&h->stop);
        uv_thread_join(&h->thread);
        if (uv_loop_close(&h->loop) != 0)
            pl_warn(h->id, "health check loop still had handles at shutdown");
    }
}

static void hc_destroy(void *self)
{
    health_check *h = self;
    if (!h)
        return;
    hc_shutdown(h); /* the server, if shutdown did not run */
    free(h->id);
    free(h->endpoint);
    free(h->path);
    pl_listener_security_free(&h->sec);
    free(h);
}

const pl_component_type pl_extension_health_check = {
    PL_COMPONENT_HEAD("health_check", PL_KIND_EXTENSION, 0, &hc_section),
    .description = "answers health checks like the Collector's health_check extension "
                   "(200 while running, 503 while degraded or shutting down)",
    PL_COMPONENT_LIFECYCLE(hc_create, hc_start, hc_shutdown, hc_destroy),
};
