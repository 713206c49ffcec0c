/*
 * http_server.c: one libuv listener serving HTTP/1.1 (http-parser) and
 * cleartext HTTP/2 with prior knowledge (nghttp2). See http_server.h.
 *
 * Design:
 *   - A connection starts in SNIFF state. The first bytes are compared with
 *     the 24-byte HTTP/2 client preface; as soon as they differ the
 *     connection is HTTP/1.1, when all 24 match it is HTTP/2. Bytes already
 *     read are replayed into the chosen protocol, so nothing is lost.
 *   - Everything a connection does goes through conn_feed() (bytes in) and
 *     conn_write() (bytes out). With a socket those are libuv reads and
 *     writes; without one (pl_http_server_feed) the output goes to a buffer.
 *     That is what lets fuzz targets drive the whole request path.
 *   - Handlers are synchronous: the request is complete when the handler
 *     runs, and it answers before returning. HTTP/1.1 pipelining then needs
 *     no queue: answers are written in request order by construction.
 *   - One read buffer per server, not per connection: the loop is single
 *     threaded and every read is consumed (copied into the request being
 *     built) before the next allocation, so idle connections cost no buffer.
 *   - Limits bound what one client can cost: header bytes, body bytes (while
 *     receiving, not after), time to send a request (a deadline measured from
 *     its first byte, so trickling bytes does not extend it: slow-loris),
 *     idle keep-alive time, unsent output (a client that never reads is
 *     dropped), and the number of connections.
 *   - A connection's memory is freed only from libuv's close callbacks, so
 *     nothing is freed under a callback that still uses it.
 */
#include "http_server.h"

#include <errno.h>
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

static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
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
    size_t *pool;     /* the server's count of buffered body bytes (NULL: none) */
    size_t accounted; /* this body's share of *pool */
} request_parts;

struct stream {
    int32_t id;
    conn *c;
    stream *prev, *next;
    request_parts parts;
    bool dispatched;
    bool remote_done;        /* the client ended its side (END_STREAM seen) */
    bool reset_after_answer; /* answered early: RST_STREAM(NO_ERROR) once sent */
    uint64_t started_ms;     /* loop time of the request's first HEADERS */
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
    bool head;       /* HTTP/1.1 HEAD: no body */
    bool keep_alive; /* HTTP/1.1 */
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
};

static void conn_close(conn *c);
static void conn_write(conn *c, uint8_t *data, size_t len);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);
static void h2_flush(conn *c);
static void on_listener_closed(uv_handle_t *h);

/* ---- options and small helpers ----------------------------------------- */

static void options_fill(pl_http_server_options *o)
{
    if (!o->max_body_size)
        o->max_body_size = DEFAULT_MAX_BODY;
    if (!o->max_header_size)
        o->max_header_size = DEFAULT_MAX_HEADER;
    if (!o->max_connections)
        o->max_connections = DEFAULT_MAX_CONNECTIONS;
    if (!o->header_timeout_ms)
        o->header_timeout_ms = DEFAULT_HEADER_TIMEOUT;
    if (!o->idle_timeout_ms)
        o->idle_timeout_ms = DEFAULT_IDLE_TIMEOUT;
    if (!o->max_buffered_bytes)
        o->max_buffered_bytes = DEFAULT_MAX_BUFFERED;
    if (!o->max_concurrent_streams)
        o->max_concurrent_streams = DEFAULT_MAX_STREAMS;
    if (!o->http1 && !o->h2c)
        o->http1 = true;
    if (!o->name)
        o->name = "http";
}

static const char *log_name(const conn *c)
{
    return c->opt->name ? c->opt->name : "http";
}

static void parts_init(request_parts *p)
{
    memset(p, 0, sizeof(*p));
    pl_buf_init(&p->strings);
    pl_buf_init(&p->offsets);
    pl_buf_init(&p->body);
}

/* Gives this body's bytes back to the server-wide budget (after the body
 * went to the handler, or was dropped). */
static void parts_release(request_parts *p)
{
    if (p->pool)
        *p->pool -= p->accounted;
    p->accounted = 0;
}

/* Takes len bytes from the server-wide budget; false when it is spent. */
static bool parts_account(request_parts *p, size_t len, size_t limit)
{
    if (!p->pool)
        return true;
    if (*p->pool + len > limit)
        return false;
    *p->pool += len;
    p->accounted += len;
    return true;
}

static void parts_reset(request_parts *p)
{
    parts_release(p);
    pl_buf_reset(&p->strings);
    pl_buf_reset(&p->offsets);
    /* A body taken by the handler leaves the buffer empty; a big one left
     * behind is released so an idle keep-alive connection stays small. */
    if (p->body.cap > 256 * 1024)
        pl_buf_free(&p->body);
    else
        pl_buf_reset(&p->body);
    p->n_headers = 0;
    p->method_off = p->method_len = p->url_off = p->url_len = 0;
    p->too_large = false;
}

static void parts_free(request_parts *p)
{
    parts_release(p);
    pl_buf_free(&p->strings);
    pl_buf_free(&p->offsets);
    pl_buf_free(&p->body);
}

static void parts_add_header(request_parts *p, const char *name, size_t name_len, const char *value,
                             size_t value_len)
{
    header_offsets h;
    h.name = p->strings.len;
    h.name_len = name_len;
    pl_buf_append(&p->strings, name, name_len);
    pl_buf_append_byte(&p->strings, 0);
    h.value = p->strings.len;
    h.value_len = value_len;
    pl_buf_append(&p->strings, value, value_len);
    pl_buf_append_byte(&p->strings, 0);
    pl_buf_append(&p->offsets, &h, sizeof(h));
    p->n_headers++;
}

const char *pl_http_header_get(const pl_http_request *req, const char *name, size_t *len)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < req->n_headers; i++) {
        const pl_http_header *h = &req->headers[i];
        if (h->name_len == n && strncasecmp(h->name, name, n) == 0) {
            if (len)
                *len = h->value_len;
            return h->value;
        }
    }
    if (len)
        *len = 0;
    return NULL;
}

uint8_t *pl_http_request_take_body(pl_http_request *req)
{
    uint8_t *b = req->body;
    req->body = NULL;
    return b;
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 411:
        return "Length Required";
    case 413:
        return "Payload Too Large";
    case 415:
        return "Unsupported Media Type";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    }
    return "Status";
}

/* ---- connection lifetime ------------------------------------------------ */

