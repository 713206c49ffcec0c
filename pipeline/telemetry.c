/*
 * telemetry.c: /metrics and /health on the shared HTTP server (see
 * telemetry.h).
 *
 * The metrics text is rendered on each scrape straight from the live
 * pl_stats list: no second copy of the counters to keep in sync. Metric
 * families are grouped by name (each gets its HELP and TYPE once, as the
 * Prometheus text format requires) even when several components share them.
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

static uint64_t process_start_ns;

static const char *const signal_names[PL_SIGNAL_COUNT] = {"traces", "profiles", "logs", "metrics"};

static const char *stat_help(pl_stat stat)
{
    switch (stat) {
    case PL_STAT_ACCEPTED:
        return "Items the component took in.";
    case PL_STAT_REFUSED:
        return "Items the component refused (the sender was told to retry).";
    case PL_STAT_DROPPED:
        return "Items the component dropped.";
    case PL_STAT_SENT:
        return "Items the exporter delivered.";
    case PL_STAT_FAILED:
        return "Items the exporter gave up on.";
    default:
        return "";
    }
}

/* Label values are ids from the config: escape what the format requires. */
static void append_label(pl_buf *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            pl_buf_append_byte(b, '\\');
        if (*v == '\n') {
            pl_buf_append_str(b, "\\n");
            continue;
        }
        pl_buf_append_byte(b, (uint8_t)*v);
    }
}

/* HELP text: backslash and newline are the only escapes the format has. */
static void append_help(pl_buf *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            pl_buf_append_str(b, "\\\\");
        else if (*v == '\n')
            pl_buf_append_str(b, "\\n");
        else
            pl_buf_append_byte(b, (uint8_t)*v);
    }
}

/* A metric name made of [a-zA-Z0-9_] only. */
static void append_name_part(pl_buf *b, const char *s)
{
    for (; *s; s++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        pl_buf_append_byte(b, ok ? (uint8_t)c : '_');
    }
}

typedef struct extra_family {
    pl_kind kind;
    const pl_stats_extra *first;
} extra_family;

typedef struct extra_walk {
    extra_family *families;
    size_t n, cap;
    /* second pass: print the values of one family */
    pl_buf *out;
    const pl_stats *stats;
    const extra_family *printing;
} extra_walk;

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void extra_name(pl_buf *b, pl_kind kind, const pl_stats_extra *e)
{
    pl_buf_append_str(b, "proflink_");
    pl_buf_append_str(b, pl_kind_name(kind));
    pl_buf_append_byte(b, '_');
    append_name_part(b, e->name);
    if (!e->is_gauge && !ends_with(e->name, "_total"))
        pl_buf_append_str(b, "_total");
}

static void collect_family(void *arg, const pl_stats_extra *e)
{
    extra_walk *w = arg;
    pl_kind kind = w->stats->kind;
    for (size_t i = 0; i < w->n; i++)
        if (w->families[i].kind == kind && strcmp(w->families[i].first->name, e->name) == 0)
            return;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        extra_family *f = realloc(w->families, cap * sizeof(*f));
        if (!f)
            return;
        w->families = f;
        w->cap = cap;
    }
    w->families[w->n].kind = kind;
    w->families[w->n].first = e;
    w->n++;
}

static void print_family_value(void *arg, const pl_stats_extra *e)
{
    extra_walk *w = arg;
    if (strcmp(e->name, w->printing->first->name) != 0)
        return;
    extra_name(w->out, w->printing->kind, e);
    pl_buf_append_str(w->out, "{component=\"");
    append_label(w->out, w->stats->id);
    if (e->is_gauge)
        pl_buf_printf(w->out, "\"} %lld\n", (long long)pl_stats_extra_gauge(e));
    else
        pl_buf_printf(w->out, "\"} %llu\n", (unsigned long long)pl_stats_extra_counter(e));
}

static void render_process(pl_buf *b)
{
    long rss_pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        long size;
        if (fscanf(f, "%ld %ld", &size, &rss_pages) != 2)
            rss_pages = 0;
        fclose(f);
    }
    struct rusage ru;
    double cpu = 0;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
              (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    double uptime = process_start_ns ? (double)(pl_time_mono_ns() - process_start_ns) / 1e9 : 0;
    pl_buf_printf(b,
                  "# HELP proflink_process_resident_memory_bytes Resident set size.\n"
                  "# TYPE proflink_process_resident_memory_bytes gauge\n"
                  "proflink_process_resident_memory_bytes %lld\n"
                  "# HELP proflink_process_cpu_seconds_total User and system CPU time.\n"
                  "# TYPE proflink_process_cpu_seconds_total counter\n"
                  "proflink_process_cpu_seconds_total %.6f\n"
                  "# HELP proflink_process_uptime_seconds Time since the telemetry endpoint "
                  "started.\n"
                  "# TYPE proflink_process_uptime_seconds gauge\n"
                  "proflink_process_uptime_seconds %.3f\n",
                  (long long)rss_pages * (long long)sysconf(_SC_PAGESIZE), cpu, uptime);
}

