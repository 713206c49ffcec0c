/*
 * test_sqlite_store.c: the embedded store and the `sqlite` exporter.
 *
 * Store tests write hand-built batches (core/model.h) and read them back
 * with the query functions: span trees, CPU per span and per trace, folded
 * stacks, top functions, in either arrival order. Retention by age and by
 * size, a reader querying while a writer commits, reopening a database from
 * a previous run, and broken stores (corrupt file, foreign database, locked
 * by another connection) through both the store and the exporter, which
 * must report a clear error, count the failure and keep serving.
 *
 * Each test works in its own directory under $TMPDIR.
 */
#include <glob.h>

#include "config/decode.h"
#include "sqlite_plans.h"
#include "store/store_internal.h" /* PL_SPAN_ROW */
#include "store/store_terms.h"    /* PL_BUCKET_OF */
#include "store_fixtures.h"
#include "traces_fixture.h"

extern const pl_component_type pl_exporter_sqlite;

static void check_shop_queries(pl_store *s)
{
    pl_err err = {{0}};
    pl_trace_list list;
    pl_trace_query tq = {0};
    REQUIRE(pl_store_query_traces(s, &tq, &list, &err) == PL_OK);
    REQUIRE(list.n == 1);
    CHECK_EQ_STR(list.items[0].root_name, "GET /users");
    CHECK_EQ_STR(list.items[0].root_service, "shop");
    CHECK_EQ_UINT(list.items[0].duration_ns, MS(100));
    CHECK_EQ_INT(list.items[0].cpu_ns, MS(60)); /* linked samples; not the unlinked gc */
    CHECK_EQ_UINT(list.items[0].span_count, 4);
    CHECK_EQ_UINT(list.items[0].error_count, 1);
    pl_trace_list_free(&list);

    uint8_t tid[16];
    make_trace_id(1, tid);
    pl_trace_detail d;
    pl_status tst = pl_store_query_trace(s, tid, 3, &d, &err);
    if (tst != PL_OK)
        fprintf(stderr, "  query trace: %s\n", err.msg);
    REQUIRE(tst == PL_OK);
    REQUIRE(d.n == 4);
    /* depth-first, children by start time */
    CHECK_EQ_STR(d.spans[0].name, "GET /users");
    CHECK_EQ_INT(d.spans[0].depth, 0);
    CHECK_EQ_STR(d.spans[1].name, "db.query");
    CHECK_EQ_INT(d.spans[1].depth, 1);
    CHECK_EQ_STR(d.spans[2].name, "decode");
    CHECK_EQ_INT(d.spans[2].depth, 2);
    CHECK_EQ_STR(d.spans[3].name, "render");
    CHECK_EQ_INT(d.spans[3].depth, 1);
    const pl_span_row *q = find_span(&d, "db.query");
    REQUIRE(q);
    CHECK_EQ_INT(q->cpu_ns, MS(30));
    REQUIRE(q->n_top == 2);
    CHECK_EQ_STR(q->top[0].name, "sql_exec");
    CHECK_EQ_INT(q->top[0].self, MS(20));
    CHECK_EQ_STR(q->top[1].name, "sql_parse");
    const pl_span_row *r = find_span(&d, "render");
    REQUIRE(r);
    CHECK_EQ_INT(r->cpu_ns, MS(10));
    CHECK_EQ_INT(r->status_code, 2);
    CHECK_EQ_STR(r->status_message, "boom");
    CHECK(strstr(r->attributes_json, "\"http.route\":\"/users/{id}\"") != NULL);
    CHECK_EQ_STR(r->resource_json, "{\"service.name\":\"shop\",\"host.name\":\"web-1\"}");
    char want_events[160];
    snprintf(want_events, sizeof(want_events),
             "[{\"name\":\"exception\",\"time_unix_nano\":\"%" PRIu64
             "\",\"attributes\":{\"exception.type\":\"TemplateError\"}}]",
             (uint64_t)(BASE + MS(90)));
    CHECK_EQ_STR(r->events_json, want_events);
    const pl_span_row *root = find_span(&d, "GET /users");
    REQUIRE(root);
    CHECK_EQ_INT(root->cpu_ns, -1); /* no samples of its own */
    CHECK_EQ_STR(root->events_json, "[]");
    CHECK_EQ_STR(root->service, "shop");
    pl_trace_detail_free(&d);

    /* flame graph of one span */
    pl_profile_query pq = {0};
    pq.scope = PL_PROFILE_SPAN;
    make_span_id(1, 1, pq.span_id);
    pl_profile_result pr;
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_STR(pr.type, "cpu");
    CHECK_EQ_STR(pr.unit, "nanoseconds");
    CHECK_EQ_INT(pr.total, MS(30));
    CHECK_EQ_UINT(pr.n_stacks, 2);
    CHECK_EQ_INT(folded_value(&pr, "main;handler;query;sql_exec"), MS(20));
    CHECK_EQ_INT(folded_value(&pr, "main;handler;query;sql_parse"), MS(10));
    pl_profile_result_free(&pr);

    /* one trace: the linked samples, not the unlinked gc */
    pq.scope = PL_PROFILE_TRACE;
    memcpy(pq.trace_id, tid, 16);
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_INT(pr.total, MS(60));
    CHECK_EQ_UINT(pr.n_stacks, 4);
    CHECK_EQ_INT(folded_value(&pr, "main;gc"), -1);
    pl_buf folded;
    pl_buf_init(&folded);
    pl_folded_text(&pr, &folded);
    pl_buf_append_byte(&folded, 0);
    CHECK_EQ_STR((const char *)folded.data, "main;handler;query;json_decode 20000000\n"
                                            "main;handler;query;sql_exec 20000000\n"
                                            "main;handler;query;sql_parse 10000000\n"
                                            "main;handler;render;template 10000000\n");
    pl_buf_free(&folded);
    pl_profile_result_free(&pr);

    /* the service over a time range: everything, gc included */
    pq.scope = PL_PROFILE_SERVICE;
    pq.service = "shop";
    pq.since_ns = BASE - S(60);
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_INT(pr.total, MS(65));
    CHECK_EQ_INT(folded_value(&pr, "main;gc"), MS(5));
    const pl_function_stat *h = find_fn(&pr, "handler");
    REQUIRE(h);
    CHECK_EQ_INT(h->self, 0);
    CHECK_EQ_INT(h->total, MS(60));
    const pl_function_stat *m = find_fn(&pr, "main");
    REQUIRE(m);
    CHECK_EQ_INT(m->total, MS(65));
    CHECK_EQ_STR(pr.functions[0].name, "json_decode"); /* ties by total, then name */
    CHECK_EQ_INT(pr.functions[0].self, MS(20));
    pl_profile_result_free(&pr);

    /* a range after the data: empty, not an error */
    pq.since_ns = BASE + S(3600);
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_UINT(pr.n_stacks, 0);
    CHECK_EQ_INT(pr.total, 0);
    pl_profile_result_free(&pr);

    /* unknown service: empty */
    pq.since_ns = 0;
    pq.service = "nope";
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_UINT(pr.n_stacks, 0);
    pl_profile_result_free(&pr);
}

static void test_round_trip_spans_then_samples(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "sub/dir/store.db"); /* directories are created */
    pl_store *s = open_rw(path);
    REQUIRE(s);
    CHECK(write_one(s, traces_batch("shop", shop_trace, 4)) == PL_OK);
    CHECK(write_one(s, shop_profile()) == PL_OK);
    check_shop_queries(s);
    pl_store_close(s);
}

static void test_round_trip_samples_then_spans(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    CHECK(write_one(s, shop_profile()) == PL_OK);
    /* spans in two batches, child before parent */
    CHECK(write_one(s, traces_batch("shop", shop_trace + 1, 3)) == PL_OK);
    CHECK(write_one(s, traces_batch("shop", shop_trace, 1)) == PL_OK);
    /* a read-only connection sees the same */
    pl_store *r = open_ro(path);
    REQUIRE(r);
    check_shop_queries(r);
    pl_store_close(r);
    pl_store_close(s);
}

static void test_duplicate_spans_and_repeated_samples(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    pl_store_write_stats ws = {0};
    pl_err err = {{0}};
    pl_batch *b = traces_batch("shop", shop_trace, 4);
    REQUIRE(pl_store_write_batch(s, b, &ws, &err) == PL_OK);
    CHECK_EQ_UINT(ws.spans, 4);
    memset(&ws, 0, sizeof(ws));
    REQUIRE(pl_store_write_batch(s, b, &ws, &err) == PL_OK); /* a retry */
    CHECK_EQ_UINT(ws.spans, 0);
    CHECK_EQ_UINT(ws.duplicate_spans, 4);
    pl_batch_free(b);
    /* samples of the same (span, stack, bucket) add up into one row */
    b = shop_profile();
    memset(&ws, 0, sizeof(ws));
    REQUIRE(pl_store_write_batch(s, b, &ws, &err) == PL_OK);
    CHECK_EQ_UINT(ws.samples, 5);
    REQUIRE(pl_store_write_batch(s, b, &ws, &err) == PL_OK);
    pl_batch_free(b);
    pl_trace_list list;
    pl_trace_query tq = {0};
    REQUIRE(pl_store_query_traces(s, &tq, &list, &err) == PL_OK);
    REQUIRE(list.n == 1);
    CHECK_EQ_UINT(list.items[0].span_count, 4);
    CHECK_EQ_INT(list.items[0].cpu_ns, MS(120));
    pl_trace_list_free(&list);
    sqlite3 *db;
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, "SELECT count(*) FROM samples", -1, &st, NULL);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ_INT(sqlite3_column_int(st, 0), 5);
    sqlite3_finalize(st);
    /* stacks, functions and strings are stored once */
    sqlite3_prepare_v2(db, "SELECT count(*) FROM stacks", -1, &st, NULL);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ_INT(sqlite3_column_int(st, 0), 5);
    sqlite3_finalize(st);
    sqlite3_prepare_v2(db, "SELECT count(*) FROM functions", -1, &st, NULL);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ_INT(sqlite3_column_int(st, 0), 9);
    sqlite3_finalize(st);
    sqlite3_close(db);
    pl_store_close(s);
}

/* A Go-style pprof CPU profile arrives as two profiles with the same
 * samples: samples:count (period cpu/nanoseconds) and cpu:nanoseconds. The
 * span comes from the span_id label, the service from a sample attribute. */
