/*
 * http_server.c: one libuv listener serving HTTP/1.1 (http1.c) and HTTP/2
 * (http2.c), in clear or over TLS (tls.c): the listener, connections,
 * output, timers, and what every request passes before its handler
 * (CORS, authentication). See http_server.h.
 *
 * Design:
 *   - A connection starts in SNIFF state. The first bytes are compared with
 *     the 24-byte HTTP/2 client preface; as soon as they differ the
 *     connection is HTTP/1.1, when all 24 match it is HTTP/2. Bytes already
 *     read are replayed into the chosen protocol, so nothing is lost.
 *   - Everything a connection does goes through conn_feed() (bytes in) and
 *     conn_write() (bytes out). With a socket those are libuv reads and
 *     writes; without one (pl_http_server_feed) the output goes to a buffer.
 *     That is what lets fuzz targets drive the whole request path. TLS sits
 *     below that seam: socket bytes are decrypted into conn_feed(), and
 *     conn_write() encrypts before the raw write (OpenSSL memory BIOs), so
 *     neither protocol knows whether TLS is on. ALPN picks h2 / http/1.1;
 *     the preface sniffing then works as in clear.
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
 *     dropped), and the number of connections. Header fields cost their
 *     text plus 32 bytes (RFC 9113's accounting) and are counted; header and
 *     body bytes not yet handed on count against a server-wide budget and a
 *     per-client (IP) share, and so do connections (a full server evicts an
 *     idle connection of its biggest client for a newcomer).
 *   - A connection's memory is freed only from libuv's close callbacks, so
 *     nothing is freed under a callback that still uses it.
 */
#include "http_server_private.h"

#include "core/hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static void on_listener_closed(uv_handle_t *h);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);
static void conn_tls_flush(conn *c);

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
    if (!o->max_header_fields)
        o->max_header_fields = DEFAULT_MAX_FIELDS;
    if (!o->max_connections_per_client)
        o->max_connections_per_client = o->max_connections / 4 > 8 ? o->max_connections / 4 : 8;
    if (!o->max_buffered_bytes_per_client)
        o->max_buffered_bytes_per_client = o->max_buffered_bytes / 4 > o->max_body_size
                                               ? o->max_buffered_bytes / 4
                                               : o->max_body_size;
    /* After the per-client shares, which stay those of the whole listener
     * (a client's connections may all land on one worker): */
    if (o->shares > 1) { /* this server's part of the listener's totals */
        o->max_connections = (o->max_connections + o->shares - 1) / o->shares;
        o->max_buffered_bytes = (o->max_buffered_bytes + o->shares - 1) / o->shares;
        if (o->max_buffered_bytes < o->max_body_size + o->max_header_size)
            o->max_buffered_bytes = o->max_body_size + o->max_header_size;
        o->shares = 1; /* split once */
    }
    if (!o->http1 && !o->h2c)
        o->http1 = true;
    if (!o->name)
        o->name = "http";
}

const char *pl_http_server_log_name(const conn *c)
{
    return c->opt->name ? c->opt->name : "http";
}

void pl_http_server_parts_init(request_parts *p)
{
    memset(p, 0, sizeof(*p));
    pl_buf_init(&p->strings);
    pl_buf_init(&p->offsets);
    pl_buf_init(&p->body);
}

/* Gives this body's bytes back to the server-wide budget (after the body
 * went to the handler, or was dropped). */
void pl_http_server_parts_release(request_parts *p)
{
    if (p->pool)
        *p->pool -= p->accounted;
    if (p->client_pool)
        *p->client_pool -= p->accounted;
    p->accounted = 0;
}

/* Takes len bytes from the server-wide budget; false when it is spent. */
bool pl_http_server_parts_account(request_parts *p, size_t len, const pl_http_server_options *o)
{
    if (p->pool && *p->pool + len > o->max_buffered_bytes)
        return false;
    if (p->client_pool && *p->client_pool + len > o->max_buffered_bytes_per_client)
        return false;
    if (p->pool)
        *p->pool += len;
    if (p->client_pool)
        *p->client_pool += len;
    p->accounted += len;
    return true;
}

