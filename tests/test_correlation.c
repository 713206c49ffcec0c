/*
 * test_correlation.c: the correlation processor, driven through its
 * descriptor hooks with capture consumers and an injected clock, so that
 * every arrival order plays out exactly (no sleeping, no event loop).
 *
 * Fixtures: spans are built with mk_traces() (one resource per call, its
 * service.name given), profiles with mk_profiles() (one cpu/nanoseconds
 * profile; each sample names its span by OTLP Link or by label, a timestamp
 * or the profile window, a CPU value and a leaf function).
 */
#include "correlation_fixture.h"
#include "xorshift.h"

/* ---- arrival orders ------------------------------------------------------------------------- */

static void test_span_first_then_samples(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    char *attrs[] = {"http.route"};
    cfg.span_attributes = (pl_strlist){attrs, 1};
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(10);
    span_spec sp[] = {{1, 0xA1, 0, t0, t0 + S(2), "GET /users/:id", "/users/:id"}};
    deliver(&f, mk_traces("api", sp, 1));
    CHECK_EQ_INT(f.traces.n, 0); /* held for its window */

    advance(&f, S(5));
    sample_spec ss[] = {{0xA1, 1, BY_LINK, t0 + S(1), 7000000, 2},
                        {0xA1, 0, BY_LINK, t0 + S(1), 3000000, 1}}; /* no trace id */
    deliver(&f, mk_profiles("api", t0, S(10), ss, 2));
    /* Its span is known: the batch flows on at once, enriched. */
    REQUIRE(f.profiles.n == 1);
    char buf[256], want[40];
    int count;
    pl_batch *pb = f.profiles.b[0];
    /* The ids travel in the sample's link (completed with the trace id when
     * the SDK gave only the span id), not twice as attributes. */
    CHECK_EQ_STR(link_hex(pb, 0, true, buf), hex_trace(1, want));
    CHECK_EQ_STR(link_hex(pb, 1, true, buf), hex_trace(1, want));
    CHECK_EQ_STR(link_hex(pb, 1, false, buf), hex_id(0xA1, want));
    CHECK(sample_attr(pb, 0, "span_id", buf, &count) == NULL);
    CHECK(sample_attr(pb, 1, "trace_id", buf, &count) == NULL);
    CHECK_EQ_STR(sample_attr(pb, 1, "span_name", buf, NULL), "GET /users/:id");
    CHECK_EQ_STR(sample_attr(pb, 1, "root_span_name", buf, NULL), "GET /users/:id");
    CHECK_EQ_STR(sample_attr(pb, 1, "service.name", buf, NULL), "api");
    CHECK_EQ_STR(sample_attr(pb, 0, "http.route", buf, NULL), "/users/:id");
    CHECK_EQ_INT(f.traces.n, 0);

    advance(&f, S(24)); /* 29 s after the span came: still held */
    CHECK_EQ_INT(f.traces.n, 0);
    advance(&f, S(1));
    REQUIRE(f.traces.n == 1);
    pl_span *s = find_span_in(&f.traces, 0xA1, 0);
    CHECK_EQ_STR(span_str(s, "pyroscope.profile.id", buf), hex_id(0xA1, want));
    CHECK_EQ_INT(span_int(s, "profile.samples"), 2);
    CHECK_EQ_INT(span_int(s, "profile.cpu_time_ns"), 10000000);
    CHECK_EQ_INT(span_int(s, "profile.cpu_time_total_ns"), 10000000);
    pl_kv *top = pl_attrs_find(&s->attrs, "profile.top_functions", 21);
    REQUIRE(top && top->value.type == PL_VALUE_ARRAY);
    CHECK_EQ_UINT(top->value.u.array.n, 2);
    CHECK_BYTES_STR(top->value.u.array.items[0].u.str, "hot (70.0%)");
    CHECK_BYTES_STR(top->value.u.array.items[1].u.str, "work (30.0%)");
    pl_correlation_counters c = counters(&f);
    CHECK_EQ_UINT(c.linked_samples, 2);
    CHECK_EQ_UINT(c.linked_spans, 1);
    CHECK_EQ_UINT(c.unlinked_spans, 0);
    CHECK_EQ_UINT(c.unlinked_samples, 0);
    fx_done(&f);
}

/* Spans of one batch that share some labels and differ in others: each
 * sample gets exactly its own span's (spans of one endpoint share their
 * attribute list in the output dictionary; a different name, route, root
 * or service must not). */
static void test_labels_of_spans_sharing_some(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    char *attrs[] = {"http.route"};
    cfg.span_attributes = (pl_strlist){attrs, 1};
    cfg.late_window = S(600); /* with hold_compression the spans are packed: summaries */
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(10);
    span_spec sp[] = {
        {1, 0xB1, 0, t0, t0 + S(2), "GET", "/a"},   {2, 0xB2, 0, t0, t0 + S(2), "GET", "/b"},
        {3, 0xB3, 0, t0, t0 + S(2), "POST", "/a"},  {4, 0xB4, 0, t0, t0 + S(2), "GET", "/a"},
        {5, 0xB5, 0, t0, t0 + S(2), "GET", NULL},   {1, 0xB6, 0xB1, t0, t0 + S(2), "GET", NULL},
        {3, 0xB7, 0xB3, t0, t0 + S(2), "GET", NULL}};
    span_spec other[] = {{6, 0xB8, 0, t0, t0 + S(2), "GET", "/a"}};
    deliver(&f, mk_traces("api", sp, 7));
    deliver(&f, mk_traces("web", other, 1));
    const char *name[] = {"GET", "GET", "POST", "GET", "GET", "GET", "GET", "GET"};
    const char *root[] = {"GET", "GET", "POST", "GET", "GET", "GET", "POST", "GET"};
    const char *route[] = {"/a", "/b", "/a", "/a", NULL, "/a", "/a", "/a"};
    const char *svc[] = {"api", "api", "api", "api", "api", "api", "api", "web"};
    for (int round = 0; round < 2; round++) { /* a second batch: its own dictionary */
        advance(&f, S(1));
        sample_spec ss[16];
        for (int i = 0; i < 16; i++) /* each span twice, in two orders */
            ss[i] = (sample_spec){
                0xB1 + (uint64_t)(round ? 15 - i : i) % 8, 0, BY_LINK, t0 + S(1), 1000, 0};
        int before = f.profiles.n;
        deliver(&f, mk_profiles("api", t0, S(10), ss, 16));
        REQUIRE(f.profiles.n == before + 1);
        pl_batch *pb = f.profiles.b[before];
        char buf[256];
        for (int i = 0; i < 16; i++) {
            int k = (int)(ss[i].span - 0xB1);
            CHECK_EQ_STR(sample_attr(pb, i, "span_name", buf, NULL), name[k]);
            CHECK_EQ_STR(sample_attr(pb, i, "root_span_name", buf, NULL), root[k]);
            CHECK_EQ_STR(sample_attr(pb, i, "service.name", buf, NULL), svc[k]);
            if (route[k])
                CHECK_EQ_STR(sample_attr(pb, i, "http.route", buf, NULL), route[k]);
            else
                CHECK(sample_attr(pb, i, "http.route", buf, NULL) == NULL);
        }
    }
    CHECK_EQ_UINT(counters(&f).linked_samples, 32);
    fx_done(&f);
}

