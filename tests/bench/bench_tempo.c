/*
 * bench_tempo.c: latency of the Tempo endpoints of the store API on a
 * store written by bench_store (1M spans: 100,000 traces of 10 spans over
 * the last hour, 5 services, 20 CPU samples per trace):
 *
 *   bench_store 1000000 /tmp/b.db && bench_tempo /tmp/b.db
 *
 * Each request goes through the API's handler as Grafana sends it (request
 * bytes through the HTTP server without sockets, so parsing, routing,
 * the query and rendering are timed, not the network): a trace by id in
 * protobuf (v2) for random traces, and searches with the TraceQL the
 * search builder writes over the last hour (limit 20, spss 3). Prints
 * medians and p90 over repeated runs.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "core/buf.h"
#include "core/component.h"
#include "core/model.h"
#include "net/http_server.h"
#include "store/sqlite_api.h"
#include "store/store_tempo.h"

#define RUNS 30

static void handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    pl_sqlite_api_handle(arg, req, res);
}

/* One GET; returns the status, sets *bytes to the answer's size. */
static int get(pl_sqlite_api *api, const char *target, const char *headers, size_t *bytes)
{
    pl_buf req, out;
    pl_buf_init(&req);
    pl_buf_init(&out);
    pl_buf_printf(&req, "GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n", target, headers);
    pl_http_server_options opt;
    pl_sqlite_api_server_options(&opt);
    pl_http_server_feed(&opt, handler, api, req.data, req.len, 0, &out);
    int status = 0;
    pl_buf_append_byte(&out, 0);
    sscanf((const char *)out.data, "HTTP/1.1 %d", &status);
    *bytes = out.len;
    pl_buf_free(&req);
    pl_buf_free(&out);
    return status;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *ns, int n, size_t bytes)
{
    qsort(ns, (size_t)n, sizeof(uint64_t), cmp_u64);
    printf("%-60s median %7.2f ms  p90 %7.2f ms  (%zu bytes)\n", what, (double)ns[n / 2] / 1e6,
           (double)ns[(n * 9) / 10] / 1e6, bytes);
}

