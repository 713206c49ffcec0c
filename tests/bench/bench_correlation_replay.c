/*
 * bench_correlation_replay.c: the correlation processor replayed against SDK
 * upload cadences as they are, through its real consume API with an injected
 * clock (no sleeping: ten simulated minutes take seconds).
 *
 * Fourteen services, four per cadence, and two beyond max_window:
 *   - "10s": uploads every 10 s (Java, Python, Ruby, .NET, Rust), every span
 *     labelled with its own id, profile stamped at the window's start;
 *   - "15s": Go-style, every 15 s, samples labelled with the local root's id
 *     only, stamped at the window's start;
 *   - "60s": Node.js-style, every 60 s plus 0-30 s of extra delay, stamped at
 *     the window's end, a heap profile (no labels) uploaded just before the
 *     wall profile;
 *   - "60s late": the same, but each upload held back 150-250 s (a blocked
 *     event loop; windows that end meanwhile join it): longer than the
 *     3-minute max_window, so spans leave first and their samples are
 *     enriched from the departed spans' summaries.
 * Each service runs its data clock up to 1 s ahead or behind the others,
 * exports its spans every 5 s (children before parents, shuffled, one batch
 * in ten delivered after the next one), and 1 % of samples name spans that
 * never arrive. Traces have four spans (a server span, three children).
 * Span generation runs `minutes` (default 10) at `rate` spans/s (default
 * 10,000); uploads go on 5.5 more minutes so every sample is sent.
 *
 * Printed: share of span-labelled samples linked (on time or from a departed
 * span's summary), false links (a sample enriched with a span it does not
 * belong to), share of labelled spans exported with their profile summary,
 * hold delay p50/p99 per cadence, peak bytes per held span (held batches +
 * index + summaries, from pl_correlation_get_usage, and process RSS growth),
 * and the CPU time of the processor's calls.
 *
 * Usage: bench_correlation_replay [minutes] [spans_per_second]
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

#define NS       1000000000ull
#define T0       (1700000000ull * NS)
#define STEP     (100000000ull) /* 100 ms of simulated time per step */
#define N_SVC    14             /* 4 per cadence, and 2 Node.js services uploading too late */
#define BOGUS_K  7              /* span "kind" of ids that never arrive */
#define EXPORT_S 5

static uint64_t fake_now;
static uint64_t fake_clock(void *arg)
{
    (void)arg;
    return fake_now;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    return xorshift64(&rng);
}

/* Span ids are an invertible mix of (trace number, kind): the checker reads
 * back which trace a span belongs to, and whether it is one that never
 * arrives, without a table of six million ids. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    x ^= x >> 33;
    return x;
}

static uint64_t unxorshift(uint64_t y, int s)
{
    uint64_t x = y;
    for (int i = 0; i < 64 / s + 1; i++)
        x = y ^ (x >> s);
    return x;
}

static uint64_t unmix(uint64_t x)
{
    x = unxorshift(x, 33);
    x *= 0x4d6dff26c61d8485ull; /* inverse of 0x81dadef4bc2dd44d */
    x = unxorshift(x, 27);
    x *= 0x4c5ff4596f4a2f4dull; /* inverse of 0x7fb5d329728ea185 */
    x = unxorshift(x, 31);
    return x;
}

static uint64_t span_id_of(uint64_t trace, unsigned kind)
{
    return mix(trace << 3 | kind);
}

static void put_id(uint64_t v, uint8_t *out)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        out[i] = (uint8_t)v;
}

static uint64_t get_id(const uint8_t *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | in[i];
    return v;
}

static void trace_id_of(uint64_t trace, uint8_t out[16])
{
    put_id(mix(trace ^ 0x5555), out);
    put_id(trace + 1, out + 8);
}

typedef struct span_rec {
    uint64_t trace;
    uint8_t kind; /* 0 root, 1-3 children */
    uint64_t start, end;
} span_rec;

typedef struct sample_rec {
    uint64_t span; /* span id */
} sample_rec;

