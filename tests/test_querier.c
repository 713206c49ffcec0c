/*
 * test_querier.c: the Pyroscope querier's label-selector parser and its
 * flame graph encoding (store/querier_selector.c, store/querier_flame.c).
 *
 * The levels test uses Pyroscope's own example (pkg/model/flamegraph_test.go:
 * stacks a;b;e=1, a;c=2, a;c;d=1) and checks every value; the max_nodes
 * test checks which nodes survive and that the cut ones become `other`; a
 * larger random tree is decoded back (as Grafana's levelsToTree does) and
 * every node must lie inside its parent with the totals preserved.
 *
 * The Connect tests go through the store API's handler (HTTP without
 * sockets) on the store fixture (tests/store_fixtures.h: trace 1 of "shop",
 * CPU samples db.query 30 ms, decode 20 ms, render 10 ms, 5 ms unlinked):
 * protobuf and JSON bodies, both JSON spellings, the bounds and the errors.
 */
#include "net/http_server.h"
#include "proto/pb_wire.h"
#include "store/querier_internal.h"
#include "store/store_internal.h"
#include "sqlite_plans.h"
#include "store_fixtures.h"

/* ---- selectors ---------------------------------------------------------- */

static void test_selector_operators(void)
{
    pl_qselector s;
    pl_err err = {{0}};
    const char *text = " { service_name = \"shop\", span_name=~'GET .*' ,env!=\"dev\","
                       " \"http.route\"!~`/health|/ready`, }";
    REQUIRE(pl_qselector_parse(text, strlen(text), &s, &err) == PL_OK);
    REQUIRE(s.n == 4);
    CHECK(strcmp(s.items[0].name, "service_name") == 0 && s.items[0].op == PL_QOP_EQ &&
          strcmp(s.items[0].value, "shop") == 0);
    CHECK(strcmp(s.items[1].name, "span_name") == 0 && s.items[1].op == PL_QOP_RE);
    CHECK(strcmp(s.items[2].name, "env") == 0 && s.items[2].op == PL_QOP_NE);
    CHECK(strcmp(s.items[3].name, "http.route") == 0 && s.items[3].op == PL_QOP_NRE);
    CHECK(pl_qmatcher_matches(&s.items[0], "shop", 4));
    CHECK(!pl_qmatcher_matches(&s.items[0], "shops", 5));
    CHECK(pl_qmatcher_matches(&s.items[1], "GET /a", 6));
    /* anchored: a match inside the value is not enough */
    CHECK(!pl_qmatcher_matches(&s.items[1], "xGET /a", 7));
    CHECK(pl_qmatcher_matches(&s.items[2], "", 0)); /* a missing label is "" */
    CHECK(!pl_qmatcher_matches(&s.items[2], "dev", 3));
    CHECK(!pl_qmatcher_matches(&s.items[3], "/health", 7));
    CHECK(pl_qmatcher_matches(&s.items[3], "/healthz", 8));
    pl_qselector_free(&s);
}

static void test_selector_escapes_and_empty(void)
{
    pl_qselector s;
    pl_err err = {{0}};
    const char *text = "{a=\"q\\\"x\\\\y\\n\\u00e9\\x41\"}";
    REQUIRE(pl_qselector_parse(text, strlen(text), &s, &err) == PL_OK);
    REQUIRE(s.n == 1);
    CHECK(strcmp(s.items[0].value, "q\"x\\y\n\xc3\xa9"
                                   "A") == 0);
    pl_qselector_free(&s);
    REQUIRE(pl_qselector_parse("{}", 2, &s, &err) == PL_OK);
    CHECK(s.n == 0);
    REQUIRE(pl_qselector_parse("", 0, &s, &err) == PL_OK);
    CHECK(s.n == 0);
    REQUIRE(pl_qselector_parse(" {  } ", 6, &s, &err) == PL_OK);
    CHECK(s.n == 0);
}

static void test_selector_errors(void)
{
    static const char *const bad[] = {
        "service_name=\"x\"", /* no braces */
        "{service_name=\"x\"",
        "{service_name==\"x\"}",
        "{service_name=x}",
        "{service_name=\"x}",
        "{=\"x\"}",
        "{a=\"x\" b=\"y\"}",
        "{a=~\"(\"}",
        "{a=\"\\q\"}",
        "{a=\"x\"} trailing",
        "{a=\"\\x0\"}",
        "{a=\"\\ud800\"}",
        "{\"\"=\"x\"}",
        "{a=\"x\",,}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pl_qselector s;
        pl_err err = {{0}};
        pl_status st = pl_qselector_parse(bad[i], strlen(bad[i]), &s, &err);
        if (st != PL_ERR_INVALID)
            fprintf(stderr, "  accepted: %s\n", bad[i]);
        CHECK(st == PL_ERR_INVALID);
        CHECK(strncmp(err.msg, "label selector", 14) == 0);
    }
    /* a NUL byte inside a value */
    pl_qselector s;
    pl_err err = {{0}};
    CHECK(pl_qselector_parse("{a=\"x\0y\"}", 9, &s, &err) == PL_ERR_INVALID);
    /* bounds */
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_append_byte(&b, '{');
    for (int i = 0; i <= PL_QSEL_MAX_MATCHERS; i++)
        pl_buf_printf(&b, "%sl%d=\"v\"", i ? "," : "", i);
    pl_buf_append_byte(&b, '}');
    CHECK(pl_qselector_parse((const char *)b.data, b.len, &s, &err) == PL_ERR_INVALID);
    CHECK(strstr(err.msg, "too many") != NULL);
    pl_buf_free(&b);
}

/* ---- flame graphs ------------------------------------------------------- */

static void add(pl_qtree *t, const char *folded, int64_t v)
{
    int32_t names[32];
    size_t n = 0;
    const char *p = folded;
    while (*p) {
        const char *e = strchr(p, ';');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        names[n++] = pl_qtree_name(t, p, len);
        p += len + (e ? 1 : 0);
    }
    CHECK(pl_qtree_add(t, names, n, v) == 0);
}

static const char *name_at(const pl_qflame *f, int64_t i)
{
    return i >= 0 && (size_t)i < f->n_names ? f->names[i] : "?";
}

static void test_levels_upstream_example(void)
{
    pl_qtree *t = pl_qtree_new();
    REQUIRE(t);
    add(t, "a;b;e", 1);
    add(t, "a;c", 2);
    add(t, "a;c;d", 1);
    pl_qflame f;
    REQUIRE(pl_qtree_flamegraph(t, 0, &f) == 0);
    CHECK_EQ_INT(f.total, 4);
    CHECK_EQ_INT(f.max_self, 2);
    REQUIRE(f.n_levels == 4);
    CHECK(strcmp(f.names[0], "total") == 0);
    /* expected, with names instead of indices (our name order differs) */
    static const int64_t want[4][8] = {
        {0, 4, 0, 0}, {0, 4, 0, 1}, {0, 1, 0, 0, 0, 3, 2, 0}, {0, 1, 1, 0, 2, 1, 1, 0}};
    static const char *const want_names[4][2] = {
        {"total", NULL}, {"a", NULL}, {"b", "c"}, {"e", "d"}};
    static const size_t want_len[4] = {4, 4, 8, 8};
    for (size_t d = 0; d < 4; d++) {
        REQUIRE(f.level_len[d] == want_len[d]);
        for (size_t i = 0; i < want_len[d]; i++) {
            if (i % 4 == 3)
                CHECK(strcmp(name_at(&f, f.levels[d][i]), want_names[d][i / 4]) == 0);
            else
                CHECK_EQ_INT(f.levels[d][i], want[d][i]);
        }
    }
    CHECK_EQ_INT(f.levels[0][3], 0); /* the root's name index */
    pl_qflame_free(&f);
    pl_qtree_free(t);
}

/* Decodes levels as Grafana's levelsToTree does (x from the deltas) and
 * checks that every node lies inside a node of the level above, after that
 * node's self part. */
static void check_nesting(const pl_qflame *f)
{
    for (size_t d = 1; d < f->n_levels; d++) {
        const int64_t *up = f->levels[d - 1], *lv = f->levels[d];
        int64_t end = 0;
        for (size_t i = 0; i + 3 < f->level_len[d]; i += 4) {
            int64_t x = end + lv[i], total = lv[i + 1];
            CHECK(total >= lv[i + 2] && lv[i + 2] >= 0 && total > 0);
            end = x + total;
            bool inside = false;
            int64_t uend = 0;
            for (size_t j = 0; j + 3 < f->level_len[d - 1] && !inside; j += 4) {
                int64_t ux = uend + up[j];
                uend = ux + up[j + 1];
                inside = x >= ux + up[j + 2] && x + total <= ux + up[j + 1];
            }
            if (!inside)
                fprintf(stderr, "  level %zu node at %" PRId64 " outside its parent\n", d, x);
            CHECK(inside);
        }
    }
}