bool pl_http_server_parts_header(request_parts *p, size_t name_len, size_t value_len,
                                 const pl_http_server_options *o, bool *busy)
{
    size_t cost = name_len + value_len + 32;
    *busy = false;
    if (p->header_cost + cost > o->max_header_size || p->n_fields + 1 > o->max_header_fields)
        return false;
    if (!pl_http_server_parts_account(p, cost, o)) {
        *busy = true;
        return false;
    }
    p->header_cost += cost;
    p->n_fields++;
    return true;
}

void pl_http_server_parts_reset(request_parts *p)
{
    pl_http_server_parts_release(p);
    pl_buf_reset(&p->strings);
    pl_buf_reset(&p->offsets);
    /* A body taken by the handler leaves the buffer empty; a big one left
     * behind is released so an idle keep-alive connection stays small. */
    if (p->body.cap > 256 * 1024)
        pl_buf_free(&p->body);
    else
        pl_buf_reset(&p->body);
    p->n_headers = 0;
    p->header_cost = 0;
    p->n_fields = 0;
    p->auth_done = p->auth_ok = false;
    p->auth_user[0] = 0;
    p->method_off = p->method_len = p->url_off = p->url_len = 0;
    p->too_large = false;
}

void pl_http_server_parts_free(request_parts *p)
{
    pl_http_server_parts_release(p);
    pl_buf_free(&p->strings);
    pl_buf_free(&p->offsets);
    pl_buf_free(&p->body);
}

void pl_http_server_parts_add_header(request_parts *p, const char *name, size_t name_len,
                                     const char *value, size_t value_len)
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

const char *pl_http_server_reason_phrase(int status)
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
    pl_tls_conn_free(c->tls);
    pl_http_server_parts_free(&c->h1);
    pl_buf_free(&c->stash);
    if (c->h2) {
        nghttp2_session_del(c->h2);
        c->h2 = NULL;
    }
    while (c->streams) {
        stream *s = c->streams;
        c->streams = s->next;
        pl_http_server_parts_free(&s->parts);
        pl_buf_free(&s->trailer_store);
        free(s->trailers);
        free(s->resp);
        free(s);
    }
    free(c);
}

static void server_maybe_free(pl_http_server *server)
{
    if (server->closing && server->open_handles == 0) {
        pl_tls_server_free(server->tls);
        free(server->plain_buffer);
        if (server->has_cors)
            pl_http_cors_free(&server->cors);
        free(server);
    }
}

/* ---- clients (fair shares) ----------------------------------------------- */

static uint32_t client_bucket(const uint8_t addr[16])
{
    return (uint32_t)(pl_hash_bytes(addr, 16) & (CLIENT_BUCKETS - 1));
}

/* The client record of `addr`, created on its first connection; counts
 * one more connection. NULL on OOM. */
static client *client_get(pl_http_server *server, const uint8_t addr[16])
{
    uint32_t b = client_bucket(addr);
    for (client *cl = server->clients[b]; cl; cl = cl->next) {
        if (memcmp(cl->addr, addr, 16) == 0) {
            cl->conns++;
            return cl;
        }
    }
    client *cl = calloc(1, sizeof(*cl));
    if (!cl)
        return NULL;
    memcpy(cl->addr, addr, 16);
    cl->conns = 1;
    cl->next = server->clients[b];
    server->clients[b] = cl;
    return cl;
}

static void client_put(pl_http_server *server, client *cl)
{
    if (!cl || --cl->conns > 0)
        return;
    for (client **p = &server->clients[client_bucket(cl->addr)]; *p; p = &(*p)->next) {
        if (*p == cl) {
            *p = cl->next;
            break;
        }
    }
    free(cl);
}

/* Nothing in progress: no request being received or answered. */
static bool conn_idle(const conn *c)
{
    if (c->closing)
        return false;
    if (c->proto == PROTO_H1)
        return !c->in_request && c->pending_writes == 0;
    if (c->proto == PROTO_H2)
        return c->n_streams == 0;
    return true; /* connected, handshaking or sniffing: no request yet */
}

/* The server is full and `newcomer` wants in: the client holding the most
 * connections gives up its oldest idle one, if it holds more than the
 * newcomer's client does. */
