/*
 * http2.c: HTTP/2 for the HTTP server (nghttp2): one session per
 * connection, a stream per request, answers with optional trailers (gRPC),
 * and per-stream deadlines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_server_private.h"

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
    pl_http_server_parts_init(&s->parts);
    s->parts.pool = c->server ? &c->server->buffered : NULL;
    s->parts.client_pool = c->cl ? &c->cl->buffered : NULL;
    pl_buf_init(&s->trailer_store);
    s->next = c->streams;
    if (c->streams)
        c->streams->prev = s;
    c->streams = s;
    if (c->n_streams++ == 0)
        pl_http_server_conn_arm_timer(c, c->opt->header_timeout_ms);
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
    /* Each field costs its text plus 32 bytes (RFC 9113 6.5.2), pseudo-
     * headers included: a field of one-byte HPACK references to the
     * dynamic table costs what it decodes to, not what was sent. */
    bool busy = false;
    if (!pl_http_server_parts_header(r, namelen, valuelen, c->opt, &busy)) {
        if (busy) {
            pl_warn(pl_http_server_log_name(c),
                    "%s: request data buffered over the limits; refusing "
                    "stream %d",
                    c->peer, s->id);
            s->dispatched = true;
            pl_http_server_parts_release(r);
            nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
            return 0;
        }
        pl_debug(pl_http_server_log_name(c),
                 "%s: stream %d: header list over %zu bytes or %u fields", c->peer, s->id,
                 c->opt->max_header_size, c->opt->max_header_fields);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets this stream only */
    }
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
        pl_http_server_parts_add_header(r, (const char *)name, namelen, (const char *)value,
                                        valuelen);
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
        pl_http_server_parts_release(r);
        return 0;
    }
    if (!pl_http_server_parts_account(r, len, c->opt)) {
        /* too much unfinished request data on the server: refuse this
         * stream; REFUSED_STREAM tells the client it is safe to retry */
        pl_warn(pl_http_server_log_name(c),
                "%s: request data buffered over %zu bytes (server) or %zu (this client); "
                "refusing stream %d",
                c->peer, c->opt->max_buffered_bytes, c->opt->max_buffered_bytes_per_client,
                stream_id);
        s->dispatched = true;
        pl_buf_free(&r->body);
        pl_http_server_parts_release(r);
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

void pl_http_server_h2_respond(pl_http_response *res, int status, const pl_http_header *headers,
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
    pl_http_response res = {.c = c, .s = s, .parts = r, .keep_alive = true};
    if (r->too_large && !c->opt->deliver_too_large) {
        static const pl_http_header ct = {"content-type", 12, "text/plain", 10};
        pl_http_server_h2_respond(&res, 413, &ct, 1, "request body too large\n", 23, NULL, 0);
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
    pl_http_server_split_url(base + r->url_off, &req.path, &req.query);
    req.headers = headers;
    req.n_headers = r->n_headers;
    req.peer = c->peer;
    req.too_large = r->too_large;
    if (!r->too_large) {
        size_t len;
        req.body = pl_buf_steal(&r->body, &len);
        req.body_len = len;
    }
    pl_http_server_parts_release(r);
    res.head = strcmp(req.method, "HEAD") == 0;
    pl_http_server_call_handler(c, &req, &res);
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
    } else if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        /* Bad credentials: refused before the body (DATA) is buffered. */
        stream *s = h2_stream(c, frame->hd.stream_id);
        if (s && !s->dispatched && !pl_http_server_early_auth(c, &s->parts, 2)) {
            h2_dispatch(c, s);
            s->reset_after_answer = false;
            s->refused_open = true;
        }
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
    pl_http_server_parts_free(&s->parts);
    pl_buf_free(&s->trailer_store);
    free(s->trailers);
    free(s->resp);
    free(s);
    if (--c->n_streams == 0)
        pl_http_server_conn_arm_timer(c, c->opt->idle_timeout_ms);
    return 0;
}

bool pl_http_server_h2_start(conn *c)
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

void pl_http_server_h2_flush(conn *c)
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
            pl_http_server_conn_close(c);
            return;
        }
        if (n == 0)
            break;
        pl_buf_append(&out, data, (size_t)n);
        if (out.len >= 256 * 1024) {
            size_t len;
            uint8_t *d = pl_buf_steal(&out, &len);
            pl_http_server_conn_write(c, d, len);
        }
    }
    if (!pl_buf_ok(&out)) {
        pl_buf_free(&out);
        pl_http_server_conn_close(c);
        return;
    }
    if (out.len) {
        size_t len;
        uint8_t *d = pl_buf_steal(&out, &len);
        pl_http_server_conn_write(c, d, len);
    }
    pl_buf_free(&out);
    if (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2))
        pl_http_server_conn_close(c);
}

void pl_http_server_h2_feed(conn *c, const uint8_t *data, size_t len)
{
    if (c->closing)
        return;
    ssize_t n = nghttp2_session_mem_recv(c->h2, data, len);
    if (n < 0) {
        pl_debug(pl_http_server_log_name(c), "%s: HTTP/2 error: %s", c->peer,
                 nghttp2_strerror((int)n));
        /* nghttp2 has queued a GOAWAY where the protocol calls for one. */
        pl_http_server_h2_flush(c);
        pl_http_server_conn_close(c);
        return;
    }
    pl_http_server_h2_flush(c);
}

/* HTTP/2: each request has header_timeout_ms from its first HEADERS to its
 * END_STREAM. Late streams are reset one by one (CANCEL), so one slow call
 * does not take down the other calls multiplexed on the connection; the
 * timer is re-armed for the next deadline. */
void pl_http_server_h2_check_stream_deadlines(conn *c)
{
    uint64_t now = uv_now(c->server->loop);
    uint64_t next = 0;
    for (stream *s = c->streams; s; s = s->next) {
        if (s->dispatched && !(s->refused_open && !s->remote_done))
            continue;
        uint64_t deadline = s->started_ms + c->opt->header_timeout_ms;
        if (deadline <= now) {
            pl_debug(pl_http_server_log_name(c), "%s: stream %d not received in time", c->peer,
                     s->id);
            s->dispatched = true; /* ignore whatever still comes */
            nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
        } else if (!next || deadline < next) {
            next = deadline;
        }
    }
    pl_http_server_h2_flush(c);
    if (c->closing)
        return;
    if (next)
        pl_http_server_conn_arm_timer(c, next - now);
    else if (c->n_streams == 0)
        pl_http_server_conn_arm_timer(c, c->opt->idle_timeout_ms);
    else /* only answered streams left, still being written */
        pl_http_server_conn_arm_timer(c, c->opt->header_timeout_ms);
}
