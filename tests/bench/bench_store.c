/*
 * bench_store.c: throughput and query latency of the embedded store.
 *
 *   bench_store [spans] [db-path]      (defaults: 1000000, $TMPDIR/proflink-bench-store.db)
 *   bench_store --query-only [db-path] (only the queries, on a store written before)
 *   bench_store --exporter [spans]     (through the sqlite exporter: clone, queue,
 *                                       writer thread with group commit)
 *
 * Writes `spans` spans (traces of 10 spans, 5 services, start times spread
 * over the last hour) and, per trace, 20 CPU samples linked to its spans
 * (stacks drawn from a pool of 2,000 stacks over 500 functions), in
 * transactions of 5,000 spans as the exporter's writer thread would. Then,
 * on a read-only connection, times:
 *   - one trace (span tree with per-span CPU and hottest functions),
 *   - a 15-minute flame graph of one service,
 *   - the 20 slowest traces of one service over 15 minutes,
 *   - the top functions of one service over 15 minutes.
 * Prints medians (and p90) over repeated runs.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include <uv.h>

#include "config/decode.h"
#include "core/component.h"
#include "core/model.h"
#include "core/sqlite_file.h"
#include "core/stats.h"
#include "store/sqlite_store.h"
#include "../xorshift.h"
#include "../db_file_fixture.h"
#include "sqlite_exporter_fixture.h"

#define SPANS_PER_TRACE 10
/* 20 samples per trace, or $BENCH_SAMPLES_PER_TRACE (tests/bench/bench_querier.c's
 * store: 100, i.e. 10 M samples for 1 M spans) */
static int samples_per_trace = 20;
#define SAMPLES_PER_TRACE samples_per_trace
#define TRACES_PER_BATCH  100
#define N_SERVICES        5
#define N_FUNCTIONS       500
#define N_STACKS          2000

static const char *const services[N_SERVICES] = {"frontend", "cart", "checkout", "payment",
                                                 "inventory"};
static char fn_names[N_FUNCTIONS][48];
static int stack_frames[N_STACKS][32];
static int stack_depth[N_STACKS];

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    return xorshift64(&rng_state);
}

static void trace_id_of(uint32_t t, uint8_t out[16])
{
    memset(out, 0, 16);
    out[0] = 0x4b;
    out[1] = 0xf9;
    for (int i = 0; i < 4; i++)
        out[12 + i] = (uint8_t)(t >> (24 - 8 * i));
}

static void span_id_of(uint32_t t, int k, uint8_t out[8])
{
    out[0] = 0x11;
    out[1] = (uint8_t)(t >> 24);
    out[2] = (uint8_t)(t >> 16);
    out[3] = (uint8_t)(t >> 8);
    out[4] = (uint8_t)t;
    out[5] = 0;
    out[6] = 0;
    out[7] = (uint8_t)(k + 1);
}

static uint64_t trace_start(uint32_t t, uint32_t n_traces, uint64_t now)
{
    /* spread over the last hour, oldest first */
    return now - 3600ull * 1000000000ull + (uint64_t)t * (3600ull * 1000000000ull / n_traces);
}

static pl_batch *spans_batch(uint32_t first, uint32_t count, uint32_t n_traces, uint64_t now)
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
        rs->scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
        rs->n_scopes = 1;
        rs->scopes[0].spans = pl_batch_alloc(b, count * SPANS_PER_TRACE * sizeof(pl_span));
    }
    for (uint32_t t = first; t < first + count; t++) {
        uint64_t start = trace_start(t, n_traces, now);
        uint64_t dur = 5000000 + rnd() % 500000000; /* 5..505 ms */
        for (int k = 0; k < SPANS_PER_TRACE; k++) {
            int svc = k == 0 ? (int)(t % N_SERVICES) : (int)((t + (uint32_t)k) % N_SERVICES);
            pl_scope_spans *ss = &tr->resources[svc].scopes[0];
            pl_span *sp = &ss->spans[ss->n_spans++];
            trace_id_of(t, sp->trace_id);
            sp->trace_id_len = 16;
            span_id_of(t, k, sp->span_id);
            sp->span_id_len = 8;
            if (k) {
                span_id_of(t, k < 4 ? 0 : (k % 4), sp->parent_span_id);
                sp->parent_span_id_len = 8;
            }
            static const char *const names[] = {"GET /api/cart",  "SELECT cart_items",
                                                "redis GET",      "render",
                                                "POST /checkout", "grpc Payment/Charge"};
            sp->name = pl_bytes_from_cstr(names[(t + (uint32_t)k) % 6]);
            sp->kind = k == 0 ? 2 : 3;
            uint64_t off = k ? (uint64_t)k * dur / 20 : 0;
            sp->start_time_unix_nano = start + off;
            sp->end_time_unix_nano = start + off + (k ? dur / 4 : dur);
            pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("http.route"),
                         pl_value_string(PL_BYTES_LIT("/api/cart/{id}")));
            pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("http.status_code"),
                         pl_value_int(200));
            if (k == 0 && t % 4999 == 7) { /* rare: 20 traces of 100,000 */
                pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("feature.flag"),
                             pl_value_string(PL_BYTES_LIT("beta-checkout")));
                pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("retry.count"), pl_value_int(3));
            }
        }
    }
    return b;
}

