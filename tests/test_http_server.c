/*
 * test_http_server.c: the shared HTTP server over real loopback sockets.
 *
 * The server's loop runs in a thread; each test talks to it with plain
 * blocking sockets (HTTP/1.1) or an nghttp2 client session (HTTP/2), so the
 * bytes on the wire are exactly what a remote client would exchange.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/buf.h"
#include "net/http_server.h"
#include "socket_fixture.h"
#include "testlib.h"

/* ---- the server side ---------------------------------------------------- */

typedef struct seen {
    pthread_mutex_t mu;
    int requests;
    char last_method[16];
    char last_path[128];
    char last_query[128];
    char last_header[128]; /* value of X-Test */
    size_t last_body_len;
    char last_body[256];
    int last_version;
    bool last_too_large;
} seen;

static seen g_seen = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    (void)arg;
    pthread_mutex_lock(&g_seen.mu);
    g_seen.requests++;
    snprintf(g_seen.last_method, sizeof(g_seen.last_method), "%s", req->method);
    snprintf(g_seen.last_path, sizeof(g_seen.last_path), "%s", req->path);
    snprintf(g_seen.last_query, sizeof(g_seen.last_query), "%s", req->query);
    size_t hl;
    const char *h = pl_http_header_get(req, "x-test", &hl);
    snprintf(g_seen.last_header, sizeof(g_seen.last_header), "%.*s", h ? (int)hl : 0, h ? h : "");
    g_seen.last_body_len = req->body_len;
    snprintf(g_seen.last_body, sizeof(g_seen.last_body), "%.*s", (int)req->body_len,
             req->body ? (const char *)req->body : "");
    g_seen.last_version = req->http_version;
    g_seen.last_too_large = req->too_large;
    pthread_mutex_unlock(&g_seen.mu);
    if (req->too_large) {
        pl_http_respond(res, 499, NULL, 0, "big", 3);
        return;
    }
    if (strcmp(req->path, "/fat") == 0) { /* a big answer */
        static char fat[256 * 1024];
        memset(fat, 'f', sizeof(fat));
        pl_http_respond(res, 200, NULL, 0, fat, sizeof(fat));
        return;
    }
    char body[300];
    int n = snprintf(body, sizeof(body), "%s %s %zu", req->method, req->path, req->body_len);
    pl_http_header hdr[] = {{"Content-Type", 12, "text/plain", 10}};
    if (strcmp(req->path, "/grpc") == 0) {
        pl_http_header tr[] = {{"grpc-status", 11, "0", 1}, {"grpc-message", 12, "fine", 4}};
        if (strstr(req->query, "only"))
            pl_http_respond_with_trailers(res, 200, hdr, 1, NULL, 0, tr, 2);
        else
            pl_http_respond_with_trailers(res, 200, hdr, 1, body, (size_t)n, tr, 2);
        return;
    }
    pl_http_respond(res, 200, hdr, 1, body, (size_t)n);
}

typedef struct running {
    uv_loop_t loop;
    uv_async_t stop;
    pl_http_server *server;
    pthread_t thread;
    int port;
} running;

static void on_stop(uv_async_t *a)
{
    running *r = a->data;
    pl_http_server_close(r->server);
    uv_close((uv_handle_t *)a, NULL);
}

static void *loop_thread(void *arg)
{
    running *r = arg;
    uv_run(&r->loop, UV_RUN_DEFAULT);
    return NULL;
}

static int start_server(running *r, const pl_http_server_options *opt)
{
    memset(r, 0, sizeof(*r));
    uv_loop_init(&r->loop);
    pl_err err = {{0}};
    r->server = pl_http_server_start(&r->loop, "127.0.0.1:0", opt, handler, NULL, &err);
    if (!r->server) {
        fprintf(stderr, "start: %s\n", err.msg);
        return -1;
    }
    r->port = pl_http_server_port(r->server);
    uv_async_init(&r->loop, &r->stop, on_stop);
    r->stop.data = r;
    pthread_create(&r->thread, NULL, loop_thread, r);
    pthread_mutex_lock(&g_seen.mu);
    g_seen.requests = 0;
    pthread_mutex_unlock(&g_seen.mu);
    return 0;
}

static void stop_server(running *r)
{
    uv_async_send(&r->stop);
    pthread_join(r->thread, NULL);
    CHECK_EQ_INT(uv_loop_close(&r->loop), 0); /* every handle closed */
}

/* ---- the client side ---------------------------------------------------- */

/* Reads until `want` occurrences of "HTTP/1.1 " status lines with complete
 * bodies arrive, the peer closes, or timeout_ms passes. Returns bytes read;
 * *closed tells whether the server closed. */
static size_t read_some(int fd, char *buf, size_t cap, int timeout_ms, const char *until,
                        int until_count, bool *closed)
{
    size_t len = 0;
    *closed = false;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int rc = poll(&p, 1, timeout_ms);
        if (rc <= 0)
            break;
        ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n <= 0) {
            *closed = true;
            break;
        }
        len += (size_t)n;
        buf[len] = 0;
        if (until) {
            int count = 0;
            for (const char *s = buf; (s = strstr(s, until)); s++)
                count++;
            if (count >= until_count)
                break;
        }
        if (len + 1 >= cap)
            break;
    }
    buf[len] = 0;
    return len;
}

/* start_server, then a connection to it: the socket, or -1. */
static int start_and_connect(running *r, const pl_http_server_options *opt)
{
    return start_server(r, opt) == 0 ? connect_to(r->port) : -1;
}

/* Reads until the server closes the connection (at most timeout_ms): true
 * when it answered with `status` ("HTTP/1.1 431") and closed. */
