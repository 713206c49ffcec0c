/*
 * service.c: lifecycle of the running collector (see service.h).
 *
 * Everything happens on the one libuv loop, except /metrics and /health,
 * which run on a thread of their own (pipeline/telemetry_thread.h) and read
 * the state below through atomic loads. Signals arrive as uv_signal
 * callbacks, and the drain is a timer that polls the exporters' pending
 * counts. Polling (every 20 ms) instead of a completion callback keeps the
 * component contract to one `pending` hook; the cost is at most 20 ms of
 * extra shutdown time. Destroy hooks run from a later timer tick than the
 * shutdown hooks, so the loop has run and closed handles are released, as
 * component.h promises.
 */
#include "service.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/log.h"
#include "extensions/auth.h"
#include "net/tls.h"
#include "pipeline/telemetry_thread.h"
#include "pipeline/registry.h"
#include "pipeline/workers.h"

#define DRAIN_POLL_MS 20

struct pl_service {
    uv_loop_t *loop;
    /* handed to every graph: the worker pool's hooks (none without a pool)
     * and the service's own authenticator registry and claimed files */
    pl_host host;
    volatile int memory_state; /* host.memory: the memory_limiter's pl_memory_state */
    pl_config *config;         /* the running configuration */
    pl_config *failed_config;  /* a swap that failed to start: freed with graph */
    /* A reload's replaced components, draining while the new graph runs. */
    pl_graph *retiring;
    pl_config *retiring_config;
    uv_timer_t retire_timer;
    uint64_t retire_deadline_ns;
    pl_graph *graph;
    pl_service_state state;
    bool handle_signals;
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_timer_t drain_timer;
    uint64_t drain_deadline_ns;
    bool reload_queued; /* SIGHUP while a reload was running */
    int exit_code;
    unsigned reloads;               /* switched to a new configuration */
    unsigned reload_failures;       /* refused or rolled back */
    pl_telemetry_thread *telemetry; /* /metrics and /health on their own thread */
    char *telemetry_address;
    bool telemetry_tls;      /* the running endpoint serves TLS */
    uv_timer_t zombie_timer; /* destroys a graph that failed to start */
    pl_graph *zombie;
    pl_config *zombie_config; /* its config, freed with it (may be NULL) */
    bool in_loop;             /* false only while pl_service_start runs */
};

/* Level, encoding and fields of proflink's own log, from the config. */
static void apply_logging(const pl_config *cfg)
{
    const pl_strmap *f = &cfg->service.telemetry.logs.initial_fields;
    pl_log_set_level((pl_log_level)cfg->log_level);
    pl_log_set_encoding((pl_log_encoding)cfg->log_encoding);
    pl_log_set_fields(f->keys, f->values, f->n);
}

static const char *state_name(pl_service_state s)
{
    switch (s) {
    case PL_SERVICE_STARTING:
        return "starting";
    case PL_SERVICE_RUNNING:
        return "running";
    case PL_SERVICE_RELOADING:
        return "reloading";
    case PL_SERVICE_DRAINING:
        return "draining";
    case PL_SERVICE_STOPPED:
        return "stopped";
    }
    return "unknown";
}

/* The state is read by the telemetry thread: written with atomic stores. */
static void set_state(pl_service *s, pl_service_state state)
{
    __atomic_store_n(&s->state, state, __ATOMIC_RELEASE);
}

/* Runs on the telemetry thread: atomic loads only. */
static void telemetry_info(void *arg, pl_telemetry_info *out)
{
    pl_service *s = arg;
    out->state = state_name(__atomic_load_n(&s->state, __ATOMIC_ACQUIRE));
    out->reloads_ok = __atomic_load_n(&s->reloads, __ATOMIC_RELAXED);
    out->reloads_failed = __atomic_load_n(&s->reload_failures, __ATOMIC_RELAXED);
}

/* Starts or moves the telemetry endpoint to the config's address. A failure
 * is fatal only when the file asked for that address explicitly: the default
 * port must not stop a collector whose neighbour already took it. */