/* A link without a trace id is completed with its span's trace id for the
 * samples that link to that span, and only for them: a link named by one
 * sample is completed where it is, a link named by a sample that links and
 * by one that does not (outside the span's time) is not changed for the
 * latter. */
static void test_link_completed_only_for_its_samples(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(10);
    span_spec sp[] = {{1, 0xC1, 0, t0, t0 + S(2), "a", NULL},
                      {2, 0xC2, 0, t0, t0 + S(2), "b", NULL}};
    deliver(&f, mk_traces("api", sp, 2));
    advance(&f, S(1));
    sample_spec ss[] = {{0xC1, 0, BY_LINK, t0 + S(1), 1000, 0},
                        {0xC1, 0, BY_LINK, t0 - S(100), 1000, 0}, /* long before the span */
                        {0xC2, 0, BY_LINK, t0 + S(1), 1000, 0}};
    deliver(&f, mk_profiles("api", t0, S(10), ss, 3));
    for (int i = 0; i < 200 && f.profiles.n == 0; i++)
        advance(&f, S(1)); /* the second sample waits for a span that never comes */
    REQUIRE(f.profiles.n == 1);
    pl_batch *pb = f.profiles.b[0];
    char buf[64], want[40];
    CHECK_EQ_STR(link_hex(pb, 0, true, buf), hex_trace(1, want));
    CHECK_EQ_STR(link_hex(pb, 0, false, buf), hex_id(0xC1, want));
    CHECK_EQ_STR(link_hex(pb, 1, true, buf), ""); /* its link as it came */
    CHECK_EQ_STR(link_hex(pb, 1, false, buf), hex_id(0xC1, want));
    CHECK_EQ_STR(link_hex(pb, 2, true, buf), hex_trace(2, want));
    CHECK_EQ_STR(link_hex(pb, 2, false, buf), hex_id(0xC2, want));
    CHECK(sample_at(pb, 0)->link_index != sample_at(pb, 1)->link_index);
    CHECK_EQ_UINT(counters(&f).linked_samples, 2);
    fx_done(&f);
}

static void test_samples_first_then_span(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(5);
    sample_spec ss[] = {{0xB1, 2, BY_SPAN_LABEL, t0 + S(1), 5000000, 2},
                        {0, 0, NO_SPAN, t0 + S(1), 1000000, 0}};
    deliver(&f, mk_profiles("api", t0, S(10), ss, 2));
    CHECK_EQ_INT(f.profiles.n, 0); /* waits for its span */
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.pending_samples, 1);

    advance(&f, S(20)); /* a long request: its span ends and is exported late */
    span_spec sp[] = {{2, 0xB1, 0, t0, t0 + S(3), "checkout", NULL}};
    deliver(&f, mk_traces("api", sp, 1));
    REQUIRE(f.profiles.n == 1); /* its last waiting sample linked: it flows on */
    char buf[256], want[40];
    int count;
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "span_name", buf, NULL), "checkout");
    /* The SDK's own span_id label is replaced, not duplicated. */
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "span_id", buf, &count), hex_id(0xB1, want));
    CHECK_EQ_INT(count, 1);
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "thread", buf, NULL), "main");
    CHECK(sample_attr(f.profiles.b[0], 1, "span_name", buf, NULL) == NULL);
    CHECK_EQ_INT(f.traces.n, 0);
    advance(&f, S(30));
    REQUIRE(f.traces.n == 1);
    CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0xB1, 0), "profile.samples"), 1);
    CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0xB1, 0), "profile.cpu_time_ns"), 5000000);
    CHECK_EQ_UINT(counters(&f).linked_samples, 1);
    CHECK_EQ_UINT(counters(&f).unlinked_samples, 0);
    fx_done(&f);
}

static void test_interleaved_many_batches(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(10);
    /* 8 spans in 4 trace batches, 16 samples in 4 profile batches, alternating;
     * half of the samples come before their span. */
    for (int round = 0; round < 4; round++) {
        uint64_t a = 0x100 + (uint64_t)round * 2, b = a + 1;
        uint64_t later = 0x100 + (uint64_t)((round + 1) % 4) * 2;
        sample_spec ss[] = {{a, 3, BY_LINK, t0 + S(1), 1000, 0},
                            {b, 3, BY_LINK, t0 + S(1), 1000, 1},
                            {later, 3, BY_LINK, t0 + S(1), 1000, 2},
                            {later + 1, 3, BY_PROFILE_LABEL, t0 + S(1), 1000, 2}};
        span_spec sp[] = {{3, a, 0, t0, t0 + S(2), "A", NULL}, {3, b, a, t0, t0 + S(2), "B", NULL}};
        if (round % 2 == 0) {
            deliver(&f, mk_traces("svc", sp, 2));
            advance(&f, S(1));
            deliver(&f, mk_profiles("svc", t0, S(10), ss, 4));
        } else {
            deliver(&f, mk_profiles("svc", t0, S(10), ss, 4));
            advance(&f, S(1));
            deliver(&f, mk_traces("svc", sp, 2));
        }
        advance(&f, S(1));
    }
    /* Round 3's "later" samples point at round 0's spans (known): all linked. */
    pl_correlation_counters c = counters(&f);
    CHECK_EQ_UINT(c.linked_samples, 16);
    CHECK_EQ_INT(f.profiles.n, 4);
    advance(&f, S(30));
    CHECK_EQ_INT(f.traces.n, 4);
    for (uint64_t id = 0x100; id < 0x108; id++) {
        pl_span *s = find_span_in(&f.traces, id, 0);
        CHECK_EQ_INT(span_int(s, "profile.samples"), 2); /* one per sample entry */
        CHECK_EQ_INT(span_int(s, "profile.cpu_time_ns"), 2000);
    }
    /* B's parent is A: A's total holds both. */
    CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0x100, 0), "profile.cpu_time_total_ns"), 4000);
    CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0x101, 0), "profile.cpu_time_total_ns"), 2000);
    c = counters(&f);
    CHECK_EQ_UINT(c.linked_spans, 8);
    CHECK_EQ_UINT(c.unlinked_samples, 0);
    fx_done(&f);
}