static void test_sample_types_and_labels(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    CHECK(write_one(s, traces_batch("api", shop_trace, 4)) == PL_OK);
    prof_builder pb;
    prof_begin(&pb, NULL, "samples", "count", "cpu", "nanoseconds", 10000000, BASE);
    sample_spec a = {"main;work", 3, 0, 1, 1, true, "api"};
    prof_sample(&pb, &a);
    CHECK(write_one(s, pb.b) == PL_OK);
    prof_begin(&pb, NULL, "cpu", "nanoseconds", NULL, NULL, 0, BASE);
    sample_spec c = {"main;work", (int64_t)MS(30), 0, 1, 1, true, "api"};
    prof_sample(&pb, &c);
    CHECK(write_one(s, pb.b) == PL_OK);
    prof_begin(&pb, NULL, "alloc_space", "bytes", NULL, NULL, 0, BASE);
    sample_spec m = {"main;alloc", 4096, 0, 1, 1, true, "api"};
    prof_sample(&pb, &m);
    CHECK(write_one(s, pb.b) == PL_OK);

    pl_err err = {{0}};
    pl_trace_list list;
    pl_trace_query tq = {0};
    REQUIRE(pl_store_query_traces(s, &tq, &list, &err) == PL_OK);
    REQUIRE(list.n == 1);
    CHECK_EQ_INT(list.items[0].cpu_ns, MS(30)); /* not 60: one CPU type counts */
    pl_trace_list_free(&list);

    pl_profile_query pq = {0};
    pq.scope = PL_PROFILE_SPAN;
    make_span_id(1, 1, pq.span_id);
    pl_profile_result pr;
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_STR(pr.type, "cpu");
    CHECK_EQ_INT(pr.total, MS(30));
    CHECK_EQ_INT(folded_value(&pr, "main;work"), MS(30));
    pl_profile_result_free(&pr);
    pq.type = "alloc_space";
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_STR(pr.type, "alloc_space");
    CHECK_EQ_STR(pr.unit, "bytes");
    CHECK_EQ_INT(pr.total, 4096);
    CHECK_EQ_INT(folded_value(&pr, "main;alloc"), 4096);
    pl_profile_result_free(&pr);
    pq.type = "samples:count";
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_INT(pr.total, 3);
    pl_profile_result_free(&pr);
    /* service from the sample attribute */
    pq.scope = PL_PROFILE_SERVICE;
    pq.service = "api";
    pq.type = NULL;
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_INT(pr.total, MS(30));
    pl_profile_result_free(&pr);

    /* only memory samples: the default falls back to the first type */
    char path2[512];
    fresh_path(path2, sizeof(path2), "mem.db");
    pl_store *s2 = open_rw(path2);
    REQUIRE(s2);
    prof_begin(&pb, "mem", "alloc_space", "bytes", NULL, NULL, 0, BASE);
    sample_spec m2 = {"main;alloc", 4096, 0, 0, -1, false, NULL};
    prof_sample(&pb, &m2);
    CHECK(write_one(s2, pb.b) == PL_OK);
    pq.service = "mem";
    REQUIRE(pl_store_query_profile(s2, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_STR(pr.type, "alloc_space");
    CHECK_EQ_INT(pr.total, 4096);
    pl_profile_result_free(&pr);
    pq.type = "cpu"; /* asked for CPU explicitly: nothing */
    REQUIRE(pl_store_query_profile(s2, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_INT(pr.total, 0);
    pl_profile_result_free(&pr);
    pl_store_close(s2);
    pl_store_close(s);
}

/* Samples at the edges of the model: no stack, indices out of range,
 * timestamps without values, one value per timestamp. None may crash or
 * draw an empty frame. */
static void test_odd_samples(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    prof_builder pb;
    prof_begin(&pb, "odd", "cpu", "nanoseconds", NULL, NULL, 0, BASE);
    sample_spec ok = {"main;work", 100, 0, 0, -1, false, NULL};
    prof_sample(&pb, &ok);
    pl_sample *smp;
    /* stack 0 (the empty stack) and a stack index past the table */
    smp = &pb.p->samples[pb.p->n_samples++];
    memset(smp, 0, sizeof(*smp));
    smp->values = pl_batch_alloc(pb.b, sizeof(int64_t));
    smp->values[0] = 1000;
    smp->n_values = 1;
    smp = &pb.p->samples[pb.p->n_samples++];
    *smp = pb.p->samples[pb.p->n_samples - 2];
    smp->stack_index = 999;
    /* link and attribute indices past their tables */
    smp = &pb.p->samples[pb.p->n_samples++];
    *smp = pb.p->samples[0];
    smp->link_index = 77;
    smp->attribute_indices = pl_batch_alloc(pb.b, 2 * sizeof(int32_t));
    smp->attribute_indices[0] = -3;
    smp->attribute_indices[1] = 12345;
    smp->n_attribute_indices = 2;
    /* three timestamps, no values: 1 each */
    smp = &pb.p->samples[pb.p->n_samples++];
    *smp = pb.p->samples[0];
    smp->n_values = 0;
    smp->timestamps_unix_nano = pl_batch_alloc(pb.b, 3 * sizeof(uint64_t));
    for (int i = 0; i < 3; i++)
        smp->timestamps_unix_nano[i] = BASE + S(i * 20);
    smp->n_timestamps = 3;
    /* two timestamps, a value each */
    smp = &pb.p->samples[pb.p->n_samples++];
    *smp = pb.p->samples[0];
    smp->values = pl_batch_alloc(pb.b, 2 * sizeof(int64_t));
    smp->values[0] = 10;
    smp->values[1] = 20;
    smp->n_values = 2;
    smp->timestamps_unix_nano = pl_batch_alloc(pb.b, 2 * sizeof(uint64_t));
    smp->timestamps_unix_nano[0] = BASE;
    smp->timestamps_unix_nano[1] = BASE + S(30);
    smp->n_timestamps = 2;
    CHECK(write_one(s, pb.b) == PL_OK);

    pl_profile_query pq = {0};
    pq.scope = PL_PROFILE_SERVICE;
    pq.service = "odd";
    pl_profile_result pr;
    pl_err err = {{0}};
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_UINT(pr.n_stacks, 1);
    CHECK_EQ_INT(folded_value(&pr, "main;work"), 100 + 100 + 3 + 30);
    for (size_t i = 0; i < pr.n_stacks; i++)
        CHECK(pr.stacks[i].frames[0] != 0);
    pl_profile_result_free(&pr);
    pl_store_close(s);
}

static void test_traces_filters_and_order(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    for (uint32_t t = 1; t <= 30; t++) {
        span_spec sp[2] = {
            {t, 0, -1, "GET /a", BASE + S(t), BASE + S(t) + MS(t * 10), 0},
            {t, 1, 0, "child", BASE + S(t) + MS(1), BASE + S(t) + MS(2), 0},
        };
        CHECK(write_one(s, traces_batch(t % 2 ? "odd" : "even", sp, 2)) == PL_OK);
    }
    /* a trace whose root was never stored */
    span_spec orphan[1] = {{99, 1, 0, "lonely", BASE + S(5), BASE + S(5) + MS(500), 0}};
    CHECK(write_one(s, traces_batch("odd", orphan, 1)) == PL_OK);

    pl_err err = {{0}};
    pl_trace_list list;
    pl_trace_query q = {0};
    q.limit = 5;
    REQUIRE(pl_store_query_traces(s, &q, &list, &err) == PL_OK);
    REQUIRE(list.n == 5);
    CHECK_EQ_UINT(list.items[0].duration_ns, MS(500)); /* orphan envelope */
    CHECK(!list.items[0].has_root);
    CHECK_EQ_UINT(list.items[1].duration_ns, MS(300));
    for (size_t i = 1; i < list.n; i++)
        CHECK(list.items[i - 1].duration_ns >= list.items[i].duration_ns);
    pl_trace_list_free(&list);

    q.service = "even";
    q.limit = 100;
    REQUIRE(pl_store_query_traces(s, &q, &list, &err) == PL_OK);
    CHECK_EQ_UINT(list.n, 15);
    CHECK_EQ_UINT(list.items[0].duration_ns, MS(300));
    pl_trace_list_free(&list);

    q.service = NULL;
    q.min_duration_ns = MS(250);
    REQUIRE(pl_store_query_traces(s, &q, &list, &err) == PL_OK);
    CHECK_EQ_UINT(list.n, 7); /* 25..30 and the orphan */
    pl_trace_list_free(&list);

    q.min_duration_ns = 0;
    q.since_ns = BASE + S(21);
    REQUIRE(pl_store_query_traces(s, &q, &list, &err) == PL_OK);
    CHECK_EQ_UINT(list.n, 10);
    pl_trace_list_free(&list);

    char **names;
    size_t n;
    REQUIRE(pl_store_query_services(s, NULL, &names, &n, &err) == PL_OK);
    REQUIRE(n == 2);
    CHECK_EQ_STR(names[0], "even");
    CHECK_EQ_STR(names[1], "odd");
    pl_store_free_names(names, n);

    uint8_t missing[16];
    make_trace_id(12345, missing);
    pl_trace_detail d;
    CHECK(pl_store_query_trace(s, missing, 3, &d, &err) == PL_ERR_NOT_FOUND);
    CHECK(strstr(err.msg, "not in the store") != NULL);
    pl_store_close(s);
}

/* Enough traces in the window that the query walks the duration index. */
static void test_traces_many_in_window(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    pl_store *w = s;
    pl_err err = {{0}};
    REQUIRE(pl_store_begin(w, &err) == PL_OK);
    for (uint32_t t = 1; t <= 600; t++) {
        /* duration (t * 7919) % 1000 ms: a permutation, so the order is known */
        uint64_t dur = MS((t * 7919u) % 1000u + 1);
        span_spec sp[1] = {{t, 0, -1, "op", BASE + S(t), BASE + S(t) + dur, 0}};
        if (t == 7) /* only a child for now: its root comes later */
            sp[0] = (span_spec){7, 1, 0, "child", BASE + S(7), BASE + S(7) + MS(1), 0};
        pl_batch *b = traces_batch(t % 3 ? "a" : "b", sp, 1);
        CHECK(pl_store_write(w, b, NULL, &err) == PL_OK);
        pl_batch_free(b);
    }
    REQUIRE(pl_store_commit(w, &err) == PL_OK);
    /* the root arrives later for one trace and makes it the slowest */
    span_spec late[1] = {{7, 0, -1, "late root", BASE + S(7), BASE + S(7) + MS(5000), 0}};
    CHECK(write_one(s, traces_batch("a", late, 1)) == PL_OK);

    pl_trace_list list;
    pl_trace_query q = {0};
    q.limit = 2;
    REQUIRE(pl_store_query_traces(s, &q, &list, &err) == PL_OK);
    REQUIRE(list.n == 2);
    CHECK_EQ_UINT(list.items[0].duration_ns, MS(5000));
    CHECK_EQ_STR(list.items[0].root_name, "late root");
    CHECK_EQ_UINT(list.items[1].duration_ns, MS(1000));
    pl_trace_list_free(&list);

    /* service b (t % 3 == 0), second half of the window, at least 500 ms:
     * check against a brute-force answer */
    q.limit = 3;
    q.service = "b";
    q.since_ns = BASE + S(301);
    q.min_duration_ns = MS(500);
    uint64_t want[3] = {0, 0, 0};
    for (uint32_t t = 301; t <= 600; t++) {
        uint64_t dur = MS((t * 7919u) % 1000u + 1);
        if (t % 3 || dur < MS(500))
            continue;
        for (int k = 0; k < 3; k++)
            if (dur > want[k]) {
                for (int m = 2; m > k; m--)
                    want[m] = want[m - 1];
                want[k] = dur;
                break;
            }
    }
    REQUIRE(pl_store_query_traces(s, &q, &list, &err) == PL_OK);
    REQUIRE(list.n == 3);
    for (int k = 0; k < 3; k++) {
        CHECK_EQ_UINT(list.items[k].duration_ns, want[k]);
        CHECK(list.items[k].start_ns >= BASE + S(301));
        CHECK_EQ_STR(list.items[k].root_service, "b");
    }
    pl_trace_list_free(&list);
    pl_store_close(s);
}

static void test_retention_by_age(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    /* trace 1 two hours old, trace 2 now */
    span_spec old_span[1] = {{1, 0, -1, "old", BASE - S(7200), BASE - S(7199), 0}};
    span_spec new_span[1] = {{2, 0, -1, "new", BASE, BASE + S(1), 0}};
    CHECK(write_one(s, traces_batch("svc", old_span, 1)) == PL_OK);
    CHECK(write_one(s, traces_batch("svc", new_span, 1)) == PL_OK);
    prof_builder pb;
    prof_begin(&pb, "svc", "cpu", "nanoseconds", NULL, NULL, 0, BASE);
    sample_spec a = {"main;old", 100, BASE - S(7200), 1, 0, false, NULL};
    sample_spec b = {"main;new", 200, BASE, 2, 0, false, NULL};
    prof_sample(&pb, &a);
    prof_sample(&pb, &b);
    CHECK(write_one(s, pb.b) == PL_OK);

    pl_store_retention_stats rs;
    pl_err err = {{0}};
    REQUIRE(pl_store_enforce_retention(s, BASE + S(10), S(3600), 0, false, &rs, &err) == PL_OK);
    CHECK_EQ_UINT(rs.traces_deleted, 1);
    CHECK_EQ_UINT(rs.spans_deleted, 1);
    CHECK_EQ_UINT(rs.sample_rows_deleted, 1);

    pl_trace_list list;
    pl_trace_query q = {0};
    REQUIRE(pl_store_query_traces(s, &q, &list, &err) == PL_OK);
    REQUIRE(list.n == 1);
    CHECK_EQ_STR(list.items[0].root_name, "new");
    CHECK_EQ_INT(list.items[0].cpu_ns, 200);
    pl_trace_list_free(&list);
    pl_profile_query pq = {0};
    pq.scope = PL_PROFILE_SERVICE;
    pq.service = "svc";
    pl_profile_result pr;
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_UINT(pr.n_stacks, 1);
    CHECK_EQ_INT(folded_value(&pr, "main;new"), 200);
    pl_profile_result_free(&pr);
    /* nothing more to delete */
    REQUIRE(pl_store_enforce_retention(s, BASE + S(10), S(3600), 0, false, &rs, &err) == PL_OK);
    CHECK_EQ_UINT(rs.spans_deleted, 0);
    pl_store_close(s);
}

/* Traces 1..n of 5 spans (a root and four children), trace t starting at
 * BASE + t * step_ns, and every `profile_every`-th trace a profile of five
 * samples linked to its spans: the set-up of the size retention tests. */
static void write_traces_with_profiles(pl_store *s, const char *service, uint32_t n,
                                       uint64_t step_ns, uint32_t profile_every)
{
    span_spec specs[5];
    for (uint32_t t = 1; t <= n; t++) {
        uint64_t start = BASE + step_ns * t;
        specs[0] =
            (span_spec){t, 0, -1, "GET /big/endpoint/with/a/long/name", start, start + MS(50), 0};
        for (int k = 1; k < 5; k++)
            specs[k] =
                (span_spec){t, k, 0, "child span with a name", start + MS(k), start + MS(k + 5), 0};
        CHECK(write_one(s, traces_batch(service, specs, 5)) == PL_OK);
        if (t % profile_every == 0) {
            prof_builder pb;
            prof_begin(&pb, service, "cpu", "nanoseconds", NULL, NULL, 0, start);
            for (int k = 0; k < 5; k++) {
                char stack[64];
                snprintf(stack, sizeof(stack), "main;f%u;g%d", t % 50, k);
                sample_spec sm = {stack, 1000, start, t, k, false, NULL};
                prof_sample(&pb, &sm);
            }
            CHECK(write_one(s, pb.b) == PL_OK);
        }
    }
}

static int64_t count_rows(const char *path, const char *sql);

static void test_retention_by_size(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    /* 4000 traces of 5 spans over 4000 s, with samples */
    write_traces_with_profiles(s, "big", 4000, S(1), 10);
    uint64_t before = pl_store_size(s);
    CHECK(before > 4u * 1024 * 1024);
    uint64_t limit = before / 3;
    pl_store_retention_stats rs;
    pl_err err = {{0}};
    /* one slice (the writer's call between transactions): a little of the
     * oldest data goes, the store is still over its limit */
    REQUIRE(pl_store_enforce_retention(s, BASE + S(5000), 0, limit, true, &rs, &err) == PL_OK);
    CHECK(rs.spans_deleted > 0);
    CHECK(rs.spans_deleted < 4000 * 5 / 10); /* of 20,000 */
    CHECK(rs.size_after > limit);
    REQUIRE(pl_store_enforce_retention(s, BASE + S(5000), 0, limit, false, &rs, &err) == PL_OK);
    CHECK(rs.size_after <= limit);
    CHECK(rs.size_after >= limit / 4); /* deleted the oldest part, not everything */
    CHECK(rs.spans_deleted > 0);
    /* the newest trace is still there, the oldest is gone */
    uint8_t tid[16];
    pl_trace_detail d;
    make_trace_id(4000, tid);
    CHECK(pl_store_query_trace(s, tid, 3, &d, &err) == PL_OK);
    pl_trace_detail_free(&d);
    make_trace_id(1, tid);
    CHECK(pl_store_query_trace(s, tid, 3, &d, &err) == PL_ERR_NOT_FOUND);
    /* the pages retention freed are free in the file (a new store has no
     * auto-vacuum: the file keeps its size and new rows reuse them) */
    int64_t free_pages = count_rows(path, "PRAGMA freelist_count");
    CHECK(free_pages * 16384 >= (int64_t)(before - limit) / 2);
    CHECK_EQ_INT(count_rows(path, "PRAGMA auto_vacuum"), 0);
    /* writes keep working after retention (caches were reset) */
    prof_builder pb;
    prof_begin(&pb, "big", "cpu", "nanoseconds", NULL, NULL, 0, BASE + S(4001));
    sample_spec sm = {"main;f1;g1", 1000, BASE + S(4001), 4000, 1, false, NULL};
    prof_sample(&pb, &sm);
    CHECK(write_one(s, pb.b) == PL_OK);
    pl_profile_query pq = {0};
    pq.scope = PL_PROFILE_SPAN;
    make_span_id(4000, 1, pq.span_id);
    pl_profile_result pr;
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_INT(folded_value(&pr, "main;f1;g1"), 1000);
    pl_profile_result_free(&pr);
    pl_store_close(s);
}

/* A store with samples (10 s buckets) over a short time range: its oldest
 * data time is the start of the oldest bucket, and each slice of the
 * writer's size retention must still delete some rows (a slice of 5 % of a
 * minute ended inside that bucket: the first deleted a few spans, the next
 * ones nothing, so the store grew past its limit for as long as the range
 * stayed short); a few slices bring it under the limit. */
static void test_retention_by_size_samples(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "samples_size.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    /* 1,200 traces of 5 spans over 60 s, a profile every 5 s */
    write_traces_with_profiles(s, "busy", 1200, MS(50), 100);
    uint64_t before = pl_store_size(s);
    CHECK(before > 1024u * 1024);
    uint64_t limit = before * 2 / 3;
    pl_store_retention_stats rs;
    pl_err err = {{0}};
    REQUIRE(pl_store_enforce_retention(s, BASE + S(61), 0, limit, true, &rs, &err) == PL_OK);
    CHECK(rs.sample_rows_deleted > 0);
    int slices = 1;
    while (rs.size_after > limit && slices < 20) {
        REQUIRE(pl_store_enforce_retention(s, BASE + S(61), 0, limit, true, &rs, &err) == PL_OK);
        slices++;
    }
    CHECK(rs.size_after <= limit);
    CHECK(slices < 20);
    pl_store_close(s);
    /* the newest second is still there */
    CHECK(count_rows(path, "SELECT count(*) FROM samples WHERE bucket = (SELECT max(bucket) FROM "
                           "samples)") > 0);
}

/* ---- concurrency and reopening ------------------------------------------ */

typedef struct writer_arg {
    const char *path;
    int batches;
    int failures;
} writer_arg;

static void writer_thread(void *arg)
{
    writer_arg *w = arg;
    pl_store *s = open_rw(w->path);
    if (!s) {
        w->failures++;
        return;
    }
    for (int i = 0; i < w->batches; i++) {
        span_spec sp[10];
        uint32_t t = (uint32_t)i + 1000;
        for (int k = 0; k < 10; k++)
            sp[k] = (span_spec){t,
                                k,
                                k ? 0 : -1,
                                k ? "child" : "root",
                                BASE + S(i) + MS(k),
                                BASE + S(i) + MS(k + 20),
                                0};
        if (write_one(s, traces_batch("busy", sp, 10)) != PL_OK)
            w->failures++;
        prof_builder pb;
        prof_begin(&pb, "busy", "cpu", "nanoseconds", NULL, NULL, 0, BASE + S(i));
        sample_spec sm = {"main;loop", 10, BASE + S(i), t, 1, false, NULL};
        prof_sample(&pb, &sm);
        if (write_one(s, pb.b) != PL_OK)
            w->failures++;
    }
    pl_store_close(s);
}

static void test_writes_while_querying(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *init = open_rw(path); /* create the schema first */
    REQUIRE(init);
    pl_store_close(init);
    writer_arg w = {path, 300, 0};
    uv_thread_t th;
    REQUIRE(uv_thread_create(&th, writer_thread, &w) == 0);
    pl_store *r = open_ro(path);
    REQUIRE(r);
    int queries = 0, errors = 0;
    size_t last_n = 0;
    bool monotonic = true;
    for (int i = 0; i < 200; i++) {
        pl_err err = {{0}};
        pl_trace_list list;
        pl_trace_query q = {0};
        q.limit = 1000;
        if (pl_store_query_traces(r, &q, &list, &err) != PL_OK) {
            fprintf(stderr, "  query: %s\n", err.msg);
            errors++;
            continue;
        }
        if (list.n < last_n)
            monotonic = false;
        last_n = list.n;
        pl_trace_list_free(&list);
        pl_profile_query pq = {0};
        pq.scope = PL_PROFILE_SERVICE;
        pq.service = "busy";
        pl_profile_result pr;
        if (pl_store_query_profile(r, &pq, &pr, &err) != PL_OK)
            errors++;
        else
            pl_profile_result_free(&pr);
        queries++;
    }
    uv_thread_join(&th);
    CHECK_EQ_INT(w.failures, 0);
    CHECK_EQ_INT(errors, 0);
    CHECK_EQ_INT(queries, 200);
    CHECK(monotonic);
    pl_err err = {{0}};
    pl_trace_list list;
    pl_trace_query q = {0};
    q.limit = 1000;
    REQUIRE(pl_store_query_traces(r, &q, &list, &err) == PL_OK);
    CHECK_EQ_UINT(list.n, 300);
    for (size_t i = 0; i < list.n; i++)
        CHECK_EQ_UINT(list.items[i].span_count, 10);
    pl_trace_list_free(&list);
    pl_store_close(r);
}

static void test_reopen_previous_run(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    CHECK(write_one(s, traces_batch("shop", shop_trace, 4)) == PL_OK);
    pl_store_close(s);
    /* next run: same file, caches empty; the same stacks and strings are
     * found again rather than duplicated */
    s = open_rw(path);
    REQUIRE(s);
    CHECK(write_one(s, shop_profile()) == PL_OK);
    check_shop_queries(s);
    pl_store_close(s);
    s = open_rw(path);
    REQUIRE(s);
    CHECK(write_one(s, shop_profile()) == PL_OK);
    pl_store_close(s);
    sqlite3 *db;
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db,
                       "SELECT (SELECT count(*) FROM stacks), (SELECT count(*) FROM "
                       "functions), (SELECT count(*) FROM samples)",
                       -1, &st, NULL);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ_INT(sqlite3_column_int(st, 0), 5);
    CHECK_EQ_INT(sqlite3_column_int(st, 1), 9);
    CHECK_EQ_INT(sqlite3_column_int(st, 2), 5);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* ---- broken stores: store level ----------------------------------------- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    for (int i = 0; i < 200; i++)
        fputs(text, f);
    fclose(f);
}

/* The number of files set aside for `path` (path.corrupt-<stamp>), with
 * the first one's name in `aside`. */
static size_t set_aside(const char *path, char *aside, size_t cap)
{
    char pattern[600];
    snprintf(pattern, sizeof(pattern), "%s.corrupt-*", path);
    glob_t g;
    size_t n = 0;
    if (glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++)
            if (!strstr(g.gl_pathv[i] + strlen(path), "-wal") &&
                !strstr(g.gl_pathv[i] + strlen(path), "-shm")) {
                if (!n && aside)
                    snprintf(aside, cap, "%s", g.gl_pathv[i]);
                n++;
            }
        globfree(&g);
    }
    return n;
}

static void test_corrupt_file_store(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    write_file(path, "this is not a database, just some text that happens to be here\n");
    pl_err err = {{0}};
    pl_store *s = NULL;
    pl_store_error kind = PL_STORE_ERR_NONE;
    /* read-only (proflink query): reported, the file left as it is */
    pl_store_options ro = {.read_only = true};
    CHECK(pl_store_open(path, &ro, &s, &kind, &err) != PL_OK);
    CHECK(s == NULL);
    CHECK_EQ_INT(kind, PL_STORE_ERR_CORRUPT);
    CHECK(strstr(err.msg, path) != NULL);
    CHECK(strstr(err.msg, "not a database") != NULL);
    CHECK_EQ_UINT(set_aside(path, NULL, 0), 0);
    /* the writer: the file is moved aside and a fresh store made */
    CHECK(pl_store_open(path, NULL, &s, &kind, &err) == PL_OK);
    REQUIRE(s);
    CHECK(write_one(s, traces_batch("svc", shop_trace, 4)) == PL_OK);
    pl_store_close(s);
    s = NULL;
    char aside[700];
    CHECK_EQ_UINT(set_aside(path, aside, sizeof(aside)), 1);
    FILE *f = fopen(aside, "rb");
    char head[16] = "";
    CHECK(f && fread(head, 1, 15, f) == 15 && memcmp(head, "this is not a d", 15) == 0);
    if (f)
        fclose(f);

    /* a SQLite database that is not ours */
    char other[512];
    fresh_path(other, sizeof(other), "other.db");
    sqlite3 *db;
    REQUIRE(sqlite3_open(other, &db) == SQLITE_OK);
    sqlite3_exec(db, "CREATE TABLE accounts(id INTEGER)", NULL, NULL, NULL);
    sqlite3_close(db);
    CHECK(pl_store_open(other, NULL, &s, &kind, &err) != PL_OK);
    CHECK_EQ_INT(kind, PL_STORE_ERR_CORRUPT);
    CHECK(strstr(err.msg, "not a proflink store") != NULL);

    /* read-only: a missing file is reported, not created */
    char missing[512];
    fresh_path(missing, sizeof(missing), "missing.db");
    CHECK(pl_store_open(missing, &ro, &s, &kind, &err) == PL_ERR_NOT_FOUND);
    CHECK_EQ_INT(kind, PL_STORE_ERR_MISSING);
    CHECK(strstr(err.msg, "no proflink store") != NULL);
    struct stat stbuf;
    CHECK(stat(missing, &stbuf) != 0);
}

static void test_corrupted_pages_store(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    for (uint32_t t = 1; t <= 200; t++) {
        span_spec sp[1] = {{t, 0, -1, "span with a reasonably long name to fill pages", BASE + S(t),
                            BASE + S(t) + MS(5), 0}};
        CHECK(write_one(s, traces_batch("svc", sp, 1)) == PL_OK);
    }
    pl_store_close(s);
    /* scribble over the middle of the file, keep the header */
    FILE *f = fopen(path, "r+b");
    REQUIRE(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    REQUIRE(size > 16384);
    for (long off = 4096; off < size; off += 4096) {
        fseek(f, off, SEEK_SET);
        for (int i = 0; i < 64; i++)
            fputc(0xA5, f);
    }
    fclose(f);
    pl_err err = {{0}};
    pl_store_error kind;
    s = NULL;
    /* quick_check finds the damage: the file is set aside, a fresh store
     * is written and read */
    REQUIRE(pl_store_open(path, NULL, &s, &kind, &err) == PL_OK);
    CHECK_EQ_UINT(set_aside(path, NULL, 0), 1);
    CHECK(write_one(s, traces_batch("svc", shop_trace, 4)) == PL_OK);
    pl_trace_list list;
    pl_trace_query q = {0};
    CHECK(pl_store_query_traces(s, &q, &list, &err) == PL_OK);
    CHECK_EQ_UINT(list.n, 1);
    pl_trace_list_free(&list);
    pl_store_close(s);
}

/* ---- the exporter ------------------------------------------------------- */

static const char *cfg_retention, *cfg_max_size, *cfg_interval; /* NULL: defaults */

static void *exporter_config(const char *path, const char *endpoint, const char *busy)
{
    const pl_cfg_section *sec = pl_exporter_sqlite.config;
    void *cfg = calloc(1, sec->size);
    if (!cfg || pl_cfg_defaults(sec, cfg) != 0)
        return NULL;
    for (const pl_cfg_field *f = sec->fields; f->key; f++) {
        char *slot = (char *)cfg + f->offset;
        if (strcmp(f->key, "path") == 0) {
            free(*(char **)slot);
            *(char **)slot = strdup(path);
        } else if (strcmp(f->key, "busy_timeout") == 0 && busy) {
            pl_parse_duration(busy, (int64_t *)slot);
        } else if (strcmp(f->key, "retention") == 0 && cfg_retention) {
            pl_parse_duration(cfg_retention, (int64_t *)slot);
        } else if (strcmp(f->key, "retention_interval") == 0 && cfg_interval) {
            pl_parse_duration(cfg_interval, (int64_t *)slot);
        } else if (strcmp(f->key, "max_size") == 0 && cfg_max_size) {
            pl_parse_size(cfg_max_size, (uint64_t *)slot);
        } else if (strcmp(f->key, "api") == 0) {
            for (const pl_cfg_field *g = f->section->fields; g->key; g++)
                if (strcmp(g->key, "endpoint") == 0) {
                    char **ep = (char **)(slot + g->offset);
                    free(*ep);
                    *ep = strdup(endpoint ? endpoint : "");
                }
        }
    }
    return cfg;
}

typedef struct exp_fixture {
    uv_loop_t loop;
    pl_stats *stats;
    void *self;
    void *cfg;
} exp_fixture;

static uint64_t exp_now;
static uint64_t exp_clock(void *arg)
{
    (void)arg;
    return __atomic_load_n(&exp_now, __ATOMIC_SEQ_CST);
}

static bool exp_start(exp_fixture *e, const char *path, const char *busy)
{
    memset(e, 0, sizeof(*e));
    uv_loop_init(&e->loop);
    e->stats = pl_stats_new("sqlite", PL_KIND_EXPORTER);
    e->cfg = exporter_config(path, "", busy);
    if (!e->stats || !e->cfg)
        return false;
    pl_create_settings set = {0};
    set.id = "sqlite";
    set.loop = &e->loop;
    set.stats = e->stats;
    set.signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES);
    if (exp_now) {
        set.clock.now = exp_clock;
    }
    pl_err err = {{0}};
    if (pl_exporter_sqlite.create(&set, e->cfg, &e->self, &err) != PL_OK) {
        fprintf(stderr, "  create: %s\n", err.msg);
        return false;
    }
    if (pl_exporter_sqlite.start(e->self, &err) != PL_OK) {
        fprintf(stderr, "  start: %s\n", err.msg);
        return false;
    }
    return true;
}

/* Runs the loop until nothing is pending (or ~10 s). */
static void exp_drain(exp_fixture *e)
{
    for (int i = 0; i < 10000; i++) {
        uv_run(&e->loop, UV_RUN_NOWAIT);
        if (pl_exporter_sqlite.pending(e->self) == 0)
            break;
        uv_sleep(1);
    }
    uv_run(&e->loop, UV_RUN_NOWAIT);
}

static void exp_stop(exp_fixture *e)
{
    pl_exporter_sqlite.shutdown(e->self);
    exp_drain(e);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    pl_exporter_sqlite.destroy(e->self);
    uv_loop_close(&e->loop);
    pl_cfg_free(pl_exporter_sqlite.config, e->cfg);
    free(e->cfg);
    pl_stats_free(e->stats);
}

static pl_status exp_export(exp_fixture *e, pl_batch *b)
{
    pl_status st = pl_exporter_sqlite.export(e->self, b);
    pl_batch_free(b);
    return st;
}

static void test_exporter_round_trip(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "data/proflink.db");
    exp_fixture e;
    REQUIRE(exp_start(&e, path, NULL));
    CHECK(exp_export(&e, shop_profile()) == PL_OK);
    CHECK(exp_export(&e, traces_batch("shop", shop_trace, 4)) == PL_OK);
    exp_drain(&e);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 4);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_PROFILES, PL_STAT_SENT), 5);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 0);
    pl_store *r = open_ro(path);
    REQUIRE(r);
    check_shop_queries(r);
    pl_store_close(r);
    exp_stop(&e);
}