static pl_batch *samples_batch(uint32_t first, uint32_t count, uint32_t n_traces, uint64_t now)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_profiles *ps = &b->data.profiles;
    ps->has_dictionary = true;
    pl_dictionary *d = &ps->dict;
    pl_dict_ensure_zero_entries(&b->arena, d);
    /* the whole function and stack pool in every batch's dictionary, as a
     * profiler's dictionary would carry it */
    d->functions = pl_arena_grow(&b->arena, d->functions, 1, N_FUNCTIONS + 1, sizeof(pl_function));
    d->locations = pl_arena_grow(&b->arena, d->locations, 1, N_FUNCTIONS + 1, sizeof(pl_location));
    d->stacks = pl_arena_grow(&b->arena, d->stacks, 1, N_STACKS + 1, sizeof(pl_stack));
    int32_t file = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("server.go"));
    for (int f = 0; f < N_FUNCTIONS; f++) {
        int32_t name = pl_dict_intern_string(&b->arena, d, pl_bytes_from_cstr(fn_names[f]));
        d->functions[f + 1] = (pl_function){name, 0, file, 1};
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
        st->n_location_indices = (uint32_t)stack_depth[s];
        st->location_indices = pl_batch_alloc(b, (size_t)stack_depth[s] * sizeof(int32_t));
        for (int i = 0; i < stack_depth[s]; i++)
            st->location_indices[i] = stack_frames[s][stack_depth[s] - 1 - i] + 1;
    }
    d->n_stacks = d->cap_stacks = N_STACKS + 1;

    ps->resources = pl_batch_alloc(b, N_SERVICES * sizeof(pl_resource_profiles));
    ps->n_resources = N_SERVICES;
    int32_t cpu = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("cpu"));
    int32_t ns = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("nanoseconds"));
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
        p->time_unix_nano = trace_start(first, n_traces, now);
        p->samples = pl_batch_alloc(b, count * SAMPLES_PER_TRACE * sizeof(pl_sample));
    }
    for (uint32_t t = first; t < first + count; t++) {
        uint64_t start = trace_start(t, n_traces, now);
        for (int i = 0; i < SAMPLES_PER_TRACE; i++) {
            int k = (int)(rnd() % SPANS_PER_TRACE);
            int svc = k == 0 ? (int)(t % N_SERVICES) : (int)((t + (uint32_t)k) % N_SERVICES);
            pl_profile *p = &ps->resources[svc].scopes[0].profiles[0];
            pl_sample *smp = &p->samples[p->n_samples++];
            /* skewed: a few stacks are hot, like real profiles */
            uint64_t r = rnd();
            smp->stack_index = (int32_t)(1 + ((r % 4 == 0) ? (r >> 8) % N_STACKS : (r >> 8) % 100));
            pl_link l = {0};
            trace_id_of(t, l.trace_id);
            span_id_of(t, k, l.span_id);
            l.trace_id_len = 16;
            l.span_id_len = 8;
            smp->link_index = pl_dict_intern_link(&b->arena, d, &l);
            smp->values = pl_batch_alloc(b, sizeof(int64_t));
            smp->values[0] = 10000000;
            smp->n_values = 1;
            smp->timestamps_unix_nano = pl_batch_alloc(b, sizeof(uint64_t));
            smp->timestamps_unix_nano[0] = start + (uint64_t)i * 1000000;
            smp->n_timestamps = 1;
        }
    }
    return b;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *ns, int n)
{
    qsort(ns, (size_t)n, sizeof(uint64_t), cmp_u64);
    printf("%-44s median %8.2f ms   p90 %8.2f ms   (%d runs)\n", what, (double)ns[n / 2] / 1e6,
           (double)ns[(n * 9) / 10] / 1e6, n);
}

