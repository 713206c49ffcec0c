/*
 * test_correlation_cadence.c: the correlation processor at real SDK upload
 * cadences, with its default settings (cadence learning, max_window,
 * late_window) and an injected clock: profiles that carry no span ids never
 * release spans, a 60 s upload cadence links, late samples are enriched from
 * departed spans' summaries, services without profiles stop being held after
 * the warm-up, and client-chosen ids and names cannot blow up time or memory.
 */
#include <time.h>

#include "correlation_fixture.h"
#include "xorshift.h"

static pl_correlation_config cadence_config(void)
{
    pl_correlation_config cfg;
    fx_defaults(&cfg); /* max_window 3m, warmup 3m, late_window 10m */
    return cfg;
}

/* A Node.js-style wall profile: samples/count would be a second profile;
 * one wall/nanoseconds profile is enough here. */
static pl_batch *mk_wall(const char *service, uint64_t time, uint64_t dur, const sample_spec *specs,
                         int n)
{
    return mk_profiles_typed(service, time, dur, specs, n, "wall", "nanoseconds", NULL, NULL, 0);
}

static pl_batch *mk_heap(const char *service, uint64_t time)
{
    sample_spec none[] = {{0, 0, NO_SPAN, 0, 4096, 0}};
    return mk_profiles_typed(service, time, 0, none, 1, "inuse_space", "bytes", NULL, NULL, 0);
}

/* The Node.js SDK uploads its heap profile (no labels) just before its wall
 * profile. The heap upload must not release the spans. */
static void test_heap_upload_does_not_release_spans(void)
{
    fixture f;
    pl_correlation_config cfg = cadence_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(50);
    span_spec sp[] = {{1, 0xA1, 0, t0, t0 + S(2), "GET /a", NULL}};
    deliver(&f, mk_traces("node", sp, 1));
    advance(&f, S(10));
    deliver(&f, mk_heap("node", BASE + S(10)));
    CHECK_EQ_INT(f.profiles.n, 1); /* the heap profile flows on */
    CHECK_EQ_INT(f.traces.n, 0);   /* but proves nothing about span samples */
    CHECK_EQ_UINT(counters(&f).spans_released_on_coverage, 0);
    /* A moment later, the wall profile with the span's samples. */
    advance(&f, S(1) / 2);
    sample_spec ss[] = {{0xA1, 0, BY_SPAN_LABEL, 0, 10000000, 2}};
    deliver(&f, mk_wall("node", BASE + S(10), S(60), ss, 1));
    REQUIRE(f.profiles.n == 2);
    char buf[256], want[40];
    CHECK_EQ_STR(sample_attr(f.profiles.b[1], 0, "span_name", buf, NULL), "GET /a");
    /* The wall stream carries span ids and covers the span: it leaves now. */
    REQUIRE(f.traces.n == 1);
    pl_span *s = find_span_in(&f.traces, 0xA1, 1);
    CHECK_EQ_STR(span_str(s, "pyroscope.profile.id", buf), hex_id(0xA1, want));
    CHECK_EQ_INT(span_int(s, "profile.wall_time_ns"), 10000000);
    pl_correlation_counters c = counters(&f);
    CHECK_EQ_UINT(c.linked_samples, 1);
    CHECK_EQ_UINT(c.spans_released_on_coverage, 1);
    CHECK_EQ_UINT(c.late_samples, 0);
    /* A later heap upload still proves nothing; the next wall upload does. */
    span_spec sp2[] = {{2, 0xA2, 0, BASE + S(20), BASE + S(21), "GET /b", NULL}};
    deliver(&f, mk_traces("node", sp2, 1));
    fake_now = BASE + S(75);
    deliver(&f, mk_heap("node", BASE + S(70)));
    CHECK_EQ_INT(f.traces.n, 1);
    sample_spec none[] = {{0, 0, NO_SPAN, 0, 1, 0}};
    deliver(&f, mk_wall("node", BASE + S(70), S(60), none, 1));
    CHECK_EQ_INT(f.traces.n, 2);
    fx_done(&f);
}