/* Exports until one is refused (the writer found the store broken, or a
 * transaction it accepted failed); returns the last status. */
static pl_status export_until_refused(exp_fixture *e, int *taken)
{
    pl_status st = PL_OK;
    for (int i = 0; i < 2000 && st == PL_OK; i++) {
        uv_run(&e->loop, UV_RUN_NOWAIT);
        st = exp_export(e, traces_batch("shop", shop_trace, 4));
        if (st == PL_OK) {
            (*taken)++;
            uv_sleep(2);
        }
    }
    uv_run(&e->loop, UV_RUN_NOWAIT);
    return st;
}

static void test_exporter_corrupt_file(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    write_file(path, "garbage garbage garbage garbage garbage garbage garbage garbage\n");
    exp_fixture e;
    REQUIRE(exp_start(&e, path, NULL)); /* starting is not refused: the pipeline runs */
    /* the damaged file is set aside at start; the fresh store takes data */
    CHECK(exp_export(&e, traces_batch("shop", shop_trace, 4)) == PL_OK);
    exp_drain(&e);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 4);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 0);
    CHECK_EQ_UINT(set_aside(path, NULL, 0), 1);
    exp_stop(&e);
}

static void test_exporter_locked_database(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *init = open_rw(path);
    REQUIRE(init);
    pl_store_close(init);
    /* another process holds the write lock */
    sqlite3 *other;
    REQUIRE(sqlite3_open(path, &other) == SQLITE_OK);
    REQUIRE(sqlite3_exec(other, "BEGIN EXCLUSIVE; INSERT INTO strings(value) VALUES('lock')", NULL,
                         NULL, NULL) == SQLITE_OK);
    exp_fixture e;
    REQUIRE(exp_start(&e, path, "100ms"));
    CHECK(exp_export(&e, traces_batch("shop", shop_trace, 4)) == PL_OK); /* queued */
    /* the transaction fails on the lock: the batch is kept, and while it
     * waits exports are refused at once (retryable) */
    int taken = 1;
    CHECK(export_until_refused(&e, &taken) == PL_ERR_REFUSED);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 0);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 0);
    CHECK_EQ_UINT(pl_exporter_sqlite.pending(e.self), (size_t)taken * 4);
    /* the lock goes away: the writer writes what it kept, and exports
     * work again */
    sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(other);
    pl_status st = PL_ERR_REFUSED;
    for (int i = 0; i < 400 && st != PL_OK; i++) {
        uv_sleep(10);
        uv_run(&e.loop, UV_RUN_NOWAIT);
        pl_batch *b = traces_batch("shop", shop_trace, 4);
        st = pl_exporter_sqlite.export(e.self, b);
        pl_batch_free(b);
    }
    CHECK(st == PL_OK);
    exp_drain(&e);
    /* every batch taken (the kept ones), then the last one */
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), (uint64_t)taken * 4 + 4);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 0);
    exp_stop(&e);
}

