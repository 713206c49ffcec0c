/*
 * test_otlp_exporters.c: the otlphttp and otlp (gRPC) exporters against a
 * scripted fake backend on loopback, built on proflink's own HTTP server in
 * the same event loop. The backend decompresses and records every request
 * body, so each test checks what arrived byte for byte against the
 * encoding of what was exported, and how many attempts it took:
 *   - delivery, path, headers and compression;
 *   - 503 (with Retry-After) then 200: delivered once, after the delay;
 *   - 400: not retried, counted failed; partial success counted;
 *   - a backend that is down at first and comes up later;
 *   - gRPC: UNAVAILABLE then OK; RESOURCE_EXHAUSTED permanent without
 *     RetryInfo and retried after the RetryInfo delay with it.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/stats.h"
#include "exporters/otlp_common.h"
#include "net/compress.h"
#include "net/grpc.h"
#include "net/http_server.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"
#include "socket_fixture.h"
#include "testlib.h"
#include "traces_fixture.h"

extern const pl_component_type pl_exporter_otlphttp;
extern const pl_component_type pl_exporter_otlp;

/* ---- the fake backend --------------------------------------------------- */

typedef struct answer {
    int http_status; /* otlphttp: HTTP status; gRPC: unused */
    int grpc_code;
    const char *retry_after; /* HTTP header value, or NULL */
    int64_t retry_delay_ns;  /* gRPC RetryInfo; -1 = none */
    int64_t rejected;        /* partial success on 200 */
} answer;

typedef struct backend {
    pl_http_server *server;
    bool grpc;
    answer script[8];
    size_t n_script;
    size_t requests;
    uint64_t request_ms[16];
    pl_buf bodies[16]; /* decompressed payloads */
    char path[16][128];
    char auth[128];
    char content_encoding[32];
    char content_type[64];
    char content_types[16][64]; /* per request */
    bool reply_json;            /* otlphttp: answer 200s with a JSON body */
    const char *grpc_accept;    /* gRPC: codings decoded; others get UNIMPLEMENTED */
    char grpc_encodings[16][16];
} backend;

static void http_handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    backend *b = arg;
    size_t i = b->requests++;
    size_t len;
    const char *v;
    if (i < 16) {
        b->request_ms[i] = pl_time_mono_ns() / 1000000;
        snprintf(b->path[i], sizeof(b->path[i]), "%s", req->path);
        pl_buf_init(&b->bodies[i]);
    }
    if ((v = pl_http_header_get(req, "authorization", &len)))
        snprintf(b->auth, sizeof(b->auth), "%.*s", (int)len, v);
    if ((v = pl_http_header_get(req, "content-type", &len))) {
        snprintf(b->content_type, sizeof(b->content_type), "%.*s", (int)len, v);
        if (i < 16)
            snprintf(b->content_types[i], sizeof(b->content_types[i]), "%.*s", (int)len, v);
    }
    answer a = {200, 0, NULL, -1, 0};
    if (b->n_script)
        a = b->script[i < b->n_script ? i : b->n_script - 1];
    if (b->grpc) {
        char coding[16] = "identity";
        if ((v = pl_http_header_get(req, "grpc-encoding", &len)))
            snprintf(coding, sizeof(coding), "%.*s", (int)len, v);
        if (i < 16)
            snprintf(b->grpc_encodings[i], sizeof(b->grpc_encodings[i]), "%s", coding);
        if (b->grpc_accept && !strstr(b->grpc_accept, coding)) {
            /* what grpc-go answers for a compressor it does not have */
            pl_http_header hh[2] = {
                {"content-type", 12, "application/grpc", 16},
                {"grpc-accept-encoding", 20, b->grpc_accept, strlen(b->grpc_accept)}};
            pl_http_header tt[2] = {{"grpc-status", 11, "12", 2},
                                    {"grpc-message", 12, "unknown compressor", 18}};
            pl_http_respond_with_trailers(res, 200, hh, 2, NULL, 0, tt, 2);
            return;
        }
        pl_grpc_message msg;
        pl_err err;
        if (pl_grpc_read_message(req, 64 << 20, &msg, &err) != PL_OK) {
            pl_grpc_respond_error(res, 3, err.msg, -1);
            return;
        }
        if (i < 16)
            pl_buf_append(&b->bodies[i], msg.data, msg.len);
        free(msg.owner);
        if ((v = pl_http_header_get(req, "grpc-encoding", &len)))
            snprintf(b->content_encoding, sizeof(b->content_encoding), "%.*s", (int)len, v);
        if (a.grpc_code) {
            pl_grpc_respond_error(res, a.grpc_code, "scripted failure", a.retry_delay_ns);
            return;
        }
        pl_buf out;
        pl_buf_init(&out);
        pl_otlp_encode_export_response(&out, a.rejected, a.rejected ? "some were bad" : NULL);
        pl_grpc_respond(res, out.data, out.len);
        pl_buf_free(&out);
        return;
    }
    pl_encoding enc = PL_ENCODING_IDENTITY;
    if ((v = pl_http_header_get(req, "content-encoding", &len))) {
        snprintf(b->content_encoding, sizeof(b->content_encoding), "%.*s", (int)len, v);
        pl_encoding_parse(v, len, &enc);
    }
    uint8_t *plain = NULL;
    size_t plain_len = 0;
    if (pl_decompress(enc, req->body, req->body_len, 64 << 20, &plain, &plain_len, NULL) == PL_OK &&
        i < 16)
        pl_buf_append(&b->bodies[i], plain, plain_len);
    free(plain);
    pl_http_header h[2] = {{"Content-Type", 12, "application/x-protobuf", 22}};
    size_t nh = 1;
    if (a.retry_after) {
        h[1] = (pl_http_header){"Retry-After", 11, a.retry_after, strlen(a.retry_after)};
        nh = 2;
    }
    pl_buf out;
    pl_buf_init(&out);
    if (a.http_status == 200 && b->reply_json) {
        char json[160];
        int n = snprintf(json, sizeof(json),
                         "{\"partialSuccess\":{\"rejectedSpans\":\"%lld\",\"errorMessage\":"
                         "\"some were bad\"}}",
                         (long long)a.rejected);
        h[0] = (pl_http_header){"Content-Type", 12, "application/json", 16};
        pl_http_respond(res, 200, h, nh, json, (size_t)n);
        pl_buf_free(&out);
        return;
    }
    if (a.http_status == 200)
        pl_otlp_encode_export_response(&out, a.rejected, a.rejected ? "some were bad" : NULL);
    else
        pl_rpc_status_encode(&out, 14, "scripted failure", -1);
    pl_http_respond(res, a.http_status, h, nh, out.data, out.len);
    pl_buf_free(&out);
}