/* The newest trace start and the trace count of an existing store. */
static int existing_store(const char *path, uint64_t *now, uint32_t *n_traces)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT max(start_ns), count(*) FROM traces", -1, &st, NULL) !=
            SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", path, sqlite3_errmsg(db));
        return -1;
    }
    if (sqlite3_step(st) == SQLITE_ROW) {
        *now = (uint64_t)sqlite3_column_int64(st, 0);
        *n_traces = (uint32_t)sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return *n_traces ? 0 : -1;
}

static int run_queries(const char *path, uint64_t now, uint32_t n_traces);

/* Sustained rate through the exporter: batches are built and exported on
 * this thread (the event loop's role) while the writer thread commits;
 * a full queue answers REFUSED and the batch is offered again, as a
 * receiver's client would retry. Ends when everything is committed. */
static int run_exporter(const char *path, uint32_t n_spans)
{
    bench_sqlite bs;
    int started = bench_sqlite_start(&bs, path, NULL);
    if (started != 0)
        return started;
    pl_stats *stats = bs.stats;
    void *x = bs.x;
    uint32_t n_traces = n_spans / SPANS_PER_TRACE;
    uint64_t now = pl_time_now_ns();
    uint64_t refused = 0;
    uint64_t t0 = pl_time_mono_ns();
    for (uint32_t t = 0; t < n_traces; t += TRACES_PER_BATCH) {
        uint32_t count = n_traces - t < TRACES_PER_BATCH ? n_traces - t : TRACES_PER_BATCH;
        pl_batch *b[2] = {spans_batch(t, count, n_traces, now),
                          samples_batch(t, count, n_traces, now)};
        for (int k = 0; k < 2; k++) {
            pl_status st;
            while ((st = pl_exporter_sqlite.export(x, b[k])) == PL_ERR_REFUSED) {
                refused++;
                uv_run(&bs.loop, UV_RUN_NOWAIT);
                uv_sleep(1);
            }
            if (st != PL_OK) {
                fprintf(stderr, "export failed: %s\n", pl_status_name(st));
                return 1;
            }
            pl_batch_free(b[k]);
        }
        uv_run(&bs.loop, UV_RUN_NOWAIT);
    }
    while (pl_exporter_sqlite.pending(x) > 0) {
        uv_run(&bs.loop, UV_RUN_NOWAIT);
        uv_sleep(1);
    }
    double secs = (double)(pl_time_mono_ns() - t0) / 1e9;
    uint64_t sent = pl_stats_get(stats, PL_SIGNAL_TRACES, PL_STAT_SENT);
    uint64_t failed = pl_stats_get(stats, PL_SIGNAL_TRACES, PL_STAT_FAILED) +
                      pl_stats_get(stats, PL_SIGNAL_PROFILES, PL_STAT_FAILED);
    printf("through the exporter: %u spans + %u samples in %.1f s: %.0f spans/s with their "
           "samples (%" PRIu64 " spans committed, %" PRIu64 " failed, %" PRIu64
           " retries after a full queue)\n",
           n_traces * SPANS_PER_TRACE, n_traces * SAMPLES_PER_TRACE, secs,
           (double)(n_traces * SPANS_PER_TRACE) / secs, sent, failed, refused);
    bench_sqlite_stop(&bs);
    bench_sqlite_free(&bs);
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    pl_sqlite_library_setup(); /* as proflink's main() */
    const char *spt = getenv("BENCH_SAMPLES_PER_TRACE");
    if (spt && atoi(spt) > 0)
        samples_per_trace = atoi(spt);
    bool query_only = argc > 1 && strcmp(argv[1], "--query-only") == 0;
    bool exporter = argc > 1 && strcmp(argv[1], "--exporter") == 0;
    uint32_t n_spans =
        argc > 1 && !query_only && !exporter ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000000;
    char path[512];
    const char *tmp = getenv("TMPDIR");
    if (argc > 2)
        snprintf(path, sizeof(path), "%s", argv[2]);
    else
        snprintf(path, sizeof(path), "%s/proflink-bench-store.db", tmp ? tmp : "/tmp");
    if (exporter) {
        for (int f = 0; f < N_FUNCTIONS; f++)
            snprintf(fn_names[f], sizeof(fn_names[f]), "github.com/shop/svc/pkg%d.Function%d",
                     f % 40, f);
        for (int s = 0; s < N_STACKS; s++) {
            stack_depth[s] = 8 + (int)(rnd() % 24);
            for (int i = 0; i < stack_depth[s]; i++)
                stack_frames[s][i] = i < 3 ? i : (int)(rnd() % N_FUNCTIONS);
        }
        snprintf(path, sizeof(path), "%s/proflink-bench-exporter.db", tmp ? tmp : "/tmp");
        db_file_remove(path);
        int rc = run_exporter(path, argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 300000);
        unlink(path);
        return rc;
    }
    if (query_only) {
        uint64_t now = 0;
        uint32_t n_traces = 0;
        if (existing_store(path, &now, &n_traces) < 0)
            return 1;
        return run_queries(path, now, n_traces);
    }
    db_file_remove(path);

    for (int f = 0; f < N_FUNCTIONS; f++)
        snprintf(fn_names[f], sizeof(fn_names[f]), "github.com/shop/svc/pkg%d.Function%d", f % 40,
                 f);
    for (int s = 0; s < N_STACKS; s++) {
        stack_depth[s] = 8 + (int)(rnd() % 24);
        for (int i = 0; i < stack_depth[s]; i++)
            stack_frames[s][i] = i < 3 ? i : (int)(rnd() % N_FUNCTIONS);
    }

    uint32_t n_traces = n_spans / SPANS_PER_TRACE;
    uint64_t now = pl_time_now_ns();
    pl_err err = {{0}};
    pl_store *s = NULL;
    if (pl_store_open(path, NULL, &s, NULL, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("store %s: %u spans (%u traces x %d), %u linked CPU samples, %d services\n", path,
           n_traces * SPANS_PER_TRACE, n_traces, SPANS_PER_TRACE, n_traces * SAMPLES_PER_TRACE,
           N_SERVICES);
    uint64_t span_ns = 0, sample_ns = 0, build_ns = 0;
    uint32_t per_tx = 5; /* batches of 1000 spans per transaction */
    for (uint32_t t = 0; t < n_traces; t += TRACES_PER_BATCH * per_tx) {
        pl_batch *sb[16], *pb[16];
        uint32_t nb = 0;
        uint64_t t0 = pl_time_mono_ns();
        for (uint32_t k = 0; k < per_tx && t + k * TRACES_PER_BATCH < n_traces; k++) {
            uint32_t first = t + k * TRACES_PER_BATCH;
            uint32_t count =
                n_traces - first < TRACES_PER_BATCH ? n_traces - first : TRACES_PER_BATCH;
            sb[nb] = spans_batch(first, count, n_traces, now);
            pb[nb] = samples_batch(first, count, n_traces, now);
            nb++;
        }
        uint64_t t1 = pl_time_mono_ns();
        build_ns += t1 - t0;
        pl_status st = pl_store_begin(s, &err);
        for (uint32_t k = 0; k < nb && st == PL_OK; k++)
            st = pl_store_write(s, sb[k], NULL, &err);
        if (st == PL_OK)
            st = pl_store_commit(s, &err);
        uint64_t t2 = pl_time_mono_ns();
        span_ns += t2 - t1;
        if (st == PL_OK)
            st = pl_store_begin(s, &err);
        for (uint32_t k = 0; k < nb && st == PL_OK; k++)
            st = pl_store_write(s, pb[k], NULL, &err);
        if (st == PL_OK)
            st = pl_store_commit(s, &err);
        sample_ns += pl_time_mono_ns() - t2;
        for (uint32_t k = 0; k < nb; k++) {
            pl_batch_free(sb[k]);
            pl_batch_free(pb[k]);
        }
        if (st != PL_OK) {
            fprintf(stderr, "write: %s\n", err.msg);
            return 1;
        }
    }
    double spans_total = (double)n_traces * SPANS_PER_TRACE;
    double samples_total = (double)n_traces * SAMPLES_PER_TRACE;
    printf("insert spans:    %10.0f spans/s   (%.1f s)\n", spans_total / ((double)span_ns / 1e9),
           (double)span_ns / 1e9);
    printf("insert samples:  %10.0f samples/s (%.1f s)\n",
           samples_total / ((double)sample_ns / 1e9), (double)sample_ns / 1e9);
    printf("combined:        %10.0f spans/s with their samples\n",
           spans_total / ((double)(span_ns + sample_ns) / 1e9));
    printf("(building the batches in memory took %.1f s, not counted)\n", (double)build_ns / 1e9);
    pl_store_close(s);
    struct stat stbuf;
    if (stat(path, &stbuf) == 0)
        printf("database file: %.1f MiB\n", (double)stbuf.st_size / 1048576.0);
    return run_queries(path, now, n_traces);
}

static int run_queries(const char *path, uint64_t now, uint32_t n_traces)
{
    pl_err err = {{0}};
    pl_store *s = NULL;
    pl_store_options ro = {.read_only = true};
    if (pl_store_open(path, &ro, &s, NULL, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    enum { RUNS_TRACE = 201, RUNS_FLAME = 21 };
    uint64_t times[RUNS_TRACE];
    size_t spans_seen = 0;
    for (int i = 0; i < RUNS_TRACE; i++) {
        uint8_t tid[16];
        trace_id_of((uint32_t)(rnd() % n_traces), tid);
        pl_trace_detail d;
        uint64_t t0 = pl_time_mono_ns();
        if (pl_store_query_trace(s, tid, 3, &d, &err) != PL_OK) {
            fprintf(stderr, "trace: %s\n", err.msg);
            return 1;
        }
        times[i] = pl_time_mono_ns() - t0;
        spans_seen += d.n;
        pl_trace_detail_free(&d);
    }
    report("one trace (span tree, CPU, hot functions)", times, RUNS_TRACE);
    if (spans_seen != (size_t)RUNS_TRACE * SPANS_PER_TRACE)
        fprintf(stderr, "unexpected span count %zu\n", spans_seen);

    size_t stacks = 0;
    int64_t total = 0;
    for (int i = 0; i < RUNS_FLAME; i++) {
        pl_profile_query q = {0};
        q.scope = PL_PROFILE_SERVICE;
        q.service = services[i % N_SERVICES];
        q.since_ns = now - 15ull * 60 * 1000000000ull;
        pl_profile_result r;
        uint64_t t0 = pl_time_mono_ns();
        if (pl_store_query_profile(s, &q, &r, &err) != PL_OK) {
            fprintf(stderr, "flamegraph: %s\n", err.msg);
            return 1;
        }
        pl_buf folded;
        pl_buf_init(&folded);
        for (size_t k = 0; k < r.n_stacks; k++)
            pl_buf_printf(&folded, "%s %" PRId64 "\n", r.stacks[k].frames, r.stacks[k].value);
        times[i] = pl_time_mono_ns() - t0;
        stacks = r.n_stacks;
        total = r.total;
        pl_buf_free(&folded);
        pl_profile_result_free(&r);
    }
    report("15-minute service flame graph (folded)", times, RUNS_FLAME);
    printf("  (last one: %zu stacks, %.1f s of CPU)\n", stacks, (double)total / 1e9);

    for (int i = 0; i < RUNS_FLAME; i++) {
        pl_trace_query q = {0};
        q.service = services[i % N_SERVICES];
        q.since_ns = now - 15ull * 60 * 1000000000ull;
        q.limit = 20;
        pl_trace_list l;
        uint64_t t0 = pl_time_mono_ns();
        if (pl_store_query_traces(s, &q, &l, &err) != PL_OK) {
            fprintf(stderr, "traces: %s\n", err.msg);
            return 1;
        }
        times[i] = pl_time_mono_ns() - t0;
        pl_trace_list_free(&l);
    }
    report("20 slowest traces of a service, 15 minutes", times, RUNS_FLAME);

    for (int i = 0; i < RUNS_FLAME; i++) {
        pl_profile_query q = {0};
        q.scope = PL_PROFILE_SERVICE;
        q.service = services[i % N_SERVICES];
        q.since_ns = now - 15ull * 60 * 1000000000ull;
        pl_profile_result r;
        uint64_t t0 = pl_time_mono_ns();
        if (pl_store_query_profile(s, &q, &r, &err) != PL_OK)
            return 1;
        times[i] = pl_time_mono_ns() - t0;
        pl_profile_result_free(&r);
    }
    report("top functions of a service, 15 minutes", times, RUNS_FLAME);
    pl_store_close(s);
    return 0;
}
