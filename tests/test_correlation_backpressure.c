/*
 * test_correlation_backpressure.c: the correlation processor under a next
 * consumer that refuses (a full store, a store that cannot write) and under
 * wall-clock steps.
 *
 * - A batch pushed out by a bound and refused is kept and offered again,
 *   never dropped; meanwhile new data of its signal is refused, and nothing
 *   leaves by its window (it would only wait decoded).
 * - At shutdown held batches go on as long as the next consumer takes them;
 *   the rest go on from the drain (the pending hook).
 * - Holds run on the monotonic clock: a wall-clock step of an hour either
 *   way neither freezes nor rushes them.
 * - The senders' clock skew is measured (gauge clock_skew_seconds), and an
 *   upload delay is measured on the senders' clock, so a proflink clock an
 *   hour ahead does not stretch holds to max_window.
 */
#include "correlation_fixture.h"

static pl_status consume(fixture *f, pl_batch *b)
{
    pl_consumer *next = b->signal == PL_SIGNAL_TRACES ? &f->next_traces : &f->next_profiles;
    return pl_processor_correlation.consume(f->self, b, next);
}

static uint64_t dropped(fixture *f)
{
    return pl_stats_get(f->stats, PL_SIGNAL_TRACES, PL_STAT_DROPPED) +
           pl_stats_get(f->stats, PL_SIGNAL_PROFILES, PL_STAT_DROPPED);
}

static pl_batch *two_spans(uint64_t first_id)
{
    span_spec sp[] = {{1, first_id, 0, BASE - S(2), BASE - S(1), "a", NULL},
                      {1, first_id + 1, 0, BASE - S(2), BASE - S(1), "b", NULL}};
    return mk_traces("svc", sp, 2);
}

/* max_spans pushes the oldest batch out while the next consumer refuses:
 * it is kept (not dropped), new spans are refused, the window releases
 * nothing meanwhile, and once the consumer takes again every span goes on
 * exactly once. */
static void test_bound_release_refused_is_kept(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    cfg.max_spans = 2;
    REQUIRE(fx_init(&f, &cfg) == 0);
    gate g = {true, 0, &f.traces};
    pl_consumer_init_func(&f.next_traces, gate_fn, &g);
    CHECK_EQ_INT(consume(&f, two_spans(0x100)), PL_OK); /* held */
    CHECK_EQ_INT(consume(&f, two_spans(0x200)), PL_OK); /* pushes the first out: refused, kept */
    CHECK_EQ_INT(g.refused, 1);
    CHECK_EQ_UINT(dropped(&f), 0);
    CHECK_EQ_UINT(counters(&f).released_early_spans, 2);
    /* the refusal is passed on to clients */
    CHECK_EQ_INT(consume(&f, two_spans(0x300)), PL_ERR_REFUSED);
    /* past the window, still refusing: the kept batch is offered again, the
     * held one stays held */
    advance(&f, S(31));
    CHECK_EQ_INT(g.refused, 2);
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.held_spans, 2);
    CHECK_EQ_INT(f.traces.n, 0);
    g.refusing = false;
    advance(&f, S(1)); /* the kept one goes, then the held one by its window */
    CHECK_EQ_INT(f.traces.n, 2);
    CHECK(find_span_in(&f.traces, 0x100, 1) != NULL);
    CHECK(find_span_in(&f.traces, 0x201, 1) != NULL);
    CHECK_EQ_UINT(dropped(&f), 0);
    CHECK_EQ_INT(consume(&f, two_spans(0x300)), PL_OK); /* taken again */
    fx_done(&f);
    CHECK_EQ_INT(f.traces.n, 3); /* the last one at shutdown */
}

/* Two batches due at the same tick while the next consumer refuses: the
 * first is refused and kept, the second stays held (compact) instead of
 * joining it decoded. */
static void test_window_release_stops_at_the_first_refusal(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    gate g = {true, 0, &f.traces};
    pl_consumer_init_func(&f.next_traces, gate_fn, &g);
    CHECK_EQ_INT(consume(&f, two_spans(0x100)), PL_OK);
    CHECK_EQ_INT(consume(&f, two_spans(0x200)), PL_OK);
    advance(&f, S(31));
    CHECK_EQ_INT(g.refused, 1);
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.held_spans, 2);
    CHECK_EQ_UINT(u.held_span_batches, 1);
    g.refusing = false;
    advance(&f, S(1));
    CHECK_EQ_INT(f.traces.n, 2);
    CHECK_EQ_UINT(dropped(&f), 0);
    fx_done(&f);
}

