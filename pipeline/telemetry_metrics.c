/*
 * telemetry_metrics.c: the /metrics text (Prometheus text format 0.0.4),
 * under the OpenTelemetry Collector's names wherever the concept is the
 * Collector's, so its dashboards and alerts work unchanged:
 *
 *   otelcol_receiver_accepted_<unit>{receiver,transport}    pipeline took it
 *   otelcol_receiver_refused_<unit>{receiver,transport}     sender told to retry
 *   otelcol_receiver_failed_<unit>{receiver}                dropped, final error
 *   otelcol_processor_accepted|refused|dropped_<unit>{processor}
 *   otelcol_exporter_sent|send_failed|enqueue_failed_<unit>{exporter}
 *   otelcol_exporter_queue_size / queue_capacity{exporter}  in units of the
 *                                                           queue's sizer
 *   otelcol_process_cpu_seconds, otelcol_process_memory_rss, otelcol_process_uptime
 *
 * <unit> is the Collector's per signal: spans, profile_samples, log_records,
 * metric_points. A component shows only the signals it is used with.
 * Everything proflink has and the Collector does not (correlation, the
 * store, queue bytes, send latency histograms, ...) is under proflink_,
 * labelled the same way. Families are grouped by name (HELP and TYPE once)
 * even when several components share them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/component.h"
#include "core/stats.h"
#include "pipeline/telemetry.h"

static uint64_t process_start_ns;

__attribute__((constructor)) static void remember_start(void)
{
    process_start_ns = pl_time_mono_ns();
}

/* The Collector's item unit of each signal. */
static const char *const units[PL_SIGNAL_COUNT] = {"spans", "profile_samples", "log_records",
                                                   "metric_points"};
static const char *const transports[PL_TRANSPORT_COUNT] = {"", "grpc", "http"};

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

/* `{receiver="otlp"` (left open for more labels) */
static void open_labels(pl_buf *b, const pl_stats *s)
{
    pl_buf_printf(b, "{%s=\"", pl_kind_name(s->kind));
    append_label(b, s->id);
    pl_buf_append_byte(b, '"');
}

/* The signals a component's series are shown for: those it is used with;
 * for counters made outside a graph (tests), those it counted. */
static unsigned shown_signals(const pl_stats *s)
{
    unsigned used = __atomic_load_n(&s->signals, __ATOMIC_RELAXED); /* a reload may set it */
    if (used)
        return used;
    unsigned mask = 0;
    for (int sig = 0; sig < PL_SIGNAL_COUNT; sig++)
        for (int st = 0; st < PL_STAT_COUNT; st++)
            if (pl_stats_get(s, (pl_signal)sig, (pl_stat)st))
                mask |= PL_SIGNAL_MASK(sig);
    return mask;
}

/* ---- the shared counters ------------------------------------------------- */

typedef struct family {
    pl_kind kind;
    pl_stat stat;
    const char *prefix; /* name without the unit */
    const char *help;
} family;

static const family families[] = {
    {PL_KIND_RECEIVER, PL_STAT_ACCEPTED, "otelcol_receiver_accepted_",
     "Number of items successfully pushed into the pipeline."},
    {PL_KIND_RECEIVER, PL_STAT_REFUSED, "otelcol_receiver_refused_",
     "Number of items that could not be pushed into the pipeline (the sender was told to "
     "retry)."},
    {PL_KIND_RECEIVER, PL_STAT_DROPPED, "otelcol_receiver_failed_",
     "Number of items the pipeline failed with a final error."},
    {PL_KIND_PROCESSOR, PL_STAT_ACCEPTED, "otelcol_processor_accepted_",
     "Number of items successfully pushed into the next component in the pipeline."},
    {PL_KIND_PROCESSOR, PL_STAT_REFUSED, "otelcol_processor_refused_",
     "Number of items refused by the rest of the pipeline."},
    {PL_KIND_PROCESSOR, PL_STAT_DROPPED, "otelcol_processor_dropped_",
     "Number of items dropped by the processor."},
    {PL_KIND_EXPORTER, PL_STAT_SENT, "otelcol_exporter_sent_",
     "Number of items successfully sent to destination."},
    {PL_KIND_EXPORTER, PL_STAT_FAILED, "otelcol_exporter_send_failed_",
     "Number of items in failed attempts to send to destination (given up)."},
    {PL_KIND_EXPORTER, PL_STAT_REFUSED, "otelcol_exporter_enqueue_failed_",
     "Number of items that failed to be added to the sending queue."},
    {PL_KIND_EXPORTER, PL_STAT_ACCEPTED, "proflink_exporter_accepted_",
     "Number of items handed to the exporter (queued or written)."},
    {PL_KIND_EXPORTER, PL_STAT_DROPPED, "proflink_exporter_dropped_",
     "Number of items the exporter dropped (e.g. a full persistent queue on shutdown)."},
};

