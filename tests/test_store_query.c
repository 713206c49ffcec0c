/*
 * test_store_query.c: what the store shows and how the web view asks.
 *
 * Time, not counts (CPU, else wall, else a sample count, never a heap
 * profile), also for samples stored after their spans; the upgrade of a
 * schema-3 store; the search filters (root operation, until, errors only,
 * minimum time, order by time); the link ratio per service; a span's flame
 * graph with its descendants; the pprof and speedscope exports (the pprof
 * read back with proflink's own decoder); and the query API answering on its
 * own thread while the caller's loop does not run at all.
 *
 * Each test works in its own directory under $TMPDIR.
 */
#include "sqlite_plans.h"
#include "store_fixtures.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "proto/pprof.h"

/* Time, not counts: a Node-style service sends a wall profile (samples:count
 * with a wall period, and wall:microseconds) after its spans were stored.
 * The spans and the trace then show wall time in nanoseconds, not a sample
 * count; a profile without any clock shows a count labelled as one; heap
 * profiles never pass for time. */
static void test_time_not_counts(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "wall.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    pl_err err = {{0}};
    CHECK(write_one(s, traces_batch("node", shop_trace, 4)) == PL_OK);
    uint8_t tid[16];
    make_trace_id(1, tid);
    pl_trace_detail d;
    REQUIRE(pl_store_query_trace(s, tid, 3, &d, &err) == PL_OK);
    const pl_span_row *q = find_span(&d, "db.query");
    REQUIRE(q);
    CHECK_EQ_INT(q->time_kind, PL_TIME_NONE); /* no samples yet */
    CHECK_EQ_INT(d.summary.time_kind, PL_TIME_NONE);
    pl_trace_detail_free(&d);

    /* the wall profile arrives later: 10ms period in microseconds */
    prof_builder pb;
    prof_begin(&pb, "node", "samples", "count", "wall", "microseconds", 10000, BASE);
    sample_spec c1 = {"main;handler;query;spin", 3, 0, 1, 1, true, NULL};
    sample_spec c2 = {"main;handler;query;decode", 2, 0, 1, 2, true, NULL};
    prof_sample(&pb, &c1);
    prof_sample(&pb, &c2);
    CHECK(write_one(s, pb.b) == PL_OK);
    prof_begin(&pb, "node", "wall", "microseconds", "wall", "microseconds", 10000, BASE);
    sample_spec w1 = {"main;handler;query;spin", 30000, 0, 1, 1, true, NULL};
    sample_spec w2 = {"main;handler;query;decode", 20000, 0, 1, 2, true, NULL};
    prof_sample(&pb, &w1);
    prof_sample(&pb, &w2);
    CHECK(write_one(s, pb.b) == PL_OK);

    REQUIRE(pl_store_query_trace(s, tid, 3, &d, &err) == PL_OK);
    q = find_span(&d, "db.query");
    REQUIRE(q);
    CHECK_EQ_INT(q->time_kind, PL_TIME_WALL);
    CHECK_EQ_INT(q->time, MS(30)); /* 30000us, and 3 x 10ms: one type counts, not both */
    CHECK_EQ_INT(q->cpu_ns, 0);
    REQUIRE(q->n_top >= 1);
    CHECK_EQ_STR(q->top[0].name, "spin");
    CHECK_EQ_INT(q->top[0].self, MS(30)); /* nanoseconds, not 3 samples */
    const pl_span_row *dec = find_span(&d, "decode");
    REQUIRE(dec);
    CHECK_EQ_INT(dec->time_kind, PL_TIME_WALL);
    CHECK_EQ_INT(dec->time, MS(20));
    CHECK_EQ_INT(d.summary.time_kind, PL_TIME_WALL);
    CHECK_EQ_INT(d.summary.time, MS(50));
    pl_buf js;
    pl_buf_init(&js);
    pl_json_trace(&d, &js);
    pl_buf_append_byte(&js, 0);
    CHECK(strstr((const char *)js.data,
                 "\"time\":{\"kind\":\"wall\",\"value\":30000000,\"unit\":\"nanoseconds\"}") !=
          NULL);
    pl_buf_free(&js);
    pl_trace_detail_free(&d);

    pl_trace_list list;
    pl_trace_query tq = {0};
    REQUIRE(pl_store_query_traces(s, &tq, &list, &err) == PL_OK);
    REQUIRE(list.n == 1);
    CHECK_EQ_INT(list.items[0].time_kind, PL_TIME_WALL);
    CHECK_EQ_INT(list.items[0].time, MS(50));
    char text[32];
    pl_format_time(list.items[0].time_kind, list.items[0].time, text, sizeof(text));
    CHECK_EQ_STR(text, "50.0ms wall");
    pl_trace_list_free(&list);

    /* flame graph and top of the service: wall nanoseconds, with the types */
    pl_profile_query pq = {0};
    pq.scope = PL_PROFILE_SERVICE;
    pq.service = "node";
    pq.time_only = true;
    pl_profile_result pr;
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_STR(pr.type, "wall");
    CHECK_EQ_STR(pr.unit, "nanoseconds");
    CHECK_EQ_INT(pr.total, MS(50));
    CHECK_EQ_INT(folded_value(&pr, "main;handler;query;spin"), MS(30));
    REQUIRE(pr.n_types == 3);
    CHECK_EQ_STR(pr.types[0], "wall");
    CHECK_EQ_STR(pr.types[1], "samples:count");
    CHECK_EQ_STR(pr.types[2], "wall:microseconds");
    pl_profile_result_free(&pr);
    pq.type = "cpu"; /* there is no CPU time here */
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_INT(pr.total, 0);
    pl_profile_result_free(&pr);
    pq.type = "samples";
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_STR(pr.unit, "count");
    CHECK_EQ_INT(pr.total, 5);
    pl_profile_result_free(&pr);

    /* CPU wins over wall when both exist */
    prof_begin(&pb, "node", "cpu", "nanoseconds", "cpu", "nanoseconds", 10000000, BASE);
    sample_spec cp = {"main;handler;query;spin", (int64_t)MS(4), 0, 1, 1, true, NULL};
    prof_sample(&pb, &cp);
    CHECK(write_one(s, pb.b) == PL_OK);
    REQUIRE(pl_store_query_trace(s, tid, 3, &d, &err) == PL_OK);
    q = find_span(&d, "db.query");
    REQUIRE(q);
    CHECK_EQ_INT(q->time_kind, PL_TIME_CPU);
    CHECK_EQ_INT(q->time, MS(4));
    CHECK_EQ_INT(d.summary.time_kind, PL_TIME_CPU);
    CHECK_EQ_INT(d.summary.time, MS(4));
    pl_trace_detail_free(&d);
    pl_store_close(s);

    /* no clock at all: a count, labelled as one */
    fresh_path(path, sizeof(path), "count.db");
    s = open_rw(path);
    REQUIRE(s);
    CHECK(write_one(s, traces_batch("ruby", shop_trace, 4)) == PL_OK);
    prof_begin(&pb, "ruby", "samples", "count", NULL, NULL, 0, BASE);
    sample_spec n1 = {"main;work", 7, 0, 1, 1, true, NULL};
    prof_sample(&pb, &n1);
    CHECK(write_one(s, pb.b) == PL_OK);
    prof_begin(&pb, "ruby", "inuse_space", "bytes", NULL, NULL, 0, BASE);
    sample_spec h1 = {"main;alloc", 1 << 20, 0, 1, 2, true, NULL};
    prof_sample(&pb, &h1);
    CHECK(write_one(s, pb.b) == PL_OK);
    REQUIRE(pl_store_query_trace(s, tid, 3, &d, &err) == PL_OK);
    q = find_span(&d, "db.query");
    REQUIRE(q);
    CHECK_EQ_INT(q->time_kind, PL_TIME_COUNT);
    CHECK_EQ_INT(q->time, 7);
    dec = find_span(&d, "decode"); /* heap samples only: no time */
    REQUIRE(dec);
    CHECK_EQ_INT(dec->time_kind, PL_TIME_NONE);
    CHECK_EQ_INT(d.summary.time_kind, PL_TIME_COUNT);
    CHECK_EQ_INT(d.summary.time, 7);
    pl_format_time(q->time_kind, q->time, text, sizeof(text));
    CHECK_EQ_STR(text, "7 samples");
    pl_trace_detail_free(&d);
    /* top of the heap-only span: nothing unless asked; a flame graph falls back */
    memset(&pq, 0, sizeof(pq));
    pq.scope = PL_PROFILE_SPAN;
    make_span_id(1, 2, pq.span_id);
    pq.time_only = true;
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_INT(pr.total, 0);
    REQUIRE(pr.n_types == 1);
    CHECK_EQ_STR(pr.types[0], "inuse_space:bytes");
    pl_profile_result_free(&pr);
    pq.time_only = false;
    REQUIRE(pl_store_query_profile(s, &pq, &pr, &err) == PL_OK);
    CHECK_EQ_STR(pr.type, "inuse_space");
    CHECK_EQ_INT(pr.total, 1 << 20);
    pl_profile_result_free(&pr);
    pl_store_close(s);
}