static void conn_free(conn *c)
{
    parts_free(&c->h1);
    pl_buf_free(&c->stash);
    if (c->h2) {
        nghttp2_session_del(c->h2);
        c->h2 = NULL;
    }
    while (c->streams) {
        stream *s = c->streams;
        c->streams = s->next;
        parts_free(&s->parts);
        pl_buf_free(&s->trailer_store);
        free(s->trailers);
        free(s->resp);
        free(s);
    }
    free(c);
}

static void server_maybe_free(pl_http_server *server)
{
    if (server->closing && server->open_handles == 0)
        free(server);
}

static void on_conn_handle_closed(uv_handle_t *h)
{
    conn *c = h->data;
    if (--c->open_handles > 0)
        return;
    pl_http_server *server = c->server;
    if (c->prev)
        c->prev->next = c->next;
    else if (server->conns == c)
        server->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    server->n_conns--;
    server->open_handles--;
    conn_free(c);
    server_maybe_free(server);
}

static void conn_close_now(conn *c)
{
    if (c->socketless)
        return;
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) {
        uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
        uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
    }
}

static void on_close_grace_timeout(uv_timer_t *t)
{
    conn_close_now(t->data);
}

static void on_linger_shutdown(uv_shutdown_t *req, int status)
{
    conn *c = req->data;
    if (status < 0 && status != UV_ECANCELED && !uv_is_closing((uv_handle_t *)&c->tcp))
        conn_close_now(c);
}

/* Every queued answer is written. A connection the server decided to close
 * while the peer may still be sending lingers (see LINGER_MS); others close. */
static void conn_finish(conn *c)
{
    if (c->socketless || uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    if (!c->closed_by_server || c->lingering || c->proto == PROTO_H2) {
        conn_close_now(c);
        return;
    }
    c->lingering = true;
    c->shutdown_req.data = c;
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_linger_shutdown) < 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
        conn_close_now(c);
        return;
    }
    uv_timer_start(&c->timer, on_close_grace_timeout, LINGER_MS, 0);
}

/* Stops reading and closes once queued answers are written (or after a grace
 * period if the peer does not read them). Safe to call more than once. */
static void conn_close(conn *c)
{
    if (c->closing) {
        if (c->pending_writes == 0)
            conn_close_now(c);
        return;
    }
    c->closing = true;
    c->closed_by_server = true;
    if (c->socketless)
        return;
    if (uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (c->pending_writes == 0) {
        conn_finish(c);
        return;
    }
    uv_timer_start(&c->timer, on_close_grace_timeout, CLOSE_GRACE_MS, 0);
}

/* ---- output ------------------------------------------------------------- */

typedef struct write_req {
    uv_write_t req;
    conn *c;
    uint8_t *data;
} write_req;

static bool conn_should_pause(const conn *c)
{
    return !c->socketless && !c->read_paused && !c->closing &&
           c->tcp.write_queue_size > PAUSE_READING_AT;
}

static void h1_feed(conn *c, const uint8_t *data, size_t len);

/* The peer has read enough of its answers: parse what was held back, then
 * read again (unless that pauses once more). */
static void conn_resume_reading(conn *c)
{
    c->read_paused = false;
    if (c->proto == PROTO_H1) {
        http_parser_pause(&c->parser, 0);
        if (c->stash.len) {
            size_t len;
            uint8_t *held = pl_buf_steal(&c->stash, &len);
            h1_feed(c, held, len);
            free(held);
        }
    }
    if (!c->read_paused && !c->closing)
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_write_done(uv_write_t *req, int status)
{
    write_req *w = (write_req *)req;
    conn *c = w->c;
    free(w->data);
    free(w);
    c->pending_writes--;
    if (status < 0) {
        c->closing = true;
        conn_close_now(c);
        return;
    }
    if (c->closing && c->pending_writes == 0) {
        conn_finish(c);
        return;
    }
    if (c->read_paused && !c->closing && c->tcp.write_queue_size < RESUME_READING_AT)
        conn_resume_reading(c);
}

/* Takes `data` (malloc'd). */
static void conn_write(conn *c, uint8_t *data, size_t len)
{
    if (len == 0) {
        free(data);
        return;
    }
    if (c->socketless) {
        if (c->capture)
            pl_buf_append(c->capture, data, len);
        free(data);
        return;
    }
    if (uv_is_closing((uv_handle_t *)&c->tcp)) {
        free(data);
        return;
    }
    if (c->tcp.write_queue_size > MAX_UNSENT_BYTES) {
        /* The peer does not read what it asked for. */
        free(data);
        pl_warn(log_name(c), "%s: peer is not reading; closing", c->peer);
        c->closing = true;
        conn_close_now(c);
        return;
    }
    write_req *w = malloc(sizeof(*w));
    if (!w) {
        free(data);
        c->closing = true;
        conn_close_now(c);
        return;
    }
    w->c = c;
    w->data = data;
    uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
    c->pending_writes++;
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write_done);
    if (rc < 0) {
        c->pending_writes--;
        free(data);
        free(w);
        c->closing = true;
        conn_close_now(c);
        return;
    }
    /* HTTP/2 streams from a peer that does not read its answers would pile
     * answers up here; stop reading until it catches up. (HTTP/1.1 pauses
     * between requests, in h1_on_message_complete.) */
    if (c->proto == PROTO_H2 && conn_should_pause(c)) {
        c->read_paused = true;
        uv_read_stop((uv_stream_t *)&c->tcp);
    }
}

static void conn_write_copy(conn *c, const void *data, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) {
        conn_close(c);
        return;
    }
    memcpy(copy, data, len);
    conn_write(c, copy, len);
}

/* ---- timers ------------------------------------------------------------- */

static void on_conn_timeout(uv_timer_t *t);

static void conn_arm_timer(conn *c, uint64_t ms)
{
    if (c->socketless || c->closing)
        return;
    uv_timer_start(&c->timer, on_conn_timeout, ms, 0);
}

/* ---- HTTP/1.1 ----------------------------------------------------------- */

static void h1_respond_simple(conn *c, int status, const char *body, bool close_after)
{
    pl_buf out;
    pl_buf_init(&out);
    size_t len = body ? strlen(body) : 0;
    pl_buf_printf(&out,
                  "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                  "Content-Length: %zu\r\n%s\r\n",
                  status, reason_phrase(status), len, close_after ? "Connection: close\r\n" : "");
    pl_buf_append(&out, body, len);
    if (!pl_buf_ok(&out)) {
        pl_buf_free(&out);
        conn_close(c);
        return;
    }
    size_t n;
    uint8_t *data = pl_buf_steal(&out, &n);
    conn_write(c, data, n);
}