/* Retention runs on the exporter's writer thread, with the injected clock. */
static void test_exporter_retention(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    exp_now = BASE + S(600);
    cfg_retention = "1h";
    cfg_interval = "50ms";
    exp_fixture e;
    bool started = exp_start(&e, path, NULL);
    cfg_retention = cfg_interval = NULL;
    REQUIRE(started);
    CHECK(exp_export(&e, traces_batch("shop", shop_trace, 4)) == PL_OK);
    CHECK(exp_export(&e, shop_profile()) == PL_OK);
    exp_drain(&e);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 4);
    pl_store *r = open_ro(path);
    REQUIRE(r);
    pl_trace_list list;
    pl_trace_query q = {0};
    pl_err err = {{0}};
    REQUIRE(pl_store_query_traces(r, &q, &list, &err) == PL_OK);
    CHECK_EQ_UINT(list.n, 1); /* 10 minutes old: kept */
    pl_trace_list_free(&list);
    /* two hours later, the next pass deletes it */
    __atomic_store_n(&exp_now, BASE + S(7200), __ATOMIC_SEQ_CST);
    bool gone = false;
    for (int i = 0; i < 300 && !gone; i++) {
        uv_sleep(10);
        uv_run(&e.loop, UV_RUN_NOWAIT);
        REQUIRE(pl_store_query_traces(r, &q, &list, &err) == PL_OK);
        gone = list.n == 0;
        pl_trace_list_free(&list);
    }
    CHECK(gone);
    pl_profile_query pq = {0};
    pq.scope = PL_PROFILE_SERVICE;
    pq.service = "shop";
    pl_profile_result pr;
    REQUIRE(pl_store_query_profile(r, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_UINT(pr.n_stacks, 0);
    pl_profile_result_free(&pr);
    pl_store_close(r);
    exp_stop(&e);
    exp_now = 0;
}

/* Past max_size, the oldest data goes after the next transaction. */
static void test_exporter_size_limit(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    cfg_max_size = "2MiB";
    exp_fixture e;
    bool started = exp_start(&e, path, NULL);
    cfg_max_size = NULL;
    REQUIRE(started);
    span_spec specs[5];
    for (uint32_t t = 1; t <= 3000; t++) {
        uint64_t start = BASE + S(t);
        specs[0] = (span_spec){t, 0, -1, "GET /a/rather/long/route/name", start, start + MS(9), 0};
        for (int k = 1; k < 5; k++)
            specs[k] = (span_spec){t, k, 0, "child span", start + MS(k), start + MS(k + 1), 0};
        pl_status st;
        pl_batch *b = traces_batch("shop", specs, 5);
        while ((st = pl_exporter_sqlite.export(e.self, b)) == PL_ERR_REFUSED)
            exp_drain(&e);
        CHECK(st == PL_OK);
        pl_batch_free(b);
        if (t % 500 == 0)
            exp_drain(&e);
    }
    exp_drain(&e);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 15000);
    pl_store *r = open_ro(path);
    REQUIRE(r);
    CHECK(pl_store_size(r) <= 2u * 1024 * 1024);
    uint8_t tid[16];
    pl_trace_detail d;
    pl_err err = {{0}};
    make_trace_id(3000, tid);
    CHECK(pl_store_query_trace(r, tid, 3, &d, &err) == PL_OK); /* the newest stays */
    pl_trace_detail_free(&d);
    make_trace_id(1, tid);
    CHECK(pl_store_query_trace(r, tid, 3, &d, &err) == PL_ERR_NOT_FOUND);
    pl_store_close(r);
    exp_stop(&e);
}

/* ---- the JSON API -------------------------------------------------------- */

typedef struct http_get {
    int port;
    const char *path;
    char response[65536];
    size_t len;
    bool done;
} http_get;

#include <glob.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

static void http_get_thread(void *arg)
{
    http_get *g = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)g->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        char req[512];
        int n = snprintf(req, sizeof(req),
                         "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", g->path);
        if (write(fd, req, (size_t)n) == n) {
            ssize_t r;
            while (g->len < sizeof(g->response) - 1 &&
                   (r = read(fd, g->response + g->len, sizeof(g->response) - 1 - g->len)) > 0)
                g->len += (size_t)r;
        }
    }
    g->response[g->len] = 0;
    close(fd);
    __atomic_store_n(&g->done, true, __ATOMIC_SEQ_CST);
}

static void api_get(uv_loop_t *loop, int port, const char *path, http_get *g)
{
    memset(g, 0, sizeof(*g));
    g->port = port;
    g->path = path;
    uv_thread_t th;
    uv_thread_create(&th, http_get_thread, g);
    for (int i = 0; i < 5000 && !__atomic_load_n(&g->done, __ATOMIC_SEQ_CST); i++)
        uv_run(loop, UV_RUN_NOWAIT), uv_sleep(1);
    uv_thread_join(&th);
}

