/*
 * loadgen.c: an OTLP traces load generator, for benchmarks of any proflink
 * receiver path (and of any other OTLP server).
 *
 *   loadgen [--protocol http|grpc] [--endpoint HOST:PORT] [--path /v1/traces]
 *           [--spans N] [--attrs M] [--rate SPANS_PER_S] [--duration SECONDS]
 *           [--connections C] [--streams S] [--gzip] [--variants K] [--quiet]
 *           [--tls] [--ca FILE] [--handshakes] [--fresh-ids]
 *
 * --tls speaks TLS (ALPN h2 for gRPC, http/1.1 otherwise; the server's
 * certificate is checked only with --ca). --handshakes measures connection
 * set-up instead: for the duration it connects, completes a full TLS
 * handshake (no resumption), sends nothing and closes, and prints
 * handshakes/s.
 *
 * It sends ExportTraceServiceRequests of N spans with M string attributes
 * each (about 30 bytes per attribute), over OTLP/HTTP protobuf (HTTP/1.1
 * keep-alive, one request at a time per connection) or OTLP/gRPC (HTTP/2
 * prior knowledge, up to S concurrent calls per connection), at a target
 * rate of spans per second (0 = as fast as the server answers), for a
 * duration. Requests are prebuilt (K variants with distinct trace and span
 * ids) so that the generator itself costs little CPU. It prints a line per
 * second (unless --quiet) and a summary:
 *
 *   requests=... spans=... errors=... seconds=... requests/s=... spans/s=...
 *   latency_ms p50=... p99=... max=...
 *
 * Design: one thread, non-blocking sockets and poll(2); HTTP/1.1 answers
 * are framed by Content-Length; gRPC uses an nghttp2 client session per
 * connection. The rate is held by a schedule (request i is due at
 * start + i / rate), so a slow answer does not lower the average rate
 * unless all connections are busy (then the summary shows the shortfall).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/model.h"
#include "net/compress.h"
#include "otlp_json.h"
#include "otlp_pb.h"
#include "../traces_fixture.h"
#include "../xorshift.h"

typedef struct options {
    bool grpc;
    char host[128];
    int port;
    const char *path;
    int spans, attrs;
    double rate; /* spans per second; 0 = max */
    double duration;
    int connections, streams;
    bool gzip, quiet, json;
    int variants;
    bool tls, handshakes, fresh_ids;
    const char *ca;
} options;

typedef struct request {
    uint8_t *data; /* HTTP: header + body; gRPC: framed message */
    size_t len;
    /* --fresh-ids: where the ids are in data (trace ids: their first 8
     * bytes; span ids and parent span ids: all 8) */
    size_t *trace_off, *span_off;
    size_t n_trace_off, n_span_off;
} request;

typedef struct conn {
    int fd;
    SSL *ssl; /* --tls */
    /* HTTP/1.1 */
    bool busy;
    size_t sent;
    const request *req;
    pl_buf in;
    double started;
    /* gRPC */
    nghttp2_session *h2;
    pl_buf out;
    size_t out_off;
    int in_flight;
} conn;

typedef struct stats {
    uint64_t requests, spans, errors;
    double *latencies;
    size_t n_lat, cap_lat;
} stats;

static options opt;
static stats st;
static request *reqs;
static uint64_t next_index; /* requests started */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void record(double started, bool ok)
{
    st.requests++;
    if (ok)
        st.spans += (uint64_t)opt.spans;
    else
        st.errors++;
    if (st.n_lat == st.cap_lat) {
        st.cap_lat = st.cap_lat ? st.cap_lat * 2 : 4096;
        st.latencies = realloc(st.latencies, st.cap_lat * sizeof(double));
    }
    st.latencies[st.n_lat++] = (now_s() - started) * 1000;
}

