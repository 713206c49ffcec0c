/*
 * test_tempo.c: the TraceQL subset (store/traceql.c), the store API's route
 * table (store/sqlite_api.c, store_routes.h) and the Tempo endpoints on a
 * small store, through the HTTP server without sockets.
 *
 * Argument 1: docs/store.md, whose endpoint table must be the one the
 * route rows generate; `test_tempo --markdown` prints that table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/component.h"
#include "core/model.h"
#include "net/http_server.h"
#include "store/sqlite_api.h"
#include "store/sqlite_store.h"
#include "store/store_routes.h"
#include "store/store_tempo.h"
#include "store/store_terms.h"
#include "store/traceql.h"
#include "sqlite_plans.h"
#include "testlib.h"
#include "profile_fixture.h"
#include "xorshift.h"
#include "db_file_fixture.h"

#include <sqlite3.h>

static const char *docs_path;

static int parse(pl_tql *t, const char *q)
{
    return pl_tql_parse(t, q, strlen(q));
}

static void test_traceql_grafana_queries(void)
{
    pl_tql t;
    /* what the search builder writes */
    REQUIRE(parse(&t, "{}") == 0);
    CHECK_EQ_INT(t.root, -1);
    CHECK_EQ_INT(t.n_conds, 0);
    pl_tql_free(&t);

    REQUIRE(parse(&t, "{resource.service.name=\"shop\" && name=\"GET /\" && status=error && "
                      "duration>100ms && duration<=1.5s}") == 0);
    CHECK_EQ_INT(t.n_conds, 5);
    CHECK_EQ_INT(t.conds[0].field, PL_TQL_F_RESOURCE);
    CHECK_EQ_STR(t.conds[0].attr, "service.name");
    CHECK_EQ_INT(t.conds[0].op, PL_TQL_EQ);
    CHECK_EQ_STR(t.conds[0].str, "shop");
    CHECK_EQ_INT(t.conds[1].field, PL_TQL_F_NAME);
    CHECK_EQ_STR(t.conds[1].str, "GET /");
    CHECK_EQ_INT(t.conds[2].field, PL_TQL_F_STATUS);
    CHECK_EQ_INT(t.conds[2].vtype, PL_TQL_V_STATUS);
    CHECK_EQ_INT(t.conds[2].i, 2);
    CHECK_EQ_INT(t.conds[3].op, PL_TQL_GT);
    CHECK_EQ_INT(t.conds[3].vtype, PL_TQL_V_DURATION);
    CHECK_EQ_INT(t.conds[3].i, 100000000);
    CHECK_EQ_INT(t.conds[4].op, PL_TQL_LE);
    CHECK_EQ_INT(t.conds[4].i, 1500000000);
    CHECK_EQ_INT(t.nodes[t.root].type, PL_TQL_AND);
    pl_tql_free(&t);

    /* several values of one filter: a parenthesised || group */
    REQUIRE(parse(&t, "{ (span.http.method = \"GET\" || span.http.method = \"PUT\") && kind = "
                      "server && .region =~ \"eu-.*\" && rootServiceName != \"x\" }") == 0);
    CHECK_EQ_INT(t.n_conds, 5);
    CHECK_EQ_INT(t.conds[0].field, PL_TQL_F_SPAN);
    CHECK_EQ_STR(t.conds[0].attr, "http.method");
    CHECK_EQ_INT(t.conds[2].vtype, PL_TQL_V_KIND);
    CHECK_EQ_INT(t.conds[2].i, 2);
    CHECK_EQ_INT(t.conds[3].field, PL_TQL_F_ANY);
    CHECK_EQ_INT(t.conds[3].op, PL_TQL_RE);
    CHECK_EQ_INT(t.conds[4].field, PL_TQL_F_ROOT_SERVICE);
    CHECK_EQ_INT(t.conds[4].op, PL_TQL_NE);
    /* && binds tighter than ||; the group is the left-most AND leaf */
    const pl_tql_node *n = &t.nodes[t.root];
    CHECK_EQ_INT(n->type, PL_TQL_AND);
    pl_tql_free(&t);

    /* all eight operators, ints, floats, bools, escapes, colon intrinsics */
    REQUIRE(parse(&t, "{ span.a = 1 && span.b != -2 && span.c > 1.5 && span.d >= 3 && span.e < 4 "
                      "&& span.f <= 5 && span.g =~ \"x\" && span.h !~ \"y\\\"z\" && span.i = "
                      "true && traceDuration > 2m && trace:rootName = \"r\" && span:kind = "
                      "client && statusMessage = \"m\" }") == 0);
    CHECK_EQ_INT(t.n_conds, 13);
    CHECK_EQ_INT(t.conds[1].i, -2);
    CHECK_EQ_INT(t.conds[2].vtype, PL_TQL_V_FLOAT);
    CHECK_EQ_STR(t.conds[7].str, "y\"z");
    CHECK_EQ_INT(t.conds[8].vtype, PL_TQL_V_BOOL);
    CHECK_EQ_INT(t.conds[9].field, PL_TQL_F_TRACE_DURATION);
    CHECK_EQ_INT(t.conds[9].i, 120000000000LL);
    CHECK_EQ_INT(t.conds[10].field, PL_TQL_F_ROOT_NAME);
    CHECK_EQ_INT(t.conds[11].field, PL_TQL_F_KIND);
    for (int i = 0; i < 8; i++) /* = != > >= < <= =~ !~, in the enum's order */
        CHECK_EQ_INT(t.conds[i].op, PL_TQL_EQ + i);
    pl_tql_free(&t);
}

static void check_refused(const char *q, const char *want)
{
    pl_tql t;
    int rc = parse(&t, q);
    CHECK(rc < 0);
    if (rc < 0 && !strstr(t.error, want))
        PL_FAIL_("query %s: error \"%s\" lacks \"%s\"", q, t.error, want);
    pl_tql_free(&t);
}