static void render_family(pl_buf *b, const family *f, pl_signal sig)
{
    bool any = false;
    for (pl_stats *s = pl_stats_list(); s && !any; s = s->next_registered)
        any = s->kind == f->kind && (shown_signals(s) & PL_SIGNAL_MASK(sig));
    if (!any)
        return;
    pl_buf_printf(b, "# HELP %s%s %s\n# TYPE %s%s counter\n", f->prefix, units[sig], f->help,
                  f->prefix, units[sig]);
    for (pl_stats *s = pl_stats_list(); s; s = s->next_registered) {
        if (s->kind != f->kind || !(shown_signals(s) & PL_SIGNAL_MASK(sig)))
            continue;
        unsigned via = __atomic_load_n(&s->transports, __ATOMIC_RELAXED);
        bool by_transport = f->kind == PL_KIND_RECEIVER && via &&
                            (f->stat == PL_STAT_ACCEPTED || f->stat == PL_STAT_REFUSED);
        if (!by_transport) {
            pl_buf_append_str(b, f->prefix);
            pl_buf_append_str(b, units[sig]);
            open_labels(b, s);
            pl_buf_printf(b, "} %llu\n", (unsigned long long)pl_stats_get(s, sig, f->stat));
            continue;
        }
        int col = f->stat == PL_STAT_REFUSED;
        /* what a receiver counted without naming a transport (the pyroscope
         * receiver's own HTTP endpoints) goes to http when it has http,
         * else to its first transport, so the series add up to the total */
        uint64_t total = pl_stats_get(s, sig, f->stat), named = 0;
        for (int t = 1; t < PL_TRANSPORT_COUNT; t++)
            named += __atomic_load_n(&s->via[t][sig][col], __ATOMIC_RELAXED);
        uint64_t rest = total > named ? total - named : 0;
        int fold = (via & (1u << PL_TRANSPORT_HTTP)) ? PL_TRANSPORT_HTTP : 0;
        for (int t = 1; t < PL_TRANSPORT_COUNT && !fold; t++)
            if (via & (1u << t))
                fold = t;
        for (int t = 1; t < PL_TRANSPORT_COUNT; t++) {
            if (!(via & (1u << t)))
                continue;
            uint64_t v =
                __atomic_load_n(&s->via[t][sig][col], __ATOMIC_RELAXED) + (t == fold ? rest : 0);
            pl_buf_append_str(b, f->prefix);
            pl_buf_append_str(b, units[sig]);
            open_labels(b, s);
            pl_buf_printf(b, ",transport=\"%s\"} %llu\n", transports[t], (unsigned long long)v);
        }
    }
}

/* The Collector's signal-independent processor counters:
 * otelcol_processor_incoming_items / outgoing_items{processor,otel_signal}. */
static void render_flow(pl_buf *b)
{
    static const char *const names[2] = {"otelcol_processor_incoming_items",
                                         "otelcol_processor_outgoing_items"};
    static const char *const helps[2] = {
        "Number of items passed to the processor.",
        "Number of items emitted from the processor (held items count when handed on)."};
    static const char *const signals[PL_SIGNAL_COUNT] = {"traces", "profiles", "logs", "metrics"};
    bool any = false;
    for (pl_stats *s = pl_stats_list(); s && !any; s = s->next_registered)
        any = s->kind == PL_KIND_PROCESSOR && shown_signals(s);
    if (!any)
        return;
    for (int dir = 0; dir < 2; dir++) {
        pl_buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n", names[dir], helps[dir], names[dir]);
        for (pl_stats *s = pl_stats_list(); s; s = s->next_registered) {
            if (s->kind != PL_KIND_PROCESSOR)
                continue;
            unsigned mask = shown_signals(s);
            for (int sig = 0; sig < PL_SIGNAL_COUNT; sig++) {
                if (!(mask & PL_SIGNAL_MASK(sig)))
                    continue;
                pl_buf_append_str(b, names[dir]);
                open_labels(b, s);
                pl_buf_printf(
                    b, ",otel_signal=\"%s\"} %llu\n", signals[sig],
                    (unsigned long long)__atomic_load_n(&s->flow[sig][dir], __ATOMIC_RELAXED));
            }
        }
    }
}

