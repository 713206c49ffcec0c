/*
 * test_http_client.c: the exporters' HTTP client (net/http_client.c)
 * against servers the test starts on the same loop: proflink's own HTTP
 * server (HTTP/1.1, h2c, TLS and mutual TLS with certificates made at run
 * time) and a TCP listener that never answers (timeouts, cancelling).
 * Checked: what reaches the server (method, headers, body), what the
 * callback gets (status, headers, trailers, a capped body), transport
 * errors, and that the callback runs exactly once and never inside send;
 * also the refusals of a listener with an authenticator, as the client
 * sees them.
 */
#include <curl/curl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "extensions/auth.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "net/tls.h"
#include "ext_fixture.h"
#include "loop_fixture.h"
#include "pki_fixture.h"
#include "socket_fixture.h"
#include "testlib.h"

static pki P;

/* ---- the server side ----------------------------------------------------- */

typedef struct seen_request {
    int count;
    int http_version;
    char method[16];
    char path[64];
    char query[64];
    char x_test[64];
    char user_agent[64];
    bool has_expect;
    char body[128];
    size_t body_len;
    bool tls;
    char tls_peer[64];
    size_t answer_size; /* > 0: answer with this many bytes of 'x' */
} seen_request;

static void copy_header(const pl_http_request *req, const char *name, char *out, size_t cap)
{
    size_t len = 0;
    const char *v = pl_http_header_get(req, name, &len);
    snprintf(out, cap, "%.*s", v ? (int)len : 0, v ? v : "");
}

static void handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    seen_request *s = arg;
    s->count++;
    s->http_version = req->http_version;
    snprintf(s->method, sizeof(s->method), "%s", req->method);
    snprintf(s->path, sizeof(s->path), "%s", req->path);
    snprintf(s->query, sizeof(s->query), "%s", req->query);
    copy_header(req, "x-test", s->x_test, sizeof(s->x_test));
    copy_header(req, "user-agent", s->user_agent, sizeof(s->user_agent));
    size_t len;
    s->has_expect = pl_http_header_get(req, "expect", &len) != NULL;
    s->body_len = req->body_len;
    snprintf(s->body, sizeof(s->body), "%.*s", (int)req->body_len, (const char *)req->body);
    s->tls = req->tls;
    snprintf(s->tls_peer, sizeof(s->tls_peer), "%s", req->tls_peer ? req->tls_peer : "");
    if (s->answer_size) {
        char *big = malloc(s->answer_size);
        memset(big, 'x', s->answer_size);
        pl_http_respond(res, 200, NULL, 0, big, s->answer_size);
        free(big);
        return;
    }
    pl_http_header h[] = {{"X-Echo", 6, "echo", 4}};
    if (req->http_version == 2) {
        pl_http_header t[] = {{"grpc-status", 11, "7", 1}, {"grpc-message", 12, "nope", 4}};
        pl_http_respond_with_trailers(res, 200, h, 1, "h2-body", 7, t, 2);
        return;
    }
    pl_http_respond(res, 201, h, 1, "created", 7);
}

/* A listener that accepts and reads but never answers. */
typedef struct silent {
    uv_tcp_t listener;
    uv_tcp_t conn;
    bool accepted;
    int port;
} silent;

static void silent_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)h;
    (void)hint;
    static char space[4096];
    *buf = uv_buf_init(space, sizeof(space));
}

static void silent_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    if (n < 0)
        uv_read_stop(s);
}

static void silent_on_connection(uv_stream_t *server, int status)
{
    silent *s = server->data;
    if (status < 0 || s->accepted)
        return;
    uv_tcp_init(server->loop, &s->conn);
    if (uv_accept(server, (uv_stream_t *)&s->conn) == 0) {
        s->accepted = true;
        uv_read_start((uv_stream_t *)&s->conn, silent_alloc, silent_read);
    }
}

static bool silent_start(silent *s, uv_loop_t *loop)
{
    memset(s, 0, sizeof(*s));
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    if (uv_tcp_bind(&s->listener, (const struct sockaddr *)&a, 0) != 0 ||
        uv_listen((uv_stream_t *)&s->listener, 8, silent_on_connection) != 0)
        return false;
    int len = sizeof(a);
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&a, &len);
    s->port = ntohs(a.sin_port);
    return true;
}

static void silent_close(silent *s)
{
    if (s->accepted)
        uv_close((uv_handle_t *)&s->conn, NULL);
    uv_close((uv_handle_t *)&s->listener, NULL);
}