static void test_max_nodes_other(void)
{
    pl_qtree *t = pl_qtree_new();
    REQUIRE(t);
    add(t, "main;big", 100);
    add(t, "main;mid", 50);
    add(t, "main;small1", 2);
    add(t, "main;small2", 1);
    add(t, "main;big;leaf", 10);
    pl_qflame f;
    /* 6 nodes; keep 3: main (163), big (110), mid (50) */
    REQUIRE(pl_qtree_flamegraph(t, 3, &f) == 0);
    CHECK_EQ_INT(f.total, 163);
    REQUIRE(f.n_levels == 4);
    REQUIRE(f.level_len[2] == 12); /* big, mid, other */
    CHECK(strcmp(name_at(&f, f.levels[2][3]), "big") == 0);
    CHECK(strcmp(name_at(&f, f.levels[2][7]), "mid") == 0);
    CHECK(strcmp(name_at(&f, f.levels[2][11]), "other") == 0);
    CHECK_EQ_INT(f.levels[2][9], 3);  /* other's total: small1 + small2 */
    CHECK_EQ_INT(f.levels[2][10], 3); /* all self */
    CHECK_EQ_INT(f.levels[2][8], 0);  /* right after mid */
    /* leaf (10) fell below the threshold: it is big's `other`, after big's
     * own 100 */
    REQUIRE(f.level_len[3] == 4);
    CHECK(strcmp(name_at(&f, f.levels[3][3]), "other") == 0);
    CHECK_EQ_INT(f.levels[3][0], 100);
    CHECK_EQ_INT(f.levels[3][1], 10);
    check_nesting(&f);
    for (size_t i = 0; i < f.n_names; i++)
        CHECK(strcmp(f.names[i], "small1") != 0 && strcmp(f.names[i], "leaf") != 0);
    pl_qflame_free(&f);
    /* without a limit everything is drawn */
    REQUIRE(pl_qtree_flamegraph(t, 100, &f) == 0);
    REQUIRE(f.n_levels == 4);
    CHECK(f.level_len[2] == 16);
    for (size_t i = 0; i < f.n_names; i++)
        CHECK(strcmp(f.names[i], "other") != 0);
    pl_qflame_free(&f);
    pl_qtree_free(t);
}

static void test_random_tree_nests(void)
{
    pl_qtree *t = pl_qtree_new();
    REQUIRE(t);
    uint32_t seed = 12345;
    int64_t sum = 0;
    for (int i = 0; i < 2000; i++) {
        int32_t names[12];
        seed = seed * 1103515245u + 12345u;
        size_t n = 1 + (seed >> 16) % 12;
        for (size_t k = 0; k < n; k++) {
            seed = seed * 1103515245u + 12345u;
            char nm[8];
            snprintf(nm, sizeof(nm), "f%u", (seed >> 16) % 9);
            names[k] = pl_qtree_name(t, nm, strlen(nm));
        }
        int64_t v = 1 + (seed >> 20) % 100;
        sum += v;
        CHECK(pl_qtree_add(t, names, n, v) == 0);
    }
    CHECK_EQ_INT(pl_qtree_total(t), sum);
    for (int64_t max = 10; max <= 100000; max *= 10) {
        pl_qflame f;
        REQUIRE(pl_qtree_flamegraph(t, max, &f) == 0);
        CHECK_EQ_INT(f.total, sum);
        /* every level's totals add up to at most the root's */
        for (size_t d = 0; d < f.n_levels; d++) {
            int64_t lt = 0;
            for (size_t i = 1; i < f.level_len[d]; i += 4)
                lt += f.levels[d][i];
            CHECK(lt <= sum);
        }
        /* self values of all nodes add up to the total */
        int64_t selfs = 0;
        size_t nodes = 0;
        for (size_t d = 0; d < f.n_levels; d++)
            for (size_t i = 2; i < f.level_len[d]; i += 4, nodes++)
                selfs += f.levels[d][i];
        CHECK_EQ_INT(selfs, sum);
        check_nesting(&f);
        pl_qflame_free(&f);
    }
    pl_qtree_free(t);
}

/* ---- Connect transport on the store fixture ------------------------------ */

static pl_sqlite_api *api;

static void api_handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    pl_sqlite_api_handle(arg, req, res);
}

/* One request; returns the HTTP status, the body in `out`. */
static int send_req(const char *method, const char *path, const char *headers, const void *body,
                    size_t len, pl_buf *out)
{
    pl_buf req, raw;
    pl_buf_init(&req);
    pl_buf_init(&raw);
    pl_buf_printf(&req, "%s %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %zu\r\n\r\n", method, path,
                  headers, len);
    pl_buf_append(&req, body, len);
    pl_http_server_options opt;
    pl_sqlite_api_server_options(&opt);
    pl_http_server_feed(&opt, api_handler, api, req.data, req.len, 0, &raw);
    pl_buf_append_byte(&raw, 0);
    int status = raw.len > 12 ? atoi((const char *)raw.data + 9) : 0;
    const char *b = strstr((const char *)raw.data, "\r\n\r\n");
    pl_buf_reset(out);
    if (b)
        pl_buf_append(out, b + 4, raw.len - 1 - (size_t)(b + 4 - (const char *)raw.data));
    pl_buf_append_byte(out, 0);
    out->len--;
    pl_buf_free(&req);
    pl_buf_free(&raw);
    return status;
}

static int call_json(const char *method, const char *json, pl_buf *out)
{
    char path[128];
    snprintf(path, sizeof(path), "/querier.v1.QuerierService/%s", method);
    return send_req("POST", path, "Content-Type: application/json\r\n", json, strlen(json), out);
}

#define TYPE_ID  "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
#define RANGE    "\"start\":1699999990000,\"end\":\"1700000010000\""
#define DB_QUERY "cd00000100000002"

static bool has(const pl_buf *b, const char *s)
{
    if (!strstr((const char *)b->data, s)) {
        fprintf(stderr, "  no %s in %s\n", s, (const char *)b->data);
        return false;
    }
    return true;
}

static void test_connect_json(void)
{
    pl_buf out;
    pl_buf_init(&out);
    CHECK_EQ_INT(call_json("ProfileTypes", "{" RANGE "}", &out), 200);
    CHECK(has(&out, "\"ID\":\"" TYPE_ID "\""));
    CHECK(has(&out, "\"periodUnit\":\"nanoseconds\""));
    /* proto and lowerCamel names alike; int64 as numbers or strings */
    CHECK_EQ_INT(
        call_json("SelectMergeStacktraces",
                  "{\"profile_typeID\":\"" TYPE_ID "\",\"label_selector\":\"{}\"," RANGE "}", &out),
        200);
    CHECK(has(&out, "\"total\":\"65000000\""));
    CHECK(has(&out, "{\"values\":[\"0\",\"65000000\",\"0\",\"0\"]}"));
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           "{\"profileTypeID\":\"" TYPE_ID
                           "\",\"labelSelector\":\"{span_name=\\\"db.query\\\"}\"," RANGE
                           ",\"maxNodes\":\"3\",\"format\":\"PROFILE_FORMAT_FLAMEGRAPH\"}",
                           &out),
                 200);
    CHECK(has(&out, "\"total\":\"30000000\""));
    CHECK(has(&out, "\"other\""));
    /* span profiles: own samples, then with the span below */
    CHECK_EQ_INT(call_json("SelectMergeSpanProfile",
                           "{\"profileTypeID\":\"" TYPE_ID "\",\"spanSelector\":[\"" DB_QUERY
                           "\"]," RANGE "}",
                           &out),
                 200);
    CHECK(has(&out, "\"total\":\"30000000\""));
    CHECK_EQ_INT(call_json("SelectMergeSpanProfile",
                           "{\"profileTypeID\":\"" TYPE_ID "\",\"spanSelector\":[\"" DB_QUERY
                           "\"],\"includeDescendants\":true," RANGE "}",
                           &out),
                 200);
    CHECK(has(&out, "\"total\":\"50000000\""));
    CHECK_EQ_INT(call_json("SelectSeries",
                           "{\"profileTypeID\":\"" TYPE_ID
                           "\",\"labelSelector\":\"{}\",\"step\":\"20\",\"groupBy\":[\"span_name\"]"
                           "," RANGE "}",
                           &out),
                 200);
    CHECK(has(&out, "{\"name\":\"span_name\",\"value\":\"decode\"}"));
    CHECK(has(&out, "\"value\":20000000,\"timestamp\":\"1699999990000\""));
    CHECK_EQ_INT(call_json("LabelValues", "{\"name\":\"span_name\"," RANGE "}", &out), 200);
    /* the spans with samples (the root has none of its own) */
    CHECK(has(&out, "{\"names\":[\"db.query\",\"decode\",\"render\"]}"));
    CHECK_EQ_INT(
        call_json("Series", "{\"matchers\":[],\"labelNames\":[\"service_name\"]," RANGE "}", &out),
        200);
    CHECK(has(&out,
              "{\"labelsSet\":[{\"labels\":[{\"name\":\"service_name\",\"value\":\"shop\"}]}]}"));
    CHECK_EQ_INT(call_json("GetProfileStats", "", &out), 200);
    CHECK(has(&out, "\"dataIngested\":true"));
    pl_buf_free(&out);
}

