/*
 * test_otlp_receiver.c: the `otlp` receiver end to end in C: configured from
 * YAML like in collector.yaml, listening on loopback, fed by plain sockets
 * (OTLP/HTTP) and an nghttp2 client (OTLP/gRPC), delivering to capture
 * consumers. Checks status codes, bodies, headers, trailers, metadata and
 * counters for good and bad requests.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config/decode.h"
#include "config/node.h"
#include "core/buf.h"
#include "core/stats.h"
#include "net/compress.h"
#include "otlp_pb.h"
#include "pipeline/consumer.h"
#include "socket_fixture.h"
#include "receivers/otlp_handler.h"
#include "testlib.h"
#include "traces_fixture.h"

extern const pl_component_type pl_receiver_otlp;

/* ---- capture consumer --------------------------------------------------- */

typedef struct capture {
    pthread_mutex_t mu;
    int batches;
    size_t items;
    pl_status answer;
    char tenant[64];
    char user_agent[64];
    size_t n_metadata;
    bool bus_key; /* a proflink.* key reached the pipeline */
    size_t raw_len;
} capture;

static capture cap = {.mu = PTHREAD_MUTEX_INITIALIZER};

static pl_status capture_fn(void *arg, pl_batch *b)
{
    (void)arg;
    pthread_mutex_lock(&cap.mu);
    cap.batches++;
    cap.items += pl_batch_items(b);
    pl_bytes v;
    cap.tenant[0] = 0;
    if (pl_batch_metadata_get(b, "tenant", &v))
        snprintf(cap.tenant, sizeof(cap.tenant), "%.*s", (int)v.len, (const char *)v.ptr);
    cap.user_agent[0] = 0;
    if (pl_batch_metadata_get(b, "user-agent", &v))
        snprintf(cap.user_agent, sizeof(cap.user_agent), "%.*s", (int)v.len, (const char *)v.ptr);
    cap.n_metadata = b->metadata.n;
    cap.bus_key = pl_batch_metadata_get(b, PL_META_BUS_SPANS_LAG, &v);
    if (b->signal == PL_SIGNAL_LOGS || b->signal == PL_SIGNAL_METRICS)
        cap.raw_len = b->data.raw.len;
    pl_status st = cap.answer;
    pthread_mutex_unlock(&cap.mu);
    pl_batch_free(b);
    return st;
}

static void capture_reset(pl_status answer)
{
    pthread_mutex_lock(&cap.mu);
    cap.batches = 0;
    cap.items = 0;
    cap.answer = answer;
    pthread_mutex_unlock(&cap.mu);
}

/* ---- the receiver on its own loop thread -------------------------------- */

typedef struct running {
    uv_loop_t loop;
    uv_async_t stop;
    pthread_t thread;
    void *self;
    pl_stats *stats;
    pl_consumer consumer;
    void *cfg;
    int grpc_port, http_port;
} running;

/* Decodes the receiver's config from YAML; returns the number of errors. */
static int decode_config(const char *yaml, void *out, char *first_error, size_t cap_err)
{
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_cfg_doc *doc = pl_cfg_doc_parse("test.yaml", yaml, strlen(yaml), &errs);
    int n = -1;
    if (doc) {
        n = pl_cfg_decode(pl_receiver_otlp.config, doc->root, NULL, out, &errs);
        pl_cfg_doc_free(doc);
    }
    if (first_error) {
        first_error[0] = 0;
        FILE *f = fmemopen(first_error, cap_err, "w");
        if (f) {
            pl_cfg_errors_print(&errs, f);
            fclose(f);
        }
    }
    pl_cfg_errors_free(&errs);
    return n;
}

static void on_stop(uv_async_t *a)
{
    running *r = a->data;
    pl_receiver_otlp.shutdown(r->self);
    uv_close((uv_handle_t *)a, NULL);
}

