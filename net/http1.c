/*
 * http1.c: HTTP/1.1 for the HTTP server (http-parser): parsing into a
 * request_parts, limits while parsing, dispatch and framing answers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_server_private.h"

/* ---- HTTP/1.1 ----------------------------------------------------------- */

void pl_http_server_h1_respond_simple(conn *c, int status, const char *body, bool close_after)
{
    pl_buf out;
    pl_buf_init(&out);
    size_t len = body ? strlen(body) : 0;
    pl_buf_printf(&out,
                  "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                  "Content-Length: %zu\r\n%s\r\n",
                  status, pl_http_server_reason_phrase(status), len,
                  close_after ? "Connection: close\r\n" : "");
    pl_buf_append(&out, body, len);
    if (!pl_buf_ok(&out)) {
        pl_buf_free(&out);
        pl_http_server_conn_close(c);
        return;
    }
    size_t n;
    uint8_t *data = pl_buf_steal(&out, &n);
    pl_http_server_conn_write(c, data, n);
}

static void pl_http_server_h1_respond_busy(conn *c)
{
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; "
                               "charset=utf-8\r\nRetry-After: 1\r\nContent-Length: 12\r\n"
                               "Connection: close\r\n\r\nserver busy\n";
    pl_http_server_conn_write_copy(c, busy, sizeof(busy) - 1);
}

void pl_http_server_h1_respond(pl_http_response *res, int status, const pl_http_header *headers,
                               size_t n_headers, const void *body, size_t body_len)
{
    conn *c = res->c;
    pl_buf out;
    pl_buf_init(&out);
    pl_buf_printf(&out, "HTTP/1.1 %d %s\r\n", status, pl_http_server_reason_phrase(status));
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
        pl_http_server_conn_close(c);
        return;
    }
    size_t n;
    uint8_t *data = pl_buf_steal(&out, &n);
    pl_http_server_conn_write(c, data, n);
}

/* Header bytes as they arrive, against the request's limit and the
 * server's and the client's buffering budgets. A new field costs 32 bytes
 * more than its text (RFC 9113's accounting, also for HTTP/1.1: the per-
 * field bookkeeping is what a flood of tiny fields costs). Answers and
 * closes when over; false then. */
static bool h1_header_budget(conn *c, size_t more, bool new_field)
{
    if (new_field) {
        more += 32;
        if (++c->h1.n_fields > c->opt->max_header_fields) {
            pl_http_server_h1_respond_simple(c, 431, "too many header fields\n", true);
            pl_http_server_conn_close(c);
            return false;
        }
    }
    c->header_bytes += more;
    if (c->header_bytes > c->opt->max_header_size) {
        pl_http_server_h1_respond_simple(c, 431, "request headers too large\n", true);
        pl_http_server_conn_close(c);
        return false;
    }
    if (!pl_http_server_parts_account(&c->h1, more, c->opt)) {
        pl_warn(pl_http_server_log_name(c), "%s: request data buffered over the limits; refusing",
                c->peer);
        pl_http_server_h1_respond_busy(c);
        pl_http_server_conn_close(c);
        return false;
    }
    return true;
}

static int h1_on_message_begin(http_parser *p)
{
    conn *c = p->data;
    pl_http_server_parts_reset(&c->h1);
    c->in_request = true;
    c->last_was_value = false;
    c->expect_continue = false;
    c->header_bytes = 0;
    pl_http_server_conn_arm_timer(c, c->opt->header_timeout_ms);
    return 0;
}

static int h1_on_url(http_parser *p, const char *at, size_t len)
{
    conn *c = p->data;
    if (!h1_header_budget(c, len, false))
        return -1;
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
    if (!h1_header_budget(c, len, c->last_was_value || r->n_headers == 0))
        return -1;
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
    if (!h1_header_budget(c, len, false))
        return -1;
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
        pl_http_server_h1_respond_simple(c, 503, "out of memory\n", true);
        pl_http_server_conn_close(c);
        return -1;
    }
    /* Content-Length over the limit: answer now, do not read the body. */
    if (p->content_length != ULLONG_MAX && p->content_length > c->opt->max_body_size) {
        h1_dispatch(c, true);
        pl_http_server_conn_close(c);
        return -1;
    }
    /* Bad credentials: 401 now, before a byte of the body is buffered. */
    if (!pl_http_server_early_auth(c, r, 1)) {
        h1_dispatch(c, false);
        pl_http_server_conn_close(c);
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
        pl_http_server_conn_write_copy(c, cont, sizeof(cont) - 1);
    }
    return 0;
}