static bool evict_for(pl_http_server *server, const client *newcomer)
{
    client *top = NULL;
    for (size_t b = 0; b < CLIENT_BUCKETS; b++)
        for (client *cl = server->clients[b]; cl; cl = cl->next)
            if (!top || cl->conns > top->conns)
                top = cl;
    if (!top || top == newcomer || top->conns <= newcomer->conns)
        return false;
    conn *victim = NULL;
    for (conn *c = server->conns; c; c = c->next) /* newest first: keep the last */
        if (c->cl == top && conn_idle(c))
            victim = c;
    if (!victim)
        return false;
    pl_debug(server->name, "%s: idle connection closed to make room", victim->peer);
    if (victim->proto == PROTO_H2 && victim->h2) {
        nghttp2_session_terminate_session(victim->h2, NGHTTP2_NO_ERROR);
        pl_http_server_h2_flush(victim);
    }
    pl_http_server_conn_close(victim);
    /* The slot is the newcomer's now, though the close is pending; an idle
     * connection holds no buffered bytes, and it forgets its client, which
     * may go away before it does. */
    top->conns--;
    victim->cl = NULL;
    victim->h1.client_pool = NULL;
    return true;
}

/* At most one warning a second about refused connections. */
static void warn_refused(pl_http_server *server, const char *what, const conn *c)
{
    uint64_t now = uv_now(server->loop);
    if (server->refused_log_ms && now - server->refused_log_ms < 1000) {
        server->refused_unlogged++;
        return;
    }
    pl_warn(server->name, "%s: %s; closing a new connection%s", c->peer, what,
            server->refused_unlogged ? " (and earlier ones not logged)" : "");
    server->refused_log_ms = now;
    server->refused_unlogged = 0;
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
    client *cl = c->cl;
    conn_free(c); /* gives its buffered bytes back to cl first */
    client_put(server, cl);
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
void pl_http_server_conn_close(conn *c)
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
    if (c->tls) {
        /* close_notify tells the client the answer is complete */
        pl_tls_conn_close_notify(c->tls);
        conn_tls_flush(c);
    }
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

bool pl_http_server_conn_should_pause(const conn *c)
{
    return !c->socketless && !c->read_paused && !c->closing &&
           c->tcp.write_queue_size > PAUSE_READING_AT;
}

void pl_http_server_h1_feed(conn *c, const uint8_t *data, size_t len);

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
            pl_http_server_h1_feed(c, held, len);
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

/* Writes bytes to the socket as they are (ciphertext on a TLS connection).
 * Takes `data` (malloc'd). */
static void conn_write_raw(conn *c, uint8_t *data, size_t len)
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
        pl_warn(pl_http_server_log_name(c), "%s: peer is not reading; closing", c->peer);
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
    if (c->proto == PROTO_H2 && pl_http_server_conn_should_pause(c)) {
        c->read_paused = true;
        uv_read_stop((uv_stream_t *)&c->tcp);
    }
}

/* Whatever TLS produced (handshake messages, records, alerts) goes out. */
static void conn_tls_flush(conn *c)
{
    size_t len;
    uint8_t *out = pl_tls_conn_take_output(c->tls, &len);
    if (out)
        conn_write_raw(c, out, len);
}

/* Application bytes: encrypted first on a TLS connection. Takes `data`. */
void pl_http_server_conn_write(conn *c, uint8_t *data, size_t len)
{
    if (!c->tls || c->socketless) {
        conn_write_raw(c, data, len);
        return;
    }
    if (len == 0 || uv_is_closing((uv_handle_t *)&c->tcp)) {
        free(data);
        return;
    }
    int rc = pl_tls_conn_encrypt(c->tls, data, len);
    free(data);
    if (rc < 0) {
        c->closing = true;
        conn_close_now(c);
        return;
    }
    conn_tls_flush(c);
}

void pl_http_server_conn_write_copy(conn *c, const void *data, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) {
        pl_http_server_conn_close(c);
        return;
    }
    memcpy(copy, data, len);
    pl_http_server_conn_write(c, copy, len);
}

/* ---- timers ------------------------------------------------------------- */