static void test_partner_never_comes(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    cfg.span_window = S(10);
    cfg.sample_window = S(20);
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE;
    span_spec sp[] = {{4, 0xC1, 0, t0, t0 + S(1), "lonely", NULL}};
    deliver(&f, mk_traces("api", sp, 1));
    sample_spec ss[] = {{0xC2, 4, BY_LINK, t0, 100, 0}};
    deliver(&f, mk_profiles("api", t0, S(10), ss, 1));
    CHECK_EQ_INT(f.traces.n, 0);
    CHECK_EQ_INT(f.profiles.n, 0);
    advance(&f, S(10)); /* the span window closes first (per-side override) */
    REQUIRE(f.traces.n == 1);
    CHECK_EQ_INT(f.profiles.n, 0);
    pl_span *s = find_span_in(&f.traces, 0xC1, 0);
    CHECK(pl_attrs_find(&s->attrs, "pyroscope.profile.id", 20) == NULL);
    CHECK(pl_attrs_find(&s->attrs, "profile.samples", 15) == NULL);
    advance(&f, S(10));
    REQUIRE(f.profiles.n == 1);
    char buf[256];
    CHECK(sample_attr(f.profiles.b[0], 0, "span_name", buf, NULL) == NULL);
    pl_correlation_counters c = counters(&f);
    CHECK_EQ_UINT(c.unlinked_spans, 1);
    CHECK_EQ_UINT(c.unlinked_samples, 1);
    CHECK_EQ_UINT(c.linked_samples, 0);
    CHECK_EQ_UINT(c.late_samples, 0);
    CHECK_EQ_UINT(c.late_spans, 0);
    fx_done(&f);
}

static void test_partner_after_window(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE;
    /* Profiles are flowing (spans are indexed, and remembered once gone). */
    sample_spec other[] = {{0, 0, NO_SPAN, 0, 1, 0}};
    deliver(&f, mk_profiles("api", t0, S(1), other, 1));
    CHECK_EQ_INT(f.profiles.n, 1);
    /* Span first; its samples come after it left. */
    span_spec sp[] = {{5, 0xD1, 0, t0, t0 + S(1), "early", NULL}};
    deliver(&f, mk_traces("api", sp, 1));
    advance(&f, S(30));
    CHECK_EQ_INT(f.traces.n, 1);
    advance(&f, S(5));
    sample_spec ss[] = {{0xD1, 5, BY_LINK, t0, 100, 0}};
    deliver(&f, mk_profiles("api", t0, S(10), ss, 1));
    CHECK_EQ_INT(f.profiles.n, 2); /* does not wait for a span that left */
    pl_correlation_counters c = counters(&f);
    CHECK_EQ_UINT(c.late_samples, 1);
    CHECK_EQ_UINT(c.unlinked_samples, 1);

    /* Samples first; their span comes after they left. */
    sample_spec ss2[] = {{0xD2, 5, BY_LINK, t0, 100, 0}, {0xD2, 5, BY_LINK, t0, 100, 0}};
    deliver(&f, mk_profiles("api", t0, S(10), ss2, 2));
    advance(&f, S(30));
    CHECK_EQ_INT(f.profiles.n, 3);
    span_spec sp2[] = {{5, 0xD2, 0, t0, t0 + S(1), "late", NULL}};
    deliver(&f, mk_traces("api", sp2, 1));
    c = counters(&f);
    CHECK_EQ_UINT(c.late_spans, 1); /* one span, however many samples it missed */
    CHECK_EQ_UINT(c.unlinked_samples, 3);
    advance(&f, S(30));
    CHECK(pl_attrs_find(&find_span_in(&f.traces, 0xD2, 0)->attrs, "profile.samples", 15) == NULL);
    /* Markers expire: much later, a span with that id is not "late" again. */
    advance(&f, S(100));
    advance(&f, S(1));
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.markers, 0);
    fx_done(&f);
}

static void test_spans_unindexed_until_profiles_come(void)
{
    /* No profiler anywhere: spans are held (a profile may still come) but
     * not indexed; the first profiles batch indexes them and links. */
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(5);
    span_spec sp[] = {{21, 0xE0, 0, t0, t0 + S(1), "a", NULL},
                      {21, 0xE1, 0xE0, t0, t0 + S(1), "b", NULL}};
    deliver(&f, mk_traces("x", sp, 2));
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.held_spans, 2);
    CHECK_EQ_UINT(u.indexed_spans, 0);
    advance(&f, S(10));
    sample_spec ss[] = {{0xE1, 21, BY_LINK, t0, 3, 0}};
    deliver(&f, mk_profiles("x", t0, S(2), ss, 1));
    CHECK_EQ_INT(f.profiles.n, 1);
    CHECK_EQ_UINT(counters(&f).linked_samples, 1);
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.indexed_spans, 2);
    /* From now on, new spans are indexed as they come. */
    span_spec sp2[] = {{21, 0xE2, 0, t0, t0 + S(1), "c", NULL}};
    deliver(&f, mk_traces("x", sp2, 1));
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.indexed_spans, 3);
    advance(&f, S(30));
    CHECK_EQ_INT(f.traces.n, 2);
    CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0xE0, 0), "profile.cpu_time_total_ns"), 3);
    pl_correlation_counters c = counters(&f);
    CHECK_EQ_UINT(c.linked_spans, 1);
    CHECK_EQ_UINT(c.unlinked_spans, 2);
    fx_done(&f);
}

/* ---- the join rule -------------------------------------------------------------------------- */