static void test_json_api(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    CHECK(write_one(s, traces_batch("shop", shop_trace, 4)) == PL_OK);
    CHECK(write_one(s, shop_profile()) == PL_OK);
    pl_store_close(s);
    uv_loop_t loop;
    uv_loop_init(&loop);
    pl_err err = {{0}};
    pl_sqlite_api *api = pl_sqlite_api_start("127.0.0.1:0", path, NULL, &err);
    REQUIRE(api);
    int port = pl_sqlite_api_port(api);
    http_get g;
    api_get(&loop, port, "/api/traces?since=0", &g);
    CHECK(strstr(g.response, "HTTP/1.1 200") == g.response);
    CHECK(strstr(g.response, "application/json") != NULL);
    CHECK(strstr(g.response, "\"root_name\":\"GET /users\"") != NULL);
    CHECK(strstr(g.response, "\"cpu_ns\":60000000") != NULL);
    CHECK(strstr(g.response, "\"trace_id\":\"ab0000000000000000000000"
                             "00000001\"") != NULL);

    api_get(&loop, port, "/api/traces?service=nobody&since=0", &g);
    CHECK(strstr(g.response, "{\"traces\":[]}") != NULL);

    api_get(&loop, port, "/api/traces/ab000000000000000000000000000001", &g);
    CHECK(strstr(g.response, "HTTP/1.1 200") == g.response);
    CHECK(strstr(g.response, "\"name\":\"db.query\"") != NULL);
    CHECK(strstr(g.response, "\"attributes\":{\"http.route\":\"/users/{id}\"}") != NULL);
    CHECK(strstr(g.response, "\"resource\":{\"service.name\":\"shop\",\"host.name\":\"web-1\"}") !=
          NULL);
    CHECK(strstr(g.response, "\"events\":[{\"name\":\"exception\"") != NULL);
    CHECK(strstr(g.response, "\"top_functions\":[{\"name\":\"sql_exec\"") != NULL);

    api_get(&loop, port, "/api/traces/ab000000000000000000000000000999", &g);
    CHECK(strstr(g.response, "HTTP/1.1 404") == g.response);
    api_get(&loop, port, "/api/traces/xyz", &g);
    CHECK(strstr(g.response, "HTTP/1.1 400") == g.response);

    api_get(&loop, port, "/api/flamegraph?trace=ab000000000000000000000000000001&format=folded",
            &g);
    CHECK(strstr(g.response, "text/plain") != NULL);
    CHECK(strstr(g.response, "\r\n\r\nmain;handler;query;json_decode 20000000\n") != NULL);

    api_get(&loop, port, "/api/flamegraph?service=shop&since=0", &g);
    CHECK(strstr(g.response, "\"flamegraph\":{\"name\":\"all\",\"value\":65000000") != NULL);

    api_get(&loop, port, "/api/flamegraph?span=cd00000100000002&format=svg", &g);
    CHECK(strstr(g.response, "image/svg+xml") != NULL);
    CHECK(strstr(g.response, "<svg") != NULL);
    CHECK(strstr(g.response, "sql_exec") != NULL);

    api_get(&loop, port, "/api/top?service=shop&since=0&limit=2", &g);
    CHECK(strstr(g.response, "\"functions\":[{\"name\":\"json_decode\"") != NULL);
    CHECK(strstr(g.response, "\"total\":65000000") != NULL);

    api_get(&loop, port, "/api/flamegraph", &g);
    CHECK(strstr(g.response, "HTTP/1.1 400") == g.response);
    api_get(&loop, port, "/api/traces?since=yesterday", &g);
    CHECK(strstr(g.response, "HTTP/1.1 400") == g.response);
    CHECK(strstr(g.response, "since") != NULL);
    api_get(&loop, port, "/api/nothing", &g);
    CHECK(strstr(g.response, "HTTP/1.1 404") == g.response);
    api_get(&loop, port, "/api/services", &g);
    CHECK(strstr(g.response, "{\"services\":[\"shop\"]}") != NULL);

    pl_sqlite_api_close(api);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);

    /* an API over a store that does not exist yet answers 503 */
    uv_loop_init(&loop);
    char missing[512];
    fresh_path(missing, sizeof(missing), "none.db");
    api = pl_sqlite_api_start("127.0.0.1:0", missing, NULL, &err);
    REQUIRE(api);
    api_get(&loop, pl_sqlite_api_port(api), "/api/traces", &g);
    CHECK(strstr(g.response, "HTTP/1.1 404") == g.response ||
          strstr(g.response, "HTTP/1.1 503") == g.response);
    CHECK(strstr(g.response, "no proflink store") != NULL);
    pl_sqlite_api_close(api);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
}

static void test_svg_is_self_contained(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    prof_builder pb;
    prof_begin(&pb, "x", "cpu", "nanoseconds", NULL, NULL, 0, BASE);
    sample_spec a = {"main;<weird & \"name\">;leaf", 100, 0, 0, -1, false, NULL};
    prof_sample(&pb, &a);
    CHECK(write_one(s, pb.b) == PL_OK);
    pl_profile_query pq = {0};
    pq.scope = PL_PROFILE_SERVICE;
    pq.service = "x";
    pl_profile_result pr;
    pl_err err = {{0}};
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    pl_buf b;
    pl_buf_init(&b);
    pl_flamegraph_svg(&pr, "t <1>", &b);
    pl_buf_append_byte(&b, 0);
    const char *svg = (const char *)b.data;
    CHECK(strstr(svg, "<svg") != NULL);
    CHECK(strstr(svg, "</svg>") != NULL);
    CHECK(strstr(svg, "&lt;weird &amp; &quot;name&quot;&gt;") != NULL);
    CHECK(strstr(svg, "<weird") == NULL);
    CHECK(strstr(svg, "t &lt;1&gt;") != NULL);
    CHECK(strstr(svg, "src=") == NULL); /* nothing external */
    CHECK(strstr(svg, "href=") == NULL);
    pl_buf_free(&b);
    pl_profile_result_free(&pr);
    pl_store_close(s);
}

/* The rows of a store as text, for comparing two stores (rowids aside). */
static void dump_rows(const char *path, pl_buf *out)
{
    static const char *const queries[] = {
        "SELECT hex(trace_id), start_ns, end_ns, root_span_id, root_name, root_service, "
        "root_start_ns, root_end_ns, span_count, error_count, duration_ns, tenant FROM traces "
        "ORDER BY trace_id",
        "SELECT hex(trace_id), span_id, parent_span_id, name, service, start_ns, end_ns, "
        "status_code, attributes, profile_samples FROM spans ORDER BY span_id",
        /* the trace a sample belongs to: its span's, else its own link */
        "SELECT service_id, bucket, type_id, span_id, stack_id, hex(coalesce((SELECT "
        "sp.trace_id FROM spans sp WHERE sp.span_id = samples.span_id AND samples.span_id != 0), "
        "trace_id)), value, cpu_ns, count, wall_ns FROM samples ORDER BY 1, 2, 3, 4, 5",
        "SELECT service_id, minute, type_id, stack_id, value, cpu_ns, count FROM "
        "service_profiles ORDER BY 1, 2, 3, 4",
        "SELECT id, last_seen_ns FROM services ORDER BY id",
    };
    sqlite3 *db = NULL;
    REQUIRE(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    for (size_t q = 0; q < sizeof(queries) / sizeof(queries[0]); q++) {
        sqlite3_stmt *st = NULL;
        REQUIRE(sqlite3_prepare_v2(db, queries[q], -1, &st, NULL) == SQLITE_OK);
        while (sqlite3_step(st) == SQLITE_ROW) {
            for (int c = 0; c < sqlite3_column_count(st); c++) {
                const unsigned char *t = sqlite3_column_text(st, c);
                pl_buf_printf(out, "%s|", t ? (const char *)t : "NULL");
            }
            pl_buf_append_byte(out, '\n');
        }
        sqlite3_finalize(st);
        pl_buf_append_str(out, "--\n");
    }
    sqlite3_close(db);
}

/* pl_store_write_many (the exporter's transactions: spans sorted by trace
 * id, one traces upsert per trace, sample rows of several profiles batches
 * added up) stores exactly what writing the batches one by one stores:
 * traces split over batches, out of order, a later copy with a profile
 * summary, samples of two dictionaries on the same keys, a tenant. */
/* n spans with ids derived from first..first+n-1 (10 per trace), now. */
static pl_batch *numbered_spans(uint32_t first, uint32_t n)
{
    pl_span *spans;
    pl_batch *b = tf_traces("copies", NULL, n, &spans);
    uint64_t now = (uint64_t)time(NULL) * 1000000000ull;
    for (uint32_t i = 0; i < n; i++) {
        pl_span *sp = &spans[i];
        uint32_t id = first + i;
        sp->trace_id_len = 16;
        sp->trace_id[0] = 0x7e;
        memcpy(sp->trace_id + 8, &(uint32_t){id / 10 + 1}, 4);
        sp->span_id_len = 8;
        memcpy(sp->span_id, &(uint32_t){id + 1}, 4);
        sp->span_id[7] = 0x5a;
        sp->name = PL_BYTES_LIT("op");
        sp->start_time_unix_nano = now + id;
        sp->end_time_unix_nano = now + id + 1000;
        pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("k"), pl_value_string(PL_BYTES_LIT("v")));
    }
    return b;
}

static int64_t count_rows(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    int64_t n = -1;
    sqlite3_stmt *st = NULL;
    if (sqlite3_open(path, &db) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

/* Writes the batches in one transaction, as the exporter does. */
static void write_txn(pl_store *s, pl_batch **batches, size_t n)
{
    pl_err err = {{0}};
    pl_store_write_stats ws = {0};
    REQUIRE(pl_store_begin(s, &err) == PL_OK);
    REQUIRE(pl_store_write_many(s, (const pl_batch *const *)batches, n, &ws, &err) == PL_OK);
    REQUIRE(pl_store_commit(s, &err) == PL_OK);
    for (size_t i = 0; i < n; i++)
        pl_batch_free(batches[i]);
}

/* Checks trace n of numbered_spans() holds spans first..first+count-1, each once. */
static void check_numbered_trace(pl_store *s, uint32_t n, uint32_t first, uint32_t count)
{
    uint8_t tid[16] = {0x7e};
    memcpy(tid + 8, &n, 4);
    pl_trace_detail d;
    pl_err err = {{0}};
    REQUIRE(pl_store_query_trace(s, tid, 0, &d, &err) == PL_OK);
    CHECK_EQ_UINT(d.n, count);
    uint32_t seen = 0;
    for (size_t i = 0; i < d.n; i++) {
        uint32_t id = (uint32_t)(d.spans[i].span_id[0] | d.spans[i].span_id[1] << 8 |
                                 d.spans[i].span_id[2] << 16) -
                      1;
        CHECK(id >= first && id < first + count);
        if (id >= first && id < first + count && id - first < 32)
            seen |= 1u << (id - first);
    }
    CHECK_EQ_UINT(seen, count < 32 ? (1u << count) - 1 : UINT32_MAX);
    pl_trace_detail_free(&d);
}

/* A trace's spans are found through one rowid range per transaction that
 * wrote some (trace_spans_new, then trace_spans after a merge), whatever
 * else the transaction wrote, with copies skipped, after an upgrade from
 * the per-span index, and gone with the trace at retention. */
static void test_trace_span_ranges(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "ranges.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    /* trace 1: spans 0-4 beside trace 11, then 5-7 beside trace 21, then
     * copies of 3-7 with the new 8 and 9 */
    write_txn(s, (pl_batch *[]){numbered_spans(100, 5), numbered_spans(0, 5)}, 2);
    write_txn(s, (pl_batch *[]){numbered_spans(5, 3), numbered_spans(200, 10)}, 2);
    write_txn(s, (pl_batch *[]){numbered_spans(3, 7)}, 1);
    check_numbered_trace(s, 1, 0, 10);
    check_numbered_trace(s, 11, 100, 5);
    check_numbered_trace(s, 21, 200, 10);
    pl_store_close(s);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM spans"), 25);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM trace_spans_new WHERE trace_id = "
                                  "x'7e000000000000000100000000000000'"),
                 3);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM trace_spans_new"), 5);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM trace_spans"), 0);
    /* a store of schema 8 (an index entry per span, no ranges) */
    as_older_schema(path,
                    "DROP TABLE trace_spans; DROP TABLE trace_spans_new;"
                    "CREATE INDEX spans_by_trace ON spans(trace_id); PRAGMA user_version = 8");
    s = open_rw(path);
    REQUIRE(s);
    check_numbered_trace(s, 1, 0, 10);
    check_numbered_trace(s, 21, 200, 10);
    write_txn(s, (pl_batch *[]){numbered_spans(10, 4)}, 1); /* trace 2, new */
    check_numbered_trace(s, 2, 10, 4);
    pl_store_close(s);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM trace_spans"), 25);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM trace_spans_new"), 1);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM sqlite_master WHERE name = "
                                  "'spans_by_trace'"),
                 0);
    /* retention takes the spans with their ranges */
    s = open_rw(path);
    REQUIRE(s);
    pl_store_retention_stats rs;
    pl_err err = {{0}};
    uint64_t later = (uint64_t)time(NULL) * 1000000000ull + S(7200);
    REQUIRE(pl_store_enforce_retention(s, later, S(3600), 0, false, &rs, &err) == PL_OK);
    CHECK_EQ_UINT(rs.spans_deleted, 29);
    pl_store_close(s);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM trace_spans"), 0);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM trace_spans_new"), 0);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM spans"), 0);
}

