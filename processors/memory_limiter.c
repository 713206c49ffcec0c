/*
 * memory_limiter.c: the `memory_limiter` processor.
 *
 *   memory_limiter:
 *     check_interval: 1s
 *     limit_mib: 512            # or limit_percentage: 80 (of RAM / cgroup limit)
 *     spike_limit_mib: 128      # or spike_limit_percentage: 20
 *
 * Every check_interval the process's resident set (/proc/self/statm) is
 * compared with two limits, as in the Collector: the hard limit
 * (limit_mib) and the soft limit (limit_mib - spike_limit_mib; the spike
 * defaults to 20% of the limit).
 *
 *   - above the soft limit, consume refuses every batch with PL_ERR_REFUSED,
 *     so receivers answer 503 / UNAVAILABLE and clients retry later;
 *   - above the hard limit it also sets the process-wide state to HARD
 *     (pl_memory_state_set), which tells stateful processors (correlation,
 *     batch) to release what they hold now, unenriched, rather than drop it.
 *
 * The state is process-wide because memory is: one limiter in front of each
 * pipeline sees the same RSS. The limiter refuses on its own last
 * measurement, so tests and several instances stay predictable. Refusals are
 * counted: the graph counts refused items per signal (any non-OK answer),
 * and the limiter adds soft_limit_refusals / hard_limit_refusals.
 *
 * RSS is measured rather than allocations counted: arenas, libuv, libcurl
 * and SQLite all allocate, and only the kernel sees the total.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/component.h"
#include "core/log.h"

#include "processors/memory_limiter.config.h"

static int memlim_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    memlim_cfg *c = cfg_;
    int errors = 0;
    errors += pl_cfg_check(ctx, c->limit_mib != 0 || c->limit_percentage != 0, NULL,
                           "one of limit_mib or limit_percentage must be set");
    errors +=
        pl_cfg_check(ctx, !(c->limit_mib > 0 && c->spike_limit_mib >= c->limit_mib),
                     "spike_limit_mib", "spike_limit_mib (%lld) must be below limit_mib (%lld)",
                     (long long)c->spike_limit_mib, (long long)c->limit_mib);
    if (c->limit_mib == 0 && c->limit_percentage > 0 &&
        c->spike_limit_percentage >= c->limit_percentage) {
        pl_cfg_errorf(ctx, "spike_limit_percentage",
                      "spike_limit_percentage must be below limit_percentage");
        errors++;
    }
    return errors;
}

#include "processors/memory_limiter.config.inc"

typedef struct memlim {
    char id[128];
    pl_stats *stats;
    uv_loop_t *loop;
    const pl_host *host; /* whose memory state it sets */
    uv_timer_t timer;
    bool timer_init;
    uint64_t interval_ms;
    uint64_t hard_bytes, soft_bytes;
    pl_memory_state state;
    uint64_t *soft_refusals, *hard_refusals, *checks;
    int64_t *rss_gauge, *state_gauge;
    uint64_t last_rss;
} memlim;

/* Resident set size in bytes; 0 when it cannot be read. */
static uint64_t read_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long long size = 0, resident = 0;
    int n = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    if (n != 2)
        return 0;
    long page = sysconf(_SC_PAGESIZE);
    return (uint64_t)resident * (uint64_t)(page > 0 ? page : 4096);
}

/* The memory this process may use: the cgroup v2 limit when there is one,
 * else physical RAM. */