static int telemetry_apply(pl_service *s, const pl_config *cfg, pl_err *err)
{
    const char *addr = pl_config_metrics_address(cfg);
    const pl_tls_server_config *tls = pl_config_metrics_tls(cfg);
    /* With TLS the endpoint restarts on every reload: its files may have
     * changed, and its settings are not compared one by one. */
    if (s->telemetry && addr && s->telemetry_address && strcmp(addr, s->telemetry_address) == 0 &&
        !tls && !s->telemetry_tls)
        return 0;
    if (s->telemetry) {
        pl_telemetry_thread_stop(s->telemetry);
        s->telemetry = NULL;
    }
    free(s->telemetry_address);
    s->telemetry_address = NULL;
    if (!addr)
        return 0;
    pl_err terr = {{0}};
    s->telemetry = pl_telemetry_thread_start_tls(addr, tls, telemetry_info, s, &terr);
    s->telemetry_tls = s->telemetry && tls;
    if (!s->telemetry) {
        if (cfg->metrics_address_set) {
            pl_errf(err, PL_ERR_INTERNAL, "service.telemetry.metrics.address: %s", terr.msg);
            return -1;
        }
        pl_warn("telemetry", "metrics endpoint not started: %s", terr.msg);
        return 0;
    }
    s->telemetry_address = strdup(addr);
    if (s->state != PL_SERVICE_STARTING) /* at start-up, announced once running */
        pl_info("telemetry", "metrics and health on %s://%s/metrics, /health",
                tls ? "https" : "http", addr);
    return 0;
}

/* One line per pipeline, so a newcomer sees how data flows. */
static void log_pipelines(const pl_config *cfg)
{
    for (size_t p = 0; p < cfg->n_pipelines; p++) {
        const pl_config_pipeline *pl = &cfg->pipelines[p];
        char line[1024];
        size_t len = 0;
        const struct {
            const size_t *ids;
            size_t n;
        } parts[3] = {{pl->receivers, pl->n_receivers},
                      {pl->processors, pl->n_processors},
                      {pl->exporters, pl->n_exporters}};
        line[0] = '\0';
        for (int k = 0; k < 3; k++) {
            if (parts[k].n == 0)
                continue;
            if (len && len < sizeof(line))
                len += (size_t)snprintf(line + len, sizeof(line) - len, " -> ");
            for (size_t i = 0; i < parts[k].n && len < sizeof(line); i++)
                len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s", i ? ", " : "",
                                        cfg->components[parts[k].ids[i]].id);
        }
        pl_info("service", "pipeline %s: %s", pl->name, line);
    }
}

static void on_closed_quietly(uv_handle_t *h)
{
    (void)h;
}

static void finish_stop(pl_service *s)
{
    if (s->telemetry) {
        pl_telemetry_thread_stop(s->telemetry);
        s->telemetry = NULL;
    }
    if (s->handle_signals) {
        uv_close((uv_handle_t *)&s->sig_term, on_closed_quietly);
        uv_close((uv_handle_t *)&s->sig_int, on_closed_quietly);
        uv_close((uv_handle_t *)&s->sig_hup, on_closed_quietly);
    }
    uv_close((uv_handle_t *)&s->drain_timer, on_closed_quietly);
    uv_close((uv_handle_t *)&s->zombie_timer, on_closed_quietly);
    uv_close((uv_handle_t *)&s->retire_timer, on_closed_quietly);
    set_state(s, PL_SERVICE_STOPPED);
    pl_info("service", "stopped");
    /* a handle some component left open must not keep the loop running */
    uv_stop(s->loop);
}

static void on_zombie_tick(uv_timer_t *timer)
{
    pl_service *s = timer->data;
    pl_graph_destroy(s->zombie);
    s->zombie = NULL;
    pl_config_free(s->zombie_config);
    s->zombie_config = NULL;
}

/* Builds and starts a graph for cfg; NULL with err set on failure. */
static pl_graph *graph_up(pl_service *s, const pl_config *cfg, pl_err *err)
{
    pl_graph *g = pl_graph_build_host(cfg, s->loop, &s->host, err);
    if (!g)
        return NULL;
    if (pl_graph_start(g, err) != PL_OK) {
        /* Shut down already; destroy once the loop has closed its handles:
         * inside a callback, on the next tick; before the loop runs, after
         * one non-blocking turn of it. */
        if (s->in_loop) {
            if (s->zombie) {
                pl_graph_destroy(s->zombie);
                pl_config_free(s->zombie_config);
                s->zombie_config = NULL;
            }
            s->zombie = g;
            uv_timer_start(&s->zombie_timer, on_zombie_tick, 0, 0);
        } else {
            uv_run(s->loop, UV_RUN_NOWAIT);
            pl_graph_destroy(g);
        }
        return NULL;
    }
    return g;
}

static void begin_drain(pl_service *s);

/* After a swap whose new components failed to start, and both graphs have
 * drained: the previous configuration runs again, from scratch. */