static void put_str(pl_buf *b, uint32_t field, const char *s)
{
    pl_pb_put_bytes(b, field, s, strlen(s));
}

static void put_int(pl_buf *b, uint32_t field, uint64_t v)
{
    pl_pb_put_varint(b, (uint64_t)field << 3);
    pl_pb_put_varint(b, v);
}

static void test_connect_proto(void)
{
    pl_buf body, out;
    pl_buf_init(&body);
    pl_buf_init(&out);
    put_str(&body, 1, TYPE_ID);
    put_str(&body, 2, "{service_name=\"shop\"}");
    put_int(&body, 3, 1699999990000ull);
    put_int(&body, 4, 1700000010000ull);
    put_str(&body, 11, DB_QUERY); /* span_selector: the span-profile path */
    int st = send_req("POST", "/querier.v1.QuerierService/SelectMergeStacktraces",
                      "Content-Type: application/proto\r\nConnect-Protocol-Version: 1\r\n",
                      body.data, body.len, &out);
    CHECK_EQ_INT(st, 200);
    /* FlameGraph in field 1; its total (field 3) is 30 ms */
    REQUIRE(out.len > 4 && out.data[0] == 0x0a);
    pl_pb_reader r = {out.data, out.data + out.len}, fg;
    uint32_t field, wt;
    uint64_t v;
    REQUIRE(pl_pb_next_field(&r, &field, &wt, &v, &fg) == 0 && field == 1);
    int64_t total = -1;
    pl_pb_reader sub;
    while (fg.p < fg.end && pl_pb_next_field(&fg, &field, &wt, &v, &sub) == 0)
        if (field == 3)
            total = (int64_t)v;
    CHECK_EQ_INT(total, 30000000);
    /* a wrong wire type, a truncated body */
    pl_buf_reset(&body);
    put_int(&body, 1, 5);
    CHECK_EQ_INT(send_req("POST", "/querier.v1.QuerierService/SelectMergeStacktraces",
                          "Content-Type: application/proto\r\n", body.data, body.len, &out),
                 400);
    CHECK(has(&out, "\"code\":\"invalid_argument\""));
    CHECK(has(&out, "profile_typeID: wrong wire type"));
    static const uint8_t truncated[] = {0x0a, 0x50, 0x41};
    CHECK_EQ_INT(send_req("POST", "/querier.v1.QuerierService/SelectMergeStacktraces",
                          "Content-Type: application/proto\r\n", truncated, sizeof(truncated),
                          &out),
                 400);
    pl_buf_free(&body);
    pl_buf_free(&out);
}

static void test_connect_errors(void)
{
    pl_buf out, body;
    pl_buf_init(&out);
    pl_buf_init(&body);
    CHECK_EQ_INT(call_json("AnalyzeQuery", "{}", &out), 404);
    CHECK(has(&out, "\"code\":\"unimplemented\""));
    CHECK_EQ_INT(send_req("GET", "/querier.v1.QuerierService/ProfileTypes", "", "", 0, &out), 405);
    CHECK_EQ_INT(send_req("POST", "/querier.v1.QuerierService/ProfileTypes",
                          "Content-Type: text/plain\r\n", "{}", 2, &out),
                 415);
    CHECK_EQ_INT(send_req("POST", "/querier.v1.QuerierService/ProfileTypes",
                          "Content-Type: application/json\r\nConnect-Protocol-Version: 2\r\n", "{}",
                          2, &out),
                 400);
    CHECK_EQ_INT(call_json("SelectMergeSpanProfile",
                           "{\"profileTypeID\":\"" TYPE_ID "\",\"spanSelector\":[\"abc\"]}", &out),
                 400);
    CHECK(has(&out, "invalid span id length"));
    /* a bad id after a good one: refused, and the ids read so far are freed
     * (the sanitizer run checks) */
    CHECK_EQ_INT(call_json("SelectMergeSpanProfile",
                           "{\"profileTypeID\":\"" TYPE_ID "\",\"spanSelector\":"
                           "[\"00000000000000a1\",\"00000000000000zz\"]}",
                           &out),
                 400);
    CHECK(has(&out, "invalid span id: 00000000000000zz"));
    CHECK_EQ_INT(call_json("SelectMergeStacktraces", "{\"profileTypeID\":\"cpu\"}", &out), 400);
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           "{\"profileTypeID\":\"" TYPE_ID "\",\"start\":1.5}", &out),
                 400);
    CHECK(has(&out, "start: not an integer"));
    CHECK_EQ_INT(
        call_json("SelectMergeStacktraces",
                  "{\"profileTypeID\":\"" TYPE_ID "\",\"labelSelector\":\"{a=~\\\"(\\\"}\"}", &out),
        400);
    CHECK(has(&out, "invalid regular expression"));
    CHECK_EQ_INT(call_json("SelectMergeStacktraces", "[1]", &out), 400);
    /* a repeated field is bounded */
    pl_buf_append_str(&body, "{\"matchers\":[");
    for (int i = 0; i <= PL_QREQ_MAX_LIST; i++)
        pl_buf_append_str(&body, i ? ",\"{}\"" : "\"{}\"");
    pl_buf_append_str(&body, "]}");
    pl_buf_append_byte(&body, 0);
    CHECK_EQ_INT(call_json("LabelNames", (const char *)body.data, &out), 400);
    CHECK(has(&out, "more than 256 entries"));
    /* the legacy render */
    CHECK_EQ_INT(send_req("GET",
                          "/pyroscope/render?query=" TYPE_ID
                          "%7Bservice_name%3D%22shop%22%7D&from=1699999990000&until=1700000010000"
                          "&format=json",
                          "", "", 0, &out),
                 200);
    CHECK(has(&out, "\"numTicks\":65000000"));
    CHECK_EQ_INT(send_req("GET", "/pyroscope/render?query=x&from=1&until=0", "", "", 0, &out), 400);
    pl_buf_free(&body);
    pl_buf_free(&out);
}

/* ---- tenants ------------------------------------------------------------ */

/* The batch as a receiver would hand it on with X-Scope-OrgID: tenant. */
static pl_batch *with_tenant(pl_batch *b, const char *tenant)
{
    pl_kv *kv = pl_batch_alloc(b, sizeof(*kv));
    kv->key = PL_BYTES_LIT("tenant");
    kv->value = pl_value_string(pl_batch_bytes(b, tenant, strlen(tenant)));
    b->metadata.items = kv;
    b->metadata.n = 1;
    return b;
}

/* A profile of `service` with one stack of `value` ns at BASE + 5 s. */
static pl_batch *one_stack(const char *service, const char *type, const char *unit,
                           const char *stack, int64_t value)
{
    prof_builder pb;
    prof_begin(&pb, service, type, unit, "cpu", "nanoseconds", 10000000, BASE);
    sample_spec sp = {stack, value, BASE + S(5), 0, -1, false, NULL};
    prof_sample(&pb, &sp);
    return pb.b;
}

/* tenant team-a: shop 7 ms and an alloc_space type; team-b: shop 9 ms and
 * billing 4 ms (written by main below, next to the untenanted shop). */
static void write_tenants(pl_store *s)
{
    write_one(s,
              with_tenant(one_stack("shop", "cpu", "nanoseconds", "main;a_work", MS(7)), "team-a"));
    write_one(
        s, with_tenant(one_stack("shop", "alloc_space", "bytes", "main;a_alloc", 4096), "team-a"));
    write_one(s,
              with_tenant(one_stack("shop", "cpu", "nanoseconds", "main;b_work", MS(9)), "team-b"));
    write_one(
        s, with_tenant(one_stack("billing", "cpu", "nanoseconds", "main;b_bill", MS(4)), "team-b"));
}

/* tenant team-deep: main, then `r` 599 times (recursion deeper than the
 * 512 frames the merge reads at once), 3 ms */