static int backend_start(backend *b, uv_loop_t *loop, bool grpc, int port)
{
    pl_http_server_options opt = {0};
    opt.max_body_size = 64 << 20;
    opt.http1 = !grpc;
    opt.h2c = grpc;
    opt.name = "fake-backend";
    b->grpc = grpc;
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
    pl_err err;
    b->server = pl_http_server_start(loop, ep, &opt, http_handler, b, &err);
    if (!b->server) {
        fprintf(stderr, "  backend: %s\n", err.msg);
        return -1;
    }
    return pl_http_server_port(b->server);
}

static void backend_stop(backend *b)
{
    if (b->server)
        pl_http_server_close(b->server);
    b->server = NULL;
    for (size_t i = 0; i < b->requests && i < 16; i++)
        pl_buf_free(&b->bodies[i]);
}

/* ---- fixtures ----------------------------------------------------------- */

static pl_batch *make_traces(int n_spans)
{
    pl_span *spans;
    pl_batch *b = tf_traces(NULL, "test", (uint32_t)n_spans, &spans);
    for (int i = 0; i < n_spans; i++) {
        pl_span *s = &spans[i];
        for (int k = 0; k < 16; k++)
            s->trace_id[k] = (uint8_t)(k + 1);
        for (int k = 0; k < 8; k++)
            s->span_id[k] = (uint8_t)(i + k + 1);
        s->trace_id_len = 16;
        s->span_id_len = 8;
        s->name = PL_BYTES_LIT("GET /cart");
        s->kind = 2;
        s->start_time_unix_nano = 1700000000000000000ULL + (uint64_t)i;
        s->end_time_unix_nano = 1700000000250000000ULL + (uint64_t)i;
    }
    return b;
}

typedef struct env {
    uv_loop_t loop;
    pl_stats *stats;
    backend be;
    void *exporter;
    const pl_component_type *type;
    pl_otlp_exporter_config cfg;
    char endpoint[128];
} env;