static void h1_respond_busy(conn *c)
{
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; "
                               "charset=utf-8\r\nRetry-After: 1\r\nContent-Length: 12\r\n"
                               "Connection: close\r\n\r\nserver busy\n";
    conn_write_copy(c, busy, sizeof(busy) - 1);
}

static void h1_respond(pl_http_response *res, int status, const pl_http_header *headers,
                       size_t n_headers, const void *body, size_t body_len)
{
    conn *c = res->c;
    pl_buf out;
    pl_buf_init(&out);
    pl_buf_printf(&out, "HTTP/1.1 %d %s\r\n", status, reason_phrase(status));
    for (size_t i = 0; i < n_headers; i++) {
        const pl_http_header *h = &headers[i];
        /* Framing is ours; a CR or LF inside a value would split the answer. */
        if ((h->name_len == 14 && strncasecmp(h->name, "content-length", 14) == 0) ||
            (h->name_len == 10 && strncasecmp(h->name, "connection", 10) == 0) ||
            (h->name_len == 17 && strncasecmp(h->name, "transfer-encoding", 17) == 0))
            continue;
        if (memchr(h->value, '\r', h->value_len) || memchr(h->value, '\n', h->value_len))
            continue;
        pl_buf_append(&out, h->name, h->name_len);
        pl_buf_append(&out, ": ", 2);
        pl_buf_append(&out, h->value, h->value_len);
        pl_buf_append(&out, "\r\n", 2);
    }
    pl_buf_printf(&out, "Content-Length: %zu\r\n", body_len);
    if (!res->keep_alive)
        pl_buf_append_str(&out, "Connection: close\r\n");
    pl_buf_append(&out, "\r\n", 2);
    if (!res->head && body_len)
        pl_buf_append(&out, body, body_len);
    if (!pl_buf_ok(&out)) {
        pl_buf_free(&out);
        conn_close(c);
        return;
    }
    size_t n;
    uint8_t *data = pl_buf_steal(&out, &n);
    conn_write(c, data, n);
}

static bool h1_header_budget(conn *c, size_t more)
{
    c->header_bytes += more;
    return c->header_bytes <= c->opt->max_header_size;
}

static int h1_on_message_begin(http_parser *p)
{
    conn *c = p->data;
    parts_reset(&c->h1);
    c->in_request = true;
    c->last_was_value = false;
    c->expect_continue = false;
    c->header_bytes = 0;
    conn_arm_timer(c, c->opt->header_timeout_ms);
    return 0;
}

static int h1_on_url(http_parser *p, const char *at, size_t len)
{
    conn *c = p->data;
    if (!h1_header_budget(c, len)) {
        h1_respond_simple(c, 431, "request line too long\n", true);
        conn_close(c);
        return -1;
    }
    if (c->h1.url_len == 0)
        c->h1.url_off = c->h1.strings.len;
    pl_buf_append(&c->h1.strings, at, len);
    c->h1.url_len += len;
    return 0;
}

/* Header names and values may arrive in several pieces; they are stored as
 * "name\0value\0" with offsets completed as the pieces come. */
static int h1_on_header_field(http_parser *p, const char *at, size_t len)
{
    conn *c = p->data;
    request_parts *r = &c->h1;
    if (!h1_header_budget(c, len + 4)) {
        h1_respond_simple(c, 431, "request headers too large\n", true);
        conn_close(c);
        return -1;
    }
    if (r->n_headers == 0 && r->url_len) {
        /* terminate the url */
        pl_buf_append_byte(&r->strings, 0);
    }
    if (c->last_was_value || r->n_headers == 0) {
        header_offsets h = {r->strings.len, 0, 0, 0};
        pl_buf_append(&r->offsets, &h, sizeof(h));
        r->n_headers++;
        c->last_was_value = false;
    } else {
        /* continuing a name: it was NUL-terminated below, drop the NUL */
        r->strings.len--;
    }
    if (!pl_buf_ok(&r->offsets))
        return -1;
    header_offsets *h = (header_offsets *)r->offsets.data + (r->n_headers - 1);
    pl_buf_append(&r->strings, at, len);
    pl_buf_append_byte(&r->strings, 0);
    h->name_len += len;
    h->value = r->strings.len;
    return 0;
}

static int h1_on_header_value(http_parser *p, const char *at, size_t len)
{
    conn *c = p->data;
    request_parts *r = &c->h1;
    if (!h1_header_budget(c, len)) {
        h1_respond_simple(c, 431, "request headers too large\n", true);
        conn_close(c);
        return -1;
    }
    if (r->n_headers == 0 || !pl_buf_ok(&r->offsets))
        return -1;
    header_offsets *h = (header_offsets *)r->offsets.data + (r->n_headers - 1);
    if (c->last_was_value)
        r->strings.len--; /* continuing a value: drop its NUL */
    else
        h->value = r->strings.len;
    pl_buf_append(&r->strings, at, len);
    pl_buf_append_byte(&r->strings, 0);
    h->value_len += len;
    c->last_was_value = true;
    return 0;
}

static void h1_dispatch(conn *c, bool too_large);

static int h1_on_headers_complete(http_parser *p)
{
    conn *c = p->data;
    request_parts *r = &c->h1;
    if (r->n_headers == 0 && r->url_len)
        pl_buf_append_byte(&r->strings, 0);
    r->method_off = r->strings.len;
    const char *m = http_method_str((enum http_method)p->method);
    r->method_len = strlen(m);
    pl_buf_append(&r->strings, m, r->method_len + 1);
    if (!pl_buf_ok(&r->strings) || !pl_buf_ok(&r->offsets)) {
        h1_respond_simple(c, 503, "out of memory\n", true);
        conn_close(c);
        return -1;
    }
    /* Content-Length over the limit: answer now, do not read the body. */
    if (p->content_length != ULLONG_MAX && p->content_length > c->opt->max_body_size) {
        h1_dispatch(c, true);
        conn_close(c);
        return -1;
    }
    for (size_t i = 0; i < r->n_headers; i++) {
        header_offsets *h = (header_offsets *)r->offsets.data + i;
        const char *name = (const char *)r->strings.data + h->name;
        const char *value = (const char *)r->strings.data + h->value;
        if (h->name_len == 6 && strncasecmp(name, "expect", 6) == 0) {
            if (h->value_len == 12 && strncasecmp(value, "100-continue", 12) == 0)
                c->expect_continue = true;
        }
    }
    if (c->expect_continue && p->http_minor >= 1) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        conn_write_copy(c, cont, sizeof(cont) - 1);
    }
    return 0;
}