static pl_batch *deep_stack(void)
{
    pl_batch *b = one_stack("deep", "cpu", "nanoseconds", "main;r", MS(3));
    const pl_sample *smp = &b->data.profiles.resources[0].scopes[0].profiles[0].samples[0];
    pl_stack *st = &b->data.profiles.dict.stacks[smp->stack_index]; /* leaf first: r, main */
    int32_t r = st->location_indices[0], main_loc = st->location_indices[1];
    int32_t *locs = pl_batch_alloc(b, 600 * sizeof(int32_t));
    for (size_t i = 0; i < 600; i++)
        locs[i] = i == 599 ? main_loc : r;
    st->location_indices = locs;
    st->n_location_indices = 600;
    return with_tenant(b, "team-deep");
}

static int call_tenant(const char *tenant, const char *method, const char *json, pl_buf *out)
{
    char path[128], headers[160];
    snprintf(path, sizeof(path), "/querier.v1.QuerierService/%s", method);
    snprintf(headers, sizeof(headers), "Content-Type: application/json\r\nX-Scope-OrgID: %s\r\n",
             tenant);
    return send_req("POST", path, headers, json, strlen(json), out);
}

static bool lacks(const pl_buf *b, const char *s)
{
    if (strstr((const char *)b->data, s)) {
        fprintf(stderr, "  unexpected %s in %s\n", s, (const char *)b->data);
        return false;
    }
    return true;
}

#define MERGE_ALL "{\"profileTypeID\":\"" TYPE_ID "\",\"labelSelector\":\"{}\"," RANGE "}"

static void test_tenants(void)
{
    pl_buf out;
    pl_buf_init(&out);
    /* no header: only what came without a tenant (the shop fixture) */
    CHECK_EQ_INT(call_json("SelectMergeStacktraces", MERGE_ALL, &out), 200);
    CHECK(has(&out, "\"total\":\"65000000\""));
    CHECK(lacks(&out, "a_work") && lacks(&out, "b_work"));
    CHECK_EQ_INT(call_json("ProfileTypes", "{" RANGE "}", &out), 200);
    CHECK(lacks(&out, "alloc_space"));
    CHECK_EQ_INT(call_json("LabelValues", "{\"name\":\"service_name\"," RANGE "}", &out), 200);
    CHECK(has(&out, "{\"names\":[\"shop\"]}"));
    /* team-a: the same service name, its own samples and types */
    CHECK_EQ_INT(call_tenant("team-a", "SelectMergeStacktraces", MERGE_ALL, &out), 200);
    CHECK(has(&out, "\"total\":\"7000000\""));
    CHECK(has(&out, "a_work") && lacks(&out, "b_work") && lacks(&out, "sql_exec"));
    CHECK_EQ_INT(call_tenant("team-a", "ProfileTypes", "{" RANGE "}", &out), 200);
    CHECK(has(&out, ":alloc_space:bytes:cpu:nanoseconds") && has(&out, TYPE_ID));
    CHECK_EQ_INT(
        call_tenant("team-a", "LabelValues", "{\"name\":\"service_name\"," RANGE "}", &out), 200);
    CHECK(has(&out, "{\"names\":[\"shop\"]}"));
    CHECK_EQ_INT(call_tenant("team-a", "SelectSeries",
                             "{\"profileTypeID\":\"" TYPE_ID
                             "\",\"labelSelector\":\"{service_name=\\\"shop\\\"}\",\"step\":\"20\","
                             "\"groupBy\":[\"service_name\"]," RANGE "}",
                             &out),
                 200);
    CHECK(has(&out, "\"value\":7000000,"));
    /* span labels: team-a's samples have no span */
    CHECK_EQ_INT(call_tenant("team-a", "LabelValues", "{\"name\":\"span_name\"," RANGE "}", &out),
                 200);
    CHECK(lacks(&out, "db.query"));
    /* another tenant's span: nothing of it */
    CHECK_EQ_INT(call_tenant("team-a", "SelectMergeSpanProfile",
                             "{\"profileTypeID\":\"" TYPE_ID "\",\"spanSelector\":[\"" DB_QUERY
                             "\"]," RANGE "}",
                             &out),
                 200);
    CHECK(lacks(&out, "sql_exec"));
    /* team-b: shop and billing, no alloc_space */
    CHECK_EQ_INT(call_tenant("team-b", "SelectMergeStacktraces", MERGE_ALL, &out), 200);
    CHECK(has(&out, "\"total\":\"13000000\""));
    CHECK(lacks(&out, "a_work"));
    CHECK_EQ_INT(call_tenant("team-b", "SelectMergeStacktraces",
                             "{\"profileTypeID\":\"" TYPE_ID
                             "\",\"labelSelector\":\"{service_name=\\\"shop\\\"}\"," RANGE "}",
                             &out),
                 200);
    CHECK(has(&out, "\"total\":\"9000000\""));
    CHECK_EQ_INT(call_tenant("team-b", "ProfileTypes", "{" RANGE "}", &out), 200);
    CHECK(lacks(&out, "alloc_space"));
    CHECK_EQ_INT(
        call_tenant("team-b", "LabelValues", "{\"name\":\"service_name\"," RANGE "}", &out), 200);
    CHECK(has(&out, "{\"names\":[\"billing\",\"shop\"]}"));
    CHECK_EQ_INT(call_tenant("team-b", "Series",
                             "{\"matchers\":[],\"labelNames\":[\"service_name\"]," RANGE "}", &out),
                 200);
    CHECK(has(&out, "\"value\":\"billing\"") && has(&out, "\"value\":\"shop\""));
    CHECK_EQ_INT(call_tenant("team-b", "LabelNames", "{" RANGE "}", &out), 200);
    CHECK(has(&out, "service_name") && lacks(&out, "span_name"));
    /* a tenant with nothing stored */
    CHECK_EQ_INT(call_tenant("team-c", "ProfileTypes", "{" RANGE "}", &out), 200);
    CHECK(lacks(&out, "ID"));
    CHECK_EQ_INT(call_tenant("team-c", "GetProfileStats", "", &out), 200);
    CHECK(lacks(&out, "\"dataIngested\":true"));
    CHECK_EQ_INT(call_tenant("team-a", "GetProfileStats", "", &out), 200);
    CHECK(has(&out, "\"dataIngested\":true"));
    /* the legacy render */
    CHECK_EQ_INT(send_req("GET",
                          "/pyroscope/render?query=" TYPE_ID
                          "%7B%7D&from=1699999990000&until=1700000010000&format=json",
                          "X-Scope-OrgID: team-b\r\n", "", 0, &out),
                 200);
    CHECK(has(&out, "\"numTicks\":13000000"));
    /* the store's own JSON API: a header sees its tenant's samples and
     * services only; without one, every tenant's (as for traces) */
    CHECK_EQ_INT(send_req("GET", "/api/flamegraph?service=shop&since=0",
                          "X-Scope-OrgID: team-a\r\n", "", 0, &out),
                 200);
    CHECK(has(&out, "\"total\":7000000,") && has(&out, "a_work") && lacks(&out, "b_work") &&
          lacks(&out, "sql_exec"));
    CHECK_EQ_INT(send_req("GET", "/api/top?since=0", "X-Scope-OrgID: team-b\r\n", "", 0, &out),
                 200);
    CHECK(has(&out, "\"total\":13000000,") && has(&out, "b_bill") && lacks(&out, "a_work"));
    CHECK_EQ_INT(
        send_req("GET", "/api/flamegraph?span=" DB_QUERY, "X-Scope-OrgID: team-b\r\n", "", 0, &out),
        200);
    CHECK(has(&out, "\"total\":0,") && lacks(&out, "sql_exec"));
    CHECK_EQ_INT(send_req("GET", "/api/flamegraph?span=" DB_QUERY, "", "", 0, &out), 200);
    CHECK(has(&out, "sql_exec"));
    CHECK_EQ_INT(send_req("GET", "/api/flamegraph?service=shop&since=0", "", "", 0, &out), 200);
    CHECK(has(&out, "\"total\":81000000,") && has(&out, "a_work") && has(&out, "b_work"));
    CHECK_EQ_INT(send_req("GET", "/api/services", "X-Scope-OrgID: team-b\r\n", "", 0, &out), 200);
    CHECK(has(&out, "{\"services\":[\"billing\",\"shop\"]}"));
    CHECK_EQ_INT(send_req("GET", "/api/services", "X-Scope-OrgID: team-c\r\n", "", 0, &out), 200);
    CHECK(has(&out, "{\"services\":[]}"));
    CHECK_EQ_INT(send_req("GET", "/api/links?since=0", "X-Scope-OrgID: team-c\r\n", "", 0, &out),
                 200);
    CHECK(lacks(&out, "shop"));
    pl_buf_free(&out);
}