static bool answered_then_closed(int fd, char *buf, size_t cap, int timeout_ms, const char *status)
{
    bool closed;
    read_some(fd, buf, cap, timeout_ms, NULL, 0, &closed);
    return strstr(buf, status) != NULL && closed;
}

/* answered_then_closed, then the socket closed and the server stopped. */
static bool answered_then_closed_stop(running *r, int fd, int timeout_ms, const char *status)
{
    char buf[4096];
    bool ok = answered_then_closed(fd, buf, sizeof(buf), timeout_ms, status);
    close(fd);
    stop_server(r);
    return ok;
}

/* ---- HTTP/1.1 tests ----------------------------------------------------- */

static void test_keep_alive_two_requests(void)
{
    running r;
    REQUIRE(start_server(&r, NULL) == 0);
    int fd = connect_to(r.port);
    REQUIRE(fd >= 0);
    const char *req1 = "POST /v1/traces?x=1 HTTP/1.1\r\nHost: a\r\nX-Test: hello\r\n"
                       "Content-Length: 5\r\n\r\nabcde";
    send_all(fd, req1, strlen(req1));
    char buf[4096];
    bool closed;
    read_some(fd, buf, sizeof(buf), 2000, "/v1/traces 5", 1, &closed);
    CHECK(strstr(buf, "HTTP/1.1 200 OK") != NULL);
    CHECK(strstr(buf, "Content-Length: 17") != NULL);
    CHECK(!closed);
    pthread_mutex_lock(&g_seen.mu);
    CHECK_EQ_STR(g_seen.last_path, "/v1/traces");
    CHECK_EQ_STR(g_seen.last_query, "x=1");
    CHECK_EQ_STR(g_seen.last_header, "hello");
    CHECK_EQ_STR(g_seen.last_body, "abcde");
    CHECK_EQ_INT(g_seen.last_version, 1);
    pthread_mutex_unlock(&g_seen.mu);
    const char *req2 = "GET /second HTTP/1.1\r\nHost: a\r\n\r\n";
    send_all(fd, req2, strlen(req2));
    read_some(fd, buf, sizeof(buf), 2000, "GET /second 0", 1, &closed);
    CHECK(strstr(buf, "GET /second 0") != NULL);
    pthread_mutex_lock(&g_seen.mu);
    CHECK_EQ_INT(g_seen.requests, 2);
    pthread_mutex_unlock(&g_seen.mu);
    close(fd);
    stop_server(&r);
}

static void test_pipelined_requests_answered_in_order(void)
{
    running r;
    REQUIRE(start_server(&r, NULL) == 0);
    int fd = connect_to(r.port);
    REQUIRE(fd >= 0);
    const char *reqs = "POST /a HTTP/1.1\r\nContent-Length: 1\r\n\r\nx"
                       "POST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nyy"
                       "POST /c HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nzzz"
                       "POST /d HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
    send_all(fd, reqs, strlen(reqs));
    char buf[8192];
    bool closed;
    read_some(fd, buf, sizeof(buf), 2000, NULL, 0, &closed);
    const char *a = strstr(buf, "POST /a 1"), *b = strstr(buf, "POST /b 2"),
               *c = strstr(buf, "POST /c 3");
    CHECK(a && b && c && a < b && b < c);
    CHECK(strstr(buf, "POST /d") == NULL); /* after Connection: close */
    CHECK(closed);
    close(fd);
    stop_server(&r);
}

static void test_chunked_body(void)
{
    running r;
    REQUIRE(start_server(&r, NULL) == 0);
    int fd = connect_to(r.port);
    REQUIRE(fd >= 0);
    const char *req = "POST /chunk HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n";
    /* byte by byte: every parser callback sees split input */
    for (size_t i = 0; i < strlen(req); i++) {
        send_all(fd, req + i, 1);
        if (i % 7 == 0)
            usleep(200);
    }
    char buf[4096];
    bool closed;
    read_some(fd, buf, sizeof(buf), 2000, "/chunk 7", 1, &closed);
    CHECK(strstr(buf, "200 OK") != NULL);
    pthread_mutex_lock(&g_seen.mu);
    CHECK_EQ_STR(g_seen.last_body, "abcdefg");
    pthread_mutex_unlock(&g_seen.mu);
    close(fd);
    stop_server(&r);
}

static void test_expect_100_continue(void)
{
    running r;
    REQUIRE(start_server(&r, NULL) == 0);
    int fd = connect_to(r.port);
    REQUIRE(fd >= 0);
    const char *head = "POST /e HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n";
    send_all(fd, head, strlen(head));
    char buf[4096];
    bool closed;
    read_some(fd, buf, sizeof(buf), 2000, "100 Continue", 1, &closed);
    CHECK(strstr(buf, "HTTP/1.1 100 Continue\r\n\r\n") != NULL);
    send_all(fd, "body", 4);
    read_some(fd, buf, sizeof(buf), 2000, "/e 4", 1, &closed);
    CHECK(strstr(buf, "200 OK") != NULL);
    close(fd);
    stop_server(&r);
}

static void test_oversize_body_gets_413_and_close(void)
{
    pl_http_server_options opt = {.max_body_size = 100};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    /* declared length over the limit: answered before the body is sent */
    int fd = connect_to(r.port);
    REQUIRE(fd >= 0);
    const char *req = "POST /big HTTP/1.1\r\nContent-Length: 1000\r\n\r\n";
    send_all(fd, req, strlen(req));
    char buf[4096];
    CHECK(answered_then_closed(fd, buf, sizeof(buf), 2000, "HTTP/1.1 413"));
    close(fd);
    /* chunked: discovered while receiving */
    fd = connect_to(r.port);
    REQUIRE(fd >= 0);
    const char *creq = "POST /big HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    send_all(fd, creq, strlen(creq));
    char chunk[80];
    for (int i = 0; i < 3; i++) {
        snprintf(chunk, sizeof(chunk), "28\r\n%040d\r\n", i);
        send_all(fd, chunk, strlen(chunk));
    }
    CHECK(answered_then_closed(fd, buf, sizeof(buf), 2000, "HTTP/1.1 413"));
    close(fd);
    pthread_mutex_lock(&g_seen.mu);
    CHECK_EQ_INT(g_seen.requests, 0); /* the handler never saw them */
    pthread_mutex_unlock(&g_seen.mu);
    stop_server(&r);
}

