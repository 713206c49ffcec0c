/*
 * stats.c: per-component counters (see stats.h). Extra counters live in
 * fixed-size chunks so that pointers handed out by pl_stats_counter stay
 * valid when more are added.
 */
#include "stats.h"

#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define EXTRA_CHUNK 16

static pl_stats *registered_head;
/* Guards the list and each component's extras table (not the values): the
 * telemetry thread walks them while components come and go on the loop. */
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;

void pl_stats_lock(void)
{
    pthread_mutex_lock(&stats_lock);
}

void pl_stats_unlock(void)
{
    pthread_mutex_unlock(&stats_lock);
}

pl_stats *pl_stats_new(const char *id, pl_kind kind)
{
    pl_stats *stats = calloc(1, sizeof(*stats));
    if (!stats)
        return NULL;
    snprintf(stats->id, sizeof(stats->id), "%s", id ? id : "");
    stats->kind = kind;
    pl_stats_lock();
    stats->next_registered = registered_head;
    registered_head = stats;
    pl_stats_unlock();
    return stats;
}

void pl_stats_free(pl_stats *stats)
{
    if (!stats)
        return;
    pl_stats_lock();
    for (pl_stats **p = &registered_head; *p; p = &(*p)->next_registered) {
        if (*p == stats) {
            *p = stats->next_registered;
            break;
        }
    }
    pl_stats_unlock();
    for (size_t i = 0; i < stats->n_chunks; i++)
        free(stats->extra_chunks[i]);
    free(stats->extra_chunks);
    free(stats);
}

void pl_stats_set_degraded(pl_stats *stats, const char *reason)
{
    if (!stats)
        return;
    pl_stats_lock();
    snprintf(stats->degraded, sizeof(stats->degraded), "%s", reason ? reason : "");
    pl_stats_unlock();
}

size_t pl_stats_degraded(char *out, size_t cap)
{
    size_t n = 0, len = 0;
    if (cap)
        out[0] = 0;
    pl_stats_lock();
    for (pl_stats *s = registered_head; s; s = s->next_registered) {
        if (!s->degraded[0])
            continue;
        if (len < cap) {
            int w = snprintf(out + len, cap - len, "%s%s: %s", n ? "; " : "", s->id, s->degraded);
            if (w > 0)
                len += (size_t)w;
        }
        n++;
    }
    pl_stats_unlock();
    return n;
}

pl_stats *pl_stats_list(void)
{
    return registered_head;
}

const char *pl_stat_name(pl_stat stat)
{
    static const char *const names[] = {"accepted", "refused", "dropped", "sent", "failed"};
    return stat < PL_STAT_COUNT ? names[stat] : "unknown";
}

void pl_stats_add(pl_stats *stats, pl_signal signal, pl_stat stat, uint64_t n)
{
    if (stats && (unsigned)signal < PL_SIGNAL_COUNT && stat < PL_STAT_COUNT)
        __atomic_fetch_add(&stats->counts[signal][stat], n, __ATOMIC_RELAXED);
}

void pl_stats_add_via(pl_stats *stats, pl_transport transport, pl_signal signal, pl_stat stat,
                      uint64_t n)
{
    pl_stats_add(stats, signal, stat, n);
    if (!stats || (unsigned)transport >= PL_TRANSPORT_COUNT || (unsigned)signal >= PL_SIGNAL_COUNT)
        return;
    if (stat == PL_STAT_ACCEPTED || stat == PL_STAT_REFUSED)
        __atomic_fetch_add(&stats->via[transport][signal][stat == PL_STAT_REFUSED], n,
                           __ATOMIC_RELAXED);
    if (transport != PL_TRANSPORT_NONE &&
        !(__atomic_load_n(&stats->transports, __ATOMIC_RELAXED) & (1u << transport)))
        __atomic_fetch_or(&stats->transports, 1u << transport, __ATOMIC_RELAXED);
}

/* Network sends take from a millisecond to the retry timeouts. */
const double pl_histogram_bounds[PL_HIST_BOUNDS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                    0.25,  0.5,    1,     2.5,  5,     10,   30};

