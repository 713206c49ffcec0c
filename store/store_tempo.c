/*
 * store_tempo.c: the store's reads for Tempo's search API (tempo_api.c):
 * TraceQL search, tag names and tag values, answered as Tempo's JSON.
 *
 * Search walks traces newest first through traces_by_start inside the time
 * range and keeps those with a span that meets the TraceQL expression (an
 * EXISTS over the trace's span ranges); the SQL comes from traceql.c with every
 * client value bound. Tags and tag values look at the most recent
 * PL_TEMPO_TAG_SPANS spans (a bounded read), as Tempo looks at recent
 * blocks only.
 */
#include "store/store_tempo.h"

#include "core/pattern.h"
#include "store/store_internal.h"
#include "store/store_terms.h"

/* regexp(pattern, value): TraceQL's =~ (fully anchored, RE2-style syntax
 * read by PCRE2). The compiled pattern is kept with the statement. */
static void free_pattern(void *p)
{
    pl_pattern_free(p);
    free(p);
}

static void sql_regexp(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    if (sqlite3_value_type(argv[1]) == SQLITE_NULL)
        return; /* no value: NULL, neither match nor mismatch */
    pl_pattern *p = sqlite3_get_auxdata(ctx, 0);
    if (!p) {
        const char *src = (const char *)sqlite3_value_text(argv[0]);
        if (!src)
            return;
        size_t n = strlen(src);
        char *anchored = malloc(n + 8);
        p = calloc(1, sizeof(*p));
        char msg[160];
        if (!anchored || !p) {
            free(anchored);
            free(p);
            sqlite3_result_error_nomem(ctx);
            return;
        }
        snprintf(anchored, n + 8, "^(?:%s)$", src);
        int rc = pl_pattern_compile(p, anchored, msg, sizeof(msg));
        free(anchored);
        if (rc < 0) {
            free(p);
            char full[200];
            snprintf(full, sizeof(full), "traceql regex: %s", msg);
            sqlite3_result_error(ctx, full, -1);
            return;
        }
        sqlite3_set_auxdata(ctx, 0, p, free_pattern);
        p = sqlite3_get_auxdata(ctx, 0);
        if (!p) {
            sqlite3_result_error_nomem(ctx);
            return;
        }
    }
    const unsigned char *v = sqlite3_value_text(argv[1]);
    int len = sqlite3_value_bytes(argv[1]);
    if (!v)
        return;
    sqlite3_result_int(ctx, pl_pattern_exec(p, (pl_bytes){v, (uint32_t)len}, NULL, 0));
}

static int register_regexp(pl_store *s)
{
    return sqlite3_create_function(s->db, "regexp", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                                   sql_regexp, NULL, NULL);
}

/* Every statement over one trace's spans reads them through the trace's
 * span ranges (PL_TRACE_SPANS, trace_spans first), never another path
 * the planner might pick for a condition on the spans' columns. */
#define TRACE_SPANS(C) PL_TRACE_SPANS("s", C)

