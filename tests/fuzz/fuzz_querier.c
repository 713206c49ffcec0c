/*
 * fuzz_querier.c: the Grafana Pyroscope querier (store/querier*.c) with
 * bytes from a client, through the store's API handler and the shared
 * HTTP server without sockets (pl_http_server_feed), on a small store
 * written once at start-up (tests/store_fixtures.h: one trace, CPU samples
 * linked to its spans).
 *
 * The first input byte picks what the rest is:
 *   b % 4 == 0   a label selector (pl_qselector_parse, then each matcher
 *                applied to a few values)
 *   b % 4 == 1   a protobuf body for querier method (b / 4) % 9
 *   b % 4 == 2   a protojson body for the same
 *   b % 4 == 3   the query string of GET /pyroscope/render
 * and b >= 128 sends X-Scope-OrgID: team-a (the store also holds team-a's
 * samples of the same service, with SDK labels).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../store_fixtures.h"
#include "net/http_server.h"
#include "store/querier_internal.h"
#include "../db_file_fixture.h"

static pl_sqlite_api *api;
static char db_path[256];

static const char *const methods[] = {
    "ProfileTypes",
    "LabelNames",
    "LabelValues",
    "Series",
    "SelectMergeStacktraces",
    "SelectMergeSpanProfile",
    "SelectSeries",
    "SelectMergeProfile",
    "GetProfileStats",
};

static void remove_store(void)
{
    db_file_remove(db_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(db_path, sizeof(db_path), "%s/proflink-fuzz-querier-%d.db", tmp ? tmp : "/tmp",
             (int)getpid());
    pl_store *s = open_rw(db_path);
    if (s) {
        write_one(s, traces_batch("shop", shop_trace, sizeof(shop_trace) / sizeof(shop_trace[0])));
        write_one(s, shop_profile());
        /* team-a: the same service, a sample label, a resource attribute */
        pl_batch *b = shop_profile();
        pl_kv *kv = pl_batch_alloc(b, sizeof(*kv));
        kv->key = PL_BYTES_LIT("tenant");
        kv->value = pl_value_string(PL_BYTES_LIT("team-a"));
        b->metadata.items = kv;
        b->metadata.n = 1;
        pl_attrs_put(&b->arena, &b->data.profiles.resources[0].resource.attrs,
                     PL_BYTES_LIT("region"), pl_value_string(PL_BYTES_LIT("eu")));
        pl_sample *smp = &b->data.profiles.resources[0].scopes[0].profiles[0].samples[0];
        int32_t *attrs = pl_batch_alloc(b, (smp->n_attribute_indices + 1) * sizeof(int32_t));
        if (smp->n_attribute_indices)
            memcpy(attrs, smp->attribute_indices, smp->n_attribute_indices * sizeof(int32_t));
        pl_dictionary *d = &b->data.profiles.dict;
        attrs[smp->n_attribute_indices++] = pl_dict_intern_attribute(
            &b->arena, d, pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("step")),
            pl_value_string(PL_BYTES_LIT("checkout")), 0);
        smp->attribute_indices = attrs;
        write_one(s, b);
        pl_store_close(s);
    }
    atexit(remove_store);
    api = pl_sqlite_api_new(db_path);
    return 0;
}

static void handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    pl_sqlite_api_handle(arg, req, res);
}

static void feed(const pl_buf *req)
{
    pl_http_server_options opt;
    pl_sqlite_api_server_options(&opt);
    pl_buf out;
    pl_buf_init(&out);
    if (pl_buf_ok(req))
        pl_http_server_feed(&opt, handler, api, req->data, req->len, 0, &out);
    pl_buf_free(&out);
}

static void fuzz_selector(const uint8_t *data, size_t size)
{
    pl_qselector sel;
    pl_err err;
    if (pl_qselector_parse((const char *)data, size, &sel, &err) != PL_OK)
        return;
    static const char *const values[] = {"", "shop", "GET /users", "\xff\xfe"};
    for (size_t i = 0; i < sel.n; i++)
        for (size_t v = 0; v < 4; v++)
            (void)pl_qmatcher_matches(&sel.items[i], values[v], strlen(values[v]));
    pl_qselector_free(&sel);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!api || size < 1 || size > 8192)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    if (mode % 4 == 0) {
        fuzz_selector(data, size);
        return 0;
    }
    pl_buf req;
    pl_buf_init(&req);
    if (mode % 4 == 3) {
        pl_buf_append_str(&req, "GET /pyroscope/render?");
        for (size_t i = 0; i < size; i++) /* one request line */
            pl_buf_append_byte(
                &req, (data[i] == '\r' || data[i] == '\n' || data[i] == ' ' || data[i] == 0)
                          ? '_'
                          : data[i]);
        pl_buf_append_str(&req, " HTTP/1.1\r\nHost: x\r\n");
        if (mode >= 128)
            pl_buf_append_str(&req, "X-Scope-OrgID: team-a\r\n");
        pl_buf_append_str(&req, "\r\n");
    } else {
        pl_buf_printf(&req,
                      "POST /querier.v1.QuerierService/%s HTTP/1.1\r\nHost: x\r\n"
                      "Content-Type: application/%s\r\nConnect-Protocol-Version: 1\r\n"
                      "%sContent-Length: %zu\r\n\r\n",
                      methods[(mode / 4) % 9], mode % 4 == 1 ? "proto" : "json",
                      mode >= 128 ? "X-Scope-OrgID: team-a\r\n" : "", size);
        pl_buf_append(&req, data, size);
    }
    feed(&req);
    pl_buf_free(&req);
    return 0;
}