pl_histogram *pl_stats_histogram(pl_stats *stats, const char *name, const char *help)
{
    if (!stats)
        return NULL;
    pl_stats_lock();
    pl_histogram *h = NULL;
    for (size_t i = 0; i < stats->n_histograms; i++)
        if (strcmp(stats->histograms[i].name, name) == 0)
            h = &stats->histograms[i];
    if (!h && stats->n_histograms < PL_STATS_MAX_HISTOGRAMS) {
        h = &stats->histograms[stats->n_histograms];
        snprintf(h->name, sizeof(h->name), "%s", name);
        snprintf(h->help, sizeof(h->help), "%s", help ? help : "");
        __atomic_store_n(&stats->n_histograms, stats->n_histograms + 1, __ATOMIC_RELEASE);
    }
    pl_stats_unlock();
    return h;
}

void pl_histogram_observe_ns(pl_histogram *h, uint64_t ns)
{
    if (!h)
        return;
    double s = (double)ns / 1e9;
    size_t b = 0;
    while (b < PL_HIST_BOUNDS && s > pl_histogram_bounds[b])
        b++;
    __atomic_fetch_add(&h->buckets[b], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&h->sum_ns, ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&h->count, 1, __ATOMIC_RELAXED);
}

uint64_t pl_stats_get(const pl_stats *stats, pl_signal signal, pl_stat stat)
{
    if (!stats || (unsigned)signal >= PL_SIGNAL_COUNT || stat >= PL_STAT_COUNT)
        return 0;
    return __atomic_load_n(&stats->counts[signal][stat], __ATOMIC_RELAXED);
}

static pl_stats_extra *stats_extra_locked(pl_stats *stats, const char *name, const char *help,
                                          bool is_gauge)
{
    static pl_stats_extra sink; /* absorbs updates when stats is NULL or OOM */
    if (!stats)
        return &sink;
    for (size_t i = 0; i < stats->n_extras; i++) {
        pl_stats_extra *e = &stats->extra_chunks[i / EXTRA_CHUNK][i % EXTRA_CHUNK];
        if (strcmp(e->name, name) == 0)
            return e;
    }
    if (stats->n_extras == stats->n_chunks * EXTRA_CHUNK) {
        pl_stats_extra **chunks =
            realloc(stats->extra_chunks, (stats->n_chunks + 1) * sizeof(*chunks));
        if (!chunks)
            return &sink;
        stats->extra_chunks = chunks;
        chunks[stats->n_chunks] = calloc(EXTRA_CHUNK, sizeof(pl_stats_extra));
        if (!chunks[stats->n_chunks])
            return &sink;
        stats->n_chunks++;
    }
    size_t i = stats->n_extras++;
    pl_stats_extra *e = &stats->extra_chunks[i / EXTRA_CHUNK][i % EXTRA_CHUNK];
    snprintf(e->name, sizeof(e->name), "%s", name);
    snprintf(e->help, sizeof(e->help), "%s", help ? help : "");
    e->is_gauge = is_gauge;
    return e;
}

static pl_stats_extra *stats_extra(pl_stats *stats, const char *name, const char *help,
                                   bool is_gauge)
{
    pl_stats_lock();
    pl_stats_extra *e = stats_extra_locked(stats, name, help, is_gauge);
    pl_stats_unlock();
    return e;
}

uint64_t *pl_stats_counter(pl_stats *stats, const char *name, const char *help)
{
    return &stats_extra(stats, name, help, false)->v.counter;
}

int64_t *pl_stats_gauge(pl_stats *stats, const char *name, const char *help)
{
    return &stats_extra(stats, name, help, true)->v.gauge;
}

void pl_stats_each_extra(const pl_stats *stats, void (*fn)(void *arg, const pl_stats_extra *e),
                         void *arg)
{
    for (size_t i = 0; i < stats->n_extras; i++)
        fn(arg, &stats->extra_chunks[i / EXTRA_CHUNK][i % EXTRA_CHUNK]);
}

uint64_t pl_stats_extra_counter(const pl_stats_extra *e)
{
    return __atomic_load_n(&e->v.counter, __ATOMIC_RELAXED);
}

int64_t pl_stats_extra_gauge(const pl_stats_extra *e)
{
    return __atomic_load_n(&e->v.gauge, __ATOMIC_RELAXED);
}