static void env_init(env *e, const pl_component_type *type)
{
    memset(e, 0, sizeof(*e));
    uv_loop_init(&e->loop);
    e->type = type;
    e->stats = pl_stats_new(type->type, PL_KIND_EXPORTER);
    e->cfg.compression = "gzip";
    e->cfg.timeout = 2000 * 1000000LL;
    e->cfg.sending_queue.enabled = true;
    e->cfg.sending_queue.num_consumers = 2;
    e->cfg.sending_queue.queue_size = 100;
    e->cfg.sending_queue.max_bytes = 1 << 20;
    e->cfg.retry_on_failure.enabled = true;
    e->cfg.retry_on_failure.initial_interval = 20 * 1000000LL;
    e->cfg.retry_on_failure.max_interval = 100 * 1000000LL;
    e->cfg.retry_on_failure.max_elapsed_time = 10000 * 1000000LL;
    e->cfg.retry_on_failure.multiplier = 1.5;
    e->cfg.retry_on_failure.randomization_factor = 0.5;
}

static bool env_create(env *e)
{
    pl_create_settings st = {0};
    st.id = e->type->type;
    st.loop = &e->loop;
    st.stats = e->stats;
    e->cfg.endpoint = e->endpoint;
    pl_err err = {{0}};
    if (e->type->create(&st, &e->cfg, &e->exporter, &err) != PL_OK) {
        fprintf(stderr, "  create: %s\n", err.msg);
        return false;
    }
    if (e->type->start(e->exporter, &err) != PL_OK) {
        fprintf(stderr, "  start: %s\n", err.msg);
        return false;
    }
    return true;
}

static void env_finish(env *e)
{
    if (e->exporter) {
        e->type->shutdown(e->exporter);
        e->type->destroy(e->exporter);
    }
    backend_stop(&e->be);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&e->loop), 0);
    pl_stats_free(e->stats);
}

static void run_until_idle(env *e, uint64_t timeout_ms)
{
    uint64_t end = pl_time_mono_ns() / 1000000 + timeout_ms;
    while (e->type->pending(e->exporter) && pl_time_mono_ns() / 1000000 < end)
        uv_run(&e->loop, UV_RUN_ONCE);
}

static void run_for(env *e, uint64_t ms)
{
    uint64_t end = pl_time_mono_ns() / 1000000 + ms;
    while (pl_time_mono_ns() / 1000000 < end) {
        uv_run(&e->loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
}

static bool body_is(const backend *b, size_t i, const pl_batch *batch)
{
    pl_buf want;
    pl_buf_init(&want);
    pl_otlp_encode_traces(&batch->data.traces, &want);
    bool same = i < b->requests && b->bodies[i].len == want.len &&
                memcmp(b->bodies[i].data, want.data, want.len) == 0;
    pl_buf_free(&want);
    return same;
}

/* ---- otlphttp ----------------------------------------------------------- */

/* Starts the test backend (gRPC or HTTP) and points the exporter's
 * endpoint at it, after `scheme` ("http://" or none); false when it did not
 * start. */
static bool env_backend(env *e, bool grpc, const char *scheme)
{
    int port = backend_start(&e->be, &e->loop, grpc, 0);
    if (port <= 0)
        return false;
    snprintf(e->endpoint, sizeof(e->endpoint), "%s127.0.0.1:%d", scheme, port);
    return true;
}

/* Exports a batch of n_spans spans (returned: the caller compares, then
 * frees it), runs until the exporter is idle (idle_ms at most), then
 * for settle_ms more. */
static pl_batch *export_and_settle(env *e, int n_spans, int idle_ms, int settle_ms)
{
    pl_batch *b = make_traces(n_spans);
    CHECK_EQ_INT(e->type->export(e->exporter, b), PL_OK);
    run_until_idle(e, idle_ms);
    run_for(e, settle_ms);
    return b;
}

static void test_otlphttp_delivers_the_exact_payload_gzipped_with_headers(void)
{
    env e;
    env_init(&e, &pl_exporter_otlphttp);
    int port = backend_start(&e.be, &e.loop, false, 0);
    REQUIRE(port > 0);
    snprintf(e.endpoint, sizeof(e.endpoint), "http://127.0.0.1:%d/", port);
    char *k[] = {"Authorization"}, *v[] = {"Bearer s3cret"};
    e.cfg.headers.keys = k;
    e.cfg.headers.values = v;
    e.cfg.headers.n = 1;
    REQUIRE(env_create(&e));
    pl_batch *b = make_traces(5);
    CHECK_EQ_INT(e.type->export(e.exporter, b), PL_OK);
    run_until_idle(&e, 3000);
    CHECK_EQ_UINT(e.be.requests, 1);
    CHECK_EQ_STR(e.be.path[0], "/v1/traces");
    CHECK(body_is(&e.be, 0, b));
    CHECK_EQ_STR(e.be.auth, "Bearer s3cret");
    CHECK_EQ_STR(e.be.content_encoding, "gzip");
    CHECK_EQ_STR(e.be.content_type, "application/x-protobuf");
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 5);
    pl_batch_free(b);
    env_finish(&e);
}

static void test_otlphttp_503_with_retry_after_then_200_arrives_once(void)
{
    env e;
    env_init(&e, &pl_exporter_otlphttp);
    e.be.script[0] = (answer){503, 0, "1", -1, 0};
    e.be.script[1] = (answer){502, 0, NULL, -1, 0};
    e.be.script[2] = (answer){200, 0, NULL, -1, 0};
    e.be.n_script = 3;
    REQUIRE(env_backend(&e, false, "http://"));
    e.cfg.compression = "none";
    REQUIRE(env_create(&e));
    pl_batch *b = export_and_settle(&e, 3, 5000, 100);
    CHECK_EQ_UINT(e.be.requests, 3);
    CHECK(body_is(&e.be, 2, b));
    CHECK(e.be.request_ms[1] - e.be.request_ms[0] >= 990); /* Retry-After: 1 */
    CHECK_EQ_STR(e.be.content_encoding, "");
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 3);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 0);
    pl_batch_free(b);
    env_finish(&e);
}