/* ---- the client side ----------------------------------------------------- */

typedef struct outcome {
    int calls;
    bool in_send; /* set around pl_http_client_send */
    bool called_in_send;
    int transport_error;
    char error[256];
    int status;
    char x_echo[32];
    char challenge[64];  /* WWW-Authenticate */
    char grpc_status[8]; /* found through pl_http_result_find */
    size_t n_trailers;
    char body[64];
    size_t body_len;
    bool truncated;
    uint64_t elapsed_ms;
} outcome;

static void on_result(void *arg, const pl_http_client_result *r)
{
    outcome *o = arg;
    o->calls++;
    o->called_in_send |= o->in_send;
    o->transport_error = r->transport_error;
    snprintf(o->error, sizeof(o->error), "%s", r->error ? r->error : "");
    o->status = r->status;
    size_t len = 0;
    const char *v = pl_http_result_find(r, "x-echo", &len);
    snprintf(o->x_echo, sizeof(o->x_echo), "%.*s", v ? (int)len : 0, v ? v : "");
    v = pl_http_result_find(r, "www-authenticate", &len);
    snprintf(o->challenge, sizeof(o->challenge), "%.*s", v ? (int)len : 0, v ? v : "");
    v = pl_http_result_find(r, "grpc-status", &len);
    snprintf(o->grpc_status, sizeof(o->grpc_status), "%.*s", v ? (int)len : 0, v ? v : "");
    o->n_trailers = r->n_trailers;
    o->body_len = r->body_len;
    snprintf(o->body, sizeof(o->body), "%.*s", (int)(r->body_len < 63 ? r->body_len : 63),
             r->body ? (const char *)r->body : "");
    o->truncated = r->body_truncated;
    o->elapsed_ms = r->elapsed_ms;
}

static bool called(void *arg)
{
    return ((outcome *)arg)->calls > 0;
}

typedef struct env {
    uv_loop_t loop;
    pl_http_client *client;
    pl_http_server *server;
    seen_request seen;
    char url[128];
} env;

/* A loop, a client and (with `opt`) a server answering through handler. */
static bool env_start(env *e, const pl_http_server_options *opt, const char *scheme)
{
    memset(e, 0, sizeof(*e));
    uv_loop_init(&e->loop);
    pl_err err = {{0}};
    e->client = pl_http_client_new(&e->loop, &err);
    if (!e->client)
        return false;
    if (!opt)
        return true;
    e->server = pl_http_server_start(&e->loop, "127.0.0.1:0", opt, handler, &e->seen, &err);
    if (!e->server) {
        fprintf(stderr, "  server: %s\n", err.msg);
        return false;
    }
    snprintf(e->url, sizeof(e->url), "%s://%s:%d/v1/things?x=1", scheme,
             strcmp(scheme, "https") == 0 ? "localhost" : "127.0.0.1",
             pl_http_server_port(e->server));
    return true;
}

static void env_stop(env *e)
{
    if (e->client)
        pl_http_client_close(e->client);
    if (e->server)
        pl_http_server_close(e->server);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&e->loop), 0);
}

/* Replaces the client by a new one (new connections: curl would reuse an
 * HTTP/1.1 connection for a request that asks for HTTP/2). */
static bool env_new_client(env *e)
{
    pl_err err = {{0}};
    pl_http_client_close(e->client);
    e->client = pl_http_client_new(&e->loop, &err);
    return e->client != NULL;
}

/* Sends `req` and runs the loop until its callback ran. */
static void round_trip(env *e, const pl_http_client_request *req, outcome *o)
{
    pl_err err = {{0}};
    memset(o, 0, sizeof(*o));
    o->in_send = true;
    pl_status st = pl_http_client_send(e->client, req, on_result, o, &err);
    o->in_send = false;
    CHECK_EQ_INT(st, PL_OK);
    if (st != PL_OK)
        return;
    CHECK_EQ_UINT(pl_http_client_active(e->client), 1);
    CHECK(loop_run_until(&e->loop, called, o, 60000));
    CHECK_EQ_INT(o->calls, 1);
    CHECK(!o->called_in_send);
    CHECK_EQ_UINT(pl_http_client_active(e->client), 0);
}

/* ---- tests --------------------------------------------------------------- */