static void test_skew_edges(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    cfg.max_clock_skew = S(1);
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t start = BASE - S(20), end = start + S(2);
    span_spec sp[] = {{6, 0xE1, 0, start, end, "edge", NULL}};
    deliver(&f, mk_traces("api", sp, 1));
    sample_spec ss[] = {
        {0xE1, 6, BY_LINK, start - S(1), 1, 0},     /* exactly start - skew: linked */
        {0xE1, 6, BY_LINK, start - S(1) - 1, 1, 0}, /* 1 ns before: not */
        {0xE1, 6, BY_LINK, end + S(1), 1, 0},       /* exactly end + skew: linked */
        {0xE1, 6, BY_LINK, end + S(1) + 1, 1, 0},   /* 1 ns after: not */
    };
    deliver(&f, mk_profiles("api", start - S(5), S(10), ss, 4));
    CHECK_EQ_UINT(counters(&f).linked_samples, 2);
    CHECK_EQ_INT(f.profiles.n, 0); /* two still wait (another span with that id may come) */
    advance(&f, S(30));
    REQUIRE(f.profiles.n == 1);
    char buf[256];
    CHECK(sample_attr(f.profiles.b[0], 0, "span_name", buf, NULL) != NULL);
    CHECK(sample_attr(f.profiles.b[0], 1, "span_name", buf, NULL) == NULL);
    CHECK(sample_attr(f.profiles.b[0], 2, "span_name", buf, NULL) != NULL);
    CHECK(sample_attr(f.profiles.b[0], 3, "span_name", buf, NULL) == NULL);
    CHECK_EQ_UINT(counters(&f).unlinked_samples, 2);

    /* Without timestamps, the profile window must overlap the widened span.
     * The window is [time - duration, time + duration]: pprof's time_nanos
     * is the start, but the Node.js SDK stamps the end. */
    span_spec sp2[] = {{6, 0xE2, 0, start, end, "window", NULL}};
    deliver(&f, mk_traces("api", sp2, 1));
    sample_spec w[] = {{0xE2, 6, BY_LINK, 0, 1, 0}};
    deliver(&f, mk_profiles("api", end + S(11), S(10), w, 1)); /* begins at end + skew */
    CHECK_EQ_UINT(counters(&f).linked_samples, 3);
    deliver(&f, mk_profiles("api", end + S(11) + 1, S(10), w, 1)); /* 1 ns later */
    CHECK_EQ_UINT(counters(&f).linked_samples, 3);
    deliver(&f, mk_profiles("api", start - S(11), S(10), w, 1)); /* ends at start - skew */
    CHECK_EQ_UINT(counters(&f).linked_samples, 4);
    deliver(&f, mk_profiles("api", start - S(11) - 1, S(10), w, 1)); /* 1 ns earlier */
    CHECK_EQ_UINT(counters(&f).linked_samples, 4);
    fx_done(&f);
}

static void test_duplicate_span_ids_in_different_traces(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(10);
    span_spec sp1[] = {{7, 0xF1, 0, t0, t0 + S(2), "in trace 7", NULL}};
    span_spec sp2[] = {{8, 0xF1, 0, t0, t0 + S(2), "in trace 8", NULL}};
    deliver(&f, mk_traces("api", sp1, 1));
    deliver(&f, mk_traces("api", sp2, 1));
    sample_spec ss[] = {{0xF1, 8, BY_LINK, t0 + S(1), 5, 0},
                        {0xF1, 7, BY_SPAN_LABEL, t0 + S(1), 3, 0},
                        {0xF1, 9, BY_LINK, t0 + S(1), 1, 0}}; /* a third trace: no match */
    deliver(&f, mk_profiles("api", t0, S(10), ss, 3));
    CHECK_EQ_UINT(counters(&f).linked_samples, 2);
    advance(&f, S(30));
    REQUIRE(f.profiles.n == 1);
    char buf[256], want[40];
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "span_name", buf, NULL), "in trace 8");
    CHECK_EQ_STR(link_hex(f.profiles.b[0], 0, true, buf), hex_trace(8, want));
    /* Labels only (no link): the ids come as attributes. */
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 1, "trace_id", buf, NULL), hex_trace(7, want));
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 1, "span_name", buf, NULL), "in trace 7");
    CHECK(sample_attr(f.profiles.b[0], 2, "span_name", buf, NULL) == NULL);
    CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0xF1, 7), "profile.cpu_time_ns"), 3);
    CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0xF1, 8), "profile.cpu_time_ns"), 5);
    CHECK_EQ_UINT(counters(&f).unlinked_samples, 1);
    fx_done(&f);
}

/* ---- local roots and ancestors -------------------------------------------------------------- */

static void check_rollup(fixture *f)
{
    pl_span *r = find_span_in(&f->traces, 0x10, 0);
    pl_span *c = find_span_in(&f->traces, 0x11, 0);
    pl_span *g = find_span_in(&f->traces, 0x12, 0);
    REQUIRE(r && c && g);
    CHECK_EQ_INT(span_int(g, "profile.cpu_time_ns"), 10);
    CHECK_EQ_INT(span_int(g, "profile.cpu_time_total_ns"), 10);
    CHECK_EQ_INT(span_int(c, "profile.cpu_time_ns"), 5);
    CHECK_EQ_INT(span_int(c, "profile.cpu_time_total_ns"), 15);
    CHECK_EQ_INT(span_int(r, "profile.cpu_time_ns"), 1);
    CHECK_EQ_INT(span_int(r, "profile.cpu_time_total_ns"), 16);
}