/* ---- request building -------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
    return xorshift64(&rng_state);
}

static void build_body(pl_buf *out)
{
    pl_span *spans;
    pl_batch *b = tf_traces("loadgen", "loadgen", (uint32_t)opt.spans, &spans);
    pl_resource_spans *rs = &b->data.traces.resources[0];
    pl_attrs_put(&b->arena, &rs->resource.attrs, PL_BYTES_LIT("host.name"),
                 pl_value_string(PL_BYTES_LIT("bench-host-01")));
    rs->scopes[0].scope.version = PL_BYTES_LIT("1.0.0");
    uint64_t t0 = 1700000000000000000ull;
    if (opt.fresh_ids) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        t0 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    }
    uint64_t trace_hi = rng(), trace_lo = rng();
    for (int i = 0; i < opt.spans; i++) {
        pl_span *sp = &spans[i];
        if (i % 10 == 0) {
            trace_hi = rng();
            trace_lo = rng();
        }
        memcpy(sp->trace_id, &trace_hi, 8);
        memcpy(sp->trace_id + 8, &trace_lo, 8);
        sp->trace_id_len = 16;
        uint64_t sid = rng() | 1;
        memcpy(sp->span_id, &sid, 8);
        sp->span_id_len = 8;
        char name[32];
        snprintf(name, sizeof(name), "GET /api/v1/item/%d", i % 20);
        sp->name = pl_batch_bytes(b, name, strlen(name));
        sp->kind = 2;
        sp->start_time_unix_nano = t0 + (uint64_t)i * 1000;
        sp->end_time_unix_nano = t0 + (uint64_t)i * 1000 + 250000;
        for (int a = 0; a < opt.attrs; a++) {
            char key[32], value[48];
            snprintf(key, sizeof(key), "attr.key.%02d", a);
            snprintf(value, sizeof(value), "value-%02d-%08llx", a,
                     (unsigned long long)(rng() & 0xffffffff));
            pl_attrs_put(&b->arena, &sp->attrs, pl_batch_bytes(b, key, strlen(key)),
                         pl_value_string(pl_batch_bytes(b, value, strlen(value))));
        }
    }
    if (opt.json)
        pl_otlp_json_encode_traces(&b->data.traces, out);
    else
        pl_otlp_encode_traces(&b->data.traces, out);
    pl_batch_free(b);
}

/* Offsets of every trace id (16 bytes after a length byte 16) and span id
 * (8 bytes after a length byte 8) of the protobuf body in r: the fields
 * trace_id (1), span_id (2) and parent_span_id (4) of Span. The ids are
 * random, so a false match elsewhere in the body is unlikely, and would
 * only change a byte of an attribute value. */
static void find_ids(request *r)
{
    r->trace_off = calloc(r->len / 8 + 1, sizeof(size_t));
    r->span_off = calloc(r->len / 8 + 1, sizeof(size_t));
    for (size_t i = 0; i + 2 + 16 <= r->len; i++) {
        if (r->data[i] == 0x0a && r->data[i + 1] == 16 && i + 2 + 16 < r->len &&
            r->data[i + 18] == 0x12 && r->data[i + 19] == 8) {
            r->trace_off[r->n_trace_off++] = i + 2;
            r->span_off[r->n_span_off++] = i + 20;
            i += 27;
        } else if (r->data[i] == 0x22 && r->data[i + 1] == 8 && r->n_trace_off) {
            r->span_off[r->n_span_off++] = i + 2; /* parent_span_id */
            i += 9;
        }
    }
}

/* Appends r to out with fresh ids (see find_ids). */
static void append_fresh(pl_buf *out, const request *r)
{
    size_t base = out->len;
    pl_buf_append(out, r->data, r->len);
    if (!pl_buf_ok(out))
        return;
    uint64_t tm = rng(), sm = rng();
    for (size_t i = 0; i < r->n_trace_off; i++) {
        uint8_t *p = out->data + base + r->trace_off[i];
        for (int b = 0; b < 8; b++)
            p[b] ^= (uint8_t)(tm >> (8 * b));
    }
    for (size_t i = 0; i < r->n_span_off; i++) {
        uint8_t *p = out->data + base + r->span_off[i];
        for (int b = 0; b < 8; b++)
            p[b] ^= (uint8_t)(sm >> (8 * b));
    }
}