static void test_otlphttp_400_is_not_retried(void)
{
    env e;
    env_init(&e, &pl_exporter_otlphttp);
    e.be.script[0] = (answer){400, 0, NULL, -1, 0};
    e.be.n_script = 1;
    REQUIRE(env_backend(&e, false, "http://"));
    REQUIRE(env_create(&e));
    pl_batch *b = export_and_settle(&e, 4, 3000, 150);
    CHECK_EQ_UINT(e.be.requests, 1);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 4);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 0);
    pl_batch_free(b);
    env_finish(&e);
}

static void test_otlphttp_partial_success_is_counted_not_retried(void)
{
    env e;
    env_init(&e, &pl_exporter_otlphttp);
    e.be.script[0] = (answer){200, 0, NULL, -1, 2};
    e.be.n_script = 1;
    REQUIRE(env_backend(&e, false, "http://"));
    REQUIRE(env_create(&e));
    pl_batch *b = export_and_settle(&e, 6, 3000, 100);
    CHECK_EQ_UINT(e.be.requests, 1);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 4);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 2);
    pl_batch_free(b);
    env_finish(&e);
}

static void test_otlphttp_backend_down_then_up_everything_arrives(void)
{
    env e;
    env_init(&e, &pl_exporter_otlphttp);
    int port = free_port();
    snprintf(e.endpoint, sizeof(e.endpoint), "http://127.0.0.1:%d", port);
    e.cfg.compression = "zstd";
    REQUIRE(env_create(&e));
    pl_batch *b1 = make_traces(2), *b2 = make_traces(7);
    CHECK_EQ_INT(e.type->export(e.exporter, b1), PL_OK);
    CHECK_EQ_INT(e.type->export(e.exporter, b2), PL_OK);
    run_for(&e, 200); /* connection refused, retried with backoff */
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 0);
    REQUIRE(backend_start(&e.be, &e.loop, false, port) == port);
    run_until_idle(&e, 5000);
    CHECK_EQ_UINT(e.be.requests, 2);
    CHECK_EQ_STR(e.be.content_encoding, "zstd");
    CHECK(body_is(&e.be, 0, b1) || body_is(&e.be, 1, b1));
    CHECK(body_is(&e.be, 0, b2) || body_is(&e.be, 1, b2));
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 9);
    pl_batch_free(b1);
    pl_batch_free(b2);
    env_finish(&e);
}

static bool has_path(const backend *b, const char *path)
{
    for (size_t i = 0; i < b->requests && i < 16; i++)
        if (strcmp(b->path[i], path) == 0)
            return true;
    return false;
}

/* A pass-through request (logs, metrics) arrives byte for byte. */
static bool has_body(const backend *b, const void *bytes, size_t len)
{
    for (size_t i = 0; i < b->requests && i < 16; i++)
        if (b->bodies[i].len == len && memcmp(b->bodies[i].data, bytes, len) == 0)
            return true;
    return false;
}