static void test_http1_post(void)
{
    env e;
    pl_http_server_options opt = {.http1 = true};
    REQUIRE(env_start(&e, &opt, "http"));
    const char *headers[] = {"X-Test: one", "Content-Type: text/plain"};
    char body[2048]; /* over 1 KiB: no Expect: 100-continue round trip */
    memset(body, 'b', sizeof(body));
    memcpy(body, "payload", 7);
    pl_http_client_request req = {
        .url = e.url, .headers = headers, .n_headers = 2, .body = body, .body_len = sizeof(body)};
    outcome o;
    round_trip(&e, &req, &o);
    CHECK_EQ_INT(o.transport_error, 0);
    CHECK_EQ_INT(o.status, 201);
    CHECK_EQ_STR(o.x_echo, "echo"); /* found case-insensitively */
    CHECK_EQ_STR(o.body, "created");
    CHECK(!o.truncated);
    CHECK_EQ_INT(e.seen.count, 1);
    CHECK_EQ_INT(e.seen.http_version, 1);
    CHECK_EQ_STR(e.seen.method, "POST"); /* the default */
    CHECK_EQ_STR(e.seen.path, "/v1/things");
    CHECK_EQ_STR(e.seen.query, "x=1");
    CHECK_EQ_STR(e.seen.x_test, "one");
    CHECK_EQ_STR(e.seen.user_agent, "proflink/0.1");
    CHECK(!e.seen.has_expect);
    CHECK_EQ_UINT(e.seen.body_len, sizeof(body));
    CHECK(strncmp(e.seen.body, "payloadbbb", 10) == 0);

    /* GET has no body; another method is sent as named */
    req = (pl_http_client_request){.method = "GET", .url = e.url};
    round_trip(&e, &req, &o);
    CHECK_EQ_INT(o.status, 201);
    CHECK_EQ_STR(e.seen.method, "GET");
    CHECK_EQ_UINT(e.seen.body_len, 0);
    req = (pl_http_client_request){.method = "PUT", .url = e.url, .body = "x", .body_len = 1};
    round_trip(&e, &req, &o);
    CHECK_EQ_STR(e.seen.method, "PUT");
    CHECK_EQ_STR(e.seen.body, "x");
    CHECK_EQ_INT(e.seen.count, 3);
    env_stop(&e);
}

/* HTTP/2 with prior knowledge (gRPC's h2c): trailers are kept apart from
 * the headers, and pl_http_result_find looks in both. */
static void test_h2c_trailers(void)
{
    env e;
    pl_http_server_options opt = {.h2c = true};
    REQUIRE(env_start(&e, &opt, "http"));
    pl_http_client_request req = {
        .url = e.url, .body = "grpc", .body_len = 4, .version = PL_HTTP_VERSION_2};
    outcome o;
    for (int i = 0; i < 2; i++) { /* the second may reuse the connection */
        round_trip(&e, &req, &o);
        CHECK_EQ_INT(o.transport_error, 0);
        CHECK_EQ_INT(o.status, 200);
        CHECK_EQ_STR(o.body, "h2-body");
        CHECK_EQ_STR(o.x_echo, "echo");
        CHECK_EQ_UINT(o.n_trailers, 2);
        CHECK_EQ_STR(o.grpc_status, "7");
        CHECK_EQ_INT(e.seen.http_version, 2);
        CHECK_EQ_STR(e.seen.body, "grpc");
    }
    env_stop(&e);
}

/* The response body is kept up to max_response_body (64 KiB by default),
 * and the result says it was cut. */
static void test_body_cap(void)
{
    env e;
    pl_http_server_options opt = {.http1 = true};
    REQUIRE(env_start(&e, &opt, "http"));
    e.seen.answer_size = 200 * 1024;
    pl_http_client_request req = {.url = e.url, .max_response_body = 1000};
    outcome o;
    round_trip(&e, &req, &o);
    CHECK_EQ_INT(o.transport_error, 0);
    CHECK_EQ_INT(o.status, 200);
    CHECK_EQ_UINT(o.body_len, 1000);
    CHECK(o.truncated);
    req.max_response_body = 0;
    round_trip(&e, &req, &o);
    CHECK_EQ_UINT(o.body_len, 64 * 1024);
    CHECK(o.truncated);
    req.max_response_body = 300 * 1024;
    round_trip(&e, &req, &o);
    CHECK_EQ_UINT(o.body_len, 200 * 1024);
    CHECK(!o.truncated);
    env_stop(&e);
}

/* Transport failures reach the callback (once, later) with the curl code;
 * a request without a URL is refused by send itself. */