static void build_requests(void)
{
    reqs = calloc((size_t)opt.variants, sizeof(*reqs));
    size_t body_total = 0;
    for (int v = 0; v < opt.variants; v++) {
        pl_buf body, z, r;
        pl_buf_init(&body);
        pl_buf_init(&z);
        pl_buf_init(&r);
        build_body(&body);
        const pl_buf *payload = &body;
        if (opt.gzip) {
            pl_err err;
            pl_compress(PL_ENCODING_GZIP, body.data, body.len, 0, &z, &err);
            payload = &z;
        }
        body_total += payload->len;
        if (opt.grpc) {
            uint8_t p[5] = {opt.gzip ? 1 : 0, (uint8_t)(payload->len >> 24),
                            (uint8_t)(payload->len >> 16), (uint8_t)(payload->len >> 8),
                            (uint8_t)payload->len};
            pl_buf_append(&r, p, 5);
        } else {
            pl_buf_printf(&r,
                          "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: "
                          "application/%s\r\n%sContent-Length: %zu\r\n\r\n",
                          opt.path, opt.host, opt.port, opt.json ? "json" : "x-protobuf",
                          opt.gzip ? "Content-Encoding: gzip\r\n" : "", payload->len);
        }
        pl_buf_append(&r, payload->data, payload->len);
        reqs[v].data = pl_buf_steal(&r, &reqs[v].len);
        if (opt.fresh_ids)
            find_ids(&reqs[v]);
        pl_buf_free(&body);
        pl_buf_free(&z);
    }
    if (!opt.quiet)
        fprintf(stderr, "loadgen: %d spans x %d attrs per request, body %zu bytes%s\n", opt.spans,
                opt.attrs, body_total / (size_t)opt.variants, opt.gzip ? " (gzip)" : "");
}

/* ---- connections ------------------------------------------------------- */

static SSL_CTX *tls_ctx;

static void tls_init(void)
{
    tls_ctx = SSL_CTX_new(TLS_client_method());
    static const unsigned char h2[] = "\x02h2", h1[] = "\x08http/1.1";
    if (opt.grpc)
        SSL_CTX_set_alpn_protos(tls_ctx, h2, sizeof(h2) - 1);
    else
        SSL_CTX_set_alpn_protos(tls_ctx, h1, sizeof(h1) - 1);
    if (opt.ca) {
        if (SSL_CTX_load_verify_locations(tls_ctx, opt.ca, NULL) != 1) {
            fprintf(stderr, "loadgen: --ca %s: cannot load\n", opt.ca);
            exit(2);
        }
        SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_PEER, NULL);
    }
}

/* A full handshake on a blocking socket; exits on failure. */
static SSL *tls_handshake(int fd)
{
    SSL *ssl = SSL_new(tls_ctx);
    SSL_set_fd(ssl, fd);
    SSL_set_tlsext_host_name(ssl, "localhost");
    if (SSL_connect(ssl) != 1) {
        char e[160];
        ERR_error_string_n(ERR_get_error(), e, sizeof(e));
        fprintf(stderr, "loadgen: TLS handshake: %s\n", e);
        exit(2);
    }
    SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return ssl;
}

/* send()/recv() through TLS when it is on: -1 with errno EAGAIN when the
 * socket (or TLS) needs to wait. */
static ssize_t io_send(conn *c, const uint8_t *d, size_t len)
{
    if (!c->ssl)
        return send(c->fd, d, len, MSG_NOSIGNAL);
    int n = SSL_write(c->ssl, d, (int)(len > (1u << 30) ? (1u << 30) : len));
    if (n > 0)
        return n;
    int e = SSL_get_error(c->ssl, n);
    errno = (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) ? EAGAIN : EPIPE;
    return -1;
}

static ssize_t io_recv(conn *c, uint8_t *buf, size_t len)
{
    if (!c->ssl)
        return recv(c->fd, buf, len, 0);
    int n = SSL_read(c->ssl, buf, (int)len);
    if (n > 0)
        return n;
    int e = SSL_get_error(c->ssl, n);
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    errno = (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) ? EAGAIN : ECONNRESET;
    return -1;
}