/* The JSON path of an attribute: $."name" (names never hold '"' or '\'). */
static int bind_params(sqlite3_stmt *st, const pl_tql_bind *binds, int n)
{
    for (int i = 0; i < n; i++) {
        const pl_tql_cond *c = binds[i].cond;
        int rc;
        if (!sqlite3_bind_parameter_name(st, binds[i].index))
            continue; /* not used by this statement (a column read directly) */
        if (binds[i].attr) {
            char *path = sqlite3_mprintf("$.\"%s\"", c->attr);
            if (!path)
                return SQLITE_NOMEM;
            rc = sqlite3_bind_text(st, binds[i].index, path, -1, sqlite3_free);
        } else if (c->vtype == PL_TQL_V_STRING) {
            rc = sqlite3_bind_text(st, binds[i].index, c->str, -1, SQLITE_STATIC);
        } else if (c->vtype == PL_TQL_V_FLOAT) {
            rc = sqlite3_bind_double(st, binds[i].index, c->d);
        } else {
            rc = sqlite3_bind_int64(st, binds[i].index, c->i);
        }
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

static void json_text(pl_buf *b, const unsigned char *s)
{
    const char *t = s ? (const char *)s : "";
    pl_buf_json_string(b, t, strlen(t));
}

/* A column's value as an OTLP/JSON AnyValue. */
static void json_anyvalue(pl_buf *b, sqlite3_stmt *st, int col, const char *json_type)
{
    switch (sqlite3_column_type(st, col)) {
    case SQLITE_INTEGER:
        if (json_type && (strcmp(json_type, "true") == 0 || strcmp(json_type, "false") == 0))
            pl_buf_printf(b, "{\"boolValue\":%s}", sqlite3_column_int(st, col) ? "true" : "false");
        else
            pl_buf_printf(b, "{\"intValue\":\"%lld\"}", (long long)sqlite3_column_int64(st, col));
        return;
    case SQLITE_FLOAT:
        pl_buf_printf(b, "{\"doubleValue\":%.17g}", sqlite3_column_double(st, col));
        return;
    default:
        pl_buf_append_str(b, "{\"stringValue\":");
        json_text(b, sqlite3_column_text(st, col));
        pl_buf_append_byte(b, '}');
    }
}

#define P_FIRST_COND 10 /* ?1..?9 are the query's own parameters */

/* The SQL of one attribute condition's value and its json_type, for the
 * span set's attributes. */
static void attr_columns(pl_buf *sql, const pl_tql_cond *c, int path)
{
    switch (c->field) {
    case PL_TQL_F_RESOURCE:
        if (strcmp(c->attr, "service.name") == 0)
            pl_buf_append_str(sql, ", s.service, 'text'");
        else
            pl_buf_printf(sql,
                          ", json_extract((SELECT value FROM strings WHERE id = s.resource_id), "
                          "?%d), json_type((SELECT value FROM strings WHERE id = s.resource_id), "
                          "?%d)",
                          path, path);
        return;
    case PL_TQL_F_SPAN:
        pl_buf_printf(sql, ", json_extract(s.attributes, ?%d), json_type(s.attributes, ?%d)", path,
                      path);
        return;
    default: /* .attr */
        pl_buf_printf(sql,
                      ", coalesce(json_extract(s.attributes, ?%d), json_extract((SELECT value "
                      "FROM strings WHERE id = s.resource_id), ?%d)), coalesce(json_type("
                      "s.attributes, ?%d), json_type((SELECT value FROM strings WHERE id = "
                      "s.resource_id), ?%d))",
                      path, path, path, path);
    }
}

static bool is_attr(const pl_tql_cond *c)
{
    return c->field == PL_TQL_F_RESOURCE || c->field == PL_TQL_F_SPAN || c->field == PL_TQL_F_ANY;
}

/* What one search writes per trace. */
typedef struct emit_ctx {
    const pl_tql *q;
    const int *attr_param;
    sqlite3_stmt *spans, *matched, *stats;
    pl_buf *out;
    uint64_t inspected;
} emit_ctx;

/* One trace of the answer from `row` (trace_id, root_service, root_name,
 * start_ns, end_ns, has root). SQLITE_OK or the error. */
static int emit_trace(emit_ctx *x, sqlite3_stmt *row)
{
    const pl_tql *q = x->q;
    const int *attr_param = x->attr_param;
    sqlite3_stmt *spans = x->spans, *matched = x->matched, *stats = x->stats;
    pl_buf *out = x->out;
    int rc;
    const void *tid = sqlite3_column_blob(row, 0);
    if (sqlite3_column_bytes(row, 0) != 16)
        return SQLITE_OK;
    uint8_t id[16];
    memcpy(id, tid, 16);
    char hex[33];
    pl_hex_encode(id, 16, hex);
    const char *h = hex; /* Tempo shows ids without leading zeros */
    while (h[0] == '0' && h[1])
        h++;
    uint64_t start = (uint64_t)sqlite3_column_int64(row, 3);
    uint64_t end = (uint64_t)sqlite3_column_int64(row, 4);
    bool has_root = sqlite3_column_int(row, 5) != 0;
    pl_buf_append_str(out, x->inspected++ ? ",{\"traceID\":\"" : "{\"traceID\":\"");
    pl_buf_append_str(out, h);
    pl_buf_append_str(out, "\",\"rootServiceName\":");
    if (has_root)
        json_text(out, sqlite3_column_text(row, 1));
    else
        pl_buf_append_str(out, "\"<root span not yet received>\"");
    if (has_root) {
        pl_buf_append_str(out, ",\"rootTraceName\":");
        json_text(out, sqlite3_column_text(row, 2));
    }
    pl_buf_printf(out, ",\"startTimeUnixNano\":\"%" PRIu64 "\",\"durationMs\":%" PRIu64, start,
                  end > start ? (end - start) / 1000000 : 0);
    /* the span set: up to spss matching spans */
    sqlite3_bind_blob(spans, 1, id, 16, SQLITE_TRANSIENT);
    sqlite3_bind_blob(matched, 1, id, 16, SQLITE_TRANSIENT);
    pl_buf_append_str(out, ",\"spanSets\":[{\"spans\":[");
    int n = 0;
    while ((rc = sqlite3_step(spans)) == SQLITE_ROW) {
        uint8_t sid[8];
        char shex[17];
        span_id_bytes(sqlite3_column_int64(spans, 0), sid);
        pl_hex_encode(sid, 8, shex);
        uint64_t ss = (uint64_t)sqlite3_column_int64(spans, 2);
        uint64_t se = (uint64_t)sqlite3_column_int64(spans, 3);
        pl_buf_printf(out, "%s{\"spanID\":\"%s\",\"name\":", n++ ? "," : "", shex);
        json_text(out, sqlite3_column_text(spans, 1));
        pl_buf_printf(out,
                      ",\"startTimeUnixNano\":\"%" PRIu64 "\",\"durationNanos\":\"%" PRIu64 "\"",
                      ss, se > ss ? se - ss : 0);
        int col = 4, na = 0;
        for (int i = 0; i < q->n_conds; i++) {
            if (!attr_param[i])
                continue;
            if (sqlite3_column_type(spans, col) != SQLITE_NULL) {
                char name[300];
                const pl_tql_cond *c = &q->conds[i];
                pl_buf_append_str(out, na++ ? ",{\"key\":" : ",\"attributes\":[{\"key\":");
                /* Tempo names attributes without their scope */
                snprintf(name, sizeof(name), "%s", c->attr);
                json_text(out, (const unsigned char *)name);
                pl_buf_append_str(out, ",\"value\":");
                json_anyvalue(out, spans, col, (const char *)sqlite3_column_text(spans, col + 1));
                pl_buf_append_byte(out, '}');
            }
            col += 2;
        }
        if (na)
            pl_buf_append_byte(out, ']');
        pl_buf_append_byte(out, '}');
    }
    sqlite3_reset(spans);
    if (rc != SQLITE_DONE)
        return rc;
    int64_t count = 0;
    if ((rc = sqlite3_step(matched)) == SQLITE_ROW)
        count = sqlite3_column_int64(matched, 0);
    sqlite3_reset(matched);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return rc;
    pl_buf_printf(out, "],\"matched\":%" PRId64 "}],\"serviceStats\":{", count);
    sqlite3_bind_blob(stats, 1, id, 16, SQLITE_TRANSIENT);
    int k = 0;
    while ((rc = sqlite3_step(stats)) == SQLITE_ROW) {
        if (k++)
            pl_buf_append_byte(out, ',');
        json_text(out, sqlite3_column_text(stats, 0));
        pl_buf_printf(out, ":{\"spanCount\":%d", sqlite3_column_int(stats, 1));
        int errors = sqlite3_column_int(stats, 2);
        if (errors)
            pl_buf_printf(out, ",\"errorCount\":%d", errors);
        pl_buf_append_byte(out, '}');
    }
    sqlite3_reset(stats);
    if (rc != SQLITE_DONE)
        return rc;
    pl_buf_append_str(out, "}}");
    return SQLITE_OK;
}

/* A trace found through the term index. */
typedef struct found {
    uint8_t id[16];
    int64_t start;
} found;

/* newest first; equal starts by trace id descending, the order of a walk
 * down traces_by_start */
static int cmp_found(const void *a, const void *b)
{
    const found *x = a, *y = b;
    if (x->start != y->start)
        return x->start > y->start ? -1 : 1;
    return -memcmp(x->id, y->id, 16);
}

static size_t sort_found(found *f, size_t n)
{
    if (n < 2)
        return n;
    qsort(f, n, sizeof(*f), cmp_found);
    size_t o = 1;
    for (size_t i = 1; i < n; i++)
        if (memcmp(f[i].id, f[o - 1].id, 16) != 0)
            f[o++] = f[i];
    return o;
}

/* Search through the candidate buckets of the term index (ascending):
 * the spans of each bucket that meet the expression (`by_bucket`: ?5 the
 * bucket, ?6..?7 its start times), negative buckets first (start times past
 * 2^63 belong to any trace), then newest first. After bucket b every trace
 * with a matching span at or after b is known, and any other starts before
 * b: once `limit` known traces start at or after b, they are the answer. */
static int search_buckets(const int64_t *buckets, size_t n, sqlite3_stmt *by_bucket,
                          sqlite3_stmt *row, const pl_tempo_search *opt, emit_ctx *x)
{
    found *f = NULL;
    size_t n_found = 0, cap_found = 0;
    int rc = SQLITE_OK;
    size_t first_pos = 0; /* the first bucket >= 0 */
    while (first_pos < n && buckets[first_pos] < 0)
        first_pos++;
    for (size_t k = 0; k < n && rc == SQLITE_OK && opt->limit > 0; k++) {
        /* negative buckets, then the others newest first */
        size_t at = k < first_pos ? k : n - 1 - (k - first_pos);
        int64_t b = buckets[at];
        int64_t lo, hi;
        if (__builtin_mul_overflow(b, PL_TERMS_BUCKET_NS, &lo))
            lo = b < 0 ? INT64_MIN : INT64_MAX;
        if (__builtin_add_overflow(lo, PL_TERMS_BUCKET_NS - 1, &hi))
            hi = INT64_MAX;
        sqlite3_bind_int64(by_bucket, 5, b);
        sqlite3_bind_int64(by_bucket, 6, lo);
        sqlite3_bind_int64(by_bucket, 7, hi);
        while ((rc = sqlite3_step(by_bucket)) == SQLITE_ROW) {
            if (sqlite3_column_bytes(by_bucket, 0) != 16)
                continue;
            if (pl_array_reserve((void **)&f, n_found, &cap_found, sizeof(*f), 64)) {
                rc = SQLITE_NOMEM;
                break;
            }
            memcpy(f[n_found].id, sqlite3_column_blob(by_bucket, 0), 16);
            f[n_found++].start = sqlite3_column_int64(by_bucket, 1);
        }
        sqlite3_reset(by_bucket);
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
        if (rc != SQLITE_OK || k < first_pos)
            continue;
        n_found = sort_found(f, n_found);
        size_t newer = 0;
        while (newer < n_found && f[newer].start >= lo)
            newer++;
        if (newer >= opt->limit)
            break;
    }
    if (rc == SQLITE_OK)
        n_found = sort_found(f, n_found);
    for (size_t i = 0; i < n_found && i < opt->limit && rc == SQLITE_OK; i++) {
        sqlite3_bind_blob(row, 1, f[i].id, 16, SQLITE_STATIC);
        rc = sqlite3_step(row);
        if (rc == SQLITE_ROW)
            rc = emit_trace(x, row);
        else if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
        sqlite3_reset(row);
    }
    free(f);
    return rc;
}

/* Compiles every regular expression of q once, so that a bad one is an
 * error whatever rows the search reads. */
static int check_patterns(const pl_tql *q, char *msg, size_t cap)
{
    for (int i = 0; i < q->n_conds; i++) {
        const pl_tql_cond *c = &q->conds[i];
        if ((c->op != PL_TQL_RE && c->op != PL_TQL_NRE) || !c->str)
            continue;
        size_t n = strlen(c->str);
        char *anchored = malloc(n + 8);
        if (!anchored)
            return -1;
        snprintf(anchored, n + 8, "^(?:%s)$", c->str);
        pl_pattern p;
        int rc = pl_pattern_compile(&p, anchored, msg, cap);
        free(anchored);
        if (rc < 0)
            return -1;
        pl_pattern_free(&p);
    }
    return 0;
}

pl_status pl_store_tempo_search(pl_store *s, const pl_tql *q, const pl_tempo_search *opt,
                                pl_buf *out, pl_err *err)
{
    pl_buf cond, sql, spans_sql;
    pl_buf_init(&cond);
    pl_buf_init(&sql);
    pl_buf_init(&spans_sql);
    pl_tql_bind binds[PL_TQL_MAX_BINDS];
    int n_binds = 0, next = P_FIRST_COND;
    sqlite3_stmt *traces = NULL, *spans = NULL, *matched = NULL, *stats = NULL;
    sqlite3_stmt *by_bucket = NULL, *row = NULL;
    int64_t *buckets = NULL;
    size_t n_buckets = 0;
    char pattern_error[160];
    if (check_patterns(q, pattern_error, sizeof(pattern_error)) < 0)
        return pl_errf(err, PL_ERR_INVALID, "invalid regular expression: %s", pattern_error);
    int rc = register_regexp(s);
    bool began = false;
    if (rc != SQLITE_OK)
        goto done;
    pl_buf trace_cond;
    pl_buf_init(&trace_cond);
    pl_tql_bind trace_binds[PL_TQL_MAX_BINDS];
    int n_trace_binds = 0;
    if (pl_tql_sql(q, &cond, &next, binds, &n_binds) < 0 ||
        pl_tql_trace_sql(q, &trace_cond, &next, trace_binds, &n_trace_binds) < 0) {
        pl_buf_free(&trace_cond);
        rc = SQLITE_NOMEM;
        goto done;
    }
    /* attribute columns of the span sets: one path parameter each, after
     * the condition's */
    int attr_param[PL_TQL_MAX_CONDS];
    pl_tql_bind attr_binds[PL_TQL_MAX_CONDS];
    int n_attr = 0;
    for (int i = 0; i < q->n_conds; i++) {
        attr_param[i] = 0;
        if (!is_attr(&q->conds[i]))
            continue;
        bool seen = false; /* one column per field */
        for (int j = 0; j < i && !seen; j++)
            seen = attr_param[j] && q->conds[j].field == q->conds[i].field &&
                   strcmp(q->conds[j].attr, q->conds[i].attr) == 0;
        if (seen)
            continue;
        attr_param[i] = next;
        attr_binds[n_attr++] = (pl_tql_bind){next++, &q->conds[i], true};
    }
    pl_buf_printf(
        &sql,
        "SELECT t.trace_id, t.root_service, t.root_name, t.start_ns, t.end_ns, "
        "t.root_span_id IS NOT NULL FROM traces t INDEXED BY traces_by_start "
        "WHERE t.start_ns >= ?1 AND t.start_ns <= ?2 AND (?3 IS NULL OR t.tenant = ?3)%.*s "
        "AND EXISTS (SELECT 1 FROM " TRACE_SPANS(
            "= t.trace_id") " WHERE %.*s) "
                            "ORDER BY t.start_ns DESC LIMIT ?4",
        (int)trace_cond.len, trace_cond.data ? (const char *)trace_cond.data : "", (int)cond.len,
        (const char *)cond.data);
    /* the spans of one term-index bucket that meet the
     * expression, with their traces' starts */
    char *bucket_sql = sqlite3_mprintf(
        "SELECT DISTINCT t.trace_id, t.start_ns FROM " PL_BUCKET_SPANS(
            "s") " CROSS JOIN traces t ON t.trace_id = s.trace_id WHERE b_.bucket = ?5 AND "
                 "s.start_ns >= ?6 AND s.start_ns <= ?7 AND t.start_ns >= ?1 AND t.start_ns <= ?2 "
                 "AND (?3 IS NULL OR "
                 "t.tenant = ?3)%.*s AND %.*s",
        (int)trace_cond.len, trace_cond.data ? (const char *)trace_cond.data : "", (int)cond.len,
        (const char *)cond.data);
    pl_buf_free(&trace_cond);
    if (!bucket_sql) {
        rc = SQLITE_NOMEM;
        goto done;
    }
    rc = sqlite3_prepare_v2(s->db, bucket_sql, -1, &by_bucket, NULL);
    sqlite3_free(bucket_sql);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db,
                                "SELECT t.trace_id, t.root_service, t.root_name, t.start_ns, "
                                "t.end_ns, t.root_span_id IS NOT NULL FROM traces t WHERE "
                                "t.trace_id = ?1",
                                -1, &row, NULL);
    if (rc != SQLITE_OK)
        goto done;
    pl_buf_append_str(&spans_sql, "SELECT s.span_id, s.name, s.start_ns, s.end_ns");
    for (int i = 0; i < q->n_conds; i++)
        if (attr_param[i])
            attr_columns(&spans_sql, &q->conds[i], attr_param[i]);
    pl_buf_printf(&spans_sql,
                  " FROM " TRACE_SPANS(
                      "= ?1") " CROSS JOIN traces t ON t.trace_id = "
                              "s.trace_id WHERE %.*s ORDER BY s.start_ns, s.span_id LIMIT ?4",
                  (int)cond.len, (const char *)cond.data);
    pl_buf_append_byte(&sql, 0);
    pl_buf_append_byte(&spans_sql, 0);
    if (!pl_buf_ok(&sql) || !pl_buf_ok(&spans_sql)) {
        rc = SQLITE_NOMEM;
        goto done;
    }
    char *count_sql = sqlite3_mprintf(
        "SELECT count(*) FROM " TRACE_SPANS("= ?1") " CROSS JOIN traces t ON "
                                                    "t.trace_id = s.trace_id WHERE %.*s",
        (int)cond.len, (const char *)cond.data);
    if (!count_sql) {
        rc = SQLITE_NOMEM;
        goto done;
    }
    rc = sqlite3_prepare_v2(s->db, (const char *)sql.data, -1, &traces, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, (const char *)spans_sql.data, -1, &spans, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, count_sql, -1, &matched, NULL);
    sqlite3_free(count_sql);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db,
                                "SELECT s.service, count(*), sum(s.status_code = 2) "
                                "FROM " TRACE_SPANS("= ?1") " GROUP BY s.service ORDER BY "
                                                            "s.service",
                                -1, &stats, NULL);
    if (rc != SQLITE_OK)
        goto done;
    if ((rc = bind_params(traces, binds, n_binds)) != SQLITE_OK ||
        (rc = bind_params(traces, trace_binds, n_trace_binds)) != SQLITE_OK ||
        (rc = bind_params(spans, binds, n_binds)) != SQLITE_OK ||
        (rc = bind_params(spans, attr_binds, n_attr)) != SQLITE_OK ||
        (rc = bind_params(matched, binds, n_binds)) != SQLITE_OK ||
        (rc = bind_params(by_bucket, binds, n_binds)) != SQLITE_OK ||
        (rc = bind_params(by_bucket, trace_binds, n_trace_binds)) != SQLITE_OK)
        goto done;
    sqlite3_bind_int64(traces, 1, (int64_t)opt->start_ns);
    sqlite3_bind_int64(traces, 2, opt->end_ns ? (int64_t)opt->end_ns : INT64_MAX);
    if (opt->tenant)
        sqlite3_bind_text(traces, 3, opt->tenant, -1, SQLITE_STATIC);
    sqlite3_bind_int64(by_bucket, 1, (int64_t)opt->start_ns);
    sqlite3_bind_int64(by_bucket, 2, opt->end_ns ? (int64_t)opt->end_ns : INT64_MAX);
    if (opt->tenant)
        sqlite3_bind_text(by_bucket, 3, opt->tenant, -1, SQLITE_STATIC);
    sqlite3_bind_int64(traces, 4, opt->limit);
    sqlite3_bind_int64(spans, 4, opt->spss);

    began = sqlite3_get_autocommit(s->db) &&
            sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
    /* the term index: the buckets that may hold a matching span (none:
     * nothing to read), or a walk over every trace in range */
    int plan = PL_TERMS_SCAN;
    if (!opt->scan_only) {
        plan = pl_store_terms_plan(s, q, opt->start_ns, &buckets, &n_buckets, &rc);
        if (rc != SQLITE_OK)
            goto done;
    }
    emit_ctx x = {q, attr_param, spans, matched, stats, out, 0};
    pl_buf_append_str(out, "{\"traces\":[");
    if (plan == PL_TERMS_CANDIDATES) {
        rc = search_buckets(buckets, n_buckets, by_bucket, row, opt, &x);
    } else {
        while ((rc = sqlite3_step(traces)) == SQLITE_ROW)
            if ((rc = emit_trace(&x, traces)) != SQLITE_OK)
                break;
    }
    uint64_t inspected = x.inspected;
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    pl_buf_printf(out,
                  "],\"metrics\":{\"inspectedTraces\":%" PRIu64 ",\"completedJobs\":1,"
                  "\"totalJobs\":1}}\n",
                  inspected);

done:;
    char regex_error[200] = "";
    if (rc != SQLITE_OK) { /* a bad regular expression is the client's error */
        const char *msg = sqlite3_errmsg(s->db);
        if (rc == SQLITE_ERROR && msg && strncmp(msg, "traceql regex: ", 15) == 0)
            snprintf(regex_error, sizeof(regex_error), "%s", msg + 15);
    }
    if (began)
        sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    sqlite3_finalize(traces);
    sqlite3_finalize(spans);
    sqlite3_finalize(matched);
    sqlite3_finalize(stats);
    sqlite3_finalize(by_bucket);
    sqlite3_finalize(row);
    free(buckets);
    pl_buf_free(&cond);
    pl_buf_free(&sql);
    pl_buf_free(&spans_sql);
    if (regex_error[0])
        return pl_errf(err, PL_ERR_INVALID, "invalid regular expression: %s", regex_error);
    if (rc != SQLITE_OK)
        return pl_store_query_fail(s, rc, err);
    return pl_buf_ok(out) ? PL_OK : pl_errf(err, PL_ERR_NOMEM, "out of memory");
}

