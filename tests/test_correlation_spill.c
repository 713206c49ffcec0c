/*
 * test_correlation_spill.c: held span batches spilling to the `storage`
 * directory when held memory reaches max_bytes (injected clock): the spans
 * spill, samples arriving later still link to them and are enriched, the
 * spans read back carry their profile summary, nothing is lost (coverage,
 * shutdown, files left by a crash); without storage, or beyond
 * max_spill_bytes, the oldest batches leave early as before.
 */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "correlation_fixture.h"

#define N_BATCHES 6

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/pl-spill-XXXXXX");
    if (!mkdtemp(dir))
        abort();
}

/* Spill files in dir; *mode_ok false when one is not 0600. */
static int count_files(bool *mode_ok)
{
    int n = 0;
    if (mode_ok)
        *mode_ok = true;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        n++;
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        struct stat st;
        if (mode_ok && (stat(p, &st) != 0 || (st.st_mode & 0777) != 0600))
            *mode_ok = false;
    }
    closedir(d);
    return n;
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char p[512];
            snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* correlation-<token>-<seq>.spill -> correlation-00000000000000ff-<seq>.spill */
static void rename_to_other_process(void)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    char names[64][256];
    int n = 0;
    while ((de = readdir(d)) && n < 64)
        if (de->d_name[0] != '.')
            snprintf(names[n++], sizeof(names[0]), "%s", de->d_name);
    closedir(d);
    for (int i = 0; i < n; i++) {
        const char *seq = names[i] + strlen("correlation-") + 17;
        char from[512], to[512];
        snprintf(from, sizeof(from), "%.60s/%.255s", dir, names[i]);
        snprintf(to, sizeof(to), "%.60s/correlation-00000000000000ff-%.100s", dir, seq);
        if (rename(from, to) != 0)
            abort();
    }
}

/* Batch k: a root span (http.route) and its child, trace 20 + k. */
static pl_batch *mk_batch(int k)
{
    uint64_t t0 = BASE + S(k);
    span_spec sp[] = {
        {(uint8_t)(20 + k), 0x100u + (uint64_t)k * 2, 0, t0, t0 + S(1), "GET /r", "/r"},
        {(uint8_t)(20 + k), 0x101u + (uint64_t)k * 2, 0x100u + (uint64_t)k * 2, t0 + S(1) / 4,
         t0 + S(1) / 2, "SELECT", NULL}};
    return mk_traces("api", sp, 2);
}

/* max_bytes leaving room for the index and about one and a half batches
 * (held as hold_compression says). */
static uint64_t small_max_bytes_with(const char *hold_compression)
{
    fixture f;
    pl_correlation_config cfg;
    fx_defaults(&cfg);
    cfg.hold_compression = (char *)hold_compression;
    if (fx_init(&f, &cfg) != 0)
        abort();
    sample_spec none[] = {{0, 0, NO_SPAN, 0, 1, 0}};
    deliver(&f, mk_profiles("other", BASE, S(10), none, 1)); /* profiles are flowing */
    deliver(&f, mk_batch(0));
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    uint64_t m = u.index_bytes + u.held_bytes * 3 / 2;
    fx_done(&f);
    return m;
}

static uint64_t small_max_bytes(void)
{
    return small_max_bytes_with(getenv("PL_TEST_HOLD_COMPRESSION"));
}

static pl_correlation_config spill_config(uint64_t max_bytes, bool storage)
{
    pl_correlation_config cfg;
    fx_defaults(&cfg);
    static char *attrs[] = {"http.route"};
    cfg.span_attributes = (pl_strlist){attrs, 1};
    cfg.max_bytes = max_bytes;
    cfg.storage = storage ? dir : NULL;
    return cfg;
}

static void fill(fixture *f)
{
    sample_spec none[] = {{0, 0, NO_SPAN, 0, 1, 0}};
    deliver(f, mk_profiles("other", BASE, S(10), none, 1));
    for (int k = 0; k < N_BATCHES; k++) {
        fake_now = BASE + S(k) + S(2);
        deliver(f, mk_batch(k));
    }
}