static void *loop_thread(void *arg)
{
    running *r = arg;
    uv_run(&r->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* signals: which pipelines exist */
static int start_receiver(running *r, const char *extra_grpc, const char *extra_http,
                          unsigned signals)
{
    memset(r, 0, sizeof(*r));
    uv_loop_init(&r->loop);
    r->grpc_port = free_port();
    r->http_port = free_port();
    char yaml[1024];
    snprintf(yaml, sizeof(yaml),
             "protocols:\n  grpc:\n    endpoint: 127.0.0.1:%d\n%s  http:\n    endpoint: "
             "127.0.0.1:%d\n%s",
             r->grpc_port, extra_grpc ? extra_grpc : "", r->http_port,
             extra_http ? extra_http : "");
    r->cfg = calloc(1, pl_receiver_otlp.config->size);
    char errtext[512];
    if (decode_config(yaml, r->cfg, errtext, sizeof(errtext)) != 0) {
        fprintf(stderr, "config: %s\n", errtext);
        return -1;
    }
    r->stats = pl_stats_new("otlp", PL_KIND_RECEIVER);
    pl_consumer_init_func(&r->consumer, capture_fn, NULL);
    pl_create_settings s = {.id = "otlp", .loop = &r->loop, .stats = r->stats};
    for (int i = 0; i < PL_SIGNAL_COUNT; i++)
        if (signals & PL_SIGNAL_MASK(i))
            s.next[i] = &r->consumer;
    pl_err err = {{0}};
    if (pl_receiver_otlp.create(&s, r->cfg, &r->self, &err) != PL_OK ||
        pl_receiver_otlp.start(r->self, &err) != PL_OK) {
        fprintf(stderr, "start: %s\n", err.msg);
        return -1;
    }
    uv_async_init(&r->loop, &r->stop, on_stop);
    r->stop.data = r;
    pthread_create(&r->thread, NULL, loop_thread, r);
    return 0;
}

static void stop_receiver(running *r)
{
    uv_async_send(&r->stop);
    pthread_join(r->thread, NULL);
    pl_receiver_otlp.destroy(r->self);
    CHECK_EQ_INT(uv_loop_close(&r->loop), 0);
    pl_cfg_free(pl_receiver_otlp.config, r->cfg);
    free(r->cfg);
    pl_stats_free(r->stats);
}

/* ---- a traces request --------------------------------------------------- */

static void make_traces(pl_buf *out, int n_spans)
{
    pl_span *spans;
    pl_batch *b = tf_traces("checkout", "test", (uint32_t)n_spans, &spans);
    for (int i = 0; i < n_spans; i++) {
        pl_span *sp = &spans[i];
        memset(sp->trace_id, 0xab, 16);
        sp->trace_id_len = 16;
        memset(sp->span_id, i + 1, 8);
        sp->span_id_len = 8;
        sp->name = PL_BYTES_LIT("GET /cart");
        sp->kind = 2;
        sp->start_time_unix_nano = 1700000000000000000ull;
        sp->end_time_unix_nano = 1700000000250000000ull;
    }
    pl_otlp_encode_traces(&b->data.traces, out);
    pl_batch_free(b);
}

/* ---- HTTP/1.1 client ---------------------------------------------------- */

typedef struct http_answer {
    int status;
    char head[2048];
    uint8_t body[4096];
    size_t body_len;
} http_answer;

/* One request on a fresh connection; reads until the answer is complete. */
static int http_post(int port, const char *method, const char *path, const char *headers,
                     const void *body, size_t body_len, http_answer *a)
{
    memset(a, 0, sizeof(*a));
    int fd = connect_to(port);
    if (fd < 0)
        return -1;
    char head[2048];
    int n =
        snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %zu\r\n\r\n",
                 method, path, headers, body_len);
    send_all(fd, head, (size_t)n);
    send_all(fd, body, body_len);
    char buf[8192];
    size_t len = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 3000) <= 0)
            break;
        ssize_t k = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
        if (k <= 0)
            break;
        len += (size_t)k;
        buf[len] = 0;
        char *end = strstr(buf, "\r\n\r\n");
        if (end) {
            char *cl = strcasestr(buf, "Content-Length: ");
            size_t want = cl ? strtoul(cl + 16, NULL, 10) : 0;
            if (len >= (size_t)(end + 4 - buf) + want)
                break;
        }
    }
    close(fd);
    buf[len] = 0;
    char *end = strstr(buf, "\r\n\r\n");
    if (!end)
        return -1;
    sscanf(buf, "HTTP/1.1 %d", &a->status);
    size_t hl = (size_t)(end - buf);
    memcpy(a->head, buf, hl < sizeof(a->head) - 1 ? hl : sizeof(a->head) - 1);
    a->body_len = len - hl - 4;
    memcpy(a->body, end + 4, a->body_len < sizeof(a->body) ? a->body_len : sizeof(a->body));
    return 0;
}

