/*
 * bench_correlation.c: figures for the correlation processor.
 *
 *   1. index memory with 1,000,000 spans held in the window: the span
 *      table's own size (from pl_correlation_get_usage) and the process's
 *      resident-memory growth while the spans are indexed (the batches are
 *      built before the measurement starts, so their memory is not counted);
 *   2. samples linked per CPU-second (process CPU time of the consume calls
 *      only; building and freeing batches is outside the measurement), and
 *      the slowest single consume call;
 *   3. the cost of passing a span through when no profiles are present:
 *      index, hold, release at the window's end, per span, in steady state.
 *
 * Usage: [PL_HOLD_COMPRESSION=none|zstd] bench_correlation [spans_held (default 1000000)]
 * (PL_HOLD_COMPRESSION sets the processor's hold_compression; unset: its default)
 * Time is an injected clock, so windows close exactly when the benchmark
 * says, without sleeping.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/model.h"
#include "core/stats.h"
#include "pipeline/consumer.h"
#include "processors/correlation.h"
#include "bench_util.h"
#include "../xorshift.h"

#define S(x) ((uint64_t)(x)*1000000000ull)

static uint64_t fake_now;
static uint64_t fake_clock(void *arg)
{
    (void)arg;
    return fake_now;
}

/* Keeps what comes out, to free outside the timed sections. */
typedef struct sink {
    pl_batch **b;
    size_t n, cap;
} sink;

static pl_status sink_fn(void *arg, pl_batch *batch)
{
    sink *s = arg;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->b = realloc(s->b, s->cap * sizeof(pl_batch *));
    }
    s->b[s->n++] = batch;
    return PL_OK;
}

static void sink_free(sink *s)
{
    for (size_t i = 0; i < s->n; i++)
        pl_batch_free(s->b[i]);
    s->n = 0;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    return xorshift64(&rng);
}

static void id8(uint64_t v, uint8_t out[8])
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        out[i] = (uint8_t)v;
}

/* A batch of n spans: trees of 4 (a root and three children), random ids. */
static pl_batch *mk_spans(uint32_t n, uint64_t t0, uint64_t *ids_out)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_traces *t = &b->data.traces;
    t->n_resources = 1;
    t->resources = pl_batch_alloc(b, sizeof(pl_resource_spans));
    pl_resource_spans *rs = t->resources;
    pl_attrs_put(&b->arena, &rs->resource.attrs, PL_BYTES_LIT("service.name"),
                 pl_value_string(PL_BYTES_LIT("bench")));
    rs->n_scopes = 1;
    rs->scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
    rs->scopes->n_spans = n;
    rs->scopes->spans = pl_batch_alloc(b, n * sizeof(pl_span));
    uint64_t root = 0;
    uint8_t trace[16];
    for (uint32_t i = 0; i < n; i++) {
        pl_span *sp = &rs->scopes->spans[i];
        uint64_t id = next_rand() | 1;
        if (i % 4 == 0) {
            root = id;
            uint64_t a = next_rand(), c = next_rand();
            memcpy(trace, &a, 8);
            memcpy(trace + 8, &c, 8);
        } else {
            id8(root, sp->parent_span_id);
            sp->parent_span_id_len = 8;
        }
        memcpy(sp->trace_id, trace, 16);
        sp->trace_id_len = 16;
        id8(id, sp->span_id);
        sp->span_id_len = 8;
        sp->start_time_unix_nano = t0;
        sp->end_time_unix_nano = t0 + 50000000;
        sp->name = PL_BYTES_LIT("GET /api/items/:id");
        if (i % 4 == 0) { /* the server span carries the route */
            sp->attrs.items = pl_batch_alloc(b, sizeof(pl_kv));
            sp->attrs.items[0].key = PL_BYTES_LIT("http.route");
            sp->attrs.items[0].value = pl_value_string(PL_BYTES_LIT("/api/items/:id"));
            sp->attrs.n = sp->attrs.cap = 1;
        }
        if (ids_out)
            ids_out[i] = id;
    }
    return b;
}

/* A cpu/nanoseconds profile of n samples, each linked (OTLP Link) to one of
 * `spans` (n / per_span distinct spans, per_span samples each). */