static void export_every_signal(env *e)
{
    pl_batch *prof = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_batch *logs = pl_batch_new(PL_SIGNAL_LOGS);
    pl_batch *metrics = pl_batch_new(PL_SIGNAL_METRICS);
    pl_batch *traces = make_traces(1);
    logs->data.raw = PL_BYTES_LIT("\x0a\x03\x0a\x01\x00");
    metrics->data.raw = PL_BYTES_LIT("\x0a\x02\x0a\x00");
    CHECK_EQ_INT(e->type->export(e->exporter, prof), PL_OK);
    CHECK_EQ_INT(e->type->export(e->exporter, logs), PL_OK);
    CHECK_EQ_INT(e->type->export(e->exporter, metrics), PL_OK);
    CHECK_EQ_INT(e->type->export(e->exporter, traces), PL_OK);
    pl_batch_free(prof);
    pl_batch_free(logs);
    pl_batch_free(metrics);
    pl_batch_free(traces);
    run_until_idle(e, 3000);
    CHECK_EQ_UINT(e->be.requests, 4);
    CHECK(has_body(&e->be, "\x0a\x03\x0a\x01\x00", 5));
    CHECK(has_body(&e->be, "\x0a\x02\x0a\x00", 4));
}

static void test_otlphttp_routes_each_signal_to_its_path(void)
{
    env e;
    env_init(&e, &pl_exporter_otlphttp);
    int port = backend_start(&e.be, &e.loop, false, 0);
    REQUIRE(port > 0);
    snprintf(e.endpoint, sizeof(e.endpoint), "http://127.0.0.1:%d", port);
    char metrics_url[128];
    snprintf(metrics_url, sizeof(metrics_url), "http://127.0.0.1:%d/custom/metrics", port);
    e.cfg.metrics_endpoint = metrics_url;
    REQUIRE(env_create(&e));
    export_every_signal(&e);
    CHECK(has_path(&e.be, "/v1/traces"));
    CHECK(has_path(&e.be, "/v1development/profiles"));
    CHECK(has_path(&e.be, "/v1/logs"));
    CHECK(has_path(&e.be, "/custom/metrics"));
    env_finish(&e);
}

/* encoding: json: traces and profiles as OTLP/JSON (application/json,
 * gzipped as configured) that decodes back to the same spans; logs and
 * metrics still pass through as protobuf; a JSON partial success counts. */
static void test_otlphttp_json_encoding(void)
{
    env e;
    env_init(&e, &pl_exporter_otlphttp);
    e.be.script[0] = (answer){200, 0, NULL, -1, 1};
    e.be.n_script = 1;
    e.be.reply_json = true;
    REQUIRE(env_backend(&e, false, "http://"));
    e.cfg.encoding = "json";
    e.cfg.sending_queue.num_consumers = 1; /* requests in export order */
    REQUIRE(env_create(&e));
    pl_batch *b = export_and_settle(&e, 4, 3000, 50);
    REQUIRE(e.be.requests == 1);
    CHECK_EQ_STR(e.be.path[0], "/v1/traces");
    CHECK_EQ_STR(e.be.content_types[0], "application/json");
    CHECK_EQ_STR(e.be.content_encoding, "gzip");
    REQUIRE(e.be.bodies[0].len > 0);
    CHECK(e.be.bodies[0].data[0] == '{');
    pl_batch *back = pl_batch_new(PL_SIGNAL_TRACES);
    pl_err err = {{0}};
    CHECK_EQ_INT(pl_otlp_json_decode_traces(back, e.be.bodies[0].data, e.be.bodies[0].len, &err),
                 PL_OK);
    /* same spans: both batches encode to the same protobuf bytes */
    pl_buf want, got;
    pl_buf_init(&want);
    pl_buf_init(&got);
    pl_otlp_encode_traces(&b->data.traces, &want);
    pl_otlp_encode_traces(&back->data.traces, &got);
    CHECK_EQ_UINT(got.len, want.len);
    CHECK(got.len == want.len && memcmp(got.data, want.data, want.len) == 0);
    CHECK_EQ_UINT(pl_batch_items(back), 4);
    pl_buf_free(&want);
    pl_buf_free(&got);
    pl_batch_free(back);
    /* the JSON partial success rejected one span: counted, not retried */
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 3);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 1);

    pl_batch *logs = pl_batch_new(PL_SIGNAL_LOGS);
    logs->data.raw = PL_BYTES_LIT("\x0a\x03\x0a\x01\x00");
    pl_batch *prof = pl_batch_new(PL_SIGNAL_PROFILES);
    CHECK_EQ_INT(e.type->export(e.exporter, logs), PL_OK);
    CHECK_EQ_INT(e.type->export(e.exporter, prof), PL_OK);
    run_until_idle(&e, 3000);
    REQUIRE(e.be.requests == 3);
    CHECK_EQ_STR(e.be.path[1], "/v1/logs");
    CHECK_EQ_STR(e.be.content_types[1], "application/x-protobuf");
    CHECK(has_body(&e.be, "\x0a\x03\x0a\x01\x00", 5));
    CHECK_EQ_STR(e.be.path[2], "/v1development/profiles");
    CHECK_EQ_STR(e.be.content_types[2], "application/json");
    pl_batch *pback = pl_batch_new(PL_SIGNAL_PROFILES);
    CHECK_EQ_INT(pl_otlp_json_decode_profiles(pback, e.be.bodies[2].data, e.be.bodies[2].len, &err),
                 PL_OK);
    pl_batch_free(pback);
    pl_batch_free(logs);
    pl_batch_free(prof);
    pl_batch_free(b);
    env_finish(&e);
}

