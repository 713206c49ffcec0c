/*
 * bench_querier.c: latency of the Grafana Pyroscope querier (store/querier.c)
 * on a large store, end to end: a Connect JSON request through the store
 * API's handler and the HTTP server (without sockets), answer encoded.
 *
 *   BENCH_SAMPLES_PER_TRACE=100 build/tests/bench_store 5000 /tmp/q.db
 *   build/tests/bench_querier --grow 99500 /tmp/q.db
 *   build/tests/bench_querier /tmp/q.db
 *
 * bench_store writes traces of 10 spans (5 services, over one hour) and
 * 100 CPU samples per trace linked to their spans, through the store's
 * writer: its functions, stacks (2,000), services and profile types.
 * `--grow N` then adds N more traces of the same shape (10 N spans, 100 N
 * samples, their traces rows and per-minute roll-up) with bulk SQL on the
 * same schema, reusing those stacks: the writer alone takes hours for 10 M
 * samples on a shared machine. 99,500 more make 1 M spans and 10 M samples.
 * (It also fills the per-(service, type, 10 s) totals, as the writer does.)
 * This program then times, on a read-only connection:
 *   - a span profile (SelectMergeSpanProfile) of one span, 20 spans,
 *   - the same span with its descendants,
 *   - a 1 h flame graph of one service (SelectMergeStacktraces),
 *   - a 1 h flame graph of one endpoint of it (selector on http.route),
 *   - a 1 h series of one service with 15 s steps (SelectSeries),
 *   - both with a stack_trace_selector call site (four frames of a stack),
 *   - ProfileTypes, LabelNames and LabelValues (span_name) over the hour.
 * Prints medians and p90s.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "core/buf.h"
#include "core/component.h"
#include "net/http_server.h"
#include "store/sqlite_api.h"

static pl_sqlite_api *api;
static int last_status;
static uint64_t last_cpu_ns; /* CPU time of the last call: the machine may be shared */

static uint64_t cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    pl_sqlite_api_handle(arg, req, res);
}

