/*
 * bench_store_sustained.c: the `sqlite` exporter's sustained write rate with
 * fresh random ids in every batch.
 *
 *   bench_store_sustained SECONDS [SAMPLES_PER_SPAN] [DB] [MAX_SIZE]
 *       (defaults: 600 s, 0 samples, $TMPDIR/proflink-bench-sustained.db,
 *        the exporter's max_size; the file and its -wal/-shm are removed
 *        first. MAX_SIZE (e.g. 256MiB) reaches the size limit's steady
 *        state sooner in short runs; the recorded figures use the default.)
 *
 * The exporter runs with its defaults (retention 24h, max_size 1GiB,
 * queue_size 64MiB, its writer thread and group commit), the query API off.
 * This thread plays the receivers: it offers batches of 100 spans (traces of
 * 10 spans, 5 services, 4 attributes per span, start times = now) with
 * fresh random trace and span ids in every batch, and, with
 * SAMPLES_PER_SPAN > 0, a profiles batch whose samples link to those spans
 * (ids of the trace and the span), as fast as the exporter accepts them; a
 * refusal (full queue) is retried after 1 ms, as a client would.
 *
 * Every 10 s it prints the spans/s committed in that interval, the CPU of
 * the writer thread and of the whole process (% of one core), RSS and the
 * database size. At the end: the median of the interval rates, the overall
 * rate, and the check that every accepted span is either in the store or
 * was deleted by retention (accepted == committed == stored + deleted).
 *
 * BENCH_COPIES=1 plays collector.yaml's pipelines, which store every span
 * as it arrives and again after the correlation processor: each batch is
 * offered a second time COPY_LAG batches (300,000 spans) later, unchanged.
 * Copies are not counted as accepted; the per-CPU figures then count
 * stored (new) spans only.
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>
#include <uv.h>

#include "config/decode.h"
#include "core/component.h"
#include "core/model.h"
#include "core/sqlite_file.h"
#include "core/stats.h"
#include "../db_file_fixture.h"
#include "sqlite_exporter_fixture.h"

#define SPANS_PER_BATCH 100
#define SPANS_PER_TRACE 10
#define N_SERVICES      5
#define N_FUNCTIONS     300
#define N_STACKS        1000
#define INTERVAL_NS     10000000000ull

static const char *const services[N_SERVICES] = {"frontend", "cart", "checkout", "payment",
                                                 "inventory"};
static const char *const names[] = {"GET /api/cart", "SELECT cart_items", "redis GET",
                                    "render",        "POST /checkout",    "grpc Payment/Charge"};

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rnd(rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

static void fill_random(rng *r, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = rnd(r);
        memcpy(p + i, &v, n - i < 8 ? n - i : 8);
    }
}

/* One spans batch (5 resources), ids filled in per round by refresh_spans. */
static pl_batch *make_spans(pl_span **order)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_traces *tr = &b->data.traces;
    tr->resources = pl_batch_alloc(b, N_SERVICES * sizeof(pl_resource_spans));
    tr->n_resources = N_SERVICES;
    for (int s = 0; s < N_SERVICES; s++) {
        pl_resource_spans *rs = &tr->resources[s];
        rs->has_resource = true;
        pl_attrs_put(&b->arena, &rs->resource.attrs, PL_BYTES_LIT("service.name"),
                     pl_value_string(pl_bytes_from_cstr(services[s])));
        pl_attrs_put(&b->arena, &rs->resource.attrs, PL_BYTES_LIT("host.name"),
                     pl_value_string(PL_BYTES_LIT("node-1")));
        rs->scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
        rs->n_scopes = 1;
        rs->scopes[0].spans = pl_batch_alloc(b, SPANS_PER_BATCH * sizeof(pl_span));
    }
    for (int i = 0; i < SPANS_PER_BATCH; i++) {
        int k = i % SPANS_PER_TRACE, t = i / SPANS_PER_TRACE;
        int svc = (t + k) % N_SERVICES;
        pl_scope_spans *ss = &tr->resources[svc].scopes[0];
        pl_span *sp = &ss->spans[ss->n_spans++];
        order[i] = sp;
        sp->trace_id_len = 16;
        sp->span_id_len = 8;
        sp->parent_span_id_len = k ? 8 : 0;
        sp->name = pl_bytes_from_cstr(names[(t + k) % 6]);
        sp->kind = k == 0 ? 2 : 3;
        pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("http.route"),
                     pl_value_string(PL_BYTES_LIT("/api/cart/{id}")));
        pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("http.status_code"), pl_value_int(200));
        pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("net.peer.name"),
                     pl_value_string(PL_BYTES_LIT("cart.internal")));
        pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("user.tier"),
                     pl_value_string(PL_BYTES_LIT("gold")));
    }
    return b;
}