/* Shutdown flushes while the next consumer takes; what it refuses goes on
 * from the drain, in order, and nothing is dropped. */
static void test_shutdown_flush_goes_on_from_the_drain(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    gate g = {true, 0, &f.traces};
    pl_consumer_init_func(&f.next_traces, gate_fn, &g);
    CHECK_EQ_INT(consume(&f, two_spans(0x100)), PL_OK);
    CHECK_EQ_INT(consume(&f, two_spans(0x200)), PL_OK);
    pl_processor_correlation.shutdown(f.self);
    CHECK_EQ_INT(g.refused, 1);                                 /* the first, once */
    CHECK_EQ_UINT(pl_processor_correlation.pending(f.self), 5); /* 2 kept, 2 held, + 1 */
    fake_now += S(1);
    CHECK_EQ_UINT(pl_processor_correlation.pending(f.self), 5); /* still refused */
    CHECK_EQ_INT(g.refused, 2);
    g.refusing = false;
    fake_now += S(1);
    CHECK_EQ_UINT(pl_processor_correlation.pending(f.self), 0);
    REQUIRE(f.traces.n == 2);
    CHECK(find_span_in(&f.traces, 0x100, 1) != NULL);
    CHECK(find_span_in(&f.traces, 0x201, 1) != NULL);
    CHECK_EQ_UINT(dropped(&f), 0);
    fx_done(&f);
}

/* What still waits when the drain ends (destroy) is counted as dropped. */
static void test_destroy_counts_what_waited(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    gate g = {true, 0, &f.traces};
    pl_consumer_init_func(&f.next_traces, gate_fn, &g);
    CHECK_EQ_INT(consume(&f, two_spans(0x100)), PL_OK);
    pl_processor_correlation.shutdown(f.self);
    CHECK_EQ_UINT(dropped(&f), 0);
    pl_stats *st = f.stats;
    f.stats = NULL; /* read after destroy */
    pl_processor_correlation.destroy(f.self);
    CHECK_EQ_UINT(pl_stats_get(st, PL_SIGNAL_TRACES, PL_STAT_DROPPED), 2);
    pl_stats_free(st);
}

/* ---- clocks --------------------------------------------------------------------------------- */

static uint64_t fake_wall;
static uint64_t wall_clock(void *arg)
{
    (void)arg;
    return fake_wall;
}

/* The fixture with a wall clock of its own (fake_wall) besides the
 * monotonic one (fake_now). */
static int fx_init_clocks(fixture *f, const pl_correlation_config *cfg)
{
    memset(f, 0, sizeof(*f));
    fake_now = BASE;
    fake_wall = BASE;
    f->stats = pl_stats_new("correlation", PL_KIND_PROCESSOR);
    pl_create_settings st;
    memset(&st, 0, sizeof(st));
    st.id = "correlation";
    st.stats = f->stats;
    st.clock = (pl_clock){wall_clock, NULL, fake_clock};
    st.signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES);
    pl_err err;
    if (pl_processor_correlation.create(&st, cfg, &f->self, &err) != PL_OK)
        return -1;
    if (pl_processor_correlation.start(f->self, &err) != PL_OK)
        return -1;
    pl_consumer_init_func(&f->next_traces, capture_fn, &f->traces);
    pl_consumer_init_func(&f->next_profiles, capture_fn, &f->profiles);
    return 0;
}

/* Both clocks move on together by ns, and the processor ticks. */
static void advance_both(fixture *f, uint64_t ns)
{
    fake_wall += ns;
    advance(f, ns);
}

/* A wall clock stepped back or forward by an hour while spans are held:
 * they leave when their window (30 s of monotonic time) ends. */