/* ---- component-specific extras ------------------------------------------ */

/* Extras that are the Collector's concepts keep its names. */
static const struct {
    pl_kind kind;
    const char *extra;
    const char *name;
    const char *help;
} collector_extras[] = {
    {PL_KIND_EXPORTER, "queue_used", "otelcol_exporter_queue_size",
     "Current size of the retry queue (in units of its sizer)."},
    {PL_KIND_EXPORTER, "queue_capacity", "otelcol_exporter_queue_capacity",
     "Fixed capacity of the retry queue (in units of its sizer)."},
    {PL_KIND_PROCESSOR, "batch_size_trigger_send",
     "otelcol_processor_batch_batch_size_trigger_send",
     "Number of times the batch was sent due to a size trigger."},
    {PL_KIND_PROCESSOR, "timeout_trigger_send", "otelcol_processor_batch_timeout_trigger_send",
     "Number of times the batch was sent due to a timeout trigger."},
};

static void extra_name(pl_buf *b, pl_kind kind, const pl_stats_extra *e)
{
    for (size_t i = 0; i < sizeof(collector_extras) / sizeof(collector_extras[0]); i++) {
        if (collector_extras[i].kind == kind && strcmp(collector_extras[i].extra, e->name) == 0) {
            pl_buf_append_str(b, collector_extras[i].name);
            return;
        }
    }
    pl_buf_append_str(b, "proflink_");
    pl_buf_append_str(b, pl_kind_name(kind));
    pl_buf_append_byte(b, '_');
    append_name_part(b, e->name);
    size_t n = strlen(e->name);
    if (!e->is_gauge && !(n >= 6 && strcmp(e->name + n - 6, "_total") == 0))
        pl_buf_append_str(b, "_total");
}

static const char *extra_help(pl_kind kind, const pl_stats_extra *e)
{
    for (size_t i = 0; i < sizeof(collector_extras) / sizeof(collector_extras[0]); i++)
        if (collector_extras[i].kind == kind && strcmp(collector_extras[i].extra, e->name) == 0)
            return collector_extras[i].help;
    return e->help[0] ? e->help : "-";
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
    open_labels(w->out, w->stats);
    if (e->is_gauge)
        pl_buf_printf(w->out, "} %lld\n", (long long)pl_stats_extra_gauge(e));
    else
        pl_buf_printf(w->out, "} %llu\n", (unsigned long long)pl_stats_extra_counter(e));
}

static void render_extras(pl_buf *b)
{
    extra_walk w = {0};
    for (pl_stats *s = pl_stats_list(); s; s = s->next_registered) {
        w.stats = s;
        pl_stats_each_extra(s, collect_family, &w);
    }
    for (size_t i = 0; i < w.n; i++) {
        const extra_family *fam = &w.families[i];
        pl_buf_append_str(b, "# HELP ");
        extra_name(b, fam->kind, fam->first);
        pl_buf_append_byte(b, ' ');
        append_help(b, extra_help(fam->kind, fam->first));
        pl_buf_append_str(b, "\n# TYPE ");
        extra_name(b, fam->kind, fam->first);
        pl_buf_append_str(b, fam->first->is_gauge ? " gauge\n" : " counter\n");
        w.out = b;
        w.printing = fam;
        for (pl_stats *s = pl_stats_list(); s; s = s->next_registered) {
            if (s->kind != fam->kind)
                continue;
            w.stats = s;
            pl_stats_each_extra(s, print_family_value, &w);
        }
    }
    free(w.families);
}

/* ---- histograms ---------------------------------------------------------- */