static pl_batch *mk_samples(uint32_t n, const uint64_t *spans, size_t n_spans, uint32_t per_span,
                            uint64_t t0)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_profiles *ps = &b->data.profiles;
    pl_dictionary *d = &ps->dict;
    ps->has_dictionary = true;
    pl_dict_ensure_zero_entries(&b->arena, d);
    /* 32 functions, one location and one two-frame stack each */
    enum { NF = 32 };
    d->functions = pl_arena_grow(&b->arena, d->functions, 1, NF + 1, sizeof(pl_function));
    d->locations = pl_arena_grow(&b->arena, d->locations, 1, NF + 1, sizeof(pl_location));
    d->stacks = pl_arena_grow(&b->arena, d->stacks, 1, NF + 1, sizeof(pl_stack));
    d->cap_functions = d->cap_locations = d->cap_stacks = NF + 1;
    for (int i = 1; i <= NF; i++) {
        char name[32];
        snprintf(name, sizeof(name), "./lib/app.mjs:fn%d:%d", i, i * 10);
        int32_t s = pl_dict_intern_string(&b->arena, d, pl_batch_bytes(b, name, strlen(name)));
        d->functions[i] = (pl_function){s, 0, 0, 0};
        pl_line *line = pl_batch_alloc(b, sizeof(pl_line));
        line->function_index = i;
        d->locations[i] = (pl_location){0, (uint64_t)i, line, 1, NULL, 0};
        int32_t *locs = pl_batch_alloc(b, 2 * sizeof(int32_t));
        locs[0] = i;
        locs[1] = 1;
        d->stacks[i] = (pl_stack){locs, 2};
    }
    d->n_functions = d->n_locations = d->n_stacks = NF + 1;
    int32_t cpu = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("cpu"));
    int32_t ns = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("nanoseconds"));

    ps->n_resources = 1;
    ps->resources = pl_batch_alloc(b, sizeof(pl_resource_profiles));
    pl_resource_profiles *rp = ps->resources;
    pl_attrs_put(&b->arena, &rp->resource.attrs, PL_BYTES_LIT("service.name"),
                 pl_value_string(PL_BYTES_LIT("bench")));
    rp->n_scopes = 1;
    rp->scopes = pl_batch_alloc(b, sizeof(pl_scope_profiles));
    rp->scopes->n_profiles = 1;
    rp->scopes->profiles = pl_batch_alloc(b, sizeof(pl_profile));
    pl_profile *p = rp->scopes->profiles;
    p->has_sample_type = true;
    p->sample_type = (pl_vtype){cpu, ns};
    p->time_unix_nano = t0;
    p->duration_nano = S(10);
    p->n_samples = n;
    p->samples = pl_batch_alloc(b, n * sizeof(pl_sample));
    int32_t link = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i % per_span == 0) {
            pl_link l;
            memset(&l, 0, sizeof(l));
            id8(spans[next_rand() % n_spans], l.span_id);
            l.span_id_len = 8;
            link = pl_dict_intern_link(&b->arena, d, &l);
        }
        pl_sample *s = &p->samples[i];
        s->stack_index = (int32_t)(1 + next_rand() % NF);
        s->link_index = link;
        s->n_values = 1;
        s->values = pl_batch_alloc(b, sizeof(int64_t));
        s->values[0] = 10000000;
    }
    return b;
}

static void *create(pl_stats **stats, int64_t window_ns, int64_t max_spans)
{
    pl_correlation_config cfg;
    pl_correlation_config_defaults(&cfg);
    cfg.window = window_ns;
    cfg.max_spans = max_spans;
    cfg.max_bytes = 64ull << 30;
    cfg.early_release = false;
    cfg.hold_compression =
        getenv("PL_HOLD_COMPRESSION") ? strdup(getenv("PL_HOLD_COMPRESSION")) : NULL;
    cfg.max_window = 0; /* fixed windows: these figures are about the index, not cadences */
    char *route[] = {"http.route"};
    cfg.span_attributes = (pl_strlist){route, 1};
    *stats = pl_stats_new("correlation", PL_KIND_PROCESSOR);
    pl_create_settings st;
    memset(&st, 0, sizeof(st));
    st.id = "correlation";
    st.stats = *stats;
    st.clock = (pl_clock){fake_clock, NULL};
    st.signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES);
    void *self = NULL;
    pl_err err;
    if (pl_processor_correlation.create(&st, &cfg, &self, &err) != PL_OK) {
        fprintf(stderr, "create: %s\n", err.msg);
        exit(1);
    }
    return self;
}

static void destroy(void *self, pl_stats *stats)
{
    pl_processor_correlation.shutdown(self);
    pl_processor_correlation.destroy(self);
    pl_stats_free(stats);
}

enum { SPANS_PER_BATCH = 1000, SAMPLES_PER_BATCH = 1000 };

