/*
 * http_client.c: libcurl's multi socket interface driven by libuv (see
 * http_client.h for the why).
 *
 * The wiring, in three callbacks:
 *   - curl's socket callback: start, change or stop a uv_poll_t on a socket.
 *     The poll context is attached to the socket with curl_multi_assign, so
 *     curl gives it back to us on the next call for that socket.
 *   - curl's timer callback: (re)arm or stop the one uv_timer_t.
 *   - libuv's poll and timer callbacks: tell curl with
 *     curl_multi_socket_action, then collect finished transfers with
 *     curl_multi_info_read and call their completion callbacks.
 *
 * A request (pl_http_call) owns its easy handle, its header list and the
 * response pieces it collects; it is freed right after its callback. The
 * request body is NOT copied: curl reads it in place (CURLOPT_POSTFIELDS), so
 * the caller keeps it alive until the callback, which every sender here does
 * anyway because it may need to send the same bytes again.
 *
 * Closing: uv handles close asynchronously, so the client is freed by the
 * last close callback (the timer's and every poll's), counted in
 * `open_handles`.
 */
#include "net/http_client.h"

#include <ctype.h>
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <strings.h>
#include <time.h>

#include "core/buf.h"
#include "core/component.h"
#include "core/log.h"

#define DEFAULT_MAX_BODY (64 * 1024)

typedef struct header_ref {
    size_t name_off, name_len, value_off, value_len;
    bool trailer;
} header_ref;

typedef struct pl_http_call {
    pl_http_client *client;
    CURL *easy;
    struct curl_slist *headers;
    pl_http_client_cb cb;
    void *arg;
    pl_buf header_text; /* names and values of received headers, back to back */
    header_ref *refs;
    size_t n_refs, cap_refs;
    bool headers_done; /* the blank line after the final response's headers */
    int status;
    pl_buf body;
    size_t max_body;
    bool truncated;
    bool failed_alloc;
    uint64_t start_ns;
    char errbuf[CURL_ERROR_SIZE];
    struct pl_http_call *prev, *next;
} pl_http_call;

typedef struct sock_ctx {
    uv_poll_t poll;
    curl_socket_t fd;
    pl_http_client *client;
    struct sock_ctx *prev, *next; /* the client's open polls */
} sock_ctx;

struct pl_http_client {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    pl_http_call *calls; /* active requests, doubly linked */
    sock_ctx *socks;     /* polls not yet closed, doubly linked */
    size_t n_calls;
    int open_handles; /* timer + polls not yet closed */
    int dispatching;  /* inside completion callbacks */
    bool closing;
    bool close_requested; /* close was called from a completion callback */
};

/* CURLOPT_SOCKOPTFUNCTION for one-request connections: SO_LINGER {1, 0}
 * makes close() reset the connection instead of entering TIME_WAIT. */
