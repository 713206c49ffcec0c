/*
 * stats.h: the store behind pl_stats (declared in component.h), and what the
 * telemetry endpoint walks to print every component's counters.
 *
 * Counters are uint64_t. pl_stats_add updates with a relaxed atomic add, so
 * any thread may count. Extra counters and gauges (pl_stats_counter,
 * pl_stats_gauge) are updated through the returned pointer by the one
 * thread that owns the component (plain aligned 64-bit stores, which are not
 * torn on the platforms proflink runs on; a component counting from several
 * threads uses __atomic builtins on the pointer).
 *
 * The telemetry endpoint runs on a thread of its own (telemetry_thread.h):
 * it walks the list and each component's extras holding pl_stats_lock()
 * (creation, registration and freeing take it too) and reads every value
 * with an atomic load (pl_stats_get, pl_stats_extra_counter/_gauge).
 */
#ifndef PL_STATS_H
#define PL_STATS_H

#include "component.h"

typedef struct pl_stats_extra {
    char name[64];
    char help[160];
    bool is_gauge;
    union {
        uint64_t counter;
        int64_t gauge;
    } v;
} pl_stats_extra;

/* Upper bounds (seconds) of a histogram's buckets; the last is +Inf. */
#define PL_HIST_BOUNDS 14
extern const double pl_histogram_bounds[PL_HIST_BOUNDS];

struct pl_histogram {
    char name[64];
    char help[160];
    uint64_t buckets[PL_HIST_BOUNDS + 1]; /* not cumulative; the last is +Inf */
    uint64_t count;
    uint64_t sum_ns;
};

#define PL_STATS_MAX_HISTOGRAMS 4

struct pl_stats {
    char id[128];
    pl_kind kind;
    unsigned signals;    /* signals the component is used with (0: unknown) */
    unsigned transports; /* receivers: PL_TRANSPORT_* bits that count via */
    uint64_t counts[PL_SIGNAL_COUNT][PL_STAT_COUNT];
    /* receivers: accepted and refused by transport */
    uint64_t via[PL_TRANSPORT_COUNT][PL_SIGNAL_COUNT][2];
    /* processors: items handed in, and handed on by the processor (the
     * Collector's incoming_items / outgoing_items) */
    uint64_t flow[PL_SIGNAL_COUNT][2];
    pl_histogram histograms[PL_STATS_MAX_HISTOGRAMS];
    size_t n_histograms;
    pl_stats_extra *extras; /* stable addresses: allocated in chunks */
    size_t n_extras;
    size_t cap_extras;
    pl_stats_extra **extra_chunks;
    size_t n_chunks;
    pl_stats *next_registered;
    /* Why the component cannot do its work ("" while it can), for /health:
     * written and read under pl_stats_lock (pl_stats_set_degraded). */
    char degraded[200];
};

/* Creates counters for component `id` and links them into the global list
 * that the telemetry endpoint prints. NULL on OOM. */
pl_stats *pl_stats_new(const char *id, pl_kind kind);
/* Unlinks and frees. */
void pl_stats_free(pl_stats *stats);
/* Head of the global list (newest first). */
pl_stats *pl_stats_list(void);
const char *pl_stat_name(pl_stat stat); /* "accepted", "refused", ... */
/* Held while walking pl_stats_list() from a thread other than the loop's. */
void pl_stats_lock(void);
void pl_stats_unlock(void);
/* An extra's current value, read atomically. */
uint64_t pl_stats_extra_counter(const pl_stats_extra *e);
int64_t pl_stats_extra_gauge(const pl_stats_extra *e);
/* Calls fn for every extra counter/gauge of `stats`. */
void pl_stats_each_extra(const pl_stats *stats, void (*fn)(void *arg, const pl_stats_extra *e),
                         void *arg);

/* The reasons components are degraded, as "id: reason; id: reason" in out
 * (truncated to cap, NUL-terminated); returns how many are. Any thread. */
size_t pl_stats_degraded(char *out, size_t cap);

#endif