static void check_all_spans_once(fixture *f)
{
    int n = 0;
    for (int i = 0; i < f->traces.n; i++)
        n += (int)pl_batch_items(f->traces.b[i]);
    CHECK_EQ_INT(n, N_BATCHES * 2);
    for (int k = 0; k < N_BATCHES; k++) {
        CHECK(find_span_in(&f->traces, 0x100u + (uint64_t)k * 2, (uint8_t)(20 + k)) != NULL);
        CHECK(find_span_in(&f->traces, 0x101u + (uint64_t)k * 2, (uint8_t)(20 + k)) != NULL);
    }
}

/* After the read-back of the held batches: every span went on once, and
 * the one waiting sample (the second profile batch) linked to child span
 * 0x101 "SELECT" of root "GET /r", on both sides. */
static void check_child_linked_on_read_back(fixture *f)
{
    check_all_spans_once(f);
    REQUIRE(f->profiles.n == 2);
    char buf[256], want[64];
    CHECK_EQ_STR(sample_attr(f->profiles.b[1], 0, "span_name", buf, NULL), "SELECT");
    CHECK_EQ_STR(sample_attr(f->profiles.b[1], 0, "root_span_name", buf, NULL), "GET /r");
    pl_span *child = find_span_in(&f->traces, 0x101, 20);
    CHECK_EQ_STR(span_str(child, "pyroscope.profile.id", buf), hex_id(0x101, want));
    pl_correlation_counters c = counters(f);
    CHECK_EQ_UINT(c.linked_samples, 1);
    CHECK_EQ_UINT(c.unlinked_samples, 0);
}

/* Spans spill; the upload that comes later links to them, its samples carry
 * the spans' context, and the spans leave (read back) with their summary. */