static void test_traceql_refused(void)
{
    check_refused("", "spanset");
    check_refused("{ name = \"a\" } | count() > 1", "pipelines");
    check_refused("{ name = \"a\" } >> { name = \"b\" }", "one spanset");
    check_refused("{ name = \"a\" } && { name = \"b\" }", "one spanset");
    check_refused("{ name = a }", "unknown value");
    check_refused("{ duration > 100 }", "unit");
    check_refused("{ duration > 100y }", "unit");
    check_refused("{ status = \"error\" }", "status");
    check_refused("{ kind =~ \"server\" }", "kind");
    check_refused("{ name > true }", "do not apply");
    check_refused("{ span.x =~ 5 }", "regular expression");
    check_refused("{ event.name = \"x\" }", "not supported");
    check_refused("{ foo = 1 }", "unsupported field");
    check_refused("{ name = \"a\" ", "expected }");
    check_refused("{ name = \"a }", "closing quote");
    check_refused("{ (name = \"a\" }", "expected )");
    check_refused("{ span.\"a\\\"b\" = 1 }", "quotes");
    check_refused("{ name = \"a\" && }", "expected a field");

    /* bounds: nesting, length, number of conditions */
    char q[PL_TQL_MAX_LEN + 64];
    int at = snprintf(q, sizeof(q), "{ ");
    for (int i = 0; i <= PL_TQL_MAX_DEPTH; i++)
        q[at++] = '(';
    at += snprintf(q + at, sizeof(q) - (size_t)at, "name = \"a\"");
    for (int i = 0; i <= PL_TQL_MAX_DEPTH; i++)
        q[at++] = ')';
    snprintf(q + at, sizeof(q) - (size_t)at, " }");
    check_refused(q, "nested deeper");
    memset(q, ' ', sizeof(q) - 1);
    q[0] = '{';
    q[PL_TQL_MAX_LEN - 1] = '}';
    q[PL_TQL_MAX_LEN + 1] = 0;
    check_refused(q, "longer than");
    at = snprintf(q, sizeof(q), "{ name = \"a\"");
    for (int i = 0; i < PL_TQL_MAX_CONDS; i++)
        at += snprintf(q + at, sizeof(q) - (size_t)at, " && span.a = %d", i);
    snprintf(q + at, sizeof(q) - (size_t)at, " }");
    check_refused(q, "too many conditions");
}

static void test_traceql_sql_binds_client_text(void)
{
    pl_tql t;
    const char *q = "{ span.evil = \"x') OR 1=1 --\" && resource.k =~ \"a'b\" && (name = \"n\" "
                    "|| .any != 3) && resource.service.name = \"svc\" }";
    REQUIRE(parse(&t, q) == 0);
    pl_buf sql;
    pl_buf_init(&sql);
    pl_tql_bind binds[PL_TQL_MAX_BINDS];
    int next = 10, n_binds = 0;
    REQUIRE(pl_tql_sql(&t, &sql, &next, binds, &n_binds) == 0);
    pl_buf_append_byte(&sql, 0);
    const char *s = (const char *)sql.data;
    CHECK(!strstr(s, "evil"));
    CHECK(!strstr(s, "OR 1=1"));
    CHECK(!strstr(s, "a'b"));
    CHECK(!strstr(s, "svc"));
    CHECK(!strstr(s, "'n'"));
    CHECK(strstr(s, " OR ") != NULL);          /* the || group */
    CHECK(strstr(s, "s.service = ?") != NULL); /* service.name reads the indexed column */
    CHECK(strstr(s, "regexp(?") != NULL);
    CHECK(n_binds > 0 && n_binds <= PL_TQL_MAX_BINDS);
    CHECK_EQ_INT(binds[0].index, 10);
    for (int i = 0; i < n_binds; i++)
        CHECK(binds[i].index >= 10 && binds[i].index < next);
    pl_buf_free(&sql);
    pl_tql_free(&t);
}

/* ---- route table --------------------------------------------------------- */

static void test_route_table(void)
{
    size_t n_tables;
    const pl_store_route_table *const *tables = pl_store_route_tables(&n_tables);
    REQUIRE(n_tables >= 2);
    const char *rest;
    bool known;
    const pl_store_route *r =
        pl_store_route_find(tables, n_tables, "GET", "/api/services", &rest, &known);
    REQUIRE(r);
    CHECK_EQ_STR(r->path, "/api/services");
    CHECK_EQ_STR(rest, "");
    r = pl_store_route_find(tables, n_tables, "HEAD", "/api/echo", &rest, &known);
    REQUIRE(r);
    CHECK_EQ_STR(r->path, "/api/echo");
    r = pl_store_route_find(tables, n_tables, "GET", "/api/traces/00ab", &rest, &known);
    REQUIRE(r);
    CHECK_EQ_STR(r->path, "/api/traces/*");
    CHECK_EQ_STR(rest, "00ab");
    r = pl_store_route_find(tables, n_tables, "GET", "/api/v2/search/tag/name/values", &rest,
                            &known);
    REQUIRE(r);
    CHECK_EQ_STR(rest, "name/values");
    /* the exact row wins over the prefix it starts */
    r = pl_store_route_find(tables, n_tables, "GET", "/api/traces", &rest, &known);
    REQUIRE(r);
    CHECK_EQ_STR(r->path, "/api/traces");
    r = pl_store_route_find(tables, n_tables, "POST", "/api/search", &rest, &known);
    CHECK(r == NULL);
    CHECK(known);
    /* every row documented, no row twice */
    for (size_t t = 0; t < n_tables; t++)
        for (size_t i = 0; i < tables[t]->n; i++) {
            const pl_store_route *a = &tables[t]->rows[i];
            CHECK(a->handler && a->doc && *a->doc && a->params && a->method);
            for (size_t u = 0; u < n_tables; u++)
                for (size_t j = 0; j < tables[u]->n; j++)
                    if ((u != t || j != i) && strcmp(a->path, tables[u]->rows[j].path) == 0 &&
                        strcmp(a->method, tables[u]->rows[j].method) == 0)
                        PL_FAIL_("route %s %s twice", a->method, a->path);
        }
}