static void refresh_spans(rng *r, pl_span **order, uint64_t now)
{
    for (int t = 0; t < SPANS_PER_BATCH / SPANS_PER_TRACE; t++) {
        uint8_t trace_id[16];
        fill_random(r, trace_id, 16);
        uint64_t dur = 5000000 + rnd(r) % 500000000;
        for (int k = 0; k < SPANS_PER_TRACE; k++) {
            pl_span *sp = order[t * SPANS_PER_TRACE + k];
            memcpy(sp->trace_id, trace_id, 16);
            fill_random(r, sp->span_id, 8);
            sp->span_id[0] |= 1; /* never all zero */
            if (k)
                memcpy(sp->parent_span_id, order[t * SPANS_PER_TRACE]->span_id, 8);
            uint64_t off = k ? (uint64_t)k * dur / 20 : 0;
            sp->start_time_unix_nano = now - dur + off;
            sp->end_time_unix_nano = now - dur + off + (k ? dur / 4 : dur);
        }
    }
}

#define COPY_LAG 3000

/* The ids and times of one round's spans, to offer them again. */
typedef struct round_ids {
    uint8_t trace_id[SPANS_PER_BATCH][16], span_id[SPANS_PER_BATCH][8], parent[SPANS_PER_BATCH][8];
    uint64_t start[SPANS_PER_BATCH], end[SPANS_PER_BATCH];
} round_ids;

static void save_round(pl_span **order, round_ids *r)
{
    for (int i = 0; i < SPANS_PER_BATCH; i++) {
        memcpy(r->trace_id[i], order[i]->trace_id, 16);
        memcpy(r->span_id[i], order[i]->span_id, 8);
        memcpy(r->parent[i], order[i]->parent_span_id, 8);
        r->start[i] = order[i]->start_time_unix_nano;
        r->end[i] = order[i]->end_time_unix_nano;
    }
}

static void restore_round(pl_span **order, const round_ids *r)
{
    for (int i = 0; i < SPANS_PER_BATCH; i++) {
        memcpy(order[i]->trace_id, r->trace_id[i], 16);
        memcpy(order[i]->span_id, r->span_id[i], 8);
        memcpy(order[i]->parent_span_id, r->parent[i], 8);
        order[i]->start_time_unix_nano = r->start[i];
        order[i]->end_time_unix_nano = r->end[i];
    }
}

/* Offers b until the exporter takes it, running the loop between tries as
 * a receiver would; gives up (PL_ERR_REFUSED) at `until` (mono ns; 0:
 * never). */
static pl_status offer(bench_sqlite *bs, pl_batch *b, uint64_t until, uint64_t *refused)
{
    pl_status st;
    while ((st = pl_exporter_sqlite.export(bs->x, b)) == PL_ERR_REFUSED) {
        (*refused)++;
        uv_run(&bs->loop, UV_RUN_NOWAIT);
        uv_sleep(1);
        if (until && pl_time_mono_ns() >= until)
            break;
    }
    if (st != PL_OK && st != PL_ERR_REFUSED)
        fprintf(stderr, "export failed: %s\n", pl_status_name(st));
    return st;
}