static int h1_on_body(http_parser *p, const char *at, size_t len)
{
    conn *c = p->data;
    request_parts *r = &c->h1;
    if (r->body.len + len > c->opt->max_body_size) {
        h1_dispatch(c, true);
        conn_close(c);
        return -1;
    }
    if (!parts_account(r, len, c->opt->max_buffered_bytes)) {
        /* All connections together hold too much unfinished request data:
         * a retryable refusal for this one. */
        pl_warn(log_name(c), "%s: request data buffered over %zu bytes; refusing", c->peer,
                c->opt->max_buffered_bytes);
        h1_respond_busy(c);
        conn_close(c);
        return -1;
    }
    /* Size the buffer from Content-Length once, bounded: in a chunked body
     * content_length is the announced chunk size (any number a client likes),
     * and even a true length should not reserve memory before data arrives. */
    if (r->body.cap == 0 && p->content_length != ULLONG_MAX && !(p->flags & F_CHUNKED)) {
        uint64_t want = (uint64_t)len + p->content_length;
        if (want > c->opt->max_body_size)
            want = c->opt->max_body_size;
        if (want > PREALLOC_BODY_MAX)
            want = PREALLOC_BODY_MAX;
        pl_buf_reserve(&r->body, (size_t)want);
    }
    pl_buf_append(&r->body, at, len);
    if (!pl_buf_ok(&r->body)) {
        h1_respond_simple(c, 503, "out of memory\n", true);
        conn_close(c);
        return -1;
    }
    return 0;
}

static int h1_on_message_complete(http_parser *p)
{
    conn *c = p->data;
    c->in_request = false;
    h1_dispatch(c, false);
    if (c->closing)
        return -1;
    conn_arm_timer(c, c->opt->idle_timeout_ms);
    if (conn_should_pause(c)) {
        /* Pipelined requests from a peer that does not read its answers:
         * stop here; the rest of the input waits in c->stash. */
        c->read_paused = true;
        uv_read_stop((uv_stream_t *)&c->tcp);
        http_parser_pause(p, 1);
    }
    return 0;
}

static const http_parser_settings h1_settings = {
    .on_message_begin = h1_on_message_begin,
    .on_url = h1_on_url,
    .on_header_field = h1_on_header_field,
    .on_header_value = h1_on_header_value,
    .on_headers_complete = h1_on_headers_complete,
    .on_body = h1_on_body,
    .on_message_complete = h1_on_message_complete,
};

/* Splits the stored url into path and query (both NUL-terminated inside
 * `strings`, which has room since the url is followed by its NUL). */
static void split_url(char *url, const char **path, const char **query)
{
    /* absolute-form "http://host/path": keep the path */
    if (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0) {
        char *slash = strchr(strstr(url, "//") + 2, '/');
        url = slash ? slash : (char *)"/";
    }
    char *hash = strchr(url, '#');
    if (hash)
        *hash = 0;
    char *q = strchr(url, '?');
    if (q) {
        *q = 0;
        *query = q + 1;
    } else {
        *query = "";
    }
    *path = url;
}

static void call_handler(conn *c, pl_http_request *req, pl_http_response *res)
{
    c->handler(c->arg, req, res);
    if (!res->answered) {
        pl_error(log_name(c), "%s %s: handler gave no answer", req->method, req->path);
        pl_http_respond(res, 500, NULL, 0, "no answer\n", 10);
    }
    free(req->body);
    req->body = NULL;
}

static void h1_dispatch(conn *c, bool too_large)
{
    request_parts *r = &c->h1;
    http_parser *p = &c->parser;
    if (too_large && !c->opt->deliver_too_large) {
        h1_respond_simple(c, 413, "request body too large\n", true);
        return;
    }
    pl_http_header stack_headers[32];
    pl_http_header *headers = stack_headers;
    if (r->n_headers > 32) {
        headers = malloc(r->n_headers * sizeof(*headers));
        if (!headers) {
            h1_respond_simple(c, 503, "out of memory\n", true);
            conn_close(c);
            return;
        }
    }
    char *base = (char *)r->strings.data;
    for (size_t i = 0; i < r->n_headers; i++) {
        header_offsets *h = (header_offsets *)r->offsets.data + i;
        headers[i] = (pl_http_header){base + h->name, h->name_len, base + h->value, h->value_len};
    }
    pl_http_request req;
    memset(&req, 0, sizeof(req));
    req.http_version = 1;
    req.method = base + r->method_off;
    split_url(r->url_len ? base + r->url_off : (char *)"/", &req.path, &req.query);
    req.headers = headers;
    req.n_headers = r->n_headers;
    req.peer = c->peer;
    req.too_large = too_large;
    if (!too_large) {
        size_t len;
        req.body = pl_buf_steal(&r->body, &len);
        req.body_len = len;
    }
    parts_release(r); /* the body is the handler's now */
    pl_http_response res = {.c = c,
                            .head = p->method == HTTP_HEAD,
                            .keep_alive = !too_large && http_should_keep_alive(p) && !p->upgrade};
    call_handler(c, &req, &res);
    if (headers != stack_headers)
        free(headers);
    if (!res.keep_alive)
        conn_close(c);
}

static void h1_feed(conn *c, const uint8_t *data, size_t len)
{
    if (c->closing)
        return;
    if (c->read_paused) {
        pl_buf_append(&c->stash, data, len);
        return;
    }
    size_t n = http_parser_execute(&c->parser, &h1_settings, (const char *)data, len);
    if (c->closing)
        return;
    enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
    if (e == HPE_PAUSED) {
        pl_buf_append(&c->stash, data + n, len - n);
        if (!pl_buf_ok(&c->stash))
            conn_close(c);
        return;
    }
    if (e != HPE_OK) {
        char msg[160];
        snprintf(msg, sizeof(msg), "bad request: %s\n", http_errno_description(e));
        pl_debug(log_name(c), "%s: %s", c->peer, msg);
        h1_respond_simple(c, e == HPE_HEADER_OVERFLOW ? 431 : 400, msg, true);
        conn_close(c);
        return;
    }
    if (c->parser.upgrade || n < len) {
        /* Upgrade / CONNECT: not supported; the request (if complete) was
         * answered with Connection: close. */
        conn_close(c);
    }
}