/* A store of schema 6 (services without tenants) is upgraded by a writer:
 * its services keep their ids, and tenants' samples go to new ones. */
static void test_tenant_upgrade(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "v6.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    write_one(s, one_stack("shop", "cpu", "nanoseconds", "main;old", MS(3)));
    pl_store_close(s);
    as_older_schema(path, "DROP INDEX services_by_name; ALTER TABLE services DROP COLUMN tenant;"
                          "ALTER TABLE services DROP COLUMN labels;"
                          "ALTER TABLE services DROP COLUMN name_id; DROP TABLE service_totals;"
                          "PRAGMA user_version = 6");
    s = open_rw(path);
    REQUIRE(s);
    write_one(s, with_tenant(one_stack("shop", "cpu", "nanoseconds", "main;new", MS(2)), "t1"));
    write_one(s, one_stack("shop", "cpu", "nanoseconds", "main;old", MS(1)));
    pl_store_close(s);
    pl_sqlite_api *old = api;
    api = pl_sqlite_api_new(path);
    pl_buf out;
    pl_buf_init(&out);
    CHECK_EQ_INT(call_json("SelectMergeStacktraces", MERGE_ALL, &out), 200);
    CHECK(has(&out, "\"total\":\"4000000\"") && lacks(&out, "\"new\""));
    /* the series totals of the older samples were made on the upgrade */
    CHECK_EQ_INT(call_json("SelectSeries",
                           "{\"profileTypeID\":\"" TYPE_ID
                           "\",\"labelSelector\":\"{}\",\"step\":\"20\"," RANGE "}",
                           &out),
                 200);
    CHECK(has(&out, "\"points\":[{\"value\":4000000,"));
    CHECK_EQ_INT(call_tenant("t1", "SelectMergeStacktraces", MERGE_ALL, &out), 200);
    CHECK(has(&out, "\"total\":\"2000000\"") && lacks(&out, "\"old\""));
    pl_buf_free(&out);
    pl_sqlite_api_close(api);
    api = old;
    /* the JSON API's service list names the tenant's service once */
    s = open_ro(path);
    REQUIRE(s);
    char **names = NULL;
    size_t n = 0;
    pl_err err = {{0}};
    CHECK(pl_store_query_services(s, NULL, &names, &n, &err) == PL_OK);
    CHECK_EQ_INT(n, 1);
    pl_store_free_names(names, n);
    pl_store_close(s);
}

/* ---- SDK labels --------------------------------------------------------- */

/* Adds a string label to the last sample of pb. */
static void sample_label(prof_builder *pb, const char *key, const char *value)
{
    pl_sample *smp = &pb->p->samples[pb->p->n_samples - 1];
    int32_t *attrs = pl_batch_alloc(pb->b, (smp->n_attribute_indices + 1) * sizeof(int32_t));
    if (smp->n_attribute_indices)
        memcpy(attrs, smp->attribute_indices, smp->n_attribute_indices * sizeof(int32_t));
    attrs[smp->n_attribute_indices] =
        pl_dict_intern_attribute(&pb->b->arena, pb->d, str_idx(pb, key),
                                 pl_value_string(pl_batch_bytes(pb->b, value, strlen(value))), 0);
    smp->attribute_indices = attrs;
    smp->n_attribute_indices++;
}

#define API_SEL(sel) "{\"profileTypeID\":\"" TYPE_ID "\",\"labelSelector\":\"" sel "\"," RANGE "}"

static void test_sdk_labels(void)
{
    char path[512];
    fresh_path(path, sizeof(path), "labels.db");
    pl_store *s = open_rw(path);
    REQUIRE(s);
    write_one(s, traces_batch("api", shop_trace, sizeof(shop_trace) / sizeof(shop_trace[0])));
    /* api (resource env=prod): region=eu 5 ms (two samples, one of them
     * linked to a span), region=us 3 ms, no region 2 ms */
    prof_builder pb;
    prof_begin(&pb, "api", "cpu", "nanoseconds", "cpu", "nanoseconds", 10000000, BASE);
    pl_attrs_put(&pb.b->arena, &pb.b->data.profiles.resources[0].resource.attrs,
                 pl_batch_bytes(pb.b, "env", 3), pl_value_string(pl_batch_bytes(pb.b, "prod", 4)));
    sample_spec eu1 = {"main;eu_work", (int64_t)MS(4), BASE + S(1), 0, -1, false, NULL};
    sample_spec eu2 = {"main;eu_work", (int64_t)MS(1), BASE + S(2), 1, 1, true, NULL};
    sample_spec us = {"main;us_work", (int64_t)MS(3), BASE + S(3), 0, -1, false, NULL};
    sample_spec none = {"main;idle", (int64_t)MS(2), BASE + S(4), 0, -1, false, NULL};
    prof_sample(&pb, &eu1);
    sample_label(&pb, "region", "eu");
    prof_sample(&pb, &eu2);
    sample_label(&pb, "region", "eu");
    prof_sample(&pb, &us);
    sample_label(&pb, "region", "us");
    sample_label(&pb, "env", "canary"); /* the sample's label wins */
    prof_sample(&pb, &none);
    write_one(s, pb.b);
    /* more distinct sets than a service keeps: the rest fold into one */
    for (int batch = 0; batch < 6; batch++) {
        prof_begin(&pb, "many", "cpu", "nanoseconds", "cpu", "nanoseconds", 10000000, BASE);
        sample_spec one = {"main;req", 1, BASE + S(1), 0, -1, false, NULL};
        prof_sample(&pb, &one);
        for (int i = 0; i < 200; i++) {
            char v[16];
            snprintf(v, sizeof(v), "r%d", batch * 200 + i);
            if (i) { /* the same stack and value */
                pl_sample *smp = &pb.p->samples[pb.p->n_samples++];
                *smp = pb.p->samples[0];
                smp->attribute_indices = NULL;
                smp->n_attribute_indices = 0;
            }
            sample_label(&pb, "request", v);
        }
        write_one(s, pb.b);
    }
    pl_store_close(s);
    pl_sqlite_api *old = api;
    api = pl_sqlite_api_new(path);
    pl_buf out;
    pl_buf_init(&out);
    CHECK_EQ_INT(
        call_json("LabelNames", "{\"matchers\":[\"{service_name=\\\"api\\\"}\"]," RANGE "}", &out),
        200);
    CHECK(has(&out, "\"env\"") && has(&out, "\"region\"") && lacks(&out, "\"request\""));
    CHECK(lacks(&out, "\"span_id\"") && lacks(&out, "\"service.name\""));
    CHECK_EQ_INT(call_json("LabelValues", "{\"name\":\"region\"," RANGE "}", &out), 200);
    CHECK(has(&out, "{\"names\":[\"eu\",\"us\"]}"));
    CHECK_EQ_INT(call_json("LabelValues", "{\"name\":\"env\"," RANGE "}", &out), 200);
    CHECK(has(&out, "{\"names\":[\"canary\",\"prod\"]}"));
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           API_SEL("{service_name=\\\"api\\\",region=\\\"eu\\\"}"), &out),
                 200);
    CHECK(has(&out, "\"total\":\"5000000\"") && lacks(&out, "us_work"));
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           API_SEL("{service_name=\\\"api\\\",region!=\\\"eu\\\"}"), &out),
                 200);
    CHECK(has(&out, "\"total\":\"5000000\"") && lacks(&out, "eu_work"));
    CHECK_EQ_INT(call_json("SelectMergeStacktraces", API_SEL("{region=~\\\"e.|u.\\\"}"), &out),
                 200);
    CHECK(has(&out, "\"total\":\"8000000\""));
    CHECK_EQ_INT(call_json("SelectMergeStacktraces", API_SEL("{env=\\\"prod\\\"}"), &out), 200);
    CHECK(has(&out, "\"total\":\"7000000\""));
    /* with a span label: the linked eu sample only */
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           API_SEL("{region=\\\"eu\\\",span_name!=\\\"\\\"}"), &out),
                 200);
    CHECK(has(&out, "\"total\":\"1000000\""));
    /* series per region (20 s steps, one point each) */
    CHECK_EQ_INT(call_json("SelectSeries",
                           "{\"profileTypeID\":\"" TYPE_ID
                           "\",\"labelSelector\":\"{service_name=\\\"api\\\"}\",\"step\":\"20\","
                           "\"groupBy\":[\"region\"]," RANGE "}",
                           &out),
                 200);
    CHECK(has(&out, "{\"labels\":[{\"name\":\"region\",\"value\":\"eu\"}],\"points\":[{\"value\":"
                    "5000000,"));
    CHECK(has(&out, "{\"labels\":[{\"name\":\"region\",\"value\":\"us\"}],\"points\":[{\"value\":"
                    "3000000,"));
    CHECK(has(&out, "{\"labels\":[{\"name\":\"region\",\"value\":\"\"}],\"points\":[{\"value\":"
                    "2000000,"));
    /* 60 s steps read the roll-up: the same sums */
    CHECK_EQ_INT(call_json("SelectSeries",
                           "{\"profileTypeID\":\"" TYPE_ID
                           "\",\"labelSelector\":\"{region=\\\"us\\\"}\",\"step\":\"60\","
                           "\"groupBy\":[\"service_name\",\"env\"]," RANGE "}",
                           &out),
                 200);
    CHECK(has(&out, "{\"name\":\"env\",\"value\":\"canary\"},{\"name\":\"service_name\",\"value\":"
                    "\"api\"}],\"points\":[{\"value\":3000000,"));
    CHECK_EQ_INT(
        call_json("Series", "{\"matchers\":[\"{service_name=\\\"api\\\"}\"]," RANGE "}", &out),
        200);
    CHECK(has(&out, "{\"name\":\"region\",\"value\":\"eu\"}"));
    CHECK(has(&out, "{\"name\":\"env\",\"value\":\"prod\"}"));
    /* the cap: 1,000 sets of `many` kept, the other 200 samples folded */
    CHECK_EQ_INT(
        call_json("LabelValues",
                  "{\"name\":\"request\",\"matchers\":[\"{service_name=\\\"many\\\"}\"]," RANGE "}",
                  &out),
        200);
    size_t n_values = 0;
    for (const char *p = (const char *)out.data; (p = strstr(p, "\"r")); p++)
        n_values++;
    CHECK_EQ_INT(n_values, PL_STORE_MAX_LABEL_SETS);
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           API_SEL("{service_name=\\\"many\\\",labels_overflow=\\\"true\\\"}"),
                           &out),
                 200);
    CHECK(has(&out, "\"total\":\"200\""));
    CHECK_EQ_INT(call_json("SelectMergeStacktraces", API_SEL("{service_name=\\\"many\\\"}"), &out),
                 200);
    CHECK(has(&out, "\"total\":\"1200\""));
    pl_buf_free(&out);
    pl_sqlite_api_close(api);
    api = old;
}

