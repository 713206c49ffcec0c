/*
 * http_server_private.h: what the HTTP server's files share (see
 * http_server.h for the interface and http_server.c for the design).
 *
 *   http_server.c  listener, connections, output, timers, dispatch helpers
 *   http1.c        HTTP/1.1 (http-parser)
 *   http2.c        HTTP/2 (nghttp2)
 *   tls.c          TLS contexts and per-connection TLS state (OpenSSL)
 *
 * Nothing here is for use outside net/.
 */
#ifndef PL_HTTP_SERVER_PRIVATE_H
#define PL_HTTP_SERVER_PRIVATE_H

#include "http_server.h"
#include "http_cors.h"
#include "tls.h"

#include <http_parser.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/log.h"

#define DEFAULT_MAX_BODY        (20u * 1024 * 1024)
#define DEFAULT_MAX_HEADER      (64u * 1024)
#define DEFAULT_MAX_CONNECTIONS 1024u
#define DEFAULT_HEADER_TIMEOUT  30000u
#define DEFAULT_IDLE_TIMEOUT    120000u
#define DEFAULT_MAX_BUFFERED    (256u * 1024 * 1024)
#define DEFAULT_MAX_STREAMS     128u
#define DEFAULT_MAX_FIELDS      256u
#define MAX_UNSENT_BYTES        (64u * 1024 * 1024)
#define PAUSE_READING_AT        (4u * 1024 * 1024) /* unsent answer bytes */
#define RESUME_READING_AT       (1u * 1024 * 1024)
#define CLOSE_GRACE_MS          5000u
/* After the server closes a connection with an answer (413, 408, ...) it
 * half-closes and reads, discarding, for this long: closing a socket that
 * still has unread request bytes makes the kernel send RST, and the peer may
 * then lose the answer before reading it. */
#define LINGER_MS            2000u
#define PREALLOC_BODY_MAX    (4u << 20)
#define READ_BUFFER_SIZE     (64u * 1024)
#define H2_STREAM_WINDOW     (1u << 20)
#define H2_CONNECTION_WINDOW (4u << 20)

#define H2_PREFACE_LEN 24

typedef struct conn conn;
typedef struct stream stream;

/* A header stored as offsets into a growing byte buffer (the buffer may move
 * while headers arrive, so pointers are made only at dispatch time). */
typedef struct header_offsets {
    size_t name, name_len, value, value_len;
} header_offsets;

/* A request under construction (HTTP/1.1: one per connection; HTTP/2: one
 * per stream). */
typedef struct request_parts {
    pl_buf strings; /* method, url, header names and values */
    pl_buf offsets; /* header_offsets[] */
    size_t n_headers;
    size_t method_off, method_len;
    size_t url_off, url_len;
    pl_buf body;
    bool too_large;
    size_t *pool;        /* the server's count of buffered request bytes (NULL: none) */
    size_t *client_pool; /* the client's count (NULL: none) */
    size_t accounted;    /* this request's share of both */
    size_t header_cost;  /* header bytes as RFC 9113 counts them (+32 per field) */
    unsigned n_fields;
    /* authenticated as soon as the headers were complete (pl_http_server_early_auth) */
    bool auth_done, auth_ok;
    char auth_user[128];
} request_parts;

/* One client (IP address): its connections and buffered request bytes,
 * for the fair shares. In the server's keyed hash table while it has a
 * connection. */
typedef struct client {
    struct client *next;
    uint8_t addr[16];
    unsigned conns;
    size_t buffered;
} client;

#define CLIENT_BUCKETS 256

struct stream {
    int32_t id;
    conn *c;
    stream *prev, *next;
    request_parts parts;
    bool dispatched;
    bool remote_done;        /* the client ended its side (END_STREAM seen) */
    bool reset_after_answer; /* answered early: RST_STREAM(NO_ERROR) once sent */
    /* refused at its headers (authentication) and answered, the client may
     * still be sending its body: it is read and dropped until the request's
     * deadline, not reset at once (clients such as curl report a reset
     * stream as an error instead of the 401 they were given) */
    bool refused_open;
    uint64_t started_ms; /* loop time of the request's first HEADERS */
    /* the answer, read by the data provider */
    uint8_t *resp;
    size_t resp_len, resp_off;
    pl_buf trailer_store; /* name\0value\0... */
    nghttp2_nv *trailers;
    size_t n_trailers;
};

struct pl_http_response {
    conn *c;
    stream *s; /* HTTP/2 only */
    bool answered;
    bool head;            /* HTTP/1.1 HEAD: no body */
    bool keep_alive;      /* HTTP/1.1 */
    request_parts *parts; /* the request's, for an early authentication result */
    /* CORS: the request's allowed Origin, echoed in the answer */
    const char *cors_origin;
    size_t cors_origin_len;
};

typedef enum conn_proto { PROTO_SNIFF, PROTO_H1, PROTO_H2 } conn_proto;