/* ---- tags ------------------------------------------------------------------ */

static const char *const intrinsic_tags[] = {
    "duration",        "kind",   "name",          "rootName",
    "rootServiceName", "status", "statusMessage", "traceDuration",
};

/* The most recent spans, optionally of one tenant. */
#define RECENT_SPANS                                                                               \
    "(SELECT attributes, resource_id, name, service FROM spans WHERE ?2 IS NULL OR trace_id IN "   \
    "(SELECT trace_id FROM traces WHERE tenant = ?2) ORDER BY rowid DESC "                         \
    "LIMIT " PL_TEMPO_TAG_SPANS ")"

static int scope_tags(pl_store *s, const char *sql, const char *tenant, uint32_t limit, pl_buf *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(st, 1, limit);
    if (tenant)
        sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
    int n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n++)
            pl_buf_append_byte(out, ',');
        json_text(out, sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

pl_status pl_store_tempo_tags(pl_store *s, const char *tenant, uint32_t limit, pl_buf *out,
                              pl_err *err)
{
    bool began = sqlite3_get_autocommit(s->db) &&
                 sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
    pl_buf_append_str(out, "{\"scopes\":[{\"name\":\"resource\",\"tags\":[");
    int rc =
        scope_tags(s,
                   "SELECT DISTINCT j.key FROM strings st, json_each(st.value) j WHERE st.id "
                   "IN (SELECT DISTINCT resource_id FROM " RECENT_SPANS ") ORDER BY j.key LIMIT ?1",
                   tenant, limit, out);
    pl_buf_append_str(out, "]},{\"name\":\"span\",\"tags\":[");
    if (rc == SQLITE_OK)
        rc = scope_tags(s,
                        "SELECT DISTINCT j.key FROM " RECENT_SPANS
                        " x, json_each(x.attributes) j ORDER BY j.key LIMIT ?1",
                        tenant, limit, out);
    pl_buf_append_str(out, "]},{\"name\":\"intrinsic\",\"tags\":[");
    for (size_t i = 0; i < sizeof(intrinsic_tags) / sizeof(intrinsic_tags[0]); i++)
        pl_buf_printf(out, "%s\"%s\"", i ? "," : "", intrinsic_tags[i]);
    pl_buf_append_str(out, "]}]}\n");
    if (began)
        sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return pl_store_query_fail(s, rc, err);
    return pl_buf_ok(out) ? PL_OK : pl_errf(err, PL_ERR_NOMEM, "out of memory");
}

static void keyword_values(pl_buf *out, const char *const *names, size_t n, bool v1)
{
    for (size_t i = 0; i < n; i++)
        pl_buf_printf(out, v1 ? "%s\"%s\"" : "%s{\"type\":\"keyword\",\"value\":\"%s\"}",
                      i ? "," : "", names[i]);
}

pl_status pl_store_tempo_tag_names(pl_store *s, const char *tenant, uint32_t limit, pl_buf *out,
                                   pl_err *err)
{
    bool began = sqlite3_get_autocommit(s->db) &&
                 sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
    pl_buf_append_str(out, "{\"tagNames\":[");
    int rc = scope_tags(s,
                        "SELECT key FROM (SELECT j.key FROM strings st, json_each(st.value) j "
                        "WHERE st.id IN (SELECT DISTINCT resource_id FROM " RECENT_SPANS
                        ") UNION SELECT j.key FROM " RECENT_SPANS
                        " x, json_each(x.attributes) j) ORDER BY key LIMIT ?1",
                        tenant, limit, out);
    pl_buf_append_str(out, "]}\n");
    if (began)
        sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return pl_store_query_fail(s, rc, err);
    return pl_buf_ok(out) ? PL_OK : pl_errf(err, PL_ERR_NOMEM, "out of memory");
}

pl_status pl_store_tempo_tag_values(pl_store *s, const char *tag, const char *tenant,
                                    uint32_t limit, bool v1, pl_buf *out, pl_err *err)
{
    static const char *const status[] = {"error", "ok", "unset"};
    static const char *const kinds[] = {"client",   "consumer", "internal",
                                        "producer", "server",   "unspecified"};
    const char *sql = NULL, *attr = NULL;
    pl_buf_append_str(out, "{\"tagValues\":[");
    if (strcmp(tag, "status") == 0 || strcmp(tag, "span:status") == 0) {
        keyword_values(out, status, 3, v1);
    } else if (strcmp(tag, "kind") == 0 || strcmp(tag, "span:kind") == 0) {
        keyword_values(out, kinds, 6, v1);
    } else if (strcmp(tag, "name") == 0 || strcmp(tag, "span:name") == 0) {
        sql = "SELECT DISTINCT name, 'text' FROM " RECENT_SPANS " ORDER BY 1 LIMIT ?1";
    } else if (strcmp(tag, "resource.service.name") == 0 || strcmp(tag, ".service.name") == 0) {
        sql = "SELECT DISTINCT service, 'text' FROM " RECENT_SPANS " ORDER BY 1 LIMIT ?1";
    } else if (strcmp(tag, "rootServiceName") == 0 || strcmp(tag, "trace:rootService") == 0) {
        sql = "SELECT DISTINCT root_service, 'text' FROM (SELECT root_service FROM traces WHERE "
              "root_service IS NOT NULL AND (?2 IS NULL OR tenant = ?2) ORDER BY start_ns DESC "
              "LIMIT " PL_TEMPO_TAG_SPANS ") ORDER BY 1 LIMIT ?1";
    } else if (strcmp(tag, "rootName") == 0 || strcmp(tag, "trace:rootName") == 0) {
        sql = "SELECT DISTINCT root_name, 'text' FROM (SELECT root_name FROM traces WHERE "
              "root_name IS NOT NULL AND (?2 IS NULL OR tenant = ?2) ORDER BY start_ns DESC "
              "LIMIT " PL_TEMPO_TAG_SPANS ") ORDER BY 1 LIMIT ?1";
    } else if (strncmp(tag, "resource.", 9) == 0 && tag[9]) {
        attr = tag + 9;
        sql = "SELECT DISTINCT v, ty FROM (SELECT json_extract(st.value, ?3) v, json_type("
              "st.value, ?3) ty FROM strings st WHERE st.id IN (SELECT DISTINCT resource_id "
              "FROM " RECENT_SPANS
              ")) WHERE v IS NOT NULL AND ty NOT IN ('object','array') ORDER BY 1 LIMIT ?1";
    } else if ((strncmp(tag, "span.", 5) == 0 && tag[5]) || (tag[0] == '.' && tag[1])) {
        bool any = tag[0] == '.';
        attr = any ? tag + 1 : tag + 5;
        sql = any ? "SELECT DISTINCT v, ty FROM (SELECT coalesce(json_extract(x.attributes, ?3), "
                    "json_extract((SELECT value FROM strings WHERE id = x.resource_id), ?3)) v, "
                    "coalesce(json_type(x.attributes, ?3), json_type((SELECT value FROM strings "
                    "WHERE id = x.resource_id), ?3)) ty FROM " RECENT_SPANS
                    " x) WHERE v IS NOT NULL AND ty NOT IN ('object','array') ORDER BY 1 LIMIT ?1"
                  : "SELECT DISTINCT v, ty FROM (SELECT json_extract(x.attributes, ?3) v, "
                    "json_type(x.attributes, ?3) ty FROM " RECENT_SPANS
                    " x) WHERE v IS NOT NULL AND ty NOT IN ('object','array') ORDER BY 1 LIMIT ?1";
    } else if (strcmp(tag, "duration") != 0 && strcmp(tag, "traceDuration") != 0 &&
               strcmp(tag, "statusMessage") != 0) {
        return pl_errf(err, PL_ERR_INVALID,
                       "unknown tag \"%.60s\": resource.x, span.x, .x or an intrinsic", tag);
    }
    if (attr && (strchr(attr, '"') || strchr(attr, '\\')))
        return pl_errf(err, PL_ERR_INVALID, "attribute names with quotes are not supported");
    int rc = SQLITE_OK;
    if (sql) {
        sqlite3_stmt *st = NULL;
        bool began = sqlite3_get_autocommit(s->db) &&
                     sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
        rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, limit);
            if (tenant)
                sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
            if (attr) {
                char *path = sqlite3_mprintf("$.\"%s\"", attr);
                if (!path)
                    rc = SQLITE_NOMEM;
                else
                    sqlite3_bind_text(st, 3, path, -1, sqlite3_free);
            }
        }
        int n = 0;
        while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            const char *ty = (const char *)sqlite3_column_text(st, 1);
            const char *type = "string";
            if (ty && strcmp(ty, "integer") == 0)
                type = "int";
            else if (ty && strcmp(ty, "real") == 0)
                type = "float";
            else if (ty && (strcmp(ty, "true") == 0 || strcmp(ty, "false") == 0))
                type = "bool";
            if (!v1)
                pl_buf_printf(out, "%s{\"type\":\"%s\",\"value\":", n ? "," : "", type);
            else if (n)
                pl_buf_append_byte(out, ',');
            n++;
            if (strcmp(type, "bool") == 0)
                pl_buf_printf(out, "\"%s\"", ty);
            else
                json_text(out, sqlite3_column_text(st, 0));
            if (!v1)
                pl_buf_append_byte(out, '}');
            rc = SQLITE_OK;
        }
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
        sqlite3_finalize(st);
        if (began)
            sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    }
    pl_buf_append_str(out, "]}\n");
    if (rc != SQLITE_OK)
        return pl_store_query_fail(s, rc, err);
    return pl_buf_ok(out) ? PL_OK : pl_errf(err, PL_ERR_NOMEM, "out of memory");
}