static void test_transport_errors(void)
{
    env e;
    REQUIRE(env_start(&e, NULL, "http"));
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/", free_port()); /* nobody listens */
    pl_http_client_request req = {.url = url};
    outcome o;
    round_trip(&e, &req, &o);
    CHECK_EQ_INT(o.transport_error, CURLE_COULDNT_CONNECT);
    CHECK_EQ_INT(o.status, 0);
    CHECK(o.error[0] != 0);

    /* a server that never answers: the timeout ends the request */
    silent s;
    REQUIRE(silent_start(&s, &e.loop));
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/", s.port);
    req = (pl_http_client_request){.url = url, .timeout_ms = 300};
    round_trip(&e, &req, &o);
    CHECK_EQ_INT(o.transport_error, CURLE_OPERATION_TIMEDOUT);
    CHECK_EQ_INT(o.status, 0);
    CHECK(o.elapsed_ms >= 250); /* not before the timeout */

    /* refused up front: cb is not called */
    pl_err err = {{0}};
    memset(&o, 0, sizeof(o));
    req = (pl_http_client_request){.url = NULL};
    CHECK_EQ_INT(pl_http_client_send(e.client, &req, on_result, &o, &err), PL_ERR_INVALID);
    CHECK(strstr(err.msg, "without url") != NULL);
    req = (pl_http_client_request){.url = "ftp://127.0.0.1/x"}; /* only http and https */
    round_trip(&e, &req, &o);
    CHECK_EQ_INT(o.transport_error, CURLE_UNSUPPORTED_PROTOCOL);
    silent_close(&s);
    env_stop(&e);
}

static bool accepted(void *arg)
{
    return ((silent *)arg)->accepted;
}

/* Closing the client cancels what is in flight: each callback runs with
 * PL_HTTP_CANCELLED before close returns. */
static void test_close_cancels(void)
{
    env e;
    REQUIRE(env_start(&e, NULL, "http"));
    silent s;
    REQUIRE(silent_start(&s, &e.loop));
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/", s.port);
    pl_http_client_request req = {.url = url, .body = "x", .body_len = 1};
    outcome o1 = {0}, o2 = {0};
    pl_err err = {{0}};
    REQUIRE(pl_http_client_send(e.client, &req, on_result, &o1, &err) == PL_OK);
    REQUIRE(pl_http_client_send(e.client, &req, on_result, &o2, &err) == PL_OK);
    CHECK_EQ_UINT(pl_http_client_active(e.client), 2);
    CHECK(loop_run_until(&e.loop, accepted, &s, 60000)); /* a request is on the wire */
    CHECK_EQ_INT(o1.calls + o2.calls, 0);
    pl_http_client_close(e.client);
    e.client = NULL;
    CHECK_EQ_INT(o1.calls, 1);
    CHECK_EQ_INT(o2.calls, 1);
    CHECK_EQ_INT(o1.transport_error, PL_HTTP_CANCELLED);
    CHECK_EQ_INT(o2.transport_error, PL_HTTP_CANCELLED);
    silent_close(&s);
    env_stop(&e);
}

/* https against proflink's TLS listener: verified with the test CA, refused
 * with another CA unless verification is off, and mutual TLS with the
 * client certificate (refused without it). */