static void test_ancestors_rolled_up(void)
{
    char *attrs[] = {"http.route"};
    pl_correlation_config cfg = test_config();
    cfg.span_attributes = (pl_strlist){attrs, 1};
    uint64_t t0 = BASE - S(10);
    span_spec root = {9, 0x10, 0, t0, t0 + S(5), "GET /cart", "/cart"};
    span_spec child = {9, 0x11, 0x10, t0 + S(1), t0 + S(3), "load cart", NULL};
    span_spec grand = {9, 0x12, 0x11, t0 + S(1), t0 + S(2), "SELECT", NULL};
    sample_spec ss[] = {{0x12, 9, BY_LINK, t0 + S(1), 10, 2},
                        {0x11, 9, BY_LINK, t0 + S(2), 5, 1},
                        {0x10, 9, BY_LINK, t0 + S(4), 1, 0}};
    char buf[256];

    /* All spans first, in one batch. */
    fixture f;
    REQUIRE(fx_init(&f, &cfg) == 0);
    span_spec all[] = {grand, child, root};
    deliver(&f, mk_traces("shop", all, 3));
    deliver(&f, mk_profiles("shop", t0, S(10), ss, 3));
    REQUIRE(f.profiles.n == 1);
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "root_span_name", buf, NULL), "GET /cart");
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "span_name", buf, NULL), "SELECT");
    /* http.route lives on the root: found through the ancestors. */
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "http.route", buf, NULL), "/cart");
    advance(&f, S(30));
    check_rollup(&f);
    fx_done(&f);

    /* The root ends last and comes in a later batch, after the samples
     * linked to its descendants: its total still holds theirs. */
    REQUIRE(fx_init(&f, &cfg) == 0);
    span_spec kids[] = {grand, child};
    deliver(&f, mk_traces("shop", kids, 2));
    deliver(&f, mk_profiles("shop", t0, S(10), ss, 3)); /* the root's own sample waits */
    CHECK_EQ_INT(f.profiles.n, 0);
    advance(&f, S(5));
    deliver(&f, mk_traces("shop", &root, 1));
    REQUIRE(f.profiles.n == 1);
    advance(&f, S(30));
    check_rollup(&f);
    fx_done(&f);

    /* Bottom up, one span per batch, the samples right after the first:
     * totals climb through two placeholders. */
    REQUIRE(fx_init(&f, &cfg) == 0);
    deliver(&f, mk_traces("shop", &grand, 1));
    deliver(&f, mk_profiles("shop", t0, S(10), ss, 3));
    advance(&f, S(1));
    deliver(&f, mk_traces("shop", &child, 1));
    advance(&f, S(1));
    deliver(&f, mk_traces("shop", &root, 1));
    REQUIRE(f.profiles.n == 1);
    advance(&f, S(30));
    check_rollup(&f);
    fx_done(&f);

    /* Reverse: root first, then the child, then the grandchild. */
    REQUIRE(fx_init(&f, &cfg) == 0);
    deliver(&f, mk_traces("shop", &root, 1));
    deliver(&f, mk_traces("shop", &child, 1));
    deliver(&f, mk_traces("shop", &grand, 1));
    deliver(&f, mk_profiles("shop", t0, S(10), ss, 3));
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "root_span_name", buf, NULL), "GET /cart");
    advance(&f, S(30));
    check_rollup(&f);
    fx_done(&f);
}

static void test_local_root_only_samples(void)
{
    /* Pyroscope Go/.NET stamp samples with the local root's id only. */
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(10);
    /* The caller, in another service: an ancestor, but not the local root. */
    span_spec gw[] = {{10, 0x99, 0, t0, t0 + S(4), "gateway", NULL}};
    deliver(&f, mk_traces("gateway", gw, 1));
    span_spec sp[] = {{10, 0x20, 0x99, t0, t0 + S(3), "POST /pay", NULL}, /* remote parent */
                      {10, 0x21, 0x20, t0 + S(1), t0 + S(2), "charge", NULL}};
    deliver(&f, mk_traces("pay", sp, 2));
    sample_spec ss[] = {{0x20, 0, BY_PROFILE_LABEL, t0 + S(1), 40, 2},
                        {0x20, 0, BY_PROFILE_LABEL, t0 + S(2), 60, 1}};
    deliver(&f, mk_profiles("pay", t0, S(10), ss, 2));
    REQUIRE(f.profiles.n == 1);
    char buf[256], want[40];
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "span_name", buf, NULL), "POST /pay");
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "root_span_name", buf, NULL), "POST /pay");
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "trace_id", buf, NULL), hex_trace(10, want));
    advance(&f, S(30));
    pl_span *r = find_span_in(&f.traces, 0x20, 0);
    CHECK_EQ_STR(span_str(r, "pyroscope.profile.id", buf), hex_id(0x20, want));
    CHECK_EQ_INT(span_int(r, "profile.cpu_time_ns"), 100);
    CHECK_EQ_INT(span_int(r, "profile.samples"), 2);
    pl_span *c = find_span_in(&f.traces, 0x21, 0);
    CHECK(pl_attrs_find(&c->attrs, "pyroscope.profile.id", 20) == NULL);
    CHECK_EQ_UINT(counters(&f).linked_spans, 1);
    CHECK_EQ_UINT(counters(&f).unlinked_spans, 2);
    /* The caller's total includes its remote child's samples. */
    pl_span *g = find_span_in(&f.traces, 0x99, 0);
    CHECK_EQ_INT(span_int(g, "profile.cpu_time_total_ns"), 100);
    CHECK(pl_attrs_find(&g->attrs, "pyroscope.profile.id", 20) == NULL);
    fx_done(&f);
}

/* ---- values --------------------------------------------------------------------------------- */

static void test_cpu_from_count_and_period(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(10);
    span_spec sp[] = {{11, 0x30, 0, t0, t0 + S(5), "op", NULL}};
    deliver(&f, mk_traces("go", sp, 1));
    sample_spec ss[] = {{0x30, 11, BY_LINK, t0 + S(1), 3, 2}, {0x30, 11, BY_LINK, t0 + S(1), 1, 1}};
    deliver(&f, mk_profiles_typed("go", t0, S(10), ss, 2, "samples", "count", "cpu", "nanoseconds",
                                  10000000));
    /* A wall profile of the Node.js SDK: samples/count with a wall period. */
    span_spec sp2[] = {{11, 0x31, 0, t0, t0 + S(5), "op2", NULL}};
    deliver(&f, mk_traces("node", sp2, 1));
    sample_spec ss2[] = {{0x31, 11, BY_SPAN_LABEL, 0, 2, 2}};
    deliver(&f, mk_profiles_typed("node", t0, S(10), ss2, 1, "samples", "count", "wall",
                                  "nanoseconds", 10000000));
    advance(&f, S(30));
    pl_span *s = find_span_in(&f.traces, 0x30, 0);
    CHECK_EQ_INT(span_int(s, "profile.samples"), 4);
    CHECK_EQ_INT(span_int(s, "profile.cpu_time_ns"), 40000000);
    pl_kv *top = pl_attrs_find(&s->attrs, "profile.top_functions", 21);
    REQUIRE(top && top->value.type == PL_VALUE_ARRAY && top->value.u.array.n == 2);
    CHECK_BYTES_STR(top->value.u.array.items[0].u.str, "hot (75.0%)");
    pl_span *s2 = find_span_in(&f.traces, 0x31, 0);
    CHECK_EQ_INT(span_int(s2, "profile.samples"), 2);
    CHECK_EQ_INT(span_int(s2, "profile.cpu_time_ns"), 0);
    CHECK_EQ_INT(span_int(s2, "profile.wall_time_ns"), 20000000);
    fx_done(&f);
}