static int sockopt_no_time_wait(void *arg, curl_socket_t fd, curlsocktype purpose)
{
    (void)arg;
    if (purpose == CURLSOCKTYPE_IPCXN) {
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    return CURL_SOCKOPT_OK;
}

static void client_maybe_free(pl_http_client *client)
{
    if (client->closing && client->open_handles == 0 && !client->multi)
        free(client);
}

static void sock_unlink(pl_http_client *client, sock_ctx *ctx)
{
    if (ctx->prev)
        ctx->prev->next = ctx->next;
    else if (client->socks == ctx)
        client->socks = ctx->next;
    if (ctx->next)
        ctx->next->prev = ctx->prev;
    ctx->prev = ctx->next = NULL;
}

static void sock_close(pl_http_client *client, sock_ctx *ctx);

static void on_handle_closed(uv_handle_t *handle)
{
    pl_http_client *client;
    if (handle->type == UV_POLL) {
        sock_ctx *ctx = handle->data;
        client = ctx->client;
        free(ctx);
    } else {
        client = handle->data;
    }
    client->open_handles--;
    client_maybe_free(client);
}

/* ---- completion --------------------------------------------------------- */

static void call_free(pl_http_call *call)
{
    if (call->easy)
        curl_easy_cleanup(call->easy);
    curl_slist_free_all(call->headers);
    pl_buf_free(&call->header_text);
    pl_buf_free(&call->body);
    free(call->refs);
    free(call);
}

static void call_unlink(pl_http_client *client, pl_http_call *call)
{
    if (call->prev)
        call->prev->next = call->next;
    else
        client->calls = call->next;
    if (call->next)
        call->next->prev = call->prev;
    call->prev = call->next = NULL;
    client->n_calls--;
}

/* Builds the result from what the call collected and runs the callback. */
static void call_complete(pl_http_call *call, int transport_error, const char *error)
{
    size_t n_headers = 0, n_trailers = 0;
    for (size_t i = 0; i < call->n_refs; i++) {
        if (call->refs[i].trailer)
            n_trailers++;
        else
            n_headers++;
    }
    pl_http_header *all = calloc(call->n_refs ? call->n_refs : 1, sizeof(*all));
    pl_http_client_result result = {0};
    result.transport_error = transport_error;
    result.error = error;
    if (!all && transport_error == 0) {
        result.transport_error = CURLE_OUT_OF_MEMORY;
        result.error = "out of memory";
    }
    if (all && !call->header_text.failed) {
        size_t h = 0, t = n_headers;
        for (size_t i = 0; i < call->n_refs; i++) {
            const header_ref *r = &call->refs[i];
            pl_http_header *dst = r->trailer ? &all[t++] : &all[h++];
            dst->name = (const char *)call->header_text.data + r->name_off;
            dst->name_len = r->name_len;
            dst->value = (const char *)call->header_text.data + r->value_off;
            dst->value_len = r->value_len;
        }
        result.headers = all;
        result.n_headers = n_headers;
        result.trailers = all + n_headers;
        result.n_trailers = n_trailers;
    }
    result.status = call->status;
    if (call->easy && transport_error == 0) {
        long code = 0;
        curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code)
            result.status = (int)code;
    }
    result.body = call->body.data;
    result.body_len = call->body.failed ? 0 : call->body.len;
    result.body_truncated = call->truncated;
    result.elapsed_ms = (pl_time_mono_ns() - call->start_ns) / 1000000u;
    call->cb(call->arg, &result);
    free(all);
}

static void client_close_now(pl_http_client *client);

static void check_multi_info(pl_http_client *client)
{
    CURLMsg *msg;
    int left;
    client->dispatching++;
    while (client->multi && (msg = curl_multi_info_read(client->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *easy = msg->easy_handle;
        CURLcode code = msg->data.result;
        pl_http_call *call = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&call);
        curl_multi_remove_handle(client->multi, easy);
        call_unlink(client, call);
        if (code == CURLE_OK && call->failed_alloc)
            code = CURLE_OUT_OF_MEMORY;
        call_complete(
            call, code == CURLE_OK ? 0 : (int)code,
            code == CURLE_OK ? NULL : (call->errbuf[0] ? call->errbuf : curl_easy_strerror(code)));
        call_free(call);
    }
    client->dispatching--;
    if (client->dispatching == 0 && client->close_requested) {
        client->close_requested = false;
        client_close_now(client);
    }
}

/* ---- libuv -> curl ------------------------------------------------------ */

static void on_poll(uv_poll_t *handle, int status, int events)
{
    sock_ctx *ctx = handle->data;
    pl_http_client *client = ctx->client;
    int flags = 0;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (!status && (events & UV_READABLE))
        flags |= CURL_CSELECT_IN;
    if (!status && (events & UV_WRITABLE))
        flags |= CURL_CSELECT_OUT;
    int running;
    curl_multi_socket_action(client->multi, ctx->fd, flags, &running);
    check_multi_info(client);
}

static void on_timer(uv_timer_t *timer)
{
    pl_http_client *client = timer->data;
    int running;
    curl_multi_socket_action(client->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_multi_info(client);
}

/* ---- curl -> libuv ------------------------------------------------------ */

static int curl_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    pl_http_client *client = userp;
    if (client->closing)
        return 0;
    if (timeout_ms < 0)
        uv_timer_stop(&client->timer);
    else
        uv_timer_start(&client->timer, on_timer, (uint64_t)timeout_ms, 0);
    return 0;
}

static int curl_socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    pl_http_client *client = userp;
    sock_ctx *ctx = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (ctx) {
            sock_close(client, ctx);
            curl_multi_assign(client->multi, fd, NULL);
        }
        return 0;
    }
    if (!ctx) {
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
            return -1;
        ctx->fd = fd;
        ctx->client = client;
        if (uv_poll_init_socket(client->loop, &ctx->poll, fd) != 0) {
            free(ctx);
            return -1;
        }
        ctx->poll.data = ctx;
        client->open_handles++;
        ctx->next = client->socks;
        if (client->socks)
            client->socks->prev = ctx;
        client->socks = ctx;
        curl_multi_assign(client->multi, fd, ctx);
    }
    int events = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
        events |= UV_READABLE;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
        events |= UV_WRITABLE;
    uv_poll_start(&ctx->poll, events, on_poll);
    return 0;
}