static void test_tls(void)
{
    pl_tls_server_config tls = {.cert_file = (char *)pki_file(&P, "server.pem"),
                                .key_file = (char *)pki_file(&P, "server.key")};
    pl_http_server_options opt = {.http1 = true, .h2c = true, .tls = &tls};
    env e;
    REQUIRE(env_start(&e, &opt, "https"));
    pl_http_tls good = {.ca_file = pki_file(&P, "ca.pem")};
    pl_http_client_request req = {.url = e.url, .body = "s", .body_len = 1, .tls = &good};
    outcome o;
    round_trip(&e, &req, &o);
    CHECK_EQ_INT(o.transport_error, 0);
    CHECK_EQ_INT(o.status, 201);
    CHECK(e.seen.tls);
    CHECK_EQ_INT(e.seen.http_version, 1);
    /* h2 by ALPN (a new client: curl would reuse the HTTP/1.1 connection) */
    REQUIRE(env_new_client(&e));
    req.version = PL_HTTP_VERSION_2;
    round_trip(&e, &req, &o);
    CHECK_EQ_INT(o.status, 200);
    CHECK_EQ_STR(o.grpc_status, "7");
    CHECK_EQ_INT(e.seen.http_version, 2);
    int handled = e.seen.count;
    /* the wrong CA */
    pl_http_tls wrong = {.ca_file = pki_file(&P, "other-ca.pem")};
    req = (pl_http_client_request){.url = e.url, .tls = &wrong};
    round_trip(&e, &req, &o);
    CHECK_EQ_INT(o.transport_error, CURLE_PEER_FAILED_VERIFICATION);
    CHECK_EQ_INT(e.seen.count, handled);
    wrong.insecure_skip_verify = true;
    round_trip(&e, &req, &o);
    CHECK_EQ_INT(o.transport_error, 0);
    CHECK_EQ_INT(o.status, 201);
    env_stop(&e);

    /* mutual TLS */
    tls.client_ca_file = (char *)pki_file(&P, "ca.pem");
    REQUIRE(env_start(&e, &opt, "https"));
    req = (pl_http_client_request){.url = e.url, .tls = &good};
    round_trip(&e, &req, &o);
    CHECK(o.transport_error != 0); /* no client certificate */
    CHECK_EQ_INT(e.seen.count, 0);
    pl_http_tls mutual = {.ca_file = pki_file(&P, "ca.pem"),
                          .cert_file = pki_file(&P, "client.pem"),
                          .key_file = pki_file(&P, "client.key")};
    req.tls = &mutual;
    round_trip(&e, &req, &o);
    CHECK_EQ_INT(o.transport_error, 0);
    CHECK_EQ_INT(o.status, 201);
    CHECK_EQ_STR(e.seen.tls_peer, "good-client");
    pl_http_tls stranger = {.ca_file = pki_file(&P, "ca.pem"),
                            .cert_file = pki_file(&P, "other.pem"),
                            .key_file = pki_file(&P, "other.key")};
    req.tls = &stranger;
    round_trip(&e, &req, &o);
    CHECK(o.transport_error != 0);
    CHECK_EQ_INT(e.seen.count, 1);
    env_stop(&e);
}

/* A listener with an authenticator: without credentials HTTP/1.1 gets 401
 * with the challenge and gRPC gets grpc-status 16 (UNAUTHENTICATED), neither
 * reaching the handler; with the header line the same extension's client
 * side writes, as exporters send it, the request gets through. */
static void test_auth_refusals(void)
{
    pl_err err = {{0}};
    void *ext = make_ext("bearertokenauth", "bearertokenauth/hc", "token: s3cret\n", &err);
    REQUIRE(ext != NULL);
    const pl_authenticator *a = pl_auth_find("bearertokenauth/hc", &err);
    REQUIRE(a != NULL);
    pl_http_server_options opt = {.http1 = true, .h2c = true, .auth = &a->server};
    env e;
    REQUIRE(env_start(&e, &opt, "http"));
    const char *grpc[] = {"Content-Type: application/grpc"};
    pl_http_client_request req = {.url = e.url,
                                  .headers = grpc,
                                  .n_headers = 1,
                                  .body = "\0\0\0\0\0",
                                  .body_len = 5,
                                  .version = PL_HTTP_VERSION_2};
    outcome o;
    round_trip(&e, &req, &o);
    CHECK_EQ_INT(o.transport_error, 0);
    CHECK_EQ_INT(o.status, 200);
    CHECK_EQ_STR(o.grpc_status, "16");
    REQUIRE(env_new_client(&e));
    req = (pl_http_client_request){.url = e.url, .body = "x", .body_len = 1};
    round_trip(&e, &req, &o);
    CHECK_EQ_INT(o.status, 401);
    CHECK_EQ_STR(o.challenge, "Bearer");
    CHECK_EQ_INT(e.seen.count, 0);
    char *line = pl_auth_client_header_for(NULL, "bearertokenauth/hc");
    REQUIRE(line != NULL);
    const char *with[] = {line};
    req.headers = with;
    req.n_headers = 1;
    round_trip(&e, &req, &o);
    CHECK_EQ_INT(o.status, 201);
    CHECK_EQ_INT(e.seen.count, 1);
    free(line);
    env_stop(&e);
    destroy_ext("bearertokenauth", ext);
}

int main(void)
{
    /* as the service does: a peer that hangs up is a write error, not a signal */
    signal(SIGPIPE, SIG_IGN);
    if (!pki_ready(&P))
        return 1;
    PL_RUN(test_http1_post);
    PL_RUN(test_h2c_trailers);
    PL_RUN(test_body_cap);
    PL_RUN(test_transport_errors);
    PL_RUN(test_close_cancels);
    PL_RUN(test_tls);
    PL_RUN(test_auth_refusals);
    pki_remove(&P);
    return pl_test_done();
}