static int connect_to(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
    if (inet_pton(AF_INET, opt.host, &a.sin_addr) != 1) {
        fprintf(stderr, "loadgen: %s: not an IPv4 address\n", opt.host);
        exit(2);
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        fprintf(stderr, "loadgen: connect %s:%d: %s\n", opt.host, opt.port, strerror(errno));
        exit(2);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static void open_conn(conn *c)
{
    c->fd = connect_to();
    if (opt.tls)
        c->ssl = tls_handshake(c->fd);
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
}

/* --handshakes: connect, handshake, close, for the duration. */
static int run_handshakes(void)
{
    double start = now_s(), end = start + opt.duration;
    uint64_t n = 0;
    while (now_s() < end) {
        int fd = connect_to();
        SSL *ssl = tls_handshake(fd);
        SSL_free(ssl);
        close(fd);
        n++;
    }
    double elapsed = now_s() - start;
    printf("handshakes=%llu seconds=%.2f handshakes/s=%.1f\n", (unsigned long long)n, elapsed,
           (double)n / elapsed);
    return 0;
}

/* ---- gRPC over nghttp2 ------------------------------------------------- */

typedef struct call {
    double started;
    int grpc_status;
    const request *req;
    size_t off;
} call;

static ssize_t g_send(nghttp2_session *s, const uint8_t *d, size_t l, int f, void *u)
{
    conn *c = u;
    pl_buf_append(&c->out, d, l);
    return (ssize_t)l;
}

static int g_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *n, size_t nl,
                    const uint8_t *v, size_t vl, uint8_t fl, void *u)
{
    call *cl = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (cl && nl == 11 && memcmp(n, "grpc-status", 11) == 0)
        cl->grpc_status = atoi((const char *)v);
    return 0;
}

static int g_close(nghttp2_session *s, int32_t id, uint32_t e, void *u)
{
    conn *c = u;
    call *cl = nghttp2_session_get_stream_user_data(s, id);
    if (!cl)
        return 0;
    record(cl->started, cl->grpc_status == 0);
    c->in_flight--;
    free(cl);
    return 0;
}

static ssize_t g_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                      nghttp2_data_source *src, void *u)
{
    call *cl = src->ptr;
    size_t n = cl->req->len - cl->off < length ? cl->req->len - cl->off : length;
    memcpy(buf, cl->req->data + cl->off, n);
    cl->off += n;
    if (cl->off == cl->req->len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static void grpc_start(conn *c)
{
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, g_send);
    nghttp2_session_callbacks_set_on_header_callback(cb, g_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, g_close);
    nghttp2_session_client_new(&c->h2, cb, c);
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry s[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20}};
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, s, 1);
}