/* A store written before wall time was kept (schema 3) is upgraded in place
 * by a writer; readers ask for that first. */
static void test_upgrade_from_schema_3(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "v3.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    CHECK(write_one(s, traces_batch("node", shop_trace, 4)) == PL_OK);
    pl_store_close(s);
    sqlite3 *db = NULL;
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db,
                       "ALTER TABLE samples DROP COLUMN wall_ns;"
                       "ALTER TABLE service_profiles DROP COLUMN wall_ns; PRAGMA user_version = 3",
                       NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    pl_err err = {{0}};
    pl_store_options ro = {.read_only = true};
    pl_store *r = NULL;
    CHECK(pl_store_open(path, &ro, &r, NULL, &err) != PL_OK);
    CHECK(strstr(err.msg, "older proflink") != NULL);
    s = open_rw(path);
    REQUIRE(s);
    prof_builder pb;
    prof_begin(&pb, "node", "wall", "microseconds", NULL, NULL, 0, BASE);
    sample_spec w = {"main;spin", 1500, 0, 1, 1, true, NULL};
    prof_sample(&pb, &w);
    CHECK(write_one(s, pb.b) == PL_OK);
    pl_store_close(s);
    r = open_ro(path);
    REQUIRE(r);
    uint8_t tid[16];
    make_trace_id(1, tid);
    pl_trace_detail d;
    REQUIRE(pl_store_query_trace(r, tid, 3, &d, &err) == PL_OK);
    const pl_span_row *q = find_span(&d, "db.query");
    REQUIRE(q);
    CHECK_EQ_INT(q->time_kind, PL_TIME_WALL);
    CHECK_EQ_INT(q->time, 1500000);
    pl_trace_detail_free(&d);
    pl_store_close(r);
}