/* ---- profile id and trace selectors -------------------------------------- */

static void test_profile_and_trace_selectors(void)
{
    pl_buf out, body;
    pl_buf_init(&out);
    pl_buf_init(&body);
    uint8_t tid[16];
    char hex[33] = {0};
    make_trace_id(1, tid);
    pl_hex_encode(tid, 16, hex);
    hex[32] = 0;
    /* a profile id is a span id: db.query's own samples */
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           "{\"profileTypeID\":\"" TYPE_ID "\",\"labelSelector\":\"{}\","
                           "\"profileIdSelector\":[\"" DB_QUERY "\"]," RANGE "}",
                           &out),
                 200);
    CHECK(has(&out, "\"total\":\"30000000\""));
    /* a trace: every sample linked to it (all but the 5 ms of gc) */
    pl_buf_printf(&body,
                  "{\"profileTypeID\":\"" TYPE_ID "\",\"labelSelector\":\"{}\","
                  "\"traceIdSelector\":[\"%s\"]," RANGE "}",
                  hex);
    pl_buf_append_byte(&body, 0);
    CHECK_EQ_INT(call_json("SelectMergeStacktraces", (const char *)body.data, &out), 200);
    CHECK(has(&out, "\"total\":\"60000000\"") && lacks(&out, "\"gc\""));
    /* with a span label on top */
    pl_buf_reset(&body);
    pl_buf_printf(&body,
                  "{\"profileTypeID\":\"" TYPE_ID
                  "\",\"labelSelector\":\"{span_name=\\\"render\\\"}\","
                  "\"traceIdSelector\":[\"%s\"]," RANGE "}",
                  hex);
    pl_buf_append_byte(&body, 0);
    CHECK_EQ_INT(call_json("SelectMergeStacktraces", (const char *)body.data, &out), 200);
    CHECK(has(&out, "\"total\":\"10000000\""));
    /* an unknown trace: nothing */
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           "{\"profileTypeID\":\"" TYPE_ID "\",\"traceIdSelector\":["
                           "\"0123456789abcdef0123456789abcdef\"]," RANGE "}",
                           &out),
                 200);
    CHECK(has(&out, "\"total\":\"0\""));
    /* SelectMergeProfile (pprof): the span's samples only */
    pl_buf_reset(&body);
    put_str(&body, 1, TYPE_ID);
    put_str(&body, 2, "{}");
    put_int(&body, 3, 1699999990000ull);
    put_int(&body, 4, 1700000010000ull);
    put_str(&body, 7, DB_QUERY);
    CHECK_EQ_INT(send_req("POST", "/querier.v1.QuerierService/SelectMergeProfile",
                          "Content-Type: application/proto\r\n", body.data, body.len, &out),
                 200);
    CHECK(memmem(out.data, out.len, "sql_exec", 8) && !memmem(out.data, out.len, "template", 8));
    /* bad entries */
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           "{\"profileTypeID\":\"" TYPE_ID "\",\"profileIdSelector\":[\"abc\"]}",
                           &out),
                 400);
    CHECK(has(&out, "invalid profile id length"));
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           "{\"profileTypeID\":\"" TYPE_ID "\",\"traceIdSelector\":["
                           "\"zz23456789abcdef0123456789abcdef\"]}",
                           &out),
                 400);
    CHECK(has(&out, "invalid trace id"));
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           "{\"profileTypeID\":\"" TYPE_ID "\",\"traceIdSelector\":[\"" DB_QUERY
                           "\"]}",
                           &out),
                 400);
    CHECK(has(&out, "invalid trace id length"));
    pl_buf_free(&out);
    pl_buf_free(&body);
}

/* ---- stack_trace_selector ----------------------------------------------- */

/* The samples of a pprof answer: frame count and value of each, and whether
 * a string is in its string table. */
typedef struct pprof_summary {
    size_t n;
    size_t frames[16];
    int64_t values[16];
    int64_t total;
} pprof_summary;

static void pprof_read(const pl_buf *b, pprof_summary *s)
{
    memset(s, 0, sizeof(*s));
    pl_pb_reader r = {b->data, b->data + b->len}, sub;
    uint32_t field, wt;
    uint64_t v;
    while (r.p < r.end && pl_pb_next_field(&r, &field, &wt, &v, &sub) == 0) {
        if (field != 2 || wt != PL_PB_LEN || s->n == 16)
            continue;
        pl_pb_reader in;
        while (sub.p < sub.end && pl_pb_next_field(&sub, &field, &wt, &v, &in) == 0) {
            if (field == 1 && wt == PL_PB_LEN) { /* packed location ids */
                uint64_t id;
                while (in.p < in.end && pl_pb_read_varint(&in, &id) == 0)
                    s->frames[s->n]++;
            } else if (field == 1) {
                s->frames[s->n]++;
            } else if (field == 2 && wt == PL_PB_LEN) {
                uint64_t x;
                if (pl_pb_read_varint(&in, &x) == 0)
                    s->values[s->n] = (int64_t)x;
            } else if (field == 2) {
                s->values[s->n] = (int64_t)v;
            }
        }
        s->total += s->values[s->n++];
    }
}

/* StackTraceSelector{call_site: Location{name} per name; go_pgo} as bytes */
static void put_selector(pl_buf *body, uint32_t field, const char *const *names, size_t n,
                         int64_t keep)
{
    pl_buf sel, loc;
    pl_buf_init(&sel);
    pl_buf_init(&loc);
    for (size_t i = 0; i < n; i++) {
        pl_buf_reset(&loc);
        put_str(&loc, 1, names[i]);
        pl_pb_put_bytes(&sel, 1, loc.data, loc.len);
    }
    if (keep >= 0) {
        pl_buf_reset(&loc);
        put_int(&loc, 1, (uint64_t)keep);
        pl_pb_put_bytes(&sel, 2, loc.data, loc.len);
    }
    pl_pb_put_bytes(body, field, sel.data, sel.len);
    pl_buf_free(&sel);
    pl_buf_free(&loc);
}

static int call_proto(const char *method, const pl_buf *body, pl_buf *out)
{
    char path[128];
    snprintf(path, sizeof(path), "/querier.v1.QuerierService/%s", method);
    return send_req("POST", path, "Content-Type: application/proto\r\n", body->data, body->len,
                    out);
}