/* Node.js uploads every 60 s: spans wait longer than `window` (30 s) for
 * the upload that covers them, and every one links. The cadence is learned. */
static void test_sixty_second_cadence_links(void)
{
    fixture f;
    pl_correlation_config cfg = cadence_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    char buf[256];
    for (int round = 0; round < 3; round++) {
        uint64_t r0 = BASE + (uint64_t)round * S(60);
        /* Spans come every 10 s, each one second long, ending at arrival. */
        for (int k = 0; k < 6; k++) {
            fake_now = r0 + (uint64_t)k * S(10) + S(1);
            span_spec sp[] = {{(uint8_t)(10 + round), 0x1000u + (uint64_t)round * 16 + (uint64_t)k,
                               0, fake_now - S(1), fake_now, "work", NULL}};
            deliver(&f, mk_traces("node", sp, 1));
            pl_correlation_tick(f.self);
        }
        int before = f.traces.n;
        CHECK_EQ_INT(before, round * 6); /* all of this round still held, the oldest 50 s */
        /* The upload of the round, 60 s after its start plus a little delay,
         * stamped at the end of its window. */
        fake_now = r0 + S(62);
        pl_correlation_tick(f.self);
        sample_spec ss[6];
        for (int k = 0; k < 6; k++)
            ss[k] = (sample_spec){
                0x1000u + (uint64_t)round * 16 + (uint64_t)k, 0, BY_SPAN_LABEL, 0, 1000000, 1};
        deliver(&f, mk_wall("node", r0 + S(60), S(60), ss, 6));
        CHECK_EQ_INT(f.traces.n, before + 6);
        pl_batch *pb = f.profiles.b[f.profiles.n - 1];
        for (uint32_t k = 0; k < 6; k++)
            CHECK_EQ_STR(sample_attr(pb, k, "span_name", buf, NULL), "work");
    }
    pl_correlation_counters c = counters(&f);
    CHECK_EQ_UINT(c.linked_samples, 18);
    CHECK_EQ_UINT(c.linked_spans, 18);
    CHECK_EQ_UINT(c.unlinked_spans, 0);
    CHECK_EQ_UINT(c.late_samples, 0);
    CHECK_EQ_UINT(c.spans_released_on_coverage, 18);
    for (int i = 0; i < f.traces.n; i++) {
        const pl_span *sp = &f.traces.b[i]->data.traces.resources[0].scopes[0].spans[0];
        CHECK(pl_attrs_find(&sp->attrs, "pyroscope.profile.id", 20) != NULL);
    }
    pl_correlation_cadence cad;
    pl_correlation_get_cadence(f.self, "node", &cad);
    CHECK(cad.known && cad.linked);
    CHECK_EQ_UINT(cad.interval, S(60));
    CHECK_EQ_UINT(cad.delay, S(2));
    /* Held 2 x 60 s + 2 s delay + 1 s skew + 5 s slack, within max_window. */
    CHECK_EQ_UINT(cad.hold, S(128));
    /* A service not seen yet is assumed to be as slow as Node.js. */
    pl_correlation_get_cadence(f.self, "nobody", &cad);
    CHECK(!cad.known);
    fx_done(&f);
}

/* Spans that came before their service's cadence was known wait the assumed
 * hold only until the cadence is learned; then their hold follows it. */