static void h1_eof(conn *c)
{
    if (c->closing)
        return;
    /* Lets the parser finish a body delimited by the end of the stream. */
    http_parser_execute(&c->parser, &h1_settings, NULL, 0);
}

/* ---- HTTP/2 ------------------------------------------------------------- */

static stream *h2_stream(conn *c, int32_t id)
{
    return nghttp2_session_get_stream_user_data(c->h2, id);
}

static int h2_on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame,
                               void *user_data)
{
    conn *c = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    stream *s = calloc(1, sizeof(*s));
    if (!s)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    s->id = frame->hd.stream_id;
    s->c = c;
    s->started_ms = c->socketless ? 0 : uv_now(c->server->loop);
    parts_init(&s->parts);
    s->parts.pool = c->server ? &c->server->buffered : NULL;
    pl_buf_init(&s->trailer_store);
    s->next = c->streams;
    if (c->streams)
        c->streams->prev = s;
    c->streams = s;
    if (c->n_streams++ == 0)
        conn_arm_timer(c, c->opt->header_timeout_ms);
    nghttp2_session_set_stream_user_data(session, s->id, s);
    return 0;
}

static int h2_on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user_data)
{
    conn *c = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    stream *s = h2_stream(c, frame->hd.stream_id);
    if (!s || s->dispatched)
        return 0; /* trailers of a request: ignored */
    request_parts *r = &s->parts;
    if (r->strings.len + namelen + valuelen > c->opt->max_header_size)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets this stream only */
    if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
        r->method_off = r->strings.len;
        r->method_len = valuelen;
        pl_buf_append(&r->strings, value, valuelen);
        pl_buf_append_byte(&r->strings, 0);
    } else if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
        r->url_off = r->strings.len;
        r->url_len = valuelen;
        pl_buf_append(&r->strings, value, valuelen);
        pl_buf_append_byte(&r->strings, 0);
    } else if (namelen > 0 && name[0] == ':') {
        /* :scheme, :authority: not needed by handlers */
    } else {
        parts_add_header(r, (const char *)name, namelen, (const char *)value, valuelen);
    }
    return pl_buf_ok(&r->strings) && pl_buf_ok(&r->offsets) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

static int h2_on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                            const uint8_t *data, size_t len, void *user_data)
{
    conn *c = user_data;
    stream *s = h2_stream(c, stream_id);
    if (!s || s->dispatched || s->parts.too_large)
        return 0;
    request_parts *r = &s->parts;
    if (r->body.len + len > c->opt->max_body_size) {
        r->too_large = true;
        pl_buf_free(&r->body);
        parts_release(r);
        return 0;
    }
    if (!parts_account(r, len, c->opt->max_buffered_bytes)) {
        /* too much unfinished request data on the server: refuse this
         * stream; REFUSED_STREAM tells the client it is safe to retry */
        pl_warn(log_name(c), "%s: request data buffered over %zu bytes; refusing stream %d",
                c->peer, c->opt->max_buffered_bytes, stream_id);
        s->dispatched = true;
        pl_buf_free(&r->body);
        parts_release(r);
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_REFUSED_STREAM);
        return 0;
    }
    pl_buf_append(&r->body, data, len);
    if (!pl_buf_ok(&r->body))
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return 0;
}

static ssize_t h2_read_body(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                            size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                            void *user_data)
{
    stream *s = source->ptr;
    size_t left = s->resp_len - s->resp_off;
    size_t n = left < length ? left : length;
    if (n)
        memcpy(buf, s->resp + s->resp_off, n);
    s->resp_off += n;
    if (s->resp_off == s->resp_len) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        if (s->n_trailers) {
            *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            if (nghttp2_submit_trailer(session, stream_id, s->trailers, s->n_trailers) != 0)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
    }
    return (ssize_t)n;
}

static bool h2_header_ok(const pl_http_header *h)
{
    /* connection-specific headers are forbidden in HTTP/2 */
    static const char *const banned[] = {"connection",     "keep-alive", "transfer-encoding",
                                         "content-length", "upgrade",    NULL};
    for (int i = 0; banned[i]; i++)
        if (h->name_len == strlen(banned[i]) && strncasecmp(h->name, banned[i], h->name_len) == 0)
            return false;
    return h->name_len > 0;
}

/* Builds nghttp2_nv entries for headers, lower-casing names into `store`
 * (the caller keeps `store` alive and unmoved while nv is in use). */
static nghttp2_nv *h2_make_nv(const pl_http_header *headers, size_t n, pl_buf *store,
                              const char *status, size_t *n_out)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += headers[i].name_len + headers[i].value_len + 2;
    pl_buf_reserve(store, total + 8);
    if (!pl_buf_ok(store))
        return NULL;
    nghttp2_nv *nv = calloc(n + 1, sizeof(*nv));
    if (!nv)
        return NULL;
    size_t k = 0;
    if (status) {
        nv[k++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)status, 7, strlen(status),
                               NGHTTP2_NV_FLAG_NONE};
    }
    for (size_t i = 0; i < n; i++) {
        if (!h2_header_ok(&headers[i]))
            continue;
        uint8_t *name = store->data + store->len;
        for (size_t j = 0; j < headers[i].name_len; j++) {
            char ch = headers[i].name[j];
            pl_buf_append_byte(store, (uint8_t)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch));
        }
        uint8_t *value = store->data + store->len;
        pl_buf_append(store, headers[i].value, headers[i].value_len);
        nv[k++] = (nghttp2_nv){name, value, headers[i].name_len, headers[i].value_len,
                               NGHTTP2_NV_FLAG_NONE};
    }
    *n_out = k;
    return nv;
}