/* One profiles batch: per span `per_span` samples (one per service's CPU
 * profile), each with its own link; links refreshed per round. */
static pl_batch *make_samples(int per_span, rng *r)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_profiles *ps = &b->data.profiles;
    ps->has_dictionary = true;
    pl_dictionary *d = &ps->dict;
    pl_dict_ensure_zero_entries(&b->arena, d);
    d->functions = pl_arena_grow(&b->arena, d->functions, 1, N_FUNCTIONS + 1, sizeof(pl_function));
    d->locations = pl_arena_grow(&b->arena, d->locations, 1, N_FUNCTIONS + 1, sizeof(pl_location));
    d->stacks = pl_arena_grow(&b->arena, d->stacks, 1, N_STACKS + 1, sizeof(pl_stack));
    int32_t file = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("server.go"));
    for (int f = 0; f < N_FUNCTIONS; f++) {
        char name[64];
        snprintf(name, sizeof(name), "github.com/shop/svc/pkg%d.Function%d", f % 30, f);
        int32_t ni = pl_dict_intern_string(&b->arena, d, pl_bytes_from_cstr(name));
        d->functions[f + 1] = (pl_function){ni, 0, file, 1};
        pl_location *loc = &d->locations[f + 1];
        memset(loc, 0, sizeof(*loc));
        loc->lines = pl_batch_alloc(b, sizeof(pl_line));
        loc->lines[0].function_index = f + 1;
        loc->n_lines = 1;
    }
    d->n_functions = d->cap_functions = N_FUNCTIONS + 1;
    d->n_locations = d->cap_locations = N_FUNCTIONS + 1;
    for (int s = 0; s < N_STACKS; s++) {
        pl_stack *st = &d->stacks[s + 1];
        int depth = 8 + (int)(rnd(r) % 16);
        st->n_location_indices = (uint32_t)depth;
        st->location_indices = pl_batch_alloc(b, (size_t)depth * sizeof(int32_t));
        for (int i = 0; i < depth; i++)
            st->location_indices[i] = 1 + (int32_t)(rnd(r) % N_FUNCTIONS);
    }
    d->n_stacks = d->cap_stacks = N_STACKS + 1;
    /* links: one per span (entry 0 is the zero link) */
    for (int i = 0; i < SPANS_PER_BATCH; i++) {
        pl_link l = {0};
        l.trace_id_len = 16;
        l.span_id_len = 8;
        l.trace_id[0] = (uint8_t)(i + 1); /* distinct, so none is merged; refreshed later */
        l.span_id[0] = (uint8_t)(i + 1);
        pl_dict_intern_link(&b->arena, d, &l);
    }
    int32_t cpu = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("cpu"));
    int32_t ns = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("nanoseconds"));
    ps->resources = pl_batch_alloc(b, N_SERVICES * sizeof(pl_resource_profiles));
    ps->n_resources = N_SERVICES;
    for (int s = 0; s < N_SERVICES; s++) {
        pl_resource_profiles *rp = &ps->resources[s];
        rp->has_resource = true;
        pl_attrs_put(&b->arena, &rp->resource.attrs, PL_BYTES_LIT("service.name"),
                     pl_value_string(pl_bytes_from_cstr(services[s])));
        rp->scopes = pl_batch_alloc(b, sizeof(pl_scope_profiles));
        rp->n_scopes = 1;
        rp->scopes[0].profiles = pl_batch_alloc(b, sizeof(pl_profile));
        rp->scopes[0].n_profiles = 1;
        pl_profile *p = &rp->scopes[0].profiles[0];
        p->has_sample_type = true;
        p->sample_type = (pl_vtype){cpu, ns};
        p->samples =
            pl_batch_alloc(b, (size_t)SPANS_PER_BATCH * (size_t)per_span * sizeof(pl_sample));
    }
    for (int i = 0; i < SPANS_PER_BATCH; i++) {
        int k = i % SPANS_PER_TRACE, t = i / SPANS_PER_TRACE;
        int svc = (t + k) % N_SERVICES;
        pl_profile *p = &ps->resources[svc].scopes[0].profiles[0];
        for (int j = 0; j < per_span; j++) {
            pl_sample *smp = &p->samples[p->n_samples++];
            uint64_t x = rnd(r);
            smp->stack_index = (int32_t)(1 + ((x % 4 == 0) ? (x >> 8) % N_STACKS : (x >> 8) % 50));
            smp->link_index = i + 1;
            smp->values = pl_batch_alloc(b, sizeof(int64_t));
            smp->values[0] = 10000000;
            smp->n_values = 1;
            smp->timestamps_unix_nano = pl_batch_alloc(b, sizeof(uint64_t));
            smp->n_timestamps = 1;
        }
    }
    return b;
}