/* docs/store.md embeds the table the rows generate, between markers. */
static void test_docs_list_every_route(void)
{
    REQUIRE(docs_path);
    FILE *f = fopen(docs_path, "rb");
    REQUIRE(f);
    static char doc[1 << 17];
    size_t n = fread(doc, 1, sizeof(doc) - 1, f);
    fclose(f);
    doc[n] = 0;
    const char *begin = strstr(doc, "<!-- routes:begin -->\n");
    const char *end = strstr(doc, "<!-- routes:end -->");
    REQUIRE(begin && end && end > begin);
    begin += strlen("<!-- routes:begin -->\n");
    pl_buf md;
    pl_buf_init(&md);
    pl_store_routes_markdown(&md);
    REQUIRE(pl_buf_ok(&md));
    if (md.len != (size_t)(end - begin) || memcmp(md.data, begin, md.len) != 0) {
        PL_FAIL_("docs/store.md's endpoint table differs from the route rows; it should be:");
        fwrite(md.data, 1, md.len, stderr);
    }
    pl_buf_free(&md);
}

/* ---- the endpoints on a small store --------------------------------------- */

static char db_path[256];

static void add_span(pl_batch *b, pl_scope_spans *ss, uint8_t trace, uint8_t span, uint8_t parent,
                     const char *name, int kind, int status, uint64_t start, uint64_t dur,
                     const char *attr_key, int64_t attr_val)
{
    pl_span *sp = &ss->spans[ss->n_spans++];
    memset(sp->trace_id, 0, 16);
    sp->trace_id[15] = trace;
    sp->trace_id_len = 16;
    memset(sp->span_id, span, 8);
    sp->span_id_len = 8;
    if (parent) {
        memset(sp->parent_span_id, parent, 8);
        sp->parent_span_id_len = 8;
    }
    sp->name = pl_bytes_from_cstr(name);
    sp->kind = kind;
    sp->status.code = status;
    sp->has_status = status != 0;
    sp->start_time_unix_nano = start;
    sp->end_time_unix_nano = start + dur;
    if (attr_key)
        pl_attrs_put(&b->arena, &sp->attrs, pl_bytes_from_cstr(attr_key), pl_value_int(attr_val));
}

static void fill_store(void)
{
    pl_store *s = NULL;
    pl_err err;
    REQUIRE(pl_store_open(db_path, NULL, &s, NULL, &err) == PL_OK);
    uint64_t now = pl_time_now_ns() - 10000000000ull;
    const char *services[2] = {"shop", "billing"};
    for (int r = 0; r < 2; r++) {
        pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
        pl_traces *t = &b->data.traces;
        t->resources = pl_batch_alloc(b, sizeof(pl_resource_spans));
        t->n_resources = 1;
        pl_attrs_put(&b->arena, &t->resources[0].resource.attrs, PL_BYTES_LIT("service.name"),
                     pl_value_string(pl_bytes_from_cstr(services[r])));
        t->resources[0].scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
        t->resources[0].n_scopes = 1;
        pl_scope_spans *ss = &t->resources[0].scopes[0];
        ss->spans = pl_batch_alloc(b, 4 * sizeof(pl_span));
        if (r == 0) { /* trace 1: GET /cart (server, 50 ms) -> db (client, error) */
            add_span(b, ss, 1, 0x11, 0, "GET /cart", 2, 0, now, 50000000, "http.status_code", 200);
            add_span(b, ss, 1, 0x12, 0x11, "db", 3, 2, now + 1000000, 20000000, NULL, 0);
            /* trace 2: GET /home (300 ms) */
            add_span(b, ss, 2, 0x21, 0, "GET /home", 2, 0, now + 1000000000, 300000000,
                     "http.status_code", 500);
        } else { /* trace 3: POST /pay in billing */
            add_span(b, ss, 3, 0x31, 0, "POST /pay", 2, 0, now + 2000000000, 150000000, NULL, 0);
        }
        REQUIRE(pl_store_write_batch(s, b, NULL, &err) == PL_OK);
        pl_batch_free(b);
    }
    /* CPU samples linked to the db span (0x12..) of trace 1 */
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_profiles *ps = &b->data.profiles;
    pl_dictionary *d = &ps->dict;
    ps->has_dictionary = true;
    pl_dict_ensure_zero_entries(&b->arena, d);
    d->functions = pl_arena_grow(&b->arena, d->functions, 1, 2, sizeof(pl_function));
    d->locations = pl_arena_grow(&b->arena, d->locations, 1, 2, sizeof(pl_location));
    d->stacks = pl_arena_grow(&b->arena, d->stacks, 1, 2, sizeof(pl_stack));
    d->functions[1].name_strindex = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("query"));
    memset(&d->locations[1], 0, sizeof(pl_location));
    d->locations[1].lines = pl_batch_alloc(b, sizeof(pl_line));
    d->locations[1].lines[0].function_index = 1;
    d->locations[1].n_lines = 1;
    d->n_functions = d->cap_functions = 2;
    d->n_locations = d->cap_locations = 2;
    d->stacks[1].location_indices = pl_batch_alloc(b, sizeof(int32_t));
    d->stacks[1].location_indices[0] = 1;
    d->stacks[1].n_location_indices = 1;
    d->n_stacks = d->cap_stacks = 2;
    pl_link l;
    memset(&l, 0, sizeof(l));
    l.trace_id[15] = 1;
    memset(l.span_id, 0x12, 8);
    l.trace_id_len = 16;
    l.span_id_len = 8;
    add_linked_cpu_profile(b, "shop", now, &l, 7000000);
    REQUIRE(pl_store_write_batch(s, b, NULL, &err) == PL_OK);
    pl_batch_free(b);
    pl_store_close(s);
}

static void handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    pl_sqlite_api_handle(arg, req, res);
}

/* GET target (with extra header lines) -> status, body in out. */
static int get(pl_sqlite_api *api, const char *target, const char *headers, pl_buf *out)
{
    pl_buf req;
    pl_buf_init(&req);
    pl_buf_printf(&req, "GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n", target, headers ? headers : "");
    pl_http_server_options opt;
    pl_sqlite_api_server_options(&opt);
    pl_buf raw;
    pl_buf_init(&raw);
    pl_http_server_feed(&opt, handler, api, req.data, req.len, 0, &raw);
    pl_buf_free(&req);
    pl_buf_append_byte(&raw, 0);
    int status = 0;
    sscanf((const char *)raw.data, "HTTP/1.1 %d", &status);
    const char *body = strstr((const char *)raw.data, "\r\n\r\n");
    pl_buf_reset(out);
    if (body)
        pl_buf_append_str(out, body + 4);
    pl_buf_append_byte(out, 0);
    pl_buf_free(&raw);
    return status;
}