/* Three traces: shop 1 (errors, GET /users, 100ms), shop 2 (GET /cart,
 * 300ms, no error, more CPU), api 3 (GET /users, 50ms). */
static pl_store *search_store(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "search.db");
    pl_store *s = open_rw(path);
    if (!s)
        return NULL;
    static const span_spec cart[] = {
        {2, 0, -1, "GET /cart", BASE + S(60), BASE + S(60) + MS(300), 0},
        {2, 1, 0, "load", BASE + S(60) + MS(10), BASE + S(60) + MS(200), 0},
    };
    static const span_spec api[] = {
        {3, 0, -1, "GET /users", BASE + S(120), BASE + S(120) + MS(50), 0},
    };
    CHECK(write_one(s, traces_batch("shop", shop_trace, 4)) == PL_OK);
    CHECK(write_one(s, traces_batch("shop", cart, 2)) == PL_OK);
    CHECK(write_one(s, traces_batch("api", api, 1)) == PL_OK);
    CHECK(write_one(s, shop_profile()) == PL_OK); /* trace 1: 60ms CPU */
    prof_builder pb;
    prof_begin(&pb, "shop", "cpu", "nanoseconds", NULL, NULL, 0, BASE + S(60));
    sample_spec c = {"main;cart;load", (int64_t)MS(150), 0, 2, 1, false, NULL};
    prof_sample(&pb, &c);
    CHECK(write_one(s, pb.b) == PL_OK);
    return s;
}

