/*
 * http_client.h: an asynchronous HTTP client on the event loop, for the
 * network exporters (otlphttp, otlp/gRPC, pyroscope).
 *
 * libcurl does the protocol work (HTTP/1.1, HTTP/2 with prior knowledge or
 * ALPN, TLS, connection reuse); libuv does the
 * waiting. The glue is curl's "multi socket" interface: curl tells us which
 * sockets to watch (one uv_poll_t each) and when to wake it up (one
 * uv_timer_t), and we tell curl which socket became ready. Nothing blocks the
 * loop: name resolution runs in curl's own resolver thread.
 *
 * One pl_http_client is one curl multi handle, i.e. one connection pool. An
 * exporter owns one, so its connections are reused across requests.
 * Setting PROFLINK_CURL_VERBOSE=1 in the environment makes curl trace every
 * request on stderr.
 *
 * Responses: status, headers, a capped body (64 KiB by default: an OTLP
 * response is a few bytes; a misbehaving server must not make us buffer
 * megabytes) and HTTP/2 trailers, which gRPC uses for grpc-status. curl hands
 * trailers to the header callback after the body; we keep them apart so a
 * caller can tell a Trailers-Only answer (status in the headers) from the
 * normal one (status in the trailers). pl_http_result_find looks in both.
 */
#ifndef PL_HTTP_CLIENT_H
#define PL_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/status.h"
#include "net/http_server.h" /* pl_http_header */

typedef struct pl_http_client pl_http_client;

/* TLS settings of a request (all optional). Strings are borrowed until the
 * request completes. */
typedef struct pl_http_tls {
    const char *ca_file;       /* PEM CA bundle; NULL: the system CAs */
    const char *cert_file;     /* client certificate (PEM), for mutual TLS */
    const char *key_file;      /* its private key (PEM) */
    bool insecure_skip_verify; /* do not verify the server's certificate or name */
} pl_http_tls;

typedef enum pl_http_version {
    PL_HTTP_VERSION_1_1 = 0, /* HTTP/1.1 (https may still negotiate h2 if allowed) */
    PL_HTTP_VERSION_2 = 1,   /* h2 via ALPN on https, HTTP/2 prior knowledge on http */
} pl_http_version;

typedef struct pl_http_client_request {
    const char *method; /* "POST" when NULL */
    const char *url;
    const char *const *headers; /* "Name: value" lines, borrowed until the callback */
    size_t n_headers;
    const void *body; /* borrowed until the callback (curl reads it in place) */
    size_t body_len;
    pl_http_version version;
    uint64_t timeout_ms;      /* whole request; 0 = none */
    const pl_http_tls *tls;   /* NULL = defaults (verify with the system CAs) */
    size_t max_response_body; /* bytes kept of the response body; 0 = 64 KiB */
} pl_http_client_request;

typedef struct pl_http_client_result {
    /* Transport outcome. 0: a complete response was received. Otherwise the
     * CURLcode (or PL_HTTP_CANCELLED) and a one-line message in `error`. */
    int transport_error;
    const char *error;
    int status;                    /* HTTP status (0 when no response arrived) */
    const pl_http_header *headers; /* of the final response, names as sent */
    size_t n_headers;
    const pl_http_header *trailers; /* HTTP/2 trailers */
    size_t n_trailers;
    const uint8_t *body; /* up to max_response_body bytes */
    size_t body_len;
    bool body_truncated;
    uint64_t elapsed_ms;
} pl_http_client_result;

/* transport_error value for requests cancelled by pl_http_client_close. */
#define PL_HTTP_CANCELLED (-1)

/* Called once per request, on the loop. The result and everything it points
 * to are valid only during the call. */
typedef void (*pl_http_client_cb)(void *arg, const pl_http_client_result *result);

/* Creates a client (connection pool) on `loop`. NULL with err set on failure. */
pl_http_client *pl_http_client_new(uv_loop_t *loop, pl_err *err);

/* Starts a request; `cb` is called exactly once, never from inside this
 * call. Returns PL_OK, or an error (bad URL, OOM, client closing) with err
 * set, in which case cb is not called. */
pl_status pl_http_client_send(pl_http_client *client, const pl_http_client_request *request,
                              pl_http_client_cb cb, void *arg, pl_err *err);

/* Requests started and not completed yet. */
size_t pl_http_client_active(const pl_http_client *client);

/* Cancels every request (each callback runs with transport_error =
 * PL_HTTP_CANCELLED before this returns), closes the sockets and frees the
 * client once libuv has closed its handles (run the loop afterwards). */
void pl_http_client_close(pl_http_client *client);

/* Case-insensitive lookup in the headers, then the trailers; NULL if absent. */
const char *pl_http_result_find(const pl_http_client_result *result, const char *name, size_t *len);

/* Parses a Retry-After value: delay-seconds or an HTTP-date (RFC 1123).
 * Returns the delay in ns from `now_unix_ns` (0 for a past date), or -1 when
 * the value does not parse. */
int64_t pl_http_parse_retry_after(const char *value, size_t len, uint64_t now_unix_ns);

#endif