static int count_traces(const char *json)
{
    int n = 0;
    for (const char *p = json; (p = strstr(p, "\"traceID\"")); p++)
        n++;
    return n;
}

static void search(pl_sqlite_api *api, const char *encoded_q, int want_status, int want_traces,
                   const char *want_ids)
{
    char target[1024];
    snprintf(target, sizeof(target), "/api/search?q=%s", encoded_q);
    pl_buf b;
    pl_buf_init(&b);
    int st = get(api, target, NULL, &b);
    if (st != want_status || (st == 200 && count_traces((const char *)b.data) != want_traces))
        PL_FAIL_("search %s: %d %s (want %d, %d traces)", encoded_q, st, (const char *)b.data,
                 want_status, want_traces);
    for (const char *id = want_ids; id && *id; id += strlen(id) + 1) {
        char key[64];
        snprintf(key, sizeof(key), "\"traceID\":\"%s\"", id);
        if (!strstr((const char *)b.data, key))
            PL_FAIL_("search %s: no trace %s in %s", encoded_q, id, (const char *)b.data);
    }
    pl_buf_free(&b);
}

static void test_tempo_endpoints(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(db_path, sizeof(db_path), "%s/proflink-test-tempo-%d.db", tmp ? tmp : "/tmp",
             (int)getpid());
    fill_store();
    pl_sqlite_api *api = pl_sqlite_api_new(db_path);
    REQUIRE(api);
    pl_buf b;
    pl_buf_init(&b);
    CHECK_EQ_INT(get(api, "/api/echo", NULL, &b), 200);
    CHECK_EQ_STR((const char *)b.data, "echo");
    CHECK_EQ_INT(get(api, "/api/status/buildinfo", NULL, &b), 200);
    CHECK(strstr((const char *)b.data, "\"version\":") != NULL);

    /* {} : all three; filters: exactly the matching traces (ids without
     * leading zeros, as Tempo writes them) */
    search(api, "%7B%7D", 200, 3, "1\0002\0003\0");
    search(api, "%7Bresource.service.name%3D%22shop%22%7D", 200, 2, "1\0002\0");
    search(api, "%7Bresource.service.name%3D%22shop%22%26%26status%3Derror%7D", 200, 1, "1\0");
    search(api, "%7Bspan.http.status_code%3E%3D500%7D", 200, 1, "2\0");
    search(api, "%7Bspan.http.status_code%3C300%7D", 200, 1, "1\0");
    search(api, "%7Bduration%3E100ms%26%26kind%3Dserver%7D", 200, 2, "2\0003\0");
    search(api, "%7BtraceDuration%3E%3D200ms%7D", 200, 1, "2\0");
    search(api, "%7BrootServiceName%3D~%22bill.*%22%7D", 200, 1, "3\0");
    search(api, "%7BrootServiceName!~%22bill.*%22%7D", 200, 2, "1\0002\0");
    search(api, "%7B(name%3D%22db%22%7C%7Cname%3D%22POST%20%2Fpay%22)%7D", 200, 2, "1\0003\0");
    search(api, "%7BrootName!%3D%22GET%20%2Fcart%22%26%26kind%3Dclient%7D", 200, 0, NULL);
    search(api, "%7B.http.status_code%3D200%7D", 200, 1, "1\0");
    search(api, "%7Bspan.nope%20!%3D%201%7D", 200, 0, NULL); /* a missing attribute never equals */
    search(api, "%7Bname%3D~%22(%22%7D", 400, 0, NULL);      /* a bad regex is the client's */
    search(api, "%7Bname%3D%22a%22%7D%20%7C%20count()", 400, 0, NULL);

    /* limit and spss */
    CHECK_EQ_INT(get(api, "/api/search?q=%7B%7D&limit=1", NULL, &b), 200);
    CHECK_EQ_INT(count_traces((const char *)b.data), 1);
    CHECK(strstr((const char *)b.data, "\"traceID\":\"3\"") != NULL); /* newest first */
    CHECK_EQ_INT(
        get(api, "/api/search?q=%7Bresource.service.name%3D%22shop%22%7D&spss=1", NULL, &b), 200);
    CHECK(strstr((const char *)b.data, "\"matched\":2") != NULL); /* trace 1: two spans match */
    CHECK_EQ_INT(get(api, "/api/search?limit=x", NULL, &b), 400);

    /* trace by id: 1-32 hex digits, left-padded; v1 miss is 404, v2 an
     * empty 200 */
    CHECK_EQ_INT(get(api, "/api/v2/traces/1", "Accept: application/protobuf\r\n", &b), 200);
    CHECK_EQ_INT(get(api, "/api/traces/01", "Accept: application/protobuf\r\n", &b), 200);
    CHECK_EQ_INT(get(api, "/api/traces/99", "Accept: application/protobuf\r\n", &b), 404);
    CHECK_EQ_INT(get(api, "/api/v2/traces/99", NULL, &b), 200);
    CHECK_EQ_STR((const char *)b.data, "{}\n");
    CHECK_EQ_INT(get(api, "/api/v2/traces/xyz", NULL, &b), 400);
    CHECK_EQ_INT(get(api, "/api/v2/traces/1", NULL, &b), 200);
    CHECK(strstr((const char *)b.data, "\"parentSpanId\":\"1111111111111111\"") != NULL);
    /* the span with linked samples, and only it, names itself as its
     * profile id (Grafana's "Profiles for this span") */
    {
        const char *j = (const char *)b.data;
        const char *pid = strstr(j, "{\"key\":\"pyroscope.profile.id\",\"value\":{\"stringValue\":"
                                    "\"1212121212121212\"}}");
        CHECK(pid != NULL);
        int n = 0;
        for (const char *at = j; (at = strstr(at, "pyroscope.profile.id")); at++)
            n++;
        CHECK_EQ_INT(n, 1);
    }
    /* the store's own JSON route is unchanged without the Accept header */
    CHECK_EQ_INT(get(api, "/api/traces/00000000000000000000000000000001", NULL, &b), 200);
    CHECK(strstr((const char *)b.data, "\"span_id\":\"1212121212121212\"") != NULL);
    CHECK(strstr((const char *)b.data, "\"profile_id\":\"1212121212121212\"") != NULL);
    CHECK(strstr((const char *)b.data, "\"profile_id\":\"\"") != NULL); /* the root: none */

    /* tenants: the header selects; these traces have none */
    CHECK_EQ_INT(get(api, "/api/search?q=%7B%7D", "X-Scope-OrgID: other\r\n", &b), 200);
    CHECK_EQ_INT(count_traces((const char *)b.data), 0);
    CHECK_EQ_INT(get(api, "/api/v2/traces/1", "X-Scope-OrgID: other\r\n", &b), 200);
    CHECK_EQ_STR((const char *)b.data, "{}\n");

    char long_tenant[400];
    memset(long_tenant, 'a', sizeof(long_tenant));
    memcpy(long_tenant, "X-Scope-OrgID: ", 15);
    memcpy(long_tenant + sizeof(long_tenant) - 3, "\r\n", 3);
    CHECK_EQ_INT(get(api, "/api/search?q=%7B%7D", long_tenant, &b), 400); /* never "all" */

    /* tags and values */
    CHECK_EQ_INT(get(api, "/api/v2/search/tags", NULL, &b), 200);
    CHECK(strstr((const char *)b.data, "{\"name\":\"span\",\"tags\":[\"http.status_code\"]}"));
    CHECK(strstr((const char *)b.data, "\"service.name\""));
    CHECK_EQ_INT(get(api, "/api/v2/search/tag/resource.service.name/values", NULL, &b), 200);
    CHECK_EQ_STR((const char *)b.data,
                 "{\"tagValues\":[{\"type\":\"string\",\"value\":\"billing\"},"
                 "{\"type\":\"string\",\"value\":\"shop\"}]}\n");
    CHECK_EQ_INT(get(api, "/api/v2/search/tag/span.http.status_code/values", NULL, &b), 200);
    CHECK_EQ_STR((const char *)b.data, "{\"tagValues\":[{\"type\":\"int\",\"value\":\"200\"},"
                                       "{\"type\":\"int\",\"value\":\"500\"}]}\n");
    CHECK_EQ_INT(get(api, "/api/v2/search/tag/status/values", NULL, &b), 200);
    CHECK(strstr((const char *)b.data, "{\"type\":\"keyword\",\"value\":\"error\"}"));
    CHECK_EQ_INT(get(api, "/api/v2/search/tag/bogus/values", NULL, &b), 400);
    /* Tempo's v1 forms: unscoped names, plain values */
    CHECK_EQ_INT(get(api, "/api/search/tags", NULL, &b), 200);
    CHECK_EQ_STR((const char *)b.data, "{\"tagNames\":[\"http.status_code\",\"service.name\"]}\n");
    CHECK_EQ_INT(get(api, "/api/search/tag/service.name/values", NULL, &b), 200);
    CHECK_EQ_STR((const char *)b.data, "{\"tagValues\":[\"billing\",\"shop\"]}\n");
    CHECK_EQ_INT(get(api, "/api/search/tag/status/values", NULL, &b), 200);
    CHECK_EQ_STR((const char *)b.data, "{\"tagValues\":[\"error\",\"ok\",\"unset\"]}\n");
    CHECK_EQ_INT(get(api, "/api/search/tag/http.status_code/values", NULL, &b), 200);
    CHECK_EQ_STR((const char *)b.data, "{\"tagValues\":[\"200\",\"500\"]}\n");

    /* unknown paths list what exists; a known path with another method: 405 */
    CHECK_EQ_INT(get(api, "/api/nope", NULL, &b), 404);
    CHECK(strstr((const char *)b.data, "/api/search") && strstr((const char *)b.data, "/api/echo"));
    pl_buf_free(&b);
    pl_sqlite_api_close(api);
    db_file_remove(db_path);
}