static void on_conn_timeout(uv_timer_t *t);

void pl_http_server_conn_arm_timer(conn *c, uint64_t ms)
{
    if (c->socketless || c->closing)
        return;
    uv_timer_start(&c->timer, on_conn_timeout, ms, 0);
}

void pl_http_server_split_url(char *url, const char **path, const char **query)
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

/* A refused request: 401 with the authenticator's challenge, or for gRPC
 * (which reads only its status trailers) UNAUTHENTICATED. */
static void answer_unauthenticated(conn *c, pl_http_request *req, pl_http_response *res)
{
    size_t ctlen = 0;
    const char *ct = pl_http_header_get(req, "content-type", &ctlen);
    if (req->http_version == 2 && ct && ctlen >= 16 && strncmp(ct, "application/grpc", 16) == 0) {
        static const pl_http_header h = {"content-type", 12, "application/grpc", 16};
        static const pl_http_header t[] = {{"grpc-status", 11, "16", 2},
                                           {"grpc-message", 12, "unauthenticated", 15}};
        pl_http_respond_with_trailers(res, 200, &h, 1, NULL, 0, t, 2);
        return;
    }
    const char *challenge = c->opt->auth->challenge ? c->opt->auth->challenge : "Bearer";
    pl_http_header h[2] = {{"Content-Type", 12, "text/plain; charset=utf-8", 25},
                           {"WWW-Authenticate", 16, challenge, strlen(challenge)}};
    pl_http_respond(res, 401, h, 2, "unauthorized\n", 13);
}

bool pl_http_server_early_auth(conn *c, request_parts *r, int version)
{
    if (!c->opt->auth || r->auth_done || r->method_len == 0)
        return true;
    pl_http_header stack[32];
    pl_http_header *headers = r->n_headers > 32 ? malloc(r->n_headers * sizeof(*headers)) : stack;
    if (!headers)
        return true; /* decided at dispatch instead */
    char *base = (char *)r->strings.data;
    for (size_t i = 0; i < r->n_headers; i++) {
        header_offsets *h = (header_offsets *)r->offsets.data + i;
        headers[i] = (pl_http_header){base + h->name, h->name_len, base + h->value, h->value_len};
    }
    /* The url is split into path and query in place at dispatch; here the
     * authenticator sees headers only. */
    pl_http_request req = {.http_version = version,
                           .method = base + r->method_off,
                           .path = "",
                           .query = "",
                           .headers = headers,
                           .n_headers = r->n_headers,
                           .peer = c->peer,
                           .tls = c->tls != NULL,
                           .tls_peer = c->tls ? pl_tls_conn_peer_name(c->tls) : NULL};
    bool go_on = true;
    bool preflight = c->cors && strcmp(req.method, "OPTIONS") == 0 &&
                     pl_http_header_get(&req, "origin", NULL) &&
                     pl_http_header_get(&req, "access-control-request-method", NULL);
    if (!preflight) {
        r->auth_user[0] = 0;
        r->auth_ok =
            c->opt->auth->check(c->opt->auth->arg, &req, r->auth_user, sizeof(r->auth_user));
        r->auth_user[sizeof(r->auth_user) - 1] = 0;
        r->auth_done = true;
        go_on = r->auth_ok;
    }
    if (headers != stack)
        free(headers);
    return go_on;
}

/* Everything a request passes before its handler: CORS (a preflight is
 * answered here, before authentication, as browsers send it without
 * credentials), then the authenticator. */