/* How many rows the store's readers find for span id `id` of
 * numbered_spans() (PL_SPAN_ROW, checked against the row), -1 on error. */
static int64_t rows_by_span_id(const char *path, uint32_t id)
{
    uint8_t b[8] = {0};
    memcpy(b, &(uint32_t){id + 1}, 4);
    b[7] = 0x5a;
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int64_t n = -1;
    if (sqlite3_open(path, &db) == SQLITE_OK &&
        sqlite3_prepare_v2(
            db, "SELECT count(*) FROM spans WHERE rowid = " PL_SPAN_ROW("?1") " AND span_id = ?1",
            -1, &st, NULL) == SQLITE_OK &&
        sqlite3_bind_int64(st, 1, span_id_int(b)) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

/* Spans are found by id through two tables, the ids of recent spans merged
 * into the large one every span_ids_merge spans: copies of merged spans
 * are still recognized and skipped, every span is found by its id, a
 * store of schema 9 (a unique index on spans) is upgraded, and retention
 * sweeps the entries of the spans it deleted, so that a span sent again
 * after its deletion is stored and found again. */
static void test_span_id_tables(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "span_ids.db");
    pl_err err = {{0}};
    pl_store *s = NULL;
    pl_store_options opt = {.busy_timeout_ms = 2000, .span_ids_merge = 8};
    REQUIRE(pl_store_open(path, &opt, &s, NULL, &err) == PL_OK);
    write_txn(s, (pl_batch *[]){numbered_spans(0, 5)}, 1);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM span_ids_new"), 5);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM span_ids"), 0);
    write_txn(s, (pl_batch *[]){numbered_spans(5, 5)}, 1); /* 10 >= 8: merged */
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM span_ids_new"), 0);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM span_ids"), 10);
    /* copies of merged (0-9) and recent (10-12) spans, in one transaction */
    write_txn(s, (pl_batch *[]){numbered_spans(10, 3)}, 1);
    pl_store_write_stats ws = {0};
    REQUIRE(pl_store_begin(s, &err) == PL_OK);
    pl_batch *copies = numbered_spans(0, 13);
    REQUIRE(pl_store_write(s, copies, &ws, &err) == PL_OK);
    REQUIRE(pl_store_commit(s, &err) == PL_OK);
    pl_batch_free(copies);
    CHECK_EQ_UINT(ws.duplicate_spans, 13);
    CHECK_EQ_UINT(ws.spans, 0);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM spans"), 13);
    for (uint32_t id = 0; id < 13; id++)
        CHECK_EQ_INT(rows_by_span_id(path, id), 1);
    CHECK_EQ_INT(rows_by_span_id(path, 13), 0);
    check_numbered_trace(s, 1, 0, 10);
    check_numbered_trace(s, 2, 10, 3);
    pl_store_close(s);

    /* the same store as schema 9 wrote it: an index on spans, no id tables */
    as_older_schema(path, "DROP TABLE span_ids; DROP TABLE span_ids_new;"
                          "CREATE UNIQUE INDEX spans_by_span_id ON spans(span_id);"
                          "PRAGMA user_version = 9");
    REQUIRE(pl_store_open(path, &opt, &s, NULL, &err) == PL_OK);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM sqlite_master WHERE name = "
                                  "'spans_by_span_id'"),
                 0);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM span_ids"), 13);
    for (uint32_t id = 0; id < 13; id++)
        CHECK_EQ_INT(rows_by_span_id(path, id), 1);
    ws = (pl_store_write_stats){0};
    REQUIRE(pl_store_begin(s, &err) == PL_OK);
    copies = numbered_spans(3, 12); /* 3-12 stored, 13 and 14 new */
    REQUIRE(pl_store_write(s, copies, &ws, &err) == PL_OK);
    REQUIRE(pl_store_commit(s, &err) == PL_OK);
    pl_batch_free(copies);
    CHECK_EQ_UINT(ws.duplicate_spans, 10);
    CHECK_EQ_UINT(ws.spans, 2);

    /* retention deletes every span: their entries are swept */
    pl_store_retention_stats rs;
    uint64_t later = (uint64_t)time(NULL) * 1000000000ull + S(7200);
    REQUIRE(pl_store_enforce_retention(s, later, S(3600), 0, false, &rs, &err) == PL_OK);
    CHECK_EQ_UINT(rs.spans_deleted, 15);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM span_ids"), 0);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM span_ids_new"), 0);
    /* sent again: stored again, found by id */
    ws = (pl_store_write_stats){0};
    REQUIRE(pl_store_begin(s, &err) == PL_OK);
    copies = numbered_spans(0, 4);
    REQUIRE(pl_store_write(s, copies, &ws, &err) == PL_OK);
    REQUIRE(pl_store_commit(s, &err) == PL_OK);
    pl_batch_free(copies);
    CHECK_EQ_UINT(ws.spans, 4);
    CHECK_EQ_UINT(ws.duplicate_spans, 0);
    for (uint32_t id = 0; id < 4; id++)
        CHECK_EQ_INT(rows_by_span_id(path, id), 1);
    check_numbered_trace(s, 1, 0, 4);
    pl_store_close(s);
}

/* numbered_spans() starting `shift_ns` later. */
static pl_batch *numbered_spans_shifted(uint32_t first, uint32_t n, uint64_t shift_ns)
{
    pl_batch *b = numbered_spans(first, n);
    pl_scope_spans *ss = &b->data.traces.resources[0].scopes[0];
    for (uint32_t i = 0; i < ss->n_spans; i++) {
        ss->spans[i].start_time_unix_nano += shift_ns;
        ss->spans[i].end_time_unix_nano += shift_ns;
    }
    return b;
}

static int64_t id_entries(const char *path, uint32_t id)
{
    uint8_t b[8] = {0};
    memcpy(b, &(uint32_t){id + 1}, 4);
    b[7] = 0x5a;
    char sql[160];
    snprintf(sql, sizeof(sql),
             "SELECT (SELECT count(*) FROM span_ids WHERE span_id = %" PRId64
             ") + (SELECT count(*) FROM span_ids_new WHERE span_id = %" PRId64 ")",
             span_id_int(b), span_id_int(b));
    return count_rows(path, sql);
}

/* Retention deletes a trace whose late span was written after a newer
 * trace's spans: the sweep takes the entries below the highest deleted row
 * (the late span's among them), the newer trace's spans below it are
 * entered again (one entry each) and stay found. */
static void test_span_ids_late_span(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "late_span.db");
    pl_err err = {{0}};
    pl_store *s = NULL;
    pl_store_options opt = {.busy_timeout_ms = 2000, .span_ids_merge = 4};
    REQUIRE(pl_store_open(path, &opt, &s, NULL, &err) == PL_OK);
    /* trace 1 (spans 0-4) now; trace 2 (10-14) an hour later; then trace
     * 1's late span 5; then trace 3 (20-22) two hours later */
    write_txn(s, (pl_batch *[]){numbered_spans(0, 5)}, 1);
    write_txn(s, (pl_batch *[]){numbered_spans_shifted(10, 5, S(3600))}, 1);
    write_txn(s, (pl_batch *[]){numbered_spans(5, 1)}, 1);
    /* trace 1's first range merged, the late span's not yet: read whole */
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM trace_spans_new"), 1);
    check_numbered_trace(s, 1, 0, 6);
    write_txn(s, (pl_batch *[]){numbered_spans_shifted(20, 3, S(7200))}, 1);
    CHECK_EQ_INT(id_entries(path, 5), 1);
    /* keep what started from 30 minutes on: trace 1 goes, late span too */
    pl_store_retention_stats rs;
    uint64_t now = (uint64_t)time(NULL) * 1000000000ull;
    REQUIRE(pl_store_enforce_retention(s, now + S(1800) + S(3600), S(3600), 0, false, &rs, &err) ==
            PL_OK);
    CHECK_EQ_UINT(rs.spans_deleted, 6);
    CHECK_EQ_INT(id_entries(path, 5), 0);
    CHECK_EQ_INT(rows_by_span_id(path, 5), 0);
    for (uint32_t id = 0; id < 5; id++) /* 5 of 14 entries: swept */
        CHECK_EQ_INT(id_entries(path, id), 0);
    for (uint32_t id = 10; id < 15; id++) {
        CHECK_EQ_INT(rows_by_span_id(path, id), 1);
        CHECK_EQ_INT(id_entries(path, id), 1);
    }
    for (uint32_t id = 20; id < 23; id++)
        CHECK_EQ_INT(rows_by_span_id(path, id), 1);
    CHECK_EQ_INT(count_rows(path, "SELECT (SELECT count(*) FROM span_ids) + "
                                  "(SELECT count(*) FROM span_ids_new)"),
                 8);
    /* trace 2 goes next; trace 3's spans, written after it, stay */
    REQUIRE(pl_store_enforce_retention(s, now + S(5400) + S(3600), S(3600), 0, false, &rs, &err) ==
            PL_OK);
    CHECK_EQ_UINT(rs.spans_deleted, 5);
    for (uint32_t id = 20; id < 23; id++)
        CHECK_EQ_INT(rows_by_span_id(path, id), 1);
    check_numbered_trace(s, 3, 20, 3);
    pl_store_close(s);
}

/* A new store is made with 16 KiB pages; a store an earlier proflink made
 * with 4 KiB pages keeps them, and is read and written as before. */
/* Spans left uncovered by `span_buckets`: a span whose start-time bucket
 * has no row whose rowid range holds it (PL_BUCKET_SPANS). */
#define UNCOVERED_SPANS                                                                            \
    "SELECT count(*) FROM spans s WHERE NOT EXISTS (SELECT 1 FROM span_buckets b WHERE "           \
    "b.bucket = " PL_BUCKET_OF("s.start_ns") " AND s.rowid BETWEEN b.first AND b.last)"

static size_t traces_of_service(pl_store *s, const char *service, uint64_t since,
                                uint32_t *first_trace)
{
    pl_err err = {{0}};
    pl_trace_list list;
    pl_trace_query q = {.service = service, .since_ns = since, .limit = 100};
    *first_trace = 0;
    if (pl_store_query_traces(s, &q, &list, &err) != PL_OK) {
        CHECK(!"trace list failed");
        return 0;
    }
    size_t n = list.n;
    *first_trace = n ? list.items[0].trace_id[15] : 0;
    pl_trace_list_free(&list);
    return n;
}

/* A service's spans by start time come from the rowid ranges of their
 * 10-second buckets (one row per transaction and bucket), not an index on
 * spans: every span is covered, a late span in a later transaction too,
 * the trace list's service filter finds it, retention drops the rows of
 * the buckets it emptied, and a schema-12 store (with spans_by_service)
 * is upgraded to the same. */