/* ---- the search-term index answers as the walk over every trace ---------- */

#define IDX_BASE 1700000000000000000ull /* start of the data (ns) */

static const char *const idx_services[] = {"shop", "billing", "cart", "auth"};
static const char *const idx_names[] = {"GET /cart", "POST /pay", "db query",    "redis GET",
                                        "render",    "GET /home", "grpc Charge", "idle"};

static pl_bytes idx_copy(pl_batch *b, const char *text)
{
    size_t n = strlen(text);
    return (pl_bytes){(const uint8_t *)pl_arena_memdup(&b->arena, text, n), (uint32_t)n};
}

/* One batch of `n` traces of 1..6 spans starting at t0 + i * step (ns). */
static void idx_batch(pl_store *s, uint64_t *rng, uint32_t first, uint32_t n, uint64_t t0,
                      uint64_t step, const char *tenant, bool in_tx)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    if (tenant) {
        b->metadata.items = pl_batch_alloc(b, sizeof(pl_kv));
        b->metadata.items[0].key = PL_BYTES_LIT("tenant");
        b->metadata.items[0].value = pl_value_string(pl_bytes_from_cstr(tenant));
        b->metadata.n = 1;
    }
    pl_traces *t = &b->data.traces;
    t->n_resources = 4;
    t->resources = pl_batch_alloc(b, 4 * sizeof(pl_resource_spans));
    for (int r = 0; r < 4; r++) {
        pl_resource_spans *rs = &t->resources[r];
        pl_attrs_put(&b->arena, &rs->resource.attrs, PL_BYTES_LIT("service.name"),
                     pl_value_string(pl_bytes_from_cstr(idx_services[r])));
        pl_attrs_put(&b->arena, &rs->resource.attrs, PL_BYTES_LIT("deployment.environment"),
                     pl_value_string(pl_bytes_from_cstr(r % 2 ? "prod" : "staging")));
        pl_attrs_put(&b->arena, &rs->resource.attrs, PL_BYTES_LIT("host.cpus"),
                     pl_value_int(2 + r));
        rs->scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
        rs->n_scopes = 1;
        rs->scopes[0].spans = pl_batch_alloc(b, n * 6 * sizeof(pl_span));
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t id = first + i;
        uint64_t start = t0 + i * step;
        if (id % 97 == 5)
            start = t0; /* equal start times */
        int spans = 1 + (int)(xorshift64(rng) % 6);
        for (int k = 0; k < spans; k++) {
            uint64_t x = xorshift64(rng);
            pl_scope_spans *ss = &t->resources[x % 4].scopes[0];
            pl_span *sp = &ss->spans[ss->n_spans++];
            memset(sp, 0, sizeof(*sp));
            memset(sp->trace_id, 0, 16);
            sp->trace_id[0] = 0x7a;
            memcpy(sp->trace_id + 12, &id, 4);
            sp->trace_id_len = 16;
            memcpy(sp->span_id, &id, 4);
            sp->span_id[4] = (uint8_t)(k + 1);
            sp->span_id[7] = 0x5a;
            sp->span_id_len = 8;
            if (k) {
                memcpy(sp->parent_span_id, sp->span_id, 8);
                sp->parent_span_id[4] = 1;
                sp->parent_span_id_len = 8;
            }
            sp->name = pl_bytes_from_cstr(idx_names[(x >> 8) % 8]);
            sp->kind = (int)((x >> 12) % 6);
            sp->status.code = (x >> 16) % 53 == 0 ? 2 : (int)((x >> 20) % 2);
            sp->start_time_unix_nano = start + (uint64_t)k * 3000000000ull * ((x >> 24) % 3);
            if (id % 211 == 9 && k == 1)
                sp->start_time_unix_nano = 0x8000000000000000ull + 5; /* past 2^63 */
            sp->end_time_unix_nano = sp->start_time_unix_nano + (x >> 28) % 900000000ull;
            pl_attrs *a = &sp->attrs;
            pl_attrs_put(&b->arena, a, PL_BYTES_LIT("http.status_code"),
                         pl_value_int((x >> 32) % 31 == 0 ? 503
                                      : (x >> 32) % 5     ? 200
                                                          : 404));
            if ((x >> 36) % 3 == 0)
                pl_attrs_put(&b->arena, a, PL_BYTES_LIT("http.route"),
                             pl_value_string(pl_bytes_from_cstr((x >> 40) % 2 ? "/api/cart/{id}"
                                                                              : "/api/pay")));
            if ((x >> 42) % 7 == 0)
                pl_attrs_put(&b->arena, a, PL_BYTES_LIT("ratio"),
                             pl_value_double((x >> 44) % 2 ? 0.25 : 3.0));
            if ((x >> 46) % 11 == 0)
                pl_attrs_put(&b->arena, a, PL_BYTES_LIT("cached"), pl_value_bool((x >> 50) % 2));
            if ((x >> 51) % 13 == 0) {
                pl_value v = {.type = PL_VALUE_BYTES};
                v.u.str = PL_BYTES_LIT("\xab\xcd");
                pl_attrs_put(&b->arena, a, PL_BYTES_LIT("blob"), v);
            }
            if (id % 389 == 3 && k == 0)
                pl_attrs_put(&b->arena, a, PL_BYTES_LIT("feature.flag"),
                             pl_value_string(PL_BYTES_LIT("beta")));
            if (id % 401 == 4)
                pl_attrs_put(&b->arena, a, PL_BYTES_LIT("big"),
                             pl_value_int(9007199254740993ll + (int64_t)(id % 3)));
            /* high cardinality: past the value cap in every bucket */
            char user[32];
            snprintf(user, sizeof(user), "user-%u-%d", id, k);
            pl_attrs_put(&b->arena, a, PL_BYTES_LIT("user.id"), pl_value_string(idx_copy(b, user)));
            if (id % 500 == 17 && k == 0) /* past the key cap */
                for (int e = 0; e < PL_TERMS_KEY_CAP + 20; e++) {
                    char key[32];
                    snprintf(key, sizeof(key), "extra.%d", e);
                    pl_attrs_put(&b->arena, a, idx_copy(b, key), pl_value_int(e));
                }
        }
    }
    pl_err err;
    if (in_tx)
        CHECK(pl_store_write(s, b, NULL, &err) == PL_OK);
    else
        CHECK(pl_store_write_batch(s, b, NULL, &err) == PL_OK);
    pl_batch_free(b);
}