static void test_hold_follows_learned_cadence(void)
{
    fixture f;
    pl_correlation_config cfg = cadence_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    span_spec a[] = {{9, 0x91, 0, BASE - S(2), BASE - S(1), "early", NULL}};
    deliver(&f, mk_traces("fast", a, 1)); /* assumed: 156 s */
    /* Two 10 s uploads that carry span ids (of other spans) but do not
     * cover this span's end... because they are stamped before it. */
    sample_spec other[] = {{0x99, 0, BY_LINK, 0, 1, 0}};
    deliver(&f, mk_profiles("fast", BASE - S(30), S(10), other, 1));
    advance(&f, S(10));
    deliver(&f, mk_profiles("fast", BASE - S(20), S(10), other, 1));
    pl_correlation_cadence cad;
    pl_correlation_get_cadence(f.self, "fast", &cad);
    CHECK_EQ_UINT(cad.interval, S(10));
    /* 2 x 10 s + delay (here 30 s, learned from the stamps) + 1 s + 5 s,
     * at least span_window (30 s) */
    CHECK_EQ_UINT(cad.hold, S(56));
    advance(&f, S(45));
    CHECK_EQ_INT(f.traces.n, 0);
    advance(&f, S(2)); /* 57 s after it came: its learned hold is over */
    CHECK_EQ_INT(f.traces.n, 1);
    fx_done(&f);
}

/* An upload that never comes: spans wait up to their hold, not forever, and
 * samples that come after are enriched from the departed spans' summaries. */
static void test_late_samples_enriched_from_summaries(void)
{
    fixture f;
    pl_correlation_config cfg = cadence_config();
    char *attrs[] = {"http.route"};
    cfg.span_attributes = (pl_strlist){attrs, 1};
    REQUIRE(fx_init(&f, &cfg) == 0);
    sample_spec none[] = {{0, 0, NO_SPAN, 0, 1, 0}};
    deliver(&f, mk_profiles("other", BASE, S(10), none, 1)); /* profiles are flowing */
    uint64_t t0 = BASE - S(5);
    span_spec sp[] = {{7, 0xB0, 0, t0, t0 + S(3), "GET /users/:id", "/users/:id"},
                      {7, 0xB1, 0xB0, t0 + S(1), t0 + S(2), "SELECT users", NULL}};
    deliver(&f, mk_traces("api", sp, 2));
    /* No upload from "api" yet: held for the assumed cadence (2 x 60 s + 30 s
     * + 1 s + 5 s = 156 s), then they leave. */
    advance(&f, S(150));
    CHECK_EQ_INT(f.traces.n, 0);
    advance(&f, S(7));
    REQUIRE(f.traces.n == 1);
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.late_spans, 2);
    CHECK(u.late_bytes > 0);
    /* The upload comes now, after its spans left. */
    advance(&f, S(60));
    sample_spec ss[] = {{0xB1, 0, BY_LINK, t0 + S(1) + S(1) / 2, 7000000, 2},
                        {0xB0, 0, BY_SPAN_LABEL, 0, 3000000, 1},
                        {0xB7, 0, BY_LINK, t0, 1, 0}}; /* a span never seen */
    deliver(&f, mk_profiles("api", t0 + S(4), S(10), ss, 3));
    pl_correlation_counters c = counters(&f);
    CHECK_EQ_UINT(c.late_samples, 2);
    CHECK_EQ_UINT(c.late_linked_samples, 2);
    CHECK_EQ_UINT(c.linked_samples, 0); /* counted apart */
    /* The never-seen span's sample waits for its span, then goes on bare. */
    advance(&f, S(31));
    REQUIRE(f.profiles.n == 2);
    pl_batch *pb = f.profiles.b[1];
    char buf[256], want[40];
    CHECK_EQ_STR(link_hex(pb, 0, true, buf), hex_trace(7, want)); /* link completed */
    CHECK_EQ_STR(sample_attr(pb, 0, "span_name", buf, NULL), "SELECT users");
    CHECK_EQ_STR(sample_attr(pb, 0, "root_span_name", buf, NULL), "GET /users/:id");
    CHECK_EQ_STR(sample_attr(pb, 0, "service.name", buf, NULL), "api");
    CHECK_EQ_STR(sample_attr(pb, 0, "http.route", buf, NULL), "/users/:id"); /* from the parent */
    CHECK_EQ_STR(sample_attr(pb, 1, "span_name", buf, NULL), "GET /users/:id");
    CHECK_EQ_STR(sample_attr(pb, 1, "trace_id", buf, NULL), hex_trace(7, want)); /* no link */
    CHECK(sample_attr(pb, 2, "span_name", buf, NULL) == NULL);
    CHECK_EQ_UINT(counters(&f).unlinked_samples, 1);
    /* A sample outside the span's time does not take its summary. */
    sample_spec off[] = {{0xB1, 0, BY_LINK, t0 + S(30), 1, 0}};
    deliver(&f, mk_profiles("api", t0 + S(40), S(10), off, 1));
    CHECK_EQ_UINT(counters(&f).late_linked_samples, 2);
    /* Summaries go after late_window. */
    advance(&f, S(600));
    advance(&f, S(1));
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.late_spans, 0);
    fx_done(&f);
}