void pl_http_server_call_handler(conn *c, pl_http_request *req, pl_http_response *res)
{
    char user[128];
    req->tls = c->tls != NULL;
    req->tls_peer = c->tls ? pl_tls_conn_peer_name(c->tls) : NULL;
    const pl_http_cors_config *cors = c->cors;
    if (cors && pl_http_cors_preflight(cors, req, res))
        goto done;
    if (cors) {
        size_t olen = 0;
        const char *origin = pl_http_header_get(req, "origin", &olen);
        if (pl_http_cors_origin_allowed(cors, origin, olen)) {
            res->cors_origin = origin;
            res->cors_origin_len = olen;
        }
    }
    if (c->opt->auth) {
        user[0] = 0;
        bool ok;
        if (res->parts && res->parts->auth_done) { /* decided at the headers */
            ok = res->parts->auth_ok;
            snprintf(user, sizeof(user), "%s", res->parts->auth_user);
        } else {
            ok = c->opt->auth->check(c->opt->auth->arg, req, user, sizeof(user));
        }
        if (!ok) {
            pl_debug(pl_http_server_log_name(c), "%s: %s %s refused by %s", c->peer, req->method,
                     req->path, c->opt->auth->name ? c->opt->auth->name : "authenticator");
            answer_unauthenticated(c, req, res);
            goto done;
        }
        user[sizeof(user) - 1] = 0;
        req->auth_user = user[0] ? user : NULL;
    }
    c->handler(c->arg, req, res);
    if (!res->answered) {
        pl_error(pl_http_server_log_name(c), "%s %s: handler gave no answer", req->method,
                 req->path);
        pl_http_respond(res, 500, NULL, 0, "no answer\n", 10);
    }
done:
    free(req->body);
    req->body = NULL;
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
            if (!pl_http_server_h2_start(c)) {
                pl_http_server_conn_close(c);
                return;
            }
            c->proto = PROTO_H2;
        } else if (c->opt->http1) {
            c->proto = PROTO_H1;
            http_parser_init(&c->parser, HTTP_REQUEST);
            c->parser.data = c;
        } else {
            pl_http_server_conn_close(c);
            return;
        }
        if (replay) {
            uint8_t held[H2_PREFACE_LEN];
            memcpy(held, c->sniff, replay);
            if (c->proto == PROTO_H2)
                pl_http_server_h2_feed(c, held, replay);
            else
                pl_http_server_h1_feed(c, held, replay);
        }
    }
    if (c->proto == PROTO_H2)
        pl_http_server_h2_feed(c, data, len);
    else
        pl_http_server_h1_feed(c, data, len);
}

static void conn_eof(conn *c)
{
    if (c->proto == PROTO_H1)
        pl_http_server_h1_eof(c);
    /* The peer is gone: nothing more can be answered. */
    c->closing = true;
}