static const char *const idx_queries[] = {
    "{status=error}",
    /* service.name against a number or a bool: no term, the walk decides */
    "{resource.service.name=5}",
    "{resource.service.name=true}",
    "{resource.service.name=5 && name=\"GET /\"}",
    "{status=ok}",
    "{status!=unset}",
    "{kind=server}",
    "{kind!=client}",
    "{resource.service.name=\"cart\"}",
    "{resource.service.name=\"nope\"}",
    "{resource.service.name!=\"cart\" && status=error}",
    "{resource.service.name=\"cart\" && name=\"redis GET\"}",
    "{resource.service.name=\"auth\" && name=\"nope\"}",
    "{resource.service.name=\"auth\" && name=\"POST /pay\" && status=error}",
    "{name=\"render\"}",
    "{name=~\"GET.*\" && status=error}",
    "{name!=\"render\" && kind=consumer && status=error}",
    "{span.http.status_code=503}",
    "{span.http.status_code>=500}",
    "{span.http.status_code>503}",
    "{span.http.status_code<=200 && status=error}",
    "{span.http.status_code<200}",
    "{span.http.status_code!=200 && kind=producer}",
    "{span.http.status_code=404.0}",
    "{span.http.status_code=\"503\"}",
    "{span.http.status_code=~\"5.*\"}",
    "{span.http.route=\"/api/pay\" && status=error}",
    "{span.http.route=\"/nope\"}",
    "{span.http.route!=\"/api/pay\" && status=error}",
    "{span.http.route=~\"/api/c.*\" && kind=internal}",
    "{span.ratio=0.25 && status=error}",
    "{span.ratio>2.5 && kind=server}",
    "{span.ratio=3}",
    "{span.cached=true && status=error}",
    "{span.cached=false && kind=consumer}",
    "{span.cached=1 && status=error}",
    "{span.blob=\"abcd\"}",
    "{span.blob=\"nope\"}",
    "{span.feature.flag=\"beta\"}",
    "{span.big=9007199254740993}",
    "{span.big>9007199254740994}",
    "{span.user.id=\"user-1234-0\"}",
    "{span.user.id=\"user-no\"}",
    "{span.extra.5=5}",
    "{span.extra.270>0}",
    "{span.nokey=\"x\"}",
    "{span.late.attr=\"yes\"}",
    "{.http.route=\"/api/pay\" && status=error}",
    "{.deployment.environment=\"prod\" && status=error}",
    "{resource.deployment.environment=\"staging\" && kind=producer && status=error}",
    "{resource.host.cpus=5 && status=error}",
    "{resource.host.cpus>9}",
    "{.host.cpus=3 && name=\"idle\" && status=error}",
    "{status=error || span.feature.flag=\"beta\"}",
    "{(name=\"render\" || name=\"idle\") && status=error && kind=server}",
    "{(span.http.status_code=503 && kind=server) || span.big=9007199254740995}",
    "{duration>800ms && status=error}",
    "{traceDuration>5s && span.http.status_code=503}",
    "{rootServiceName=\"cart\" && status=error}",
    "{rootName=\"nope\"}",
    "{statusMessage=\"x\"}",
    "{}",
};