static void test_holds_ignore_wall_clock_steps(void)
{
    int64_t steps[] = {-(int64_t)S(3600), (int64_t)S(3600)};
    for (int k = 0; k < 2; k++) {
        fixture f;
        pl_correlation_config cfg = test_config();
        REQUIRE(fx_init_clocks(&f, &cfg) == 0);
        CHECK_EQ_INT(consume(&f, two_spans(0x100)), PL_OK);
        fake_wall += (uint64_t)steps[k];
        advance_both(&f, S(29));
        CHECK_EQ_INT(f.traces.n, 0); /* not rushed by a forward step */
        advance_both(&f, S(2));
        CHECK_EQ_INT(f.traces.n, 1); /* not frozen by a backward step */
        fx_done(&f);
    }
}

typedef struct gauge_find {
    const char *name;
    int64_t v;
    bool found;
} gauge_find;

static void gauge_fn(void *arg, const pl_stats_extra *e)
{
    gauge_find *fd = arg;
    if (strcmp(e->name, fd->name) == 0) {
        fd->v = pl_stats_extra_gauge(e);
        fd->found = true;
    }
}

static int64_t gauge(fixture *f, const char *name)
{
    gauge_find fd = {name, 0, false};
    pl_stats_each_extra(f->stats, gauge_fn, &fd);
    CHECK(fd.found);
    return fd.v;
}

/* proflink's clock an hour ahead of (or behind) its senders': the gauge
 * says so, and a service uploading every 10 s is held about 30 s, not
 * max_window (3 min): its upload delay is measured on the senders' clock. */
static void test_skew_measured_and_holds_follow_the_cadence(void)
{
    int64_t offsets[] = {(int64_t)S(3600), -(int64_t)S(3600)};
    for (int k = 0; k < 2; k++) {
        fixture f;
        pl_correlation_config cfg;
        fx_defaults(&cfg); /* cadence learning: max_window 3m */
        REQUIRE(fx_init_clocks(&f, &cfg) == 0);
        fake_wall = BASE + (uint64_t)offsets[k];
        /* Spans and 10 s uploads stamped on the senders' clock (BASE...). */
        for (int round = 0; round < 4; round++) {
            uint64_t t = BASE + (uint64_t)round * S(10);
            span_spec sp[] = {{1, 0x100u + (uint64_t)round, 0, t - S(2), t - S(1), "GET /", NULL}};
            CHECK_EQ_INT(consume(&f, mk_traces("svc", sp, 1)), PL_OK);
            sample_spec ss[] = {{0x100u + (uint64_t)round, 0, BY_LINK, t - S(1), 5, 0}};
            CHECK_EQ_INT(consume(&f, mk_profiles("svc", t, S(10), ss, 1)), PL_OK);
            advance_both(&f, S(10));
        }
        CHECK_EQ_INT((int)(gauge(&f, "clock_skew_seconds") / 60),
                     (int)(offsets[k] / (int64_t)S(60)));
        pl_correlation_cadence c;
        pl_correlation_get_cadence(f.self, "svc", &c);
        CHECK(c.linked);
        CHECK(c.delay < S(5));
        CHECK(c.hold <= S(40));
        CHECK_EQ_UINT(counters(&f).linked_samples, 4);
        fx_done(&f);
    }
}

/* Without skew the gauge reads about the delivery delay (here 1 s). */
static void test_skew_gauge_without_skew(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init_clocks(&f, &cfg) == 0);
    for (int i = 0; i < 3; i++) {
        span_spec sp[] = {
            {1, 0x100u + (uint64_t)i, 0, fake_wall - S(2), fake_wall - S(1), "a", NULL}};
        CHECK_EQ_INT(consume(&f, mk_traces("svc", sp, 1)), PL_OK);
        advance_both(&f, S(5));
    }
    CHECK_EQ_INT((int)gauge(&f, "clock_skew_seconds"), 1);
    fx_done(&f);
}

int main(void)
{
    PL_RUN(test_bound_release_refused_is_kept);
    PL_RUN(test_window_release_stops_at_the_first_refusal);
    PL_RUN(test_shutdown_flush_goes_on_from_the_drain);
    PL_RUN(test_destroy_counts_what_waited);
    PL_RUN(test_holds_ignore_wall_clock_steps);
    PL_RUN(test_skew_measured_and_holds_follow_the_cadence);
    PL_RUN(test_skew_gauge_without_skew);
    return pl_test_done();
}