static void complete_reload(pl_service *s)
{
    pl_err err = {{0}};
    apply_logging(s->config);
    pl_graph *g = graph_up(s, s->config, &err);
    if (!g) {
        pl_error("service", "cannot restart the previous configuration: %s", err.msg);
        s->exit_code = 1;
        finish_stop(s);
        return;
    }
    s->graph = g;
    set_state(s, PL_SERVICE_RUNNING);
    pl_info("service", "the previous configuration runs again");
    if (s->reload_queued) {
        s->reload_queued = false;
        pl_service_reload(s);
    }
}

/* Destroys what a reload replaced, once drained (or at once). */
static void retire_done(pl_service *s)
{
    uv_timer_stop(&s->retire_timer);
    pl_graph_destroy(s->retiring);
    s->retiring = NULL;
    pl_config_free(s->retiring_config);
    s->retiring_config = NULL;
}

static void on_retire_tick(uv_timer_t *timer)
{
    pl_service *s = timer->data;
    size_t pending = pl_graph_pending(s->retiring);
    if (pending > 0 && pl_time_mono_ns() < s->retire_deadline_ns)
        return;
    if (pending > 0)
        pl_warn("service",
                "reload: drain deadline passed with %zu still pending in replaced "
                "exporters",
                pending);
    retire_done(s);
    if (s->reload_queued && s->state == PL_SERVICE_RUNNING) {
        s->reload_queued = false;
        pl_service_reload(s);
    }
}

static void on_drain_tick(uv_timer_t *timer)
{
    pl_service *s = timer->data;
    size_t pending = pl_graph_pending(s->graph) + pl_graph_pending(s->retiring);
    uint64_t now = pl_time_mono_ns();
    if (pending > 0 && now < s->drain_deadline_ns)
        return;
    if (pending > 0)
        pl_warn("service", "drain deadline passed with %zu still pending in exporters", pending);
    uv_timer_stop(&s->drain_timer);
    retire_done(s);
    pl_graph_destroy(s->graph);
    s->graph = NULL;
    pl_config_free(s->failed_config);
    s->failed_config = NULL;
    if (s->state == PL_SERVICE_RELOADING)
        complete_reload(s);
    else
        finish_stop(s);
}

static void begin_drain(pl_service *s)
{
    pl_graph_shutdown(s->graph);
    s->drain_deadline_ns = pl_time_mono_ns() + (uint64_t)s->config->service.shutdown_timeout;
    uv_timer_start(&s->drain_timer, on_drain_tick, 1, DRAIN_POLL_MS);
}

void pl_service_stop(pl_service *s)
{
    if (s->state == PL_SERVICE_DRAINING) { /* asked again: stop waiting */
        s->drain_deadline_ns = 0;
        return;
    }
    if (s->state == PL_SERVICE_STOPPED)
        return;
    if (s->state == PL_SERVICE_RELOADING) {
        /* both graphs are already draining; do not restart the old one */
        set_state(s, PL_SERVICE_DRAINING);
        pl_info("service", "stopping: draining in-flight data");
        return;
    }
    set_state(s, PL_SERVICE_DRAINING);
    pl_info("service", "stopping: draining in-flight data (up to %.1fs)",
            (double)s->config->service.shutdown_timeout / 1e9);
    begin_drain(s);
}