static void grpc_submit(conn *c, const request *r)
{
    static char authority[160];
    snprintf(authority, sizeof(authority), "%s:%d", opt.host, opt.port);
    nghttp2_nv nv[] = {
        {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
        {(uint8_t *)":scheme", (uint8_t *)(opt.tls ? "https" : "http"), 7, opt.tls ? 5u : 4u, 0},
        {(uint8_t *)":authority", (uint8_t *)authority, 10, strlen(authority), 0},
        {(uint8_t *)":path", (uint8_t *)opt.path, 5, strlen(opt.path), 0},
        {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0},
        {(uint8_t *)"te", (uint8_t *)"trailers", 2, 8, 0},
        {(uint8_t *)"grpc-encoding", (uint8_t *)"gzip", 13, 4, 0},
    };
    call *cl = calloc(1, sizeof(*cl));
    cl->started = now_s();
    cl->grpc_status = -1;
    cl->req = r;
    nghttp2_data_provider dp = {.source.ptr = cl, .read_callback = g_read};
    int32_t id = nghttp2_submit_request(c->h2, NULL, nv, opt.gzip ? 7 : 6, &dp, cl);
    if (id < 0) {
        free(cl);
        record(now_s(), false);
        return;
    }
    c->in_flight++;
}

/* ---- the loop ---------------------------------------------------------- */

static bool flush_out(conn *c)
{
    while (c->out_off < c->out.len) {
        ssize_t n = io_send(c, c->out.data + c->out_off, c->out.len - c->out_off);
        if (n < 0) {
            if (errno == EAGAIN)
                return true;
            return false;
        }
        c->out_off += (size_t)n;
    }
    pl_buf_reset(&c->out);
    c->out_off = 0;
    return true;
}

static bool http_step_read(conn *c)
{
    uint8_t buf[16384];
    for (;;) {
        ssize_t n = io_recv(c, buf, sizeof(buf));
        if (n == 0)
            return false;
        if (n < 0)
            return errno == EAGAIN;
        pl_buf_append(&c->in, buf, (size_t)n);
        for (;;) {
            if (c->in.len < 12)
                break;
            uint8_t *end = memmem(c->in.data, c->in.len, "\r\n\r\n", 4);
            if (!end)
                break;
            size_t head = (size_t)(end - c->in.data) + 4;
            const char *cl = memmem(c->in.data, head, "Content-Length: ", 16);
            size_t body = cl ? strtoul(cl + 16, NULL, 10) : 0;
            if (c->in.len < head + body)
                break;
            int status = atoi((const char *)c->in.data + 9);
            record(c->started, status == 200);
            memmove(c->in.data, c->in.data + head + body, c->in.len - head - body);
            c->in.len -= head + body;
            c->busy = false;
        }
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: loadgen [--protocol http|grpc|json] [--endpoint HOST:PORT] [--path P]\n"
                    "               [--spans N] [--attrs M] [--rate SPANS_PER_S (0=max)]\n"
                    "               [--duration S] [--connections C] [--streams S] [--gzip]\n"
                    "               [--variants K] [--json] [--quiet] [--tls] [--ca FILE]\n"
                    "               [--handshakes] [--fresh-ids]\n");
    exit(2);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    opt = (options){.port = 0,
                    .spans = 100,
                    .attrs = 10,
                    .rate = 0,
                    .duration = 10,
                    .connections = 1,
                    .streams = 8,
                    .variants = 16};
    const char *endpoint = NULL;
    const char *protocol = "http";
    static struct option longopts[] = {
        {"protocol", required_argument, 0, 'P'},
        {"endpoint", required_argument, 0, 'e'},
        {"path", required_argument, 0, 'p'},
        {"spans", required_argument, 0, 'n'},
        {"attrs", required_argument, 0, 'a'},
        {"rate", required_argument, 0, 'r'},
        {"duration", required_argument, 0, 'd'},
        {"connections", required_argument, 0, 'c'},
        {"streams", required_argument, 0, 's'},
        {"gzip", no_argument, 0, 'z'},
        {"variants", required_argument, 0, 'v'},
        {"quiet", no_argument, 0, 'q'},
        {"json", no_argument, 0, 'j'},
        {"fresh-ids", no_argument, 0, 'F'},
        {"tls", no_argument, 0, 'T'},
        {"ca", required_argument, 0, 'C'},
        {"handshakes", no_argument, 0, 'H'},
        {0, 0, 0, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'P':
            protocol = optarg;
            break;
        case 'e':
            endpoint = optarg;
            break;
        case 'p':
            opt.path = optarg;
            break;
        case 'n':
            opt.spans = atoi(optarg);
            break;
        case 'a':
            opt.attrs = atoi(optarg);
            break;
        case 'r':
            opt.rate = atof(optarg);
            break;
        case 'd':
            opt.duration = atof(optarg);
            break;
        case 'c':
            opt.connections = atoi(optarg);
            break;
        case 's':
            opt.streams = atoi(optarg);
            break;
        case 'z':
            opt.gzip = true;
            break;
        case 'v':
            opt.variants = atoi(optarg);
            break;
        case 'q':
            opt.quiet = true;
            break;
        case 'F':
            opt.fresh_ids = true;
            break;
        case 'j':
            opt.json = true;
            break;
        case 'T':
            opt.tls = true;
            break;
        case 'C':
            opt.ca = optarg;
            break;
        case 'H':
            opt.handshakes = opt.tls = true;
            break;
        default:
            usage();
        }
    }
    if (strcmp(protocol, "grpc") == 0)
        opt.grpc = true;
    else if (strcmp(protocol, "json") == 0)
        opt.json = true; /* OTLP/HTTP with JSON bodies */
    else if (strcmp(protocol, "http") != 0)
        usage();
    if (!endpoint)
        endpoint = opt.grpc ? "127.0.0.1:4317" : "127.0.0.1:4318";
    const char *colon = strrchr(endpoint, ':');
    if (!colon || colon - endpoint >= (long)sizeof(opt.host))
        usage();
    memcpy(opt.host, endpoint, (size_t)(colon - endpoint));
    opt.port = atoi(colon + 1);
    if (!opt.path)
        opt.path =
            opt.grpc ? "/opentelemetry.proto.collector.trace.v1.TraceService/Export" : "/v1/traces";
    if (opt.spans < 1 || opt.attrs < 0 || opt.connections < 1 || opt.streams < 1 ||
        opt.variants < 1 || opt.duration <= 0)
        usage();
    if (opt.fresh_ids && (opt.grpc || opt.json || opt.gzip)) {
        fprintf(stderr, "loadgen: --fresh-ids is for OTLP/HTTP protobuf without gzip\n");
        exit(2);
    }

    if (opt.tls)
        tls_init();
    if (opt.handshakes)
        return run_handshakes();
    build_requests();
    conn *conns = calloc((size_t)opt.connections, sizeof(*conns));
    for (int i = 0; i < opt.connections; i++) {
        open_conn(&conns[i]);
        pl_buf_init(&conns[i].in);
        pl_buf_init(&conns[i].out);
        if (opt.grpc)
            grpc_start(&conns[i]);
    }
    double req_rate = opt.rate > 0 ? opt.rate / opt.spans : 0;
    double start = now_s(), end = start + opt.duration, last_report = start;
    uint64_t last_spans = 0;
    struct pollfd *pfd = calloc((size_t)opt.connections, sizeof(*pfd));
    for (;;) {
        double t = now_s();
        bool sending = t < end;
        /* start what is due */
        for (int i = 0; i < opt.connections && sending; i++) {
            conn *c = &conns[i];
            for (;;) {
                bool due = req_rate == 0 || next_index < (uint64_t)((t - start) * req_rate) + 1;
                bool room = opt.grpc ? c->in_flight < opt.streams : !c->busy;
                if (!due || !room)
                    break;
                const request *r = &reqs[next_index % (uint64_t)opt.variants];
                next_index++;
                if (opt.grpc) {
                    grpc_submit(c, r);
                } else {
                    c->busy = true;
                    c->req = r;
                    c->started = t;
                    if (opt.fresh_ids)
                        append_fresh(&c->out, r);
                    else
                        pl_buf_append(&c->out, r->data, r->len);
                }
            }
        }
        int busy_total = 0;
        for (int i = 0; i < opt.connections; i++) {
            conn *c = &conns[i];
            if (opt.grpc)
                nghttp2_session_send(c->h2);
            if (!flush_out(c)) {
                fprintf(stderr, "loadgen: connection lost\n");
                exit(1);
            }
            busy_total += opt.grpc ? c->in_flight : c->busy;
            pfd[i].fd = c->fd;
            pfd[i].events = POLLIN | (c->out.len > c->out_off ? POLLOUT : 0);
            pfd[i].revents = 0;
        }
        if (!sending && busy_total == 0)
            break;
        if (!sending && t > end + 10) {
            fprintf(stderr, "loadgen: %d requests unanswered after 10 s\n", busy_total);
            break;
        }
        int timeout = 100;
        if (sending && req_rate > 0) {
            double due_at = start + (double)next_index / req_rate;
            double ms = (due_at - t) * 1000;
            timeout = ms < 0 ? 0 : ms > 100 ? 100 : (int)ms;
        }
        poll(pfd, (nfds_t)opt.connections, timeout);
        for (int i = 0; i < opt.connections; i++) {
            conn *c = &conns[i];
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (opt.grpc) {
                uint8_t buf[65536];
                for (;;) {
                    ssize_t n = io_recv(c, buf, sizeof(buf));
                    if (n > 0) {
                        nghttp2_session_mem_recv(c->h2, buf, (size_t)n);
                        continue;
                    }
                    if (n == 0 || errno != EAGAIN) {
                        fprintf(stderr, "loadgen: server closed the connection\n");
                        exit(1);
                    }
                    break;
                }
            } else if (!http_step_read(c)) {
                fprintf(stderr, "loadgen: server closed the connection\n");
                exit(1);
            }
        }
        if (!opt.quiet && now_s() - last_report >= 1) {
            double now = now_s();
            fprintf(stderr, "loadgen: %.0f spans/s\n",
                    (double)(st.spans - last_spans) / (now - last_report));
            last_spans = st.spans;
            last_report = now;
        }
    }
    double elapsed = now_s() - start;
    qsort(st.latencies, st.n_lat, sizeof(double), cmp_double);
    double p50 = st.n_lat ? st.latencies[st.n_lat / 2] : 0;
    double p99 = st.n_lat ? st.latencies[(size_t)((double)st.n_lat * 0.99)] : 0;
    double mx = st.n_lat ? st.latencies[st.n_lat - 1] : 0;
    printf("protocol=%s spans_per_request=%d attrs=%d requests=%llu spans=%llu errors=%llu "
           "seconds=%.2f requests/s=%.1f spans/s=%.0f\n",
           opt.grpc ? "grpc" : "http", opt.spans, opt.attrs, (unsigned long long)st.requests,
           (unsigned long long)st.spans, (unsigned long long)st.errors, elapsed,
           (double)st.requests / elapsed, (double)st.spans / elapsed);
    printf("latency_ms p50=%.3f p99=%.3f max=%.3f\n", p50, p99, mx);
    return st.errors ? 1 : 0;
}