/* Answers to JSON requests are JSON: partialSuccess and the message of a
 * JSON google.rpc.Status are read from them. */
static void test_otlphttp_reads_json_answers(void)
{
    pl_otlp_exporter x;
    memset(&x, 0, sizeof(x));
    x.urls[PL_SIGNAL_TRACES] = (char *)"http://backend/v1/traces";
    pl_http_header h[] = {{"Content-Type", 12, "application/json; charset=utf-8", 31}};
    const char *err_body = "{\"code\":3,\"message\":\"span 2 has no name\",\"details\":[]}";
    pl_http_client_result res;
    memset(&res, 0, sizeof(res));
    res.status = 400;
    res.headers = h;
    res.n_headers = 1;
    res.body = (const uint8_t *)err_body;
    res.body_len = strlen(err_body);
    pl_send_result r;
    pl_otlphttp_classify(&x, PL_SIGNAL_TRACES, &res, &r);
    CHECK_EQ_INT(r.outcome, PL_SEND_PERMANENT);
    CHECK(strstr(r.message, ": span 2 has no name") != NULL);
    CHECK(strstr(r.message, "{") == NULL);

    const char *ok_body = "{\"partialSuccess\":{\"rejectedSpans\":7,\"errorMessage\":\"too old\"}}";
    res.status = 200;
    res.body = (const uint8_t *)ok_body;
    res.body_len = strlen(ok_body);
    pl_otlphttp_classify(&x, PL_SIGNAL_TRACES, &res, &r);
    CHECK_EQ_INT(r.outcome, PL_SEND_OK);
    CHECK_EQ_UINT(r.rejected_items, 7);
    CHECK_EQ_STR(r.message, "too old");

    res.body = (const uint8_t *)"{not json";
    res.body_len = 9;
    pl_otlphttp_classify(&x, PL_SIGNAL_TRACES, &res, &r);
    CHECK_EQ_INT(r.outcome, PL_SEND_OK);
    CHECK_EQ_UINT(r.rejected_items, 0);
}

/* ---- otlp (gRPC) -------------------------------------------------------- */

static void test_grpc_routes_each_signal_to_its_service(void)
{
    env e;
    env_init(&e, &pl_exporter_otlp);
    REQUIRE(env_backend(&e, true, "http://"));
    REQUIRE(env_create(&e));
    export_every_signal(&e);
    CHECK(has_path(&e.be, "/opentelemetry.proto.collector.trace.v1.TraceService/Export"));
    CHECK(has_path(&e.be,
                   "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"));
    CHECK(has_path(&e.be, "/opentelemetry.proto.collector.logs.v1.LogsService/Export"));
    CHECK(has_path(&e.be, "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"));
    env_finish(&e);
}

