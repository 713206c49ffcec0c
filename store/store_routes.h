/*
 * store_routes.h: the route table of the store's HTTP API (sqlite_api.c).
 *
 * Every endpoint is one row: method, path (exact, or a prefix when it ends
 * with '*'), its parameters and a one-line description, and the function
 * that answers it. The dispatcher, the 404 text and the endpoint list of
 * docs/store.md all come from the rows, so an endpoint is added by writing
 * one function and one row.
 *
 * Rows live in tables; a file that serves a family of endpoints (the Tempo
 * data source in store/tempo_api.c, ...) defines its own table and adds one
 * line to the list of tables in sqlite_api.c (`route_tables`).
 *
 * A handler gets a pl_store_call: the request, the parsed query string, the
 * rest of the path after a prefix, the tenant (X-Scope-OrgID), and helpers
 * that do what every handler repeats: open the store (503 when it cannot be
 * read yet), answer a failed query, answer a built body.
 */
#ifndef PL_STORE_ROUTES_H
#define PL_STORE_ROUTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/status.h"
#include "net/http_server.h"
#include "store/sqlite_api.h"
#include "store/sqlite_store.h"

/* Query-string parameters, percent-decoded. */
#define PL_STORE_MAX_PARAMS 16
typedef struct pl_store_params {
    char *buf;
    const char *keys[PL_STORE_MAX_PARAMS];
    const char *values[PL_STORE_MAX_PARAMS];
    int n;
} pl_store_params;

/* Splits and decodes `query` ("a=1&b=x%20y"); p->buf is NULL when out of
 * memory. Free with pl_store_params_free. */
void pl_store_params_parse(pl_store_params *p, const char *query);
void pl_store_params_free(pl_store_params *p);
/* The value of `key`, NULL when absent or empty. */
const char *pl_store_param(const pl_store_params *p, const char *key);

typedef struct pl_store_call {
    pl_sqlite_api *api;
    pl_http_request *req;
    pl_http_response *res;
    const pl_store_params *params;
    const char *rest;   /* prefix rows: the path after the prefix; else "" */
    const char *tenant; /* X-Scope-OrgID (NUL-terminated), or NULL when not sent */
    bool answered;      /* set by the respond helpers */
} pl_store_call;

typedef void (*pl_store_handler)(pl_store_call *call);

typedef struct pl_store_route {
    const char *method; /* "GET" (also answers HEAD) or "POST" */
    const char *path;   /* "/api/services"; ending in '*': a prefix ("/api/traces/" + '*') */
    const char *params; /* for people: "service=&since=&limit=", "" when none */
    pl_store_handler handler;
    const char *doc; /* one line */
} pl_store_route;

typedef struct pl_store_route_table {
    const pl_store_route *rows;
    size_t n;
} pl_store_route_table;

/* The tables, in matching order (first match wins). */
extern const pl_store_route_table pl_store_api_routes;   /* sqlite_api.c: the store's JSON */
extern const pl_store_route_table pl_store_tempo_routes; /* tempo_api.c: Tempo data source */

/* Finds the row for method + path among `tables`: the row, or NULL with
 * *path_known set when some row has the path but not the method (405). */
const pl_store_route *pl_store_route_find(const pl_store_route_table *const *tables,
                                          size_t n_tables, const char *method, const char *path,
                                          const char **rest, bool *path_known);
/* The API's own tables (what the server dispatches on). */
const pl_store_route_table *const *pl_store_route_tables(size_t *n);
/* The endpoint list as a Markdown table (docs/store.md embeds it). */
void pl_store_routes_markdown(pl_buf *out);

/* ---- helpers for handlers ---------------------------------------------- */

/* The store, opened read-only on first use; NULL after answering 503. */
pl_store *pl_store_call_store(pl_store_call *call);
/* After a query: false when st is PL_OK; else answers (404 for
 * PL_ERR_NOT_FOUND, 400 for PL_ERR_INVALID, 503 otherwise), drops a broken
 * connection and returns true. */
bool pl_store_call_failed(pl_store_call *call, pl_status st, const pl_err *err);
/* Answers `status` with the body in b (503 when building it ran out of
 * memory) and frees b. */
void pl_store_call_respond(pl_store_call *call, int status, const char *content_type, pl_buf *b);
/* Answers {"error":msg} (JSON) with `status`. */
void pl_store_call_error(pl_store_call *call, int status, const char *msg);
/* Answers a plain-text message with `status` (Tempo's errors are text). */
void pl_store_call_text(pl_store_call *call, int status, const char *msg);
/* Parameter readers: true when absent (out keeps its default) or valid;
 * false after answering 400 with a message naming the parameter. */
bool pl_store_call_uint(pl_store_call *call, const char *key, uint64_t max, uint64_t *out);
bool pl_store_call_since(pl_store_call *call, const char *key, uint64_t now, uint64_t dflt,
                         uint64_t *out);
/* The request asks for protobuf (Accept contains application/protobuf). */
bool pl_store_call_wants_protobuf(const pl_store_call *call);

/* ---- Tempo (tempo_api.c) ------------------------------------------------ */

/* GET /api/traces/<id> (v2: /api/v2/traces/<id>) as Tempo answers it;
 * the id is call->rest. */
void pl_store_tempo_trace(pl_store_call *call, bool v2);

#endif