static void test_configured_names_and_top_n(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    cfg.top_functions = 1;
    cfg.profile_id_attribute = "profile.link";
    cfg.cpu_time_attribute = "cpu";
    cfg.span_name_attribute = "operation";
    cfg.root_span_name_attribute = "endpoint";
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(10);
    span_spec sp[] = {{12, 0x40, 0, t0, t0 + S(5), "op", NULL}};
    deliver(&f, mk_traces("a", sp, 1));
    sample_spec ss[] = {{0x40, 12, BY_LINK, t0 + S(1), 3, 2}, {0x40, 12, BY_LINK, t0 + S(1), 1, 1}};
    deliver(&f, mk_profiles("a", t0, S(10), ss, 2));
    char buf[256];
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "operation", buf, NULL), "op");
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "endpoint", buf, NULL), "op");
    CHECK(sample_attr(f.profiles.b[0], 0, "span_name", buf, NULL) == NULL);
    advance(&f, S(30));
    pl_span *s = find_span_in(&f.traces, 0x40, 0);
    CHECK(span_str(s, "profile.link", buf) != NULL);
    CHECK_EQ_INT(span_int(s, "cpu"), 4);
    pl_kv *top = pl_attrs_find(&s->attrs, "profile.top_functions", 21);
    REQUIRE(top && top->value.type == PL_VALUE_ARRAY);
    CHECK_EQ_UINT(top->value.u.array.n, 1);
    fx_done(&f);
}

/* ---- bounds, pressure, early release, shutdown ---------------------------------------------- */

static void test_max_spans_releases_oldest(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    cfg.max_spans = 3;
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(10);
    span_spec a[] = {{13, 0x50, 0, t0, t0 + S(1), "a", NULL},
                     {13, 0x51, 0, t0, t0 + S(1), "b", NULL}};
    span_spec b[] = {{13, 0x52, 0, t0, t0 + S(1), "c", NULL},
                     {13, 0x53, 0, t0, t0 + S(1), "d", NULL}};
    deliver(&f, mk_traces("x", a, 2));
    sample_spec ss[] = {{0x50, 13, BY_LINK, t0, 1, 0}};
    deliver(&f, mk_profiles("x", t0, S(2), ss, 1));
    deliver(&f, mk_traces("x", b, 2));
    /* 4 > 3: the oldest batch left early, with what it had; none dropped. */
    REQUIRE(f.traces.n == 1);
    CHECK(find_span_in(&f.traces, 0x50, 0) != NULL);
    CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0x50, 0), "profile.samples"), 1);
    pl_correlation_counters c = counters(&f);
    CHECK_EQ_UINT(c.released_early_spans, 2);
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.held_spans, 2);
    fx_done(&f);
}

static void test_max_pending_samples_releases_oldest(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    cfg.max_pending_samples = 2;
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE;
    sample_spec s1[] = {{0x60, 0, BY_LINK, t0, 1, 0}, {0x61, 0, BY_LINK, t0, 1, 0}};
    sample_spec s2[] = {{0x62, 0, BY_LINK, t0, 1, 0}};
    deliver(&f, mk_profiles("x", t0, S(2), s1, 2));
    CHECK_EQ_INT(f.profiles.n, 0);
    deliver(&f, mk_profiles("x", t0, S(2), s2, 1));
    REQUIRE(f.profiles.n == 1);
    CHECK_EQ_UINT(sample_at(f.profiles.b[0], 0)->link_index > 0, 1);
    CHECK_EQ_UINT(counters(&f).released_early_samples, 2);
    CHECK_EQ_UINT(counters(&f).unlinked_samples, 2);
    fx_done(&f);
}

static void test_max_bytes_releases_oldest(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    fx_done(&f);
    cfg.max_bytes = u.index_bytes + 1; /* room for the index, not for one batch */
    REQUIRE(fx_init(&f, &cfg) == 0);
    span_spec a[] = {{14, 0x70, 0, BASE, BASE + S(1), "a", NULL}};
    deliver(&f, mk_traces("x", a, 1));
    CHECK_EQ_INT(f.traces.n, 1);
    CHECK_EQ_UINT(counters(&f).released_early_spans, 1);
    fx_done(&f);
}

static void test_memory_pressure_releases_everything(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    span_spec a[] = {{15, 0x80, 0, BASE, BASE + S(1), "a", NULL}};
    sample_spec ss[] = {{0x81, 0, BY_LINK, BASE, 1, 0}};
    deliver(&f, mk_traces("x", a, 1));
    deliver(&f, mk_profiles("x", BASE, S(2), ss, 1));
    CHECK_EQ_INT(f.traces.n + f.profiles.n, 0);
    pl_memory_state_set(PL_MEMORY_HARD);
    pl_correlation_tick(f.self);
    CHECK_EQ_INT(f.traces.n, 1);
    CHECK_EQ_INT(f.profiles.n, 1);
    /* Under pressure nothing new is held either. */
    span_spec b[] = {{15, 0x82, 0, BASE, BASE + S(1), "b", NULL}};
    deliver(&f, mk_traces("x", b, 1));
    CHECK_EQ_INT(f.traces.n, 2);
    pl_memory_state_set(PL_MEMORY_OK);
    pl_correlation_counters c = counters(&f);
    CHECK_EQ_UINT(c.released_early_spans, 2);
    CHECK_EQ_UINT(c.released_early_samples, 1);
    fx_done(&f);
}