static uint64_t total_memory_bytes(void)
{
    uint64_t total = 0;
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    if (f) {
        unsigned long long v;
        if (fscanf(f, "%llu", &v) == 1)
            total = v;
        fclose(f);
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    if (!total || (ram && total > ram))
        total = ram;
    return total;
}

static const char *state_name(pl_memory_state s)
{
    return s == PL_MEMORY_HARD ? "hard" : s == PL_MEMORY_SOFT ? "soft" : "ok";
}

static void memlim_check(memlim *m)
{
    uint64_t rss = read_rss_bytes();
    m->last_rss = rss;
    pl_memory_state s = PL_MEMORY_OK;
    if (rss >= m->hard_bytes)
        s = PL_MEMORY_HARD;
    else if (rss >= m->soft_bytes)
        s = PL_MEMORY_SOFT;
    if (s != m->state) {
        if (s == PL_MEMORY_OK)
            pl_info(m->id, "memory back under the soft limit (rss %llu MiB): accepting data",
                    (unsigned long long)(rss >> 20));
        else
            pl_warn(m->id,
                    "memory above the %s limit (rss %llu MiB, soft %llu MiB, hard %llu MiB): "
                    "refusing data%s",
                    state_name(s), (unsigned long long)(rss >> 20),
                    (unsigned long long)(m->soft_bytes >> 20),
                    (unsigned long long)(m->hard_bytes >> 20),
                    s == PL_MEMORY_HARD ? ", releasing held data" : "");
    }
    m->state = s;
    pl_host_set_memory_state(m->host, s);
    if (m->checks)
        (*m->checks)++;
    if (m->rss_gauge)
        *m->rss_gauge = (int64_t)rss;
    if (m->state_gauge)
        *m->state_gauge = (int64_t)s;
}

static void on_timer(uv_timer_t *t)
{
    memlim_check(t->data);
}

static pl_status memlim_create(const pl_create_settings *s, const void *config, void **out,
                               pl_err *err)
{
    const memlim_cfg *c = config;
    if (c->limit_mib <= 0 && c->limit_percentage <= 0)
        return pl_errf(err, PL_ERR_INVALID, "one of limit_mib or limit_percentage must be set");
    if (c->check_interval <= 0)
        return pl_errf(err, PL_ERR_INVALID, "check_interval must be greater than zero");
    memlim *m = calloc(1, sizeof(*m));
    if (!m)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    snprintf(m->id, sizeof(m->id), "%s", s && s->id ? s->id : "memory_limiter");
    m->stats = s ? s->stats : NULL;
    m->loop = s ? s->loop : NULL;
    m->host = s ? s->host : NULL;
    if (c->limit_mib > 0) {
        m->hard_bytes = (uint64_t)c->limit_mib << 20;
        uint64_t spike =
            c->spike_limit_mib > 0 ? (uint64_t)c->spike_limit_mib << 20 : m->hard_bytes / 5;
        m->soft_bytes = spike < m->hard_bytes ? m->hard_bytes - spike : 0;
    } else {
        uint64_t total = total_memory_bytes();
        m->hard_bytes = total / 100 * (uint64_t)c->limit_percentage;
        uint64_t spike = c->spike_limit_percentage > 0
                             ? total / 100 * (uint64_t)c->spike_limit_percentage
                             : m->hard_bytes / 5;
        m->soft_bytes = spike < m->hard_bytes ? m->hard_bytes - spike : 0;
    }
    m->interval_ms = (uint64_t)c->check_interval / 1000000u;
    if (m->interval_ms == 0)
        m->interval_ms = 1;
    if (m->stats) {
        m->soft_refusals = pl_stats_counter(m->stats, "soft_limit_refusals",
                                            "items refused while above the soft memory limit");
        m->hard_refusals = pl_stats_counter(m->stats, "hard_limit_refusals",
                                            "items refused while above the hard memory limit");
        m->checks = pl_stats_counter(m->stats, "memory_checks", "resident memory measurements");
        m->rss_gauge = pl_stats_gauge(m->stats, "memory_rss_bytes", "last measured resident set");
        m->state_gauge = pl_stats_gauge(m->stats, "memory_state",
                                        "0 ok, 1 above soft limit, 2 above hard limit");
    }
    if (m->loop) {
        if (uv_timer_init(m->loop, &m->timer) != 0) {
            free(m);
            return pl_errf(err, PL_ERR_INTERNAL, "cannot create the check timer");
        }
        m->timer.data = m;
        m->timer_init = true;
    }
    *out = m;
    return PL_OK;
}

static pl_status memlim_start(void *self, pl_err *err)
{
    memlim *m = self;
    /* Measure once now, so the first requests are judged on real figures. */
    memlim_check(m);
    if (m->timer_init && uv_timer_start(&m->timer, on_timer, m->interval_ms, m->interval_ms) != 0)
        return pl_errf(err, PL_ERR_INTERNAL, "cannot start the check timer");
    return PL_OK;
}

static pl_status memlim_consume(void *self, pl_batch *batch, pl_consumer *next)
{
    memlim *m = self;
    if (m->state != PL_MEMORY_OK) {
        size_t items = pl_batch_items(batch);
        uint64_t *counter = m->state == PL_MEMORY_HARD ? m->hard_refusals : m->soft_refusals;
        if (counter)
            *counter += items;
        pl_debug(m->id, "refused %zu %s: memory above the %s limit", items,
                 pl_signal_name(batch->signal), state_name(m->state));
        pl_batch_free(batch);
        return PL_ERR_REFUSED;
    }
    return pl_consumer_consume(next, batch);
}

static void memlim_shutdown(void *self)
{
    memlim *m = self;
    if (m->timer_init && !uv_is_closing((uv_handle_t *)&m->timer)) {
        uv_timer_stop(&m->timer);
        uv_close((uv_handle_t *)&m->timer, NULL);
    }
}

static void memlim_destroy(void *self)
{
    memlim *m = self;
    if (!m)
        return;
    /* Nothing refuses once we are gone. */
    pl_host_set_memory_state(m->host, PL_MEMORY_OK);
    free(m);
}

const pl_component_type pl_processor_memory_limiter = {
    PL_COMPONENT_HEAD("memory_limiter", PL_KIND_PROCESSOR, PL_SIGNALS_ALL, &memlim_section),
    .description = "refuses data above a soft memory limit; above the hard limit makes stateful "
                   "processors release what they hold",
    PL_COMPONENT_LIFECYCLE(memlim_create, memlim_start, memlim_shutdown, memlim_destroy),
    .consume = memlim_consume,
};