static void test_spilled_spans_link_and_leave_enriched(void)
{
    make_dir();
    fixture f;
    pl_correlation_config cfg = spill_config(small_max_bytes(), true);
    REQUIRE(fx_init(&f, &cfg) == 0);
    fill(&f);
    pl_correlation_counters c = counters(&f);
    CHECK(c.spilled_batches >= N_BATCHES - 2);
    CHECK(c.spilled_bytes > 0);
    CHECK_EQ_UINT(c.spill_failures, 0);
    CHECK_EQ_UINT(c.released_early_spans, 0);
    CHECK_EQ_INT(f.traces.n, 0); /* nothing left: all held, in memory or on disk */
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.held_spans, N_BATCHES * 2);
    CHECK_EQ_UINT(u.spilled_spans, c.spilled_batches * 2);
    CHECK(u.spill_bytes > 0);
    CHECK(u.held_bytes + u.index_bytes <= cfg.max_bytes);
    bool mode_ok;
    CHECK_EQ_INT(count_files(&mode_ok), (int)c.spilled_batches);
    CHECK(mode_ok);

    /* The service's upload: one CPU sample per span (by link with a time
     * inside the span, or by label). */
    fake_now = BASE + S(12);
    sample_spec ss[N_BATCHES * 2];
    for (int k = 0; k < N_BATCHES; k++) {
        uint64_t t0 = BASE + S(k);
        ss[2 * k] = (sample_spec){0x100u + (uint64_t)k * 2, 0, BY_SPAN_LABEL, 0, 3000000, 1};
        ss[2 * k + 1] =
            (sample_spec){0x101u + (uint64_t)k * 2, 0, BY_LINK, t0 + S(1) / 3, 7000000, 2};
    }
    deliver(&f, mk_profiles("api", BASE + S(10), S(10), ss, N_BATCHES * 2));
    c = counters(&f);
    CHECK_EQ_UINT(c.linked_samples, N_BATCHES * 2);
    CHECK_EQ_UINT(c.late_samples, 0);
    CHECK_EQ_UINT(c.unlinked_samples, 0);
    REQUIRE(f.profiles.n >= 2);
    pl_batch *pb = f.profiles.b[f.profiles.n - 1];
    char buf[256], want[64];
    for (int k = 0; k < N_BATCHES; k++) {
        CHECK_EQ_STR(sample_attr(pb, (uint32_t)(2 * k), "span_name", buf, NULL), "GET /r");
        CHECK_EQ_STR(sample_attr(pb, (uint32_t)(2 * k + 1), "span_name", buf, NULL), "SELECT");
        CHECK_EQ_STR(sample_attr(pb, (uint32_t)(2 * k + 1), "root_span_name", buf, NULL), "GET /r");
        CHECK_EQ_STR(sample_attr(pb, (uint32_t)(2 * k + 1), "http.route", buf, NULL), "/r");
        CHECK_EQ_STR(sample_attr(pb, (uint32_t)(2 * k + 1), "service.name", buf, NULL), "api");
        CHECK_EQ_STR(link_hex(pb, (uint32_t)(2 * k + 1), true, buf),
                     hex_trace((uint8_t)(20 + k), want));
    }
    /* The upload covers the spans: every batch leaves, spilled ones read
     * back and enriched exactly like those held in memory. */
    check_all_spans_once(&f);
    c = counters(&f);
    CHECK_EQ_UINT(c.linked_spans, N_BATCHES * 2);
    CHECK_EQ_UINT(c.spans_released_on_coverage, N_BATCHES * 2);
    for (int k = 0; k < N_BATCHES; k++) {
        pl_span *root = find_span_in(&f.traces, 0x100u + (uint64_t)k * 2, (uint8_t)(20 + k));
        pl_span *child = find_span_in(&f.traces, 0x101u + (uint64_t)k * 2, (uint8_t)(20 + k));
        CHECK_EQ_STR(span_str(child, "pyroscope.profile.id", buf),
                     hex_id(0x101u + (uint64_t)k * 2, want));
        CHECK_EQ_STR(span_str(root, "pyroscope.profile.id", buf),
                     hex_id(0x100u + (uint64_t)k * 2, want));
        CHECK_EQ_INT(span_int(child, "profile.cpu_time_ns"), 7000000);
        CHECK_EQ_INT(span_int(child, "profile.samples"), 1);
        CHECK_EQ_INT(span_int(root, "profile.cpu_time_ns"), 3000000);
        /* The child's time reached its parent through the spilled index. */
        CHECK_EQ_INT(span_int(root, "profile.cpu_time_total_ns"), 10000000);
        CHECK_EQ_INT(span_int(child, "profile.cpu_time_total_ns"), 7000000);
        CHECK_EQ_STR(span_str(root, "http.route", buf), "/r"); /* the span's own attributes */
    }
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.held_spans, 0);
    CHECK_EQ_UINT(u.spilled_spans, 0);
    CHECK_EQ_UINT(u.spill_bytes, 0);
    CHECK_EQ_INT(count_files(NULL), 0); /* deleted once handed on */
    fx_done(&f);
    remove_dir();
}

/* A sample whose spilled span's summary has gone (late_window shorter than
 * the hold) waits, and links when the batch is read back. */
static void test_sample_waits_for_read_back(void)
{
    make_dir();
    fixture f;
    /* Room for the waiting profiles batch (else it leaves early: a bound). */
    /* Sized for decoded batches (the room of the waiting profiles batch):
     * test_packed_sample_waits_for_read_back is the packed case. */
    pl_correlation_config cfg = spill_config(small_max_bytes_with("none") + 12288, true);
    cfg.hold_compression = "none";
    cfg.late_window = S(5);
    REQUIRE(fx_init(&f, &cfg) == 0);
    fill(&f);
    REQUIRE(counters(&f).spilled_batches >= 1);
    advance(&f, S(20)); /* the spilled spans' summaries expire, the spans stay held */
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.late_spans, 0);
    CHECK_EQ_INT(f.traces.n, 0);
    /* Batch 0 is spilled: its child's sample, in a profile that covers
     * nothing yet (another service's). */
    sample_spec ss[] = {{0x101, 0, BY_LINK, BASE + S(1) / 3, 7000000, 2}};
    deliver(&f, mk_profiles("api-other", BASE + S(1), S(1), ss, 1));
    CHECK_EQ_INT(f.profiles.n, 1); /* only the first "other" profile went on */
    /* Past the sample window: it still waits, its span is on disk. */
    advance(&f, S(40));
    CHECK_EQ_INT(f.profiles.n, 1);
    /* The span batches' hold ends: read back, the sample links. */
    advance(&f, S(200));
    check_child_linked_on_read_back(&f);
    CHECK_EQ_INT(count_files(NULL), 0);
    fx_done(&f);
    remove_dir();
}