/* A service that never sends span-linked profiles is held during the
 * warm-up (its profiler may not have uploaded yet), then passed on at once. */
static void test_unprofiled_service_not_held_after_warmup(void)
{
    fixture f;
    pl_correlation_config cfg = cadence_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    span_spec a[] = {{3, 0xC1, 0, BASE - S(1), BASE, "quiet", NULL}};
    deliver(&f, mk_traces("quiet", a, 1));
    CHECK_EQ_INT(f.traces.n, 0); /* held: a profile may still come */
    sample_spec ss[] = {{0xD1, 0, BY_LINK, 0, 1, 0}};
    deliver(&f, mk_profiles("busy", BASE, S(10), ss, 1)); /* another service profiles */
    advance(&f, S(157));
    CHECK_EQ_INT(f.traces.n, 1); /* the assumed hold ran out */
    advance(&f, S(30));          /* past the warm-up */
    span_spec b[] = {{3, 0xC2, 0, fake_now - S(1), fake_now, "quiet", NULL}};
    deliver(&f, mk_traces("quiet", b, 1));
    CHECK_EQ_INT(f.traces.n, 2); /* not held any more */
    CHECK_EQ_UINT(counters(&f).spans_not_held, 1);
    pl_correlation_cadence cad;
    pl_correlation_get_cadence(f.self, "quiet", &cad);
    CHECK(cad.known && !cad.linked);
    CHECK_EQ_UINT(cad.hold, 0);
    /* A profiled service is still held. */
    span_spec c[] = {{4, 0xD2, 0, fake_now - S(1), fake_now, "busy", NULL}};
    deliver(&f, mk_traces("busy", c, 1));
    CHECK_EQ_INT(f.traces.n, 2);
    fx_done(&f);
}

/* The Pyroscope application name need not be the spans' service.name: once
 * a sample of the profiles' service links to a span of another service,
 * that service follows the profiles' cadence and coverage, and stays held
 * after the warm-up. */
static void test_profiles_under_another_service_name(void)
{
    fixture f;
    pl_correlation_config cfg = cadence_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    span_spec a[] = {{2, 0x71, 0, BASE - S(3), BASE - S(2), "GET /cart", NULL}};
    deliver(&f, mk_traces("checkout", a, 1));
    advance(&f, S(10));
    sample_spec ss[] = {{0x71, 0, BY_SPAN_LABEL, 0, 5, 0}};
    deliver(&f, mk_profiles("checkout-app", BASE, S(10), ss, 1));
    CHECK_EQ_UINT(counters(&f).linked_samples, 1);
    pl_correlation_cadence cad;
    pl_correlation_get_cadence(f.self, "checkout", &cad);
    CHECK(cad.linked);
    CHECK_EQ_UINT(cad.interval, S(10));
    /* Covered by checkout-app's upload (up to BASE): it leaves now. */
    CHECK_EQ_INT(f.traces.n, 1);
    /* Long after the warm-up, checkout's spans are still held, and leave
     * when checkout-app's next upload covers them. */
    advance(&f, S(300));
    span_spec b[] = {{2, 0x72, 0, fake_now - S(3), fake_now - S(2), "GET /cart", NULL}};
    deliver(&f, mk_traces("checkout", b, 1));
    CHECK_EQ_INT(f.traces.n, 1);
    CHECK_EQ_UINT(counters(&f).spans_not_held, 0);
    sample_spec s2[] = {{0x72, 0, BY_SPAN_LABEL, 0, 5, 0}};
    deliver(&f, mk_profiles("checkout-app", fake_now, S(10), s2, 1));
    CHECK_EQ_INT(f.traces.n, 2);
    CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0x72, 2), "profile.cpu_time_ns"), 5);
    fx_done(&f);
}