/* ---- gRPC client -------------------------------------------------------- */

typedef struct grpc_answer {
    int http_status;
    int grpc_status;
    char grpc_message[256];
    bool has_details;
    uint8_t body[256];
    size_t body_len;
    bool closed;
} grpc_answer;

typedef struct h2c {
    int fd;
    grpc_answer *a;
    const uint8_t *data;
    size_t len, off;
} h2c;

static ssize_t h2_send(nghttp2_session *s, const uint8_t *d, size_t l, int f, void *u)
{
    send_all(((h2c *)u)->fd, d, l);
    return (ssize_t)l;
}

static int h2_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *n, size_t nl,
                     const uint8_t *v, size_t vl, uint8_t fl, void *u)
{
    grpc_answer *a = ((h2c *)u)->a;
    if (nl == 7 && !memcmp(n, ":status", 7))
        a->http_status = atoi((const char *)v);
    else if (nl == 11 && !memcmp(n, "grpc-status", 11))
        a->grpc_status = atoi((const char *)v);
    else if (nl == 12 && !memcmp(n, "grpc-message", 12))
        snprintf(a->grpc_message, sizeof(a->grpc_message), "%.*s", (int)vl, v);
    else if (nl == 23 && !memcmp(n, "grpc-status-details-bin", 23))
        a->has_details = true;
    return 0;
}

static int h2_data(nghttp2_session *s, uint8_t f, int32_t id, const uint8_t *d, size_t l, void *u)
{
    grpc_answer *a = ((h2c *)u)->a;
    if (a->body_len + l <= sizeof(a->body)) {
        memcpy(a->body + a->body_len, d, l);
        a->body_len += l;
    }
    return 0;
}

static int h2_close(nghttp2_session *s, int32_t id, uint32_t e, void *u)
{
    ((h2c *)u)->a->closed = true;
    return 0;
}