typedef struct svc {
    char name[16];
    int cls; /* 0: 10s, 1: 15s (root labels), 2: 60s (heap first, late) */
    int64_t skew;
    uint64_t period;
    span_rec *spans;
    size_t n_spans, cap_spans;
    sample_rec *win, *closed;
    size_t n_win, cap_win, n_closed, cap_closed;
    uint64_t win_end, closed_start, closed_dur, upload_at, next_export;
    pl_batch *delayed;
    double acc;
} svc;

static const char *cls_name[4] = {"10s", "15s Go", "60s Node", "60s late"};

static void push_span(svc *s, span_rec r)
{
    if (s->n_spans == s->cap_spans) {
        s->cap_spans = s->cap_spans ? s->cap_spans * 2 : 4096;
        s->spans = realloc(s->spans, s->cap_spans * sizeof(span_rec));
    }
    s->spans[s->n_spans++] = r;
}

static void push_sample(svc *s, uint64_t span)
{
    if (s->n_win == s->cap_win) {
        s->cap_win = s->cap_win ? s->cap_win * 2 : 4096;
        s->win = realloc(s->win, s->cap_win * sizeof(sample_rec));
    }
    s->win[s->n_win++] = (sample_rec){span};
}

static const char *names[4] = {"GET /api/orders/:id", "SELECT orders", "redis GET", "render"};

static pl_batch *traces_batch(svc *s)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_traces *t = &b->data.traces;
    t->n_resources = 1;
    t->resources = pl_batch_alloc(b, sizeof(pl_resource_spans));
    pl_resource_spans *rs = t->resources;
    pl_attrs_put(&b->arena, &rs->resource.attrs, PL_BYTES_LIT("service.name"),
                 pl_value_string(pl_bytes_from_cstr(s->name)));
    rs->n_scopes = 1;
    rs->scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
    uint32_t n = (uint32_t)s->n_spans;
    rs->scopes->n_spans = n;
    rs->scopes->spans = pl_batch_alloc(b, n * sizeof(pl_span));
    /* shuffled: children and parents in any order */
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = (uint32_t)(rnd() % i);
        span_rec tmp = s->spans[i - 1];
        s->spans[i - 1] = s->spans[j];
        s->spans[j] = tmp;
    }
    for (uint32_t i = 0; i < n; i++) {
        const span_rec *r = &s->spans[i];
        pl_span *sp = &rs->scopes->spans[i];
        trace_id_of(r->trace, sp->trace_id);
        sp->trace_id_len = 16;
        put_id(span_id_of(r->trace, r->kind), sp->span_id);
        sp->span_id_len = 8;
        if (r->kind) {
            put_id(span_id_of(r->trace, 0), sp->parent_span_id);
            sp->parent_span_id_len = 8;
        }
        sp->start_time_unix_nano = r->start;
        sp->end_time_unix_nano = r->end;
        sp->name = pl_bytes_from_cstr(names[r->kind]);
        if (!r->kind) {
            sp->attrs.items = pl_batch_alloc(b, sizeof(pl_kv));
            sp->attrs.items[0].key = PL_BYTES_LIT("http.route");
            sp->attrs.items[0].value = pl_value_string(PL_BYTES_LIT("/api/orders/:id"));
            sp->attrs.n = sp->attrs.cap = 1;
        }
    }
    s->n_spans = 0;
    return b;
}

/* One profile of `n` samples of type/unit; each sample a link to its span
 * (no trace id: Pyroscope labels carry span ids only). */