/* CPU time of this thread: what the work cost, whatever else the machine
 * runs meanwhile (a quadratic table would cost 40k x 40k probes here). */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 40k spans sharing one span id (different traces), then 40k samples naming
 * it, then 40k samples naming an id that never comes: linear, since at most
 * MAX_SAME_ID entries share one id in either table. */
static void test_one_span_id_flood_is_linear(void)
{
    fixture f;
    pl_correlation_config cfg = cadence_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    sample_spec none[] = {{0, 0, NO_SPAN, 0, 1, 0}};
    deliver(&f, mk_profiles("x", BASE, S(10), none, 1));
    enum { N = 40000 };
    span_spec *sp = calloc(N, sizeof(span_spec));
    sample_spec *ss = calloc(N, sizeof(sample_spec));
    REQUIRE(sp && ss);
    for (int i = 0; i < N; i++) {
        sp[i] = (span_spec){(uint8_t)(1 + i % 250),
                            0xF00D,
                            (uint64_t)(0xF00D + 1 + i % 7),
                            BASE - S(2),
                            BASE - S(1),
                            "flood",
                            NULL};
        ss[i] = (sample_spec){0xF00D, 0, BY_LINK, BASE - S(1), 1, 0};
    }
    double t = cpu_s();
    deliver(&f, mk_traces("x", sp, N));
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK(u.indexed_spans <= 16);
    deliver(&f, mk_profiles("x", BASE, S(10), ss, N));
    advance(&f, S(200)); /* everything leaves; summaries are capped as well */
    pl_correlation_get_usage(f.self, &u);
    CHECK(u.late_spans <= 8);
    sample_spec late[] = {{0xF00D, 9, BY_LINK, BASE - S(1), 1, 0}};
    deliver(&f, mk_profiles("x", BASE, S(10), late, 1));
    /* 40k samples waiting for one span id that never comes: at most 16 wait
     * in the pending table, the others go on at once, unlinked. */
    for (int i = 0; i < N; i++)
        ss[i] = (sample_spec){0xBEEF, (uint8_t)(1 + i % 250), BY_LINK, BASE - S(1), 1, 0};
    deliver(&f, mk_profiles("x", BASE, S(10), ss, N));
    pl_correlation_get_usage(f.self, &u);
    CHECK(u.pending_samples <= 16 + 1); /* + the first one, still waiting */
    advance(&f, S(31));
    CHECK_EQ_UINT(counters(&f).unlinked_samples, N + 1); /* and the first one's */
    double took = cpu_s() - t;
    CHECK(took < 2.0);
    printf("# 40k spans and 80k samples with one span id: %.3f CPU-s\n", took);
    CHECK_EQ_UINT(counters(&f).linked_samples, N);
    free(sp);
    free(ss);
    fx_done(&f);
}

/* Client-chosen service names are bounded and counted; when the name budget
 * is full, correlation goes on linking. */