char *pl_telemetry_render_metrics(size_t *len)
{
    pl_buf b;
    pl_buf_init(&b);
    pl_stats_lock(); /* components come and go on the pipeline's loop */
    static const pl_kind kinds[] = {PL_KIND_RECEIVER, PL_KIND_PROCESSOR, PL_KIND_EXPORTER};
    for (size_t k = 0; k < 3; k++) {
        bool any = false;
        for (pl_stats *s = pl_stats_list(); s; s = s->next_registered)
            any |= s->kind == kinds[k];
        if (!any)
            continue;
        for (int st = 0; st < PL_STAT_COUNT; st++) {
            /* sent and failed only mean something for exporters */
            if (kinds[k] != PL_KIND_EXPORTER && (st == PL_STAT_SENT || st == PL_STAT_FAILED))
                continue;
            const char *kind = pl_kind_name(kinds[k]);
            const char *stat = pl_stat_name((pl_stat)st);
            pl_buf_printf(&b, "# HELP proflink_%s_%s_items_total %s\n", kind, stat,
                          stat_help((pl_stat)st));
            pl_buf_printf(&b, "# TYPE proflink_%s_%s_items_total counter\n", kind, stat);
            for (pl_stats *s = pl_stats_list(); s; s = s->next_registered) {
                if (s->kind != kinds[k])
                    continue;
                for (int sig = 0; sig < PL_SIGNAL_COUNT; sig++) {
                    pl_buf_printf(&b, "proflink_%s_%s_items_total{component=\"", kind, stat);
                    append_label(&b, s->id);
                    pl_buf_printf(&b, "\",signal=\"%s\"} %llu\n", signal_names[sig],
                                  (unsigned long long)pl_stats_get(s, (pl_signal)sig,
                                                                   (pl_stat)st));
                }
            }
        }
    }
    /* component-specific counters and gauges (queue sizes, linked samples, ...) */
    extra_walk w = {0};
    for (pl_stats *s = pl_stats_list(); s; s = s->next_registered) {
        w.stats = s;
        pl_stats_each_extra(s, collect_family, &w);
    }
    for (size_t i = 0; i < w.n; i++) {
        const extra_family *fam = &w.families[i];
        pl_buf_append_str(&b, "# HELP ");
        extra_name(&b, fam->kind, fam->first);
        pl_buf_append_byte(&b, ' ');
        append_help(&b, fam->first->help[0] ? fam->first->help : "-");
        pl_buf_append_str(&b, "\n# TYPE ");
        extra_name(&b, fam->kind, fam->first);
        pl_buf_append_str(&b, fam->first->is_gauge ? " gauge\n" : " counter\n");
        w.out = &b;
        w.printing = fam;
        for (pl_stats *s = pl_stats_list(); s; s = s->next_registered) {
            if (s->kind != fam->kind)
                continue;
            w.stats = s;
            pl_stats_each_extra(s, print_family_value, &w);
        }
    }
    free(w.families);
    pl_stats_unlock();
    render_process(&b);
    pl_buf_append_byte(&b, 0);
    if (!pl_buf_ok(&b)) {
        pl_buf_free(&b);
        return NULL;
    }
    size_t n;
    char *text = (char *)pl_buf_steal(&b, &n);
    if (len)
        *len = n ? n - 1 : 0;
    return text;
}

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
        char body[96];
        int n = snprintf(body, sizeof(body), "{\"status\":\"%s\"}\n", ok ? "ok" : state);
        pl_http_header h = {"Content-Type", 12, "application/json", 16};
        pl_http_respond(res, ok ? 200 : 503, &h, 1, body, (size_t)n);
        return;
    }
    static const char nf[] = "not found: try /metrics or /health\n";
    pl_http_respond(res, get ? 404 : 405, NULL, 0, nf, sizeof(nf) - 1);
}

pl_telemetry *pl_telemetry_start(uv_loop_t *loop, const char *address, pl_telemetry_info_fn info,
                                 void *arg, pl_err *err)
{
    if (!process_start_ns)
        process_start_ns = pl_time_mono_ns();
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
