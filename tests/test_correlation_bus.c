/*
 * test_correlation_bus.c: samples read from a bus wait for the spans of
 * their partition while those lag (processors/correlation_bus.c): the
 * receiver's PL_META_BUS_PARTITION / PL_META_BUS_SPANS_LAG metadata holds a
 * sample batch beyond sample_window, a later batch of the same partition
 * saying its spans caught up lets it go, and bus_lag_wait and
 * bus_lag_max_bytes bound the hold. Driven with the injected clock.
 */
#include "correlation_fixture.h"

/* Tags b as read from bus partition `part` with `lag` span records of that
 * partition still to come ("unknown", "0", "12"). */
static pl_batch *on_bus(pl_batch *b, const char *part, const char *lag)
{
    pl_kv *items = pl_batch_alloc(b, 3 * sizeof(pl_kv));
    items[0].key = PL_BYTES_LIT("kafka.topic");
    items[0].value = pl_value_string(PL_BYTES_LIT("otlp_x"));
    items[1].key = PL_BYTES_LIT(PL_META_BUS_PARTITION);
    items[1].value = pl_value_string(pl_batch_bytes(b, part, strlen(part)));
    items[2].key = PL_BYTES_LIT(PL_META_BUS_SPANS_LAG);
    items[2].value = pl_value_string(pl_batch_bytes(b, lag, strlen(lag)));
    b->metadata.items = items;
    b->metadata.n = 3;
    return b;
}

static pl_batch *one_sample(uint64_t span, uint64_t t0)
{
    sample_spec ss[] = {{span, 1, BY_LINK, t0 + S(1), 1000000, 2}};
    return mk_profiles("api", t0, S(10), ss, 1);
}

static pl_batch *one_span(uint64_t span, uint64_t t0, const char *name)
{
    span_spec sp[] = {{1, span, 0, t0, t0 + S(2), name, NULL}};
    return mk_traces("api", sp, 1);
}

/* The spans of the samples' partition lag: the samples wait past their
 * window, other partitions' progress does not let them go, and the span
 * that comes at last (its partition still lagging) links them. */
static void test_samples_wait_while_their_partitions_spans_lag(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(10);
    deliver(&f, on_bus(one_sample(0xA1, t0), "kafka/0", "40"));
    CHECK_EQ_UINT(counters(&f).bus_lag_held_samples, 1);
    advance(&f, S(31)); /* past sample_window (30 s) */
    CHECK_EQ_INT(f.profiles.n, 0);
    deliver(&f, on_bus(one_span(0xB2, t0, "other"), "kafka/1", "0")); /* another partition */
    advance(&f, S(60));
    CHECK_EQ_INT(f.profiles.n, 0);
    deliver(&f, on_bus(one_span(0xA1, t0, "GET /a"), "kafka/0", "12"));
    REQUIRE(f.profiles.n == 1);
    char buf[256];
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "span_name", buf, NULL), "GET /a");
    pl_correlation_counters c = counters(&f);
    CHECK_EQ_UINT(c.linked_samples, 1);
    CHECK_EQ_UINT(c.unlinked_samples, 0);
    CHECK_EQ_UINT(c.bus_lag_caught_up_samples, 1);
    CHECK_EQ_UINT(c.bus_lag_bound_samples, 0);
    CHECK_EQ_UINT(*pl_stats_gauge(f.stats, "bus_lag_held_bytes", ""), 0);
    fx_done(&f);
}

/* The partition catches up without bringing the span (it was never
 * written, or went elsewhere): the samples go back to their window, which
 * has passed, and leave at once, unlinked. A batch still inside its window
 * stays for the rest of it. */
static void test_caught_up_partition_lets_its_samples_go(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(10);
    deliver(&f, on_bus(one_sample(0xC1, t0), "kafka/3", "unknown")); /* before any fetch */
    advance(&f, S(20));
    deliver(&f, on_bus(one_sample(0xC2, t0), "kafka/3", "7"));
    advance(&f, S(20)); /* the first is 40 s old, the second 20 s */
    CHECK_EQ_INT(f.profiles.n, 0);
    CHECK_EQ_UINT(counters(&f).bus_lag_held_samples, 2);
    /* caught up, as a profiles batch of the partition says (its own
     * sample links at once: not held) */
    span_spec sp[] = {{1, 0xC3, 0, t0, t0 + S(2), "x", NULL}};
    deliver(&f, mk_traces("api", sp, 1));
    deliver(&f, on_bus(one_sample(0xC3, t0), "kafka/3", "0"));
    REQUIRE(f.profiles.n == 2); /* the linked one, and the first held one */
    char buf[256];
    CHECK_EQ_STR(sample_attr(f.profiles.b[0], 0, "span_name", buf, NULL), "x");
    CHECK(sample_attr(f.profiles.b[1], 0, "span_name", buf, NULL) == NULL);
    pl_correlation_counters c = counters(&f);
    CHECK_EQ_UINT(c.bus_lag_caught_up_samples, 2);
    CHECK_EQ_UINT(c.unlinked_samples, 1);
    advance(&f, S(9));
    CHECK_EQ_INT(f.profiles.n, 2);
    advance(&f, S(1)); /* the second one's window ends */
    CHECK_EQ_INT(f.profiles.n, 3);
    CHECK_EQ_UINT(counters(&f).unlinked_samples, 2);
    fx_done(&f);
}

/* Partitions are kept apart: one catching up lets its own samples go, and
 * only those, wherever they sit among the held batches. */