static void test_service_names_bounded(void)
{
    fixture f;
    pl_correlation_config cfg = cadence_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    char *name = malloc(1 << 20);
    REQUIRE(name);
    memset(name, 'n', (1 << 20) - 1);
    name[(1 << 20) - 1] = 0;
    sample_spec none[] = {{0, 0, NO_SPAN, 0, 1, 0}};
    deliver(&f, mk_profiles(name, BASE, S(10), none, 1)); /* 1 MiB: too long to keep */
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.services, 0);
    name[1000] = 0;
    for (int i = 0; i < 6000; i++) {
        snprintf(name, 12, "%010d", i);
        name[10] = 'n';
        deliver(&f, mk_profiles(name, BASE, S(10), none, 1));
    }
    pl_correlation_get_usage(f.self, &u);
    CHECK(u.services > 3000 && u.services < 6000);
    CHECK(u.name_bytes <= (4u << 20) + (64u << 10));
    for (int i = 0; i < f.profiles.n; i++)
        pl_batch_free(f.profiles.b[i]);
    f.profiles.n = 0; /* the capture keeps 64 */
    /* A new service still links (it gets no id, so no service.name label). */
    span_spec sp[] = {{5, 0xE1, 0, BASE - S(2), BASE - S(1), "still works", NULL}};
    deliver(&f, mk_traces("newcomer", sp, 1));
    sample_spec ss[] = {{0xE1, 0, BY_LINK, BASE - S(1), 5, 0}};
    deliver(&f, mk_profiles("newcomer", BASE, S(10), ss, 1));
    char buf[256];
    pl_batch *pb = f.profiles.b[f.profiles.n - 1];
    CHECK_EQ_STR(sample_attr(pb, 0, "span_name", buf, NULL), "still works");
    CHECK_EQ_UINT(counters(&f).linked_samples, 1);
    free(name);
    fx_done(&f);
}

/* Shutdown flushes spans held for a slow cadence, and their samples. */
static void test_shutdown_flushes_long_holds(void)
{
    fixture f;
    pl_correlation_config cfg = cadence_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    span_spec sp[] = {{6, 0xF1, 0, BASE - S(2), BASE - S(1), "held", NULL}};
    deliver(&f, mk_traces("slow", sp, 1));
    sample_spec ss[] = {{0xF2, 0, BY_LINK, BASE - S(1), 5, 0}};
    deliver(&f, mk_profiles("slow", BASE - S(3), S(10), ss, 1));
    CHECK_EQ_INT(f.traces.n, 0);
    CHECK_EQ_INT(f.profiles.n, 0);
    pl_processor_correlation.shutdown(f.self);
    CHECK_EQ_INT(f.traces.n, 1);
    CHECK_EQ_INT(f.profiles.n, 1);
    fx_done(&f);
}

static uint64_t rnd_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)
{
    return (uint32_t)(xorshift64(&rnd_state) % n);
}

/* Random arrival orders at the default settings, with spans leaving long
 * before many of their samples come (up to minutes): every sample is
 * enriched, on time or from its departed span's summary, and always with its
 * own span's trace id (the samples carry span ids only). */