static void test_span_buckets(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "buckets.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    /* one transaction over three buckets and two services */
    span_spec a[3] = {
        {1, 0, -1, "GET /a", BASE + S(1), BASE + S(2), 0},
        {1, 1, 0, "a1", BASE + S(3), BASE + S(4), 0},
        {2, 0, -1, "GET /b", BASE + S(25), BASE + S(26), 0},
    };
    span_spec b[2] = {
        {2, 1, 0, "b1", BASE + S(27), BASE + S(28), 0},
        {3, 0, -1, "GET /c", BASE + S(45), BASE + S(46), 0},
    };
    pl_err err = {{0}};
    pl_store_write_stats ws = {0};
    REQUIRE(pl_store_begin(s, &err) == PL_OK);
    pl_batch *ba = traces_batch("alpha", a, 3), *bb = traces_batch("beta", b, 2);
    REQUIRE(pl_store_write(s, ba, &ws, &err) == PL_OK);
    REQUIRE(pl_store_write(s, bb, &ws, &err) == PL_OK);
    REQUIRE(pl_store_commit(s, &err) == PL_OK);
    pl_batch_free(ba);
    pl_batch_free(bb);
    /* a later transaction: a late span of trace 1 (an older bucket, another
     * service) and a span whose start is past 2^63 (a negative bucket) */
    span_spec late[1] = {{1, 2, 0, "late", BASE + S(5), BASE + S(6), 0}};
    CHECK(write_one(s, traces_batch("gamma", late, 1)) == PL_OK);
    span_spec far[1] = {{4, 0, -1, "far", (1ull << 63) + S(1), (1ull << 63) + S(2), 0}};
    CHECK(write_one(s, traces_batch("gamma", far, 1)) == PL_OK);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM spans"), 7);
    CHECK_EQ_INT(count_rows(path, UNCOVERED_SPANS), 0);
    /* a row per bucket of each write: the first transaction's two writes
     * reach buckets 0, 2 and 2, 4 of BASE; then one row each */
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM span_buckets"), 6);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM span_buckets WHERE bucket < 0"), 1);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM sqlite_master WHERE name = "
                                  "'spans_by_service'"),
                 0);
    uint32_t first = 0;
    CHECK_EQ_INT((int)traces_of_service(s, "gamma", BASE, &first), 1);
    CHECK_EQ_INT((int)first, 1); /* through the late span's bucket */
    CHECK_EQ_INT((int)traces_of_service(s, "beta", BASE, &first), 2);
    CHECK_EQ_INT((int)traces_of_service(s, "alpha", BASE + S(20), &first), 1);
    CHECK_EQ_INT((int)first, 2);
    CHECK_EQ_INT((int)traces_of_service(s, "alpha", BASE + S(30), &first), 0);
    CHECK_EQ_INT((int)traces_of_service(s, "nobody", BASE, &first), 0);
    pl_store_close(s);

    /* the same store as schema 12 wrote it */
    as_older_schema(path, "DROP TABLE span_buckets;"
                          "CREATE INDEX spans_by_service ON spans(service, start_ns);"
                          "PRAGMA user_version = 12");
    s = open_rw(path);
    REQUIRE(s);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM sqlite_master WHERE name = "
                                  "'spans_by_service'"),
                 0);
    CHECK_EQ_INT(count_rows(path, "PRAGMA user_version"), PL_STORE_SCHEMA_VERSION);
    CHECK_EQ_INT(count_rows(path, UNCOVERED_SPANS), 0);
    CHECK_EQ_INT((int)traces_of_service(s, "gamma", BASE, &first), 1);
    CHECK_EQ_INT((int)first, 1);
    CHECK_EQ_INT((int)traces_of_service(s, "beta", BASE, &first), 2);

    /* retention by age, cutoff in bucket 3: traces 1 (and its late span)
     * and 2 go, and trace 4 (a start past 2^63 is stored below 0); the
     * rows of buckets 0 to 2 with them, the negative bucket's row stays */
    pl_store_retention_stats rs;
    REQUIRE(pl_store_enforce_retention(s, BASE + S(3600 + 30), S(3600), 0, false, &rs, &err) ==
            PL_OK);
    CHECK_EQ_UINT(rs.spans_deleted, 6);
    CHECK_EQ_INT(count_rows(path, UNCOVERED_SPANS), 0);
    char sql[160];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM span_buckets WHERE bucket >= 0 AND bucket < %lld",
             (long long)pl_terms_bucket((int64_t)(BASE + S(30))));
    CHECK_EQ_INT(count_rows(path, sql), 0);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM span_buckets"), 2);
    CHECK_EQ_INT((int)traces_of_service(s, "beta", BASE, &first), 1);
    CHECK_EQ_INT((int)first, 3);
    CHECK_EQ_INT((int)traces_of_service(s, "alpha", BASE, &first), 0);
    pl_store_close(s);

    /* one write of 200 spans, in trace-id order: traces 10 and 90 (one
     * span each, an old bucket) first and last, 198 spans of traces 11-30
     * (a new bucket) between: the old bucket's two spans are 199 rows
     * apart, more than PL_BUCKET_GAP, so each takes a range of its own
     * instead of one over the whole write */
    fresh_path(path, sizeof(path), "gaps.db");
    s = open_rw(path);
    REQUIRE(s);
    span_spec many[200];
    for (int i = 0; i < 200; i++) {
        bool old_bucket = i == 0 || i == 199;
        uint32_t trace = i == 0 ? 10 : i == 199 ? 90 : 11 + (uint32_t)(i - 1) / 10;
        int id = old_bucket ? 0 : (i - 1) % 10;
        uint64_t start = old_bucket ? BASE + S(3) + MS(i) : BASE + S(600) + MS(i);
        many[i] = (span_spec){trace, id, id ? 0 : -1, "op", start, start + MS(1), 0};
    }
    CHECK(write_one(s, traces_batch("delta", many, 200)) == PL_OK);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM spans"), 200);
    CHECK_EQ_INT(count_rows(path, UNCOVERED_SPANS), 0);
    int64_t old_b = pl_terms_bucket((int64_t)(BASE + S(3)));
    snprintf(sql, sizeof(sql),
             "SELECT count(*) * 1000 + max(last - first) FROM span_buckets WHERE bucket = %lld",
             (long long)old_b);
    CHECK_EQ_INT(count_rows(path, sql), 2000); /* two ranges of one row */
    snprintf(sql, sizeof(sql),
             "SELECT count(*) * 1000 + max(last - first) FROM span_buckets WHERE bucket = %lld",
             (long long)pl_terms_bucket((int64_t)(BASE + S(600))));
    CHECK_EQ_INT(count_rows(path, sql), 1197); /* one range of 198 rows */
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM span_buckets"), 3);
    CHECK_EQ_INT((int)traces_of_service(s, "delta", BASE, &first), 22);
    CHECK_EQ_INT((int)traces_of_service(s, "delta", BASE + S(500), &first), 20);
    pl_store_close(s);
    /* the upgrade from schema 12 splits the ranges the same way */
    as_older_schema(path, "DROP TABLE span_buckets;"
                          "CREATE INDEX spans_by_service ON spans(service, start_ns);"
                          "PRAGMA user_version = 12");
    s = open_rw(path);
    REQUIRE(s);
    CHECK_EQ_INT(count_rows(path, UNCOVERED_SPANS), 0);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM span_buckets"), 3);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) * 1000 + max(last - first) FROM span_buckets WHERE bucket = %lld",
             (long long)old_b);
    CHECK_EQ_INT(count_rows(path, sql), 2000);
    CHECK_EQ_INT((int)traces_of_service(s, "delta", BASE, &first), 22);
    pl_store_close(s);
}

static void test_page_size(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "pages.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    write_txn(s, (pl_batch *[]){numbered_spans(0, 5)}, 1);
    pl_store_close(s);
    CHECK_EQ_INT(count_rows(path, "PRAGMA page_size"), 16384);
    /* the same store with 4 KiB pages (as made before) */
    as_older_schema(path, "PRAGMA journal_mode = DELETE; PRAGMA page_size = 4096; VACUUM;"
                          "PRAGMA journal_mode = WAL");
    CHECK_EQ_INT(count_rows(path, "PRAGMA page_size"), 4096);
    s = open_rw(path);
    REQUIRE(s);
    check_numbered_trace(s, 1, 0, 5);
    write_txn(s, (pl_batch *[]){numbered_spans(5, 3), numbered_spans(100, 5)}, 2);
    check_numbered_trace(s, 1, 0, 8);
    check_numbered_trace(s, 11, 100, 5);
    pl_store_close(s);
    CHECK_EQ_INT(count_rows(path, "PRAGMA page_size"), 4096);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM spans"), 13);
}

static int64_t file_bytes(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* A writer with checkpoint_thread: the thread copies the WAL while the
 * writer goes on, the writer copies the rest, and the WAL restarts from its
 * start each round, so it stays a few rounds long however much is written;
 * a reader holding an old snapshot delays the copying and stops nothing;
 * every span is there after a reopen. */
static void test_checkpoint_thread(void)
{
    char path[512], wal[530];
    fresh_path(path, sizeof(path), "ckpt.db");
    snprintf(wal, sizeof(wal), "%s-wal", path);
    pl_err err = {{0}};
    pl_store *s = NULL;
    pl_store_options opt = {
        .busy_timeout_ms = 2000, .checkpoint_thread = true, .checkpoint_pages = 16};
    REQUIRE(pl_store_open(path, &opt, &s, NULL, &err) == PL_OK);
    uint32_t next = 0;
    int64_t written, max_wal = 0;
    for (int t = 0; t < 80; t++) {
        write_txn(s, (pl_batch *[]){numbered_spans(next, 1000)}, 1);
        next += 1000;
        int64_t w = file_bytes(wal);
        max_wal = w > max_wal ? w : max_wal;
    }
    pl_store_checkpoint_stats cs;
    pl_store_checkpoint_counts(s, &cs);
    CHECK(cs.passes >= 2);
    CHECK(cs.tails >= 2);
    /* the WAL's high-water mark: two or three transactions of ~100 pages
     * (3.7 MiB here); without its restarts it would hold all 80 (~120 MiB) */
    sqlite3 *db = NULL;
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    int64_t pages = 0;
    sqlite3_stmt *q = NULL;
    REQUIRE(sqlite3_prepare_v2(db, "PRAGMA page_count", -1, &q, NULL) == SQLITE_OK);
    if (sqlite3_step(q) == SQLITE_ROW)
        pages = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    written = pages * 16384;
    CHECK(written > 8 * (1 << 20));
    CHECK(max_wal > 0);
    CHECK(max_wal < 8 * (1 << 20));

    /* a reader's snapshot: the writer neither waits nor fails */
    REQUIRE(sqlite3_exec(db, "BEGIN; SELECT count(*) FROM spans", NULL, NULL, NULL) == SQLITE_OK);
    for (int t = 0; t < 20; t++) {
        write_txn(s, (pl_batch *[]){numbered_spans(next, 1000)}, 1);
        next += 1000;
    }
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(db);
    for (int t = 0; t < 20; t++) {
        write_txn(s, (pl_batch *[]){numbered_spans(next, 1000)}, 1);
        next += 1000;
    }
    pl_store_close(s);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM spans"), next);
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    REQUIRE(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(q) == SQLITE_ROW &&
          strcmp((const char *)sqlite3_column_text(q, 0), "ok") == 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    s = open_rw(path);
    REQUIRE(s);
    check_numbered_trace(s, 1, 0, 10);
    check_numbered_trace(s, next / 10, next - 10, 10);
    pl_store_close(s);
}

/* The default pipelines store each span twice (as it arrives, then after
 * the correlation processor): past a share of copies the writer looks
 * copies up first and skips them whole. Whichever way a copy goes, the
 * store keeps one row per span, a copy with a profile summary still adds
 * it, and new spans among copies are stored. */
static void test_many_copies(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "copies.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    pl_err err = {{0}};
    pl_store_write_stats ws = {0};
    pl_batch *b = numbered_spans(0, 6000);
    REQUIRE(pl_store_write_batch(s, b, &ws, &err) == PL_OK);
    CHECK_EQ_UINT(ws.spans, 6000);
    memset(&ws, 0, sizeof(ws));
    /* the copies, in batches of 1000 (the check turns on after 4096) */
    for (uint32_t i = 0; i < 6000; i += 1000) {
        pl_batch *c = numbered_spans(i, 1000);
        REQUIRE(pl_store_write_batch(s, c, &ws, &err) == PL_OK);
        pl_batch_free(c);
    }
    CHECK_EQ_UINT(ws.spans, 0);
    CHECK_EQ_UINT(ws.duplicate_spans, 6000);
    /* new spans while copies are looked up first */
    memset(&ws, 0, sizeof(ws));
    pl_batch *n = numbered_spans(6000, 500);
    REQUIRE(pl_store_write_batch(s, n, &ws, &err) == PL_OK);
    CHECK_EQ_UINT(ws.spans, 500);
    pl_batch_free(n);
    /* a copy with the correlation's summary updates the stored span */
    pl_batch *p = numbered_spans(5990, 1);
    pl_span *sp = &p->data.traces.resources[0].scopes[0].spans[0];
    pl_attrs_put(&p->arena, &sp->attrs, PL_BYTES_LIT("pyroscope.profile.id"),
                 pl_value_string(PL_BYTES_LIT("abc")));
    pl_attrs_put(&p->arena, &sp->attrs, PL_BYTES_LIT("profile.samples"), pl_value_int(7));
    memset(&ws, 0, sizeof(ws));
    REQUIRE(pl_store_write_batch(s, p, &ws, &err) == PL_OK);
    CHECK_EQ_UINT(ws.duplicate_spans, 1);
    pl_batch_free(p);
    pl_batch_free(b);
    pl_store_close(s);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM spans"), 6500);
    CHECK_EQ_INT(count_rows(path, "SELECT count(DISTINCT span_id) FROM spans"), 6500);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM spans WHERE profile_id = 'abc' AND "
                                  "profile_samples = 7"),
                 1);
    CHECK_EQ_INT(count_rows(path, "SELECT sum(span_count) FROM traces"), 6500);
}

/* The total of a profile query (pq.scope and its id set), -1 on error. */
static int64_t profile_total(pl_store *s, const pl_profile_query *pq)
{
    pl_profile_result pr;
    pl_err err = {{0}};
    if (pl_store_query_profile(s, pq, &pr, &err) != PL_OK)
        return -1;
    int64_t total = pr.total;
    pl_profile_result_free(&pr);
    return total;
}

/* The CPU time of trace `trace` (PL_PROFILE_TRACE), -1 on error. */
static int64_t trace_total(pl_store *s, uint32_t trace)
{
    pl_profile_query pq = {.scope = PL_PROFILE_TRACE};
    make_trace_id(trace, pq.trace_id);
    return profile_total(s, &pq);
}

/* Samples linked to a stored span reach their trace through it and keep no
 * trace id of their own (no samples_by_trace entry); samples of a span not
 * stored yet keep it, and the trace's profile is the same either way. */