static void test_partitions_catch_up_on_their_own(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(10);
    deliver(&f, on_bus(one_sample(0x11, t0), "kafka/0", "3"));
    deliver(&f, on_bus(one_sample(0x12, t0), "kafka/1", "3"));
    deliver(&f, one_sample(0x13, t0)); /* no bus: its window alone */
    deliver(&f, on_bus(one_sample(0x14, t0), "kafka/0", "3"));
    deliver(&f, on_bus(one_sample(0x15, t0), "nats/1", "3")); /* another receiver */
    advance(&f, S(31));
    CHECK_EQ_INT(f.profiles.n, 1);
    deliver(&f, on_bus(one_span(0x99, t0, "x"), "kafka/1", "0"));
    CHECK_EQ_INT(f.profiles.n, 2); /* 0x12 */
    CHECK_EQ_UINT(counters(&f).bus_lag_caught_up_samples, 1);
    deliver(&f, on_bus(one_sample(0x16, t0), "kafka/0", "0")); /* waits its window */
    CHECK_EQ_INT(f.profiles.n, 4);                             /* 0x11 and 0x14 */
    CHECK_EQ_UINT(counters(&f).bus_lag_caught_up_samples, 3);
    CHECK_EQ_UINT(counters(&f).bus_lag_held_samples, 4);
    CHECK_EQ_UINT(*pl_stats_gauge(f.stats, "bus_lag_held_bytes", "") > 0, 1); /* nats/1 */
    fx_done(&f);
}

/* bus_lag_wait bounds the hold; samples of a partition whose spans are
 * caught up, or without bus metadata, wait sample_window only. */
static void test_hold_ends_at_bus_lag_wait(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    cfg.bus_lag_wait = S(120);
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(10);
    deliver(&f, on_bus(one_sample(0xD1, t0), "kafka/0", "5"));
    deliver(&f, on_bus(one_sample(0xD2, t0), "kafka/0", "5"));
    deliver(&f, on_bus(one_sample(0xD3, t0), "kafka/1", "0"));
    deliver(&f, one_sample(0xD4, t0));
    advance(&f, S(30));
    CHECK_EQ_INT(f.profiles.n, 2); /* D3 and D4 */
    CHECK_EQ_UINT(counters(&f).bus_lag_held_samples, 2);
    advance(&f, S(89));
    CHECK_EQ_INT(f.profiles.n, 2);
    advance(&f, S(1));
    CHECK_EQ_INT(f.profiles.n, 4);
    pl_correlation_counters c = counters(&f);
    CHECK_EQ_UINT(c.bus_lag_bound_samples, 2);
    CHECK_EQ_UINT(c.bus_lag_caught_up_samples, 0);
    CHECK_EQ_UINT(c.unlinked_samples, 4);
    fx_done(&f);
}

/* bus_lag_max_bytes: a batch that does not fit is not held longer (and
 * counted); once room is made, the next one is. bus_lag_wait 0 turns the
 * hold off. */
static void test_bytes_bound_and_off_switch(void)
{
    fixture f;
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&f, &cfg) == 0);
    uint64_t t0 = BASE - S(10);
    pl_correlation_usage u;
    deliver(&f, on_bus(one_sample(0xE1, t0), "kafka/0", "5"));
    pl_correlation_get_usage(f.self, &u);
    int64_t one = *pl_stats_gauge(f.stats, "bus_lag_held_bytes", "");
    CHECK(one > 0);
    CHECK_EQ_UINT((uint64_t)one, u.held_sample_bytes);
    fx_done(&f);

    cfg.bus_lag_max_bytes = (uint64_t)one + (uint64_t)one / 2; /* room for one */
    REQUIRE(fx_init(&f, &cfg) == 0);
    deliver(&f, on_bus(one_sample(0xE1, t0), "kafka/0", "5"));
    deliver(&f, on_bus(one_sample(0xE2, t0), "kafka/0", "5"));
    pl_correlation_counters c = counters(&f);
    CHECK_EQ_UINT(c.bus_lag_held_samples, 1);
    CHECK_EQ_UINT(c.bus_lag_bound_samples, 1);
    advance(&f, S(30));
    CHECK_EQ_INT(f.profiles.n, 1); /* E2 at its window, E1 held */
    deliver(&f, on_bus(one_span(0xE1, t0, "e1"), "kafka/0", "0"));
    CHECK_EQ_INT(f.profiles.n, 2);
    CHECK_EQ_UINT(counters(&f).linked_samples, 1);
    deliver(&f, on_bus(one_sample(0xE3, t0), "kafka/0", "5"));
    CHECK_EQ_UINT(counters(&f).bus_lag_held_samples, 2); /* room again */
    fx_done(&f);

    cfg.bus_lag_wait = 0;
    REQUIRE(fx_init(&f, &cfg) == 0);
    deliver(&f, on_bus(one_sample(0xF1, t0), "kafka/0", "unknown"));
    advance(&f, S(30));
    CHECK_EQ_INT(f.profiles.n, 1);
    CHECK_EQ_UINT(counters(&f).bus_lag_held_samples, 0);
    fx_done(&f);
}

int main(void)
{
    PL_RUN(test_samples_wait_while_their_partitions_spans_lag);
    PL_RUN(test_caught_up_partition_lets_its_samples_go);
    PL_RUN(test_partitions_catch_up_on_their_own);
    PL_RUN(test_hold_ends_at_bus_lag_wait);
    PL_RUN(test_bytes_bound_and_off_switch);
    return pl_test_done();
}