/* A span on disk and a span held in memory (decoded, or packed with zstd)
 * share a span id (another trace): a sample without a trace id links to the
 * held one under both settings, as it would with neither spilled, and a
 * sample of the spilled one's trace to it (its summary found though the id
 * is no longer its own alone). */
static void test_span_id_shared_with_spilled_span(void)
{
    static const char *modes[] = {"none", "zstd"};
    for (int m = 0; m < 2; m++) {
        make_dir();
        fixture f;
        pl_correlation_config cfg = spill_config(small_max_bytes_with(modes[m]), true);
        cfg.hold_compression = (char *)modes[m]; /* none: the newest batch stays decoded */
        REQUIRE(fx_init(&f, &cfg) == 0);
        fill(&f);
        REQUIRE(counters(&f).spilled_batches >= 1);
        /* Batch 0 is on disk; its child 0x101 (trace 20) gets a namesake. */
        fake_now = BASE + S(N_BATCHES) + S(2);
        uint64_t t0 = BASE;
        span_spec twin[] = {{99, 0x101, 0, t0, t0 + S(1), "twin", NULL}};
        deliver(&f, mk_traces("api", twin, 1));
        pl_correlation_usage u;
        pl_correlation_get_usage(f.self, &u);
        CHECK(u.spilled_spans >= 2);
        sample_spec ss[] = {{0x101, 0, BY_LINK, t0 + S(1) / 3, 5, 0},
                            {0x101, 20, BY_LINK, t0 + S(1) / 3, 7, 0}};
        deliver(&f, mk_profiles("api", t0, S(10), ss, 2));
        CHECK_EQ_UINT(counters(&f).linked_samples, 2);
        pl_processor_correlation.shutdown(f.self);
        REQUIRE(f.profiles.n >= 2);
        pl_batch *pb = f.profiles.b[f.profiles.n - 1];
        char buf[256], want[64];
        CHECK_EQ_STR(sample_attr(pb, 0, "span_name", buf, NULL), "twin");
        CHECK_EQ_STR(link_hex(pb, 0, true, buf), hex_trace(99, want));
        CHECK_EQ_STR(sample_attr(pb, 1, "span_name", buf, NULL), "SELECT");
        CHECK_EQ_STR(sample_attr(pb, 1, "root_span_name", buf, NULL), "GET /r");
        CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0x101, 99), "profile.cpu_time_ns"), 5);
        CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0x101, 20), "profile.cpu_time_ns"), 7);
        CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0x100, 20), "profile.cpu_time_total_ns"), 7);
        fx_done(&f);
        remove_dir();
    }
}

/* Two spans held as hold_compression says (packed with zstd, decoded with
 * none) share a span id in different traces, and so do their parents: a
 * sample with the second span's trace id counts into that span alone, and
 * its totals into the parent in its trace, however they are held; a sample
 * without a trace id into the first of them in the index (as with both
 * decoded). */