static void test_search_filters(void)
{
    pl_store *s = search_store();
    REQUIRE(s);
    pl_err err = {{0}};
    pl_trace_list l;
    pl_trace_query q = {0};
    REQUIRE(pl_store_query_traces(s, &q, &l, &err) == PL_OK);
    REQUIRE(l.n == 3);
    CHECK_EQ_STR(l.items[0].root_name, "GET /cart"); /* slowest first */
    pl_trace_list_free(&l);

    q.root_name = "GET /users";
    REQUIRE(pl_store_query_traces(s, &q, &l, &err) == PL_OK);
    REQUIRE(l.n == 2);
    CHECK_EQ_UINT(l.items[0].duration_ns, MS(100));
    CHECK_EQ_UINT(l.items[1].duration_ns, MS(50));
    pl_trace_list_free(&l);

    q.errors_only = true; /* GET /users with an error: trace 1 only */
    REQUIRE(pl_store_query_traces(s, &q, &l, &err) == PL_OK);
    REQUIRE(l.n == 1);
    CHECK_EQ_UINT(l.items[0].error_count, 1);
    pl_trace_list_free(&l);

    memset(&q, 0, sizeof(q));
    q.until_ns = BASE + S(90); /* started by then: traces 1 and 2 */
    REQUIRE(pl_store_query_traces(s, &q, &l, &err) == PL_OK);
    CHECK_EQ_UINT(l.n, 2);
    pl_trace_list_free(&l);
    q.since_ns = BASE + S(30);
    REQUIRE(pl_store_query_traces(s, &q, &l, &err) == PL_OK);
    REQUIRE(l.n == 1);
    CHECK_EQ_STR(l.items[0].root_name, "GET /cart");
    pl_trace_list_free(&l);

    memset(&q, 0, sizeof(q));
    q.min_time = (int64_t)MS(100); /* trace 2 has 150ms, trace 1 60ms, trace 3 none */
    REQUIRE(pl_store_query_traces(s, &q, &l, &err) == PL_OK);
    REQUIRE(l.n == 1);
    CHECK_EQ_STR(l.items[0].root_name, "GET /cart");
    CHECK_EQ_INT(l.items[0].time, MS(150));
    pl_trace_list_free(&l);

    memset(&q, 0, sizeof(q));
    q.by_time = true; /* by time: 150ms, 60ms, then the trace without samples */
    REQUIRE(pl_store_query_traces(s, &q, &l, &err) == PL_OK);
    REQUIRE(l.n == 3);
    CHECK_EQ_INT(l.items[0].time, MS(150));
    CHECK_EQ_INT(l.items[1].time, MS(60));
    CHECK_EQ_INT(l.items[2].time_kind, PL_TIME_NONE);
    pl_trace_list_free(&l);
    q.limit = 1;
    REQUIRE(pl_store_query_traces(s, &q, &l, &err) == PL_OK);
    REQUIRE(l.n == 1);
    CHECK_EQ_INT(l.items[0].time, MS(150));
    pl_trace_list_free(&l);
    pl_store_close(s);
}

static void test_link_ratio(void)
{
    pl_store *s = search_store();
    REQUIRE(s);
    pl_err err = {{0}};
    pl_link_stats ls;
    REQUIRE(pl_store_query_links(s, 0, NULL, &ls, &err) == PL_OK);
    CHECK_EQ_UINT(ls.traces, 3);
    REQUIRE(ls.n == 2);
    CHECK_EQ_STR(ls.items[0].service, "api");
    CHECK_EQ_UINT(ls.items[0].spans, 1);
    CHECK_EQ_UINT(ls.items[0].linked, 0);
    CHECK_EQ_STR(ls.items[1].service, "shop");
    CHECK_EQ_UINT(ls.items[1].spans, 6);
    CHECK_EQ_UINT(ls.items[1].linked, 4); /* db.query, decode, render, load */
    pl_buf b;
    pl_buf_init(&b);
    pl_json_links(&ls, &b);
    pl_buf_append_byte(&b, 0);
    CHECK(strstr((const char *)b.data, "{\"service\":\"shop\",\"spans\":6,\"linked\":4}") != NULL);
    pl_buf_free(&b);
    pl_link_stats_free(&ls);
    REQUIRE(pl_store_query_links(s, BASE + S(100), NULL, &ls, &err) == PL_OK); /* trace 3 only */
    REQUIRE(ls.n == 1);
    CHECK_EQ_STR(ls.items[0].service, "api");
    pl_link_stats_free(&ls);
    pl_store_close(s);
}

/* A new store named `name` holding the shop trace and its profile; NULL
 * when it could not be made. */
static pl_store *shop_store(const char *name)
{
    char path[512];
    fresh_path(path, sizeof(path), name);
    pl_store *s = open_rw(path);
    if (s && (write_one(s, traces_batch("shop", shop_trace, 4)) != PL_OK ||
              write_one(s, shop_profile()) != PL_OK)) {
        pl_store_close(s);
        return NULL;
    }
    return s;
}

