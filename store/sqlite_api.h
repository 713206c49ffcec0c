/*
 * sqlite_api.h: the read-only HTTP JSON query API of the embedded store, and
 * the JSON renderers it shares with `proflink query --json`.
 *
 * The endpoints are the rows of its route tables (store_routes.h): the
 * store's JSON (sqlite_api.c), Grafana's Tempo data source (tempo_api.c)
 * and the web view; docs/store.md's endpoint table and the 404 answer are
 * generated from the rows. Errors are JSON {"error":"..."} (Tempo's: text)
 * with 400 (bad parameter), 404 (unknown trace or path), 405 (a method the
 * path does not take) or 503 (store not readable yet).
 *
 * The server runs on its own thread and event loop and answers each request
 * synchronously there, so queries never block ingestion; every query is
 * still bounded (LIMITs, indexed lookups, time ranges for service-wide
 * profiles) so one request cannot hold the others up for long. It opens its
 * own read-only connection; WAL lets it read while the exporter writes.
 */
#ifndef PL_SQLITE_API_H
#define PL_SQLITE_API_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "core/buf.h"
#include "core/status.h"
#include "store/sqlite_store.h"

/* Default look-back of queries without `since`. */
#define PL_QUERY_DEFAULT_SINCE_NS (3600ull * 1000000000ull)

typedef struct pl_sqlite_api pl_sqlite_api;

/* What the exporter's writer has stored so far (updated atomically by the
 * writer thread, read by the API's status strip). */
typedef struct pl_store_live {
    uint64_t spans;
    uint64_t samples;
} pl_store_live;

/* Listens on `endpoint` and serves the store at `db_path` and the web view,
 * on a thread of its own with its own event loop: queries never run on the
 * pipeline's loop. `live` (may be NULL) feeds /api/status. NULL + err on
 * failure (e.g. the address is in use). */
pl_sqlite_api *pl_sqlite_api_start(const char *endpoint, const char *db_path,
                                   const pl_store_live *live, pl_err *err);
/* The same over TLS when `tls` enables it (borrowed until this returns). */
struct pl_tls_server_config;
pl_sqlite_api *pl_sqlite_api_start_tls(const char *endpoint, const char *db_path,
                                       const pl_store_live *live,
                                       const struct pl_tls_server_config *tls, pl_err *err);
/* With a listener's security (TLS, authenticator: extensions/auth.h),
 * borrowed for the API's life. */
struct pl_listener_security;
pl_sqlite_api *pl_sqlite_api_start_secure(const char *endpoint, const char *db_path,
                                          const pl_store_live *live,
                                          const struct pl_listener_security *sec, pl_err *err);
int pl_sqlite_api_port(const pl_sqlite_api *api);
/* Stops the API's thread (finishing the request it is answering) and frees
 * everything. */
void pl_sqlite_api_close(pl_sqlite_api *api);

/* Without a listener (fuzz targets, tests): an API object, its request
 * handler (a pl_http_handler), and the server options it listens with. */
struct pl_http_request;
struct pl_http_response;
struct pl_http_server_options;
pl_sqlite_api *pl_sqlite_api_new(const char *db_path);
void pl_sqlite_api_handle(pl_sqlite_api *api, struct pl_http_request *req,
                          struct pl_http_response *res);
void pl_sqlite_api_server_options(struct pl_http_server_options *opt);

/* JSON renderers. */
void pl_json_traces(const pl_trace_list *list, pl_buf *out);
void pl_json_trace(const pl_trace_detail *detail, pl_buf *out);
void pl_json_profile(const pl_profile_result *profile, size_t top_limit, bool with_tree,
                     pl_buf *out);
void pl_json_services(char **names, size_t n, pl_buf *out);
void pl_json_links(const pl_link_stats *links, pl_buf *out);
/* Folded stacks, one "frames value" line per stack. */
void pl_folded_text(const pl_profile_result *profile, pl_buf *out);

/* "15m" / "0" / "all" -> an absolute start time (0 = all time); -1 if bad. */
int pl_query_parse_since(const char *text, uint64_t now_ns, uint64_t *out_ns);
/* 16 / 32 hex characters -> bytes; -1 if bad or all zero. */
int pl_query_parse_span_id(const char *text, uint8_t out[8]);
int pl_query_parse_trace_id(const char *text, uint8_t out[16]);

#endif