static pl_batch *profile_batch(svc *s, const char *type, const char *unit, sample_rec *smp,
                               size_t n, uint64_t time, uint64_t dur)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_profiles *ps = &b->data.profiles;
    pl_dictionary *d = &ps->dict;
    ps->has_dictionary = true;
    pl_dict_ensure_zero_entries(&b->arena, d);
    enum { NF = 16 };
    d->functions = pl_arena_grow(&b->arena, d->functions, 1, NF + 1, sizeof(pl_function));
    d->locations = pl_arena_grow(&b->arena, d->locations, 1, NF + 1, sizeof(pl_location));
    d->stacks = pl_arena_grow(&b->arena, d->stacks, 1, NF + 1, sizeof(pl_stack));
    d->cap_functions = d->cap_locations = d->cap_stacks = NF + 1;
    for (int i = 1; i <= NF; i++) {
        char fn[32];
        snprintf(fn, sizeof(fn), "app.fn%d", i);
        int32_t si = pl_dict_intern_string(&b->arena, d, pl_batch_bytes(b, fn, strlen(fn)));
        d->functions[i] = (pl_function){si, 0, 0, 0};
        pl_line *line = pl_batch_alloc(b, sizeof(pl_line));
        line->function_index = i;
        d->locations[i] = (pl_location){0, (uint64_t)i, line, 1, NULL, 0};
        int32_t *locs = pl_batch_alloc(b, sizeof(int32_t));
        locs[0] = i;
        d->stacks[i] = (pl_stack){locs, 1};
    }
    d->n_functions = d->n_locations = d->n_stacks = NF + 1;
    int32_t ty = pl_dict_intern_string(&b->arena, d, pl_bytes_from_cstr(type));
    int32_t un = pl_dict_intern_string(&b->arena, d, pl_bytes_from_cstr(unit));
    ps->n_resources = 1;
    ps->resources = pl_batch_alloc(b, sizeof(pl_resource_profiles));
    pl_resource_profiles *rp = ps->resources;
    pl_attrs_put(&b->arena, &rp->resource.attrs, PL_BYTES_LIT("service.name"),
                 pl_value_string(pl_bytes_from_cstr(s->name)));
    rp->n_scopes = 1;
    rp->scopes = pl_batch_alloc(b, sizeof(pl_scope_profiles));
    rp->scopes->n_profiles = 1;
    rp->scopes->profiles = pl_batch_alloc(b, sizeof(pl_profile));
    pl_profile *p = rp->scopes->profiles;
    p->has_sample_type = true;
    p->sample_type = (pl_vtype){ty, un};
    p->time_unix_nano = time;
    p->duration_nano = dur;
    p->n_samples = (uint32_t)n;
    p->samples = pl_batch_alloc(b, (n ? n : 1) * sizeof(pl_sample));
    /* One link per sample, written directly (pl_dict_intern_link looks for
     * duplicates one by one: too slow for 100k samples). */
    d->links = pl_arena_grow(&b->arena, NULL, 0, (uint32_t)n + 1, sizeof(pl_link));
    memset(&d->links[0], 0, sizeof(pl_link));
    d->n_links = 1;
    d->cap_links = (uint32_t)n + 1;
    for (size_t i = 0; i < n; i++) {
        pl_sample *sm = &p->samples[i];
        sm->stack_index = (int32_t)(1 + rnd() % NF);
        sm->n_values = 1;
        sm->values = pl_batch_alloc(b, sizeof(int64_t));
        sm->values[0] = 10000000;
        if (smp) {
            pl_link *l = &d->links[d->n_links];
            memset(l, 0, sizeof(*l));
            put_id(smp[i].span, l->span_id);
            l->span_id_len = 8;
            sm->link_index = (int32_t)d->n_links++;
        }
    }
    return b;
}

/* ---- the checker (sits where the exporters would) --------------------------------------- */

typedef struct arrival {
    uint64_t first_span, at;
    int cls;
} arrival;

static arrival *arrivals;
static size_t n_arrivals, cap_arrivals;
static double *delays[4];
static size_t n_delays[4], cap_delays[4];
static uint64_t labelled_samples, linked_samples, false_links, bogus_samples;
static uint64_t labelled_spans, enriched_spans;
static uint64_t cls_samples[4], cls_linked[4], cls_spans[4], cls_enriched[4];
static int svc_cls_of_trace(uint64_t trace);