static void test_oversize_delivered_to_handler_when_asked(void)
{
    pl_http_server_options opt = {.max_body_size = 10, .deliver_too_large = true};
    running r;
    int fd = start_and_connect(&r, &opt);
    REQUIRE(fd >= 0);
    const char *req = "POST /big HTTP/1.1\r\nContent-Length: 11\r\n\r\n01234567890";
    send_all(fd, req, strlen(req));
    char buf[4096];
    CHECK(answered_then_closed(fd, buf, sizeof(buf), 2000, "HTTP/1.1 499"));
    pthread_mutex_lock(&g_seen.mu);
    CHECK(g_seen.last_too_large);
    CHECK_EQ_STR(g_seen.last_path, "/big");
    pthread_mutex_unlock(&g_seen.mu);
    close(fd);
    stop_server(&r);
}

static void test_header_too_large_gets_431(void)
{
    pl_http_server_options opt = {.max_header_size = 200};
    running r;
    int fd = start_and_connect(&r, &opt);
    REQUIRE(fd >= 0);
    char req[1024];
    snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nX-Big: %0400d\r\n\r\n", 7);
    send_all(fd, req, strlen(req));
    CHECK(answered_then_closed_stop(&r, fd, 2000, "HTTP/1.1 431"));
}

static void test_slow_headers_get_408(void)
{
    pl_http_server_options opt = {.header_timeout_ms = 300, .idle_timeout_ms = 5000};
    running r;
    int fd = start_and_connect(&r, &opt);
    REQUIRE(fd >= 0);
    /* trickle bytes: the deadline counts from the first one (slow-loris) */
    const char *part = "POST /slow HTTP/1.1\r\nX-A: 1\r\n";
    for (size_t i = 0; i < strlen(part); i++) {
        send_all(fd, part + i, 1);
        usleep(20000);
    }
    CHECK(answered_then_closed_stop(&r, fd, 3000, "HTTP/1.1 408"));
}

static void test_idle_keep_alive_closed(void)
{
    pl_http_server_options opt = {.header_timeout_ms = 5000, .idle_timeout_ms = 200};
    running r;
    int fd = start_and_connect(&r, &opt);
    REQUIRE(fd >= 0);
    const char *req = "GET /x HTTP/1.1\r\n\r\n";
    send_all(fd, req, strlen(req));
    char buf[4096];
    bool closed;
    read_some(fd, buf, sizeof(buf), 2000, "GET /x 0", 1, &closed);
    CHECK(!closed);
    struct timeval t0, t1;
    gettimeofday(&t0, NULL);
    read_some(fd, buf, sizeof(buf), 3000, NULL, 0, &closed);
    gettimeofday(&t1, NULL);
    CHECK(closed);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_usec - t0.tv_usec) / 1000;
    CHECK(ms >= 100 && ms < 2000);
    CHECK_EQ_INT(strlen(buf), 0); /* no 408 for an idle connection */
    close(fd);
    stop_server(&r);
}