static void test_span_id_shared_by_held_spans(void)
{
    fixture f;
    pl_correlation_config cfg = spill_config(256ull << 20, false);
    REQUIRE(fx_init(&f, &cfg) == 0);
    sample_spec none[] = {{0, 0, NO_SPAN, 0, 1, 0}};
    deliver(&f, mk_profiles("other", BASE, S(10), none, 1)); /* profiles flow: indexed, packed */
    uint64_t t0 = BASE;
    /* Their parents share an id too: totals go to the parent in the trace. */
    span_spec a[] = {{31, 0x4ff, 0, t0, t0 + S(2), "GET /a", "/a"},
                     {31, 0x500, 0x4ff, t0, t0 + S(1), "first", NULL}};
    span_spec b[] = {{32, 0x4ff, 0, t0, t0 + S(2), "GET /b", "/b"},
                     {32, 0x500, 0x4ff, t0, t0 + S(1), "second", NULL}};
    fake_now = BASE + S(1);
    deliver(&f, mk_traces("api", a, 2));
    deliver(&f, mk_traces("api", b, 2));
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.held_spans, 4);
    const char *hc = getenv("PL_TEST_HOLD_COMPRESSION");
    if (!hc || strcmp(hc, "none") != 0)
        CHECK_EQ_UINT(u.packed_spans, 4);
    sample_spec ss[] = {{0x500, 32, BY_LINK, t0 + S(1) / 3, 7000000, 2},
                        {0x500, 32, BY_LINK, t0 + S(1) / 2, 5000000, 1}};
    deliver(&f, mk_profiles("api", t0, S(10), ss, 2));
    sample_spec tl[] = {{0x500, 0, BY_LINK, t0 + S(1) / 3, 3000000, 1}};
    deliver(&f, mk_profiles("api", t0, S(10), tl, 1));
    CHECK_EQ_UINT(counters(&f).linked_samples, 3);
    pl_processor_correlation.shutdown(f.self);
    REQUIRE(f.profiles.n >= 3);
    char buf[256], want[64];
    pl_batch *pb = f.profiles.b[f.profiles.n - 2];
    CHECK_EQ_STR(sample_attr(pb, 0, "span_name", buf, NULL), "second");
    CHECK_EQ_STR(sample_attr(pb, 1, "root_span_name", buf, NULL), "GET /b");
    CHECK_EQ_STR(sample_attr(pb, 1, "http.route", buf, NULL), "/b");
    CHECK_EQ_STR(link_hex(pb, 0, true, buf), hex_trace(32, want));
    pl_span *first = find_span_in(&f.traces, 0x500, 31);
    pl_span *second = find_span_in(&f.traces, 0x500, 32);
    REQUIRE(first && second);
    CHECK_EQ_STR(span_str(second, "pyroscope.profile.id", buf), hex_id(0x500, want));
    CHECK_EQ_INT(span_int(second, "profile.samples"), 2);
    CHECK_EQ_INT(span_int(second, "profile.cpu_time_ns"), 12000000);
    /* The trace-less sample: the first span in the index, whichever way held. */
    CHECK_EQ_STR(sample_attr(f.profiles.b[f.profiles.n - 1], 0, "span_name", buf, NULL), "first");
    CHECK_EQ_INT(span_int(first, "profile.samples"), 1);
    CHECK_EQ_INT(span_int(first, "profile.cpu_time_ns"), 3000000);
    CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0x4ff, 32), "profile.cpu_time_total_ns"),
                 12000000);
    CHECK_EQ_INT(span_int(find_span_in(&f.traces, 0x4ff, 31), "profile.cpu_time_total_ns"),
                 3000000);
    fx_done(&f);
}

/* Shutdown (and reload) read every spilled batch back and flush it. */
static void test_shutdown_flushes_spilled(void)
{
    make_dir();
    fixture f;
    pl_correlation_config cfg = spill_config(small_max_bytes(), true);
    REQUIRE(fx_init(&f, &cfg) == 0);
    fill(&f);
    CHECK(counters(&f).spilled_batches >= N_BATCHES - 2);
    CHECK_EQ_INT(f.traces.n, 0);
    pl_processor_correlation.shutdown(f.self);
    check_all_spans_once(&f);
    CHECK_EQ_INT(count_files(NULL), 0);
    fx_done(&f);
    remove_dir();
}