int main(int argc, char **argv)
{
    size_t held = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    size_t n_batches = (held + SPANS_PER_BATCH - 1) / SPANS_PER_BATCH;
    uint64_t t0 = S(1700000000);
    fake_now = t0;
    sink out = {0};
    pl_consumer next;
    pl_consumer_init_func(&next, sink_fn, &out);

    /* ---- 1. index memory ---------------------------------------------------------------- */
    uint64_t *ids = malloc(n_batches * SPANS_PER_BATCH * sizeof(uint64_t));
    pl_batch **batches = malloc(n_batches * sizeof(pl_batch *));
    for (size_t i = 0; i < n_batches; i++)
        batches[i] = mk_spans(SPANS_PER_BATCH, t0, ids + i * SPANS_PER_BATCH);
    size_t n_ids = n_batches * SPANS_PER_BATCH;
    pl_stats *stats;
    void *self = create(&stats, (int64_t)S(3600), (int64_t)(2 * n_ids));
    /* A profile without links first: profiles are flowing, spans get indexed. */
    uint64_t none = 0;
    pl_batch *first = mk_samples(1, &none, 1, 1, t0);
    first->data.profiles.resources->scopes->profiles->samples->link_index = 0;
    pl_processor_correlation.consume(self, first, &next);
    sink_free(&out);
    long rss0 = rss_kib();
    double c0 = cpu_seconds();
    for (size_t i = 0; i < n_batches; i++)
        pl_processor_correlation.consume(self, batches[i], &next);
    double c1 = cpu_seconds();
    long rss1 = rss_kib();
    pl_correlation_usage u;
    pl_correlation_get_usage(self, &u);
    printf("spans held:                    %zu (in %zu batches of %d)\n", u.held_spans,
           u.held_span_batches, SPANS_PER_BATCH);
    printf("span table:                    %zu slots x %zu B = %.1f B/span\n", u.span_table_slots,
           (size_t)32, (double)u.span_table_slots * 32 / (double)u.held_spans);
    printf("index (table + side structs):  %.1f B/span\n",
           (double)u.index_bytes / (double)u.held_spans);
    printf("RSS growth while indexing:     %.1f B/span\n",
           (double)(rss1 - rss0) * 1024.0 / (double)u.held_spans);
    printf("indexing (consume, no release):%.1f ns/span\n", (c1 - c0) * 1e9 / (double)n_ids);

    /* ---- 2. samples linked per CPU-second, against those held spans ---------------------- */
    size_t sample_batches = 2000;
    for (int per_span = 1; per_span <= 10; per_span += 9) {
        pl_batch **pb = malloc(sample_batches * sizeof(pl_batch *));
        for (size_t i = 0; i < sample_batches; i++)
            pb[i] = mk_samples(SAMPLES_PER_BATCH, ids, n_ids, (uint32_t)per_span, t0);
        pl_correlation_counters before, after;
        pl_correlation_get_counters(self, &before);
        double s0 = cpu_seconds(), slowest = 0;
        for (size_t i = 0; i < sample_batches; i++) {
            double b0 = cpu_seconds();
            pl_processor_correlation.consume(self, pb[i], &next);
            double b = cpu_seconds() - b0;
            slowest = b > slowest ? b : slowest;
        }
        double s1 = cpu_seconds();
        pl_correlation_get_counters(self, &after);
        uint64_t linked = after.linked_samples - before.linked_samples;
        printf(
            "samples linked (%2d per span):  %.2f M per CPU-second (%llu linked, %.0f ns each)\n",
            per_span, (double)linked / (s1 - s0) / 1e6, (unsigned long long)linked,
            (s1 - s0) * 1e9 / (double)linked);
        /* A stall in one call (e.g. a table or array growing) holds up
         * the whole pipeline: worth seeing apart from the average. */
        printf("  slowest batch of %d samples:  %.1f ms CPU\n", SAMPLES_PER_BATCH, slowest * 1e3);
        sink_free(&out);
        free(pb);
    }
    destroy(self, stats);
    sink_free(&out);
    free(batches);

    /* ---- 3. span pass-through with no profiles, steady state ----------------------------- */
    /* A batch of 1000 spans every ms of fake time, windows of 100 ms or 1 s:
     * 100,000 or 1,000,000 spans held at any moment. Every span is indexed,
     * held, released when its window closes, and its "gone" marker expires a
     * window later: the whole life of a span with no partner. */
    for (int scale = 0; scale < 4; scale++) {
        bool flowing = scale >= 2; /* profiles come (none matching): spans are indexed */
        uint64_t window = scale % 2 == 0 ? 100000000ull : 1000000000ull; /* 100k or 1M held */
        self = create(&stats, (int64_t)window, 4000000);
        fake_now = t0;
        if (flowing) {
            pl_batch *p = mk_samples(1, &none, 1, 1, t0);
            p->data.profiles.resources->scopes->profiles->samples->link_index = 0;
            pl_processor_correlation.consume(self, p, &next);
            sink_free(&out);
        }
        size_t total = 3000; /* batches */
        double spent = 0;
        for (size_t i = 0; i < total; i++) {
            pl_batch *b = mk_spans(SPANS_PER_BATCH, t0, NULL);
            double p0 = cpu_seconds();
            pl_processor_correlation.consume(self, b, &next);
            fake_now += 1000000; /* 1 ms */
            pl_correlation_tick(self);
            spent += cpu_seconds() - p0;
            if (flowing && i % 1000 == 999) { /* profiles keep coming (outside the timing) */
                pl_batch *p = mk_samples(1, &none, 1, 1, t0);
                p->data.profiles.resources->scopes->profiles->samples->link_index = 0;
                pl_processor_correlation.consume(self, p, &next);
            }
            sink_free(&out); /* freeing is the exporter's cost */
        }
        pl_correlation_get_usage(self, &u);
        printf("pass-through, %s %.1f ns/span (window holds %s spans)\n",
               flowing ? "profiles flowing:" : "no profiles:     ",
               spent * 1e9 / (double)(total * SPANS_PER_BATCH), scale % 2 == 0 ? "100k" : "1M");
        destroy(self, stats);
        sink_free(&out);
    }
    free(ids);
    free(out.b);
    return 0;
}