static void on_conn_timeout(uv_timer_t *t)
{
    conn *c = t->data;
    if (c->closing) {
        conn_close_now(c);
        return;
    }
    if (c->proto == PROTO_H1 && c->in_request) {
        pl_debug(pl_http_server_log_name(c), "%s: request not received in time", c->peer);
        pl_http_server_h1_respond_simple(c, 408, "request timeout\n", true);
    } else if (c->proto == PROTO_H2 && c->n_streams) {
        pl_http_server_h2_check_stream_deadlines(c);
        return;
    } else if (c->proto == PROTO_H2) {
        nghttp2_session_terminate_session(c->h2, NGHTTP2_NO_ERROR);
        pl_http_server_h2_flush(c);
    }
    pl_http_server_conn_close(c);
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

static bool tls_deliver(void *arg, const uint8_t *data, size_t len)
{
    conn *c = arg;
    conn_feed(c, data, len);
    return !c->closing;
}

/* Bytes from a TLS client: handshake, then records decrypted into the
 * protocol. A failed handshake (no client certificate, one from another CA,
 * an expired one, a protocol the listener refuses) sends OpenSSL's alert
 * and closes; failures are logged at most once a second per listener, with
 * how many were not logged. */
static void conn_tls_input(conn *c, const uint8_t *data, size_t len)
{
    pl_http_server *server = c->server;
    int rc = pl_tls_conn_input(c->tls, data, len, tls_deliver, c, server->plain_buffer,
                               READ_BUFFER_SIZE);
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
        conn_tls_flush(c);
    if (rc == 0)
        return;
    uint64_t now = uv_now(server->loop);
    if (now - server->tls_log_ms >= 1000 || server->tls_log_ms == 0) {
        pl_info(server->opt.name, "%s: TLS handshake refused: %s%s", c->peer,
                pl_tls_conn_error(c->tls),
                server->tls_failures_unlogged ? " (and earlier ones not logged)" : "");
        server->tls_log_ms = now;
        server->tls_failures_unlogged = 0;
    } else {
        server->tls_failures_unlogged++;
    }
    c->closing = true;
    c->closed_by_server = true;
    if (c->pending_writes == 0)
        conn_close_now(c);
    else
        uv_timer_start(&c->timer, on_close_grace_timeout, CLOSE_GRACE_MS, 0);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    conn *c = st->data;
    pl_http_server *server = c->server;
    if (nread > 0 && !c->lingering) {
        if (c->tls)
            conn_tls_input(c, (const uint8_t *)buf->base, (size_t)nread);
        else
            conn_feed(c, (const uint8_t *)buf->base, (size_t)nread);
    }
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
    pl_http_server_parts_init(&c->h1);
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
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    uint8_t addr[16] = {0};
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
        char ip[48] = "?";
        int port = 0;
        if (ss.ss_family == AF_INET) {
            /* as an IPv4-mapped IPv6 address, one key space for both */
            addr[10] = addr[11] = 0xff;
            memcpy(addr + 12, &((struct sockaddr_in *)&ss)->sin_addr, 4);
            uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
            snprintf(c->peer, sizeof(c->peer), "%s:%d", ip, port);
        } else if (ss.ss_family == AF_INET6) {
            memcpy(addr, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
            uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
            snprintf(c->peer, sizeof(c->peer), "[%s]:%d", ip, port);
        }
    }
    c->cl = client_get(server, addr);
    if (!c->cl) {
        c->closing = true;
        conn_close_now(c);
        return;
    }
    c->h1.client_pool = &c->cl->buffered;
    if (c->cl->conns > server->opt.max_connections_per_client) {
        warn_refused(server, "this client holds its share of connections", c);
        c->closing = true;
        conn_close_now(c);
        return;
    }
    if (server->n_conns > server->opt.max_connections && !evict_for(server, c->cl)) {
        warn_refused(server, "too many connections", c);
        c->closing = true;
        conn_close_now(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    c->cors = server->has_cors ? &server->cors : NULL;
    if (server->tls) {
        c->tls = pl_tls_conn_new(server->tls);
        if (!c->tls) {
            c->closing = true;
            conn_close_now(c);
            return;
        }
    }
    /* A new connection gets the request deadline for its first request. */
    pl_http_server_conn_arm_timer(c, server->opt.header_timeout_ms);
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
        pl_error(pl_http_server_log_name(res->c), "answered twice; second answer dropped");
        return;
    }
    res->answered = true;
    if (res->c->closing && !res->c->socketless && uv_is_closing((uv_handle_t *)&res->c->tcp))
        return;
    if (res->cors_origin) {
        /* The allowed Origin is echoed; the handler's headers come first. */
        pl_http_header stack[24];
        pl_http_header *all = n_headers + 3 <= 24 ? stack : malloc((n_headers + 3) * sizeof(*all));
        if (all) {
            if (n_headers)
                memcpy(all, headers, n_headers * sizeof(*all));
            all[n_headers] = (pl_http_header){"Access-Control-Allow-Origin", 27, res->cors_origin,
                                              res->cors_origin_len};
            all[n_headers + 1] =
                (pl_http_header){"Access-Control-Allow-Credentials", 32, "true", 4};
            all[n_headers + 2] = (pl_http_header){"Vary", 4, "Origin", 6};
            res->cors_origin = NULL;
            res->answered = false;
            pl_http_respond_with_trailers(res, status, all, n_headers + 3, body, body_len, trailers,
                                          n_trailers);
            if (all != stack)
                free(all);
            return;
        }
    }
    if (res->s) {
        pl_http_server_h2_respond(res, status, headers, n_headers, body, body_len, trailers,
                                  n_trailers);
        return;
    }
    /* HTTP/1.1 has no trailers in a Content-Length answer: send them as
     * headers (only gRPC uses trailers, and gRPC is HTTP/2 only). */
    if (n_trailers) {
        pl_http_header *all = malloc((n_headers + n_trailers) * sizeof(*all));
        if (!all) {
            pl_http_server_h1_respond_simple(res->c, 503, "out of memory\n", true);
            return;
        }
        memcpy(all, headers, n_headers * sizeof(*all));
        memcpy(all + n_headers, trailers, n_trailers * sizeof(*all));
        pl_http_server_h1_respond(res, status, all, n_headers + n_trailers, body, body_len);
        free(all);
        return;
    }
    pl_http_server_h1_respond(res, status, headers, n_headers, body, body_len);
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

static bool is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const uint8_t *a = (const uint8_t *)&((const struct sockaddr_in *)ss)->sin_addr;
        return a[0] == 127;
    }
    if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a);
    }
    return false;
}