static void h2_respond(pl_http_response *res, int status, const pl_http_header *headers,
                       size_t n_headers, const void *body, size_t body_len,
                       const pl_http_header *trailers, size_t n_trailers)
{
    conn *c = res->c;
    stream *s = res->s;
    char status_text[8];
    snprintf(status_text, sizeof(status_text), "%d", status);
    pl_buf hstore;
    pl_buf_init(&hstore);
    size_t nh = 0;
    nghttp2_nv *nv = h2_make_nv(headers, n_headers, &hstore, status_text, &nh);
    if (!nv) {
        pl_buf_free(&hstore);
        nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    int rc;
    if (!body && body_len == 0 && n_trailers) {
        /* Trailers-Only: one HEADERS frame with END_STREAM holding both. */
        pl_buf all;
        pl_buf_init(&all);
        size_t total = n_headers + n_trailers;
        pl_http_header *merged = malloc((total ? total : 1) * sizeof(*merged));
        if (!merged) {
            free(nv);
            pl_buf_free(&hstore);
            nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
            return;
        }
        memcpy(merged, headers, n_headers * sizeof(*merged));
        memcpy(merged + n_headers, trailers, n_trailers * sizeof(*merged));
        size_t nall = 0;
        nghttp2_nv *nvall = h2_make_nv(merged, total, &all, status_text, &nall);
        rc = nvall ? nghttp2_submit_response(c->h2, s->id, nvall, nall, NULL) : -1;
        free(nvall);
        free(merged);
        pl_buf_free(&all);
    } else {
        s->resp = malloc(body_len ? body_len : 1);
        if (!s->resp) {
            free(nv);
            pl_buf_free(&hstore);
            nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
            return;
        }
        if (body_len)
            memcpy(s->resp, body, body_len);
        s->resp_len = body_len;
        s->resp_off = 0;
        if (n_trailers)
            s->trailers = h2_make_nv(trailers, n_trailers, &s->trailer_store, NULL, &s->n_trailers);
        nghttp2_data_provider dp = {.source.ptr = s, .read_callback = h2_read_body};
        rc = nghttp2_submit_response(c->h2, s->id, nv, nh, &dp);
    }
    free(nv);
    pl_buf_free(&hstore);
    if (rc != 0) {
        nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    /* Answered before the client finished sending (body too large): once
     * the answer is out, tell it to stop, without an error (RFC 9113 8.1).
     * Resetting now would discard the queued answer. */
    if (!s->remote_done)
        s->reset_after_answer = true;
}

static void h2_dispatch(conn *c, stream *s)
{
    request_parts *r = &s->parts;
    s->dispatched = true;
    if (r->method_len == 0 || r->url_len == 0) {
        nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_PROTOCOL_ERROR);
        return;
    }
    pl_http_response res = {.c = c, .s = s, .keep_alive = true};
    if (r->too_large && !c->opt->deliver_too_large) {
        static const pl_http_header ct = {"content-type", 12, "text/plain", 10};
        h2_respond(&res, 413, &ct, 1, "request body too large\n", 23, NULL, 0);
        return;
    }
    pl_http_header stack_headers[32];
    pl_http_header *headers = stack_headers;
    if (r->n_headers > 32) {
        headers = malloc(r->n_headers * sizeof(*headers));
        if (!headers) {
            nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
            return;
        }
    }
    char *base = (char *)r->strings.data;
    for (size_t i = 0; i < r->n_headers; i++) {
        header_offsets *h = (header_offsets *)r->offsets.data + i;
        headers[i] = (pl_http_header){base + h->name, h->name_len, base + h->value, h->value_len};
    }
    pl_http_request req;
    memset(&req, 0, sizeof(req));
    req.http_version = 2;
    req.method = base + r->method_off;
    split_url(base + r->url_off, &req.path, &req.query);
    req.headers = headers;
    req.n_headers = r->n_headers;
    req.peer = c->peer;
    req.too_large = r->too_large;
    if (!r->too_large) {
        size_t len;
        req.body = pl_buf_steal(&r->body, &len);
        req.body_len = len;
    }
    parts_release(r);
    res.head = strcmp(req.method, "HEAD") == 0;
    call_handler(c, &req, &res);
    if (headers != stack_headers)
        free(headers);
}

static int h2_on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    conn *c = user_data;
    if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        stream *s = h2_stream(c, frame->hd.stream_id);
        if (s)
            s->remote_done = true;
        if (s && !s->dispatched)
            h2_dispatch(c, s);
    } else if (frame->hd.type == NGHTTP2_DATA) {
        /* Body over the limit: answer at once, do not wait for the rest. */
        stream *s = h2_stream(c, frame->hd.stream_id);
        if (s && !s->dispatched && s->parts.too_large)
            h2_dispatch(c, s);
    }
    return 0;
}

static int h2_on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    conn *c = user_data;
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        stream *s = h2_stream(c, frame->hd.stream_id);
        if (s && s->reset_after_answer) {
            s->reset_after_answer = false;
            nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
        }
    }
    return 0;
}

static int h2_on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                              void *user_data)
{
    conn *c = user_data;
    stream *s = h2_stream(c, stream_id);
    if (!s)
        return 0;
    nghttp2_session_set_stream_user_data(session, stream_id, NULL);
    if (s->prev)
        s->prev->next = s->next;
    else
        c->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    parts_free(&s->parts);
    pl_buf_free(&s->trailer_store);
    free(s->trailers);
    free(s->resp);
    free(s);
    if (--c->n_streams == 0)
        conn_arm_timer(c, c->opt->idle_timeout_ms);
    return 0;
}

static bool h2_start(conn *c)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return false;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, h2_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, h2_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2_on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, h2_on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2_on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, h2_on_frame_send);
    nghttp2_option *opt = NULL;
    nghttp2_option_new(&opt);
    if (opt) {
        nghttp2_option_set_max_send_header_block_length(opt, 64 * 1024);
        nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
    }
    int rc = nghttp2_session_server_new2(&c->h2, cb, c, opt);
    nghttp2_session_callbacks_del(cb);
    if (opt)
        nghttp2_option_del(opt);
    if (rc != 0)
        return false;
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, c->opt->max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)c->opt->max_header_size},
    };
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, settings,
                            sizeof(settings) / sizeof(settings[0]));
    nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, H2_CONNECTION_WINDOW);
    return true;
}

static void h2_flush(conn *c)
{
    if (!c->h2)
        return;
    pl_buf out;
    pl_buf_init(&out);
    for (;;) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(c->h2, &data);
        if (n < 0) {
            pl_buf_free(&out);
            conn_close(c);
            return;
        }
        if (n == 0)
            break;
        pl_buf_append(&out, data, (size_t)n);
        if (out.len >= 256 * 1024) {
            size_t len;
            uint8_t *d = pl_buf_steal(&out, &len);
            conn_write(c, d, len);
        }
    }
    if (!pl_buf_ok(&out)) {
        pl_buf_free(&out);
        conn_close(c);
        return;
    }
    if (out.len) {
        size_t len;
        uint8_t *d = pl_buf_steal(&out, &len);
        conn_write(c, d, len);
    }
    pl_buf_free(&out);
    if (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2))
        conn_close(c);
}