static int h1_on_body(http_parser *p, const char *at, size_t len)
{
    conn *c = p->data;
    request_parts *r = &c->h1;
    if (r->body.len + len > c->opt->max_body_size) {
        h1_dispatch(c, true);
        pl_http_server_conn_close(c);
        return -1;
    }
    if (!pl_http_server_parts_account(r, len, c->opt)) {
        /* All connections together, or this client's, hold too much
         * unfinished request data: a retryable refusal for this one. */
        pl_warn(pl_http_server_log_name(c),
                "%s: request data buffered over %zu bytes (server) or %zu (this client); "
                "refusing",
                c->peer, c->opt->max_buffered_bytes, c->opt->max_buffered_bytes_per_client);
        pl_http_server_h1_respond_busy(c);
        pl_http_server_conn_close(c);
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
        pl_http_server_h1_respond_simple(c, 503, "out of memory\n", true);
        pl_http_server_conn_close(c);
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
    pl_http_server_conn_arm_timer(c, c->opt->idle_timeout_ms);
    if (pl_http_server_conn_should_pause(c)) {
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
static void h1_dispatch(conn *c, bool too_large)
{
    request_parts *r = &c->h1;
    http_parser *p = &c->parser;
    if (too_large && !c->opt->deliver_too_large) {
        pl_http_server_h1_respond_simple(c, 413, "request body too large\n", true);
        return;
    }
    pl_http_header stack_headers[32];
    pl_http_header *headers = stack_headers;
    if (r->n_headers > 32) {
        headers = malloc(r->n_headers * sizeof(*headers));
        if (!headers) {
            pl_http_server_h1_respond_simple(c, 503, "out of memory\n", true);
            pl_http_server_conn_close(c);
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
    pl_http_server_split_url(r->url_len ? base + r->url_off : (char *)"/", &req.path, &req.query);
    req.headers = headers;
    req.n_headers = r->n_headers;
    req.peer = c->peer;
    req.too_large = too_large;
    if (!too_large) {
        size_t len;
        req.body = pl_buf_steal(&r->body, &len);
        req.body_len = len;
    }
    pl_http_server_parts_release(r); /* the body is the handler's now */
    pl_http_response res = {.c = c,
                            .parts = r,
                            .head = p->method == HTTP_HEAD,
                            /* refused at the headers: the body is not read */
                            .keep_alive = !too_large && !(r->auth_done && !r->auth_ok) &&
                                          http_should_keep_alive(p) && !p->upgrade};
    pl_http_server_call_handler(c, &req, &res);
    if (headers != stack_headers)
        free(headers);
    if (!res.keep_alive)
        pl_http_server_conn_close(c);
}

void pl_http_server_h1_feed(conn *c, const uint8_t *data, size_t len)
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
            pl_http_server_conn_close(c);
        return;
    }
    if (e != HPE_OK) {
        char msg[160];
        snprintf(msg, sizeof(msg), "bad request: %s\n", http_errno_description(e));
        pl_debug(pl_http_server_log_name(c), "%s: %s", c->peer, msg);
        pl_http_server_h1_respond_simple(c, e == HPE_HEADER_OVERFLOW ? 431 : 400, msg, true);
        pl_http_server_conn_close(c);
        return;
    }
    if (c->parser.upgrade || n < len) {
        /* Upgrade / CONNECT: not supported; the request (if complete) was
         * answered with Connection: close. */
        pl_http_server_conn_close(c);
    }
}

void pl_http_server_h1_eof(conn *c)
{
    if (c->closing)
        return;
    /* Lets the parser finish a body delimited by the end of the stream. */
    http_parser_execute(&c->parser, &h1_settings, NULL, 0);
}