int pl_service_reload(pl_service *s)
{
    if (s->state == PL_SERVICE_RELOADING || (s->retiring && s->state == PL_SERVICE_RUNNING)) {
        s->reload_queued = true;
        return 0;
    }
    if (s->state != PL_SERVICE_RUNNING) {
        pl_warn("service", "reload ignored: proflink is %s", state_name(s->state));
        return -1;
    }
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_config *next = pl_config_reload(s->config, &errs);
    for (size_t i = 0; i < errs.n_warnings; i++)
        pl_warn("config", "%s", errs.warnings[i].text);
    if (!next) {
        for (size_t i = 0; i < errs.n; i++)
            pl_error("service", "reload: %s", errs.items[i].text);
        pl_error("service", "reload failed (%zu problem%s): keeping the running configuration",
                 errs.n, errs.n == 1 ? "" : "s");
        __atomic_fetch_add(&s->reload_failures, 1, __ATOMIC_RELAXED);
        pl_cfg_errors_free(&errs);
        return -1;
    }
    pl_cfg_errors_free(&errs);
    /* Swap: unchanged components move over with their state; only the
     * others are replaced, and drain in the background. */
    pl_graph_swap_info info;
    pl_err err = {{0}};
    pl_graph *old = s->graph;
    pl_graph *g = pl_graph_swap(old, next, &err, &info);
    if (!g) {
        pl_error("service", "reload: %s; keeping the running configuration", err.msg);
        __atomic_fetch_add(&s->reload_failures, 1, __ATOMIC_RELAXED);
        pl_config_free(next);
        return -1;
    }
    apply_logging(next);
    if (!err.msg[0] && pl_graph_start(g, &err) == PL_OK) {
        s->graph = g;
        s->retiring = old;
        s->retiring_config = s->config;
        s->config = next;
        s->retire_deadline_ns =
            pl_time_mono_ns() + (uint64_t)s->retiring_config->service.shutdown_timeout;
        uv_timer_start(&s->retire_timer, on_retire_tick, 1, DRAIN_POLL_MS);
        pl_err terr = {{0}};
        if (telemetry_apply(s, next, &terr) < 0)
            pl_error("service", "reload: %s", terr.msg);
        __atomic_fetch_add(&s->reloads, 1, __ATOMIC_RELAXED);
        log_pipelines(next);
        pl_info("service",
                "reloaded %s: %zu pipelines running; %zu components kept as they were, %zu "
                "replaced, %zu added, %zu removed",
                next->path, next->n_pipelines, info.kept, info.replaced, info.added, info.removed);
        return 0;
    }
    /* A new component failed to start (a port taken, ...): stop everything
     * of both graphs, then run the previous configuration from scratch. */
    pl_error("service", "reload: %s; starting the previous configuration again", err.msg);
    __atomic_fetch_add(&s->reload_failures, 1, __ATOMIC_RELAXED);
    pl_graph_shutdown(g);
    s->graph = g;
    s->failed_config = next;
    s->retiring = old; /* its config is s->config, which runs again */
    set_state(s, PL_SERVICE_RELOADING);
    s->drain_deadline_ns = pl_time_mono_ns() + (uint64_t)s->config->service.shutdown_timeout;
    uv_timer_start(&s->drain_timer, on_drain_tick, 1, DRAIN_POLL_MS);
    return -1;
}