/* reload_interval: certificates renewed on disk are picked up without a
 * restart; a broken renewal keeps the current ones and is logged once. */
static void on_tls_reload_timer(uv_timer_t *t)
{
    pl_http_server *s = t->data;
    pl_err err = {{0}};
    int rc = pl_tls_server_reload(s->tls, false, &err);
    if (rc > 0)
        pl_info(s->name, "TLS certificate reloaded");
    else if (rc < 0)
        pl_error(s->name, "TLS files changed but do not load, the previous ones stay: %s", err.msg);
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
    s->opt.tls = NULL; /* borrowed only here */
    s->opt.cors = NULL;
    s->loop = loop;
    s->handler = handler;
    s->arg = arg;
    if (options && pl_tls_server_config_enabled(options->tls)) {
        s->tls = pl_tls_server_new(options->tls, s->opt.h2c, s->opt.http1, s->name, err);
        s->plain_buffer = s->tls ? malloc(READ_BUFFER_SIZE) : NULL;
        if (!s->tls || !s->plain_buffer) {
            if (s->tls && !s->plain_buffer)
                pl_errf(err, PL_ERR_NOMEM, "out of memory");
            pl_tls_server_free(s->tls);
            free(s->plain_buffer);
            free(s);
            return NULL;
        }
    }
    if (options && pl_http_cors_enabled(options->cors)) {
        if (pl_http_cors_copy(&s->cors, options->cors) != 0) {
            pl_tls_server_free(s->tls);
            free(s->plain_buffer);
            free(s);
            pl_errf(err, PL_ERR_NOMEM, "out of memory");
            return NULL;
        }
        s->has_cors = true;
    }
    int rc = uv_tcp_init_ex(loop, &s->listener, ss.ss_family);
    if (rc != 0)
        uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    s->open_handles = 1;
    if (rc == 0 && s->opt.reuse_port) {
        uv_os_fd_t fd;
        int one = 1;
        if (uv_fileno((uv_handle_t *)&s->listener, &fd) != 0 ||
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0)
            rc = UV_EINVAL;
    }
    if (rc == 0)
        rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&ss, 0);
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
    if (s->tls && pl_tls_server_reload_interval_ms(s->tls)) {
        uint64_t every = pl_tls_server_reload_interval_ms(s->tls);
        uv_timer_init(loop, &s->tls_timer);
        s->tls_timer.data = s;
        s->open_handles++;
        s->tls_timer_on = true;
        uv_timer_start(&s->tls_timer, on_tls_reload_timer, every, every);
        uv_unref((uv_handle_t *)&s->tls_timer);
    }
    if (!is_loopback(&bound) && (!s->tls || !s->opt.auth))
        pl_warn(s->name, "%s is reachable beyond this host %s%s%s: anyone who can connect can %s",
                endpoint, s->tls ? "" : "without TLS", !s->tls && !s->opt.auth ? " and " : "",
                s->opt.auth ? "" : "without authentication",
                s->opt.auth ? "read what clients send" : "send data");
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
    if (server->tls_timer_on)
        uv_close((uv_handle_t *)&server->tls_timer, on_listener_closed);
    for (conn *c = server->conns; c; c = c->next) {
        if (c->proto == PROTO_H2 && c->h2 && !c->closing) {
            nghttp2_session_terminate_session(c->h2, NGHTTP2_NO_ERROR);
            pl_http_server_h2_flush(c);
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
    c->cors = options && pl_http_cors_enabled(options->cors) ? options->cors : NULL;
    snprintf(c->peer, sizeof(c->peer), "memory:0");
    pl_http_server_parts_init(&c->h1);
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