static void merge_profile_body(pl_buf *body, const char *const *names, size_t n, int64_t keep)
{
    pl_buf_reset(body);
    put_str(body, 1, TYPE_ID);
    put_str(body, 2, "{}");
    put_int(body, 3, 1699999990000ull);
    put_int(body, 4, 1700000010000ull);
    put_selector(body, 6, names, n, keep);
}

/* The fixture's stacks: main;handler;query;{sql_exec 20, sql_parse 10,
 * json_decode 20}, main;handler;render;template 10, main;gc 5 (ms). */
static void test_stack_trace_selector(void)
{
    pl_buf out, body;
    pl_buf_init(&out);
    pl_buf_init(&body);
#define MERGE(sel) "{\"profileTypeID\":\"" TYPE_ID "\",\"labelSelector\":\"{}\"," RANGE "," sel "}"
    /* a prefix from the root: exactly the stacks below main;handler;query,
     * whole (from the root) */
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           MERGE("\"stackTraceSelector\":{\"callSite\":[{\"name\":\"main\"},"
                                 "{\"name\":\"handler\"},{\"name\":\"query\"}]}"),
                           &out),
                 200);
    CHECK(has(&out, "\"total\":\"50000000\""));
    CHECK(has(&out, "\"main\"") && has(&out, "\"sql_exec\"") && has(&out, "\"json_decode\""));
    CHECK(lacks(&out, "\"render\"") && lacks(&out, "\"gc\"") && lacks(&out, "\"template\""));
    /* the proto names; a Location without a name is the empty name */
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           MERGE("\"stack_trace_selector\":{\"call_site\":[{\"name\":\"main\"},"
                                 "{\"name\":\"gc\"}],\"go_pgo\":null}"),
                           &out),
                 200);
    CHECK(has(&out, "\"total\":\"5000000\"") && lacks(&out, "\"handler\""));
    /* not from the root, longer than the stacks, or an unnamed frame: none */
    static const char *const misses[] = {
        "[{\"name\":\"handler\"}]",
        "[{\"name\":\"main\"},{\"name\":\"gc\"},{\"name\":\"deeper\"}]",
        "[{\"name\":\"main\"},{}]",
        "[{\"name\":\"main\"},{\"name\":\"handle\"}]",
    };
    for (size_t i = 0; i < sizeof(misses) / sizeof(misses[0]); i++) {
        pl_buf_reset(&body);
        pl_buf_printf(&body, MERGE("\"stackTraceSelector\":{\"callSite\":%s}"), misses[i]);
        pl_buf_append_byte(&body, 0);
        CHECK_EQ_INT(call_json("SelectMergeStacktraces", (const char *)body.data, &out), 200);
        CHECK(has(&out, "\"total\":\"0\""));
    }
    /* an empty call site, an empty selector: every stack */
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           MERGE("\"stackTraceSelector\":{\"callSite\":[]}"), &out),
                 200);
    CHECK(has(&out, "\"total\":\"65000000\""));
    CHECK_EQ_INT(call_json("SelectMergeStacktraces", MERGE("\"stackTraceSelector\":{}"), &out),
                 200);
    CHECK(has(&out, "\"total\":\"65000000\""));
    /* with a span label: the call site within those samples */
    CHECK_EQ_INT(call_json("SelectMergeStacktraces",
                           "{\"profileTypeID\":\"" TYPE_ID
                           "\",\"labelSelector\":\"{span_name=\\\"db.query\\\"}\"," RANGE
                           ",\"stackTraceSelector\":{\"callSite\":[{\"name\":\"main\"},"
                           "{\"name\":\"handler\"}]}}",
                           &out),
                 200);
    CHECK(has(&out, "\"total\":\"30000000\""));

    /* protobuf: field 7, Location messages */
    static const char *const query[] = {"main", "handler", "query"};
    pl_buf_reset(&body);
    put_str(&body, 1, TYPE_ID);
    put_str(&body, 2, "{}");
    put_int(&body, 3, 1699999990000ull);
    put_int(&body, 4, 1700000010000ull);
    put_selector(&body, 7, query, 3, -1);
    CHECK_EQ_INT(call_proto("SelectMergeStacktraces", &body, &out), 200);
    pl_pb_reader r = {out.data, out.data + out.len}, fg, sub;
    uint32_t field, wt;
    uint64_t v;
    int64_t total = -1;
    REQUIRE(pl_pb_next_field(&r, &field, &wt, &v, &fg) == 0 && field == 1);
    while (fg.p < fg.end && pl_pb_next_field(&fg, &field, &wt, &v, &sub) == 0)
        if (field == 3)
            total = (int64_t)v;
    CHECK_EQ_INT(total, 50000000);

    /* SelectSeries: the per-step totals of those stacks (field 8 in
     * protobuf), per span too */
    CHECK_EQ_INT(call_json("SelectSeries",
                           "{\"profileTypeID\":\"" TYPE_ID "\",\"labelSelector\":\"{}\","
                           "\"step\":20," RANGE ",\"stackTraceSelector\":{\"callSite\":["
                           "{\"name\":\"main\"},{\"name\":\"gc\"}]}}",
                           &out),
                 200);
    CHECK(has(&out, "\"points\":[{\"value\":5000000,\"timestamp\":\"1699999990000\"}]"));
    CHECK_EQ_INT(call_json("SelectSeries",
                           "{\"profileTypeID\":\"" TYPE_ID "\",\"labelSelector\":\"{}\","
                           "\"step\":20,\"groupBy\":[\"span_name\"]," RANGE
                           ",\"stackTraceSelector\":{\"callSite\":[{\"name\":\"main\"},"
                           "{\"name\":\"handler\"},{\"name\":\"query\"}]}}",
                           &out),
                 200);
    CHECK(has(&out, "{\"name\":\"span_name\",\"value\":\"db.query\"}]"
                    ",\"points\":[{\"value\":30000000,"));
    CHECK(has(&out, "{\"name\":\"span_name\",\"value\":\"decode\"}]"
                    ",\"points\":[{\"value\":20000000,"));
    CHECK(lacks(&out, "\"render\""));
    CHECK_EQ_INT(call_json("SelectSeries",
                           "{\"profileTypeID\":\"" TYPE_ID "\",\"labelSelector\":\"{}\","
                           "\"step\":20," RANGE ",\"stackTraceSelector\":{\"callSite\":["
                           "{\"name\":\"gc\"}]}}",
                           &out),
                 200);
    CHECK(has(&out, "{\"series\":[]}"));
    pl_buf_reset(&body);
    put_str(&body, 1, TYPE_ID);
    put_str(&body, 2, "{}");
    put_int(&body, 3, 1699999990000ull);
    put_int(&body, 4, 1700000010000ull);
    put_selector(&body, 8, query, 3, -1);
    pl_pb_put_varint(&body, 6 << 3 | PL_PB_I64); /* step: 20 s */
    double step = 20;
    uint64_t bits;
    memcpy(&bits, &step, 8);
    for (int i = 0; i < 8; i++)
        pl_buf_append_byte(&body, (uint8_t)(bits >> (8 * i)));
    CHECK_EQ_INT(call_proto("SelectSeries", &body, &out), 200);
    /* Series{points=2 Point{value=1 double}}: one point, 50 ms (fixed
     * fields are skipped by the reader: read the bytes before) */
    double got = -1;
    r = (pl_pb_reader){out.data, out.data + out.len};
    pl_pb_reader ser, pt, inner;
    if (pl_pb_next_field(&r, &field, &wt, &v, &ser) == 0)
        while (ser.p < ser.end && pl_pb_next_field(&ser, &field, &wt, &v, &pt) == 0)
            if (field == 2)
                while (pt.p < pt.end && pl_pb_next_field(&pt, &field, &wt, &v, &inner) == 0)
                    if (field == 1 && wt == PL_PB_I64) { /* skipped: the 8 bytes before */
                        uint64_t le = 0;
                        for (int i = 0; i < 8; i++)
                            le |= (uint64_t)pt.p[i - 8] << (8 * i);
                        memcpy(&got, &le, 8);
                    }
    CHECK(got == 50000000.0);

    /* SelectMergeProfile (pprof): field 6; keep_locations cuts each stack
     * to its leaf-most frames, merging stacks that become the same */
    static const char *const render[] = {"main", "handler", "render"};
    pprof_summary ps;
    merge_profile_body(&body, render, 3, -1);
    CHECK_EQ_INT(call_proto("SelectMergeProfile", &body, &out), 200);
    pprof_read(&out, &ps);
    CHECK(ps.n == 1 && ps.frames[0] == 4 && ps.total == 10000000);
    CHECK(memmem(out.data, out.len, "template", 8) && !memmem(out.data, out.len, "sql_exec", 8));
    merge_profile_body(&body, query, 3, 2);
    CHECK_EQ_INT(call_proto("SelectMergeProfile", &body, &out), 200);
    pprof_read(&out, &ps);
    CHECK(ps.n == 3 && ps.total == 50000000);
    for (size_t i = 0; i < ps.n; i++)
        CHECK(ps.frames[i] == 2);
    CHECK(!memmem(out.data, out.len, "main", 4) && !memmem(out.data, out.len, "handler", 7));
    CHECK(memmem(out.data, out.len, "query", 5) && memmem(out.data, out.len, "sql_parse", 9));
    merge_profile_body(&body, NULL, 0, 1); /* every stack, one frame: the leaves */
    CHECK_EQ_INT(call_proto("SelectMergeProfile", &body, &out), 200);
    pprof_read(&out, &ps);
    CHECK(ps.n == 5 && ps.total == 65000000);
    for (size_t i = 0; i < ps.n; i++)
        CHECK(ps.frames[i] == 1);
    merge_profile_body(&body, query, 3, 0); /* 0: every frame */
    CHECK_EQ_INT(call_proto("SelectMergeProfile", &body, &out), 200);
    pprof_read(&out, &ps);
    CHECK(ps.n == 3 && ps.total == 50000000 && ps.frames[0] == 4);
    /* aggregate_callees: accepted, nothing to aggregate (no line numbers) */
    pl_buf_reset(&body);
    put_str(&body, 1, TYPE_ID);
    put_int(&body, 3, 1699999990000ull);
    put_int(&body, 4, 1700000010000ull);
    static const uint8_t pgo_callees[] = {0x32, 0x04, 0x12, 0x02, 0x10, 0x01};
    pl_buf_append(&body, pgo_callees, sizeof(pgo_callees));
    CHECK_EQ_INT(call_proto("SelectMergeProfile", &body, &out), 200);
    pprof_read(&out, &ps);
    CHECK(ps.n == 5 && ps.total == 65000000);

    /* bad input: invalid_argument */
    static const char *const bad[] = {
        "\"stackTraceSelector\":[]",
        "\"stackTraceSelector\":{\"callSite\":{}}",
        "\"stackTraceSelector\":{\"callSite\":[\"main\"]}",
        "\"stackTraceSelector\":{\"callSite\":[{\"name\":1}]}",
        "\"stackTraceSelector\":{\"callSite\":[{\"name\":\"a\\u0000b\"}]}",
        "\"stackTraceSelector\":{\"goPgo\":{\"keepLocations\":\"x\"}}",
        "\"stackTraceSelector\":{\"goPgo\":{\"aggregateCallees\":3}}",
        "\"stackTraceSelector\":{\"callSite\":[{\"name\":\"main\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pl_buf_reset(&body);
        pl_buf_printf(&body, MERGE("%s"), bad[i]);
        pl_buf_append_byte(&body, 0);
        int st = call_json("SelectMergeStacktraces", (const char *)body.data, &out);
        if (st != 400)
            fprintf(stderr, "  accepted: %s\n", bad[i]);
        CHECK_EQ_INT(st, 400);
        CHECK(has(&out, "\"code\":\"invalid_argument\""));
    }
    /* bounds: entries and name length */
    pl_buf_reset(&body);
    pl_buf_append_str(&body, "{\"profileTypeID\":\"" TYPE_ID "\",\"stackTraceSelector\":"
                             "{\"callSite\":[");
    for (int i = 0; i <= PL_QCALL_SITE_MAX; i++)
        pl_buf_append_str(&body, i ? ",{\"name\":\"f\"}" : "{\"name\":\"f\"}");
    pl_buf_append_str(&body, "]}}");
    pl_buf_append_byte(&body, 0);
    CHECK_EQ_INT(call_json("SelectMergeStacktraces", (const char *)body.data, &out), 400);
    CHECK(has(&out, "call_site: more than 1024 entries"));
    pl_buf_reset(&body);
    put_str(&body, 1, TYPE_ID);
    {
        char *longname = malloc(PL_QCALL_SITE_NAME_MAX + 2);
        REQUIRE(longname);
        memset(longname, 'f', PL_QCALL_SITE_NAME_MAX + 1);
        longname[PL_QCALL_SITE_NAME_MAX + 1] = 0;
        const char *one[] = {longname};
        put_selector(&body, 7, one, 1, -1);
        free(longname);
    }
    CHECK_EQ_INT(call_proto("SelectMergeStacktraces", &body, &out), 400);
    CHECK(has(&out, "name: longer than 8192 bytes"));
    /* protobuf: wrong wire types, a truncated nested message */
    static const uint8_t bad_pb[][8] = {
        {0x3a, 0x02, 0x08, 0x01},             /* call_site as a varint */
        {0x3a, 0x04, 0x0a, 0x02, 0x08, 0x01}, /* Location.name as a varint */
        {0x3a, 0x03, 0x0a, 0x05, 0x0a},       /* a Location longer than its selector */
        {0x38, 0x01},                         /* the selector as a varint */
        {0x3a, 0x02, 0x12, 0x00},             /* (go_pgo empty: fine) */
    };
    static const size_t bad_len[] = {4, 6, 5, 2, 4};
    for (size_t i = 0; i < 5; i++) {
        pl_buf_reset(&body);
        put_str(&body, 1, TYPE_ID);
        pl_buf_append(&body, bad_pb[i], bad_len[i]);
        CHECK_EQ_INT(call_proto("SelectMergeStacktraces", &body, &out), i == 4 ? 200 : 400);
    }
    /* keep_locations beyond uint32 */
    pl_buf_reset(&body);
    put_str(&body, 1, TYPE_ID);
    static const uint8_t huge_keep[] = {0x32, 0x08, 0x12, 0x06, 0x08, 0x80, 0x80, 0x80, 0x80, 0x10};
    pl_buf_append(&body, huge_keep, sizeof(huge_keep));
    CHECK_EQ_INT(call_proto("SelectMergeProfile", &body, &out), 400);
    CHECK(has(&out, "keep_locations"));
    /* a stack of 600 frames, whole, and selected by a call site */
    CHECK_EQ_INT(
        call_tenant("team-deep", "SelectMergeStacktraces", MERGE("\"maxNodes\":1000"), &out), 200);
    CHECK(has(&out, "\"total\":\"3000000\""));
    size_t levels = 0;
    for (const char *p = (const char *)out.data; (p = strstr(p, "{\"values\":")); p++)
        levels++;
    CHECK_EQ_INT(levels, 601); /* the root and 600 frames */
    CHECK_EQ_INT(
        call_tenant("team-deep", "SelectMergeStacktraces",
                    MERGE("\"stackTraceSelector\":{\"callSite\":[{\"name\":\"main\"},{\"name\":"
                          "\"r\"},{\"name\":\"r\"}]}"),
                    &out),
        200);
    CHECK(has(&out, "\"total\":\"3000000\""));
    CHECK_EQ_INT(call_tenant("team-deep", "SelectMergeStacktraces",
                             MERGE("\"stackTraceSelector\":{\"callSite\":[{\"name\":\"r\"}]}"),
                             &out),
                 200);
    CHECK(has(&out, "\"total\":\"0\""));