static void test_grpc_unavailable_then_ok_arrives_once(void)
{
    env e;
    env_init(&e, &pl_exporter_otlp);
    e.be.script[0] = (answer){0, 14, NULL, -1, 0};
    e.be.script[1] = (answer){0, 0, NULL, -1, 0};
    e.be.n_script = 2;
    REQUIRE(env_backend(&e, true, ""));
    e.cfg.tls.insecure = true;
    REQUIRE(env_create(&e));
    pl_batch *b = export_and_settle(&e, 8, 3000, 100);
    CHECK_EQ_UINT(e.be.requests, 2);
    CHECK_EQ_STR(e.be.path[0], "/opentelemetry.proto.collector.trace.v1.TraceService/Export");
    CHECK_EQ_STR(e.be.content_type, "application/grpc");
    CHECK_EQ_STR(e.be.content_encoding, "gzip");
    CHECK(body_is(&e.be, 1, b));
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 8);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 0);
    pl_batch_free(b);
    env_finish(&e);
}

static void test_grpc_resource_exhausted_without_retry_info_is_permanent(void)
{
    env e;
    env_init(&e, &pl_exporter_otlp);
    e.be.script[0] = (answer){0, 8, NULL, -1, 0};
    e.be.n_script = 1;
    REQUIRE(env_backend(&e, true, "http://"));
    REQUIRE(env_create(&e));
    pl_batch *b = export_and_settle(&e, 3, 3000, 150);
    CHECK_EQ_UINT(e.be.requests, 1);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 3);
    pl_batch_free(b);
    env_finish(&e);
}

static void test_grpc_resource_exhausted_with_retry_info_waits_and_retries(void)
{
    env e;
    env_init(&e, &pl_exporter_otlp);
    e.be.script[0] = (answer){0, 8, NULL, 400 * 1000000LL, 0};
    e.be.script[1] = (answer){0, 0, NULL, -1, 1};
    e.be.n_script = 2;
    REQUIRE(env_backend(&e, true, ""));
    e.cfg.tls.insecure = true;
    e.cfg.compression = "none";
    REQUIRE(env_create(&e));
    pl_batch *b = make_traces(3);
    CHECK_EQ_INT(e.type->export(e.exporter, b), PL_OK);
    run_until_idle(&e, 3000);
    CHECK_EQ_UINT(e.be.requests, 2);
    CHECK(e.be.request_ms[1] - e.be.request_ms[0] >= 395);
    CHECK(body_is(&e.be, 1, b));
    /* the OK answer carried a partial success rejecting one span */
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 2);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 1);
    pl_batch_free(b);
    env_finish(&e);
}

/* compression: zstd against a server without zstd: UNIMPLEMENTED with
 * grpc-accept-encoding: gzip,identity. The payload is re-sent with gzip at
 * once (not dropped), later ones go out as gzip directly, and the
 * downgrade is counted. A server that takes neither gets identity. */
static void test_grpc_zstd_refused_falls_back_to_gzip(void)
{
    env e;
    env_init(&e, &pl_exporter_otlp);
    e.be.grpc_accept = "gzip,identity";
    int port = backend_start(&e.be, &e.loop, true, 0);
    REQUIRE(port > 0);
    snprintf(e.endpoint, sizeof(e.endpoint), "http://127.0.0.1:%d", port);
    e.cfg.compression = "zstd";
    e.cfg.sending_queue.num_consumers = 1;
    REQUIRE(env_create(&e));
    pl_batch *b = make_traces(5);
    CHECK_EQ_INT(e.type->export(e.exporter, b), PL_OK);
    run_until_idle(&e, 3000);
    CHECK_EQ_UINT(e.be.requests, 2);
    CHECK_EQ_STR(e.be.grpc_encodings[0], "zstd");
    CHECK_EQ_STR(e.be.grpc_encodings[1], "gzip");
    CHECK(body_is(&e.be, 1, b));
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 5);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 0);
    CHECK_EQ_UINT(*pl_stats_counter(e.stats, "compression_downgrades", ""), 1);
    /* the next batch goes out as gzip without another refusal */
    pl_batch *b2 = make_traces(2);
    CHECK_EQ_INT(e.type->export(e.exporter, b2), PL_OK);
    run_until_idle(&e, 3000);
    CHECK_EQ_UINT(e.be.requests, 3);
    CHECK_EQ_STR(e.be.grpc_encodings[2], "gzip");
    CHECK(body_is(&e.be, 2, b2));
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 7);
    CHECK_EQ_UINT(*pl_stats_counter(e.stats, "compression_downgrades", ""), 1);
    pl_batch_free(b);
    pl_batch_free(b2);
    env_finish(&e);

    env_init(&e, &pl_exporter_otlp);
    e.be.grpc_accept = "identity";
    port = backend_start(&e.be, &e.loop, true, 0);
    REQUIRE(port > 0);
    snprintf(e.endpoint, sizeof(e.endpoint), "http://127.0.0.1:%d", port);
    e.cfg.compression = "zstd";
    REQUIRE(env_create(&e));
    b = make_traces(3);
    CHECK_EQ_INT(e.type->export(e.exporter, b), PL_OK);
    run_until_idle(&e, 3000);
    CHECK_EQ_UINT(e.be.requests, 2);
    CHECK_EQ_STR(e.be.grpc_encodings[1], "identity");
    CHECK(body_is(&e.be, 1, b));
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 3);
    pl_batch_free(b);
    env_finish(&e);
}