/* Files a crash left are passed on at the next start, not lost. */
static void test_crash_leftovers_replayed(void)
{
    make_dir();
    fixture f;
    /* Decoded: g0's batch, unindexed (no profiles), must fit max_bytes. */
    pl_correlation_config cfg = spill_config(small_max_bytes_with("none"), true);
    cfg.hold_compression = "none";
    REQUIRE(fx_init(&f, &cfg) == 0);
    fill(&f);
    uint64_t spilled = counters(&f).spilled_batches;
    CHECK(spilled >= N_BATCHES - 2);
    /* Gone without shutdown: the in-memory batches are lost, the files stay. */
    pl_processor_correlation.destroy(f.self);
    for (int i = 0; i < f.traces.n; i++)
        pl_batch_free(f.traces.b[i]);
    for (int i = 0; i < f.profiles.n; i++)
        pl_batch_free(f.profiles.b[i]);
    pl_stats_free(f.stats);
    CHECK_EQ_INT(count_files(NULL), (int)spilled);

    /* Another instance in this process (a reload's replacement) leaves the
     * files of a live one alone. */
    fixture g0;
    REQUIRE(fx_init(&g0, &cfg) == 0);
    deliver(&g0, mk_batch(N_BATCHES));
    CHECK_EQ_INT(g0.traces.n, 0);
    fx_done(&g0);
    CHECK_EQ_INT(g0.traces.n, 1); /* its own batch, flushed */
    CHECK_EQ_INT(count_files(NULL), (int)spilled);

    /* As if written by an earlier process: another token in the name. */
    rename_to_other_process();
    fixture g;
    REQUIRE(fx_init(&g, &cfg) == 0);
    deliver(&g, mk_batch(N_BATCHES)); /* the first traces batch brings the next consumer */
    int n = 0;
    for (int i = 0; i < g.traces.n; i++)
        n += (int)pl_batch_items(g.traces.b[i]);
    CHECK_EQ_INT(n, (int)spilled * 2);
    CHECK(find_span_in(&g.traces, 0x100u, 20) != NULL); /* the oldest spilled first */
    CHECK_EQ_INT(count_files(NULL), 0);
    fx_done(&g);
    remove_dir();
}

/* Without storage, or beyond max_spill_bytes, the oldest leave early. */
static void test_without_storage_early_release(void)
{
    make_dir();
    for (int mode = 0; mode < 2; mode++) {
        fixture f;
        pl_correlation_config cfg = spill_config(small_max_bytes(), mode == 1);
        cfg.max_spill_bytes = 1; /* mode 1: no room on disk */
        REQUIRE(fx_init(&f, &cfg) == 0);
        fill(&f);
        pl_correlation_counters c = counters(&f);
        CHECK_EQ_UINT(c.spilled_batches, 0);
        CHECK(c.released_early_spans >= (N_BATCHES - 2) * 2);
        CHECK(f.traces.n >= N_BATCHES - 2);
        CHECK_EQ_INT(count_files(NULL), 0);
        pl_processor_correlation.shutdown(f.self);
        check_all_spans_once(&f);
        fx_done(&f);
    }
    remove_dir();
}

/* hold_compression zstd without storage: the held batches are packed in
 * memory; a sample whose packed span's summary has gone waits and links when
 * the batch is unpacked at the end of its hold, enriched as if held decoded. */
static void test_packed_sample_waits_for_read_back(void)
{
    fixture f;
    pl_correlation_config cfg = spill_config(256ull << 20, false);
    cfg.hold_compression = "zstd";
    cfg.late_window = S(5);
    REQUIRE(fx_init(&f, &cfg) == 0);
    fill(&f);
    pl_correlation_usage u;
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.packed_spans, N_BATCHES * 2);
    CHECK(u.packed_bytes > 0);
    CHECK_EQ_UINT(u.spilled_spans, 0);
    /* Packed: a compressed encoding plus 8 bytes a span, well under decoded. */
    CHECK(u.held_bytes - u.held_sample_bytes < (size_t)N_BATCHES * 2 * 200);
    advance(&f, S(20)); /* the packed spans' summaries expire, the spans stay held */
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.late_spans, 0);
    CHECK_EQ_INT(f.traces.n, 0);
    sample_spec ss[] = {{0x101, 0, BY_LINK, BASE + S(1) / 3, 7000000, 2}};
    deliver(&f, mk_profiles("api-other", BASE + S(1), S(1), ss, 1));
    CHECK_EQ_INT(f.profiles.n, 1);
    advance(&f, S(40));
    CHECK_EQ_INT(f.profiles.n, 1); /* still waits: its span is packed */
    advance(&f, S(200));
    check_child_linked_on_read_back(&f);
    CHECK_EQ_UINT(counters(&f).spilled_batches, 0);
    pl_correlation_get_usage(f.self, &u);
    CHECK_EQ_UINT(u.packed_spans, 0);
    CHECK_EQ_UINT(u.packed_bytes, 0);
    fx_done(&f);
}

/* Packed batches spill as they are: the files are zstd frames, read back at
 * shutdown and after a crash. */