static void sock_close(pl_http_client *client, sock_ctx *ctx)
{
    sock_unlink(client, ctx);
    uv_poll_stop(&ctx->poll);
    uv_close((uv_handle_t *)&ctx->poll, on_handle_closed);
}

/* ---- response collection (curl callbacks, per request) ----------------- */

static size_t trim_len(const char *s, size_t len)
{
    while (len &&
           (s[len - 1] == '\r' || s[len - 1] == '\n' || s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    return len;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *userp)
{
    pl_http_call *call = userp;
    size_t total = size * nmemb;
    size_t len = trim_len(data, total);
    if (len >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        /* A status line starts a new response (after 1xx ones): forget the
         * headers of the previous one. */
        call->n_refs = 0;
        pl_buf_reset(&call->header_text);
        call->headers_done = false;
        const char *sp = memchr(data, ' ', len);
        call->status = sp ? atoi(sp + 1) : 0;
        return total;
    }
    if (len == 0) {
        if (call->status >= 200)
            call->headers_done = true;
        return total;
    }
    const char *colon = memchr(data, ':', len);
    if (!colon)
        return total;
    size_t name_len = (size_t)(colon - data);
    const char *value = colon + 1;
    size_t value_len = len - name_len - 1;
    while (value_len && (*value == ' ' || *value == '\t')) {
        value++;
        value_len--;
    }
    if (call->n_refs == call->cap_refs) {
        size_t cap = call->cap_refs ? call->cap_refs * 2 : 16;
        if (cap > 4096) /* a response with thousands of headers is not worth keeping */
            return total;
        header_ref *refs = realloc(call->refs, cap * sizeof(*refs));
        if (!refs) {
            call->failed_alloc = true;
            return total;
        }
        call->refs = refs;
        call->cap_refs = cap;
    }
    header_ref *r = &call->refs[call->n_refs++];
    r->name_off = call->header_text.len;
    r->name_len = name_len;
    pl_buf_append(&call->header_text, data, name_len);
    pl_buf_append_byte(&call->header_text, 0);
    r->value_off = call->header_text.len;
    r->value_len = value_len;
    pl_buf_append(&call->header_text, value, value_len);
    pl_buf_append_byte(&call->header_text, 0);
    r->trailer = call->headers_done;
    return total;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *userp)
{
    pl_http_call *call = userp;
    size_t total = size * nmemb;
    /* Data after the headers means later header lines are trailers, even if
     * the blank separator line was not reported. */
    call->headers_done = true;
    size_t room = call->max_body > call->body.len ? call->max_body - call->body.len : 0;
    size_t take = total < room ? total : room;
    if (take < total)
        call->truncated = true;
    if (take)
        pl_buf_append(&call->body, data, take);
    return total; /* keep reading (and discarding) so the connection stays usable */
}

/* ---- public API --------------------------------------------------------- */

static uv_once_t curl_once = UV_ONCE_INIT;
static CURLcode curl_init_code;
static void curl_global(void)
{
    curl_init_code = curl_global_init(CURL_GLOBAL_DEFAULT);
}

pl_http_client *pl_http_client_new(uv_loop_t *loop, pl_err *err)
{
    uv_once(&curl_once, curl_global);
    if (curl_init_code != CURLE_OK) {
        pl_errf(err, PL_ERR_INTERNAL, "curl_global_init: %s", curl_easy_strerror(curl_init_code));
        return NULL;
    }
    pl_http_client *client = calloc(1, sizeof(*client));
    if (!client) {
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    client->loop = loop;
    client->multi = curl_multi_init();
    if (!client->multi) {
        free(client);
        pl_errf(err, PL_ERR_INTERNAL, "curl_multi_init failed");
        return NULL;
    }
    uv_timer_init(loop, &client->timer);
    client->timer.data = client;
    client->open_handles = 1;
    curl_multi_setopt(client->multi, CURLMOPT_SOCKETFUNCTION, curl_socket_cb);
    curl_multi_setopt(client->multi, CURLMOPT_SOCKETDATA, client);
    curl_multi_setopt(client->multi, CURLMOPT_TIMERFUNCTION, curl_timer_cb);
    curl_multi_setopt(client->multi, CURLMOPT_TIMERDATA, client);
    /* No HTTP/2 multiplexing: with the libcurl of Debian 12 (7.88.1) a second
     * POST stream started on a connection still busy with the first fails
     * with "Error in the HTTP2 framing layer" (a 7.88 regression). Each
     * concurrent request gets its own connection instead; connections are
     * still reused one request after another, so a sender with N consumers
     * keeps about N connections open. */
    curl_multi_setopt(client->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);
    return client;
}

pl_status pl_http_client_send(pl_http_client *client, const pl_http_client_request *req,
                              pl_http_client_cb cb, void *arg, pl_err *err)
{
    if (client->closing || client->close_requested)
        return pl_errf(err, PL_ERR_REFUSED, "http client is closing");
    if (!req->url || !cb)
        return pl_errf(err, PL_ERR_INVALID, "http request without url or callback");
    pl_http_call *call = calloc(1, sizeof(*call));
    if (!call)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    call->client = client;
    call->cb = cb;
    call->arg = arg;
    call->max_body = req->max_response_body ? req->max_response_body : DEFAULT_MAX_BODY;
    pl_buf_init(&call->header_text);
    pl_buf_init(&call->body);
    call->easy = curl_easy_init();
    if (!call->easy) {
        call_free(call);
        return pl_errf(err, PL_ERR_NOMEM, "curl_easy_init failed");
    }
    CURL *e = call->easy;
    bool ok = true;
#define SETOPT(opt, val) ok = ok && curl_easy_setopt(e, opt, val) == CURLE_OK
    SETOPT(CURLOPT_URL, req->url);
    SETOPT(CURLOPT_PRIVATE, call);
    SETOPT(CURLOPT_ERRORBUFFER, call->errbuf);
    SETOPT(CURLOPT_NOSIGNAL, 1L);
    if (getenv("PROFLINK_CURL_VERBOSE")) /* protocol trace on stderr, for debugging */
        SETOPT(CURLOPT_VERBOSE, 1L);
    SETOPT(CURLOPT_HEADERFUNCTION, on_header);
    SETOPT(CURLOPT_HEADERDATA, call);
    SETOPT(CURLOPT_WRITEFUNCTION, on_body);
    SETOPT(CURLOPT_WRITEDATA, call);
    SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
    SETOPT(CURLOPT_USERAGENT, "proflink/0.1");
    if (req->timeout_ms) {
        SETOPT(CURLOPT_TIMEOUT_MS, (long)req->timeout_ms);
        SETOPT(CURLOPT_CONNECTTIMEOUT_MS, (long)req->timeout_ms);
    }
    if (req->version == PL_HTTP_VERSION_2) {
        /* Prior knowledge on http:// (gRPC's h2c); on https:// curl still
         * negotiates h2 with ALPN. */
        SETOPT(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
        /* libcurl 7.88.x (Debian 12) fails every request that reuses a
         * prior-knowledge h2c connection with "Error in the HTTP2 framing
         * layer" (curl issue #10634, fixed in 8.0.0): on those versions use
         * one connection per request there, instead of failing every other
         * export and waiting for its retry. */
        curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
        if (cv->version_num >= 0x075800 && cv->version_num < 0x080000 &&
            strncasecmp(req->url, "http://", 7) == 0) {
            SETOPT(CURLOPT_FORBID_REUSE, 1L);
            /* A connection per request would leave one TIME_WAIT socket per
             * export and exhaust local ports at a few hundred exports per
             * second; the connection is closed only after the whole answer
             * (trailers included) was read, so it may end with a reset. */
            SETOPT(CURLOPT_SOCKOPTFUNCTION, sockopt_no_time_wait);
        }
    } else {
        SETOPT(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    }
    const char *method = req->method ? req->method : "POST";
    if (strcmp(method, "GET") == 0) {
        SETOPT(CURLOPT_HTTPGET, 1L);
    } else {
        SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        SETOPT(CURLOPT_POSTFIELDS, req->body ? (const char *)req->body : "");
        if (strcmp(method, "POST") != 0)
            SETOPT(CURLOPT_CUSTOMREQUEST, method);
    }
    if (req->tls) {
        if (req->tls->ca_file && req->tls->ca_file[0])
            SETOPT(CURLOPT_CAINFO, req->tls->ca_file);
        if (req->tls->cert_file && req->tls->cert_file[0])
            SETOPT(CURLOPT_SSLCERT, req->tls->cert_file);
        if (req->tls->key_file && req->tls->key_file[0])
            SETOPT(CURLOPT_SSLKEY, req->tls->key_file);
        if (req->tls->insecure_skip_verify) {
            SETOPT(CURLOPT_SSL_VERIFYPEER, 0L);
            SETOPT(CURLOPT_SSL_VERIFYHOST, 0L);
        }
    }
    /* No "Expect: 100-continue" round trip before bodies over 1 KiB. */
    call->headers = curl_slist_append(NULL, "Expect:");
    for (size_t i = 0; i < req->n_headers && call->headers; i++) {
        struct curl_slist *l = curl_slist_append(call->headers, req->headers[i]);
        if (!l) {
            curl_slist_free_all(call->headers);
            call->headers = NULL;
        } else {
            call->headers = l;
        }
    }
    if (!call->headers)
        ok = false;
    SETOPT(CURLOPT_HTTPHEADER, call->headers);
#undef SETOPT
    if (!ok) {
        call_free(call);
        return pl_errf(err, PL_ERR_INVALID, "cannot set up request to %s", req->url);
    }
    call->start_ns = pl_time_mono_ns();
    CURLMcode mc = curl_multi_add_handle(client->multi, e);
    if (mc != CURLM_OK) {
        call_free(call);
        return pl_errf(err, PL_ERR_INTERNAL, "curl_multi_add_handle: %s", curl_multi_strerror(mc));
    }
    call->next = client->calls;
    if (client->calls)
        client->calls->prev = call;
    client->calls = call;
    client->n_calls++;
    return PL_OK;
}

size_t pl_http_client_active(const pl_http_client *client)
{
    return client->n_calls;
}

static void client_close_now(pl_http_client *client)
{
    client->closing = true;
    while (client->calls) {
        pl_http_call *call = client->calls;
        call_unlink(client, call);
        curl_multi_remove_handle(client->multi, call->easy);
        call_complete(call, PL_HTTP_CANCELLED, "cancelled");
        call_free(call);
    }
    /* Cleanup closes cached connections, which may report sockets to remove. */
    curl_multi_cleanup(client->multi);
    client->multi = NULL;
    /* Whatever curl did not report as removed is closed here, so that no
     * poll handle outlives the client. */
    while (client->socks)
        sock_close(client, client->socks);
    uv_timer_stop(&client->timer);
    uv_close((uv_handle_t *)&client->timer, on_handle_closed);
}

void pl_http_client_close(pl_http_client *client)
{
    if (!client || client->closing)
        return;
    if (client->dispatching) {
        client->close_requested = true;
        return;
    }
    client_close_now(client);
}

const char *pl_http_result_find(const pl_http_client_result *result, const char *name, size_t *len)
{
    size_t nlen = strlen(name);
    for (int pass = 0; pass < 2; pass++) {
        const pl_http_header *h = pass ? result->headers : result->trailers;
        size_t n = pass ? result->n_headers : result->n_trailers;
        /* Trailers first: for gRPC they hold the final word. */
        for (size_t i = 0; i < n; i++) {
            if (h[i].name_len == nlen && strncasecmp(h[i].name, name, nlen) == 0) {
                if (len)
                    *len = h[i].value_len;
                return h[i].value;
            }
        }
    }
    return NULL;
}

int64_t pl_http_parse_retry_after(const char *value, size_t len, uint64_t now_unix_ns)
{
    while (len && isspace((unsigned char)*value)) {
        value++;
        len--;
    }
    while (len && isspace((unsigned char)value[len - 1]))
        len--;
    if (len == 0 || len > 64)
        return -1;
    bool digits = true;
    for (size_t i = 0; i < len; i++)
        if (!isdigit((unsigned char)value[i]))
            digits = false;
    if (digits) {
        if (len > 9) /* over 30 years: treat as garbage */
            return -1;
        int64_t s = 0;
        for (size_t i = 0; i < len; i++)
            s = s * 10 + (value[i] - '0');
        return s * 1000000000LL;
    }
    char text[65];
    memcpy(text, value, len);
    text[len] = 0;
    time_t when = curl_getdate(text, NULL);
    /* A date past 2262 does not fit in int64 nanoseconds: not a real delay. */
    if (when < 0 || when > INT64_MAX / 1000000000LL)
        return -1;
    int64_t when_ns = (int64_t)when * 1000000000LL;
    return when_ns > (int64_t)now_unix_ns ? when_ns - (int64_t)now_unix_ns : 0;
}