static void refresh_samples(pl_batch *b, pl_span **order, uint64_t now)
{
    pl_profiles *ps = &b->data.profiles;
    for (int i = 0; i < SPANS_PER_BATCH; i++) {
        pl_link *l = &ps->dict.links[i + 1];
        memcpy(l->trace_id, order[i]->trace_id, 16);
        memcpy(l->span_id, order[i]->span_id, 8);
    }
    for (uint32_t r = 0; r < ps->n_resources; r++) {
        pl_profile *p = &ps->resources[r].scopes[0].profiles[0];
        p->time_unix_nano = now;
        for (uint32_t s = 0; s < p->n_samples; s++)
            p->samples[s].timestamps_unix_nano[0] = now - (s % 100) * 1000000ull;
    }
}

/* CPU nanoseconds of this process's threads: all, the store's writer
 * ("pl-sqlite"), and its checkpoint thread ("pl-sqlite-ckpt"). */
static void cpu_ns(uint64_t *all, uint64_t *others, uint64_t *ckpt)
{
    *all = *others = *ckpt = 0;
    long tick = sysconf(_SC_CLK_TCK);
    DIR *dir = opendir("/proc/self/task");
    if (!dir)
        return;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], buf[1024];
        snprintf(path, sizeof(path), "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        unsigned long ut = 0, st = 0;
        if (!p ||
            sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
            continue;
        uint64_t ns = (uint64_t)(ut + st) * (1000000000ull / (uint64_t)tick);
        *all += ns;
        char *name = strchr(buf, '(');
        size_t len = name && p > name ? (size_t)(p - name - 1) : 0;
        if (len == 9 && memcmp(name + 1, "pl-sqlite", 9) == 0)
            *others += ns;
        else if (len == 14 && memcmp(name + 1, "pl-sqlite-ckpt", 14) == 0)
            *ckpt += ns;
    }
    closedir(dir);
}

