/*
 * http_cors.h: CORS for listeners browsers send to (OTLP/HTTP, Pyroscope),
 * configured as the Collector's `cors:` block:
 *
 *   cors:
 *     allowed_origins: ["https://app.example.com", "http://localhost:*"]
 *     allowed_headers: [x-custom]   # beyond the always-allowed ones
 *     max_age: 7200                 # seconds a browser may cache a preflight
 *
 * An origin matches a pattern where each '*' stands for any run of
 * characters ("*" alone: every origin). Preflight requests (OPTIONS with
 * Origin and Access-Control-Request-Method) are answered by the server
 * itself, before authentication (browsers send no credentials there); other
 * answers to an allowed Origin carry Access-Control-Allow-Origin echoing it.
 */
#ifndef PL_NET_HTTP_CORS_H
#define PL_NET_HTTP_CORS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/component.h"
#include "net/http_server.h"

#include "net/http_cors.config.h"

extern const pl_cfg_section pl_http_cors_section;

bool pl_http_cors_enabled(const pl_http_cors_config *cors);
/* Deep copy (0) or -1 on OOM; free with pl_http_cors_free. */
int pl_http_cors_copy(pl_http_cors_config *dst, const pl_http_cors_config *src);
void pl_http_cors_free(pl_http_cors_config *cors);

/* True when `origin` matches one of the patterns. */
bool pl_http_cors_origin_allowed(const pl_http_cors_config *cors, const char *origin, size_t len);
/* Glob match with '*' as any run of characters (exported for tests). */
bool pl_http_cors_match(const char *pattern, const char *s, size_t len);

/* A preflight request? Then it is answered (204, with the CORS headers only
 * when origin, method and headers are all allowed) and true returned. */
bool pl_http_cors_preflight(const pl_http_cors_config *cors, const pl_http_request *req,
                            pl_http_response *res);

#endif