static void test_random_orders_with_late_samples(void)
{
    enum { SPANS = 240, ROUNDS = 12 };
    for (int round = 0; round < ROUNDS; round++) {
        fixture f;
        pl_correlation_config cfg = cadence_config();
        char *attrs[] = {"http.route"};
        cfg.span_attributes = (pl_strlist){attrs, 1};
        REQUIRE(fx_init(&f, &cfg) == 0);
        uint64_t t0 = BASE - S(100);
        span_spec sp[SPANS];
        sample_spec ss[SPANS * 3];
        int n_samples = 0;
        for (int i = 0; i < SPANS; i++) {
            int tree = i / 3, level = i % 3;
            uint64_t base_id = 0x5000 + (uint64_t)round * 0x1000 + (uint64_t)tree * 3;
            sp[i] = (span_spec){(uint8_t)(1 + tree % 250),
                                base_id + (uint64_t)level,
                                level ? base_id + (uint64_t)level - 1 : 0,
                                t0 + S(level),
                                t0 + S(10 - level),
                                level ? "child" : "GET /r",
                                level ? NULL : "/r"};
            int k = (int)rnd(4);
            for (int j = 0; j < k; j++)
                ss[n_samples++] =
                    (sample_spec){sp[i].id, 0, j % 2 ? BY_SPAN_LABEL : BY_LINK, t0 + S(5), 1, 0};
        }
        /* Spans first, in random batches and order, then the samples, with
         * up to 40 s between deliveries: most spans leave before their
         * samples come. In even rounds the service has uploaded a
         * span-linked profile before (its spans are indexed at once); in odd
         * rounds nothing has (held unindexed, within the warm-up). */
        if (round % 2 == 0) {
            sample_spec first[] = {{0xFFFF, 0, BY_LINK, 0, 1, 0}};
            deliver(&f, mk_profiles("svc", t0 - S(30), S(20), first, 1));
        }
        for (int from = 0; from < SPANS;) {
            int n = 1 + (int)rnd(40);
            n = from + n > SPANS ? SPANS - from : n;
            deliver(&f, mk_traces("svc", sp + from, n));
            advance(&f, S(rnd(round % 2 ? 12 : 40)));
            from += n;
        }
        for (int i = n_samples - 1; i > 0; i--) {
            int j = (int)rnd((uint32_t)i + 1);
            sample_spec tmp = ss[i];
            ss[i] = ss[j];
            ss[j] = tmp;
        }
        for (int from = 0; from < n_samples;) {
            int n = 1 + (int)rnd(60);
            n = from + n > n_samples ? n_samples - from : n;
            deliver(&f, mk_profiles("svc", t0, S(20), ss + from, n));
            advance(&f, S(rnd(40)));
            from += n;
        }
        pl_processor_correlation.shutdown(f.self);
        pl_correlation_counters c = counters(&f);
        CHECK_EQ_UINT(c.linked_samples + c.late_linked_samples, (uint64_t)n_samples);
        CHECK_EQ_UINT(c.unlinked_samples, round % 2 ? 0 : 1); /* the first one's span never came */
        CHECK(round == 0 || c.late_linked_samples > 0);
        int checked = 0;
        for (int b = round % 2 ? 0 : 1; b < f.profiles.n; b++) {
            pl_batch *pb = f.profiles.b[b];
            pl_profile *p = &pb->data.profiles.resources[0].scopes[0].profiles[0];
            pl_dictionary *d = &pb->data.profiles.dict;
            for (uint32_t k = 0; k < p->n_samples; k++) {
                char buf[256], want[40];
                const pl_sample *s = &p->samples[k];
                uint64_t id = 0;
                const uint8_t *trace = NULL;
                if (s->link_index > 0) {
                    const pl_link *l = &d->links[s->link_index];
                    for (int x = 0; x < 8; x++)
                        id = id << 8 | l->span_id[x];
                    trace = l->trace_id_len == 16 ? l->trace_id : NULL;
                }
                int idx = -1;
                for (int i = 0; i < SPANS; i++)
                    if (s->link_index > 0 && sp[i].id == id)
                        idx = i;
                if (idx < 0) { /* by label: the trace comes as an attribute */
                    const char *hex = sample_attr(pb, k, "span_id", buf, NULL);
                    REQUIRE(hex != NULL);
                    id = strtoull(hex, NULL, 16);
                    for (int i = 0; i < SPANS; i++)
                        if (sp[i].id == id)
                            idx = i;
                    REQUIRE(idx >= 0);
                    CHECK_EQ_STR(sample_attr(pb, k, "trace_id", buf, NULL),
                                 hex_trace(sp[idx].trace, want));
                } else {
                    uint8_t t16[16];
                    id16(sp[idx].trace, t16);
                    CHECK(trace && memcmp(trace, t16, 16) == 0);
                }
                CHECK_EQ_STR(sample_attr(pb, k, "span_name", buf, NULL), sp[idx].name);
                if (round % 2 == 0) {
                    /* Spans that leave before any profile came, unindexed,
                     * find only parents that left before them: their local
                     * root may be missing (see docs/correlation.md). */
                    CHECK_EQ_STR(sample_attr(pb, k, "root_span_name", buf, NULL), "GET /r");
                    CHECK_EQ_STR(sample_attr(pb, k, "http.route", buf, NULL), "/r");
                }
                checked++;
            }
        }
        CHECK_EQ_INT(checked, n_samples);
        fx_done(&f);
    }
}