static pl_status sink_fn(void *arg, pl_batch *b)
{
    (void)arg;
    if (b->signal == PL_SIGNAL_TRACES) {
        pl_resource_spans *rs = &b->data.traces.resources[0];
        pl_scope_spans *ss = &rs->scopes[0];
        if (ss->n_spans) {
            uint64_t first = get_id(ss->spans[0].span_id);
            for (size_t i = n_arrivals; i-- > 0;) {
                if (arrivals[i].first_span == first) {
                    int c = arrivals[i].cls;
                    if (n_delays[c] == cap_delays[c]) {
                        cap_delays[c] = cap_delays[c] ? cap_delays[c] * 2 : 1024;
                        delays[c] = realloc(delays[c], cap_delays[c] * sizeof(double));
                    }
                    delays[c][n_delays[c]++] = (double)(fake_now - arrivals[i].at) / 1e9;
                    arrivals[i] = arrivals[--n_arrivals];
                    break;
                }
            }
        }
        for (uint32_t i = 0; i < ss->n_spans; i++) {
            pl_span *sp = &ss->spans[i];
            uint64_t v = unmix(get_id(sp->span_id));
            unsigned kind = v & 7;
            int cls = svc_cls_of_trace(v >> 3);
            if (cls == 1 && kind != 0)
                continue; /* Go: only the local root is labelled */
            bool e = pl_attrs_find(&sp->attrs, "pyroscope.profile.id", 20) != NULL;
            labelled_spans++;
            enriched_spans += e;
            cls_spans[cls]++;
            cls_enriched[cls] += e;
        }
    } else {
        pl_dictionary *d = &b->data.profiles.dict;
        pl_profile *p = &b->data.profiles.resources[0].scopes[0].profiles[0];
        for (uint32_t i = 0; i < p->n_samples; i++) {
            pl_sample *s = &p->samples[i];
            if (s->link_index <= 0)
                continue;
            const pl_link *l = &d->links[s->link_index];
            uint64_t v = unmix(get_id(l->span_id));
            bool named = false;
            for (uint32_t a = 0; a < s->n_attribute_indices; a++) {
                const pl_kvu *kv = &d->attributes[s->attribute_indices[a]];
                if (pl_bytes_eq_cstr(pl_dict_string(d, kv->key_strindex), "span_name"))
                    named = true;
            }
            if ((v & 7) == BOGUS_K) {
                bogus_samples++;
                false_links += named || l->trace_id_len;
                continue;
            }
            labelled_samples++;
            int cls = svc_cls_of_trace(v >> 3);
            cls_samples[cls]++;
            if (!named)
                continue;
            uint8_t want[16];
            trace_id_of(v >> 3, want);
            if (l->trace_id_len == 16 && memcmp(l->trace_id, want, 16) == 0) {
                linked_samples++;
                cls_linked[cls]++;
            } else
                false_links++;
        }
    }
    pl_batch_free(b);
    return PL_OK;
}