static void on_signal(uv_signal_t *h, int signum)
{
    pl_service *s = h->data;
    if (signum == SIGHUP) {
        pl_info("service", "SIGHUP: reloading the configuration");
        /* Certificates first: they are re-read even when the configuration
         * itself does not load. */
        pl_tls_reload_all();
        pl_service_reload(s);
        return;
    }
    pl_info("service", "%s received", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    pl_service_stop(s);
}

pl_service *pl_service_start(uv_loop_t *loop, pl_config *config, bool handle_signals, pl_err *err)
{
    return pl_service_start_host(loop, NULL, config, handle_signals, err);
}

pl_service *pl_service_start_host(uv_loop_t *loop, const pl_host *host, pl_config *config,
                                  bool handle_signals, pl_err *err)
{
    pl_service *s = calloc(1, sizeof(*s));
    if (!s) {
        pl_config_free(config);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    s->loop = loop;
    if (host)
        s->host = *host;
    s->host.memory = &s->memory_state;
    s->host.auth = pl_auth_registry_new();
    s->host.claims = pl_claims_new();
    if (!s->host.auth || !s->host.claims) {
        pl_auth_registry_free(s->host.auth);
        pl_claims_free(s->host.claims);
        pl_config_free(config);
        free(s);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    s->config = config;
    set_state(s, PL_SERVICE_STARTING);
    s->handle_signals = handle_signals;
    apply_logging(config);
    uv_timer_init(loop, &s->drain_timer);
    s->drain_timer.data = s;
    uv_timer_init(loop, &s->zombie_timer);
    s->zombie_timer.data = s;
    uv_timer_init(loop, &s->retire_timer);
    s->retire_timer.data = s;

    if (telemetry_apply(s, config, err) == 0)
        s->graph = graph_up(s, config, err);
    if (!s->graph) {
        if (s->telemetry)
            pl_telemetry_thread_stop(s->telemetry);
        uv_close((uv_handle_t *)&s->drain_timer, NULL);
        uv_close((uv_handle_t *)&s->zombie_timer, NULL);
        uv_close((uv_handle_t *)&s->retire_timer, NULL);
        uv_run(loop, UV_RUN_NOWAIT); /* the timers live in s */
        free(s->telemetry_address);
        pl_config_free(config);
        pl_auth_registry_free(s->host.auth);
        pl_claims_free(s->host.claims);
        free(s);
        return NULL;
    }
    s->in_loop = true;
    if (handle_signals) {
        uv_signal_t *sigs[] = {&s->sig_term, &s->sig_int, &s->sig_hup};
        int nums[] = {SIGTERM, SIGINT, SIGHUP};
        for (int i = 0; i < 3; i++) {
            uv_signal_init(loop, sigs[i]);
            sigs[i]->data = s;
            uv_signal_start(sigs[i], on_signal, nums[i]);
        }
    }
    set_state(s, PL_SERVICE_RUNNING);
    if (s->telemetry_address)
        pl_info("telemetry", "metrics and health on %s://%s/metrics, /health",
                s->telemetry_tls ? "https" : "http", s->telemetry_address);
    log_pipelines(config);
    pl_info("service", "%zu pipeline%s running from %s", config->n_pipelines,
            config->n_pipelines == 1 ? "" : "s", config->path);
    return s;
}

/* pl_workers_drive's question after each turn of the loop: uv_stop() at
 * the end of a shutdown does not reach a loop driven a turn at a time. */
static bool service_running(void *arg)
{
    return pl_service_get_state(arg) != PL_SERVICE_STOPPED;
}

pl_service_state pl_service_get_state(const pl_service *s)
{
    return s->state;
}

const pl_config *pl_service_config(const pl_service *s)
{
    return s->config;
}

pl_graph *pl_service_graph(const pl_service *s)
{
    return s->graph;
}

unsigned pl_service_reloads(const pl_service *s)
{
    return s->reloads;
}

int pl_service_free(pl_service *s)
{
    if (!s)
        return 1;
    int rc = s->exit_code;
    /* replaced instances first: they may share counters with new ones */
    pl_graph_shutdown(s->retiring);
    pl_graph_destroy(s->retiring);
    pl_config_free(s->retiring_config);
    if (s->graph) { /* not stopped through pl_service_stop */
        pl_graph_shutdown(s->graph);
        pl_graph_destroy(s->graph);
    }
    pl_graph_destroy(s->zombie);
    if (s->telemetry)
        pl_telemetry_thread_stop(s->telemetry);
    free(s->telemetry_address);
    pl_config_free(s->failed_config);
    pl_config_free(s->config);
    pl_auth_registry_free(s->host.auth); /* every extension is destroyed */
    pl_claims_free(s->host.claims);      /* and every queue */
    free(s);
    return rc;
}

static void close_leftover(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

int pl_service_main(const pl_cfg_sources *sources)
{
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_config *cfg = pl_config_load(sources, pl_component_types, &errs);
    if (cfg) /* so the warnings below are already in the configured encoding */
        apply_logging(cfg);
    for (size_t i = 0; i < errs.n_warnings; i++)
        pl_warn("config", "%s", errs.warnings[i].text);
    if (!cfg) {
        pl_cfg_errors_print(&errs, stderr);
        pl_cfg_errors_free(&errs);
        return 1;
    }
    pl_cfg_errors_free(&errs);
    signal(SIGPIPE, SIG_IGN);
    /* The keyed hash's seed is made lazily on first use; make it now, before
     * the telemetry and worker threads exist, so they only ever read it. */
    pl_hash_init_();
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) {
        fprintf(stderr, "proflink: cannot create the event loop\n");
        pl_config_free(cfg);
        return 1;
    }
    pl_err err = {{0}};
    /* Receiver loops (pipeline/workers.h); the number is fixed for the
     * process's life. The pool outlives every graph: receivers close their
     * listeners on it when they shut down. */
    unsigned n_workers = cfg->service.workers > 0    ? (unsigned)cfg->service.workers
                         : cfg->service.workers == 0 ? pl_workers_default()
                                                     : 1;
    if (n_workers > 256)
        n_workers = 256;
    pl_workers *workers = NULL;
    if (n_workers > 1) {
        workers = pl_workers_start(&loop, n_workers, &err);
        if (!workers) {
            fprintf(stderr, "proflink: service.workers: %s\n", err.msg);
            pl_config_free(cfg);
            uv_loop_close(&loop);
            return 1;
        }
    }
    pl_service *s = pl_service_start_host(&loop, pl_workers_host(workers), cfg, true, &err);
    int rc;
    if (!s) {
        fprintf(stderr, "proflink: %s\n", err.msg);
        rc = 1;
        pl_workers_stop(workers);
        uv_walk(&loop, close_leftover, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
    } else {
        pl_workers_drive(workers, &loop, service_running, s);
        /* every graph is shut down: no listener is left on the workers */
        pl_workers_stop(workers);
        /* handles a component forgot to close must not keep the process
         * alive; the service's own handles finish closing here too */
        uv_walk(&loop, close_leftover, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
        rc = pl_service_free(s);
    }
    uv_loop_close(&loop);
    return rc;
}
