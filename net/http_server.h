/*
 * http_server.h: the HTTP server machinery every network front door shares
 * (OTLP/HTTP, OTLP/gRPC, Pyroscope, the telemetry and query endpoints).
 *
 * One listener serves HTTP/1.1 (keep-alive, chunked bodies; parsed by
 * http-parser) and, when allowed, HTTP/2 (nghttp2; prior knowledge in
 * clear, ALPN h2 over TLS), told apart by the client preface. Either way
 * the handler sees a complete request: method, path, query, headers and the
 * whole body (de-chunked but NOT decompressed), and answers it before
 * returning.
 * Limits (connections, header and body size, header/idle timeouts) are
 * enforced here so a slow or hostile client only ever affects itself.
 *
 * Security shared by every listener, also here so each receiver gets it the
 * same way: TLS (options.tls, net/tls.h; ALPN h2 / http/1.1), an
 * authenticator (options.auth: a refused request is answered 401, or
 * UNAUTHENTICATED for gRPC, and never reaches the handler) and CORS
 * (options.cors: preflight OPTIONS answered here, Access-Control-Allow-Origin
 * added to answers for allowed origins).
 */
#ifndef PL_HTTP_SERVER_H
#define PL_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/status.h"

typedef struct pl_http_header {
    const char *name; /* HTTP/2 names are lower case; HTTP/1.1 as sent */
    size_t name_len;
    const char *value;
    size_t value_len;
} pl_http_header;

typedef struct pl_http_request {
    int http_version; /* 1 or 2 */
    const char *method;
    const char *path;  /* without the query; NUL-terminated */
    const char *query; /* after '?', NUL-terminated; "" if none */
    const pl_http_header *headers;
    size_t n_headers;
    uint8_t *body; /* complete body, server-owned; see pl_http_request_take_body */
    size_t body_len;
    const char *peer; /* "ip:port" */
    /* Set only with options.deliver_too_large: the body went over
     * max_body_size, was dropped (body is NULL) and the connection (HTTP/1.1)
     * or stream (HTTP/2) ends after this answer. Lets gRPC and OTLP answer
     * in their own format instead of the server's plain 413. */
    bool too_large;
    bool tls;              /* arrived over TLS */
    const char *tls_peer;  /* mutual TLS: the client certificate's CN; else NULL */
    const char *auth_user; /* the authenticator's identity for the caller, or NULL */
} pl_http_request;

/* Case-insensitive header lookup; NULL if absent. *len gets the value length. */
const char *pl_http_header_get(const pl_http_request *req, const char *name, size_t *len);
/* Hands the body's malloc'd buffer to the caller (then free()s it or adopts
 * it into a batch); req->body becomes NULL. */
uint8_t *pl_http_request_take_body(pl_http_request *req);

typedef struct pl_http_response pl_http_response; /* the responder */

/* Sends the answer. Content-Length / framing is added by the server. Call
 * exactly once per request. */
void pl_http_respond(pl_http_response *res, int status, const pl_http_header *headers,
                     size_t n_headers, const void *body, size_t body_len);
/* HTTP/2 only (gRPC): headers, body, then trailers. With body_len == 0 and
 * no body, a Trailers-Only answer is allowed (pass body NULL). */
void pl_http_respond_with_trailers(pl_http_response *res, int status, const pl_http_header *headers,
                                   size_t n_headers, const void *body, size_t body_len,
                                   const pl_http_header *trailers, size_t n_trailers);

typedef void (*pl_http_handler)(void *arg, pl_http_request *req, pl_http_response *res);

/* An authenticator (extensions/auth.h provides bearertokenauth and
 * basicauth). check() sees the request before the handler does; it returns
 * true for valid credentials and may copy the caller's identity (a user
 * name) into `user` (cap bytes, NUL-terminated). */
typedef struct pl_http_auth {
    const char *name;      /* the extension id, for logs */
    const char *challenge; /* WWW-Authenticate value on a 401 */
    bool (*check)(void *arg, const pl_http_request *req, char *user, size_t cap);
    void *arg;
} pl_http_auth;

struct pl_tls_server_config;
struct pl_http_cors_config;