static void test_garbage_only_hurts_its_connection(void)
{
    running r;
    REQUIRE(start_server(&r, NULL) == 0);
    int good = connect_to(r.port);
    int bad = connect_to(r.port);
    REQUIRE(good >= 0 && bad >= 0);
    /* half a request on the good connection */
    const char *h = "POST /good HTTP/1.1\r\nContent-Length: 3\r\n\r\n";
    send_all(good, h, strlen(h));
    const char garbage[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http\r\n\r\n";
    send_all(bad, garbage, sizeof(garbage) - 1);
    char buf[4096];
    bool closed;
    CHECK(answered_then_closed(bad, buf, sizeof(buf), 2000, "HTTP/1.1 400"));
    close(bad);
    /* a client that disconnects mid-body */
    int gone = connect_to(r.port);
    const char *part = "POST /gone HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc";
    send_all(gone, part, strlen(part));
    close(gone);
    send_all(good, "end", 3);
    read_some(good, buf, sizeof(buf), 2000, "/good 3", 1, &closed);
    CHECK(strstr(buf, "200 OK") != NULL);
    CHECK(!closed);
    close(good);
    stop_server(&r);
}

static void test_peer_not_reading_is_paused(void)
{
    running r;
    REQUIRE(start_server(&r, NULL) == 0);
    int fd = connect_to(r.port);
    REQUIRE(fd >= 0);
    /* 100 pipelined requests whose answers total 25 MiB, nothing read */
    const char *one = "GET /fat HTTP/1.1\r\n\r\n";
    char reqs[100 * 32];
    size_t len = 0;
    for (int i = 0; i < 100; i++)
        len += (size_t)snprintf(reqs + len, sizeof(reqs) - len, "%s", one);
    send_all(fd, reqs, len);
    usleep(500000);
    pthread_mutex_lock(&g_seen.mu);
    int handled = g_seen.requests;
    pthread_mutex_unlock(&g_seen.mu);
    CHECK(handled < 100); /* the server stopped taking requests */
    /* reading catches up: every answer arrives */
    size_t want = 100 * (256 * 1024), got = 0;
    static char buf[1 << 16];
    for (int idle = 0; idle < 100 && got < want;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) {
            idle++;
            continue;
        }
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    CHECK(got > want); /* bodies plus headers */
    pthread_mutex_lock(&g_seen.mu);
    CHECK_EQ_INT(g_seen.requests, 100);
    pthread_mutex_unlock(&g_seen.mu);
    close(fd);
    stop_server(&r);
}

static void test_buffered_bytes_budget(void)
{
    pl_http_server_options opt = {.max_buffered_bytes = 1000};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    char part[700];
    memset(part, 'p', sizeof(part));
    int a = connect_to(r.port), b = connect_to(r.port);
    REQUIRE(a >= 0 && b >= 0);
    const char *head = "POST /a HTTP/1.1\r\nContent-Length: 800\r\n\r\n";
    send_all(a, head, strlen(head));
    send_all(a, part, 600);
    usleep(100000);
    send_all(b, head, strlen(head));
    send_all(b, part, 600);
    char buf[4096];
    bool closed;
    read_some(b, buf, sizeof(buf), 2000, NULL, 0, &closed);
    CHECK(strstr(buf, "HTTP/1.1 503") != NULL);
    CHECK(strstr(buf, "Retry-After: 1") != NULL);
    CHECK(closed);
    close(b);
    /* the first request finishes normally, then its bytes are given back */
    send_all(a, part, 200);
    read_some(a, buf, sizeof(buf), 2000, "/a 800", 1, &closed);
    CHECK(strstr(buf, "200 OK") != NULL);
    int c = connect_to(r.port);
    send_all(c, head, strlen(head));
    send_all(c, part, 600);
    send_all(c, part, 200);
    read_some(c, buf, sizeof(buf), 2000, "/a 800", 1, &closed);
    CHECK(strstr(buf, "200 OK") != NULL);
    close(a);
    close(c);
    stop_server(&r);
}

static void test_max_connections(void)
{
    pl_http_server_options opt = {.max_connections = 2};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    int a = connect_to(r.port), b = connect_to(r.port);
    usleep(100000);
    int c = connect_to(r.port);
    REQUIRE(a >= 0 && b >= 0 && c >= 0);
    char buf[1024];
    bool closed;
    read_some(c, buf, sizeof(buf), 2000, NULL, 0, &closed);
    CHECK(closed);
    close(c);
    const char *req = "GET /ok HTTP/1.1\r\n\r\n";
    send_all(a, req, strlen(req));
    read_some(a, buf, sizeof(buf), 2000, "GET /ok 0", 1, &closed);
    CHECK(strstr(buf, "200 OK") != NULL);
    close(a);
    close(b);
    usleep(100000);
    /* slots are given back */
    int d = connect_to(r.port);
    send_all(d, req, strlen(req));
    read_some(d, buf, sizeof(buf), 2000, "GET /ok 0", 1, &closed);
    CHECK(strstr(buf, "200 OK") != NULL);
    close(d);
    stop_server(&r);
}

static void test_close_with_open_connections(void)
{
    running r;
    REQUIRE(start_server(&r, NULL) == 0);
    int a = connect_to(r.port);
    const char *part = "POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nab";
    send_all(a, part, strlen(part));
    usleep(50000);
    stop_server(&r); /* checks the loop has no handle left */
    char buf[256];
    bool closed;
    read_some(a, buf, sizeof(buf), 2000, NULL, 0, &closed);
    CHECK(closed);
    close(a);
}

static void test_bind_error(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    pl_err err = {{0}};
    pl_http_server *s = pl_http_server_start(&loop, "127.0.0.1:0", NULL, handler, NULL, &err);
    REQUIRE(s != NULL);
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", pl_http_server_port(s));
    pl_http_server *s2 = pl_http_server_start(&loop, ep, NULL, handler, NULL, &err);
    CHECK(s2 == NULL);
    CHECK(strstr(err.msg, "in use") != NULL);
    CHECK(pl_http_server_start(&loop, "nonsense", NULL, handler, NULL, &err) == NULL);
    pl_http_server_close(s);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* ---- HTTP/2 tests ------------------------------------------------------- */

typedef struct h2_result {
    int32_t id;
    int status;
    char body[512];
    size_t body_len;
    char grpc_status[8];
    bool trailers_seen;
    bool closed;
    uint32_t error_code;
} h2_result;

typedef struct h2_client {
    int fd;
    h2_result results[64];
    int n;
    const uint8_t *upload;
    size_t upload_len;
} h2_client;

static h2_result *h2_find(h2_client *cl, int32_t id)
{
    for (int i = 0; i < cl->n; i++)
        if (cl->results[i].id == id)
            return &cl->results[i];
    return NULL;
}

static ssize_t h2c_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *u)
{
    h2_client *cl = u;
    send_all(cl->fd, data, len);
    return (ssize_t)len;
}

static int h2c_on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                         const uint8_t *value, size_t vl, uint8_t flags, void *u)
{
    h2_result *r = h2_find(u, f->hd.stream_id);
    if (!r)
        return 0;
    if (nl == 7 && memcmp(name, ":status", 7) == 0)
        r->status = atoi((const char *)value);
    if (nl == 11 && memcmp(name, "grpc-status", 11) == 0) {
        snprintf(r->grpc_status, sizeof(r->grpc_status), "%.*s", (int)vl, value);
        r->trailers_seen = true;
    }
    return 0;
}

static int h2c_on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                       size_t len, void *u)
{
    h2_result *r = h2_find(u, id);
    if (r && r->body_len + len < sizeof(r->body)) {
        memcpy(r->body + r->body_len, data, len);
        r->body_len += len;
    }
    return 0;
}

static int h2c_on_close(nghttp2_session *s, int32_t id, uint32_t error_code, void *u)
{
    h2_result *r = h2_find(u, id);
    if (r) {
        r->closed = true;
        r->error_code = error_code;
    }
    return 0;
}

typedef struct upload_src {
    const uint8_t *data;
    size_t len, off;
} upload_src;

