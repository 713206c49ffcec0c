/*
 * test_querier.c: the Pyroscope querier's label-selector parser and its
 * flame graph encoding (store/querier_selector.c, store/querier_flame.c).
 *
 * The levels test uses Pyroscope's own example (pkg/model/flamegraph_test.go:
 * stacks a;b;e=1, a;c=2, a;c;d=1) and checks every value; the max_nodes
 * test checks which nodes survive and that the cut ones become `other`; a
 * larger random tree is decoded back (as Grafana's levelsToTree does) and
 * every node must lie inside its parent with the totals preserved.
 */
#include "store/querier_internal.h"
#include "testlib.h"

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

int main(void)
{
    PL_RUN(test_selector_operators);
    PL_RUN(test_selector_escapes_and_empty);
    PL_RUN(test_selector_errors);
    PL_RUN(test_levels_upstream_example);
    PL_RUN(test_max_nodes_other);
    PL_RUN(test_random_tree_nests);
    return pl_test_done();
}