#undef MERGE
    pl_buf_free(&out);
    pl_buf_free(&body);
}

int main(void)
{
    pl_test_watch_plans();
    PL_RUN(test_selector_operators);
    PL_RUN(test_selector_escapes_and_empty);
    PL_RUN(test_selector_errors);
    PL_RUN(test_levels_upstream_example);
    PL_RUN(test_max_nodes_other);
    PL_RUN(test_random_tree_nests);

    const char *tmp = getenv("TMPDIR");
    snprintf(tmp_root, sizeof(tmp_root), "%s/proflink-querier-test-XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    char path[512];
    fresh_path(path, sizeof(path), "store.db");
    pl_store *s = open_rw(path);
    if (s) {
        write_one(s, traces_batch("shop", shop_trace, sizeof(shop_trace) / sizeof(shop_trace[0])));
        write_one(s, shop_profile());
        write_tenants(s);
        write_one(s, deep_stack());
        pl_store_close(s);
    }
    api = pl_sqlite_api_new(path);
    PL_RUN(test_connect_json);
    PL_RUN(test_connect_proto);
    PL_RUN(test_connect_errors);
    PL_RUN(test_profile_and_trace_selectors);
    PL_RUN(test_stack_trace_selector);
    PL_RUN(test_tenants);
    PL_RUN(test_tenant_upgrade);
    PL_RUN(test_sdk_labels);
    pl_sqlite_api_close(api);
    PL_RUN(pl_test_plans_checked);
    return pl_test_done();
}