static void test_early_release_on_coverage(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    cfg.early_release = true;
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(20);
    span_spec a[] = {{16, 0x90, 0, t0, t0 + S(2), "a", NULL}};
    deliver(&f, mk_traces("svc", a, 1));
    /* A profile of another service proves nothing about "svc". */
    sample_spec none[] = {{0, 0, NO_SPAN, 0, 1, 0}};
    deliver(&f, mk_profiles("other", t0, S(10), none, 1));
    CHECK_EQ_INT(f.traces.n, 0);
    /* A profile proves coverage up to its time_unix_nano (or its latest
     * sample timestamp): here end + 1 s - 1 ns, one short of end + skew. */
    sample_spec ss[] = {{0x90, 16, BY_LINK, t0 + S(1), 5, 0}};
    deliver(&f, mk_profiles("svc", t0 + S(3) - 1, S(10), ss, 1));
    CHECK_EQ_INT(f.traces.n, 0);
    sample_spec stamped[] = {{0, 0, NO_SPAN, t0 + S(3), 1, 0}}; /* a timestamp at end + 1 s */
    deliver(&f, mk_profiles("svc", t0 - S(5), S(10), stamped, 1));
    REQUIRE(f.traces.n == 1);
    CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0x90, 0), "profile.cpu_time_ns"), 5);
    CHECK_EQ_UINT(counters(&f).spans_released_on_coverage, 1);
    CHECK_EQ_UINT(counters(&f).released_early_spans, 0);
    /* A span that arrives already covered leaves at once. */
    span_spec b[] = {{16, 0x91, 0, t0, t0 + S(1), "b", NULL}};
    deliver(&f, mk_traces("svc", b, 1));
    CHECK_EQ_INT(f.traces.n, 2);
    fx_done(&f);
}

static void test_shutdown_flushes_everything(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(5);
    span_spec a[] = {{17, 0xA0, 0, t0, t0 + S(2), "a", NULL}};
    deliver(&f, mk_traces("x", a, 1));
    sample_spec ss[] = {{0xA0, 17, BY_LINK, t0 + S(1), 9, 0}, {0xA9, 17, BY_LINK, t0, 1, 0}};
    deliver(&f, mk_profiles("x", t0, S(5), ss, 2));
    CHECK_EQ_INT(f.traces.n, 0);
    CHECK_EQ_INT(f.profiles.n, 0);
    pl_processor_correlation.shutdown(f.self);
    CHECK_EQ_INT(f.traces.n, 1);
    CHECK_EQ_INT(f.profiles.n, 1);
    CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0xA0, 0), "profile.cpu_time_ns"), 9);
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.held_spans, 0);
    CHECK_EQ_UINT(u.pending_samples, 0);
    /* After shutdown, batches pass straight through. */
    deliver(&f, mk_traces("x", a, 1));
    CHECK_EQ_INT(f.traces.n, 2);
    fx_done(&f);
}

static void test_counters_exported(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    span_spec a[] = {{18, 0xB0, 0, BASE, BASE + S(1), "a", NULL}};
    sample_spec ss[] = {{0xB0, 18, BY_LINK, BASE, 1, 0}};
    deliver(&f, mk_traces("x", a, 1));
    deliver(&f, mk_profiles("x", BASE, S(5), ss, 1));
    advance(&f, S(30));
    uint64_t *linked = pl_stats_counter(f.stats, "linked_samples", "x");
    uint64_t *spans = pl_stats_counter(f.stats, "linked_spans", "x");
    REQUIRE(linked && spans);
    CHECK_EQ_UINT(*linked, 1);
    CHECK_EQ_UINT(*spans, 1);
    CHECK_EQ_UINT(pl_stats_get(f.stats, PL_SIGNAL_TRACES, PL_STAT_ACCEPTED), 1);
    CHECK_EQ_UINT(pl_stats_get(f.stats, PL_SIGNAL_PROFILES, PL_STAT_ACCEPTED), 1);
    fx_done(&f);
}

static void test_one_signal_passes_through(void)
{
    /* An instance used only in a traces pipeline has nothing to wait for. */
    pl_correlation_config cfg = test_config();
    pl_create_settings st;
    memset(&st, 0, sizeof(st));
    st.id = "correlation";
    st.clock = (pl_clock){fake_clock, NULL};
    st.signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES);
    void *self = NULL;
    pl_err err;
    REQUIRE(pl_processor_correlation.create(&st, &cfg, &self, &err) == PL_OK);
    capture cap = {0};
    pl_consumer next;
    pl_consumer_init_func(&next, capture_fn, &cap);
    span_spec a[] = {{19, 0xC0, 0, BASE, BASE + S(1), "a", NULL}};
    pl_processor_correlation.consume(self, mk_traces("x", a, 1), &next);
    CHECK_EQ_INT(cap.n, 1);
    pl_processor_correlation.shutdown(self);
    pl_processor_correlation.destroy(self);
    pl_batch_free(cap.b[0]);
}

static void test_many_spans_and_samples(void)
{
    /* A larger mix, checked against a simple model: every sample links to
     * its own span; the table grows past its first size on the way. */
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    enum { N = 5000 };
    uint64_t t0 = BASE - S(10);
    span_spec *sp = calloc(N, sizeof(span_spec));
    sample_spec *ss = calloc(N, sizeof(sample_spec));
    for (int i = 0; i < N; i++) {
        sp[i] = (span_spec){20,
                            0x10000 + (uint64_t)i,
                            i ? 0x10000 + (uint64_t)(i - 1) / 2 : 0,
                            t0,
                            t0 + S(2),
                            "op",
                            NULL};
        ss[i] = (sample_spec){0x10000 + (uint64_t)(N - 1 - i), 20, BY_LINK, t0 + S(1), 1, i % 3};
    }
    deliver(&f, mk_profiles("m", t0, S(10), ss, N / 2)); /* half before */
    deliver(&f, mk_traces("m", sp, N));
    deliver(&f, mk_profiles("m", t0, S(10), ss + N / 2, N - N / 2));
    CHECK_EQ_UINT(counters(&f).linked_samples, N);
    CHECK_EQ_INT(f.profiles.n, 2);
    advance(&f, S(30));
    /* Root total = all N samples (each value 1). */
    CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0x10000, 0), "profile.cpu_time_total_ns"), N);
    CHECK_EQ_UINT(counters(&f).linked_spans, N);
    /* Once the gone markers expire, the tables shrink back. */
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK(u.span_table_slots >= 8192);
    advance(&f, S(31));
    advance(&f, S(1));
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.markers, 0);
    CHECK_EQ_UINT(u.span_table_slots, 1024);
    free(sp);
    free(ss);
    fx_done(&f);
}