typedef struct pl_http_server_options {
    size_t max_body_size;       /* raw body bytes; over it: 413 and the request is dropped */
    size_t max_header_size;     /* default 64 KiB */
    unsigned max_connections;   /* default 1024; over it new connections are closed */
    uint64_t header_timeout_ms; /* time to receive headers (and body); default 30000 */
    uint64_t idle_timeout_ms;   /* keep-alive idle; default 120000 */
    bool http1;                 /* accept HTTP/1.1 (default true when both are false) */
    bool h2c;                   /* accept HTTP/2 prior knowledge */
    const char *name;           /* for logs: "otlp/http" */
    /* Call the handler with req->too_large set instead of answering 413. */
    bool deliver_too_large;
    unsigned max_concurrent_streams; /* HTTP/2 streams per connection; default 128 */
    /* Request body bytes buffered across all connections (requests not yet
     * handed to the handler); over it new data is refused with 503 (HTTP/1.1)
     * or RST_STREAM REFUSED_STREAM (HTTP/2), both retryable. Default 256 MiB. */
    size_t max_buffered_bytes;
    /* Header fields in one request; over it 431 (HTTP/1.1) or the stream is
     * reset (HTTP/2). Default 256. max_header_size counts each field as its
     * name and value plus 32 bytes, as RFC 9113 section 6.5.2 does, so a
     * flood of tiny (or HPACK-indexed) fields is bounded by what it costs,
     * and header bytes count against max_buffered_bytes too. */
    unsigned max_header_fields;
    /* Fair shares per client (IP address), so one client cannot take what
     * others need: connections (default max_connections / 4, at least 8)
     * and buffered request bytes (default the larger of max_buffered_bytes
     * / 4 and max_body_size). When the server is full, a new connection
     * evicts an idle one of the client holding the most, if that client
     * holds more than the newcomer's would. */
    unsigned max_connections_per_client;
    size_t max_buffered_bytes_per_client;
    /* TLS when set with a cert_file (read at start: an unreadable file fails
     * the start). Borrowed only during pl_http_server_start. */
    const struct pl_tls_server_config *tls;
    /* Every request is checked before the handler; borrowed for the server's
     * life (extensions outlive receivers). */
    const pl_http_auth *auth;
    /* CORS for browser clients; copied at start. */
    const struct pl_http_cors_config *cors;
    /* SO_REUSEPORT: several servers (one per worker loop) share the port. */
    bool reuse_port;
    /* Number of servers sharing the port (service.workers; 0 or 1: alone).
     * The server-wide totals, max_connections and max_buffered_bytes, are
     * split among them after the defaults are applied, so the listener as a
     * whole keeps the configured totals: each server gets its 1/shares,
     * rounded up, but at least one connection and room for one request of
     * max_body_size. The per-client shares are derived from the listener's
     * totals before the split (a client's connections may all land on one
     * worker) and apply per server; a server's own part still caps them. */
    unsigned shares;
} pl_http_server_options;

typedef struct pl_http_server pl_http_server;

/* Binds and listens on "host:port" ("[::1]:port" for IPv6). NULL with err
 * set on failure (e.g. "127.0.0.1:4318: address already in use"). */
pl_http_server *pl_http_server_start(uv_loop_t *loop, const char *endpoint,
                                     const pl_http_server_options *options, pl_http_handler handler,
                                     void *arg, pl_err *err);
/* The port actually bound (useful with port 0). */
int pl_http_server_port(const pl_http_server *server);
/* Closes the listener and every connection; memory is freed once libuv has
 * closed the handles (run the loop). */
void pl_http_server_close(pl_http_server *server);

/* Drives one connection from memory, without sockets or timers, for fuzz
 * targets and tests: `data` is fed in pieces of `chunk` bytes (0: all at
 * once) as if read from a socket, then the peer's end of stream. Whatever
 * the server would write is appended to `out` (may be NULL). Returns 1 if
 * the server closed the connection itself, 0 otherwise. */
struct pl_buf;
int pl_http_server_feed(const pl_http_server_options *options, pl_http_handler handler, void *arg,
                        const uint8_t *data, size_t len, size_t chunk, struct pl_buf *out);

#endif