static void h2_feed(conn *c, const uint8_t *data, size_t len)
{
    if (c->closing)
        return;
    ssize_t n = nghttp2_session_mem_recv(c->h2, data, len);
    if (n < 0) {
        pl_debug(log_name(c), "%s: HTTP/2 error: %s", c->peer, nghttp2_strerror((int)n));
        /* nghttp2 has queued a GOAWAY where the protocol calls for one. */
        h2_flush(c);
        conn_close(c);
        return;
    }
    h2_flush(c);
}

/* ---- input -------------------------------------------------------------- */

static void conn_feed(conn *c, const uint8_t *data, size_t len)
{
    if (c->closing || len == 0)
        return;
    if (c->proto == PROTO_SNIFF) {
        /* Compare what has arrived with the preface, a byte at a time. */
        size_t take = H2_PREFACE_LEN - c->sniff_len;
        if (take > len)
            take = len;
        memcpy(c->sniff + c->sniff_len, data, take);
        size_t have = c->sniff_len + take;
        bool h2_so_far = c->opt->h2c && memcmp(c->sniff, h2_preface, have) == 0;
        if (h2_so_far && have < H2_PREFACE_LEN) {
            c->sniff_len = have;
            return;
        }
        size_t replay = c->sniff_len; /* bytes held from earlier reads */
        c->sniff_len = have;
        if (h2_so_far) {
            if (!h2_start(c)) {
                conn_close(c);
                return;
            }
            c->proto = PROTO_H2;
        } else if (c->opt->http1) {
            c->proto = PROTO_H1;
            http_parser_init(&c->parser, HTTP_REQUEST);
            c->parser.data = c;
        } else {
            conn_close(c);
            return;
        }
        if (replay) {
            uint8_t held[H2_PREFACE_LEN];
            memcpy(held, c->sniff, replay);
            if (c->proto == PROTO_H2)
                h2_feed(c, held, replay);
            else
                h1_feed(c, held, replay);
        }
    }
    if (c->proto == PROTO_H2)
        h2_feed(c, data, len);
    else
        h1_feed(c, data, len);
}

static void conn_eof(conn *c)
{
    if (c->proto == PROTO_H1)
        h1_eof(c);
    /* The peer is gone: nothing more can be answered. */
    c->closing = true;
}

/* HTTP/2: each request has header_timeout_ms from its first HEADERS to its
 * END_STREAM. Late streams are reset one by one (CANCEL), so one slow call
 * does not take down the other calls multiplexed on the connection; the
 * timer is re-armed for the next deadline. */
static void h2_check_stream_deadlines(conn *c)
{
    uint64_t now = uv_now(c->server->loop);
    uint64_t next = 0;
    for (stream *s = c->streams; s; s = s->next) {
        if (s->dispatched)
            continue;
        uint64_t deadline = s->started_ms + c->opt->header_timeout_ms;
        if (deadline <= now) {
            pl_debug(log_name(c), "%s: stream %d not received in time", c->peer, s->id);
            s->dispatched = true; /* ignore whatever still comes */
            nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
        } else if (!next || deadline < next) {
            next = deadline;
        }
    }
    h2_flush(c);
    if (c->closing)
        return;
    if (next)
        conn_arm_timer(c, next - now);
    else if (c->n_streams == 0)
        conn_arm_timer(c, c->opt->idle_timeout_ms);
    else /* only answered streams left, still being written */
        conn_arm_timer(c, c->opt->header_timeout_ms);
}

static void on_conn_timeout(uv_timer_t *t)
{
    conn *c = t->data;
    if (c->closing) {
        conn_close_now(c);
        return;
    }
    if (c->proto == PROTO_H1 && c->in_request) {
        pl_debug(log_name(c), "%s: request not received in time", c->peer);
        h1_respond_simple(c, 408, "request timeout\n", true);
    } else if (c->proto == PROTO_H2 && c->n_streams) {
        h2_check_stream_deadlines(c);
        return;
    } else if (c->proto == PROTO_H2) {
        nghttp2_session_terminate_session(c->h2, NGHTTP2_NO_ERROR);
        h2_flush(c);
    }
    conn_close(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn *c = h->data;
    pl_http_server *server = c->server;
    if (server->read_buffer_busy) {
        /* never expected (reads are consumed synchronously), but be safe */
        buf->base = malloc(READ_BUFFER_SIZE);
        buf->len = buf->base ? READ_BUFFER_SIZE : 0;
        return;
    }
    server->read_buffer_busy = true;
    buf->base = (char *)server->read_buffer;
    buf->len = READ_BUFFER_SIZE;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    conn *c = st->data;
    pl_http_server *server = c->server;
    if (nread > 0 && !c->lingering)
        conn_feed(c, (const uint8_t *)buf->base, (size_t)nread);
    if (buf->base == (char *)server->read_buffer)
        server->read_buffer_busy = false;
    else
        free(buf->base);
    if (nread < 0 && c->lingering) {
        conn_close_now(c);
        return;
    }
    if (nread < 0) {
        if (nread == UV_EOF)
            conn_eof(c);
        c->closing = true;
        if (uv_is_closing((uv_handle_t *)&c->tcp))
            return;
        uv_read_stop(st);
        if (c->pending_writes == 0)
            conn_close_now(c);
        else
            uv_timer_start(&c->timer, on_close_grace_timeout, CLOSE_GRACE_MS, 0);
    }
}

static void on_connection(uv_stream_t *listener, int status)
{
    pl_http_server *server = listener->data;
    if (status < 0 || server->closing)
        return;
    conn *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->server = server;
    c->opt = &server->opt;
    c->handler = server->handler;
    c->arg = server->arg;
    parts_init(&c->h1);
    c->h1.pool = &server->buffered;
    uv_tcp_init(server->loop, &c->tcp);
    uv_timer_init(server->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->open_handles = 2;
    c->next = server->conns;
    if (server->conns)
        server->conns->prev = c;
    server->conns = c;
    server->n_conns++;
    server->open_handles++;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        c->closing = true;
        conn_close_now(c);
        return;
    }
    if (server->n_conns > server->opt.max_connections) {
        pl_warn(server->opt.name, "too many connections (%u); closing a new one",
                server->opt.max_connections);
        c->closing = true;
        conn_close_now(c);
        return;
    }
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
        char ip[48] = "?";
        int port = 0;
        if (ss.ss_family == AF_INET) {
            uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
            snprintf(c->peer, sizeof(c->peer), "%s:%d", ip, port);
        } else if (ss.ss_family == AF_INET6) {
            uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
            snprintf(c->peer, sizeof(c->peer), "[%s]:%d", ip, port);
        }
    }
    uv_tcp_nodelay(&c->tcp, 1);
    /* A new connection gets the request deadline for its first request. */
    conn_arm_timer(c, server->opt.header_timeout_ms);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        c->closing = true;
        conn_close_now(c);
    }
}