static void render_histograms(pl_buf *b)
{
    static const pl_kind kinds[] = {PL_KIND_RECEIVER, PL_KIND_PROCESSOR, PL_KIND_EXPORTER};
    /* families: (kind, name) pairs, in first-seen order */
    const pl_histogram *seen[32];
    pl_kind seen_kind[32];
    size_t n_seen = 0;
    for (size_t k = 0; k < 3; k++) {
        for (pl_stats *s = pl_stats_list(); s; s = s->next_registered) {
            if (s->kind != kinds[k])
                continue;
            size_t nh = __atomic_load_n(&s->n_histograms, __ATOMIC_ACQUIRE);
            for (size_t h = 0; h < nh; h++) {
                bool known = false;
                for (size_t i = 0; i < n_seen; i++)
                    known |= seen_kind[i] == kinds[k] &&
                             strcmp(seen[i]->name, s->histograms[h].name) == 0;
                if (!known && n_seen < 32) {
                    seen[n_seen] = &s->histograms[h];
                    seen_kind[n_seen++] = kinds[k];
                }
            }
        }
    }
    for (size_t i = 0; i < n_seen; i++) {
        char name[160];
        snprintf(name, sizeof(name), "proflink_%s_", pl_kind_name(seen_kind[i]));
        pl_buf fam;
        pl_buf_init(&fam);
        pl_buf_append_str(&fam, name);
        append_name_part(&fam, seen[i]->name);
        pl_buf_append_byte(&fam, 0);
        const char *fname = pl_buf_ok(&fam) ? (const char *)fam.data : "proflink_histogram";
        pl_buf_printf(b, "# HELP %s ", fname);
        append_help(b, seen[i]->help[0] ? seen[i]->help : "-");
        pl_buf_printf(b, "\n# TYPE %s histogram\n", fname);
        for (pl_stats *s = pl_stats_list(); s; s = s->next_registered) {
            if (s->kind != seen_kind[i])
                continue;
            size_t nh = __atomic_load_n(&s->n_histograms, __ATOMIC_ACQUIRE);
            for (size_t h = 0; h < nh; h++) {
                const pl_histogram *hist = &s->histograms[h];
                if (strcmp(hist->name, seen[i]->name) != 0)
                    continue;
                uint64_t cumulative = 0;
                for (size_t bk = 0; bk <= PL_HIST_BOUNDS; bk++) {
                    cumulative += __atomic_load_n(&hist->buckets[bk], __ATOMIC_RELAXED);
                    pl_buf_printf(b, "%s_bucket", fname);
                    open_labels(b, s);
                    if (bk < PL_HIST_BOUNDS)
                        pl_buf_printf(b, ",le=\"%g\"} %llu\n", pl_histogram_bounds[bk],
                                      (unsigned long long)cumulative);
                    else
                        pl_buf_printf(b, ",le=\"+Inf\"} %llu\n", (unsigned long long)cumulative);
                }
                pl_buf_printf(b, "%s_sum", fname);
                open_labels(b, s);
                pl_buf_printf(b, "} %.9f\n",
                              (double)__atomic_load_n(&hist->sum_ns, __ATOMIC_RELAXED) / 1e9);
                pl_buf_printf(b, "%s_count", fname);
                open_labels(b, s);
                /* the +Inf bucket is the count, read once so they agree */
                pl_buf_printf(b, "} %llu\n", (unsigned long long)cumulative);
            }
        }
        pl_buf_free(&fam);
    }
}

/* ---- the process ----------------------------------------------------------- */

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
    double uptime = (double)(pl_time_mono_ns() - process_start_ns) / 1e9;
    pl_buf_printf(b,
                  "# HELP otelcol_process_cpu_seconds Total CPU user and system time in "
                  "seconds.\n"
                  "# TYPE otelcol_process_cpu_seconds counter\n"
                  "otelcol_process_cpu_seconds %.6f\n"
                  "# HELP otelcol_process_memory_rss Total physical memory (resident set "
                  "size), in bytes.\n"
                  "# TYPE otelcol_process_memory_rss gauge\n"
                  "otelcol_process_memory_rss %lld\n"
                  "# HELP otelcol_process_uptime Uptime of the process, in seconds.\n"
                  "# TYPE otelcol_process_uptime counter\n"
                  "otelcol_process_uptime %.3f\n",
                  cpu, (long long)rss_pages * (long long)sysconf(_SC_PAGESIZE), uptime);
}

char *pl_telemetry_render_metrics(size_t *len)
{
    pl_buf b;
    pl_buf_init(&b);
    pl_stats_lock(); /* components come and go on the pipeline's loop */
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++)
        for (int sig = 0; sig < PL_SIGNAL_COUNT; sig++)
            render_family(&b, &families[f], (pl_signal)sig);
    render_flow(&b);
    render_extras(&b);
    render_histograms(&b);
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