/* Random arrival orders against a model: spans (trees of 3, some ids reused
 * in another trace) and their samples are cut into random batches and
 * delivered in a random interleaving, with the clock moving on between
 * deliveries but never past a window. Every sample must link to its own
 * span, every span's totals must match the model. */
static uint64_t rnd_state = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n)
{
    return (uint32_t)(xorshift64(&rnd_state) % n);
}

static void test_random_arrival_orders(void)
{
    enum { SPANS = 300, ROUNDS = 20 };
    for (int round = 0; round < ROUNDS; round++) {
        fixture f;
        pl_correlation_config cfg = test_config();
        cfg.window = S(3600);
        cfg.early_release = round % 2 == 1;
        REQUIRE(fx_init(&f, &cfg) == 0);
        uint64_t t0 = BASE - S(100);
        span_spec sp[SPANS];
        int64_t want_cpu[SPANS], want_total[SPANS];
        sample_spec ss[SPANS * 3];
        int n_samples = 0;
        for (int i = 0; i < SPANS; i++) {
            int tree = i / 3, level = i % 3;
            /* Every tenth tree reuses the ids of the previous one, in its own trace. */
            uint64_t base_id = 0x1000 + (uint64_t)(tree % 10 == 9 ? tree - 1 : tree) * 3;
            sp[i] = (span_spec){(uint8_t)(1 + tree % 250),
                                base_id + (uint64_t)level,
                                level ? base_id + (uint64_t)level - 1 : 0,
                                t0 + S(level),
                                t0 + S(10 - level),
                                "op",
                                NULL};
            want_cpu[i] = 0;
            int k = (int)rnd(4);
            for (int j = 0; j < k; j++) {
                int64_t v = 1 + (int64_t)rnd(100);
                ss[n_samples++] =
                    (sample_spec){sp[i].id, sp[i].trace, BY_LINK, t0 + S(5), v, (int)rnd(3)};
                want_cpu[i] += v;
            }
        }
        for (int i = SPANS - 1; i >= 0; i--) {
            want_total[i] = want_cpu[i];
            if (i % 3 != 2)
                want_total[i] += want_total[i + 1];
        }
        /* Cut both sides into batches, then interleave at random. */
        typedef struct piece {
            bool traces;
            int from, n;
        } piece;
        piece pieces[SPANS * 4];
        int n_pieces = 0;
        for (int i = 0; i < SPANS;) {
            int n = 1 + (int)rnd(40);
            n = i + n > SPANS ? SPANS - i : n;
            pieces[n_pieces++] = (piece){true, i, n};
            i += n;
        }
        for (int i = 0; i < n_samples;) {
            int n = 1 + (int)rnd(60);
            n = i + n > n_samples ? n_samples - i : n;
            pieces[n_pieces++] = (piece){false, i, n};
            i += n;
        }
        for (int i = n_pieces - 1; i > 0; i--) {
            int j = (int)rnd((uint32_t)i + 1);
            piece tmp = pieces[i];
            pieces[i] = pieces[j];
            pieces[j] = tmp;
        }
        for (int i = 0; i < n_pieces; i++) {
            if (pieces[i].traces)
                deliver(&f, mk_traces("svc", sp + pieces[i].from, pieces[i].n));
            else
                deliver(&f, mk_profiles("svc", t0, S(20), ss + pieces[i].from, pieces[i].n));
            advance(&f, S(rnd(5)));
        }
        pl_correlation_counters c = counters(&f);
        CHECK_EQ_UINT(c.linked_samples, (uint64_t)n_samples);
        pl_processor_correlation.shutdown(f.self);
        for (int i = 0; i < SPANS; i++) {
            pl_span *s = find_span_in(&f.traces, sp[i].id, sp[i].trace);
            REQUIRE(s);
            CHECK_EQ_INT(span_int(s, "profile.cpu_time_ns"), want_cpu[i] ? want_cpu[i] : -1);
            CHECK_EQ_INT(span_int(s, "profile.cpu_time_total_ns"),
                         want_total[i] ? want_total[i] : -1);
        }
        /* Every sample carries its own span's trace in its link. */
        for (int b = 0; b < f.profiles.n; b++) {
            pl_profile *p = &f.profiles.b[b]->data.profiles.resources[0].scopes[0].profiles[0];
            pl_dictionary *d = &f.profiles.b[b]->data.profiles.dict;
            for (uint32_t k = 0; k < p->n_samples; k++) {
                char buf[256];
                CHECK(sample_attr(f.profiles.b[b], k, "span_name", buf, NULL) != NULL);
                CHECK(d->links[p->samples[k].link_index].trace_id_len == 16);
            }
        }
        c = counters(&f);
        CHECK_EQ_UINT(c.unlinked_samples, 0);
        CHECK_EQ_UINT(c.linked_spans + c.unlinked_spans, SPANS);
        fx_done(&f);
    }
}

int main(void)
{
    PL_RUN(test_span_first_then_samples);
    PL_RUN(test_labels_of_spans_sharing_some);
    PL_RUN(test_link_completed_only_for_its_samples);
    PL_RUN(test_samples_first_then_span);
    PL_RUN(test_interleaved_many_batches);
    PL_RUN(test_partner_never_comes);
    PL_RUN(test_partner_after_window);
    PL_RUN(test_spans_unindexed_until_profiles_come);
    PL_RUN(test_skew_edges);
    PL_RUN(test_duplicate_span_ids_in_different_traces);
    PL_RUN(test_ancestors_rolled_up);
    PL_RUN(test_local_root_only_samples);
    PL_RUN(test_cpu_from_count_and_period);
    PL_RUN(test_configured_names_and_top_n);
    PL_RUN(test_max_spans_releases_oldest);
    PL_RUN(test_max_pending_samples_releases_oldest);
    PL_RUN(test_max_bytes_releases_oldest);
    PL_RUN(test_memory_pressure_releases_everything);
    PL_RUN(test_early_release_on_coverage);
    PL_RUN(test_shutdown_flushes_everything);
    PL_RUN(test_counters_exported);
    PL_RUN(test_one_signal_passes_through);
    PL_RUN(test_many_spans_and_samples);
    PL_RUN(test_random_arrival_orders);
    return pl_test_done();
}
