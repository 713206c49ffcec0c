/*
 * fuzz_query_api.c: request targets from a client through the store's JSON
 * query API (store/sqlite_api.c), over the shared HTTP server without
 * sockets (pl_http_server_feed): query-string splitting and percent
 * decoding, durations, ids, limits and formats, then the store queries
 * themselves on a small store written once at start-up.
 *
 * The input is the request target ("/api/traces?since=..."); a request
 * line and headers are put around it. Its first byte also chooses the
 * headers: odd asks for protobuf (Tempo's trace bodies), and bit 1 sends
 * an X-Scope-OrgID. The same bytes are also parsed as TraceQL and turned
 * into SQL (store/traceql.c), the parser /api/search runs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/component.h"
#include "core/model.h"
#include "store/sqlite_api.h"
#include "store/sqlite_store.h"
#include "store/traceql.h"
#include "net/http_server.h"
#include "../profile_fixture.h"
#include "../db_file_fixture.h"

static pl_sqlite_api *api;
static char db_path[256];

static void remove_store(void)
{
    db_file_remove(db_path);
}

static void fill_store(const char *path)
{
    pl_store *s = NULL;
    pl_err err;
    if (pl_store_open(path, NULL, &s, NULL, &err) != PL_OK)
        return;
    uint64_t now = pl_time_now_ns();
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_traces *t = &b->data.traces;
    t->resources = pl_batch_alloc(b, sizeof(pl_resource_spans));
    t->n_resources = 1;
    pl_attrs_put(&b->arena, &t->resources[0].resource.attrs, PL_BYTES_LIT("service.name"),
                 pl_value_string(PL_BYTES_LIT("shop")));
    t->resources[0].scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
    t->resources[0].n_scopes = 1;
    pl_scope_spans *ss = &t->resources[0].scopes[0];
    ss->spans = pl_batch_alloc(b, 2 * sizeof(pl_span));
    ss->n_spans = 2;
    for (int i = 0; i < 2; i++) {
        pl_span *sp = &ss->spans[i];
        memset(sp->trace_id, 0x11, 16);
        sp->trace_id_len = 16;
        memset(sp->span_id, 0x20 + i, 8);
        sp->span_id_len = 8;
        if (i) {
            memset(sp->parent_span_id, 0x20, 8);
            sp->parent_span_id_len = 8;
        }
        sp->name = i ? PL_BYTES_LIT("db") : PL_BYTES_LIT("GET /");
        sp->start_time_unix_nano = now - 1000000000ull;
        sp->end_time_unix_nano = now;
    }
    pl_store_write_batch(s, b, NULL, &err);
    pl_batch_free(b);

    b = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_profiles *ps = &b->data.profiles;
    pl_dictionary *d = &ps->dict;
    ps->has_dictionary = true;
    pl_dict_ensure_zero_entries(&b->arena, d);
    d->functions = pl_arena_grow(&b->arena, d->functions, 1, 3, sizeof(pl_function));
    d->locations = pl_arena_grow(&b->arena, d->locations, 1, 3, sizeof(pl_location));
    d->stacks = pl_arena_grow(&b->arena, d->stacks, 1, 2, sizeof(pl_stack));
    for (int i = 1; i <= 2; i++) {
        d->functions[i].name_strindex = pl_dict_intern_string(
            &b->arena, d, i == 1 ? PL_BYTES_LIT("main") : PL_BYTES_LIT("work"));
        memset(&d->locations[i], 0, sizeof(pl_location));
        d->locations[i].lines = pl_batch_alloc(b, sizeof(pl_line));
        d->locations[i].lines[0].function_index = i;
        d->locations[i].n_lines = 1;
    }
    d->n_functions = d->cap_functions = 3;
    d->n_locations = d->cap_locations = 3;
    d->stacks[1].location_indices = pl_batch_alloc(b, 2 * sizeof(int32_t));
    d->stacks[1].location_indices[0] = 2;
    d->stacks[1].location_indices[1] = 1;
    d->stacks[1].n_location_indices = 2;
    d->n_stacks = d->cap_stacks = 2;
    pl_link l;
    memset(&l, 0, sizeof(l));
    memset(l.trace_id, 0x11, 16);
    memset(l.span_id, 0x21, 8);
    l.trace_id_len = 16;
    l.span_id_len = 8;
    add_linked_cpu_profile(b, "shop", now, &l, 1000000);
    pl_store_write_batch(s, b, NULL, &err);
    pl_batch_free(b);
    pl_store_close(s);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(db_path, sizeof(db_path), "%s/proflink-fuzz-query-%d.db", tmp ? tmp : "/tmp",
             (int)getpid());
    fill_store(db_path);
    atexit(remove_store);
    api = pl_sqlite_api_new(db_path);
    return 0;
}

static void handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    pl_sqlite_api_handle(arg, req, res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!api || size > 4096)
        return 0;
    pl_buf req;
    pl_buf_init(&req);
    pl_buf_append_str(&req, "GET ");
    for (size_t i = 0; i < size; i++) /* keep it one request line */
        pl_buf_append_byte(
            &req,
            (data[i] == '\r' || data[i] == '\n' || data[i] == ' ' || data[i] == 0) ? '_' : data[i]);
    pl_buf_append_str(&req, " HTTP/1.1\r\nHost: x\r\n");
    if (size && (data[0] & 1))
        pl_buf_append_str(&req, "Accept: application/protobuf\r\n");
    if (size && (data[0] & 2))
        pl_buf_append_str(&req, "X-Scope-OrgID: t1\r\n");
    pl_buf_append_str(&req, "\r\n");
    pl_http_server_options opt;
    pl_sqlite_api_server_options(&opt);
    pl_buf out;
    pl_buf_init(&out);
    if (pl_buf_ok(&req))
        pl_http_server_feed(&opt, handler, api, req.data, req.len, 0, &out);
    pl_buf_free(&out);
    pl_buf_free(&req);

    pl_tql t;
    if (pl_tql_parse(&t, (const char *)data, size) == 0) {
        pl_buf sql;
        pl_buf_init(&sql);
        pl_tql_bind binds[PL_TQL_MAX_BINDS];
        int next = 10, n_binds = 0;
        pl_tql_sql(&t, &sql, &next, binds, &n_binds);
        if (n_binds > PL_TQL_MAX_BINDS)
            abort();
        pl_buf_free(&sql);
    }
    pl_tql_free(&t);
    return 0;
}