struct conn {
    pl_http_server *server; /* NULL for a socketless connection's dummy */
    const pl_http_server_options *opt;
    pl_http_handler handler;
    void *arg;
    conn *prev, *next;
    uv_tcp_t tcp;
    uv_timer_t timer;
    int open_handles;
    bool socketless;
    pl_buf *capture;
    bool closing;     /* no more input is processed */
    bool read_paused; /* the peer does not read its answers: stop reading its requests */
    pl_buf stash;     /* HTTP/1.1 input read but not parsed while paused */
    bool closed_by_server;
    bool lingering; /* answer sent, write side shut: draining input */
    uv_shutdown_t shutdown_req;
    unsigned pending_writes;
    conn_proto proto;
    uint8_t sniff[H2_PREFACE_LEN];
    size_t sniff_len;
    char peer[64];
    pl_tls_conn *tls;                /* NULL: cleartext */
    client *cl;                      /* NULL for socketless connections */
    const pl_http_cors_config *cors; /* the server's, or the feed's options'; NULL: none */
    /* HTTP/1.1 */
    http_parser parser;
    bool in_request;
    bool last_was_value;
    bool expect_continue;
    size_t header_bytes;
    request_parts h1;
    /* HTTP/2 */
    nghttp2_session *h2;
    stream *streams;
    unsigned n_streams;
};

struct pl_http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    pl_http_server_options opt;
    char name[64];
    pl_http_handler handler;
    void *arg;
    int port;
    bool closing;
    int open_handles; /* listener + live connections */
    size_t buffered;  /* request body bytes held, all connections */
    conn *conns;
    unsigned n_conns;
    bool read_buffer_busy;
    uint8_t read_buffer[READ_BUFFER_SIZE];
    /* TLS: the context, its reload timer, and where decrypted bytes land
     * (consumed synchronously, like read_buffer) */
    pl_tls_server *tls;
    uv_timer_t tls_timer;
    bool tls_timer_on;
    uint64_t tls_log_ms; /* last handshake failure logged (rate limit) */
    unsigned tls_failures_unlogged;
    uint8_t *plain_buffer;
    bool has_cors;
    pl_http_cors_config cors;
    client *clients[CLIENT_BUCKETS];
    uint64_t refused_log_ms; /* last refused connection logged (rate limit) */
    unsigned refused_unlogged;
};

/* ---- shared between the server's files ---------------------------------- */

/* http_server.c: helpers, connection output and timers */
const char *pl_http_server_log_name(const conn *c);
void pl_http_server_parts_init(request_parts *p);
void pl_http_server_parts_release(request_parts *p);
/* Takes len bytes from the server-wide and the client's budgets; false
 * (nothing taken) when either is spent. */
bool pl_http_server_parts_account(request_parts *p, size_t len, const pl_http_server_options *o);
/* Counts one header field (name + value + 32 bytes); false over the size
 * or count limit, or when the budgets are spent (*busy then set). */
bool pl_http_server_parts_header(request_parts *p, size_t name_len, size_t value_len,
                                 const pl_http_server_options *o, bool *busy);
void pl_http_server_parts_reset(request_parts *p);
void pl_http_server_parts_free(request_parts *p);
void pl_http_server_parts_add_header(request_parts *p, const char *name, size_t name_len,
                                     const char *value, size_t value_len);
const char *pl_http_server_reason_phrase(int status);
void pl_http_server_conn_close(conn *c);
/* Takes `data` (malloc'd). */
void pl_http_server_conn_write(conn *c, uint8_t *data, size_t len);
void pl_http_server_conn_write_copy(conn *c, const void *data, size_t len);
bool pl_http_server_conn_should_pause(const conn *c);
void pl_http_server_conn_arm_timer(conn *c, uint64_t ms);
void pl_http_server_split_url(char *url, const char **path, const char **query);
void pl_http_server_call_handler(conn *c, pl_http_request *req, pl_http_response *res);
/* Authenticates a request as soon as its headers are complete, before its
 * body is read or buffered. True: it may go on (no authenticator, a CORS
 * preflight, or good credentials); false: refused, and the caller
 * dispatches it at once (pl_http_server_call_handler then answers 401). */
bool pl_http_server_early_auth(conn *c, request_parts *r, int version);

/* http1.c */
void pl_http_server_h1_feed(conn *c, const uint8_t *data, size_t len);
void pl_http_server_h1_eof(conn *c);
void pl_http_server_h1_respond_simple(conn *c, int status, const char *body, bool close_after);
void pl_http_server_h1_respond(pl_http_response *res, int status, const pl_http_header *headers,
                               size_t n_headers, const void *body, size_t body_len);

/* http2.c */
bool pl_http_server_h2_start(conn *c);
void pl_http_server_h2_feed(conn *c, const uint8_t *data, size_t len);
void pl_http_server_h2_flush(conn *c);
void pl_http_server_h2_respond(pl_http_response *res, int status, const pl_http_header *headers,
                               size_t n_headers, const void *body, size_t body_len,
                               const pl_http_header *trailers, size_t n_trailers);
void pl_http_server_h2_check_stream_deadlines(conn *c);

#endif