static ssize_t h2c_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                        uint32_t *flags, nghttp2_data_source *src, void *u)
{
    upload_src *up = src->ptr;
    size_t n = up->len - up->off < length ? up->len - up->off : length;
    memcpy(buf, up->data + up->off, n);
    up->off += n;
    if (up->off == up->len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* Extra header fields h2_run adds to each request: h2_extra_n fields named
 * "x-fNNN" with a value of h2_extra_len 'v's. */
static int h2_extra_n;
static size_t h2_extra_len;

/* A client session on a new connection to `port` (cl->fd is -1 when it
 * could not connect), its SETTINGS queued. */
static nghttp2_session *h2_open(int port, h2_client *cl)
{
    memset(cl, 0, sizeof(*cl));
    cl->fd = connect_to(port);
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, h2c_send);
    nghttp2_session_callbacks_set_on_header_callback(cb, h2c_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2c_on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2c_on_close);
    nghttp2_session *s;
    nghttp2_session_client_new(&s, cb, cl);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL, 0);
    return s;
}

/* Sends n_req POSTs to `path` on one connection (concurrently) and waits
 * for all of them to close. */
static int h2_run(int port, const char *path, const uint8_t *body, size_t body_len, int n_req,
                  h2_client *cl)
{
    nghttp2_session *s = h2_open(port, cl);
    if (cl->fd < 0) {
        nghttp2_session_del(s);
        return -1;
    }
    upload_src ups[64];
    for (int i = 0; i < n_req; i++) {
        nghttp2_nv nv[] = {
            {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
            {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
            {(uint8_t *)":authority", (uint8_t *)"localhost", 10, 9, 0},
            {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
            {(uint8_t *)"x-test", (uint8_t *)"h2", 6, 2, 0},
        };
        ups[i] = (upload_src){body, body_len, 0};
        nghttp2_data_provider dp = {.source.ptr = &ups[i], .read_callback = h2c_read};
        nghttp2_nv *all = calloc(5 + (size_t)h2_extra_n, sizeof(*all));
        static char names[1024][8];
        static char value[4096];
        memset(value, 'v', sizeof(value));
        memcpy(all, nv, sizeof(nv));
        for (int k = 0; k < h2_extra_n && k < 1024; k++) {
            snprintf(names[k], sizeof(names[k]), "x-f%03d", k);
            all[5 + k] = (nghttp2_nv){(uint8_t *)names[k], (uint8_t *)value, strlen(names[k]),
                                      h2_extra_len, 0};
        }
        int32_t id = nghttp2_submit_request(s, NULL, all, 5 + (size_t)h2_extra_n, &dp, NULL);
        free(all);
        cl->results[cl->n++].id = id;
    }
    nghttp2_session_send(s);
    int done = 0;
    for (int iter = 0; iter < 500 && done < n_req; iter++) {
        struct pollfd p = {cl->fd, POLLIN, 0};
        if (poll(&p, 1, 20) > 0) {
            uint8_t buf[16384];
            ssize_t n = recv(cl->fd, buf, sizeof(buf), 0);
            if (n <= 0)
                break;
            nghttp2_session_mem_recv(s, buf, (size_t)n);
        }
        nghttp2_session_send(s);
        done = 0;
        for (int i = 0; i < cl->n; i++)
            done += cl->results[i].closed;
    }
    nghttp2_session_del(s);
    close(cl->fd);
    return done;
}

/* One request on its own HTTP/2 connection: the answer's status, or -1. */
static int h2_status(int port, const char *path, const uint8_t *body, size_t len)
{
    h2_client cl;
    return h2_run(port, path, body, len, 1, &cl) == 1 ? cl.results[0].status : -1;
}

static void test_h2_concurrent_streams(void)
{
    pl_http_server_options opt = {.h2c = true, .http1 = true};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    h2_client cl;
    int done = h2_run(r.port, "/h2path?q=1", (const uint8_t *)"hello", 5, 20, &cl);
    CHECK_EQ_INT(done, 20);
    for (int i = 0; i < cl.n; i++) {
        CHECK_EQ_INT(cl.results[i].status, 200);
        CHECK_EQ_BYTES(cl.results[i].body, cl.results[i].body_len, "POST /h2path 5", 14);
    }
    pthread_mutex_lock(&g_seen.mu);
    CHECK_EQ_INT(g_seen.requests, 20);
    CHECK_EQ_INT(g_seen.last_version, 2);
    CHECK_EQ_STR(g_seen.last_query, "q=1");
    CHECK_EQ_STR(g_seen.last_header, "h2");
    pthread_mutex_unlock(&g_seen.mu);
    /* HTTP/1.1 still works on the same port */
    int fd = connect_to(r.port);
    const char *req = "GET /one HTTP/1.1\r\n\r\n";
    send_all(fd, req, strlen(req));
    char buf[1024];
    bool closed;
    read_some(fd, buf, sizeof(buf), 2000, "GET /one 0", 1, &closed);
    CHECK(strstr(buf, "200 OK") != NULL);
    close(fd);
    stop_server(&r);
}

static void test_h2_large_body_flow_control(void)
{
    pl_http_server_options opt = {.h2c = true};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    size_t len = 3 * 1024 * 1024; /* over the initial 64 KiB client window */
    uint8_t *big = malloc(len);
    memset(big, 'z', len);
    h2_client cl;
    int done = h2_run(r.port, "/big", big, len, 2, &cl);
    CHECK_EQ_INT(done, 2);
    CHECK_EQ_INT(cl.results[0].status, 200);
    CHECK_EQ_BYTES(cl.results[0].body, cl.results[0].body_len, "POST /big 3145728", 17);
    free(big);
    stop_server(&r);
}

static void test_h2_trailers_and_trailers_only(void)
{
    pl_http_server_options opt = {.h2c = true};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    h2_client cl;
    CHECK_EQ_INT(h2_run(r.port, "/grpc", (const uint8_t *)"x", 1, 1, &cl), 1);
    CHECK(cl.results[0].trailers_seen);
    CHECK_EQ_STR(cl.results[0].grpc_status, "0");
    CHECK_EQ_BYTES(cl.results[0].body, cl.results[0].body_len, "POST /grpc 1", 12);
    CHECK_EQ_INT(h2_run(r.port, "/grpc?only", (const uint8_t *)"x", 1, 1, &cl), 1);
    CHECK(cl.results[0].trailers_seen);
    CHECK_EQ_INT(cl.results[0].body_len, 0);
    CHECK_EQ_INT(cl.results[0].status, 200);
    stop_server(&r);
}

static void test_h2_oversize_stream(void)
{
    pl_http_server_options opt = {.h2c = true, .max_body_size = 1000};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    uint8_t big[5000];
    memset(big, 'q', sizeof(big));
    CHECK_EQ_INT(h2_status(r.port, "/big", big, sizeof(big)), 413);
    /* the connection keeps working for small requests */
    CHECK_EQ_INT(h2_status(r.port, "/small", big, 10), 200);
    stop_server(&r);
}

static void test_h2_buffered_bytes_budget(void)
{
    pl_http_server_options opt = {.h2c = true, .max_buffered_bytes = 1000};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    uint8_t big[3000];
    memset(big, 'b', sizeof(big));
    h2_client cl;
    CHECK_EQ_INT(h2_run(r.port, "/big", big, sizeof(big), 1, &cl), 1);
    CHECK_EQ_INT(cl.results[0].error_code, NGHTTP2_REFUSED_STREAM); /* retryable */
    CHECK_EQ_INT(h2_status(r.port, "/small", big, 500), 200);
    stop_server(&r);
}

static void test_h2_garbage_after_preface(void)
{
    pl_http_server_options opt = {.h2c = true};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    int fd = connect_to(r.port);
    send_all(fd, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
    send_all(fd, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff garbage garbage", 26);
    char buf[1024];
    bool closed;
    read_some(fd, buf, sizeof(buf), 2000, NULL, 0, &closed);
    CHECK(closed);
    close(fd);
    CHECK_EQ_INT(h2_status(r.port, "/ok", (const uint8_t *)"a", 1), 200);
    stop_server(&r);
}

static ssize_t h2c_read_deferred(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                                 uint32_t *flags, nghttp2_data_source *src, void *u)
{
    return NGHTTP2_ERR_DEFERRED; /* a body that never comes */
}

static int32_t h2_submit(nghttp2_session *s, h2_client *cl, const char *path, upload_src *up,
                         bool never_finish)
{
    nghttp2_nv nv[] = {
        {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
        {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
        {(uint8_t *)":authority", (uint8_t *)"localhost", 10, 9, 0},
        {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
    };
    nghttp2_data_provider dp = {.source.ptr = up,
                                .read_callback = never_finish ? h2c_read_deferred : h2c_read};
    int32_t id = nghttp2_submit_request(s, NULL, nv, 4, &dp, NULL);
    cl->results[cl->n++].id = id;
    return id;
}

/* Runs the client session for `ms` or until `until_closed` (if >0) closes. */
static void h2_pump(nghttp2_session *s, h2_client *cl, int ms, int32_t until_closed)
{
    for (int waited = 0; waited < ms; waited += 10) {
        nghttp2_session_send(s);
        struct pollfd p = {cl->fd, POLLIN, 0};
        if (poll(&p, 1, 10) > 0) {
            uint8_t buf[16384];
            ssize_t n = recv(cl->fd, buf, sizeof(buf), 0);
            if (n <= 0)
                return;
            nghttp2_session_mem_recv(s, buf, (size_t)n);
        }
        h2_result *r = until_closed > 0 ? h2_find(cl, until_closed) : NULL;
        if (r && r->closed)
            return;
    }
}

static void test_h2_slow_stream_reset_alone(void)
{
    pl_http_server_options opt = {.h2c = true, .header_timeout_ms = 300, .idle_timeout_ms = 5000};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    h2_client cl;
    nghttp2_session *s = h2_open(r.port, &cl);
    upload_src up1 = {(const uint8_t *)"abc", 3, 0}, up2 = up1, up3 = up1;
    int32_t slow = h2_submit(s, &cl, "/slow", &up1, true);
    int32_t quick = h2_submit(s, &cl, "/quick", &up2, false);
    h2_pump(s, &cl, 2000, quick);
    CHECK_EQ_INT(h2_find(&cl, quick)->status, 200);
    CHECK(!h2_find(&cl, slow)->closed);
    /* keep the connection busy past the slow stream's deadline */
    h2_pump(s, &cl, 1500, slow);
    CHECK(h2_find(&cl, slow)->closed);
    CHECK_EQ_INT(h2_find(&cl, slow)->error_code, NGHTTP2_CANCEL);
    /* the connection itself still serves */
    int32_t later = h2_submit(s, &cl, "/later", &up3, false);
    h2_pump(s, &cl, 2000, later);
    CHECK_EQ_INT(h2_find(&cl, later)->status, 200);
    nghttp2_session_del(s);
    close(cl.fd);
    stop_server(&r);
}

static ssize_t h2c_read_when_ready(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                                   uint32_t *flags, nghttp2_data_source *src, void *u)
{
    upload_src *up = src->ptr;
    if (up->off == SIZE_MAX)
        return NGHTTP2_ERR_DEFERRED;
    return h2c_read(s, id, buf, length, flags, src, u);
}

static void test_h2_busy_connection_outlives_header_timeout(void)
{
    /* Calls overlap for 2 s (some stream is always open), each finishing
     * about 100 ms after it started: an 800 ms header_timeout (shorter
     * than the connection's busy time, 8 times a call's) must not reset
     * anything. */
    pl_http_server_options opt = {.h2c = true, .header_timeout_ms = 800, .idle_timeout_ms = 5000};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    h2_client cl;
    nghttp2_session *s = h2_open(r.port, &cl);
    enum { N = 20 };
    upload_src ups[N];
    int32_t ids[N];
    for (int i = 0; i < N; i++) {
        ups[i] = (upload_src){(const uint8_t *)"abc", 3, SIZE_MAX}; /* not ready yet */
        nghttp2_nv nv[] = {
            {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
            {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
            {(uint8_t *)":authority", (uint8_t *)"localhost", 10, 9, 0},
            {(uint8_t *)":path", (uint8_t *)"/overlap", 5, 8, 0},
        };
        nghttp2_data_provider dp = {.source.ptr = &ups[i], .read_callback = h2c_read_when_ready};
        ids[i] = nghttp2_submit_request(s, NULL, nv, 4, &dp, NULL);
        cl.results[cl.n++].id = ids[i];
        h2_pump(s, &cl, 100, 0);
        if (i >= 1) { /* finish the previous call, 100 ms after it started */
            ups[i - 1].off = 0;
            nghttp2_session_resume_data(s, ids[i - 1]);
        }
    }
    ups[N - 1].off = 0;
    nghttp2_session_resume_data(s, ids[N - 1]);
    h2_pump(s, &cl, 1000, ids[N - 1]);
    int ok = 0;
    for (int i = 0; i < N; i++)
        ok += h2_find(&cl, ids[i])->status == 200;
    CHECK_EQ_INT(ok, N);
    nghttp2_session_del(s);
    close(cl.fd);
    stop_server(&r);
}

static void test_h2_idle_connection_closed(void)
{
    pl_http_server_options opt = {.h2c = true, .idle_timeout_ms = 200};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    h2_client cl;
    nghttp2_session *s = h2_open(r.port, &cl);
    upload_src up = {(const uint8_t *)"abc", 3, 0};
    int32_t id = h2_submit(s, &cl, "/x", &up, false);
    h2_pump(s, &cl, 2000, id);
    CHECK_EQ_INT(h2_find(&cl, id)->status, 200);
    /* then nothing: the server says GOAWAY and closes */
    char buf[256];
    bool closed = false;
    read_some(cl.fd, buf, sizeof(buf), 3000, NULL, 0, &closed);
    CHECK(closed);
    nghttp2_session_del(s);
    close(cl.fd);
    stop_server(&r);
}

/* ---- socketless driving ------------------------------------------------- */

/* M1: header fields cost name + value + 32 bytes (RFC 9113 6.5.2), and
 * their number is limited, on HTTP/2 and HTTP/1.1 alike. */
static void test_header_field_accounting(void)
{
    pl_http_server_options opt = {
        .h2c = true, .http1 = true, .max_header_size = 4096, .max_header_fields = 150};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    h2_client cl;
    /* 100 fields of 6 + 4 bytes: 1000 bytes of text, 4200 as counted */
    h2_extra_n = 100, h2_extra_len = 4;
    CHECK_EQ_INT(h2_run(r.port, "/h", (const uint8_t *)"x", 1, 1, &cl), 1);
    CHECK_EQ_INT(cl.results[0].status, 0);
    CHECK(cl.results[0].error_code != 0); /* the stream was reset */
    /* 80 such fields fit (80 * 42 + pseudo-headers < 4096) */
    h2_extra_n = 80;
    CHECK_EQ_INT(h2_status(r.port, "/h", (const uint8_t *)"x", 1), 200);
    h2_extra_n = 0;
    stop_server(&r);

    /* the field count on its own */
    pl_http_server_options few = {.h2c = true, .http1 = true, .max_header_fields = 20};
    REQUIRE(start_server(&r, &few) == 0);
    h2_extra_n = 30, h2_extra_len = 1;
    CHECK_EQ_INT(h2_status(r.port, "/h", (const uint8_t *)"x", 1), 0);
    h2_extra_n = 10;
    CHECK_EQ_INT(h2_status(r.port, "/h", (const uint8_t *)"x", 1), 200);
    h2_extra_n = 0;
    /* HTTP/1.1: 431 past the field count */
    char req[4096];
    size_t len = (size_t)snprintf(req, sizeof(req), "GET /many HTTP/1.1\r\n");
    for (int i = 0; i < 30; i++)
        len += (size_t)snprintf(req + len, sizeof(req) - len, "x-%d: 1\r\n", i);
    len += (size_t)snprintf(req + len, sizeof(req) - len, "\r\n");
    int fd = connect_to(r.port);
    send_all(fd, req, len);
    char buf[2048];
    bool closed;
    read_some(fd, buf, sizeof(buf), 2000, NULL, 0, &closed);
    CHECK(strstr(buf, "HTTP/1.1 431") != NULL);
    CHECK(strstr(buf, "too many header fields") != NULL);
    close(fd);
    stop_server(&r);
}

/* Connects from a given loopback source address (another "client"). */
static int connect_from(const char *src, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &a.sin_addr);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (connect(fd, (struct sockaddr *)&to, sizeof(to)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool answers(int fd)
{
    const char *req = "GET /ok HTTP/1.1\r\n\r\n";
    send_all(fd, req, strlen(req));
    char buf[1024];
    bool closed;
    read_some(fd, buf, sizeof(buf), 2000, "GET /ok 0", 1, &closed);
    return strstr(buf, "200 OK") != NULL;
}

/* L1: one client's idle connections do not lock others out. */
static void test_connection_fair_share(void)
{
    pl_http_server_options opt = {.max_connections = 6, .max_connections_per_client = 4};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    int a[5];
    for (int i = 0; i < 5; i++)
        a[i] = connect_from("127.0.0.1", r.port);
    usleep(100000);
    char buf[256];
    bool closed;
    /* the fifth from the same client is over its share */
    read_some(a[4], buf, sizeof(buf), 1000, NULL, 0, &closed);
    CHECK(closed);
    /* another client fills the server, then a third one still gets in: the
     * client with the most connections gives up an idle one */
    int b[2] = {connect_from("127.0.0.2", r.port), connect_from("127.0.0.2", r.port)};
    REQUIRE(b[0] >= 0 && b[1] >= 0);
    usleep(100000);
    int c = connect_from("127.0.0.3", r.port);
    REQUIRE(c >= 0);
    CHECK(answers(c));
    CHECK(answers(b[0]));
    int alive = 0;
    for (int i = 0; i < 4; i++) {
        read_some(a[i], buf, sizeof(buf), 100, NULL, 0, &closed);
        alive += !closed;
    }
    CHECK_EQ_INT(alive, 3); /* one of client a's idle connections went */
    for (int i = 0; i < 5; i++)
        close(a[i]);
    close(b[0]);
    close(b[1]);
    close(c);
    stop_server(&r);
}

/* L1: one client's unfinished uploads take at most its share of the
 * buffering budget; another client still gets through. */
static void test_buffered_bytes_fair_share(void)
{
    pl_http_server_options opt = {.max_buffered_bytes = 1 << 20,
                                  .max_buffered_bytes_per_client = 300000};
    running r;
    REQUIRE(start_server(&r, &opt) == 0);
    static char part[250000];
    memset(part, 'p', sizeof(part));
    int a1 = connect_from("127.0.0.1", r.port), a2 = connect_from("127.0.0.1", r.port);
    int b = connect_from("127.0.0.2", r.port);
    REQUIRE(a1 >= 0 && a2 >= 0 && b >= 0);
    const char *head = "POST /up HTTP/1.1\r\nContent-Length: 250001\r\n\r\n";
    send_all(a1, head, strlen(head));
    send_all(a1, part, sizeof(part)); /* one byte short: held */
    usleep(100000);
    send_all(a2, head, strlen(head));
    send_all(a2, part, 100000);
    char buf[4096];
    bool closed;
    read_some(a2, buf, sizeof(buf), 2000, NULL, 0, &closed);
    CHECK(strstr(buf, "HTTP/1.1 503") != NULL); /* over client a's share */
    send_all(b, head, strlen(head));
    send_all(b, part, sizeof(part));
    send_all(b, "p", 1);
    read_some(b, buf, sizeof(buf), 2000, "/up 250001", 1, &closed);
    CHECK(strstr(buf, "200 OK") != NULL); /* client b is served */
    send_all(a1, "p", 1);
    read_some(a1, buf, sizeof(buf), 2000, "/up 250001", 1, &closed);
    CHECK(strstr(buf, "200 OK") != NULL);
    close(a1);
    close(a2);
    close(b);
    stop_server(&r);
}

static void test_feed_from_memory(void)
{
    const char *req = "POST /m HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
                      "POST /n HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n";
    pl_buf out;
    pl_buf_init(&out);
    int closed =
        pl_http_server_feed(NULL, handler, NULL, (const uint8_t *)req, strlen(req), 3, &out);
    CHECK_EQ_INT(closed, 0);
    pl_buf_append_byte(&out, 0);
    CHECK(strstr((char *)out.data, "POST /m 2") != NULL);
    CHECK(strstr((char *)out.data, "POST /n 1") != NULL);
    pl_buf_reset(&out);
    closed =
        pl_http_server_feed(NULL, handler, NULL, (const uint8_t *)"\x00\x01garbage", 9, 0, &out);
    CHECK_EQ_INT(closed, 1);
    pl_buf_append_byte(&out, 0);
    CHECK(strstr((char *)out.data, "400") != NULL);
    pl_buf_free(&out);
}

int main(void)
{
    /* as the service does (pipeline/service.c): a peer that closed first is
     * an error return on the write, not a signal */
    signal(SIGPIPE, SIG_IGN);
    PL_RUN(test_keep_alive_two_requests);
    PL_RUN(test_pipelined_requests_answered_in_order);
    PL_RUN(test_chunked_body);
    PL_RUN(test_expect_100_continue);
    PL_RUN(test_oversize_body_gets_413_and_close);
    PL_RUN(test_oversize_delivered_to_handler_when_asked);
    PL_RUN(test_header_too_large_gets_431);
    PL_RUN(test_slow_headers_get_408);
    PL_RUN(test_idle_keep_alive_closed);
    PL_RUN(test_garbage_only_hurts_its_connection);
    PL_RUN(test_peer_not_reading_is_paused);
    PL_RUN(test_buffered_bytes_budget);
    PL_RUN(test_max_connections);
    PL_RUN(test_close_with_open_connections);
    PL_RUN(test_bind_error);
    PL_RUN(test_h2_concurrent_streams);
    PL_RUN(test_h2_large_body_flow_control);
    PL_RUN(test_h2_trailers_and_trailers_only);
    PL_RUN(test_h2_oversize_stream);
    PL_RUN(test_h2_buffered_bytes_budget);
    PL_RUN(test_h2_garbage_after_preface);
    PL_RUN(test_h2_slow_stream_reset_alone);
    PL_RUN(test_h2_busy_connection_outlives_header_timeout);
    PL_RUN(test_h2_idle_connection_closed);
    PL_RUN(test_header_field_accounting);
    PL_RUN(test_connection_fair_share);
    PL_RUN(test_buffered_bytes_fair_share);
    PL_RUN(test_feed_from_memory);
    return pl_test_done();
}