/* ---- responding --------------------------------------------------------- */

void pl_http_respond(pl_http_response *res, int status, const pl_http_header *headers,
                     size_t n_headers, const void *body, size_t body_len)
{
    pl_http_respond_with_trailers(res, status, headers, n_headers, body ? body : "", body_len, NULL,
                                  0);
}

void pl_http_respond_with_trailers(pl_http_response *res, int status, const pl_http_header *headers,
                                   size_t n_headers, const void *body, size_t body_len,
                                   const pl_http_header *trailers, size_t n_trailers)
{
    if (res->answered) {
        pl_error(log_name(res->c), "answered twice; second answer dropped");
        return;
    }
    res->answered = true;
    if (res->c->closing && !res->c->socketless && uv_is_closing((uv_handle_t *)&res->c->tcp))
        return;
    if (res->s) {
        h2_respond(res, status, headers, n_headers, body, body_len, trailers, n_trailers);
        return;
    }
    /* HTTP/1.1 has no trailers in a Content-Length answer: send them as
     * headers (only gRPC uses trailers, and gRPC is HTTP/2 only). */
    if (n_trailers) {
        pl_http_header *all = malloc((n_headers + n_trailers) * sizeof(*all));
        if (!all) {
            h1_respond_simple(res->c, 503, "out of memory\n", true);
            return;
        }
        memcpy(all, headers, n_headers * sizeof(*all));
        memcpy(all + n_headers, trailers, n_trailers * sizeof(*all));
        h1_respond(res, status, all, n_headers + n_trailers, body, body_len);
        free(all);
        return;
    }
    h1_respond(res, status, headers, n_headers, body, body_len);
}

/* ---- the server --------------------------------------------------------- */

static int parse_endpoint(const char *endpoint, struct sockaddr_storage *ss, pl_err *err)
{
    char host[256];
    const char *colon;
    const char *h = endpoint;
    size_t hlen;
    if (endpoint[0] == '[') {
        const char *end = strchr(endpoint, ']');
        if (!end || end[1] != ':')
            return pl_errf(err, PL_ERR_INVALID, "%s: expected [ipv6]:port", endpoint), -1;
        h = endpoint + 1;
        hlen = (size_t)(end - h);
        colon = end + 1;
    } else {
        colon = strrchr(endpoint, ':');
        if (!colon)
            return pl_errf(err, PL_ERR_INVALID, "%s: expected host:port", endpoint), -1;
        hlen = (size_t)(colon - endpoint);
    }
    if (hlen >= sizeof(host))
        return pl_errf(err, PL_ERR_INVALID, "%s: host too long", endpoint), -1;
    memcpy(host, h, hlen);
    host[hlen] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535 || colon[1] == 0)
        return pl_errf(err, PL_ERR_INVALID, "%s: bad port", endpoint), -1;
    if (hlen == 0 || strcmp(host, "localhost") == 0)
        strcpy(host, hlen == 0 ? "0.0.0.0" : "127.0.0.1");
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0)
        return 0;
    if (uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) == 0)
        return 0;
    return pl_errf(err, PL_ERR_INVALID,
                   "%s: not an IP address (names other than localhost are not resolved)", endpoint),
           -1;
}

pl_http_server *pl_http_server_start(uv_loop_t *loop, const char *endpoint,
                                     const pl_http_server_options *options, pl_http_handler handler,
                                     void *arg, pl_err *err)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (parse_endpoint(endpoint, &ss, err) != 0)
        return NULL;
    pl_http_server *s = calloc(1, sizeof(*s));
    if (!s) {
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (options)
        s->opt = *options;
    snprintf(s->name, sizeof(s->name), "%s", s->opt.name ? s->opt.name : "http");
    s->opt.name = s->name;
    options_fill(&s->opt);
    s->loop = loop;
    s->handler = handler;
    s->arg = arg;
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    s->open_handles = 1;
    int rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->listener, 511, on_connection);
    if (rc != 0) {
        pl_errf(err, PL_ERR_INTERNAL, "%s: %s", endpoint, uv_strerror(rc));
        /* The handle is registered with the loop: the memory goes in its
         * close callback, the next time the loop runs. */
        s->closing = true;
        uv_close((uv_handle_t *)&s->listener, on_listener_closed);
        return NULL;
    }
    struct sockaddr_storage bound;
    int blen = sizeof(bound);
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen);
    s->port = bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                                          : ntohs(((struct sockaddr_in *)&bound)->sin_port);
    return s;
}

int pl_http_server_port(const pl_http_server *server)
{
    return server->port;
}

static void on_listener_closed(uv_handle_t *h)
{
    pl_http_server *server = h->data;
    server->open_handles--;
    server_maybe_free(server);
}

void pl_http_server_close(pl_http_server *server)
{
    if (!server || server->closing)
        return;
    server->closing = true;
    uv_close((uv_handle_t *)&server->listener, on_listener_closed);
    for (conn *c = server->conns; c; c = c->next) {
        if (c->proto == PROTO_H2 && c->h2 && !c->closing) {
            nghttp2_session_terminate_session(c->h2, NGHTTP2_NO_ERROR);
            h2_flush(c);
        }
        c->closing = true;
        conn_close_now(c);
    }
}

/* ---- socketless driving (fuzzing, tests) -------------------------------- */

int pl_http_server_feed(const pl_http_server_options *options, pl_http_handler handler, void *arg,
                        const uint8_t *data, size_t len, size_t chunk, struct pl_buf *out)
{
    pl_http_server_options opt;
    memset(&opt, 0, sizeof(opt));
    if (options)
        opt = *options;
    options_fill(&opt);
    conn *c = calloc(1, sizeof(*c));
    if (!c)
        return 0;
    c->opt = &opt;
    c->handler = handler;
    c->arg = arg;
    c->socketless = true;
    c->capture = out;
    snprintf(c->peer, sizeof(c->peer), "memory:0");
    parts_init(&c->h1);
    if (chunk == 0)
        chunk = len ? len : 1;
    for (size_t off = 0; off < len && !c->closing; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        conn_feed(c, data + off, n);
    }
    if (!c->closing)
        conn_eof(c);
    int closed = c->closed_by_server;
    conn_free(c);
    return closed;
}