static uint64_t rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kib = 0;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtoull(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

typedef struct extra_find {
    const char *name;
    uint64_t value;
} extra_find;

static void find_extra(void *arg, const pl_stats_extra *e)
{
    extra_find *f = arg;
    if (strcmp(e->name, f->name) == 0)
        f->value = pl_stats_extra_counter(e);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    pl_sqlite_library_setup(); /* as proflink's main() */
    double seconds = argc > 1 ? atof(argv[1]) : 600;
    int per_span = argc > 2 ? atoi(argv[2]) : 0;
    char path[512];
    const char *tmp = getenv("TMPDIR");
    if (argc > 3)
        snprintf(path, sizeof(path), "%s", argv[3]);
    else
        snprintf(path, sizeof(path), "%s/proflink-bench-sustained.db", tmp ? tmp : "/tmp");
    if (seconds <= 0 || per_span < 0 || per_span > 50) {
        fprintf(stderr, "usage: bench_store_sustained SECONDS [SAMPLES_PER_SPAN 0..50] [DB]\n");
        return 2;
    }
    db_file_remove(path);

    bench_sqlite bs;
    int started = bench_sqlite_start(&bs, path, argc > 4 ? argv[4] : NULL);
    if (started != 0)
        return started;
    pl_stats *stats = bs.stats;
    void *x = bs.x;
    rng r = {(uint64_t)pl_time_now_ns() | 1};
    pl_span *order[SPANS_PER_BATCH];
    pl_batch *spans = make_spans(order);
    pl_batch *samples = per_span ? make_samples(per_span, &r) : NULL;

    printf("sustained writes to %s: %.0f s, batches of %d spans (fresh random ids), %d "
           "linked samples per span; exporter defaults (retention 24h, max_size %s)\n",
           path, seconds, SPANS_PER_BATCH, per_span, argc > 4 ? argv[4] : "1GiB");
    printf("%6s %12s %10s %10s %14s %9s %10s\n", "t(s)", "spans/s", "writer%", "process%",
           "spans/writer-s", "RSS MiB", "db MiB");
    fflush(stdout);

    const char *copies_env = getenv("BENCH_COPIES");
    round_ids *ring = copies_env && atoi(copies_env) > 0 ? calloc(COPY_LAG, sizeof(*ring)) : NULL;
    uint64_t rounds = 0, copies = 0;
    if (ring)
        printf("with copies: every batch offered again %d batches later\n", COPY_LAG);
    uint64_t accepted = 0, refused = 0;
    uint64_t t0 = pl_time_mono_ns(), next_report = t0 + INTERVAL_NS, last_t = t0;
    uint64_t last_sent = 0, cpu0_all, cpu0_w, cpu0_ck, last_all, last_w;
    cpu_ns(&cpu0_all, &cpu0_w, &cpu0_ck);
    last_all = cpu0_all;
    last_w = cpu0_w;
    double rates[1024], per_cpus[1024];
    int n_rates = 0;
    uint64_t max_rss = 0;
    uint64_t end = t0 + (uint64_t)(seconds * 1e9);
    for (;;) {
        uint64_t now_mono = pl_time_mono_ns();
        if (now_mono >= next_report) {
            uint64_t sent = pl_stats_get(stats, PL_SIGNAL_TRACES, PL_STAT_SENT);
            uint64_t all, w, ck;
            cpu_ns(&all, &w, &ck);
            double dt = (double)(now_mono - last_t);
            double rate = (double)(sent - last_sent) / (dt / 1e9);
            uint64_t rss = rss_kib();
            if (rss > max_rss)
                max_rss = rss;
            if (n_rates < 1024)
                rates[n_rates++] = rate;
            double per_cpu =
                w > last_w ? (double)(sent - last_sent) / ((double)(w - last_w) / 1e9) : 0;
            if (n_rates < 1024)
                per_cpus[n_rates - 1] = per_cpu;
            printf("%6.0f %12.0f %10.1f %10.1f %14.0f %9.1f %10.1f\n",
                   (double)(now_mono - t0) / 1e9, rate, 100.0 * (double)(w - last_w) / dt,
                   100.0 * (double)(all - last_all) / dt, per_cpu, (double)rss / 1024.0,
                   (double)file_size(path) / 1048576.0);
            fflush(stdout);
            last_sent = sent;
            last_t = now_mono;
            last_all = all;
            last_w = w;
            next_report += INTERVAL_NS;
        }
        if (now_mono >= end)
            break;
        uint64_t now = pl_time_now_ns();
        refresh_spans(&r, order, now);
        pl_status st = offer(&bs, spans, next_report, &refused);
        if (st == PL_ERR_REFUSED)
            continue; /* report, then offer fresh ids */
        if (st != PL_OK)
            return 1;
        accepted += SPANS_PER_BATCH;
        if (ring) {
            save_round(order, &ring[rounds % COPY_LAG]);
            if (rounds >= COPY_LAG) {
                round_ids now_ids;
                save_round(order, &now_ids);
                restore_round(order, &ring[(rounds + 1) % COPY_LAG]);
                if (offer(&bs, spans, 0, &refused) != PL_OK)
                    return 1;
                copies += SPANS_PER_BATCH;
                restore_round(order, &now_ids);
            }
            rounds++;
        }
        if (samples) {
            refresh_samples(samples, order, now);
            if (offer(&bs, samples, 0, &refused) != PL_OK)
                return 1;
        }
        uv_run(&bs.loop, UV_RUN_NOWAIT);
    }
    while (pl_exporter_sqlite.pending(x) > 0) {
        uv_run(&bs.loop, UV_RUN_NOWAIT);
        uv_sleep(1);
    }
    double secs = (double)(pl_time_mono_ns() - t0) / 1e9;
    uint64_t all, w, ck;
    cpu_ns(&all, &w, &ck);
    uint64_t sent = pl_stats_get(stats, PL_SIGNAL_TRACES, PL_STAT_SENT);
    uint64_t failed = pl_stats_get(stats, PL_SIGNAL_TRACES, PL_STAT_FAILED) +
                      pl_stats_get(stats, PL_SIGNAL_PROFILES, PL_STAT_FAILED);
    uint64_t samples_sent = pl_stats_get(stats, PL_SIGNAL_PROFILES, PL_STAT_SENT);
    extra_find del = {"retention_deleted_spans", 0};
    pl_stats_each_extra(stats, find_extra, &del);
    bench_sqlite_stop(&bs);

    int64_t stored = -1;
    sqlite3 *db;
    sqlite3_stmt *q;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT count(*) FROM spans", -1, &q, NULL) == SQLITE_OK) {
        if (sqlite3_step(q) == SQLITE_ROW)
            stored = sqlite3_column_int64(q, 0);
        sqlite3_finalize(q);
    }
    sqlite3_close(db);

    qsort(rates, (size_t)n_rates, sizeof(double), cmp_double);
    qsort(per_cpus, (size_t)n_rates, sizeof(double), cmp_double);
    double median = n_rates ? rates[n_rates / 2] : (double)sent / secs;
    printf("median of %d intervals: %.0f spans/s (%s %d linked samples per span); overall %.0f "
           "spans/s over %.1f s\n",
           n_rates, median, per_span ? "with" : "alone,", per_span, (double)sent / secs, secs);
    printf("spans per writer CPU-second: median %.0f, overall %.0f\n",
           n_rates ? per_cpus[n_rates / 2] : 0.0,
           w > cpu0_w ? (double)sent / ((double)(w - cpu0_w) / 1e9) : 0.0);
    if (ring)
        printf("with copies: %" PRIu64 " copies offered; new spans per writer CPU-second, "
               "overall %.0f\n",
               copies, w > cpu0_w ? (double)accepted / ((double)(w - cpu0_w) / 1e9) : 0.0);
    printf("CPU: writer thread %.1f %%, checkpoint thread %.1f %%, process %.1f %% of one core; "
           "max RSS %.1f MiB; %" PRIu64 " samples committed\n",
           100.0 * (double)(w - cpu0_w) / (secs * 1e9),
           100.0 * (double)(ck - cpu0_ck) / (secs * 1e9),
           100.0 * (double)(all - cpu0_all) / (secs * 1e9), (double)max_rss / 1024.0, samples_sent);
    bool ok = failed == 0 && sent == accepted + copies && stored >= 0 &&
              (uint64_t)stored + del.value == accepted;
    printf("spans accepted %" PRIu64 ", committed %" PRIu64 ", in the store %" PRId64
           ", deleted by retention %" PRIu64 ", failed %" PRIu64 ", refusals retried %" PRIu64
           ": %s\n",
           accepted, sent, stored, del.value, failed, refused,
           ok ? "every accepted span is stored or was deleted by retention" : "MISMATCH");
    pl_batch_free(spans);
    if (samples)
        pl_batch_free(samples);
    free(ring);
    bench_sqlite_free(&bs);
    return ok ? 0 : 1;
}