static void url_encode(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (; *s && o + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '.' || c == '_' || c == '-')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, cap - o, "%%%02X", c);
    }
    out[o] = 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_tempo <store written by bench_store>\n");
        return 2;
    }
    const char *path = argv[1];
    /* some trace ids and the newest start time, read directly */
    sqlite3 *db;
    sqlite3_stmt *st;
    enum { N_IDS = 200 };
    char ids[N_IDS][33];
    int n_ids = 0;
    int64_t newest = 0, spans = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT trace_id FROM traces ORDER BY random() LIMIT 200", -1, &st,
                           NULL) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", path, sqlite3_errmsg(db));
        return 1;
    }
    while (sqlite3_step(st) == SQLITE_ROW && n_ids < N_IDS)
        if (sqlite3_column_bytes(st, 0) == 16)
            pl_hex_encode(sqlite3_column_blob(st, 0), 16, ids[n_ids++]);
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db, "SELECT max(start_ns), (SELECT max(rowid) FROM spans) FROM traces",
                           -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        newest = sqlite3_column_int64(st, 0);
        spans = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    if (!n_ids) {
        fprintf(stderr, "%s: no traces (write one with bench_store)\n", path);
        return 1;
    }
    printf("store %s: about %" PRId64 " spans\n", path, spans);
    pl_sqlite_api *api = pl_sqlite_api_new(path);
    uint64_t ns[RUNS];
    size_t bytes = 0;
    char target[2048];
    /* warm the page cache and the connection */
    get(api, "/api/echo", "", &bytes);
    for (int i = 0; i < RUNS; i++) {
        snprintf(target, sizeof(target), "/api/v2/traces/%s", ids[(i * 7) % n_ids]);
        uint64_t t0 = pl_time_now_ns();
        int status = get(api, target, "Accept: application/protobuf\r\n", &bytes);
        ns[i] = pl_time_now_ns() - t0;
        if (status != 200)
            fprintf(stderr, "%s: %d\n", target, status);
    }
    report("trace by id (v2, protobuf, 10 spans)", ns, RUNS, bytes);

    uint64_t end_s = (uint64_t)newest / 1000000000ull + 1, start_s = end_s - 3600;
    static const char *const queries[] = {
        "{}",
        "{resource.service.name=\"cart\"}",
        "{resource.service.name=\"cart\" && name=\"redis GET\"}",
        "{resource.service.name=\"checkout\" && duration>400ms}",
        "{span.http.status_code>=500}",
        "{status=error}",
        "{name=~\"POST.*\" && kind=server}",
        "{(name=\"render\" || name=\"redis GET\") && traceDuration>500ms}",
        "{rootServiceName=\"payment\" && span.http.route=\"/api/cart/{id}\"}",
        /* no match / rare matches (bench_store tags 1 trace in 4,999) */
        "{resource.service.name=\"cart\" && name=\"no such span\"}",
        "{span.http.route=\"/no/such/route\"}",
        "{span.feature.flag=\"beta-checkout\"}",
        "{span.retry.count>=3}",
        "{status=error || span.feature.flag=\"beta-checkout\"}",
    };
    for (size_t q = 0; q < sizeof(queries) / sizeof(queries[0]); q++) {
        char enc[512];
        url_encode(queries[q], enc, sizeof(enc));
        snprintf(target, sizeof(target),
                 "/api/search?q=%s&limit=20&spss=3&start=%" PRIu64 "&end=%" PRIu64, enc, start_s,
                 end_s);
        int runs = RUNS / 3;
        for (int i = 0; i < runs; i++) {
            uint64_t t0 = pl_time_now_ns();
            int status = get(api, target, "Accept: application/json\r\n", &bytes);
            ns[i] = pl_time_now_ns() - t0;
            if (status != 200)
                fprintf(stderr, "%s: %d\n", queries[q], status);
        }
        char what[160];
        snprintf(what, sizeof(what), "search %s", queries[q]);
        report(what, ns, runs, bytes);
    }
    /* the same searches straight on the store, with the term index and
     * without it (the walk over every trace in range): time both and check
     * that the answers are the same */
    pl_store *store = NULL;
    pl_err err = {{0}};
    pl_store_options ro = {.read_only = true};
    if (pl_store_open(path, &ro, &store, NULL, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    int mismatches = 0;
    for (size_t q = 0; q < sizeof(queries) / sizeof(queries[0]); q++) {
        pl_tql tql;
        if (pl_tql_parse(&tql, queries[q], strlen(queries[q])) < 0) {
            fprintf(stderr, "%s: %s\n", queries[q], tql.error);
            pl_tql_free(&tql);
            return 1;
        }
        double med[2];
        pl_buf answer[2];
        for (int mode = 0; mode < 2; mode++) {
            pl_tempo_search opt = {
                start_s * 1000000000ull, end_s * 1000000000ull, 20, 3, NULL, mode == 1};
            int runs = mode ? 3 : RUNS / 3;
            pl_buf_init(&answer[mode]);
            for (int i = 0; i < runs; i++) {
                pl_buf_reset(&answer[mode]);
                uint64_t t0 = pl_time_now_ns();
                if (pl_store_tempo_search(store, &tql, &opt, &answer[mode], &err) != PL_OK)
                    fprintf(stderr, "%s: %s\n", queries[q], err.msg);
                ns[i] = pl_time_now_ns() - t0;
            }
            qsort(ns, (size_t)runs, sizeof(uint64_t), cmp_u64);
            med[mode] = (double)ns[runs / 2] / 1e6;
        }
        bool same = answer[0].len == answer[1].len &&
                    memcmp(answer[0].data, answer[1].data, answer[0].len) == 0;
        mismatches += !same;
        printf("%-60s index %8.2f ms  scan %8.2f ms  %s\n", queries[q], med[0], med[1],
               same ? "same answer" : "DIFFERENT ANSWER");
        pl_buf_free(&answer[0]);
        pl_buf_free(&answer[1]);
        pl_tql_free(&tql);
    }
    pl_store_close(store);
    for (int i = 0; i < RUNS / 3; i++) {
        uint64_t t0 = pl_time_now_ns();
        get(api, "/api/v2/search/tags", "", &bytes);
        ns[i] = pl_time_now_ns() - t0;
    }
    report("tags", ns, RUNS / 3, bytes);
    for (int i = 0; i < RUNS / 3; i++) {
        uint64_t t0 = pl_time_now_ns();
        get(api, "/api/v2/search/tag/span.http.route/values", "", &bytes);
        ns[i] = pl_time_now_ns() - t0;
    }
    report("tag values span.http.route", ns, RUNS / 3, bytes);
    pl_sqlite_api_close(api);
    return mismatches ? 1 : 0;
}