static ssize_t h2_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                       nghttp2_data_source *src, void *u)
{
    h2c *c = u;
    size_t n = c->len - c->off < length ? c->len - c->off : length;
    memcpy(buf, c->data + c->off, n);
    c->off += n;
    if (c->off == c->len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static void grpc_call(int port, const char *path, const char *content_type, const char *encoding,
                      const uint8_t *msg, size_t msg_len, bool compressed, grpc_answer *a)
{
    memset(a, 0, sizeof(*a));
    a->grpc_status = -1;
    pl_buf framed;
    pl_buf_init(&framed);
    uint8_t p[5] = {compressed, (uint8_t)(msg_len >> 24), (uint8_t)(msg_len >> 16),
                    (uint8_t)(msg_len >> 8), (uint8_t)msg_len};
    pl_buf_append(&framed, p, 5);
    pl_buf_append(&framed, msg, msg_len);
    h2c c = {.fd = connect_to(port), .a = a, .data = framed.data, .len = framed.len};
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, h2_send);
    nghttp2_session_callbacks_set_on_header_callback(cb, h2_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2_close);
    nghttp2_session *s;
    nghttp2_session_client_new(&s, cb, &c);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL, 0);
    nghttp2_nv nv[7] = {
        {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
        {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
        {(uint8_t *)":authority", (uint8_t *)"localhost", 10, 9, 0},
        {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
        {(uint8_t *)"content-type", (uint8_t *)content_type, 12, strlen(content_type), 0},
        {(uint8_t *)"te", (uint8_t *)"trailers", 2, 8, 0},
    };
    size_t nnv = 6;
    if (encoding)
        nv[nnv++] =
            (nghttp2_nv){(uint8_t *)"grpc-encoding", (uint8_t *)encoding, 13, strlen(encoding), 0};
    nghttp2_data_provider dp = {.read_callback = h2_read};
    nghttp2_submit_request(s, NULL, nv, nnv, &dp, NULL);
    nghttp2_session_send(s);
    for (int i = 0; i < 300 && !a->closed; i++) {
        struct pollfd pf = {c.fd, POLLIN, 0};
        if (poll(&pf, 1, 20) > 0) {
            uint8_t buf[16384];
            ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
            if (n <= 0)
                break;
            nghttp2_session_mem_recv(s, buf, (size_t)n);
        }
        nghttp2_session_send(s);
    }
    nghttp2_session_del(s);
    close(c.fd);
    pl_buf_free(&framed);
}

/* ---- tests -------------------------------------------------------------- */

static void test_config_presence_enables_protocols(void)
{
    void *cfg = calloc(1, pl_receiver_otlp.config->size);
    char err[512];
    CHECK_EQ_INT(decode_config("protocols:\n  grpc: {}\n", cfg, err, sizeof(err)), 0);
    pl_cfg_free(pl_receiver_otlp.config, cfg);
    CHECK_EQ_INT(decode_config("protocols:\n  http:\n", cfg, err, sizeof(err)), 0);
    pl_cfg_free(pl_receiver_otlp.config, cfg);
    /* no protocol at all: an error, like the Collector */
    CHECK(decode_config("protocols: {}\n", cfg, err, sizeof(err)) > 0);
    CHECK(strstr(err, "at least one protocol") != NULL);
    pl_cfg_free(pl_receiver_otlp.config, cfg);
    CHECK(decode_config("protocols:\n  grpc:\n    max_recv_msg_size_mib: -1\n", cfg, err,
                        sizeof(err)) > 0);
    pl_cfg_free(pl_receiver_otlp.config, cfg);
    CHECK(decode_config("protocols:\n  http:\n    endpointt: x\n", cfg, err, sizeof(err)) > 0);
    CHECK(strstr(err, "endpointt") != NULL);
    pl_cfg_free(pl_receiver_otlp.config, cfg);
    free(cfg);
}

static void test_http_protobuf_accepted(void)
{
    running r;
    REQUIRE(start_receiver(&r, NULL, "    include_metadata: true\n", PL_SIGNALS_ALL) == 0);
    capture_reset(PL_OK);
    pl_buf req;
    pl_buf_init(&req);
    make_traces(&req, 3);
    http_answer a;
    REQUIRE(http_post(r.http_port, "POST", "/v1/traces",
                      "Content-Type: application/x-protobuf\r\nX-Scope-OrgID: acme\r\n"
                      "User-Agent: test-agent\r\nProflink.Bus.Spans_lag: 0\r\n",
                      req.data, req.len, &a) == 0);
    CHECK_EQ_INT(a.status, 200);
    CHECK_EQ_BYTES(a.body, a.body_len, "\x0a\x00", 2);
    CHECK(strstr(a.head, "Content-Type: application/x-protobuf") != NULL);
    pthread_mutex_lock(&cap.mu);
    CHECK_EQ_INT(cap.batches, 1);
    CHECK_EQ_INT(cap.items, 3);
    CHECK_EQ_STR(cap.tenant, "acme");
    CHECK_EQ_STR(cap.user_agent, "test-agent");
    CHECK(!cap.bus_key); /* the pipeline's own keys never come from a client */
    pthread_mutex_unlock(&cap.mu);
    CHECK_EQ_UINT(pl_stats_get(r.stats, PL_SIGNAL_TRACES, PL_STAT_ACCEPTED), 3);
    /* every compression the issue names */
    pl_encoding encs[] = {PL_ENCODING_GZIP, PL_ENCODING_ZSTD, PL_ENCODING_DEFLATE};
    const char *names[] = {"gzip", "zstd", "deflate"};
    for (int i = 0; i < 3; i++) {
        pl_buf z;
        pl_buf_init(&z);
        pl_err err;
        pl_compress(encs[i], req.data, req.len, 0, &z, &err);
        char h[200];
        snprintf(h, sizeof(h), "Content-Type: application/x-protobuf\r\nContent-Encoding: %s\r\n",
                 names[i]);
        REQUIRE(http_post(r.http_port, "POST", "/v1/traces", h, z.data, z.len, &a) == 0);
        CHECK_EQ_INT(a.status, 200);
        pl_buf_free(&z);
    }
    CHECK_EQ_UINT(pl_stats_get(r.stats, PL_SIGNAL_TRACES, PL_STAT_ACCEPTED), 12);
    /* an empty request: success without a pipeline call */
    capture_reset(PL_OK);
    REQUIRE(http_post(r.http_port, "POST", "/v1/traces", "Content-Type: application/x-protobuf\r\n",
                      "", 0, &a) == 0);
    CHECK_EQ_INT(a.status, 200);
    CHECK_EQ_INT(cap.batches, 0);
    pl_buf_free(&req);
    stop_receiver(&r);
}

static void test_http_errors(void)
{
    running r;
    REQUIRE(start_receiver(&r, NULL, "    max_request_body_size: 2KiB\n",
                           PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_LOGS)) == 0);
    capture_reset(PL_OK);
    pl_buf req;
    pl_buf_init(&req);
    make_traces(&req, 2);
    http_answer a;
    const char *pb = "Content-Type: application/x-protobuf\r\n";
    /* unknown path, and a signal without a pipeline: 404 */
    http_post(r.http_port, "POST", "/v1/nothing", pb, req.data, req.len, &a);
    CHECK_EQ_INT(a.status, 404);
    http_post(r.http_port, "POST", "/v1development/profiles", pb, req.data, req.len, &a);
    CHECK_EQ_INT(a.status, 404);
    /* wrong method: 405, checked before the content type */
    http_post(r.http_port, "GET", "/v1/traces", "Content-Type: text/plain\r\n", "", 0, &a);
    CHECK_EQ_INT(a.status, 405);
    CHECK(strstr((char *)a.body, "405 method not allowed") != NULL);
    /* wrong content type */
    http_post(r.http_port, "POST", "/v1/traces", "Content-Type: text/plain\r\n", req.data, req.len,
              &a);
    CHECK_EQ_INT(a.status, 415);
    http_post(r.http_port, "POST", "/v1/traces", "", req.data, req.len, &a);
    CHECK_EQ_INT(a.status, 415);
    /* unsupported encoding */
    http_post(r.http_port, "POST", "/v1/traces",
              "Content-Type: application/x-protobuf\r\nContent-Encoding: br\r\n", req.data, req.len,
              &a);
    CHECK_EQ_INT(a.status, 415);
    /* truncated protobuf: 400 with a google.rpc.Status saying what */
    http_post(r.http_port, "POST", "/v1/traces", pb, req.data, req.len - 3, &a);
    CHECK_EQ_INT(a.status, 400);
    int32_t code = -1;
    pl_bytes msg = {0};
    CHECK_EQ_INT(pl_rpc_status_decode(a.body, a.body_len, &code, &msg, NULL, NULL), PL_OK);
    CHECK_EQ_INT(code, 3);
    CHECK(msg.len > 0);
    /* wrong wire type at the top level */
    http_post(r.http_port, "POST", "/v1/traces", pb, "\x0d\x01\x02\x03\x04", 5, &a);
    CHECK_EQ_INT(a.status, 400);
    /* bad gzip */
    http_post(r.http_port, "POST", "/v1/traces",
              "Content-Type: application/x-protobuf\r\nContent-Encoding: gzip\r\n",
              "\x1f\x8b\x08\x00garbage", 11, &a);
    CHECK_EQ_INT(a.status, 400);
    /* JSON error bodies are JSON */
    http_post(r.http_port, "POST", "/v1/traces",
              "Content-Type: application/json\r\nContent-Encoding: gzip\r\n", "{}", 2, &a);
    CHECK_EQ_INT(a.status, 400);
    CHECK(strstr(a.head, "application/json") != NULL);
    CHECK(a.body[0] == '{');
    /* over max_request_body_size: 413, raw and after decompression */
    uint8_t big[4096];
    memset(big, 'x', sizeof(big));
    http_post(r.http_port, "POST", "/v1/traces", pb, big, sizeof(big), &a);
    CHECK_EQ_INT(a.status, 413);
    pl_buf z;
    pl_buf_init(&z);
    pl_err err;
    pl_compress(PL_ENCODING_GZIP, big, sizeof(big), 0, &z, &err);
    http_post(r.http_port, "POST", "/v1/traces",
              "Content-Type: application/x-protobuf\r\nContent-Encoding: gzip\r\n", z.data, z.len,
              &a);
    CHECK_EQ_INT(a.status, 413);
    pl_buf_free(&z);
    CHECK_EQ_INT(cap.batches, 0);
    /* and good requests are still served */
    http_post(r.http_port, "POST", "/v1/traces", pb, req.data, req.len, &a);
    CHECK_EQ_INT(a.status, 200);
    /* logs pass through as bytes (an empty-framed request is just empty) */
    http_post(r.http_port, "POST", "/v1/logs", pb, "\x0a\x00", 2, &a);
    CHECK_EQ_INT(a.status, 200);
    CHECK_EQ_INT(cap.raw_len, 2);
    http_post(r.http_port, "POST", "/v1/logs", pb, "\x0a\x05\x01", 3, &a);
    CHECK_EQ_INT(a.status, 400);
    pl_buf_free(&req);
    stop_receiver(&r);
}

/* OTLP/JSON logs and metrics are accepted (transcoded to the protobuf that
 * passes through); a JSON bomb of empty spans is refused by the decode
 * budget with 413, and the receiver still serves afterwards. */
static void test_http_json_pass_through_and_budget(void)
{
    running r;
    REQUIRE(start_receiver(&r, NULL, "    max_request_body_size: 8MiB\n",
                           PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_LOGS) |
                               PL_SIGNAL_MASK(PL_SIGNAL_METRICS)) == 0);
    capture_reset(PL_OK);
    http_answer a;
    const char *js = "Content-Type: application/json\r\n";
    const char *logs = "{\"resourceLogs\":[{\"scopeLogs\":[{\"logRecords\":[{\"body\":"
                       "{\"stringValue\":\"hi\"}}]}]}]}";
    http_post(r.http_port, "POST", "/v1/logs", js, logs, strlen(logs), &a);
    CHECK_EQ_INT(a.status, 200);
    CHECK(strstr(a.head, "application/json") != NULL);
    /* its protobuf form: 0a 0a 12 08 12 06 2a 04 0a 02 "hi", 12 bytes */
    CHECK_EQ_INT(cap.raw_len, 12);
    const char *metrics = "{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":[{\"gauge\":"
                          "{\"dataPoints\":[{\"asInt\":\"1\"},{\"asDouble\":2}]}}]}]}]}";
    http_post(r.http_port, "POST", "/v1/metrics", js, metrics, strlen(metrics), &a);
    CHECK_EQ_INT(a.status, 200);
    const char *bad =
        "{\"resourceLogs\":[{\"scopeLogs\":[{\"logRecords\":[{\"traceId\":\"zz\"}]}]}]}";
    http_post(r.http_port, "POST", "/v1/logs", js, bad, strlen(bad), &a);
    CHECK_EQ_INT(a.status, 400);
    CHECK(strstr((const char *)a.body, "traceId") != NULL);
    /* 1M empty spans, about 3 KiB gzipped: 413 from the decode budget. */
    pl_buf bomb, z;
    pl_buf_init(&bomb);
    pl_buf_init(&z);
    pl_buf_append_str(&bomb, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[");
    for (int i = 0; i < 1000000; i++)
        pl_buf_append_str(&bomb, i ? ",{}" : "{}");
    pl_buf_append_str(&bomb, "]}]}]}");
    pl_err err;
    REQUIRE(pl_compress(PL_ENCODING_GZIP, bomb.data, bomb.len, 9, &z, &err) == PL_OK);
    CHECK(z.len < 16384);
    int batches = cap.batches;
    http_post(r.http_port, "POST", "/v1/traces",
              "Content-Type: application/json\r\nContent-Encoding: gzip\r\n", z.data, z.len, &a);
    CHECK_EQ_INT(a.status, 413);
    CHECK(strstr((const char *)a.body, "decoded request larger than the limit") != NULL);
    CHECK_EQ_INT(cap.batches, batches);
    http_post(r.http_port, "POST", "/v1/logs", js, logs, strlen(logs), &a);
    CHECK_EQ_INT(a.status, 200);
    pl_buf_free(&bomb);
    pl_buf_free(&z);
    stop_receiver(&r);
}

static void test_http_back_pressure(void)
{
    running r;
    REQUIRE(start_receiver(&r, NULL, NULL, PL_SIGNALS_ALL) == 0);
    pl_buf req;
    pl_buf_init(&req);
    make_traces(&req, 4);
    http_answer a;
    capture_reset(PL_ERR_REFUSED);
    uint64_t t0 = pl_time_mono_ns();
    http_post(r.http_port, "POST", "/v1/traces", "Content-Type: application/x-protobuf\r\n",
              req.data, req.len, &a);
    CHECK_EQ_INT(a.status, 503);
    CHECK(strstr(a.head, "Retry-After: 1") != NULL);
    int32_t code = -1;
    int64_t delay = -1;
    CHECK_EQ_INT(pl_rpc_status_decode(a.body, a.body_len, &code, NULL, &delay, NULL), PL_OK);
    CHECK_EQ_INT(code, 14);
    CHECK_EQ_INT(delay, 1000000000);
    /* right after a refusal, requests of the signal are refused before
     * they are decoded: the consumer sees nothing, the client the same 503
     * (when this machine answered the second request within the window;
     * after it, the request probes the pipeline, which now takes it) */
    capture_reset(PL_OK);
    http_post(r.http_port, "POST", "/v1/traces", "Content-Type: application/x-protobuf\r\n",
              req.data, req.len, &a);
    if (pl_time_mono_ns() - t0 < PL_OTLP_PUSHBACK_NS) {
        CHECK_EQ_INT(a.status, 503);
        CHECK(strstr(a.head, "Retry-After: 1") != NULL);
        CHECK_EQ_INT(cap.batches, 0);
        CHECK_EQ_UINT(pl_stats_get(r.stats, PL_SIGNAL_TRACES, PL_STAT_REFUSED), 4);
    } else {
        CHECK_EQ_INT(a.status, 200);
        CHECK_EQ_INT(cap.batches, 1);
    }
    /* ... other signals are not held back */
    http_post(r.http_port, "POST", "/v1/logs", "Content-Type: application/json\r\n", "{}", 2, &a);
    CHECK_EQ_INT(a.status, 200);
    /* and once the window has passed, the next request probes the pipeline */
    usleep(PL_OTLP_PUSHBACK_NS / 1000 + 20000);
    capture_reset(PL_ERR_THROTTLED);
    http_post(r.http_port, "POST", "/v1/traces", "Content-Type: application/x-protobuf\r\n",
              req.data, req.len, &a);
    CHECK_EQ_INT(a.status, 429);
    CHECK(strstr(a.head, "Retry-After: 1") != NULL);
    CHECK_EQ_UINT(pl_stats_get(r.stats, PL_SIGNAL_TRACES, PL_STAT_REFUSED), 8);
    /* memory short (memory_limiter's state): refused before decoding */
    capture_reset(PL_OK);
    pl_memory_state_set(PL_MEMORY_SOFT);
    http_post(r.http_port, "POST", "/v1/traces", "Content-Type: application/x-protobuf\r\n",
              req.data, req.len, &a);
    CHECK_EQ_INT(a.status, 503);
    CHECK(strstr(a.head, "Retry-After: 1") != NULL);
    grpc_answer g;
    grpc_call(r.grpc_port, "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
              "application/grpc", NULL, req.data, req.len, false, &g);
    CHECK_EQ_INT(g.grpc_status, 14);
    CHECK(g.has_details);
    pl_memory_state_set(PL_MEMORY_OK);
    CHECK_EQ_INT(cap.batches, 0);
    http_post(r.http_port, "POST", "/v1/traces", "Content-Type: application/x-protobuf\r\n",
              req.data, req.len, &a);
    CHECK_EQ_INT(a.status, 200);
    CHECK_EQ_INT(cap.batches, 1);
    pl_buf_free(&req);
    stop_receiver(&r);
}

static void test_grpc(void)
{
    running r;
    REQUIRE(start_receiver(&r, "    max_recv_msg_size_mib: 0.001\n", NULL,
                           PL_SIGNAL_MASK(PL_SIGNAL_TRACES)) == 0);
    capture_reset(PL_OK);
    pl_buf req;
    pl_buf_init(&req);
    make_traces(&req, 5);
    const char *traces = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
    grpc_answer a;
    grpc_call(r.grpc_port, traces, "application/grpc", NULL, req.data, req.len, false, &a);
    CHECK_EQ_INT(a.http_status, 200);
    CHECK_EQ_INT(a.grpc_status, 0);
    CHECK_EQ_BYTES(a.body, a.body_len, "\0\0\0\0\0", 5);
    CHECK_EQ_INT(cap.items, 5);
    /* gzip and zstd */
    pl_buf z;
    pl_buf_init(&z);
    pl_err err;
    pl_compress(PL_ENCODING_GZIP, req.data, req.len, 0, &z, &err);
    grpc_call(r.grpc_port, traces, "application/grpc+proto", "gzip", z.data, z.len, true, &a);
    CHECK_EQ_INT(a.grpc_status, 0);
    pl_buf_reset(&z);
    pl_compress(PL_ENCODING_ZSTD, req.data, req.len, 0, &z, &err);
    grpc_call(r.grpc_port, traces, "application/grpc", "zstd", z.data, z.len, true, &a);
    CHECK_EQ_INT(a.grpc_status, 0);
    CHECK_EQ_INT(cap.items, 15);
    /* bad input */
    grpc_call(r.grpc_port, traces, "application/grpc", NULL, req.data, req.len - 2, false, &a);
    CHECK_EQ_INT(a.grpc_status, 3);
    CHECK(a.grpc_message[0] != 0);
    grpc_call(r.grpc_port, traces, "application/grpc", "snappy", z.data, z.len, true, &a);
    CHECK_EQ_INT(a.grpc_status, 12);
    grpc_call(r.grpc_port, traces, "application/grpc", NULL, z.data, z.len, true, &a);
    CHECK_EQ_INT(a.grpc_status, 3);
    grpc_call(r.grpc_port, traces, "application/json", NULL, req.data, req.len, false, &a);
    CHECK_EQ_INT(a.http_status, 415);
    grpc_call(r.grpc_port, "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
              "application/grpc", NULL, (const uint8_t *)"", 0, false, &a);
    CHECK_EQ_INT(a.grpc_status, 12);
    grpc_call(r.grpc_port, "/no.Such/Method", "application/grpc", NULL, (const uint8_t *)"", 0,
              false, &a);
    CHECK_EQ_INT(a.grpc_status, 12);
    /* over max_recv_msg_size (about 1 KiB here) */
    uint8_t big[3000];
    memset(big, 0, sizeof(big));
    grpc_call(r.grpc_port, traces, "application/grpc", NULL, big, sizeof(big), false, &a);
    CHECK_EQ_INT(a.grpc_status, 8);
    CHECK(!a.has_details); /* not retryable */
    /* back-pressure: UNAVAILABLE with RetryInfo */
    capture_reset(PL_ERR_REFUSED);
    grpc_call(r.grpc_port, traces, "application/grpc", NULL, req.data, req.len, false, &a);
    CHECK_EQ_INT(a.grpc_status, 14);
    CHECK(a.has_details);
    usleep(PL_OTLP_PUSHBACK_NS / 1000 + 20000); /* past the refusal's push-back */
    capture_reset(PL_ERR_THROTTLED);
    grpc_call(r.grpc_port, traces, "application/grpc", NULL, req.data, req.len, false, &a);
    CHECK_EQ_INT(a.grpc_status, 8);
    CHECK(a.has_details);
    pl_buf_free(&z);
    pl_buf_free(&req);
    stop_receiver(&r);
}

int main(void)
{
    PL_RUN(test_config_presence_enables_protocols);
    PL_RUN(test_http_protobuf_accepted);
    PL_RUN(test_http_errors);
    PL_RUN(test_http_json_pass_through_and_budget);
    PL_RUN(test_http_back_pressure);
    PL_RUN(test_grpc);
    return pl_test_done();
}