static svc services[N_SVC];
static uint64_t traces_per_svc_block = 1ull << 40;
static int svc_cls_of_trace(uint64_t trace)
{
    return services[trace / traces_per_svc_block].cls;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    double minutes = argc > 1 ? atof(argv[1]) : 10;
    double rate = argc > 2 ? atof(argv[2]) : 10000;
    uint64_t gen_end = (uint64_t)(minutes * 60 * NS), sim_end = gen_end + 330 * NS;
    fake_now = T0;
    pl_stats *stats = pl_stats_new("correlation", PL_KIND_PROCESSOR);
    pl_correlation_config cfg;
    pl_correlation_config_defaults(&cfg); /* as shipped: window 30s, max_window 3m, ... */
    cfg.max_bytes = 4ull << 30;           /* the benchmark measures memory, not the bound */
    cfg.max_spans = 4000000;
    /* Optional: bench_correlation_replay MIN RATE STORAGE_DIR MAX_MIB [LATE_MAX_SPANS]
     * spills held span batches beyond MAX_MIB to STORAGE_DIR (and keeps
     * LATE_MAX_SPANS summaries, 160 B each). */
    if (argc > 4) {
        cfg.storage = argv[3];
        cfg.max_bytes = (uint64_t)atof(argv[4]) * (1ull << 20);
    }
    if (argc > 5) {
        cfg.late_max_spans = (int64_t)atof(argv[5]);
        cfg.late_max_bytes = (uint64_t)cfg.late_max_spans * 160;
    }
    /* HOLD_COMPRESSION=none|zstd in the environment: the hold_compression
     * setting (default: the processor's). */
    cfg.hold_compression = getenv("HOLD_COMPRESSION");
    printf("hold_compression: %s\n", cfg.hold_compression ? cfg.hold_compression : "default");
    char *route[] = {"http.route"};
    cfg.span_attributes = (pl_strlist){route, 1};
    pl_create_settings st;
    memset(&st, 0, sizeof(st));
    st.id = "correlation";
    st.stats = stats;
    st.clock = (pl_clock){fake_clock, NULL};
    st.signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES);
    void *self = NULL;
    pl_err err;
    if (pl_processor_correlation.create(&st, &cfg, &self, &err) != PL_OK) {
        fprintf(stderr, "create: %s\n", err.msg);
        return 1;
    }
    pl_consumer next;
    pl_consumer_init_func(&next, sink_fn, NULL);

    uint64_t trace_seq[N_SVC];
    for (int i = 0; i < N_SVC; i++) {
        svc *s = &services[i];
        s->cls = i / 4; /* 3: i = 12, 13 */
        snprintf(s->name, sizeof(s->name), "svc-%d-%d", s->cls, i % 4);
        s->skew = (int64_t)(rnd() % (2 * NS)) - (int64_t)NS;
        s->period = s->cls == 0 ? 10 * NS : s->cls == 1 ? 15 * NS : 60 * NS;
        /* Phases differ; the SDK started before the replay, so the first
         * window began earlier and is as long as every other. */
        s->win_end = 1 + rnd() % s->period;
        s->next_export = rnd() % (EXPORT_S * NS);
        trace_seq[i] = (uint64_t)i * traces_per_svc_block;
    }
    double traces_per_step = rate / 4 / N_SVC * ((double)STEP / NS);
    double spent = 0;
    long rss0 = rss_kib(), rss_peak = rss0;
    double peak_per_span = 0;
    size_t peak_held = 0, peak_bytes = 0;
    pl_correlation_usage peak_u;
    memset(&peak_u, 0, sizeof(peak_u));
    uint64_t spans_sent = 0, samples_sent = 0;

    for (uint64_t t = 0; t < sim_end; t += STEP) {
        fake_now = T0 + t;
        for (int i = 0; i < N_SVC; i++) {
            svc *s = &services[i];
            uint64_t data_now = (uint64_t)((int64_t)(T0 + t) + s->skew);
            /* requests */
            if (t < gen_end) {
                s->acc += traces_per_step;
                while (s->acc >= 1) {
                    s->acc -= 1;
                    uint64_t tr = trace_seq[i]++;
                    uint64_t start = data_now - STEP + rnd() % STEP;
                    uint64_t dur = 20000000 + rnd() % 180000000;
                    push_span(s, (span_rec){tr, 0, start, start + dur});
                    for (unsigned k = 1; k <= 3; k++) {
                        uint64_t a = start + dur * (k - 1) / 3;
                        push_span(s, (span_rec){tr, (uint8_t)k, a, a + dur / 4});
                    }
                    /* samples while they ran: 1-3 per span, or all on the root (Go) */
                    for (unsigned k = 0; k <= 3; k++) {
                        unsigned m = 1 + (unsigned)(rnd() % 3);
                        for (unsigned j = 0; j < m; j++)
                            push_sample(s, span_id_of(tr, s->cls == 1 ? 0 : k));
                    }
                    spans_sent += 4;
                    if (rnd() % 100 < 4) /* ~1 % of samples name spans that never come */
                        push_sample(s, span_id_of(rnd() >> 8, BOGUS_K));
                }
            }
            /* span exports every 5 s, one in ten delivered after the next */
            if (t >= s->next_export) {
                s->next_export += EXPORT_S * NS;
                pl_batch *b = s->n_spans ? traces_batch(s) : NULL;
                pl_batch *send[2] = {NULL, NULL};
                if (b && !s->delayed && rnd() % 10 == 0) {
                    s->delayed = b;
                } else {
                    send[0] = b;
                    send[1] = s->delayed;
                    s->delayed = NULL;
                }
                for (int k = 0; k < 2; k++) {
                    if (!send[k])
                        continue;
                    if (n_arrivals == cap_arrivals) {
                        cap_arrivals = cap_arrivals ? cap_arrivals * 2 : 1024;
                        arrivals = realloc(arrivals, cap_arrivals * sizeof(arrival));
                    }
                    arrivals[n_arrivals++] = (arrival){
                        get_id(send[k]->data.traces.resources[0].scopes[0].spans[0].span_id),
                        fake_now, s->cls};
                    double c0 = cpu_seconds();
                    pl_processor_correlation.consume(self, send[k], &next);
                    spent += cpu_seconds() - c0;
                }
            }
            /* profile windows: close, then upload after a delay */
            if (t >= s->win_end && s->upload_at) {
                /* The previous upload has not gone yet (a blocked event
                 * loop): this window joins it. */
                for (size_t k = 0; k < s->n_win; k++) {
                    if (s->n_closed == s->cap_closed) {
                        s->cap_closed = s->cap_closed ? s->cap_closed * 2 : 4096;
                        s->closed = realloc(s->closed, s->cap_closed * sizeof(sample_rec));
                    }
                    s->closed[s->n_closed++] = s->win[k];
                }
                s->n_win = 0;
                s->closed_start = s->win_end;
                s->closed_dur += s->period;
                s->win_end += s->period;
            } else if (t >= s->win_end) {
                sample_rec *tmp = s->closed;
                size_t cap = s->cap_closed;
                s->closed = s->win;
                s->n_closed = s->n_win;
                s->cap_closed = s->cap_win;
                s->win = tmp;
                s->cap_win = cap;
                s->n_win = 0;
                s->closed_start = s->win_end; /* its end, in fact */
                s->closed_dur = s->period;
                s->win_end += s->period;
                uint64_t delay = s->cls == 3   ? (150 + rnd() % 100) * NS
                                 : s->cls == 2 ? rnd() % (30 * NS)
                                               : rnd() % (2 * NS);
                s->upload_at = t + STEP + delay;
            }
            if (s->upload_at && t >= s->upload_at) {
                s->upload_at = 0;
                uint64_t we = (uint64_t)((int64_t)(T0 + s->closed_start) + s->skew);
                uint64_t stamp = s->cls >= 2 ? we : we - s->closed_dur;
                double c0 = cpu_seconds();
                if (s->cls >= 2) /* Node.js: the heap profile first, no labels */
                    pl_processor_correlation.consume(
                        self, profile_batch(s, "inuse_space", "bytes", NULL, 16, stamp, 0), &next);
                pl_batch *pb = profile_batch(s, s->cls >= 2 ? "wall" : "cpu", "nanoseconds",
                                             s->closed, s->n_closed, stamp, s->closed_dur);
                samples_sent += s->n_closed;
                spent += cpu_seconds() - c0;
                c0 = cpu_seconds();
                pl_processor_correlation.consume(self, pb, &next);
                spent += cpu_seconds() - c0;
                s->n_closed = 0;
            }
        }
        double c0 = cpu_seconds();
        pl_correlation_tick(self);
        spent += cpu_seconds() - c0;
        if (t % NS == 0) {
            pl_correlation_usage u;
            pl_correlation_get_usage(self, &u);
            size_t bytes = u.held_bytes + u.index_bytes + u.late_bytes;
            if (u.held_spans > peak_held) {
                peak_held = u.held_spans;
                peak_bytes = bytes;
                peak_per_span = (double)bytes / (double)u.held_spans;
                peak_u = u;
            }
            long r = rss_kib();
            if (r > rss_peak)
                rss_peak = r;
        }
    }
    pl_processor_correlation.shutdown(self);
    pl_correlation_counters c;
    pl_correlation_get_counters(self, &c);
    pl_processor_correlation.destroy(self);
    pl_stats_free(stats);

    printf("replay: %.0f min of spans at %.0f spans/s, 14 services (4 per cadence, 2 late), +5.5 "
           "min of uploads\n",
           minutes, rate);
    printf("spans sent:                  %llu; samples sent: %llu\n",
           (unsigned long long)spans_sent, (unsigned long long)samples_sent);
    printf("span-labelled samples linked: %.4f %% (%llu of %llu; %llu from departed spans' "
           "summaries)\n",
           100.0 * (double)linked_samples / (double)(labelled_samples ? labelled_samples : 1),
           (unsigned long long)linked_samples, (unsigned long long)labelled_samples,
           (unsigned long long)c.late_linked_samples);
    printf("false links:                 %llu (of %llu samples naming spans that never came)\n",
           (unsigned long long)false_links, (unsigned long long)bogus_samples);
    printf("labelled spans enriched:     %.4f %% (%llu of %llu)\n",
           100.0 * (double)enriched_spans / (double)(labelled_spans ? labelled_spans : 1),
           (unsigned long long)enriched_spans, (unsigned long long)labelled_spans);
    for (int k = 0; k < 4; k++) {
        if (!n_delays[k])
            continue;
        qsort(delays[k], n_delays[k], sizeof(double), cmp_double);
        printf("%-9s samples linked %.4f %%, spans enriched %.4f %%, hold delay p50 %.1f s, p99 "
               "%.1f s (%zu span batches)\n",
               cls_name[k],
               100.0 * (double)cls_linked[k] / (double)(cls_samples[k] + !cls_samples[k]),
               100.0 * (double)cls_enriched[k] / (double)(cls_spans[k] + !cls_spans[k]),
               delays[k][n_delays[k] / 2], delays[k][n_delays[k] * 99 / 100], n_delays[k]);
    }
    printf("peak held:                   %zu spans, %.0f MiB (held batches + index + summaries): "
           "%.0f B/held span\n",
           peak_held, (double)peak_bytes / (1 << 20), peak_per_span);
    printf("  of which per held span:    held batches %.0f B, index %.0f B, summaries %.0f B (%zu "
           "summaries)\n",
           (double)peak_u.held_bytes / (double)peak_held,
           (double)peak_u.index_bytes / (double)peak_held,
           (double)peak_u.late_bytes / (double)peak_held, peak_u.late_spans);
    printf("  at that peak:              %zu span batches, %zu sample batches (%.0f B/held span; "
           "%zu samples waiting), %zu span table slots (%zu markers), %zu spilled spans\n",
           peak_u.held_span_batches, peak_u.held_sample_batches,
           (double)peak_u.held_sample_bytes / (double)peak_held, peak_u.pending_samples,
           peak_u.span_table_slots, peak_u.markers, peak_u.spilled_spans);
    printf("RSS growth (peak):           %.0f MiB, %.0f B/held span (includes the generator's "
           "buffers)\n",
           (double)(rss_peak - rss0) / 1024, (double)(rss_peak - rss0) * 1024 / (double)peak_held);
    printf("counters: linked %llu, late %llu (enriched %llu), unlinked %llu, released on coverage "
           "%llu spans, early %llu spans\n",
           (unsigned long long)c.linked_samples, (unsigned long long)c.late_samples,
           (unsigned long long)c.late_linked_samples, (unsigned long long)c.unlinked_samples,
           (unsigned long long)c.spans_released_on_coverage,
           (unsigned long long)c.released_early_spans);
    if (cfg.storage)
        printf("spilled:                     %llu batches, %.0f MiB written, %llu failures "
               "(max_bytes %s MiB); samples released early %llu\n",
               (unsigned long long)c.spilled_batches, (double)c.spilled_bytes / (1 << 20),
               (unsigned long long)c.spill_failures, argv[4],
               (unsigned long long)c.released_early_samples);
    printf("processor CPU:               %.2f s (%.2f us per span)\n", spent,
           spent * 1e6 / (double)spans_sent);
    for (int i = 0; i < N_SVC; i++) {
        free(services[i].spans);
        free(services[i].win);
        free(services[i].closed);
    }
    for (int k = 0; k < 4; k++)
        free(delays[k]);
    free(arrivals);
    return 0;
}