static void test_span_with_descendants(void)
{
    pl_store *s = shop_store("desc.db");
    REQUIRE(s);
    pl_err err = {{0}};
    pl_profile_query q = {0};
    q.scope = PL_PROFILE_SPAN;
    make_span_id(1, 1, q.span_id); /* db.query: 30ms own, decode below it 20ms */
    pl_profile_result r;
    REQUIRE(pl_store_query_profile(s, &q, &r, &err) == PL_OK);
    CHECK_EQ_INT(r.total, MS(30));
    pl_profile_result_free(&r);
    q.descendants = true;
    REQUIRE(pl_store_query_profile(s, &q, &r, &err) == PL_OK);
    CHECK_EQ_INT(r.total, MS(50));
    CHECK_EQ_INT(folded_value(&r, "main;handler;query;json_decode"), MS(20));
    CHECK_EQ_INT(folded_value(&r, "main;handler;render;template"), -1); /* a sibling */
    pl_profile_result_free(&r);
    make_span_id(1, 0, q.span_id); /* the root: everything linked, not the unlinked gc */
    REQUIRE(pl_store_query_profile(s, &q, &r, &err) == PL_OK);
    CHECK_EQ_INT(r.total, MS(60));
    CHECK_EQ_INT(folded_value(&r, "main;gc"), -1);
    pl_profile_result_free(&r);
    make_span_id(1, 3, q.span_id); /* a leaf: itself */
    REQUIRE(pl_store_query_profile(s, &q, &r, &err) == PL_OK);
    CHECK_EQ_INT(r.total, MS(10));
    pl_profile_result_free(&r);
    make_span_id(9, 9, q.span_id); /* unknown: empty, not an error */
    REQUIRE(pl_store_query_profile(s, &q, &r, &err) == PL_OK);
    CHECK_EQ_INT(r.total, 0);
    pl_profile_result_free(&r);
    pl_store_close(s);
}

static void test_exports(void)
{
    pl_store *s = shop_store("exp.db");
    REQUIRE(s);
    pl_err err = {{0}};
    pl_profile_query q = {0};
    q.scope = PL_PROFILE_TRACE;
    make_trace_id(1, q.trace_id);
    pl_profile_result r;
    REQUIRE(pl_store_query_profile(s, &q, &r, &err) == PL_OK);
    REQUIRE(r.n_stacks == 4);

    /* pprof, read back with proflink's own decoder */
    pl_buf b;
    pl_buf_init(&b);
    REQUIRE(pl_flamegraph_pprof(&r, BASE, &b) == 0);
    CHECK(b.len > 2 && b.data[0] == 0x1f && b.data[1] == 0x8b);
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    REQUIRE(pl_gunzip(b.data, b.len, 1 << 20, &raw, &raw_len, &err) == PL_OK);
    pl_pprof_meta meta = {0};
    pl_batch *batch = pl_pprof_decode(raw, raw_len, &meta, &err);
    if (!batch)
        fprintf(stderr, "  pprof decode: %s\n", err.msg);
    REQUIRE(batch);
    const pl_profiles *ps = &batch->data.profiles;
    int64_t sum = 0;
    bool saw_type = false, saw_exec = false;
    for (uint32_t i = 0; i < ps->n_resources; i++)
        for (uint32_t j = 0; j < ps->resources[i].n_scopes; j++)
            for (uint32_t k = 0; k < ps->resources[i].scopes[j].n_profiles; k++) {
                const pl_profile *p = &ps->resources[i].scopes[j].profiles[k];
                saw_type |=
                    pl_bytes_eq_cstr(pl_dict_string(&ps->dict, p->sample_type.type_strindex),
                                     "cpu") &&
                    pl_bytes_eq_cstr(pl_dict_string(&ps->dict, p->sample_type.unit_strindex),
                                     "nanoseconds");
                for (uint32_t n = 0; n < p->n_samples; n++)
                    for (uint32_t v = 0; v < p->samples[n].n_values; v++)
                        sum += p->samples[n].values[v];
            }
    for (uint32_t f = 0; f < ps->dict.n_functions; f++)
        saw_exec |= pl_bytes_eq_cstr(pl_dict_string(&ps->dict, ps->dict.functions[f].name_strindex),
                                     "sql_exec");
    CHECK(saw_type);
    CHECK(saw_exec);
    CHECK_EQ_INT(sum, MS(60));
    pl_batch_free(batch);
    free(raw);

    /* speedscope: shared frames, root-first samples, weights */
    pl_buf_reset(&b);
    REQUIRE(pl_flamegraph_speedscope(&r, "trace 1", &b) == 0);
    pl_buf_append_byte(&b, 0);
    const char *j = (const char *)b.data;
    CHECK(strstr(j, "\"$schema\":\"https://www.speedscope.app/file-format-schema.json\"") != NULL);
    CHECK(strstr(j, "\"unit\":\"nanoseconds\",\"startValue\":0,\"endValue\":60000000") != NULL);
    CHECK(strstr(j, "{\"name\":\"sql_exec\"}") != NULL);
    CHECK(strstr(j, "\"weights\":[") != NULL);
    /* frames are shared: "main" once */
    const char *first = strstr(j, "{\"name\":\"main\"}");
    CHECK(first && !strstr(first + 1, "{\"name\":\"main\"}"));
    pl_buf_free(&b);
    pl_profile_result_free(&r);
    pl_store_close(s);
}