/* Every query, in a few ranges and limits, with and without the index. */
static int idx_compare(pl_store *s, const char *what, uint64_t plan_start, int *indexed)
{
    int differences = 0;
    /* range (start, end), limit, tenant */
    static const struct {
        uint64_t start, end;
        uint32_t limit;
        const char *tenant;
    } runs[] = {
        {0, 0, 20, NULL},
        {0, 0, 100000, NULL},
        {0, 0, 20, "team-a"},
        {IDX_BASE + 600000000000ull, IDX_BASE + 1200000000000ull, 20, NULL},
        {IDX_BASE + 1500000000000ull, 0, 5, NULL},
        {IDX_BASE + 3200000000000ull, 0, 20, NULL},
    };
    for (size_t qi = 0; qi < sizeof(idx_queries) / sizeof(idx_queries[0]); qi++) {
        pl_tql q;
        if (parse(&q, idx_queries[qi]) != 0) {
            PL_FAIL_("%s: %s", idx_queries[qi], q.error);
            pl_tql_free(&q);
            differences++;
            continue;
        }
        for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
            pl_tempo_search opt = {runs[r].start,  runs[r].end, runs[r].limit, 3,
                                   runs[r].tenant, false};
            pl_buf a, b;
            pl_buf_init(&a);
            pl_buf_init(&b);
            pl_err err;
            CHECK(pl_store_tempo_search(s, &q, &opt, &a, &err) == PL_OK);
            opt.scan_only = true;
            CHECK(pl_store_tempo_search(s, &q, &opt, &b, &err) == PL_OK);
            if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0) {
                size_t at = 0;
                while (at < a.len && at < b.len && a.data[at] == b.data[at])
                    at++;
                size_t from = at > 150 ? at - 150 : 0;
                if (differences++ < 3)
                    PL_FAIL_("%s: %s run %zu: at %zu index ...%.*s\nscan ...%.*s", what,
                             idx_queries[qi], r, at, (int)(a.len - from > 300 ? 300 : a.len - from),
                             (const char *)a.data + from,
                             (int)(b.len - from > 300 ? 300 : b.len - from),
                             (const char *)b.data + from);
            }
            pl_buf_free(&a);
            pl_buf_free(&b);
        }
        int64_t *buckets;
        size_t n;
        int rc;
        if (pl_store_terms_plan(s, &q, plan_start, &buckets, &n, &rc) == PL_TERMS_CANDIDATES)
            (*indexed)++;
        free(buckets);
        pl_tql_free(&q);
    }
    return differences;
}