static void test_samples_reach_traces_by_span(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "links.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    /* the root, db.query and decode stored; render (10 ms of samples) not yet */
    CHECK(write_one(s, traces_batch("shop", shop_trace, 3)) == PL_OK);
    CHECK(write_one(s, shop_profile()) == PL_OK);
    const char *with_trace = "SELECT count(*) FROM samples WHERE trace_id IS NOT NULL";
    const char *linked = "SELECT count(*) FROM samples WHERE span_id != 0";
    CHECK_EQ_INT(count_rows(path, linked), 4);
    CHECK_EQ_INT(count_rows(path, with_trace), 1); /* render's */
    CHECK_EQ_INT(trace_total(s, 1), MS(60));
    CHECK(write_one(s, traces_batch("shop", shop_trace + 3, 1)) == PL_OK);
    CHECK_EQ_INT(trace_total(s, 1), MS(60));
    /* more samples of the same spans: still no trace id on those rows */
    CHECK(write_one(s, shop_profile()) == PL_OK);
    CHECK_EQ_INT(count_rows(path, with_trace), 1);
    CHECK_EQ_INT(trace_total(s, 1), MS(120));
    pl_store_close(s);
}

/* The CPU time of span `span` of trace 1 (PL_PROFILE_SPAN), -1 on error. */
static int64_t span_total(pl_store *s, int span)
{
    pl_profile_query pq = {.scope = PL_PROFILE_SPAN};
    make_span_id(1, span, pq.span_id);
    return profile_total(s, &pq);
}

/* Sample rows and their span keys go in PL_STORE_MULTI_ROWS (32) rows per
 * statement and the rest one by one: 60 rows of 60 spans (one full
 * statement and 28 single rows), written twice, add up as rows written one
 * at a time would (the second time through the upsert's conflict path),
 * each keeping its trace id (the spans are not stored), each span one key. */
static void test_sample_rows_many(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "many.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    for (int round = 0; round < 2; round++) {
        prof_builder pb;
        prof_begin(&pb, "many", "cpu", "nanoseconds", NULL, NULL, 0, BASE + S(1));
        for (int k = 0; k < 60; k++) {
            sample_spec sm = {"main;work", k + 1, 0, 1 + (uint32_t)k / 10, k % 10, false, NULL};
            prof_sample(&pb, &sm);
        }
        REQUIRE(write_one(s, pb.b) == PL_OK);
    }
    pl_store_close(s);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM samples"), 60);
    CHECK_EQ_INT(count_rows(path, "SELECT sum(value) FROM samples"), 2 * 1830);
    CHECK_EQ_INT(count_rows(path, "SELECT sum(count) FROM samples"), 120);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM samples WHERE length(trace_id) = 16"), 60);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM (SELECT span_id FROM sample_spans UNION "
                                  "ALL SELECT span_id FROM sample_spans_new)"),
                 60);
    CHECK_EQ_INT(count_rows(path, "SELECT count(DISTINCT span_id) FROM samples"), 60);
}

/* A span's samples are found through the sample key tables (span id ->
 * service, bucket, type): the keys of each write go to the small table and
 * are merged into the large one every span_ids_merge keys; a key in both
 * tables (samples of a span again after a merge) counts its rows once; a
 * store of schema 10 (an index on samples.span_id) is upgraded; retention
 * sweeps the keys of the rows it deleted. */
static void test_sample_span_keys(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "sample_keys.db");
    pl_err err = {{0}};
    pl_store *s = NULL;
    pl_store_options opt = {.busy_timeout_ms = 2000, .span_ids_merge = 3};
    const char *old_keys = "SELECT count(*) FROM sample_spans";
    const char *new_keys = "SELECT count(*) FROM sample_spans_new";
    REQUIRE(pl_store_open(path, &opt, &s, NULL, &err) == PL_OK);
    CHECK(write_one(s, traces_batch("shop", shop_trace, 4)) == PL_OK);
    CHECK(write_one(s, shop_profile()) == PL_OK);
    /* db.query (two stacks, one key), decode, render: 3 keys, merged */
    CHECK_EQ_INT(count_rows(path, new_keys), 0);
    CHECK_EQ_INT(count_rows(path, old_keys), 3);
    CHECK_EQ_INT(span_total(s, 1), MS(30));
    /* db.query again: its key now in both tables */
    prof_builder pb;
    prof_begin(&pb, "shop", "cpu", "nanoseconds", "cpu", "nanoseconds", 10000000, BASE);
    prof_sample(&pb, &(sample_spec){"main;handler;query;sql_exec", (int64_t)MS(20), BASE + MS(30),
                                    1, 1, false, NULL});
    CHECK(write_one(s, pb.b) == PL_OK);
    CHECK_EQ_INT(count_rows(path, new_keys), 1);
    CHECK_EQ_INT(span_total(s, 1), MS(50));
    CHECK_EQ_INT(span_total(s, 2), MS(20));
    CHECK_EQ_INT(trace_total(s, 1), MS(80));
    CHECK_EQ_INT(span_total(s, 0), 0); /* the root: no samples of its own */
    pl_store_close(s);

    /* the same store as schema 10 wrote it: an index, no key tables */
    as_older_schema(path, "DROP TABLE sample_spans; DROP TABLE sample_spans_new;"
                          "CREATE INDEX samples_by_span ON samples(span_id) WHERE span_id != 0;"
                          "PRAGMA user_version = 10");
    REQUIRE(pl_store_open(path, &opt, &s, NULL, &err) == PL_OK);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM sqlite_master WHERE name = "
                                  "'samples_by_span'"),
                 0);
    CHECK_EQ_INT(count_rows(path, old_keys), 3);
    CHECK_EQ_INT(span_total(s, 1), MS(50));
    CHECK_EQ_INT(span_total(s, 3), MS(10));
    CHECK_EQ_INT(trace_total(s, 1), MS(80));

    /* retention deletes every sample row: the keys are swept */
    pl_store_retention_stats rs;
    uint64_t later = BASE + S(7200);
    REQUIRE(pl_store_enforce_retention(s, later, S(3600), 0, false, &rs, &err) == PL_OK);
    CHECK(rs.sample_rows_deleted >= 4);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM samples"), 0);
    CHECK_EQ_INT(count_rows(path, old_keys), 0);
    CHECK_EQ_INT(count_rows(path, new_keys), 0);
    /* written again: found again */
    CHECK(write_one(s, traces_batch("shop", shop_trace, 4)) == PL_OK);
    CHECK(write_one(s, shop_profile()) == PL_OK);
    CHECK_EQ_INT(span_total(s, 1), MS(30));
    pl_store_close(s);
}

static void test_write_many_matches_one_by_one(void)
{
    pl_batch *batches[8];
    size_t n = 0;
    span_spec t9[] = {{9, 1, 0, "child b", BASE + MS(5), BASE + MS(8), 2},
                      {9, 0, -1, "root 9", BASE, BASE + MS(20), 0}};
    span_spec t3[] = {{3, 0, -1, "root 3", BASE + MS(1), BASE + MS(9), 0}};
    span_spec t9b[] = {{9, 2, 1, "grandchild", BASE + MS(6), BASE + MS(7), 0}};
    batches[n++] = traces_batch("shop", t9, 2);
    batches[n++] = shop_profile();
    batches[n++] = traces_batch("cart", t3, 1);
    pl_batch *tb = batches[n - 1];
    tb->metadata.items = pl_batch_alloc(tb, sizeof(pl_kv));
    tb->metadata.items[0] = (pl_kv){.key = pl_batch_bytes(tb, "tenant", 6),
                                    .value = pl_value_string(pl_batch_bytes(tb, "team-a", 6))};
    tb->metadata.n = 1;
    batches[n++] = traces_batch("shop", shop_trace, 4);
    batches[n++] = traces_batch("shop", t9b, 1);
    batches[n++] = shop_profile(); /* the same samples again: values double */
    /* correlation's later copy of db.query, with its profile summary */
    pl_batch *copy = traces_batch("shop", &shop_trace[1], 1);
    pl_span *sp = &copy->data.traces.resources[0].scopes[0].spans[0];
    pl_attrs_put(&copy->arena, &sp->attrs, pl_batch_bytes(copy, "profile.samples", 15),
                 pl_value_int(7));
    batches[n++] = copy;

    char one[512], many[512];
    fresh_path(one, sizeof(one), "one.db");
    fresh_path(many, sizeof(many), "many.db");
    pl_store *a = open_rw(one), *b = open_rw(many);
    REQUIRE(a && b);
    pl_err err = {{0}};
    pl_store_write_stats sa = {0}, sb = {0};
    REQUIRE(pl_store_begin(a, &err) == PL_OK);
    for (size_t i = 0; i < n; i++)
        REQUIRE(pl_store_write(a, batches[i], &sa, &err) == PL_OK);
    REQUIRE(pl_store_commit(a, &err) == PL_OK);
    REQUIRE(pl_store_begin(b, &err) == PL_OK);
    REQUIRE(pl_store_write_many(b, (const pl_batch *const *)batches, n, &sb, &err) == PL_OK);
    REQUIRE(pl_store_commit(b, &err) == PL_OK);
    CHECK_EQ_UINT(sb.spans, 8);
    CHECK_EQ_UINT(sb.duplicate_spans, 1);
    CHECK_EQ_UINT(sa.spans, sb.spans);
    CHECK_EQ_UINT(sa.samples, sb.samples);
    CHECK(sb.sample_rows < sa.sample_rows); /* the two profiles' rows merged */
    pl_store_close(a);
    pl_store_close(b);

    pl_buf da, db;
    pl_buf_init(&da);
    pl_buf_init(&db);
    dump_rows(one, &da);
    dump_rows(many, &db);
    REQUIRE(pl_buf_ok(&da) && pl_buf_ok(&db));
    CHECK(da.len == db.len && memcmp(da.data, db.data, da.len) == 0);
    if (da.len != db.len || memcmp(da.data, db.data, da.len) != 0)
        fprintf(stderr, "one by one:\n%.*s\nmany:\n%.*s\n", (int)da.len, (const char *)da.data,
                (int)db.len, (const char *)db.data);
    /* and what that is: trace 9 whole (3 spans, 1 error, its root), the
     * tenant kept, db.query's summary, the samples doubled */
    CHECK(strstr((const char *)db.data, "|root 9|shop|") != NULL);
    CHECK(strstr((const char *)db.data, "|3|1|20000000|NULL|") != NULL);
    CHECK(strstr((const char *)db.data, "|team-a|") != NULL);
    CHECK(strstr((const char *)db.data, "|db.query|shop|") != NULL);
    pl_store *r = open_ro(many);
    REQUIRE(r);
    pl_trace_detail d;
    uint8_t tid[16];
    make_trace_id(1, tid);
    REQUIRE(pl_store_query_trace(r, tid, 3, &d, &err) == PL_OK);
    const pl_span_row *q = find_span(&d, "db.query");
    REQUIRE(q);
    CHECK_EQ_INT(q->cpu_ns, 2 * (int64_t)MS(30));
    pl_trace_detail_free(&d);
    pl_store_close(r);
    pl_buf_free(&da);
    pl_buf_free(&db);
    for (size_t i = 0; i < n; i++)
        pl_batch_free(batches[i]);
}

int main(void)
{
    pl_test_watch_plans();
    if (!tmp_root_make("proflink-store-test"))
        return 1;
    PL_RUN(test_round_trip_spans_then_samples);
    PL_RUN(test_round_trip_samples_then_spans);
    PL_RUN(test_duplicate_spans_and_repeated_samples);
    PL_RUN(test_many_copies);
    PL_RUN(test_samples_reach_traces_by_span);
    PL_RUN(test_sample_span_keys);
    PL_RUN(test_sample_rows_many);
    PL_RUN(test_write_many_matches_one_by_one);
    PL_RUN(test_trace_span_ranges);
    PL_RUN(test_span_buckets);
    PL_RUN(test_page_size);
    PL_RUN(test_span_id_tables);
    PL_RUN(test_span_ids_late_span);
    PL_RUN(test_checkpoint_thread);
    PL_RUN(test_sample_types_and_labels);
    PL_RUN(test_odd_samples);
    PL_RUN(test_traces_filters_and_order);
    PL_RUN(test_traces_many_in_window);
    PL_RUN(test_retention_by_age);
    PL_RUN(test_retention_by_size);
    PL_RUN(test_retention_by_size_samples);
    PL_RUN(test_writes_while_querying);
    PL_RUN(test_reopen_previous_run);
    PL_RUN(test_corrupt_file_store);
    PL_RUN(test_corrupted_pages_store);
    PL_RUN(test_exporter_round_trip);
    PL_RUN(test_exporter_corrupt_file);
    PL_RUN(test_exporter_locked_database);
    PL_RUN(test_exporter_retention);
    PL_RUN(test_exporter_size_limit);
    PL_RUN(test_json_api);
    PL_RUN(test_svg_is_self_contained);
    PL_RUN(pl_test_plans_checked);
    return tmp_root_done();
}