/* One Connect JSON call; returns its time in ns and keeps the answer. */
static uint64_t call(const char *method, const char *body, pl_buf *answer)
{
    pl_buf req;
    pl_buf_init(&req);
    pl_buf_printf(&req,
                  "POST /querier.v1.QuerierService/%s HTTP/1.1\r\nHost: x\r\n"
                  "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                  method, strlen(body), body);
    pl_http_server_options opt;
    pl_sqlite_api_server_options(&opt);
    pl_buf_reset(answer);
    uint64_t c0 = cpu_now(), t0 = pl_time_now_ns();
    pl_http_server_feed(&opt, handler, api, req.data, req.len, 0, answer);
    uint64_t dt = pl_time_now_ns() - t0;
    last_cpu_ns = cpu_now() - c0;
    last_status = answer->len > 12 ? atoi((const char *)answer->data + 9) : 0;
    pl_buf_free(&req);
    return dt;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *ns, uint64_t *cpu, int n, size_t bytes)
{
    qsort(ns, (size_t)n, sizeof(uint64_t), cmp_u64);
    qsort(cpu, (size_t)n, sizeof(uint64_t), cmp_u64);
    printf("%-40s median %8.2f ms  p90 %8.2f ms  CPU %8.2f ms  (%d runs, %zu B, HTTP %d)\n", what,
           (double)ns[n / 2] / 1e6, (double)ns[(n * 9) / 10] / 1e6, (double)cpu[n / 2] / 1e6, n,
           bytes, last_status);
}

static void run(const char *what, const char *method, const char *body, int n)
{
    uint64_t ns[64], cpu[64];
    pl_buf answer;
    pl_buf_init(&answer);
    call(method, body, &answer); /* warm the page cache */
    for (int i = 0; i < n; i++) {
        ns[i] = call(method, body, &answer);
        cpu[i] = last_cpu_ns;
    }
    report(what, ns, cpu, n, answer.len);
    if (last_status != 200)
        printf("  answer: %.300s\n", answer.data ? (const char *)answer.data : "");
    pl_buf_free(&answer);
}

/* Bulk SQL that adds `n` traces shaped like bench_store's (see the top). */
static const char grow_sql[] =
    "PRAGMA synchronous = OFF; PRAGMA cache_size = -262144; BEGIN;"
    "CREATE TEMP TABLE g AS WITH RECURSIVE t(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM t"
    "  WHERE i < ?1 - 1) SELECT i, ?2 - 3600000000000 + i * (3600000000000 / ?1) AS st,"
    "  5000000 + (i * 7919) % 500000000 AS dur FROM t;"
    "CREATE TEMP TABLE kk AS WITH RECURSIVE t(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM t"
    "  WHERE k < 9) SELECT k FROM t;"
    "CREATE TEMP TABLE jj AS WITH RECURSIVE t(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM t"
    "  WHERE j < 99) SELECT j FROM t;"
    "CREATE TEMP TABLE svc AS SELECT row_number() OVER (ORDER BY sv.id) - 1 AS k, sv.id AS id,"
    "  s.value AS name FROM services sv JOIN strings s ON s.id = sv.id;"
    "CREATE TEMP TABLE nm(k INTEGER PRIMARY KEY, name TEXT);"
    "INSERT INTO nm VALUES (0, 'GET /api/cart'), (1, 'SELECT cart_items'), (2, 'redis GET'),"
    "  (3, 'render'), (4, 'POST /checkout'), (5, 'grpc Payment/Charge');"
    "CREATE TEMP TABLE r0 AS SELECT coalesce(max(rowid), 0) AS m FROM spans;"
    "INSERT INTO spans(trace_id, span_id, parent_span_id, name, service, kind, start_ns, end_ns,"
    "  status_code, attributes)"
    " SELECT CAST(printf('q%015d', g.i) AS BLOB), (34 << 56) | (g.i << 8) | kk.k,"
    "  CASE WHEN kk.k = 0 THEN NULL ELSE (34 << 56) | (g.i << 8) |"
    "  (CASE WHEN kk.k < 4 THEN 0 ELSE kk.k % 4 END) END, nm.name, svc.name,"
    "  CASE WHEN kk.k = 0 THEN 2 ELSE 3 END, g.st + kk.k * g.dur / 20,"
    "  g.st + kk.k * g.dur / 20 + CASE WHEN kk.k THEN g.dur / 4 ELSE g.dur END, 0,"
    "  '{\"http.route\":\"/api/cart/{id}\",\"http.status_code\":200}'"
    " FROM g, kk JOIN svc ON svc.k = (g.i + kk.k) % 5 JOIN nm ON nm.k = (g.i + kk.k) % 6"
    " ORDER BY g.i, kk.k;"
    /* every span found by its id (store_internal.h, PL_SPAN_ROW) */
    "INSERT INTO span_ids(span_id, rid) SELECT span_id, rowid FROM spans"
    "  WHERE rowid > (SELECT m FROM r0) ORDER BY span_id;"
    /* a trace's spans took consecutive rowids: one range each, as the writer keeps */
    "INSERT INTO trace_spans(trace_id, first, last) SELECT trace_id, min(rowid), max(rowid)"
    "  FROM spans WHERE rowid > (SELECT m FROM r0) GROUP BY trace_id;"
    "INSERT INTO traces(trace_id, start_ns, end_ns, root_span_id, root_name, root_service,"
    "  root_start_ns, root_end_ns, span_count, error_count, duration_ns)"
    " SELECT CAST(printf('q%015d', g.i) AS BLOB), g.st, g.st + g.dur, (34 << 56) | (g.i << 8),"
    "  nm.name, svc.name, g.st, g.st + g.dur, 10, 0, g.dur"
    " FROM g JOIN svc ON svc.k = g.i % 5 JOIN nm ON nm.k = g.i % 6;"
    "CREATE TEMP VIEW gs AS SELECT svc.id AS service_id, g.st + jj.j * 1000000 AS ts,"
    "  (34 << 56) | (g.i << 8) | (jj.j % 10) AS span_id, CASE WHEN jj.j % 4 THEN 1 + (g.i * 31"
    "  + jj.j) % 100 ELSE 1 + (g.i * 131 + jj.j * 7919) % 1996 END AS stack_id,"
    "  CAST(printf('q%015d', g.i) AS BLOB) AS trace_id"
    " FROM g, jj JOIN svc ON svc.k = (g.i + jj.j % 10) % 5;"
    "INSERT INTO samples(service_id, bucket, type_id, span_id, stack_id, trace_id, value, cpu_ns,"
    "  count, wall_ns)"
    " SELECT service_id, ts / 10000000000, ?3, span_id, stack_id, trace_id, 10000000, 10000000,"
    "  1, 0 FROM gs WHERE 1 ON CONFLICT(service_id, bucket, type_id, span_id, stack_id) DO UPDATE"
    "  SET value = value + excluded.value, cpu_ns = cpu_ns + excluded.cpu_ns, count = count + 1;"
    /* each span's sample keys (store_internal.h, PL_SPAN_SAMPLES) */
    "INSERT OR IGNORE INTO sample_spans(span_id, service_id, bucket, type_id)"
    " SELECT DISTINCT span_id, service_id, ts / 10000000000, ?3 FROM gs ORDER BY 1, 2, 3;"
    "INSERT INTO service_profiles(service_id, minute, type_id, stack_id, value, cpu_ns, count,"
    "  wall_ns)"
    " SELECT service_id, ts / 60000000000, ?3, stack_id, count(*) * 10000000,"
    "  count(*) * 10000000, count(*), 0 FROM gs GROUP BY 1, 2, 4 ON CONFLICT(service_id, minute,"
    "  type_id, stack_id) DO UPDATE SET value = value + excluded.value,"
    "  cpu_ns = cpu_ns + excluded.cpu_ns, count = count + excluded.count;"
    "INSERT INTO service_totals(service_id, type_id, bucket, value)"
    " SELECT service_id, ?3, ts / 10000000000, count(*) * 10000000 FROM gs GROUP BY 1, 3"
    " ON CONFLICT(service_id, type_id, bucket) DO UPDATE SET value = value + excluded.value;"
    /* these spans have no search terms (store/store_terms.h): their range
     * is searched without the index */
    "INSERT INTO span_terms(term, minute, lo, hi) SELECT 0, 0, min(st), max(st + 9 * dur / 20)"
    "  FROM g WHERE 1 ON CONFLICT(term, minute) DO UPDATE SET lo = min(lo, excluded.lo),"
    "  hi = max(hi, excluded.hi);"
    "COMMIT;";

static int grow(const char *path, int64_t n)
{
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        return 1;
    int64_t end = 0, type = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT max(start_ns), (SELECT min(type_id) FROM profile_types)"
                           " FROM traces",
                           -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        end = sqlite3_column_int64(st, 0);
        type = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    if (!end || !type) {
        fprintf(stderr, "%s: write it with bench_store first\n", path);
        return 1;
    }
    uint64_t t0 = pl_time_now_ns();
    const char *sql = grow_sql;
    int rc = SQLITE_OK;
    while (rc == SQLITE_OK && *sql) {
        const char *tail;
        rc = sqlite3_prepare_v2(db, sql, -1, &st, &tail);
        if (rc != SQLITE_OK || !st)
            break;
        for (int i = 1; i <= sqlite3_bind_parameter_count(st); i++) {
            const char *name = sqlite3_bind_parameter_name(st, i);
            int64_t v = !name ? 0 : name[1] == '1' ? n : name[1] == '2' ? end : type;
            sqlite3_bind_int64(st, i, v);
        }
        rc = sqlite3_step(st);
        rc = (rc == SQLITE_DONE || rc == SQLITE_ROW) ? SQLITE_OK : rc;
        sqlite3_finalize(st);
        sql = tail;
    }
    if (rc != SQLITE_OK)
        fprintf(stderr, "%s: %s\n", path, sqlite3_errmsg(db));
    else
        printf("added %" PRId64 " traces (%" PRId64 " spans, %" PRId64 " samples) in %.1f s\n", n,
               n * 10, n * 100, (double)(pl_time_now_ns() - t0) / 1e9);
    sqlite3_close(db);
    return rc == SQLITE_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--grow") == 0)
        return grow(argv[3], strtoll(argv[2], NULL, 10));
    if (argc != 2) {
        fprintf(stderr, "usage: bench_querier DB (written by bench_store)\n");
        return 2;
    }
    sqlite3 *db;
    sqlite3_stmt *st;
    int64_t now_ms = 0;
    char type[256] = "", spans[20][17];
    int n_spans = 0;
    if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", argv[1], sqlite3_errmsg(db));
        return 1;
    }
    if (sqlite3_prepare_v2(db, "SELECT max(start_ns) / 1000000 FROM traces", -1, &st, NULL) ==
            SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        now_ms = sqlite3_column_int64(st, 0) + 1000;
    sqlite3_finalize(st);
    /* spans with samples, from the middle of the hour */
    if (sqlite3_prepare_v2(db,
                           "SELECT printf('%016x', span_id) FROM spans WHERE start_ns > ?1 AND "
                           "span_id IN (SELECT span_id FROM sample_spans) AND "
                           "parent_span_id IS NULL LIMIT 20",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (now_ms - 1800000) * 1000000);
        while (n_spans < 20 && sqlite3_step(st) == SQLITE_ROW)
            snprintf(spans[n_spans++], 17, "%s", (const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    /* a call site: the first four frames (from the root) of one stack
     * (bench_store's stacks share their first three) */
    char site[4][128] = {"", "", "", ""};
    int64_t fids[4] = {0, 0, 0, 0};
    if (sqlite3_prepare_v2(db, "SELECT frames FROM stacks WHERE length(frames) > 8 LIMIT 1", -1,
                           &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        const uint8_t *p = sqlite3_column_blob(st, 0);
        int len = sqlite3_column_bytes(st, 0), at = 0;
        for (int k = 0; k < 4; k++)
            for (int shift = 0; at < len && shift < 63; shift += 7) {
                fids[k] |= (int64_t)(p[at] & 0x7f) << shift;
                if (!(p[at++] & 0x80))
                    break;
            }
    }
    sqlite3_finalize(st);
    for (int k = 0; k < 4; k++)
        if (sqlite3_prepare_v2(db,
                               "SELECT st.value FROM functions f JOIN strings st ON st.id = "
                               "f.name_id WHERE f.id = ?1",
                               -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, fids[k]);
            if (sqlite3_step(st) == SQLITE_ROW)
                snprintf(site[k], sizeof(site[k]), "%s", (const char *)sqlite3_column_text(st, 0));
            sqlite3_finalize(st);
        }
    sqlite3_close(db);
    api = pl_sqlite_api_new(argv[1]);
    pl_buf answer;
    pl_buf_init(&answer);
    char body[1024];
    snprintf(body, sizeof(body), "{\"start\":%" PRId64 ",\"end\":%" PRId64 "}", now_ms - 3600000,
             now_ms);
    call("ProfileTypes", body, &answer);
    const char *id = answer.data ? strstr((const char *)answer.data, "\"ID\":\"") : NULL;
    if (id)
        sscanf(id + 6, "%255[^\"]", type);
    if (!*type || !n_spans) {
        fprintf(stderr, "no profile type or no span with samples in %s: %.300s\n", argv[1],
                answer.data ? (const char *)answer.data : "");
        return 1;
    }
    printf("store %s: profile type %s, %d spans with samples\n", argv[1], type, n_spans);
    run("ProfileTypes (1 h)", "ProfileTypes", body, 10);

    uint64_t ns[20], cpu[20];
    for (int desc = 0; desc < 2; desc++) {
        for (int i = 0; i < n_spans; i++) {
            snprintf(body, sizeof(body),
                     "{\"profile_typeID\":\"%s\",\"labelSelector\":\"{}\",\"spanSelector\":"
                     "[\"%s\"],\"start\":%" PRId64 ",\"end\":%" PRId64
                     ",\"includeDescendants\":%s}",
                     type, spans[i], now_ms - 3600000, now_ms, desc ? "true" : "false");
            call("SelectMergeSpanProfile", body, &answer);
            ns[i] = call("SelectMergeSpanProfile", body, &answer);
            cpu[i] = last_cpu_ns;
        }
        report(desc ? "span profile with descendants" : "span profile (own samples)", ns, cpu,
               n_spans, answer.len);
    }
    snprintf(body, sizeof(body),
             "{\"profile_typeID\":\"%s\",\"labelSelector\":\"{service_name=\\\"checkout\\\"}\","
             "\"start\":%" PRId64 ",\"end\":%" PRId64 "}",
             type, now_ms - 3600000, now_ms);
    run("1 h service flame graph", "SelectMergeStacktraces", body, 10);
    snprintf(body, sizeof(body),
             "{\"profile_typeID\":\"%s\",\"labelSelector\":\"{service_name=\\\"checkout\\\","
             "\\\"http.route\\\"=\\\"/api/cart/{id}\\\"}\",\"start\":%" PRId64 ",\"end\":%" PRId64
             "}",
             type, now_ms - 3600000, now_ms);
    run("1 h endpoint flame graph (http.route)", "SelectMergeStacktraces", body, 5);
    printf("call site: %s;%s;%s;%s\n", site[0], site[1], site[2], site[3]);
    snprintf(body, sizeof(body),
             "{\"profile_typeID\":\"%s\",\"labelSelector\":\"{service_name=\\\"checkout\\\"}\","
             "\"start\":%" PRId64 ",\"end\":%" PRId64
             ",\"stackTraceSelector\":{\"callSite\":[{\"name\":\"%s\"},{\"name\":\"%s\"},"
             "{\"name\":\"%s\"},{\"name\":\"%s\"}]}}",
             type, now_ms - 3600000, now_ms, site[0], site[1], site[2], site[3]);
    run("1 h service flame graph, 4-frame call site", "SelectMergeStacktraces", body, 10);
    static const int steps[] = {15, 60};
    for (size_t i = 0; i < 2; i++) {
        snprintf(body, sizeof(body),
                 "{\"profile_typeID\":\"%s\",\"labelSelector\":\"{service_name=\\\"checkout\\\"}\","
                 "\"start\":%" PRId64 ",\"end\":%" PRId64 ",\"step\":%d}",
                 type, now_ms - 3600000, now_ms, steps[i]);
        char name[64];
        snprintf(name, sizeof(name), "1 h service series, %d s steps", steps[i]);
        run(name, "SelectSeries", body, 10);
    }
    snprintf(body, sizeof(body),
             "{\"profile_typeID\":\"%s\",\"labelSelector\":\"{service_name=\\\"checkout\\\"}\","
             "\"start\":%" PRId64 ",\"end\":%" PRId64
             ",\"step\":15,\"stackTraceSelector\":{\"callSite\":[{\"name\":\"%s\"},{\"name\":"
             "\"%s\"},{\"name\":\"%s\"},{\"name\":\"%s\"}]}}",
             type, now_ms - 3600000, now_ms, site[0], site[1], site[2], site[3]);
    run("1 h service series, 15 s steps, 4-frame call site", "SelectSeries", body, 10);
    snprintf(body, sizeof(body),
             "{\"matchers\":[\"{__profile_type__=\\\"%s\\\",service_name=\\\"checkout\\\"}\"],"
             "\"start\":%" PRId64 ",\"end\":%" PRId64 "}",
             type, now_ms - 3600000, now_ms);
    run("LabelNames of a service (1 h)", "LabelNames", body, 10);
    snprintf(body, sizeof(body),
             "{\"name\":\"span_name\",\"matchers\":[\"{service_name=\\\"checkout\\\"}\"],"
             "\"start\":%" PRId64 ",\"end\":%" PRId64 "}",
             now_ms - 3600000, now_ms);
    run("LabelValues span_name of a service (1 h)", "LabelValues", body, 10);
    pl_buf_free(&answer);
    pl_sqlite_api_close(api);
    return 0;
}