static void test_term_index_same_answers(void)
{
    const char *tmp = getenv("TMPDIR");
    char path[256];
    snprintf(path, sizeof(path), "%s/proflink-test-terms-%d.db", tmp ? tmp : "/tmp", (int)getpid());
    db_file_remove(path);
    uint64_t rng = 0x243f6a8885a308d3ull;
    pl_store *s = NULL;
    pl_err err;
    REQUIRE(pl_store_open(path, NULL, &s, NULL, &err) == PL_OK);
    /* 3,000 traces over 50 minutes (300 buckets), two tenants */
    for (uint32_t i = 0; i < 3000; i += 100)
        idx_batch(s, &rng, i, 100, IDX_BASE + (uint64_t)i * 1000000000ull, 1000000000ull,
                  i % 200 ? "team-a" : NULL, false);
    /* a transaction rolled back: the writer must forget its terms */
    REQUIRE(pl_store_begin(s, &err) == PL_OK);
    idx_batch(s, &rng, 3000, 50, IDX_BASE + 3000000000000ull, 1000000000ull, NULL, true);
    pl_store_rollback(s);
    /* ... and the same spans written again */
    idx_batch(s, &rng, 3000, 50, IDX_BASE + 3000000000000ull, 1000000000ull, NULL, false);
    /* more names in one bucket than the cap */
    {
        pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
        pl_traces *t = &b->data.traces;
        t->n_resources = 1;
        t->resources = pl_batch_alloc(b, sizeof(pl_resource_spans));
        t->resources[0].scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
        t->resources[0].n_scopes = 1;
        uint32_t n = PL_TERMS_NAME_CAP + 50;
        pl_scope_spans *ss = &t->resources[0].scopes[0];
        ss->spans = pl_batch_alloc(b, n * sizeof(pl_span));
        for (uint32_t i = 0; i < n; i++) {
            pl_span *sp = &ss->spans[ss->n_spans++];
            memset(sp, 0, sizeof(*sp));
            sp->trace_id[0] = 0x7b;
            memcpy(sp->trace_id + 12, &i, 4);
            sp->trace_id_len = 16;
            memcpy(sp->span_id, &i, 4);
            sp->span_id[7] = 0x6b;
            sp->span_id_len = 8;
            char name[32];
            snprintf(name, sizeof(name), "op-%u", i);
            sp->name = idx_copy(b, name);
            sp->start_time_unix_nano = IDX_BASE + 1000000000000ull + i;
            sp->end_time_unix_nano = sp->start_time_unix_nano + 1000;
        }
        REQUIRE(pl_store_write_batch(s, b, NULL, &err) == PL_OK);
        pl_batch_free(b);
    }
    /* a stored span sent again with other times and attributes (and a
     * profile summary, so its stored attributes are replaced): the stored
     * span keeps its start time and gets the new attributes */
    {
        pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
        pl_traces *t = &b->data.traces;
        t->n_resources = 1;
        t->resources = pl_batch_alloc(b, sizeof(pl_resource_spans));
        t->resources[0].scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
        t->resources[0].n_scopes = 1;
        pl_scope_spans *ss = &t->resources[0].scopes[0];
        ss->spans = pl_batch_alloc(b, sizeof(pl_span));
        pl_span *sp = &ss->spans[ss->n_spans++];
        memset(sp, 0, sizeof(*sp));
        uint32_t id = 1234; /* its first span (written above) */
        sp->trace_id[0] = 0x7a;
        memcpy(sp->trace_id + 12, &id, 4);
        sp->trace_id_len = 16;
        memcpy(sp->span_id, &id, 4);
        sp->span_id[4] = 1;
        sp->span_id[7] = 0x5a;
        sp->span_id_len = 8;
        sp->name = PL_BYTES_LIT("late copy");
        sp->start_time_unix_nano = IDX_BASE + 2900000000000ull;
        sp->end_time_unix_nano = sp->start_time_unix_nano + 1000;
        pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("pyroscope.profile.id"),
                     pl_value_string(PL_BYTES_LIT("0123456789abcdef")));
        pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("late.attr"),
                     pl_value_string(PL_BYTES_LIT("yes")));
        REQUIRE(pl_store_write_batch(s, b, NULL, &err) == PL_OK);
        pl_batch_free(b);
    }
    pl_store_close(s);
    pl_store_options ro = {.read_only = true};
    REQUIRE(pl_store_open(path, &ro, &s, NULL, &err) == PL_OK);
    int indexed = 0;
    CHECK_EQ_INT(idx_compare(s, "new store", IDX_BASE, &indexed), 0);
    CHECK(indexed >= 15); /* the index rules buckets out for many queries */
    pl_tql q;
    int64_t *buckets;
    size_t n;
    int rc;
    REQUIRE(parse(&q, "{resource.service.name=\"nope\"}") == 0);
    CHECK_EQ_INT(pl_store_terms_plan(s, &q, IDX_BASE, &buckets, &n, &rc), PL_TERMS_CANDIDATES);
    CHECK_EQ_INT((int)n, 0); /* no bucket: answered without reading a span */
    free(buckets);
    pl_tql_free(&q);
    pl_store_close(s);

    /* an older store (schema 6, no index) upgraded: its spans are searched
     * without the index, the spans written after with it */
    sqlite3 *db;
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db,
                         "DROP TABLE span_terms; DELETE FROM spans WHERE start_ns < 0; "
                         "PRAGMA user_version = 6; PRAGMA wal_checkpoint(TRUNCATE)",
                         NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    REQUIRE(pl_store_open(path, NULL, &s, NULL, &err) == PL_OK);
    for (uint32_t i = 4000; i < 4600; i += 100)
        idx_batch(s, &rng, i, 100,
                  IDX_BASE + 3300000000000ull + (uint64_t)(i - 4000) * 500000000ull, 500000000ull,
                  "team-a", false);
    pl_store_close(s);
    REQUIRE(pl_store_open(path, &ro, &s, NULL, &err) == PL_OK);
    indexed = 0;
    CHECK_EQ_INT(idx_compare(s, "upgraded store", IDX_BASE + 3200000000000ull, &indexed), 0);
    CHECK(indexed >= 10); /* after the old spans: the index */
    REQUIRE(parse(&q, "{status=error}") == 0);
    /* old spans in range: no index */
    CHECK_EQ_INT(pl_store_terms_plan(s, &q, IDX_BASE, &buckets, &n, &rc), PL_TERMS_SCAN);
    free(buckets);
    pl_tql_free(&q);
    pl_store_close(s);

    /* retention: the rows of deleted buckets go, answers stay the same */
    REQUIRE(pl_store_open(path, NULL, &s, NULL, &err) == PL_OK);
    uint64_t cutoff = IDX_BASE + 1800000000000ull;
    REQUIRE(pl_store_enforce_retention(s, cutoff + 3600000000000ull, 3600000000000ull, 0, false,
                                       NULL, &err) == PL_OK);
    idx_batch(s, &rng, 5000, 100, IDX_BASE + 3400000000000ull, 200000000ull, NULL, false);
    pl_store_close(s);
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    sqlite3_stmt *st;
    REQUIRE(sqlite3_prepare_v2(db,
                               "SELECT count(*) FROM span_terms WHERE term != 0 AND minute >= 0 "
                               "AND minute < ?1",
                               -1, &st, NULL) == SQLITE_OK);
    sqlite3_bind_int64(st, 1, (int64_t)(cutoff / PL_TERMS_BUCKET_NS));
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ_INT(sqlite3_column_int(st, 0), 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    REQUIRE(pl_store_open(path, &ro, &s, NULL, &err) == PL_OK);
    indexed = 0;
    CHECK_EQ_INT(idx_compare(s, "after retention", IDX_BASE + 3200000000000ull, &indexed), 0);
    CHECK(indexed >= 10);
    pl_store_close(s);
    db_file_remove(path);
}

int main(int argc, char **argv)
{
    pl_test_watch_plans();
    if (argc > 1 && strcmp(argv[1], "--markdown") == 0) {
        pl_buf md;
        pl_buf_init(&md);
        pl_store_routes_markdown(&md);
        fwrite(md.data, 1, md.len, stdout);
        pl_buf_free(&md);
        return 0;
    }
    docs_path = argc > 1 ? argv[1] : NULL;
    PL_RUN(test_traceql_grafana_queries);
    PL_RUN(test_traceql_refused);
    PL_RUN(test_traceql_sql_binds_client_text);
    PL_RUN(test_route_table);
    PL_RUN(test_docs_list_every_route);
    PL_RUN(test_tempo_endpoints);
    PL_RUN(test_term_index_same_answers);
    PL_RUN(pl_test_plans_checked);
    return pl_test_done();
}