/* UNIMPLEMENTED that does not say the coding is the problem (no
 * grpc-accept-encoding, a message not naming it) is about the method:
 * permanent, no re-send. */
static void test_grpc_unimplemented_method_is_permanent(void)
{
    env e;
    env_init(&e, &pl_exporter_otlp);
    e.be.script[0] = (answer){0, 12, NULL, -1, 0};
    e.be.n_script = 1;
    REQUIRE(env_backend(&e, true, "http://"));
    e.cfg.compression = "zstd";
    REQUIRE(env_create(&e));
    pl_batch *b = export_and_settle(&e, 3, 3000, 100);
    CHECK_EQ_UINT(e.be.requests, 1);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 3);
    CHECK_EQ_UINT(*pl_stats_counter(e.stats, "compression_downgrades", ""), 0);
    pl_batch_free(b);
    env_finish(&e);
}

static void test_grpc_helpers(void)
{
    CHECK(pl_grpc_code_retryable(14, false));
    CHECK(pl_grpc_code_retryable(1, false));
    CHECK(!pl_grpc_code_retryable(3, false));
    CHECK(!pl_grpc_code_retryable(8, false));
    CHECK(pl_grpc_code_retryable(8, true));
    CHECK(!pl_grpc_code_retryable(13, true));
    CHECK_EQ_INT(pl_grpc_code_from_http(503), 14);
    CHECK_EQ_INT(pl_grpc_code_from_http(400), 13);
    CHECK_EQ_INT(pl_grpc_code_from_http(200), 2);
    size_t n = 0;
    uint8_t *d = pl_otlp_base64_decode("aGVsbG8", 7, &n);
    REQUIRE(d);
    CHECK_EQ_BYTES(d, n, "hello", 5);
    free(d);
    d = pl_otlp_base64_decode("aGVsbG8=", 8, &n);
    REQUIRE(d);
    CHECK_EQ_BYTES(d, n, "hello", 5);
    free(d);
    CHECK(pl_otlp_base64_decode("a$==", 4, &n) == NULL);
    char out[64];
    pl_grpc_message_decode("try%20later%2", 13, out, sizeof(out));
    CHECK_EQ_STR(out, "try later%2");
    int64_t ra = pl_http_parse_retry_after(" 7 ", 3, 0);
    CHECK_EQ_INT(ra, 7000000000LL);
    CHECK_EQ_INT(pl_http_parse_retry_after("soon", 4, 0), -1);
    /* an HTTP-date 10 s after "now" */
    CHECK_EQ_INT(pl_http_parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", 29,
                                           784111777ULL * 1000000000ULL),
                 10000000000LL);
}

int main(void)
{
    PL_RUN(test_grpc_helpers);
    PL_RUN(test_otlphttp_delivers_the_exact_payload_gzipped_with_headers);
    PL_RUN(test_otlphttp_503_with_retry_after_then_200_arrives_once);
    PL_RUN(test_otlphttp_400_is_not_retried);
    PL_RUN(test_otlphttp_partial_success_is_counted_not_retried);
    PL_RUN(test_otlphttp_backend_down_then_up_everything_arrives);
    PL_RUN(test_otlphttp_routes_each_signal_to_its_path);
    PL_RUN(test_otlphttp_json_encoding);
    PL_RUN(test_otlphttp_reads_json_answers);
    PL_RUN(test_grpc_routes_each_signal_to_its_service);
    PL_RUN(test_grpc_unavailable_then_ok_arrives_once);
    PL_RUN(test_grpc_resource_exhausted_without_retry_info_is_permanent);
    PL_RUN(test_grpc_resource_exhausted_with_retry_info_waits_and_retries);
    PL_RUN(test_grpc_zstd_refused_falls_back_to_gzip);
    PL_RUN(test_grpc_unimplemented_method_is_permanent);
    return pl_test_done();
}