/* A blocking GET on the calling thread: nothing runs any event loop here. */
static int get_blocking(int port, const char *path, char *out, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    size_t len = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        char req[512];
        int n = snprintf(req, sizeof(req),
                         "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
        if (write(fd, req, (size_t)n) == n) {
            ssize_t got;
            while (len + 1 < cap && (got = read(fd, out + len, cap - 1 - len)) > 0)
                len += (size_t)got;
        }
    }
    out[len] = 0;
    close(fd);
    return (int)len;
}

static void test_api_on_its_own_thread(void)
{
    pl_store *s = search_store();
    REQUIRE(s);
    char path[512];
    snprintf(path, sizeof(path), "%s", pl_store_path(s));
    pl_store_close(s);
    pl_store_live live = {.spans = 7, .samples = 11};
    pl_err err = {{0}};
    pl_sqlite_api *api = pl_sqlite_api_start("127.0.0.1:0", path, &live, &err);
    REQUIRE(api);
    int port = pl_sqlite_api_port(api);
    static char resp[1 << 16];
    get_blocking(port, "/api/traces?since=0", resp, sizeof(resp));
    CHECK(strstr(resp, "HTTP/1.1 200") == resp);
    CHECK(strstr(resp, "\"root_name\":\"GET /cart\"") != NULL);
    CHECK(strstr(resp, "\"time\":{\"kind\":\"cpu\",\"value\":150000000") != NULL);
    get_blocking(port, "/api/traces?since=0&errors=1", resp, sizeof(resp));
    CHECK(strstr(resp, "GET /users") != NULL && strstr(resp, "GET /cart") == NULL);
    get_blocking(port, "/api/traces?since=0&sort=sideways", resp, sizeof(resp));
    CHECK(strstr(resp, "HTTP/1.1 400") == resp);
    get_blocking(port, "/api/traces?since=0&min_cpu=lots", resp, sizeof(resp));
    CHECK(strstr(resp, "HTTP/1.1 400") == resp);
    get_blocking(port, "/api/status", resp, sizeof(resp));
    CHECK(strstr(resp, "\"spans_stored\":7,\"samples_stored\":11") != NULL);
    get_blocking(port, "/api/links?since=0", resp, sizeof(resp));
    CHECK(strstr(resp, "\"service\":\"shop\",\"spans\":6,\"linked\":4") != NULL);
    get_blocking(port, "/", resp, sizeof(resp));
    CHECK(strstr(resp, "HTTP/1.1 200") == resp);
    CHECK(strstr(resp, "text/html") != NULL);
    CHECK(strstr(resp, "Content-Security-Policy: default-src 'self'") != NULL);
    get_blocking(port, "/app.js", resp, sizeof(resp));
    CHECK(strstr(resp, "text/javascript") != NULL);
    get_blocking(port, "/nothing.js", resp, sizeof(resp));
    CHECK(strstr(resp, "HTTP/1.1 404") == resp);
    get_blocking(port, "/api/flamegraph?trace=ab000000000000000000000000000002&format=speedscope",
                 resp, sizeof(resp));
    CHECK(strstr(resp, "\"name\":\"load\"") != NULL);
    get_blocking(port, "/api/flamegraph?span=cd00000100000001&descendants=1&format=folded", resp,
                 sizeof(resp));
    CHECK(strstr(resp, "main;handler;query;json_decode 20000000") != NULL);
    pl_sqlite_api_close(api);
}

int main(void)
{
    pl_test_watch_plans();
    if (!tmp_root_make("proflink-storeq-test"))
        return 1;
    PL_RUN(test_time_not_counts);
    PL_RUN(test_upgrade_from_schema_3);
    PL_RUN(test_search_filters);
    PL_RUN(test_link_ratio);
    PL_RUN(test_span_with_descendants);
    PL_RUN(test_exports);
    PL_RUN(test_api_on_its_own_thread);
    PL_RUN(pl_test_plans_checked);
    return tmp_root_done();
}