/* A released batch the next consumer refuses is kept and offered again;
 * meanwhile new batches of that signal are refused, so clients retry. */
static void test_downstream_refusal_passed_on(void)
{
    fixture f;
    pl_correlation_config cfg = cadence_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    gate g = {true, 0, &f.traces};
    pl_consumer_init_func(&f.next_traces, gate_fn, &g);
    sample_spec none[] = {{0, 0, NO_SPAN, 0, 1, 0}};
    deliver(&f, mk_profiles("other", BASE, S(10), none, 1));
    span_spec a[] = {{8, 0x81, 0, BASE - S(2), BASE - S(1), "kept", NULL}};
    deliver(&f, mk_traces("svc", a, 1));
    sample_spec ss[] = {{0x81, 0, BY_LINK, BASE - S(1), 5, 0}};
    deliver(&f, mk_profiles("svc", BASE, S(10), ss, 1)); /* covers it: released, refused */
    CHECK_EQ_INT(g.refused, 1);
    CHECK_EQ_INT(f.traces.n, 0);
    CHECK_EQ_UINT(counters(&f).refused_items, 1);
    span_spec b[] = {{8, 0x82, 0, BASE - S(2), BASE - S(1), "refused", NULL}};
    pl_status st = pl_processor_correlation.consume(f.self, mk_traces("svc", b, 1), &f.next_traces);
    CHECK_EQ_INT(st, PL_ERR_REFUSED); /* passed on to the client */
    /* Profiles still flow: their next consumer is fine. */
    CHECK_EQ_INT(pl_processor_correlation.consume(f.self, mk_profiles("svc", BASE, S(1), none, 1),
                                                  &f.next_profiles),
                 PL_OK);
    advance(&f, S(1)); /* offered again: still refused */
    CHECK_EQ_INT(g.refused, 2);
    g.refusing = false;
    advance(&f, S(1));
    REQUIRE(f.traces.n == 1);
    pl_span *s = find_span_in(&f.traces, 0x81, 8);
    REQUIRE(s != NULL);
    CHECK_EQ_INT(span_int(s, "profile.cpu_time_ns"), 5);
    st = pl_processor_correlation.consume(f.self, mk_traces("svc", b, 1), &f.next_traces);
    CHECK_EQ_INT(st, PL_OK);
    pl_processor_correlation.shutdown(f.self);
    CHECK_EQ_INT(f.traces.n, 2); /* each exactly once */
    fx_done(&f);
}

int main(void)
{
    PL_RUN(test_heap_upload_does_not_release_spans);
    PL_RUN(test_sixty_second_cadence_links);
    PL_RUN(test_hold_follows_learned_cadence);
    PL_RUN(test_late_samples_enriched_from_summaries);
    PL_RUN(test_unprofiled_service_not_held_after_warmup);
    PL_RUN(test_profiles_under_another_service_name);
    PL_RUN(test_one_span_id_flood_is_linear);
    PL_RUN(test_service_names_bounded);
    PL_RUN(test_shutdown_flushes_long_holds);
    PL_RUN(test_downstream_refusal_passed_on);
    PL_RUN(test_random_orders_with_late_samples);
    return pl_test_done();
}