static void test_packed_spill_files_compressed(void)
{
    make_dir();
    fixture f;
    pl_correlation_config cfg = spill_config(small_max_bytes_with("zstd"), true);
    cfg.hold_compression = "zstd";
    REQUIRE(fx_init(&f, &cfg) == 0);
    fill(&f);
    uint64_t spilled = counters(&f).spilled_batches;
    CHECK(spilled >= 1);
    DIR *d = opendir(dir);
    REQUIRE(d != NULL);
    struct dirent *de;
    int zstd_files = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p[512];
        snprintf(p, sizeof(p), "%.60s/%.255s", dir, de->d_name);
        FILE *fp = fopen(p, "rb");
        unsigned char m[4] = {0};
        if (fp) {
            zstd_files += fread(m, 1, 4, fp) == 4 && m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f &&
                          m[3] == 0xfd;
            fclose(fp);
        }
    }
    closedir(d);
    CHECK_EQ_INT(zstd_files, (int)spilled);
    /* A crash: the files are passed on by the next start. */
    pl_processor_correlation.destroy(f.self);
    for (int i = 0; i < f.traces.n; i++)
        pl_batch_free(f.traces.b[i]);
    for (int i = 0; i < f.profiles.n; i++)
        pl_batch_free(f.profiles.b[i]);
    pl_stats_free(f.stats);
    rename_to_other_process();
    fixture g;
    REQUIRE(fx_init(&g, &cfg) == 0);
    deliver(&g, mk_batch(N_BATCHES));
    int n = 0;
    for (int i = 0; i < g.traces.n; i++)
        n += (int)pl_batch_items(g.traces.b[i]);
    /* g's own batch (unindexed: no profiles yet, so decoded) may go on too:
     * max_bytes was sized for packed batches. */
    if (find_span_in(&g.traces, 0x100u + N_BATCHES * 2, (uint8_t)(20 + N_BATCHES)))
        n -= 2;
    CHECK_EQ_INT(n, (int)spilled * 2);
    CHECK(find_span_in(&g.traces, 0x100u, 20) != NULL);
    CHECK_EQ_INT(count_files(NULL), 0);
    CHECK_EQ_UINT(counters(&g).spill_failures, 0);
    fx_done(&g);
    remove_dir();
}

/* storage must be a directory it can write. */
static void test_storage_validated(void)
{
    char path[] = "/tmp/pl-spill-file-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    pl_correlation_config cfg;
    fx_defaults(&cfg);
    cfg.storage = path;
    void *self = NULL;
    pl_err err;
    pl_create_settings st;
    memset(&st, 0, sizeof(st));
    st.id = "correlation";
    CHECK(pl_processor_correlation.create(&st, &cfg, &self, &err) != PL_OK);
    CHECK(strstr(err.msg, "not a writable directory") != NULL);
    unlink(path);
    /* A directory that does not exist yet is created. */
    char sub[128];
    make_dir();
    snprintf(sub, sizeof(sub), "%s/a/b", dir);
    cfg.storage = sub;
    REQUIRE(pl_processor_correlation.create(&st, &cfg, &self, &err) == PL_OK);
    struct stat sb;
    CHECK(stat(sub, &sb) == 0 && S_ISDIR(sb.st_mode));
    pl_processor_correlation.shutdown(self);
    pl_processor_correlation.destroy(self);
    rmdir(sub);
    snprintf(sub, sizeof(sub), "%s/a", dir);
    rmdir(sub);
    remove_dir();
}

int main(void)
{
    PL_RUN(test_spilled_spans_link_and_leave_enriched);
    PL_RUN(test_sample_waits_for_read_back);
    PL_RUN(test_span_id_shared_with_spilled_span);
    PL_RUN(test_span_id_shared_by_held_spans);
    PL_RUN(test_shutdown_flushes_spilled);
    PL_RUN(test_crash_leftovers_replayed);
    PL_RUN(test_without_storage_early_release);
    PL_RUN(test_storage_validated);
    PL_RUN(test_packed_sample_waits_for_read_back);
    PL_RUN(test_packed_spill_files_compressed);
    return pl_test_done();
}
